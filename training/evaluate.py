"""Evaluation of predictions against gold labels, with the human annotators side by side.

Gold is the suite's ``references.jsonl``; for synthetic suites it can also be the full simulator
truth (``simulator_truth.jsonl``), which covers every continuation. Every method (the autorater,
a baseline, an annotator, the annotators' majority) is scored by the same functions from
``calibration`` on the same gold items.

Example:
    >>> report = evaluate(suite, predictions, gold="truth")        # doctest: +SKIP
    >>> print(format_report(report))                               # doctest: +SKIP
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from autorater.calibration import auroc, failure_mode_metrics, marker_metrics, outcome_metrics, rank_metrics
from autorater.data.labels import label_table, majority_vote, reference_table
from autorater.data.suite import Suite, load_truth


def gold_table(suite: Suite, gold: str = "references") -> pd.DataFrame:
    """Gold labels indexed by continuation_id (``outcome``, ``marker_s``): ``references`` or ``truth``."""
    if gold == "references":
        if not suite.references:
            raise ValueError(f"suite {suite.root} has no references.jsonl; evaluate against gold='truth' "
                             f"(synthetic suites) or add reference episodes")
        return reference_table(suite.references)
    if gold == "truth":
        try:
            return reference_table(load_truth(suite.root))
        except FileNotFoundError as err:
            raise ValueError(f"{err}; use gold='references'") from None
    raise ValueError(f"gold must be 'references' or 'truth', got {gold!r}")


def score(gold: pd.DataFrame, pred: pd.DataFrame, groups: dict[str, pd.Series] | None = None) -> dict:
    """Outcome and marker metrics of ``pred`` (indexed by continuation_id: outcome, marker_s) on shared items.

    Marker error is measured on gold successes predicted as successes (docs/design.md section 5); the failure
    mode on gold failures with a known mode predicted as failures (``failure_mode``: accuracy and confusion
    table, overall and per group), when ``pred`` has a ``failure_mode`` column.
    """
    ids = gold.index.intersection(pred.index)
    y = (gold.loc[ids, "outcome"] == "success").to_numpy().astype(int)
    yhat = (pred.loc[ids, "outcome"] == "success").to_numpy().astype(int)
    out = {"outcome": outcome_metrics(y, yhat)}
    # the score AUROC ranks by: the logit (no ties where P(success) rounds to 0 or 1), else P(success)
    rank_by = next((c for c in ("logit", "p_success") if c in pred.columns and pred.loc[ids, c].notna().all()), None)
    p = pred.loc[ids, rank_by].to_numpy(float) if rank_by else None
    if p is not None:  # ranking, beside the threshold's balanced accuracy (a method with no score: none)
        out["outcome"]["auroc"] = auroc(y, p)
    both = (y == 1) & (yhat == 1)
    out["marker"] = marker_metrics(gold.loc[ids, "marker_s"].to_numpy(float)[both],
                                   pred.loc[ids, "marker_s"].to_numpy(float)[both])
    for name, series in (groups or {}).items():
        g = series.reindex(ids).to_numpy()
        out[f"by_{name}"] = {str(k): outcome_metrics(y[g == k], yhat[g == k])
                             | ({} if p is None else {"auroc": auroc(y[g == k], p[g == k])}) for k in sorted(set(g))}
    if "failure_mode" in pred.columns and "failure_mode" in gold.columns:
        out["failure_mode"] = failure_mode_score(gold.loc[ids, "failure_mode"], pred.loc[ids, "failure_mode"],
                                                 y, yhat, {k: v.reindex(ids) for k, v in (groups or {}).items()})
    return out


def failure_mode_score(true_mode: pd.Series, pred_mode: pd.Series, y: np.ndarray, yhat: np.ndarray,
                       groups: dict[str, pd.Series] | None = None) -> dict:
    """Failure-mode accuracy and confusion among gold failures with a known mode that were predicted failures.

    Args:
        true_mode, pred_mode: (n,) gold and predicted modes (None where unknown or not predicted).
        y, yhat: (n,) gold and predicted outcomes, 1 = success.
        groups: name -> (n,) group of each item (``category``): the same numbers per group.

    Returns:
        ``failure_mode_metrics`` of those items, plus ``by_<name>`` per group (accuracy, n, confusion).
    """
    known = true_mode.notna().to_numpy() & (true_mode.astype(str) != "").to_numpy()
    keep = (y == 0) & (yhat == 0) & known
    out = failure_mode_metrics(true_mode.to_numpy(object)[keep], pred_mode.to_numpy(object)[keep])
    for name, series in (groups or {}).items():
        g = series.to_numpy(object)[keep]
        out[f"by_{name}"] = {str(k): failure_mode_metrics(true_mode.to_numpy(object)[keep][g == k],
                                                          pred_mode.to_numpy(object)[keep][g == k])
                             for k in sorted(set(g), key=str)}
    return out


def predictions_table(predictions: Sequence[dict]) -> pd.DataFrame:
    rows = [p for p in predictions if "error" not in p]
    table = pd.DataFrame(rows).set_index("continuation_id")
    return table[[c for c in ("outcome", "marker_s", "p_success", "logit", "failure_mode") if c in table.columns]]


def evaluate(suite: Suite, predictions: Sequence[dict] | dict[str, Sequence[dict]], gold: str = "references",
             include_humans: bool = True) -> dict:
    """Score one or several methods' predictions and the human annotators on the same gold items.

    Args:
        suite: the suite the predictions are for.
        predictions: SUITE_FORMAT prediction rows, or ``{method name: rows}``.
        gold: ``references`` or ``truth``.
        include_humans: add each annotator and the annotators' majority vote.

    Returns:
        ``{"gold", "n_gold", "methods": {name: scores}, "agent_rates": {...}}`` (JSON-able).
    """
    methods = predictions if isinstance(predictions, dict) else {"autorater": predictions}
    g = gold_table(suite, gold)
    agent = pd.Series({c.continuation_id: c.agent_id for c in suite.continuations})
    category = pd.Series({c.continuation_id: suite.scenario_by_id[c.scenario_id].category
                          for c in suite.continuations})
    groups = {"category": category, "agent": agent}
    report: dict = {"suite": f"{suite.info.name}@{suite.info.version}", "gold": gold, "n_gold": len(g),
                    "methods": {}}
    tables = {name: predictions_table(rows) for name, rows in methods.items()}
    for name, table in tables.items():
        report["methods"][name] = score(g, table, groups)
    if include_humans and suite.annotations:
        labels = label_table(suite.annotations)
        labels = labels[labels["continuation_id"].isin(g.index)]
        if len(labels):
            report["methods"]["human_majority"] = score(g, majority_vote(labels), groups)
            per = {}
            for annotator, rows in labels.groupby("annotator_id"):
                per[annotator] = score(g, rows.set_index("continuation_id")[["outcome", "marker_s", "failure_mode"]],
                                       {"category": category})
            report["annotators"] = per
            bas = [v["outcome"]["balanced_accuracy"] for v in per.values()]
            report["methods"]["human_annotator_mean"] = {"outcome": {
                "balanced_accuracy": float(np.nanmean(bas)),
                "accuracy": float(np.nanmean([v["outcome"]["accuracy"] for v in per.values()])),
                "n_annotators": len(per)}, "marker": {"median_abs_error_s": float(np.nanmedian(
                    [v["marker"]["median_abs_error_s"] for v in per.values()]))}}
    report["agent_rates"] = _agent_rates(g, tables, agent)
    return report


def _agent_rates(gold: pd.DataFrame, tables: dict[str, pd.DataFrame], agent: pd.Series) -> dict:
    """Per-agent success rate by each method vs gold on the gold items, with Spearman and MMRV."""
    truth = (gold["outcome"] == "success").groupby(agent.reindex(gold.index)).mean().to_dict()
    out = {"gold": {k: round(float(v), 4) for k, v in truth.items()}}
    for name, table in tables.items():
        ids = gold.index.intersection(table.index)
        est = (table.loc[ids, "outcome"] == "success").groupby(agent.reindex(ids)).mean().to_dict()
        out[name] = {"rates": {k: round(float(v), 4) for k, v in est.items()}, **rank_metrics(truth, est)}
    return out


def format_report(report: dict) -> str:
    """One fixed-width table: methods as rows, the main metrics as columns."""
    head = (f"{'method':<26}{'n':>6}{'bal.acc':>9}{'auroc':>8}{'acc':>8}{'prec':>8}{'kappa':>8}"
            f"{'marker |err| s':>16}{'<=0.5s':>8}{'spearman':>10}{'mmrv':>8}")
    lines = [f"{report['suite']} against {report['gold']} ({report['n_gold']} gold items)", head, "-" * len(head)]
    rates = report.get("agent_rates", {})
    for name, s in report["methods"].items():
        o, m = s["outcome"], s.get("marker", {})
        r = rates.get(name, {})
        lines.append(f"{name:<26}{o.get('n', o.get('n_annotators', '')):>6}{_f(o.get('balanced_accuracy')):>9}"
                     f"{_f(o.get('auroc')):>8}{_f(o.get('accuracy')):>8}{_f(o.get('success_precision')):>8}"
                     f"{_f(o.get('cohen_kappa')):>8}"
                     f"{_f(m.get('median_abs_error_s')):>16}{_f(m.get('within_0_5s')):>8}"
                     f"{_f(r.get('spearman')):>10}{_f(r.get('mmrv')):>8}")
    return "\n".join(lines)


def _f(v) -> str:
    if v is None or isinstance(v, str):
        return "-" if v is None else v
    return "-" if not np.isfinite(v) else f"{v:.3f}"


def format_failure_modes(report: dict, method: str = "autorater") -> str:
    """The failure-mode accuracy of one method, its confusion table (rows: true mode) and per-category accuracy."""
    fm = report["methods"].get(method, {}).get("failure_mode")
    if not fm or not fm["n"]:
        return f"{method}: no gold failure with a known mode was predicted a failure"
    modes = sorted({p for row in fm["confusion"].values() for p in row} | set(fm["confusion"]))
    width = max(12, *(len(m) + 2 for m in modes))
    lines = [f"{method}: failure mode right on {fm['accuracy']:.3f} of {fm['n']} gold failures predicted as failures",
             f"{'true/predicted':<{width}}" + "".join(f"{m:>{width}}" for m in modes)]
    for t in sorted(fm["confusion"]):
        lines.append(f"{t:<{width}}" + "".join(f"{fm['confusion'][t].get(m, 0):>{width}}" for m in modes))
    for k, v in fm.get("by_category", {}).items():
        lines.append(f"  {k:<20}{v['n']:>6}{_f(v['accuracy']):>9}")
    return "\n".join(lines)


def by_group_table(report: dict, method: str, key: str) -> str:
    """Balanced accuracy of one method per category or agent."""
    groups = report["methods"][method].get(f"by_{key}", {})
    rows = [f"{k:<20}{m['n']:>6}{_f(m['balanced_accuracy']):>9}{_f(m.get('auroc')):>8}{_f(m['accuracy']):>8}"
            for k, m in groups.items()]
    return "\n".join([f"{key:<20}{'n':>6}{'bal.acc':>9}{'auroc':>8}{'acc':>8}"] + rows)
