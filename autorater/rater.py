"""One owner for a rated model: the model folder's weights, config, calibration and name; typed predictions.

Every prediction path goes through a :class:`Rater`: ``autorater predict``, ``evaluate`` and ``calibrate``, the
labelling job and its Ray actors (``serving/labelling/label.py``), the HTTP
service, active learning, and the baselines' cached path. It decodes (an undecodable video becomes an
``error`` row, never a lost one), rates from frames or cached features into :class:`Predictions`, applies
the folder's ``calibration.json``, and writes SUITE_FORMAT rows.

Example:
    >>> rater = Rater.load("model")                                          # doctest: +SKIP
    >>> rows = list(rater.rate_suite(Suite.load("new-suite")))                # doctest: +SKIP
    >>> rows[0]["p_success"], rows[0]["marker_s"], rater.name                 # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import torch

from autorater.data.files import write_text_atomic
from autorater.data.suite import Suite
from autorater.data.video import DEFAULT_LIMITS, VideoError, VideoLimits
from autorater.device import DEFAULT_DEVICE, resolve_device
from autorater.model import WEIGHTS_FILE, Autorater
from autorater.models import AutoModel
from autorater.predict import ClipInput, calibrate_outputs, load_clip, predict_batch

# -- the folder's own files (besides config.json and model.safetensors: autorater.model) ----------
CALIBRATION_FILE, METADATA_FILE = "calibration.json", "metadata.json"
# The fields of metadata.json the product reads (the model's name in every answer and label): short printable text
METADATA_NAMES = ("registered_name", "registered_version", "mlflow_run_id", "mlflow_experiment")
MAX_METADATA_NAME = 200


def read_calibration(folder: str | os.PathLike | None) -> dict:
    """The folder's ``calibration.json`` (``calibration.read_calibration_json``: the one reader, checked), also
    checked as the code that applies it reads it; {} when not calibrated."""
    from autorater.calibration import read_calibration_json

    path = None if folder is None else Path(folder) / CALIBRATION_FILE
    if path is None or not path.is_file():
        return {}
    record = read_calibration_json(path)
    try:
        calibrate_outputs(np.zeros(1), np.zeros(1), [1.0], record)
    except ValueError as err:
        raise ValueError(f"{path}: {err} (fix: rerun `autorater calibrate`)") from None
    return record


def read_record(folder: str | os.PathLike | None):
    """The folder's ``calibration.json`` as a ``calibration.CalibrationRecord`` (the selective policy, the drift
    sample), or None when the model is not calibrated."""
    from autorater.calibration import CalibrationRecord

    path = None if folder is None else Path(folder) / CALIBRATION_FILE
    return CalibrationRecord.from_mapping(read_calibration(folder), path) if path is not None and path.is_file() \
        else None


def read_metadata(folder: str | os.PathLike) -> dict:
    """The folder's ``metadata.json`` (training summary, MLflow run, registered version); {} when there is none.

    Checked as config.json is: a JSON object whose names (:data:`METADATA_NAMES`) are printable text of up to
    :data:`MAX_METADATA_NAME` characters (the registered version may be an integer); ValueError naming the file,
    the field and the fix otherwise, so a tampered file is refused when the model loads, not quoted later."""
    path = Path(folder) / METADATA_FILE
    if not path.is_file():
        return {}
    fix = "(fix: restore it, or delete it: it is optional)"
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as err:
        raise ValueError(f"cannot read {path}: {str(err)[:200]} {fix}") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{path} must be a JSON object {fix}")
    for key in METADATA_NAMES:
        value = meta.get(key)
        if key == "registered_version" and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if value is not None and not _printable_name(value):
            raise ValueError(f"{path}: field {key!r} must be printable text of up to {MAX_METADATA_NAME} characters, "
                             f"got {ascii(value)[:80]} {fix}")
    return meta


def _printable_name(value) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_METADATA_NAME and value.isprintable()  # no surrogate


def update_metadata(folder: str | os.PathLike, **fields) -> dict:
    """Merge ``fields`` into the folder's ``metadata.json`` (other keys kept), written atomically; the result."""
    meta = {**read_metadata(folder), **fields}
    write_text_atomic(Path(folder) / METADATA_FILE, json.dumps(meta, indent=1, default=str) + "\n")
    return meta


def folder_fingerprint(folder: str | os.PathLike) -> dict:
    """SHA-1 of the folder's weights and of its calibration.json (None when absent): what a labelling job checks
    before it resumes with this model."""
    from autorater.data.files import sha1_file

    folder = Path(folder)
    return {"weights_sha1": sha1_file(folder / WEIGHTS_FILE),
            "calibration_sha1": sha1_file(folder / CALIBRATION_FILE)}


def model_name(folder: str | os.PathLike | None) -> str:
    """``name@version`` of the registered model version (from ``metadata.json``), else ``autorater:<folder>``."""
    if folder is None:
        return "autorater"
    meta = read_metadata(folder)
    name, version = meta.get("registered_name") or "autorater", meta.get("registered_version")
    return f"{name}@{version}" if version else f"{name}:{Path(folder).name}"


@dataclass
class Predictions:
    """Ratings of the continuations ``ids`` (one batch), calibrated by the rater's ``calibration.json``."""

    ids: list[str]
    logit: np.ndarray  # raw success score (before the temperature and shift)
    p_success: np.ndarray  # calibrated P(success)
    marker_s: np.ndarray  # the marker, less the calibrated offset of its predicted outcome
    marker_spread_s: np.ndarray  # the spread of the marker distribution (its uncertainty)
    failure_mode: list[str | None]  # the likeliest failure mode of a predicted failure; None for a success
    p_match: np.ndarray  # does the instruction belong to the video (the match head)
    duration_s: np.ndarray  # the videos' durations

    @property
    def outcome(self) -> list[str]:
        # from the written value: 0.4999996 rounds to 0.5, a success
        return ["success" if round(float(p), 6) >= 0.5 else "failure" for p in self.p_success]

    def records(self, name: str, duration: bool = False) -> list[dict]:
        """SUITE_FORMAT prediction lines (plus ``logit`` and ``marker_spread_s`` for calibration; with
        ``duration``, the video's ``duration_s``, which the labelling job's part files keep)."""
        rows = []
        for i, (cid, outcome) in enumerate(zip(self.ids, self.outcome)):
            row = {"continuation_id": cid, "p_success": round(float(self.p_success[i]), 6), "outcome": outcome,
                   "marker_s": round(float(self.marker_s[i]), 4),
                   "failure_mode": self.failure_mode[i] if outcome == "failure" else None, "model": name,
                   "logit": round(float(self.logit[i]), 6), "marker_spread_s": round(float(self.marker_spread_s[i]), 4)}
            if duration:
                row["duration_s"] = round(float(self.duration_s[i]), 6)
            rows.append(row)
        return rows


@dataclass
class Decoded:
    """A batch after decoding: the clips of the ids that decode, the error of each one that does not."""

    ids: list[str]
    clips: dict[str, ClipInput] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


class Rater:
    """A model with its calibration and name. ``Rater.load(folder)`` reads the folder once: weights and config
    (``Autorater.from_pretrained``, checked), ``calibration.json`` (checked; none: uncalibrated) and the
    registered name from ``metadata.json``."""

    def __init__(self, model: Autorater, calibration: dict | None = None, name: str = "autorater",
                 folder: Path | None = None):
        self.model, self.calibration, self.name, self.folder = model, calibration or {}, name, folder

    @classmethod
    def load(cls, folder: str | Path, device: str = DEFAULT_DEVICE, calibrated: bool = True,
             allow_unverified: bool = False) -> "Rater":
        """Open a model folder for rating: the one way in (weights and config checked, ``calibration.json`` applied
        unless ``calibrated`` is False, the registered name), the model on ``device`` ("auto": a GPU when
        present, else the CPU). ``allow_unverified``: accept weights without a checksum (see
        ``Autorater.from_pretrained``)."""
        folder = Autorater.check_folder(folder)
        model = AutoModel.from_pretrained(folder, allow_unverified=allow_unverified).to(resolve_device(device))
        return cls(model, read_calibration(folder) if calibrated else {}, model_name(folder), folder)

    @property
    def device(self) -> torch.device:
        return self.model.device

    @property
    def config(self):
        return self.model.config

    def record(self):
        """The folder's ``calibration.json`` as a ``CalibrationRecord`` (the selective policy), or None."""
        return read_record(self.folder)

    # -- decoding and rating -----------------------------------------------------------------
    def decode(self, suite: Suite, ids: Sequence[str]) -> Decoded:
        """Decode ``ids`` for this model; a video that cannot be decoded is kept as its error, naming the file."""
        processor, out = self.model.processor, Decoded(list(ids))
        for cid in ids:
            try:
                out.clips[cid] = load_clip(suite.video_path(cid), suite.instruction_of(cid), suite.takeover_of(cid),
                                           processor)
            except VideoError as err:
                out.errors[cid] = str(err)
        return out

    def decode_file(self, path: str | Path, instruction: str, takeover_s: float,
                    limits: VideoLimits = DEFAULT_LIMITS, deadline: float | None = None) -> ClipInput:
        """Decode one video file as this model reads it, under ``limits`` and ``deadline`` (VideoError naming the
        file; DecodeTimeout past the deadline)."""
        return load_clip(path, instruction, takeover_s, self.model.processor, limits, deadline)

    def rate_clips(self, ids: Sequence[str], clips: Sequence[ClipInput]) -> Predictions:
        """Rate decoded clips (one batch)."""
        return self.rate(list(ids), times_s=torch.from_numpy(np.stack([c.times_s for c in clips])),
                         durations_s=[c.duration_s for c in clips], takeovers_s=[c.takeover_s for c in clips],
                         instructions=[c.instruction for c in clips],
                         frames=torch.from_numpy(np.stack([c.frames for c in clips])))

    def rate(self, ids: list[str], *, times_s: torch.Tensor, durations_s: Sequence[float],
             takeovers_s: Sequence[float], instructions: Sequence[str], frames: torch.Tensor | None = None,
             features: torch.Tensor | None = None, encoded: dict | None = None) -> Predictions:
        """Rate one batch from frames (b, t, H, W, 3) or cached encoder features (b, t, c, h, w) and what else the
        model encodes per clip (``encoded``: the cache's entries beside the features, as they are)."""
        raw = predict_batch(self.model, times_s=times_s, durations_s=durations_s, takeovers_s=takeovers_s,
                            instructions=instructions, frames=frames, features=features, encoded=encoded,
                            calibration=self.calibration)
        modes = self.config.failure_modes
        return Predictions(ids, raw["logit"], raw["p_success"], raw["marker_s"], raw["marker_spread_s"],
                           [modes[m] if m >= 0 else None for m in raw["failure_mode"]], raw["p_match"],
                           np.asarray(durations_s, dtype=np.float64))

    def rows(self, decoded: Decoded, duration: bool = False, signature: bool = False) -> list[dict]:
        """One row per id of the batch, in order: its prediction, or an ``error`` row when it did not decode. With
        ``signature``, each rated row carries ``inputs``: what its frames and instruction look like
        (``autorater.signature``, for the input drift check)."""
        good = [cid for cid in decoded.ids if cid in decoded.clips]
        rated = {}
        if good:
            rated = {r["continuation_id"]: r for r in
                     self.rate_clips(good, [decoded.clips[c] for c in good]).records(self.name, duration)}
            if signature:
                from autorater.signature import input_signature

                for cid in good:
                    clip = decoded.clips[cid]
                    rated[cid]["inputs"] = input_signature(clip.frames, clip.instruction)
        return [rated.get(cid) or {"continuation_id": cid, "error": decoded.errors[cid], "model": self.name}
                for cid in decoded.ids]

    def rate_suite(self, suite: Suite, ids: Iterable[str] | None = None, batch_size: int = 16,
                   progress: bool = False, signature: bool = False) -> Iterator[dict]:
        """One row per continuation (all, or ``ids``), in order, batch by batch (``signature``: see :meth:`rows`)."""
        ids = list(ids) if ids is not None else suite.continuation_ids()
        bar = None
        if progress:
            from tqdm import tqdm
            bar = tqdm(total=len(ids), desc="rating", unit="video")
        for start in range(0, len(ids), batch_size):
            chunk = ids[start:start + batch_size]
            yield from self.rows(self.decode(suite, chunk), signature=signature)
            if bar is not None:
                bar.update(len(chunk))
        if bar is not None:
            bar.close()


__all__ = ["CALIBRATION_FILE", "MAX_METADATA_NAME", "METADATA_FILE", "METADATA_NAMES", "Decoded", "Predictions",
           "Rater", "folder_fingerprint", "model_name", "read_calibration", "read_metadata", "read_record",
           "update_metadata"]
