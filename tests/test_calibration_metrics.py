import numpy as np
import pytest

from autorater.calibration import (
    bootstrap_ci,
    brier_score,
    expected_calibration_error,
    marker_metrics,
    outcome_metrics,
    rank_metrics,
    reliability_curve,
)

pytestmark = pytest.mark.filterwarnings("error")  # degenerate cases must not warn


def test_constant_predictor_has_balanced_accuracy_one_half():
    y = np.array([0, 0, 1, 1, 1, 1])
    for constant in (0, 1):
        assert outcome_metrics(y, np.full_like(y, constant))["balanced_accuracy"] == 0.5


def test_identical_labels_agree_perfectly():
    y = [0, 1, 1, 0, 1]
    m = outcome_metrics(y, y)
    assert m["cohen_kappa"] == 1 and m["balanced_accuracy"] == 1 and m["accuracy"] == 1
    assert m["success_precision"] == 1 and m["n"] == 5


def test_degenerate_outcome_cases_are_defined_without_warnings():
    one_class = outcome_metrics([1, 1, 1], [1, 1, 0])
    assert one_class["balanced_accuracy"] == pytest.approx(2 / 3)  # recall of the only class present
    assert np.isnan(outcome_metrics([0, 1], [0, 0])["success_precision"])  # nothing predicted a success
    assert np.isnan(outcome_metrics([1, 1], [1, 1])["cohen_kappa"])  # chance agreement is 1
    empty = outcome_metrics([], [])
    assert empty["n"] == 0 and np.isnan(empty["balanced_accuracy"])


def test_outcome_metrics_rejects_non_binary_labels():
    with pytest.raises(ValueError, match="0/1"):
        outcome_metrics(["success", "failure"], [1, 0])


def test_marker_metrics_by_hand_and_nan_pairs_dropped():
    m = marker_metrics([1.0, 2.0, 3.0, np.nan, 5.0], [1.2, 3.0, 3.7, 4.0, None])
    # errors 0.2, 1.0, 0.7
    assert m["n"] == 3
    assert m["median_abs_error_s"] == pytest.approx(0.7)
    assert m["within_0_5s"] == pytest.approx(1 / 3)
    assert m["within_1s"] == 1.0
    assert np.isnan(marker_metrics([np.nan], [1.0])["median_abs_error_s"])


def test_calibration_metrics_by_hand():
    p, y = np.array([0.25] * 4 + [0.9] * 2), np.array([1, 0, 0, 0, 0, 0])
    # bin [0.2, 0.3): mean p 0.25, rate 0.25; bin [0.9, 1]: mean p 0.9, rate 0
    assert expected_calibration_error(p, y) == pytest.approx(2 / 6 * 0.9)
    mean_p, frac_pos, counts = reliability_curve(p, y)
    assert counts.tolist() == [4, 2] and mean_p == pytest.approx([0.25, 0.9]) and frac_pos == pytest.approx([0.25, 0])
    assert brier_score([1.0, 0.0], [1, 0]) == 0 and brier_score([0.5, 0.5], [1, 0]) == 0.25


def test_rank_metrics_mmrv():
    truth = {"A": 0.9, "B": 0.5, "C": 0.1}
    same = rank_metrics(truth, {"A": 0.8, "B": 0.4, "C": 0.2, "extra": 0.3})
    assert same["mmrv"] == 0 and same["spearman"] == pytest.approx(1) and same["n_agents"] == 3
    swapped = rank_metrics(truth, {"A": 0.5, "B": 0.9, "C": 0.1})  # A and B swapped: each violates by 0.4
    assert swapped["mmrv"] == pytest.approx(0.8 / 3) and swapped["spearman"] < 1
    single = rank_metrics({"A": 0.5}, {"A": 0.7})
    assert single["mmrv"] == 0 and np.isnan(single["spearman"])


def test_bootstrap_interval_contains_estimate_and_is_seeded():
    rng = np.random.default_rng(0)
    x = rng.normal(size=200)
    est, lo, hi = bootstrap_ci(np.mean, x, n_boot=300, seed=1)
    assert lo <= est <= hi and est == pytest.approx(x.mean())
    assert bootstrap_ci(np.mean, x, n_boot=300, seed=1) == (est, lo, hi)
    vector_est, vector_lo, vector_hi = bootstrap_ci(lambda a: [a.mean(), a.max()], x, n_boot=300, seed=1)
    assert vector_est.shape == (2,) and (vector_lo <= vector_hi).all()


def test_group_bootstrap_is_wider_when_rows_of_a_group_move_together():
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(20), 10)
    x = np.repeat(rng.normal(size=20), 10)  # every row of a scenario has the same value
    _, lo_rows, hi_rows = bootstrap_ci(np.mean, x, n_boot=400)
    _, lo_groups, hi_groups = bootstrap_ci(np.mean, x, groups=groups, n_boot=400)
    assert hi_groups - lo_groups > 2 * (hi_rows - lo_rows)
