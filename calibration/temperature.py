"""Temperature scaling: a positive temperature (and a shift) that make the model's P(success) honest."""

from __future__ import annotations

import numpy as np
from scipy import optimize, special

from ._checks import as_binary, as_float, check_fitted, same_length

_LOG_T_BOUNDS = (np.log(1e-3), np.log(1e3))
_BIAS_BOUNDS = (-20.0, 20.0)


class TemperatureScaler:
    """Calibrates success probabilities as ``p = sigmoid(logit / T + b)``: a temperature T > 0 and a shift b.

    T > 1 softens an over-confident model, T < 1 sharpens an under-confident one; the shift b moves
    every episode the same way (Platt scaling), for a model whose scores are off by a constant, e.g.
    trained on soft labels and extra negatives that pull P(success) down. The ranking of episodes never
    changes. (T, b) minimise the binary log loss on held-out episodes, optimised over (log T, b) with
    L-BFGS-B (log T bounded to [1e-3, 1e3], b to [-20, 20]); ``bias=False`` fits T alone (b = 0).

    Args:
        bias: fit the shift b as well.
        max_iter: maximum number of optimiser iterations.

    Attributes:
        temperature_: the fitted temperature T.
        bias_: the fitted shift b (0.0 with ``bias=False``).

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> true_logit = rng.normal(0.0, 2.0, 5000)
        >>> y = (rng.random(5000) < 1 / (1 + np.exp(-true_logit))).astype(int)
        >>> scaler = TemperatureScaler().fit(3.0 * true_logit - 1.5, y)  # 3x over-confident and shifted
        >>> round(scaler.temperature_), round(scaler.bias_, 1)
        (3, 0.5)
    """

    def __init__(self, bias: bool = True, max_iter: int = 100):
        self.bias = bias
        self.max_iter = max_iter

    def fit(self, logits, y) -> TemperatureScaler:
        """Learns ``temperature_`` and ``bias_``.

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

        def log_loss(x):  # mean binary log loss and its gradient in (log T, b)
            z = logits * np.exp(-x[0]) + x[1]
            residual = y - special.expit(z)
            return np.mean(np.logaddexp(0.0, z) - y * z), np.array([np.mean(residual * (z - x[1])),
                                                                   -np.mean(residual)])

        bounds = [_LOG_T_BOUNDS, _BIAS_BOUNDS if self.bias else (0.0, 0.0)]
        result = optimize.minimize(log_loss, x0=[0.0, 0.0], jac=True, method="L-BFGS-B", bounds=bounds,
                                   options={"maxiter": self.max_iter})
        self.temperature_, self.bias_ = float(np.exp(result.x[0])), float(result.x[1])
        return self

    def predict_proba(self, logits) -> np.ndarray:
        """Returns the calibrated P(success), shape (n,) (not sklearn's (n, 2))."""
        check_fitted(self, "temperature_")
        return special.expit(as_float(logits, "logits") / self.temperature_ + self.bias_)

    def to_dict(self) -> dict:
        """Returns ``{"temperature": T, "bias": b}``, JSON-able."""
        check_fitted(self, "temperature_")
        return {"temperature": self.temperature_, "bias": self.bias_}

    @classmethod
    def from_dict(cls, d: dict) -> TemperatureScaler:
        """Inverse of ``to_dict``; other keys are ignored; a dict without ``bias`` (written before it existed)
        has none."""
        temperature, bias = d.get("temperature"), d.get("bias", 0.0)
        if not isinstance(temperature, (int, float)) or not temperature > 0:
            raise ValueError(f"a TemperatureScaler dict needs 'temperature', a number > 0; got {temperature!r}")
        if not isinstance(bias, (int, float)) or not np.isfinite(bias):
            raise ValueError(f"a TemperatureScaler dict's 'bias' must be a finite number; got {bias!r}")
        scaler = cls(bias=bias != 0.0)
        scaler.temperature_, scaler.bias_ = float(temperature), float(bias)
        return scaler
