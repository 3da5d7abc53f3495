"""Consistency and time to completion from corrected labels: their intervals cover the truth on synthetic draws."""

import numpy as np
import pytest

from autorater.calibration.agents.rates import corrected_consistency, corrected_time_to_success, error_counts
from blas_threads import one_blas_thread  # noqa: F401 - autouse fixture

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


def test_abilities_from_noisy_labels_rank_agents_like_the_truth_and_every_one_has_an_interval():
    from scipy import stats

    from autorater.serving.analysis.leaderboard import ability_and_difficulty

    rng = np.random.default_rng(3)
    theta = np.linspace(-2, 2, 7)  # seven agents of graded skill
    difficulty = rng.normal(0, 1.2, 80)
    rows, gold = [], {}
    for a, t in enumerate(theta):
        for s, b in enumerate(difficulty):
            for k in range(2):
                cid = f"c{a}-{s}-{k}"
                truth = int(rng.random() < 1 / (1 + np.exp(-(t - b))))
                decision = "auto" if rng.random() < 0.7 else "human"
                label = noisy(rng, [truth])[0]
                rows.append({"continuation_id": cid, "agent_id": f"agent{a}", "scenario_id": f"s{s:02d}",
                             "decision": decision, "outcome": "success" if label else "failure"})
                if rng.random() < 0.15:
                    gold[cid] = "success" if truth else "failure"
    per_agent, per_scenario, summary = ability_and_difficulty(rows, gold)
    assert len(per_agent) == 7 and len(per_scenario) == 80
    assert all(v["ability_ci"][0] < v["ability"] < v["ability_ci"][1] for v in per_agent.values())
    assert all(v["difficulty_ci"][0] < v["difficulty"] < v["difficulty_ci"][1] for v in per_scenario.values())
    estimated = [per_agent[f"agent{a}"]["ability"] for a in range(7)]
    assert stats.spearmanr(estimated, theta).statistic >= 0.9
    covered = np.mean([per_agent[f"agent{a}"]["ability_ci"][0] <= theta[a] <= per_agent[f"agent{a}"]["ability_ci"][1]
                       for a in range(7)])
    assert covered >= 5 / 7
    assert summary["sources"]["auto"]["sensitivity"] == pytest.approx(SE, abs=0.1)  # about 60 gold successes
    assert summary["sources"]["auto"]["from"] == "its own references"
