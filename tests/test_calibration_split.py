"""The whole calibrate procedure (split, scale, plan, test) keeps its promise; ECE is measured out of sample."""

import json

import numpy as np
import pytest

from autorater.calibration import CalibrationRecord, SelectivePolicy, SplitCalibrator, TemperatureScaler
from autorater.calibration.split import cross_validated_calibration, group_split
from blas_threads import one_blas_thread  # noqa: F401 - autouse fixture


def draw(rng, n, kind="overconfident"):
    """Raw scores of a model three times over-confident and shifted; two references per scenario.

    ``confident_errors``: among the model's most confident successes, 8% are failures: the chance of an
    error rises with confidence there, the case the old procedure's assumption (3) excluded.
    """
    true_logit = rng.normal(0.5, 6.0, n)
    y = (rng.random(n) < 1 / (1 + np.exp(-true_logit))).astype(int)
    logit = 3 * true_logit - 1.5
    if kind == "confident_errors":
        y = np.where((logit > 40) & (rng.random(n) < 0.08), 0, y)
    return logit, y, np.arange(n) // 2


@pytest.mark.parametrize("kind", ["overconfident", "confident_errors"])
def test_the_whole_calibrate_procedure_keeps_its_guarantee_over_many_reference_draws(kind):
    target, confidence, draws = 0.95, 0.9, 150
    rng = np.random.default_rng(0)
    population_logit, population_y, _ = draw(rng, 50_000, kind)  # stands for the episodes to be labelled
    held, feasible = 0, 0
    for _ in range(draws):
        fitted = SplitCalibrator(target, confidence).fit(*draw(rng, 400, kind))
        auto = fitted.decide(population_logit) == "auto"
        right = (fitted.predict_proba(population_logit) >= 0.5) == population_y
        feasible += fitted.policy_.feasible_
        held += not auto.any() or right[auto].mean() >= target
    assert feasible >= 0.8 * draws  # not vacuous: most draws auto-label (about 70% of the population)
    assert held / draws >= confidence - 0.03


def test_the_split_keeps_scenarios_whole_and_the_parts_disjoint():
    rng = np.random.default_rng(1)
    groups = np.repeat(np.arange(50), rng.integers(1, 5, 50))
    mask = group_split(groups, 0.3, np.random.default_rng(2))
    assert 0.2 < mask.mean() < 0.45 and not mask.all() and mask.any()
    assert all(len(set(mask[groups == g])) == 1 for g in np.unique(groups))
    logit, y, g = draw(rng, 400)
    fitted = SplitCalibrator(0.9).fit(logit, y, g)
    info = fitted.split_info()
    assert info["n_scaling"] + info["n_threshold"] == 400 == info["n_scaling"] + fitted.policy_.n_references_
    assert not set(g[fitted.scaling_mask_]) & set(g[~fitted.scaling_mask_])
    refit = TemperatureScaler().fit(logit[fitted.scaling_mask_], y[fitted.scaling_mask_])
    assert refit.temperature_ == pytest.approx(fitted.scaler_.temperature_)  # the scaler saw the scaling part only


def test_a_fixed_path_certifies_only_on_the_references_it_is_given():
    rng = np.random.default_rng(3)
    p = rng.beta(0.3, 0.3, 500)
    y = (rng.random(500) < p).astype(int)
    thresholds = np.array([0.999, 0.99, 0.95, 0.9, 0.5])
    policy = SelectivePolicy(0.9, 0.9).fit(p, y, thresholds=thresholds, planned_counts=[50, 150, 250, 300, 500])
    assert policy.t_success_ in thresholds and policy.bound_ >= 0.9
    auto = policy.decide(p) == "auto"
    assert auto.mean() == pytest.approx(policy.expected_coverage_)
    with pytest.raises(ValueError, match="planned_counts"):
        SelectivePolicy(0.9, 0.9).fit(p, y, thresholds=thresholds)
    with pytest.raises(ValueError, match="most conservative"):
        SelectivePolicy(0.9, 0.9).fit(p, y, thresholds=thresholds[::-1], planned_counts=np.arange(5))


def test_cross_validated_ece_is_out_of_sample_and_beats_the_raw_scores():
    rng = np.random.default_rng(4)
    logit, y, g = draw(rng, 1000)
    cv = cross_validated_calibration(logit, y, g, n_folds=5)
    assert cv["n_folds"] == 5 and cv["ece_cv"] < cv["ece_raw"] and cv["brier_cv"] < cv["brier_raw"]
    in_sample = TemperatureScaler().fit(logit, y).predict_proba(logit)
    from autorater.calibration import expected_calibration_error

    # on pure noise, in-sample scaling looks calibrated; out of sample it cannot be better
    noise_logit, noise_y = rng.normal(0, 1, 60), rng.integers(0, 2, 60)
    noise = cross_validated_calibration(noise_logit, noise_y)
    fitted = TemperatureScaler().fit(noise_logit, noise_y).predict_proba(noise_logit)
    assert noise["ece_cv"] >= expected_calibration_error(fitted, noise_y) - 1e-9
    assert expected_calibration_error(in_sample, y) <= cv["ece_raw"]
    assert np.isnan(cross_validated_calibration(logit[:2], y[:2], groups=[0, 0])["ece_cv"])  # one group: no folds


def test_the_record_stores_the_split_and_the_out_of_sample_ece_and_old_records_still_load(tmp_path):
    rng = np.random.default_rng(5)
    logit, y, g = draw(rng, 400)
    fitted = SplitCalibrator(0.9).fit(logit, y, g)
    ids = [f"c{i}" for i in range(400)]
    record = CalibrationRecord.from_fitted(fitted.scaler_, fitted.policy_, logit, "s", "v1",
                                           split={**fitted.split_info(), **fitted.calibration_,
                                                  "scaling_ids": [i for i, m in zip(ids, fitted.scaling_mask_) if m],
                                                  "threshold_ids": [i for i, m in zip(ids, fitted.scaling_mask_)
                                                                    if not m]})
    record.to_json(tmp_path / "calibration.json")
    loaded = CalibrationRecord.from_json(tmp_path / "calibration.json")
    assert loaded.split_method.startswith("disjoint")
    assert loaded.n_scaling + loaded.n_threshold == 400 == loaded.n_references
    assert loaded.ece_cv == pytest.approx(fitted.calibration_["ece_cv"])
    assert set(loaded.reference_ids()) == set(ids)
    np.testing.assert_array_equal(loaded.policy().decide(loaded.scaler().predict_proba(logit)), fitted.decide(logit))

    old = json.loads((tmp_path / "calibration.json").read_text())
    for key in ("split_method", "scaling_share", "split_seed", "n_scaling", "n_threshold", "scaling_ids",
                "threshold_ids", "ece_raw", "ece_cv", "brier_raw", "brier_cv", "n_folds", "ece_threshold_part",
                "brier_threshold_part"):
        old.pop(key, None)
    (tmp_path / "old.json").write_text(json.dumps(old))
    legacy = CalibrationRecord.from_json(tmp_path / "old.json")
    assert legacy.split_method == "unrecorded" and legacy.ece_cv is None and legacy.reference_ids() == []


def test_a_scaling_part_of_one_class_leaves_the_scores_as_they_are():
    logit = np.linspace(-3, 3, 40)
    y = (logit > 0).astype(int)
    groups = np.where(logit > 0, 0, np.arange(40))  # every success in one scenario
    fitted = SplitCalibrator(0.9, scaling_share=0.2, seed=1).fit(logit, y, groups)
    assert y[fitted.scaling_mask_].max() == 0  # this draw put only failures in the scaling part
    assert not fitted.scaler_fitted_ and "not fitted" in fitted.split_info()["split_method"]
    np.testing.assert_allclose(fitted.predict_proba(logit), 1 / (1 + np.exp(-logit)))
    assert SplitCalibrator(0.9).fit(*draw(np.random.default_rng(6), 400)).scaler_fitted_
