import numpy as np
import pytest
from scipy.special import expit

from autorater.calibration import TemperatureScaler, brier_score, expected_calibration_error


@pytest.mark.parametrize("k", [0.5, 3.0])
def test_temperature_recovers_the_miscalibration_factor(k):
    rng = np.random.default_rng(0)
    true_logit = rng.normal(0.0, 2.0, 20_000)
    y = (rng.random(true_logit.size) < expit(true_logit)).astype(int)
    logits = k * true_logit  # k > 1 over-confident, k < 1 under-confident
    scaler = TemperatureScaler().fit(logits, y)
    assert scaler.temperature_ == pytest.approx(k, rel=0.1)
    before, after = expit(logits), scaler.predict_proba(logits)
    assert expected_calibration_error(after, y) < expected_calibration_error(before, y)
    assert brier_score(after, y) < brier_score(before, y)


def test_temperature_round_trip_and_unfitted_error():
    rng = np.random.default_rng(1)
    logits = rng.normal(0, 3, 500)
    y = (rng.random(500) < expit(logits / 2)).astype(int)
    scaler = TemperatureScaler().fit(logits, y)
    loaded = TemperatureScaler.from_dict(scaler.to_dict())
    np.testing.assert_array_equal(loaded.predict_proba(logits), scaler.predict_proba(logits))
    with pytest.raises(RuntimeError, match="fit"):
        TemperatureScaler().predict_proba(logits)


def test_the_shift_recovers_a_model_that_under_predicts_success_and_temperature_alone_cannot():
    rng = np.random.default_rng(2)
    true_logit = rng.normal(0.5, 2.0, 20_000)
    y = (rng.random(true_logit.size) < expit(true_logit)).astype(int)
    logits = true_logit - 1.2  # every score too low by the same amount (no scale error)
    platt, temperature = TemperatureScaler().fit(logits, y), TemperatureScaler(bias=False).fit(logits, y)
    assert platt.bias_ == pytest.approx(1.2, abs=0.1) and platt.temperature_ == pytest.approx(1.0, rel=0.1)
    assert temperature.bias_ == 0.0
    ece = {name: expected_calibration_error(s.predict_proba(logits), y)
           for name, s in {"platt": platt, "temperature": temperature}.items()}
    assert ece["platt"] < 0.02 < ece["temperature"]


def test_a_scaler_saved_before_the_shift_existed_loads_without_one():
    logits = np.array([-2.0, 0.0, 3.0])
    old = TemperatureScaler.from_dict({"temperature": 2.0})
    assert old.bias_ == 0.0
    np.testing.assert_allclose(old.predict_proba(logits), expit(logits / 2.0))
    with pytest.raises(ValueError, match="bias"):
        TemperatureScaler.from_dict({"temperature": 2.0, "bias": float("nan")})
