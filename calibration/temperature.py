"""Temperature scaling: one positive number that makes the model's P(success) honest."""

from __future__ import annotations

import numpy as np
from scipy import optimize, special

from ._checks import as_binary, as_float, check_fitted, same_length

_LOG_T_BOUNDS = (np.log(1e-3), np.log(1e3))


class TemperatureScaler:
    """Calibrates success probabilities as ``p = sigmoid(logit / T)`` with one temperature T > 0.

    T > 1 softens an over-confident model, T < 1 sharpens an under-confident one; the ranking of
    episodes never changes. T minimises the binary log loss on held-out episodes, optimised over
    log T (bounded to [1e-3, 1e3]) with L-BFGS-B.

    Args:
        max_iter: maximum number of optimiser iterations.

    Attributes:
        temperature_: the fitted temperature T.

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> true_logit = rng.normal(0.0, 2.0, 5000)
        >>> y = (rng.random(5000) < 1 / (1 + np.exp(-true_logit))).astype(int)
        >>> scaler = TemperatureScaler().fit(3.0 * true_logit, y)  # a 3x over-confident model
        >>> round(scaler.temperature_)
        3
    """

    def __init__(self, max_iter: int = 100):
        self.max_iter = max_iter

    def fit(self, logits, y) -> TemperatureScaler:
        """Learns ``temperature_``.

        Args:
            logits: (n,) the model's pre-sigmoid success scores.
            y: (n,) outcomes, 1 = success.

        Returns:
            self.
        """
        logits, y = as_float(logits, "logits"), as_binary(y, "y")
        same_length(logits=logits, y=y)
        if not np.isfinite(logits).all():
            raise ValueError("logits contain NaN or inf; pass the model's finite pre-sigmoid scores")

        def log_loss(log_t):  # mean binary log loss and its derivative in log T
            z = logits * np.exp(-log_t[0])
            return np.mean(np.logaddexp(0.0, z) - y * z), np.array([np.mean((y - special.expit(z)) * z)])

        result = optimize.minimize(
            log_loss, x0=[0.0], jac=True, method="L-BFGS-B", bounds=[_LOG_T_BOUNDS], options={"maxiter": self.max_iter}
        )
        self.temperature_ = float(np.exp(result.x[0]))
        return self

    def predict_proba(self, logits) -> np.ndarray:
        """Returns the calibrated P(success), shape (n,) (not sklearn's (n, 2))."""
        check_fitted(self, "temperature_")
        return special.expit(as_float(logits, "logits") / self.temperature_)

    def to_dict(self) -> dict:
        """Returns ``{"temperature": T}``, JSON-able."""
        check_fitted(self, "temperature_")
        return {"temperature": self.temperature_}

    @classmethod
    def from_dict(cls, d: dict) -> TemperatureScaler:
        """Inverse of ``to_dict``; other keys are ignored."""
        temperature = d.get("temperature")
        if not isinstance(temperature, (int, float)) or not temperature > 0:
            raise ValueError(f"a TemperatureScaler dict needs 'temperature', a number > 0; got {temperature!r}")
        scaler = cls()
        scaler.temperature_ = float(temperature)
        return scaler
