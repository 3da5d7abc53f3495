import json

import numpy as np
import pytest
from scipy.special import expit

from autorater.calibration import CalibrationRecord, SelectivePolicy, TemperatureScaler, drift_check


def test_drift_same_distribution_is_not_drifted_and_a_shift_is():
    rng = np.random.default_rng(0)
    reference = rng.normal(0, 3, 2000)
    same = drift_check(reference, rng.normal(0, 3, 1000))
    shifted = drift_check(reference, rng.normal(2, 3, 1000))
    assert not same["drifted"] and "no drift" in same["message"]
    assert shifted["drifted"] and shifted["psi"] > same["psi"] and shifted["ks_pvalue"] < 0.01
    assert "recalibrate" in shifted["message"]


@pytest.fixture
def record():
    rng = np.random.default_rng(1)
    logits = rng.normal(0, 6, 600)
    y = (rng.random(600) < expit(logits / 2)).astype(int)
    scaler = TemperatureScaler().fit(logits, y)
    policy = SelectivePolicy(0.9, 0.9).fit(scaler.predict_proba(logits), y)
    return CalibrationRecord.from_fitted(scaler, policy, logits, "babyai-sts", "v2"), logits


def test_record_json_round_trip(record, tmp_path):
    record, logits = record
    record.to_json(tmp_path / "calibration.json")
    loaded = CalibrationRecord.from_json(tmp_path / "calibration.json")
    assert loaded == record
    p = loaded.scaler().predict_proba(logits)
    assert (loaded.policy().decide(p) == "auto").mean() == pytest.approx(record.expected_coverage)
    assert not drift_check(loaded.score_sample(), logits)["drifted"]
    assert drift_check(loaded.score_sample(), logits)["ks_statistic"] < 0.02


def test_record_loads_with_unknown_and_missing_optional_fields(record, tmp_path):
    record, _ = record
    data = json.loads(json.dumps(record.__dict__))
    del data["reference_suite_version"], data["score_quantiles"]
    data["added_in_a_later_version"] = {"anything": 1}
    (tmp_path / "calibration.json").write_text(json.dumps(data))
    loaded = CalibrationRecord.from_json(tmp_path / "calibration.json")
    assert loaded.reference_suite_version == "" and loaded.temperature == record.temperature
    with pytest.raises(ValueError, match="no score summary"):
        loaded.score_sample()
    del data["temperature"]
    (tmp_path / "calibration.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="temperature"):
        CalibrationRecord.from_json(tmp_path / "calibration.json")
