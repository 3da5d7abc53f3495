"""``autorater calibrate``: fit the temperature and shift, the marker offset and the selective policy.

The references are split by scenario (``SplitCalibrator``): the temperature and shift are fitted on one
part, the thresholds certified on the other, so that the stated agreement holds for the procedure as run;
the ECE reported is cross-validated (out of sample). ``calibration.json`` records which references went
where (``scaling_ids``, ``threshold_ids``) and the out-of-sample ECE.

Writes ``calibration.json`` into the model folder (``predict`` applies its temperature and marker
offset from then on)
and a report folder with the agreement table (autorater beside every annotator, with bootstrap
intervals over scenarios), the reliability diagram before/after scaling and the risk-coverage
curve with the chosen operating point.

Example:
    >>> result = calibrate_model("model", Suite.load("reference-suite"), out="calibration-report")  # doctest: +SKIP
    >>> result.record.t_success, result.record.expected_coverage                                   # doctest: +SKIP
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from autorater.calibration import (
    CalibrationRecord,
    InsufficientReferencesError,
    MarkerOffset,
    SplitCalibrator,
    agreement_report,
    brier_score,
    drift_check,
    expected_calibration_error,
    format_agreement_table,
    marker_metrics,
    plot_agreement_table,
    plot_reliability,
    plot_risk_coverage,
)
from autorater.data.files import write_text_atomic
from autorater.data.labels import label_table
from autorater.data.suite import Suite
from autorater.device import DEFAULT_DEVICE
from autorater.rater import CALIBRATION_FILE, Rater, read_record
from autorater.serving.labelling.strata import stratum_fields


@dataclass
class CalibrationResult:
    record: CalibrationRecord
    report: dict  # agreement report plus calibration metrics
    report_dir: Path


def calibrate_model(model_dir: str | Path, suite: Suite, out: str | Path, target_agreement: float = 0.95,
                    confidence: float = 0.9, max_marker_uncertainty_s: float | None = None,
                    progress: bool = False, scaling_share: float = 0.2, seed: int = 0,
                    reference_ids: list[str] | None = None, device: str = DEFAULT_DEVICE,
                    allow_unverified: bool = False) -> CalibrationResult:
    """Fit and store the calibration of the model folder ``model_dir`` on ``suite``'s references.

    Args:
        scaling_share: share of the references (whole scenarios) that fit the temperature and shift; the
            rest certify the thresholds (``SplitCalibrator``).
        seed: seed of the split.
        reference_ids: calibrate on these references only (default: all), e.g. to keep others for judging.
        device: where the model rates the references ("auto": a GPU when present).
        allow_unverified: load weights without a checksum (``Autorater.from_pretrained``).
    """
    model_dir, out = Path(model_dir), Path(out)
    if not suite.references:
        raise ValueError(f"suite {suite.root} has no references.jsonl: calibration needs reference episodes "
                         f"with known outcomes")
    rater = Rater.load(model_dir, device, calibrated=False, allow_unverified=allow_unverified)  # raw scores
    refs = {r.continuation_id: r for r in suite.references
            if reference_ids is None or r.continuation_id in set(reference_ids)}
    if not refs:
        raise ValueError(f"none of the given reference_ids is a reference of {suite.root}")
    rows = [r for r in rater.rate_suite(suite, ids=list(refs), progress=progress, signature=True)
            if "error" not in r]
    if not rows:
        raise ValueError(f"none of the reference videos of {suite.root} could be decoded")
    ids = [r["continuation_id"] for r in rows]
    logits = np.array([r["logit"] for r in rows])
    spread = np.array([r["marker_spread_s"] for r in rows])
    y = np.array([refs[i].outcome == "success" for i in ids], dtype=int)

    scenario = [suite.get(i).scenario_id for i in ids]
    fitted = SplitCalibrator(target_agreement=target_agreement, confidence=confidence, scaling_share=scaling_share,
                             max_marker_uncertainty_s=max_marker_uncertainty_s, on_infeasible="route_all",
                             seed=seed).fit(logits, y, groups=scenario, marker_uncertainty=spread)
    scaler, policy, part = fitted.scaler_, fitted.policy_, fitted.scaling_mask_
    p_before, p = 1 / (1 + np.exp(-logits)), scaler.predict_proba(logits)
    marker, pred_marker, true_marker = fit_marker_offset(rows, refs)
    predicted = (p >= 0.5).astype(int)
    calibrated_marker = marker.transform(pred_marker, predicted)
    split = {**fitted.split_info(), **fitted.calibration_,
             "scaling_ids": [i for i, m in zip(ids, part) if m],
             "threshold_ids": [i for i, m in zip(ids, part) if not m]}
    record = CalibrationRecord.from_fitted(scaler, policy, logits, suite.info.name, suite.info.version, marker, split)
    record.input_sample = [{**stratum_fields(suite, r["continuation_id"]), **r["inputs"]} for r in rows]
    record.reference_profile = [[round(float(max(q, 1 - q)), 6), int((q >= 0.5) == bool(t))]
                                for q, t in zip(scaler.predict_proba(logits), y)]
    record.annotator_agreement = _annotator_agreement(suite, refs)
    record.to_json(model_dir / CALIBRATION_FILE)

    category = [suite.scenario_by_id[s].category for s in scenario]
    report = agreement_report(ids, y, true_marker, scenario, category, p, calibrated_marker,
                              label_table(suite.annotations).to_dict("list"))
    report["calibration"] = {"temperature": record.temperature, "bias": record.bias, "n_references": len(ids),
                             "ece_before": expected_calibration_error(p_before, y),
                             "ece_after": expected_calibration_error(p, y),
                             "brier_before": brier_score(p_before, y), "brier_after": brier_score(p, y),
                             "ece_cv": fitted.calibration_["ece_cv"], "brier_cv": fitted.calibration_["brier_cv"],
                             "ece_threshold_part": fitted.calibration_["ece_threshold_part"],
                             "n_folds": fitted.calibration_["n_folds"], **fitted.split_info(),
                             **marker.to_dict(),
                             "marker_error_before_s": _agreed_marker_error(true_marker, pred_marker, y, predicted),
                             "marker_error_after_s": _agreed_marker_error(true_marker, calibrated_marker, y, predicted)}
    report["policy"] = policy.to_dict()
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "report.json", json.dumps(report, indent=1, default=_json_default) + "\n")
    plot_reliability(p_before, p, y, out / "reliability.png")
    curve = policy.risk_coverage_curve(p[~part], y[~part], marker_uncertainty=spread[~part])  # the certifying part
    point = (record.expected_coverage, 1 - record.empirical_agreement) if record.feasible and \
        record.empirical_agreement is not None else None
    plot_risk_coverage(curve, point, out / "risk_coverage.png")
    plot_agreement_table(report, out / "agreement.png")
    return CalibrationResult(record, report, out)


def _annotator_agreement(suite: Suite, refs: dict) -> float | None:
    """How often the annotators' majority agrees with the gold outcome of the references they labelled (a tied vote is
    left out); None when no reference has a human label."""
    votes: dict[str, list[str]] = {}
    for a in suite.annotations:
        if a.continuation_id in refs:
            votes.setdefault(a.continuation_id, []).append(a.outcome)
    right = []
    for cid, outcomes in votes.items():
        yes = outcomes.count("success")
        if 2 * yes != len(outcomes):  # a tie says nothing
            right.append(("success" if 2 * yes > len(outcomes) else "failure") == refs[cid].outcome)
    return round(float(np.mean(right)), 4) if right else None


def fit_marker_offset(rows: list[dict], refs: dict) -> tuple[MarkerOffset, np.ndarray, np.ndarray]:
    """The model inherits its annotators' reaction lag; the references carry the moment itself.

    Args:
        rows: the model's (uncalibrated) predictions of reference episodes, with ``logit`` and ``marker_s``.
        refs: continuation id -> its ``Reference``.

    Returns:
        The ``MarkerOffset`` fitted on the references whose outcome the model got right, and the
        predicted and reference markers (seconds, NaN where none) in the order of ``rows``.
    """
    y = np.array([refs[r["continuation_id"]].outcome == "success" for r in rows], dtype=int)
    predicted = (np.array([r["logit"] for r in rows], dtype=float) >= 0).astype(int)  # temperature-free
    pred = np.array([r["marker_s"] for r in rows], dtype=float)
    true = np.array([np.nan if refs[r["continuation_id"]].marker_s is None else refs[r["continuation_id"]].marker_s
                     for r in rows], dtype=float)
    right = predicted == y
    return MarkerOffset().fit(pred[right], true[right], y[right]), pred, true


def _agreed_marker_error(true_s, pred_s, y, predicted) -> float:
    """Median |marker error| on references of either outcome that the model predicted right (NaN if none)."""
    right = predicted == y
    return marker_metrics(true_s[right], pred_s[right])["median_abs_error_s"]


def check_drift(model_dir: str | Path, logits) -> dict | None:
    """Compare new raw scores with those of the calibration suite (``calibration.json``); None if uncalibrated.

    Returns:
        ``drift_check``'s result plus ``calibration_suite`` (name@version): PSI, KS test, ``drifted``, message.
    """
    logits = np.asarray([x for x in logits if np.isfinite(x)], dtype=float)
    record = read_record(model_dir)
    if record is None or logits.size == 0 or not record.score_count:
        return None
    result = drift_check(record.score_sample(), logits)
    result["calibration_suite"] = f"{record.reference_suite}@{record.reference_suite_version}"
    return result


def _num(x) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{x:.3f}"


def _json_default(x):
    return None if isinstance(x, float) and not np.isfinite(x) else float(x)


def format_calibration(result: CalibrationResult, per_category: bool = True) -> str:
    """The agreement table (per-category rows optional), the temperature and the operating point."""
    r, c = result.record, result.report["calibration"]
    table = format_agreement_table(result.report)
    if not per_category:  # per-category rows are the indented ones
        table = "\n".join(line for line in table.splitlines() if not line.startswith("  "))
    lines = [table, "",
             f"temperature {r.temperature:.3f}, shift {r.bias:+.3f}, fitted on {r.n_scaling} of "
             f"{c['n_references']} references (whole scenarios); the other {r.n_threshold} certify the thresholds"
             + (" (too few of a class among the first to fit a scaler: scores left as they are)"
                if "not fitted" in r.split_method else ""),
             f"out of sample (cross-validated over {c.get('n_folds', 0)} scenario folds): ECE {_num(c['ece_before'])}"
             f" raw -> {_num(c['ece_cv'])} calibrated, Brier {_num(c['brier_before'])} -> {_num(c['brier_cv'])}; "
             f"the deployed scaler on the references it never saw: ECE {_num(c['ece_threshold_part'])}",
             f"marker offset {r.marker_offset_success_s:+.3f} s on successes ({r.marker_offset_n[0]} references), "
             f"{r.marker_offset_failure_s:+.3f} s on failures ({r.marker_offset_n[1]}): median |error| "
             f"{c['marker_error_before_s']:.3f} -> {c['marker_error_after_s']:.3f} s"]
    if r.feasible:
        lines.append(f"operating point: auto-success if p >= {r.t_success:.3f}, auto-failure if p <= {r.t_fail:.3f}, "
                     f"else a human. Expected coverage {r.expected_coverage:.1%}; with {r.confidence:.0%} confidence "
                     f"the auto-labelled part agrees with the truth at >= {r.bound:.3f} (target {r.target_agreement}), "
                     f"assuming the references are drawn like the suites it will label (certified on "
                     f"{r.n_threshold} references the scaler never saw: the guarantee covers the procedure as run).")
    else:
        lines.append(f"no operating point reaches agreement {r.target_agreement} with {r.confidence:.0%} confidence "
                     f"on these {r.n_references} references: every continuation goes to a human. Add references "
                     f"or lower --target-agreement.")
    lines.append(f"written: {result.report_dir}/report.json, reliability.png, risk_coverage.png, agreement.png")
    return "\n".join(lines)


__all__ = ["CalibrationResult", "InsufficientReferencesError", "calibrate_model", "check_drift", "fit_marker_offset",
           "format_calibration"]
