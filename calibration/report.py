"""``calibration.json``: what calibration learned, stored next to the model weights."""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
from pathlib import Path

import numpy as np

from .marker import MarkerOffset
from .selective import SelectivePolicy
from .temperature import TemperatureScaler

_N_QUANTILES = 101  # score summary: percentiles 0..100, enough to rebuild the distribution for drift_check


def _utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


_PROBABILITIES = ("target_agreement", "confidence", "t_success", "t_fail", "bound", "expected_coverage",
                  "empirical_agreement", "scaling_share")
_FIX = "(fix: rerun `autorater calibrate`, or delete calibration.json to route every continuation to humans)"


def read_calibration_json(path) -> dict:
    """The one reader of a model folder's ``calibration.json``: its object, checked (JSON without NaN or infinities
    anywhere, a positive temperature, probabilities in [0, 1]); ValueError naming the file, the field and the fix
    otherwise. ``CalibrationRecord.from_json`` and the Rater (``autorater.rater.read_calibration``) both read
    through it."""
    path = Path(path)
    try:
        d = json.loads(path.read_text(encoding="utf-8"))  # NaN / Infinity parse, and are named by field below
    except RecursionError:
        raise ValueError(f"{path}: nested too deeply to be a calibration record {_FIX}") from None
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise ValueError(f"cannot read {path}: {err} {_FIX}") from None
    if not isinstance(d, dict):
        raise ValueError(f"{path} must be a JSON object {_FIX}")
    for where, x in _numbers(d, ""):
        if not math.isfinite(x):
            raise ValueError(f"{path}: field '{where}' is {x}, not a finite number {_FIX}")
    for name in _PROBABILITIES:
        v = d.get(name)
        if v is not None and not (isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1):
            raise ValueError(f"{path}: field '{name}' must be a probability in [0, 1] or null, got {v!r} {_FIX}")
    t = d.get("temperature", 1.0)
    if not (isinstance(t, (int, float)) and not isinstance(t, bool) and t > 0):
        raise ValueError(f"{path}: field 'temperature' must be a positive number, got {t!r} {_FIX}")
    return d


def _numbers(x, where: str):
    """(dotted path, number) of every number inside a JSON value."""
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _numbers(v, f"{where}.{k}" if where else str(k))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from _numbers(v, f"{where}[{i}]")
    elif isinstance(x, (int, float)) and not isinstance(x, bool):
        yield where, x


@dataclasses.dataclass
class CalibrationRecord:
    """Temperature, selective thresholds and their guarantee, the marker offset, and a summary of the scores.

    Fields mirror ``TemperatureScaler``, ``SelectivePolicy`` and ``MarkerOffset.to_dict()`` (None stands
    for NaN, e.g. the thresholds of an infeasible policy). The JSON is plain; on loading, unknown
    fields are ignored and missing optional fields take their defaults.

    Example:
        >>> import pathlib, tempfile
        >>> import numpy as np
        >>> from calibration import SelectivePolicy, TemperatureScaler, drift_check
        >>> rng = np.random.default_rng(0)
        >>> logits = rng.normal(0.0, 6.0, 500)  # an over-confident model's scores of 500 references
        >>> y = (rng.random(500) < 1 / (1 + np.exp(-logits / 2))).astype(int)
        >>> scaler = TemperatureScaler().fit(logits, y)
        >>> policy = SelectivePolicy(target_agreement=0.9).fit(scaler.predict_proba(logits), y)
        >>> record = CalibrationRecord.from_fitted(scaler, policy, logits, "babyai-sts", "v2")
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "calibration.json"
        >>> record.to_json(path)
        >>> loaded = CalibrationRecord.from_json(path)
        >>> decisions = loaded.policy().decide(loaded.scaler().predict_proba(logits))
        >>> drift_check(loaded.score_sample(), logits)["drifted"]
        False
    """

    temperature: float
    target_agreement: float
    confidence: float
    t_success: float | None
    t_fail: float | None
    bound: float | None
    expected_coverage: float
    n_references: int
    feasible: bool = True
    empirical_agreement: float | None = None
    max_marker_uncertainty_s: float | None = None
    reference_suite: str = ""
    reference_suite_version: str = ""
    created_at: str = dataclasses.field(default_factory=_utc_now)
    score_quantiles: list[float] = dataclasses.field(default_factory=list)  # raw logits at percentiles 0..100
    score_count: int = 0  # number of calibration scores summarised
    marker_offset_success_s: float = 0.0  # seconds subtracted from predicted success markers (annotators' lag)
    marker_offset_failure_s: float = 0.0  # ... from predicted failure markers
    marker_offset_n: list[int] = dataclasses.field(default_factory=lambda: [0, 0])  # references behind each
    bias: float = 0.0  # the scaler's shift (Platt); 0.0 in records written before it existed
    # How the references were used (``SplitCalibrator.split_info``). "unrecorded": written before the split
    # existed, when the scaler and the thresholds were fitted on the same references.
    split_method: str = "unrecorded"
    scaling_share: float | None = None
    split_seed: int | None = None
    n_scaling: int | None = None  # references that fitted the scaler
    n_threshold: int | None = None  # references that certified the thresholds
    scaling_ids: list[str] = dataclasses.field(default_factory=list)
    threshold_ids: list[str] = dataclasses.field(default_factory=list)
    # Calibration measured out of sample (``cross_validated_calibration``); None in older records.
    ece_raw: float | None = None
    ece_cv: float | None = None  # cross-validated over scenario folds: the ECE to report
    brier_raw: float | None = None
    brier_cv: float | None = None
    n_folds: int = 0
    ece_threshold_part: float | None = None  # the deployed scaler on the references it never saw
    brier_threshold_part: float | None = None
    # What the references' inputs look like (``autorater.signature``) with their stratum fields (category, camera,
    # agent, tags), for the input drift check of a new version (``serving.labelling.certify``); empty in older records.
    input_sample: list[dict] = dataclasses.field(default_factory=list)
    # The references' calibrated confidences max(p, 1 - p) and whether the model was right, as [confidence, 0 or 1]
    # pairs: how a new version's audit is designed (``calibration.audit.design_audit``: the level to test, the bets'
    # prior), never counted as its evidence; empty in older records (each stratum is then audited at its full size).
    reference_profile: list[list[float]] = dataclasses.field(default_factory=list)
    # How often the annotators' majority agrees with the references' gold labels (None: no annotations): an audit
    # compares the model with the annotators, so its expected agreement is the model's seen through their errors.
    annotator_agreement: float | None = None

    def reference_evidence(self) -> tuple[int, int] | None:
        """``(k, errors)``: the certifying references auto-labelled at the operating point and how many of them were
        wrong (None when no point was certified)."""
        n = self.n_threshold or self.n_references  # the policy's own references (the threshold part, when split)
        if not self.feasible or self.empirical_agreement is None or not n:
            return None
        k = int(round(self.expected_coverage * n))
        return k, int(round(k * (1 - self.empirical_agreement)))

    @classmethod
    def from_fitted(
        cls,
        scaler: TemperatureScaler,
        policy: SelectivePolicy,
        scores,
        reference_suite: str = "",
        reference_suite_version: str = "",
        marker: MarkerOffset | None = None,
        split: dict | None = None,
    ) -> CalibrationRecord:
        """Gathers a fitted scaler and policy.

        Args:
            scaler: fitted temperature scaler.
            policy: fitted selective policy.
            scores: (n,) raw logits of the calibration references, summarised for drift checks.
            reference_suite: name of the suite the references come from.
            reference_suite_version: its version.
            marker: fitted marker offset (None: markers are not shifted).
            split: how the references were used and the out-of-sample calibration (``SplitCalibrator``'s
                ``split_info()`` and ``calibration_``, plus ``scaling_ids`` / ``threshold_ids``); NaN is stored
                as None.
        """
        scores = np.asarray(scores, dtype=float)
        if not np.isfinite(scores).all():
            raise ValueError("scores must be the references' finite raw logits; drop episodes the model did not score")
        summary = {
            "score_quantiles": np.quantile(scores, np.linspace(0, 1, _N_QUANTILES)).tolist() if scores.size else [],
            "score_count": int(scores.size),
        }
        suite = {"reference_suite": reference_suite, "reference_suite_version": reference_suite_version}
        markers = marker.to_dict() if marker is not None else {}
        split = {k: None if isinstance(v, float) and not np.isfinite(v) else v for k, v in (split or {}).items()}
        return cls.from_mapping({**scaler.to_dict(), **policy.to_dict(), **summary, **suite, **markers, **split})

    def scaler(self) -> TemperatureScaler:
        """The fitted ``TemperatureScaler`` this record describes."""
        return TemperatureScaler.from_dict(dataclasses.asdict(self))

    def policy(self) -> SelectivePolicy:
        """The fitted ``SelectivePolicy`` this record describes."""
        return SelectivePolicy.from_dict(dataclasses.asdict(self))

    def marker_offset(self) -> MarkerOffset:
        """The ``MarkerOffset`` this record describes (zero offsets for a record written before it existed)."""
        return MarkerOffset.from_dict(dataclasses.asdict(self))

    def reference_ids(self) -> list[str]:
        """The continuation ids of every reference this calibration used (empty for records written before
        they were stored): a comparison of models must not be judged on them."""
        return [*self.scaling_ids, *self.threshold_ids]

    def score_sample(self) -> np.ndarray:
        """(score_count,) scores with the stored distribution, for ``drift_check``."""
        if not self.score_quantiles or self.score_count == 0:
            raise ValueError("this calibration record has no score summary; re-run `autorater calibrate` to add one")
        levels = (np.arange(self.score_count) + 0.5) / self.score_count
        return np.interp(levels, np.linspace(0, 1, len(self.score_quantiles)), self.score_quantiles)

    def to_json(self, path) -> None:
        """Writes the record as indented plain JSON (no NaN or Infinity)."""
        text = json.dumps(dataclasses.asdict(self), indent=2, allow_nan=False) + "\n"
        tmp = Path(str(path) + ".tmp")  # fsync + atomic replace: a crash leaves the old record or the new one
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    @classmethod
    def from_json(cls, path) -> CalibrationRecord:
        """Reads a record written by ``to_json``, possibly by an older or newer version (``read_calibration_json``:
        checked)."""
        return cls.from_mapping(read_calibration_json(path), path)

    @classmethod
    def from_mapping(cls, data: dict, path="calibration.json") -> CalibrationRecord:
        """A record from ``read_calibration_json``'s object; ValueError naming ``path`` when a required field is
        missing."""
        required = [
            f.name
            for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        missing = [name for name in required if name not in data]
        if missing:
            raise ValueError(f"{path}: missing required fields {missing}; re-run `autorater calibrate` to rewrite it")
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})
