"""Promotion on evidence: a challenger better only by noise is rarely declared better; a clearly better one is."""

import numpy as np
import pytest

from autorater.calibration import outcome_metrics
from autorater.calibration.compare import paired_comparison
from blas_threads import one_blas_thread  # noqa: F401 - autouse fixture


def labels(rng, y, error_rate):
    return np.where(rng.random(y.size) < error_rate, 1 - y, y)


def test_a_challenger_better_only_by_noise_is_rarely_declared_better():
    rng = np.random.default_rng(0)
    draws, better, gains = 300, 0, 0
    for _ in range(draws):
        y = (rng.random(200) < 0.4).astype(int)
        champion, challenger = labels(rng, y, 0.15), labels(rng, y, 0.15)  # equally good, errors by chance
        result = paired_comparison(y, champion, challenger, groups=np.arange(200) // 2, n_boot=500,
                                   seed=int(rng.integers(1 << 30)))
        better += result["better"]
        gains += result["difference"] > 0  # the old rule: any point gain promotes
    assert better / draws <= 0.05  # one side of a 95% interval: about 2.5%
    assert gains / draws > 0.3  # where the point-estimate rule promoted about every other time


def test_a_clearly_better_challenger_is_declared_better_and_a_margin_is_respected():
    rng = np.random.default_rng(1)
    hits = 0
    for _ in range(50):
        y = (rng.random(200) < 0.4).astype(int)
        result = paired_comparison(y, labels(rng, y, 0.25), labels(rng, y, 0.05), groups=np.arange(200) // 2,
                                   n_boot=500)
        hits += result["better"]
    assert hits >= 48
    y = (rng.random(300) < 0.5).astype(int)
    a, b = labels(rng, y, 0.2), labels(rng, y, 0.1)
    plain = paired_comparison(y, a, b)
    assert plain["ba_a"] == pytest.approx(outcome_metrics(y, a)["balanced_accuracy"])
    assert plain["ci"][0] <= plain["difference"] <= plain["ci"][1]
    assert not paired_comparison(y, a, b, margin=plain["ci"][0] + 0.01)["better"]  # a margin above the interval's end


def test_identical_models_are_never_better_and_mcnemar_sees_no_difference():
    rng = np.random.default_rng(2)
    y = rng.integers(0, 2, 100)
    a = labels(rng, y, 0.2)
    result = paired_comparison(y, a, a.copy())
    assert result["difference"] == 0 and not result["better"] and result["mcnemar_p"] == 1.0
    assert result["ci"] == [0.0, 0.0]
    one_class = paired_comparison(np.ones(10, int), np.ones(10, int), np.ones(10, int))
    assert one_class["ci"] == [None, None] and not one_class["better"]
