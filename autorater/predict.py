"""Prediction: decode clips, run the model, apply the stored calibration, write SUITE_FORMAT predictions.

Example:
    >>> model = Autorater.from_pretrained("model")                         # doctest: +SKIP
    >>> rows = predict_suite(model, Suite.load("new-suite"), model_dir="model")  # doctest: +SKIP
    >>> rows[0]["p_success"], rows[0]["marker_s"]                           # doctest: +SKIP
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import torch

from autorater.model import Autorater
from data.suite import Suite
from data.video import VideoError, read_video


@dataclass
class ClipInput:
    """One clip ready for the model."""

    frames: np.ndarray  # (t, H, W, 3) uint8
    times_s: np.ndarray  # (t,) seconds from the first frame
    duration_s: float
    takeover_s: float
    instruction: str


def load_clip(path: str | Path, instruction: str, takeover_s: float, num_frames: int, image_size: int,
              fit: str = "stretch") -> ClipInput:
    """Decode a video for the model (``fit``: the config's ``frame_fit``); raises data.video.VideoError naming the
    file."""
    clip = read_video(path, num_frames=num_frames, size=image_size, fit=fit)
    return ClipInput(clip.frames, clip.times_s.astype(np.float32), clip.info.duration_s, float(takeover_s),
                     instruction)


def read_calibration(model_dir: str | Path | None) -> dict:
    """The model folder's ``calibration.json`` as a dict ({} when not calibrated yet)."""
    if model_dir is None or not (Path(model_dir) / "calibration.json").is_file():
        return {}
    path = Path(model_dir) / "calibration.json"
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"cannot read {path}: {err} (fix: rerun `autorater calibrate`)") from None
    if not isinstance(d, dict):
        raise ValueError(f"{path} must be a JSON object (fix: rerun `autorater calibrate`)")
    try:  # the same checks as the code that applies it
        _scaler(d)
        from calibration import MarkerOffset

        MarkerOffset.from_dict(d)
    except ValueError as err:
        raise ValueError(f"{path}: {err} (fix: rerun `autorater calibrate`)") from None
    return d


def _scaler(calibration: dict):
    """The stored temperature and shift as a ``TemperatureScaler`` (none stored: the identity)."""
    from calibration import TemperatureScaler

    return TemperatureScaler.from_dict({"temperature": 1.0, **calibration})


def model_name(model_dir: str | Path | None) -> str:
    """``name@version`` from the folder's metadata.json (the registered model version), else the folder name."""
    if model_dir is None:
        return "autorater"
    meta_path = Path(model_dir) / "metadata.json"
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"cannot read {meta_path}: {err} (fix: restore it, or delete it: it is optional)") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{meta_path} must be a JSON object (fix: restore it, or delete it: it is optional)")
    name = meta.get("registered_name") or "autorater"
    version = meta.get("registered_version")
    return f"{name}@{version}" if version else f"{name}:{Path(model_dir).name}"


def real_length(times_s: torch.Tensor) -> int:
    """Frames of a batch (b, t) up to the last real one: a clip shorter than ``num_frames`` is padded at the end by
    repeating its last frame (``data.video.sample_indices``); what every clip repeats can be cut off."""
    return int(times_s.argmax(1).max()) + 1 if times_s.numel() else 0


@torch.no_grad()
def predict_batch(model: Autorater, *, times_s: torch.Tensor, durations_s: Sequence[float],
                  takeovers_s: Sequence[float], instructions: Sequence[str], frames: torch.Tensor | None = None,
                  features: torch.Tensor | None = None, calibration: dict | None = None) -> dict[str, np.ndarray]:
    """Raw model outputs for one batch, from frames (b, t, H, W, 3) or cached encoder features.

    ``calibration`` is the model folder's calibration.json (:func:`read_calibration`; None or {}: none).

    Returns:
        ``logit`` (b,), ``p_success`` (b,, scaled by the calibration's temperature), ``marker_s`` (b,,
        less the calibration's marker offset for the predicted outcome),
        ``marker_spread_s`` (b,), ``failure_mode`` (b,, index or -1), ``p_match`` (b,).
    """
    model.eval()
    t = real_length(times_s)
    times_s = times_s[:, :t]
    frames, features = (x[:, :t] if x is not None else None for x in (frames, features))
    out = model(times_s=times_s, takeover_s=torch.tensor(list(takeovers_s), dtype=torch.float32),
                instructions=list(instructions), frames=frames, features=features).cpu()
    marker, spread = model.decode_marker(out.marker_logits, times_s,
                                         torch.tensor(list(durations_s), dtype=torch.float32))
    logit = out.success_logit.numpy()
    modes = out.failure_logits.argmax(-1).numpy() if model.config.failure_modes else np.full(len(logit), -1)
    p, marker = calibrate_outputs(logit, marker.numpy(), durations_s, calibration)
    return {"logit": logit, "p_success": p, "marker_s": marker,
            "marker_spread_s": spread.numpy(), "failure_mode": modes,
            "p_match": torch.sigmoid(out.match_logit).numpy()}


def calibrate_outputs(logit: np.ndarray, marker_s: np.ndarray, durations_s: Sequence[float],
                      calibration: dict | None) -> tuple[np.ndarray, np.ndarray]:
    """P(success) = sigmoid(logit / temperature + bias), markers less the offset of their predicted outcome."""
    from calibration import MarkerOffset

    calibration = calibration or {}
    p = _scaler(calibration).predict_proba(np.asarray(logit, dtype=np.float64))
    success = (np.round(p, 6) >= 0.5).astype(int)  # the outcome ``to_records`` writes
    marker_s = MarkerOffset.from_dict(calibration).transform(marker_s, success, np.asarray(durations_s, float))
    return p, marker_s


def predict_clips(model: Autorater, clips: Sequence[ClipInput], calibration: dict | None = None
                  ) -> dict[str, np.ndarray]:
    """:func:`predict_batch` on decoded clips."""
    return predict_batch(model, frames=torch.from_numpy(np.stack([c.frames for c in clips])),
                         times_s=torch.from_numpy(np.stack([c.times_s for c in clips])),
                         durations_s=[c.duration_s for c in clips], takeovers_s=[c.takeover_s for c in clips],
                         instructions=[c.instruction for c in clips], calibration=calibration)


def to_records(ids: Sequence[str], raw: dict[str, np.ndarray], model: Autorater, name: str) -> list[dict]:
    """SUITE_FORMAT prediction lines (plus ``logit`` and ``marker_spread_s`` for calibration)."""
    modes = model.config.failure_modes
    rows = []
    for i, cid in enumerate(ids):
        p = round(float(raw["p_success"][i]), 6)  # outcome from the written value: 0.4999996 -> 0.5, success
        outcome = "success" if p >= 0.5 else "failure"
        mode = modes[raw["failure_mode"][i]] if outcome == "failure" and raw["failure_mode"][i] >= 0 else None
        rows.append({"continuation_id": cid, "p_success": p, "outcome": outcome,
                     "marker_s": round(float(raw["marker_s"][i]), 4), "failure_mode": mode, "model": name,
                     "logit": round(float(raw["logit"][i]), 6),
                     "marker_spread_s": round(float(raw["marker_spread_s"][i]), 4)})
    return rows


def iter_suite_predictions(model: Autorater, suite: Suite, ids: Iterable[str] | None = None,
                           calibration: dict | None = None, name: str = "autorater", batch_size: int = 16,
                           progress: bool = False) -> Iterator[dict]:
    """Yield one prediction per continuation, in order; an undecodable video yields an ``error`` row instead."""
    ids = list(ids) if ids is not None else suite.continuation_ids()
    cfg = model.config
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=len(ids), desc="rating", unit="video")
    for start in range(0, len(ids), batch_size):
        chunk = ids[start:start + batch_size]
        good, clips, errors = [], [], {}
        for cid in chunk:
            try:
                clips.append(load_clip(suite.video_path(cid), suite.instruction_of(cid), suite.takeover_of(cid),
                                       cfg.num_frames, cfg.image_size, cfg.frame_fit))
                good.append(cid)
            except VideoError as err:
                errors[cid] = str(err)
        rows = {}
        if clips:
            rows = {r["continuation_id"]: r for r in
                    to_records(good, predict_clips(model, clips, calibration), model, name)}
        for cid in chunk:
            yield rows.get(cid) or {"continuation_id": cid, "error": errors[cid], "model": name}
        if bar is not None:
            bar.update(len(chunk))
    if bar is not None:
        bar.close()


def predict_suite(model: Autorater, suite: Suite, model_dir: str | Path | None = None, **kwargs) -> list[dict]:
    """All predictions of a suite, calibrated with the model folder's calibration.json when there is one."""
    return list(iter_suite_predictions(model, suite, calibration=read_calibration(model_dir),
                                       name=model_name(model_dir), **kwargs))
