"""Prediction's steps: decode a clip as the model reads it, run the model on a batch, apply a calibration.

A model folder is rated through ``autorater.rater.Rater``, which decodes with :func:`load_clip` and rates with
:func:`predict_batch`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from autorater.data.video import DEFAULT_LIMITS, VideoInfo, VideoLimits, read_video
from autorater.model import Autorater


@dataclass
class ClipInput:
    """One clip ready for the model."""

    frames: np.ndarray  # (t, H, W, 3) uint8
    times_s: np.ndarray  # (t,) seconds from the first frame
    duration_s: float
    takeover_s: float
    instruction: str
    info: VideoInfo | None = None  # the video's frame count, rate and decoded size


def load_clip(path: str | Path, instruction: str, takeover_s: float, processor, limits: VideoLimits = DEFAULT_LIMITS,
              deadline: float | None = None) -> ClipInput:
    """Decode a video as a model reads it (its ``processor``'s ``decode_args``) under ``limits`` and ``deadline``
    (``read_video``); raises data.video.VideoError naming the file."""
    clip = read_video(path, **processor.decode_args(takeover_s), limits=limits, deadline=deadline)
    return ClipInput(clip.frames, clip.times_s.astype(np.float32), clip.info.duration_s, float(takeover_s),
                     instruction, clip.info)


def _scaler(calibration: dict):
    """The stored temperature and shift as a ``TemperatureScaler`` (none stored: the identity)."""
    from autorater.calibration import TemperatureScaler

    return TemperatureScaler.from_dict({"temperature": 1.0, **calibration})


def real_length(times_s: torch.Tensor) -> int:
    """Frames of a batch (b, t) up to the last real one: a clip shorter than ``num_frames`` is padded at the end by
    repeating its last frame (``autorater.data.video.sample_indices``); what every clip repeats can be cut off."""
    return int(times_s.argmax(1).max()) + 1 if times_s.numel() else 0


@torch.no_grad()
def predict_batch(model: Autorater, *, times_s: torch.Tensor, durations_s: Sequence[float],
                  takeovers_s: Sequence[float], instructions: Sequence[str], frames: torch.Tensor | None = None,
                  features: torch.Tensor | None = None, encoded: dict | None = None,
                  calibration: dict | None = None) -> dict[str, np.ndarray]:
    """Raw model outputs for one batch, from frames (b, t, H, W, 3) or cached encoder features (``features``, and
    what else the model encodes per clip, ``encoded``, carried as it is).

    ``calibration`` is the model folder's calibration.json (``autorater.rater.read_calibration``; None or {}: none).

    Returns:
        ``logit`` (b,), ``p_success`` (b,, scaled by the calibration's temperature), ``marker_s`` (b,: for an
        event model, the likeliest first success of a called success, else the likeliest first failure or the end;
        less the calibration's marker offset for the predicted outcome),
        ``marker_spread_s`` (b,), ``failure_mode`` (b,, index or -1), ``p_match`` (b,).
    """
    model.eval()
    t = real_length(times_s)
    times_s = times_s[:, :t]
    frames, features = (x[:, :t] if x is not None else None for x in (frames, features))
    out = model(times_s=times_s, takeover_s=torch.tensor(list(takeovers_s), dtype=torch.float32),
                instructions=list(instructions), frames=frames, features=features, encoded=encoded).cpu()
    durations = torch.tensor(list(durations_s), dtype=torch.float32)
    marker, spread = model.decode_marker(out.marker_logits, times_s, durations)
    failure_marker = None
    if out.success_marker_logits is not None:  # the marker of the called outcome, from that outcome's events
        never = torch.full_like(out.success_marker_logits[:, :1], -1e4)
        marker = model.decode_marker(torch.cat([out.success_marker_logits, never], 1), times_s, durations)[0]
        failure_marker = model.decode_marker(out.failure_marker_logits, times_s, durations)[0].numpy()
    logit = out.success_logit.numpy()
    modes = out.failure_logits.argmax(-1).numpy() if model.config.failure_modes else np.full(len(logit), -1)
    p, marker = calibrate_outputs(logit, marker.numpy(), durations_s, calibration, failure_marker)
    return {"logit": logit, "p_success": p, "marker_s": marker,
            "marker_spread_s": spread.numpy(), "failure_mode": modes,
            "p_match": torch.sigmoid(out.match_logit).numpy()}


def calibrate_outputs(logit: np.ndarray, marker_s: np.ndarray, durations_s: Sequence[float],
                      calibration: dict | None, failure_marker_s: np.ndarray | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """P(success) = sigmoid(logit / temperature + bias), markers less the offset of their predicted outcome
    (``failure_marker_s``: the marker of a called failure, where it differs from a called success's)."""
    from autorater.calibration import MarkerOffset

    calibration = calibration or {}
    p = _scaler(calibration).predict_proba(np.asarray(logit, dtype=np.float64))
    success = (np.round(p, 6) >= 0.5).astype(int)  # the outcome ``Predictions.outcome`` writes
    if failure_marker_s is not None:
        marker_s = np.where(success == 1, marker_s, failure_marker_s)
    marker_s = MarkerOffset.from_dict(calibration).transform(marker_s, success, np.asarray(durations_s, float))
    return p, marker_s


__all__ = ["ClipInput", "calibrate_outputs", "load_clip", "predict_batch", "real_length"]
