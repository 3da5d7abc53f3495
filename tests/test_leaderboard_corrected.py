"""Consistency and time to completion from corrected labels: their intervals cover the truth on synthetic draws."""

import numpy as np
import pytest

from serving.leaderboard import corrected_consistency, corrected_time_to_success, error_counts

SE, SP = 0.9, 0.85  # the labels' sensitivity and specificity


def noisy(rng, truth):
    truth = np.asarray(truth)
    return np.where(truth == 1, rng.random(truth.size) < SE, rng.random(truth.size) > SP).astype(int)


def reference_counts(rng, n=200):
    gold = (rng.random(n) < 0.5).astype(int)
    return error_counts(gold, noisy(rng, gold))


def test_corrected_consistency_covers_the_true_consistency_and_the_raw_labels_do_not():
    true_consistency = 0.75  # p ~ Beta(0.5, 0.5) per scenario: E[p^2 + (1 - p)^2] = 2 * (1/8 + 1/4)
    rng = np.random.default_rng(0)
    covered = raw_covered = 0
    draws = 200
    for _ in range(draws):
        p = rng.beta(0.5, 0.5, 120)
        truth = (rng.random((120, 2)) < p[:, None]).astype(int)  # two continuations per scenario
        labels = noisy(rng, truth.ravel()).reshape(120, 2)
        got = corrected_consistency([list(g) for g in labels], reference_counts(rng), rng, n_boot=400)
        covered += got["ci"][0] <= true_consistency <= got["ci"][1]
        raw = corrected_consistency([list(g) for g in labels], None, rng, n_boot=400)
        raw_covered += raw["ci"][0] <= true_consistency <= raw["ci"][1]
    assert covered / draws >= 0.88  # 95% intervals (0.95 measured over 500 draws with 1000 resamples)
    assert raw_covered / draws < 0.5  # label noise makes agreeing continuations look split


def test_consistency_without_noise_is_the_share_of_agreeing_scenarios():
    rng = np.random.default_rng(1)
    perfect = {"pos": 50, "tp": 50, "neg": 50, "tn": 50}
    got = corrected_consistency([[1, 1], [0, 0], [1, 0], [1], [1, 1, 1]], perfect, rng)
    assert got["consistency"] == pytest.approx(3 / 4) and got["scenarios"] == 4 and got["labelled"] == 0.75
    assert corrected_consistency([[1]], perfect, rng)["consistency"] is None


def test_corrected_time_to_success_covers_the_true_median_despite_annotator_lag():
    rng = np.random.default_rng(2)
    lag = {"human": 0.45, "auto": 0.1}
    population = rng.uniform(1.0, 5.0, 200_000) + rng.normal(0, 0.3, 200_000)
    true_median = float(np.median(np.maximum(0, population)))
    covered = raw_covered = 0
    draws = 100
    for _ in range(draws):
        times, pairs = {}, {"human": [], "auto": []}
        for s in range(60):
            centre = rng.uniform(1.0, 5.0)
            t = np.maximum(0, centre + rng.normal(0, 0.3, 2))
            src = rng.choice(["human", "auto"], 2, p=[0.4, 0.6])
            times[f"s{s}"] = [(ti + lag[si] + rng.normal(0, 0.1), si) for ti, si in zip(t, src)]
        for src in pairs:
            gold = rng.uniform(1.0, 5.0, 30)
            pairs[src] = list(zip(gold + lag[src] + rng.normal(0, 0.1, 30), gold))
        got = corrected_time_to_success(times, pairs, rng, n_boot=300)
        covered += got["ci"][0] <= true_median <= got["ci"][1]
        raw = corrected_time_to_success(times, {}, rng, n_boot=300)
        raw_covered += raw["ci"][0] <= true_median <= raw["ci"][1]
        assert got["offsets_s"]["human"] == pytest.approx(0.45, abs=0.1)
    assert covered / draws >= 0.88
    assert raw_covered / draws < covered / draws
