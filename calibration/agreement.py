"""Agreement of the autorater and of each human annotator with gold reference labels, side by side."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ._checks import as_binary, as_float, as_probs, same_length
from .metrics import bootstrap_ci, marker_metrics, outcome_metrics_unchecked

_COLUMNS = ("continuation_id", "annotator_id", "outcome", "marker_s")
_OUTCOMES = {1: 1, 0: 0, "success": 1, "failure": 0}
_CI_METRICS = ("balanced_accuracy", "accuracy", "cohen_kappa")
_QUANTILES = (10, 25, 50, 75, 90)


def agreement_report(
    continuation_ids,
    gold_outcome,
    gold_marker_s,
    group_ids,
    categories,
    p_success,
    pred_marker_s,
    annotations,
    *,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> dict:
    """Measures the autorater and the annotators against gold labels of reference episodes.

    Args:
        continuation_ids: (n,) unique ids of the reference continuations.
        gold_outcome: (n,) gold outcomes, 1 = success.
        gold_marker_s: (n,) gold markers in seconds (NaN/None where unknown).
        group_ids: (n,) scenario ids; intervals resample whole scenarios.
        categories: (n,) scenario categories, for the per-category breakdown.
        p_success: (n,) the autorater's calibrated P(success); its label is ``p >= 0.5``.
        pred_marker_s: (n,) the autorater's predicted markers in seconds.
        annotations: the long label table, either rows ``(continuation_id, annotator_id,
            outcome, marker_s, ...)`` or a mapping from those column names to equal-length
            sequences (e.g. ``df.to_dict("list")``). ``outcome`` is 1/0 or "success"/"failure",
            ``marker_s`` seconds or NaN/None; extra columns, and rows about continuations that are
            not references, are ignored. One label per annotator and continuation.
        n_boot: bootstrap resamples per interval.
        level: coverage of the intervals.
        seed: seed of the bootstrap.

    Returns:
        A JSON-able dict (undefined values are None): ``n_references``, ``level``;
        ``rows``: one per rater, in the order autorater, each annotator (on the references they
        labelled), ``human_majority`` (majority vote; ties and unlabelled references left out),
        ``autorater_vs_human_majority`` (the autorater scored against that majority), each with
        ``name``, ``kind``, ``reference`` (``"gold"`` or ``"human_majority"``), ``overall`` and
        ``per_category``: ``outcome_metrics`` plus ``ci`` = ``[lo, hi]`` for balanced accuracy,
        accuracy and kappa; ``markers``: ``raters``, |error| vs gold on the gold successes each
        rater called success, for the autorater and each annotator (``marker_metrics`` plus
        quantiles), and ``annotator_spread``, the annotators' own spread (per continuation, the
        median absolute deviation of their markers from their median); ``krippendorff_alpha``
        (nominal) of the annotators, without and with the autorater as one more rater.
    """
    ids = np.asarray(continuation_ids)
    gold, gold_marker = as_binary(gold_outcome, "gold_outcome"), as_float(gold_marker_s, "gold_marker_s")
    groups, categories = np.asarray(group_ids), np.asarray(categories)
    p, pred_marker = as_probs(p_success, "p_success"), as_float(pred_marker_s, "pred_marker_s")
    n = same_length(
        continuation_ids=ids, gold_outcome=gold, gold_marker_s=gold_marker, group_ids=groups,
        categories=categories, p_success=p, pred_marker_s=pred_marker,
    )
    index = {cid: i for i, cid in enumerate(ids.tolist())}
    if len(index) != n:
        raise ValueError("continuation_ids of the references must be unique; drop the duplicated references")
    annotators, labels, markers = _annotation_matrix(annotations, index)  # labels, markers: (n_annotators, n)
    model = (p >= 0.5).astype(int)
    votes, successes = (~np.isnan(labels)).sum(axis=0), np.nansum(labels, axis=0)
    majority, has_majority = (2 * successes > votes).astype(int), 2 * successes != votes
    boot = {"n_boot": n_boot, "level": level, "seed": seed}

    def row(name, kind, reference, y_true, y_rater, keep):
        breakdown = _breakdown(y_true[keep], y_rater[keep], groups[keep], categories[keep], boot)
        return {"name": name, "kind": kind, "reference": reference, **breakdown}

    rows = [row("autorater", "autorater", "gold", gold, model, np.ones(n, dtype=bool))]
    rows += [row(a, "annotator", "gold", gold, labels[j], ~np.isnan(labels[j])) for j, a in enumerate(annotators)]
    rows += [
        row("human_majority", "human_majority", "gold", gold, majority, has_majority),
        row("autorater_vs_human_majority", "autorater", "human_majority", majority, model, has_majority),
    ]
    said = np.vstack([model, labels])  # (1 + n_annotators, n)
    alpha = {"annotators": _alpha(labels), "annotators_and_autorater": _alpha(said)}
    report = {"n_references": n, "level": level, "rows": rows, "krippendorff_alpha": alpha,
              "markers": _marker_section(gold, gold_marker, said, np.vstack([pred_marker, markers]), annotators)}
    return _jsonable({k: report[k] for k in ("n_references", "level", "rows", "markers", "krippendorff_alpha")})


def _marker_section(gold: np.ndarray, gold_marker: np.ndarray, said: np.ndarray, said_markers: np.ndarray,
                    annotators: list[str]) -> dict:
    """|error| of each rater's markers against gold on the gold successes it called success (the autorater first,
    then each annotator: ``said``, ``said_markers`` (1 + n_annotators, n)), and the annotators' own spread."""
    called = (said == 1) & (gold == 1)  # gold successes each rater called success
    names = ["autorater", *annotators]
    errors = {name: _marker_summary(gold_marker[c], m[c]) for name, c, m in zip(names, called, said_markers)}
    return {"raters": errors, "annotator_spread": _spread(np.where(called[1:], said_markers[1:], np.nan))}


def format_agreement_table(report: dict) -> str:
    """Renders an ``agreement_report`` as a fixed-width text table."""
    header = f"{'rater':<32}{'vs':<16}{'n':>5}  " + "".join(f"{m:<24}" for m in _CI_METRICS) + "success_precision"
    lines = [
        f"Agreement on {report['n_references']} reference episodes "
        f"({100 * report['level']:g}% bootstrap intervals, resampling scenarios)",
        "",
        header,
        "-" * len(header),
    ]
    for row in report["rows"]:
        lines.append(_table_line(row["name"], row["reference"], row["overall"]))
        lines += [_table_line(f"  {category}", "", entry) for category, entry in row["per_category"].items()]
    lines += ["", "Markers on the gold successes each rater called success", "",
              f"{'rater':<32}{'n':>5}  median |error| s  within 0.5 s  within 1 s"]
    lines += [
        f"{name:<32}{m['n']:>5}  {_num(m['median_abs_error_s']):<17}{_num(m['within_0_5s']):<14}{_num(m['within_1s'])}"
        for name, m in report["markers"]["raters"].items()
    ]
    spread, alpha = report["markers"]["annotator_spread"], report["krippendorff_alpha"]
    lines += [
        f"annotators' marker spread (MAD around their median): median {_num(spread['median_mad_s'])} s "
        f"over {spread['n_continuations']} continuations",
        f"Krippendorff's alpha (nominal): annotators {_num(alpha['annotators'])}, "
        f"annotators + autorater {_num(alpha['annotators_and_autorater'])}",
    ]
    return "\n".join(lines)


def _annotation_matrix(annotations, index: dict) -> tuple[list, np.ndarray, np.ndarray]:
    """Long table -> (annotator ids, outcomes, markers), (n_annotators, n_references), NaN where unlabelled."""
    if isinstance(annotations, Mapping):
        missing = [c for c in _COLUMNS if c not in annotations]
        if missing:
            raise KeyError(f"the annotation table lacks the columns {missing}; it needs {list(_COLUMNS)}")
        annotations = zip(*(annotations[c] for c in _COLUMNS))
    rows = [tuple(r[:4]) for r in annotations if r[0] in index]
    annotators = sorted({r[1] for r in rows})
    column = {a: j for j, a in enumerate(annotators)}
    labels = np.full((len(annotators), len(index)), np.nan)
    markers = np.full_like(labels, np.nan)
    for cid, aid, outcome, marker_s in rows:
        j, i = column[aid], index[cid]
        if outcome not in _OUTCOMES:
            raise ValueError(f"{aid!r} labelled {cid!r} with outcome {outcome!r}; use 1/'success' or 0/'failure'")
        if not np.isnan(labels[j, i]):
            raise ValueError(f"{aid!r} labelled {cid!r} twice; keep one label per annotator and continuation")
        labels[j, i], markers[j, i] = _OUTCOMES[outcome], np.nan if marker_s is None else marker_s
    return annotators, labels, markers


def _breakdown(y_true, y_rater, groups, categories, boot: dict) -> dict:
    """Metrics with intervals overall and for each category the rater has episodes in."""
    per_category = {
        str(c): _with_ci(y_true[categories == c], y_rater[categories == c], groups[categories == c], boot)
        for c in np.unique(categories)
    }
    return {"overall": _with_ci(y_true, y_rater, groups, boot), "per_category": per_category}


def _with_ci(y_true, y_rater, groups, boot: dict) -> dict:
    """``outcome_metrics`` plus bootstrap intervals (scenarios resampled) of ``_CI_METRICS``."""
    y_true, y_rater = as_binary(y_true, "y_true"), as_binary(y_rater, "rater outcomes")
    metrics = outcome_metrics_unchecked(y_true, y_rater)
    if metrics["n"] == 0:
        return {**metrics, "ci": {m: [None, None] for m in _CI_METRICS}}

    def statistic(t, r):
        values = outcome_metrics_unchecked(t, r)
        return [values[m] for m in _CI_METRICS]

    _, lo, hi = bootstrap_ci(statistic, y_true, y_rater, groups=groups, **boot)
    return {**metrics, "ci": {m: [low, high] for m, low, high in zip(_CI_METRICS, lo, hi)}}


def _quantiles(x: np.ndarray) -> dict:
    """{"p10": ..., "p90": ...} of x, None when x is empty."""
    values = np.percentile(x, _QUANTILES) if x.size else [None] * len(_QUANTILES)
    return {f"p{q}": v for q, v in zip(_QUANTILES, values)}


def _marker_summary(true_s: np.ndarray, pred_s: np.ndarray) -> dict:
    """``marker_metrics`` plus quantiles of |error| in seconds."""
    error = np.abs(true_s - pred_s)
    return {**marker_metrics(true_s, pred_s), "abs_error_quantiles_s": _quantiles(error[~np.isnan(error)])}


def _spread(markers: np.ndarray) -> dict:
    """Annotators' own marker spread: per continuation with >= 2 markers, MAD around their median."""
    markers = markers[:, (~np.isnan(markers)).sum(axis=0) >= 2]  # (n_annotators, n_continuations)
    mad = np.nanmedian(np.abs(markers - np.nanmedian(markers, axis=0)), axis=0) if markers.size else np.zeros(0)
    return {
        "median_mad_s": float(np.median(mad)) if mad.size else None,
        "mad_quantiles_s": _quantiles(mad),
        "n_continuations": int(mad.size),
    }


def _alpha(reliability: np.ndarray) -> float:
    """Krippendorff's alpha (nominal) of a (raters, units) matrix with NaN for missing; NaN if undefined."""
    import krippendorff  # here, not at import: training imports the calibration package, and needs no alpha

    try:
        return float(krippendorff.alpha(reliability_data=reliability, level_of_measurement="nominal"))
    except ValueError:  # a single value, or no unit rated twice: alpha is undefined
        return float("nan")


def _jsonable(x):
    """Plain Python containers and numbers, NaN as None."""
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, np.ndarray)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (float, np.floating)):
        return None if np.isnan(x) else float(x)
    if isinstance(x, np.integer):
        return int(x)
    return x


def _table_line(label: str, reference: str, entry: dict) -> str:
    cells = "".join(f"{_num(entry[m])} [{_num(entry['ci'][m][0])}, {_num(entry['ci'][m][1])}]".ljust(24)
                    for m in _CI_METRICS)
    return f"{label:<32}{reference:<16}{entry['n']:>5}  {cells}{_num(entry['success_precision'])}"


def _num(x) -> str:
    return "-" if x is None else f"{x:.3f}"
