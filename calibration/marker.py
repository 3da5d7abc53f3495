"""Marker offset: remove the systematic lag a model inherits from its annotators' reaction time."""

from __future__ import annotations

import numpy as np

from ._checks import as_binary, as_float, check_fitted, same_length


class MarkerOffset:
    """Shifts predicted markers by the median lag measured on reference episodes, one per outcome.

    The model learns the marker from human annotators, who press a few hundred milliseconds after
    the moment (on the synthetic suites, a median 0.36 s after the simulator's success event);
    reference episodes carry the moment itself. On the references whose outcome the model got
    right, the median of (predicted - reference) marker, per outcome, is the lag to remove. An
    outcome with fewer than ``min_pairs`` such references keeps offset 0 (nothing is learned from
    a handful). Corrected markers are clipped to [0, duration].

    Args:
        min_pairs: the fewest agreeing references with both markers that an outcome's offset needs.

    Attributes:
        success_offset_s_, failure_offset_s_: seconds subtracted from markers predicted for that outcome.
        n_success_, n_failure_: the references each offset was measured on.

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> true = rng.uniform(1.0, 4.0, 200)
        >>> pred = true + 0.375 + rng.normal(0.0, 0.1, 200)  # a model that learned the annotators' lag
        >>> offset = MarkerOffset().fit(pred, true, np.ones(200, dtype=int))
        >>> round(offset.success_offset_s_, 1), offset.failure_offset_s_
        (0.4, 0.0)
        >>> float(np.median(np.abs(offset.transform(pred, np.ones(200, dtype=int)) - true))) < 0.1
        True
    """

    def __init__(self, min_pairs: int = 20):
        self.min_pairs = min_pairs

    def fit(self, pred_s, true_s, success) -> MarkerOffset:
        """Learns one offset per outcome.

        Args:
            pred_s: (n,) predicted markers, seconds from the first frame (NaN: none).
            true_s: (n,) the references' markers (NaN: none).
            success: (n,) the outcome of each pair, 1 = success; pass only references whose outcome
                the model predicted right (a marker of the wrong outcome measures nothing).

        Returns:
            self.
        """
        pred_s, true_s, success = as_float(pred_s, "pred_s"), as_float(true_s, "true_s"), as_binary(success, "success")
        same_length(pred_s=pred_s, true_s=true_s, success=success)
        lag = pred_s - true_s
        for value, name in ((1, "success"), (0, "failure")):
            pairs = lag[(success == value) & np.isfinite(lag)]
            setattr(self, f"n_{name}_", int(pairs.size))
            setattr(self, f"{name}_offset_s_", float(np.median(pairs)) if pairs.size >= self.min_pairs else 0.0)
        return self

    def transform(self, pred_s, success, duration_s=None) -> np.ndarray:
        """Corrected markers: each minus its predicted outcome's offset, clipped to [0, duration_s]."""
        check_fitted(self, "success_offset_s_")
        pred_s, success = as_float(pred_s, "pred_s"), as_binary(success, "success")
        same_length(pred_s=pred_s, success=success)
        out = pred_s - np.where(success == 1, self.success_offset_s_, self.failure_offset_s_)
        upper = np.inf if duration_s is None else as_float(duration_s, "duration_s")
        return np.clip(out, 0.0, upper)

    def to_dict(self) -> dict:
        """The offsets and their support, JSON-able (the keys of ``CalibrationRecord``)."""
        check_fitted(self, "success_offset_s_")
        return {"marker_offset_success_s": self.success_offset_s_, "marker_offset_failure_s": self.failure_offset_s_,
                "marker_offset_n": [self.n_success_, self.n_failure_]}

    @classmethod
    def from_dict(cls, d: dict) -> MarkerOffset:
        """Inverse of ``to_dict``; missing offsets are 0 (a record written before markers were calibrated)."""
        offset = cls()
        for name in ("success", "failure"):
            value = d.get(f"marker_offset_{name}_s", 0.0)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not np.isfinite(value):
                raise ValueError(f"marker_offset_{name}_s must be a finite number of seconds, got {value!r} "
                                 f"(fix: rerun `autorater calibrate`)")
            setattr(offset, f"{name}_offset_s_", float(value))
        n = d.get("marker_offset_n") or [0, 0]
        offset.n_success_, offset.n_failure_ = int(n[0]), int(n[1])
        return offset
