"""MarkerOffset: the annotators' lag, measured on references, removed from predicted markers."""

import numpy as np
import pytest

from autorater.calibration import CalibrationRecord, MarkerOffset, SelectivePolicy, TemperatureScaler


def lagged(n=300, lag_success=0.36, lag_failure=0.0, seed=0):
    rng = np.random.default_rng(seed)
    true = rng.uniform(0.5, 4.0, n)
    success = (rng.random(n) < 0.5).astype(int)
    pred = true + np.where(success == 1, lag_success, lag_failure) + rng.normal(0.0, 0.1, n)
    return pred, true, success


def test_offsets_recover_each_outcomes_lag_and_shrink_the_error():
    pred, true, success = lagged(lag_failure=-0.2)
    offset = MarkerOffset().fit(pred, true, success)
    assert offset.success_offset_s_ == pytest.approx(0.36, abs=0.03)
    assert offset.failure_offset_s_ == pytest.approx(-0.2, abs=0.03)
    assert offset.n_success_ + offset.n_failure_ == len(pred)
    before = np.median(np.abs(pred - true))
    after = np.median(np.abs(offset.transform(pred, success) - true))
    assert after < before / 2


def test_too_few_pairs_or_missing_markers_learn_nothing():
    pred, true, success = lagged(n=30)
    true[: 25] = np.nan  # references without a marker do not count
    offset = MarkerOffset(min_pairs=20).fit(pred, true, success)
    assert offset.success_offset_s_ == 0.0 and offset.failure_offset_s_ == 0.0
    assert offset.n_success_ + offset.n_failure_ == 5
    assert np.array_equal(offset.transform(pred, success), np.clip(pred, 0, None))


def test_corrected_markers_stay_inside_the_video():
    offset = MarkerOffset.from_dict({"marker_offset_success_s": 1.0, "marker_offset_failure_s": -1.0})
    got = offset.transform([0.5, 3.5, np.nan], [1, 0, 1], duration_s=[4.0, 4.0, 4.0])
    assert got[0] == 0.0 and got[1] == 4.0 and np.isnan(got[2])


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="success must hold only 1"):
        MarkerOffset().fit([1.0], [1.0], [2])
    with pytest.raises(ValueError, match="one entry per episode"):
        MarkerOffset().fit([1.0, 2.0], [1.0], [1])
    with pytest.raises(RuntimeError, match="not fitted"):
        MarkerOffset().transform([1.0], [1])
    with pytest.raises(ValueError, match="marker_offset_failure_s must be a finite number"):
        MarkerOffset.from_dict({"marker_offset_failure_s": float("nan")})


def test_the_record_round_trips_the_offset_and_old_records_load_without_one(tmp_path):
    rng = np.random.default_rng(0)
    logits = rng.normal(0.0, 3.0, 400)
    y = (rng.random(400) < 1 / (1 + np.exp(-logits))).astype(int)
    scaler = TemperatureScaler().fit(logits, y)
    policy = SelectivePolicy(target_agreement=0.8).fit(scaler.predict_proba(logits), y)
    offset = MarkerOffset().fit(*lagged())
    record = CalibrationRecord.from_fitted(scaler, policy, logits, "s", "v1", marker=offset)
    record.to_json(tmp_path / "calibration.json")
    loaded = CalibrationRecord.from_json(tmp_path / "calibration.json").marker_offset()
    assert loaded.to_dict() == offset.to_dict()
    old = CalibrationRecord.from_fitted(scaler, policy, logits)  # as written before markers were calibrated
    assert old.marker_offset().success_offset_s_ == 0.0 and old.marker_offset_n == [0, 0]
