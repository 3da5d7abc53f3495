"""Input checks shared by the calibration modules. Each error says what to pass instead."""

from __future__ import annotations

import numpy as np


def as_binary(y, name: str) -> np.ndarray:
    """Returns ``y`` as a 1-D int array of 0 (failure) / 1 (success)."""
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one outcome per episode), got shape {y.shape}")
    if y.size and not np.isin(y, (0, 1)).all():
        bad = [v for v in np.unique(y) if v not in (0, 1)][:3]
        raise ValueError(
            f"{name} must hold only 1 (success) and 0 (failure), found {bad}; "
            "convert 'success'/'failure' strings or probabilities to 0/1 first"
        )
    return y.astype(int)


def as_float(x, name: str) -> np.ndarray:
    """Returns ``x`` as a 1-D float array (``None`` becomes NaN)."""
    x = np.asarray(x, dtype=float)
    if x.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one value per episode), got shape {x.shape}")
    return x


def as_probs(p, name: str) -> np.ndarray:
    """Returns ``p`` as a 1-D float array of probabilities in [0, 1]."""
    p = as_float(p, name)
    if not ((p >= 0) & (p <= 1)).all():
        raise ValueError(
            f"{name} must be probabilities in [0, 1] with no NaN; "
            "pass calibrated P(success), e.g. TemperatureScaler.predict_proba(logits)"
        )
    return p


def same_length(**arrays) -> int:
    """Returns the common length of the named arrays, or says which ones differ."""
    lengths = {name: len(a) for name, a in arrays.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"arrays must have one entry per episode, got lengths {lengths}")
    return next(iter(lengths.values()))


def check_fitted(estimator, attribute: str) -> None:
    """Raises a clear error when ``estimator`` lacks the fitted ``attribute``."""
    if not hasattr(estimator, attribute):
        name = type(estimator).__name__
        raise RuntimeError(f"{name} is not fitted: call {name}(...).fit(...) or {name}.from_dict(...) first")
