"""Statistics of a suite: what is in it, how often agents succeed, and how well its annotators agree."""

from __future__ import annotations

from collections import Counter
from typing import Sequence

import numpy as np
import pandas as pd

from autorater.data.labels import (
    annotator_accuracy,
    dawid_skene,
    fleiss_kappa,
    krippendorff_alpha,
    label_table,
    marker_spread,
    reference_table,
)
from autorater.data.suite import TRUTH_FILE, Suite, load_truth

__all__ = ["suite_stats", "format_stats", "agent_rule_balanced_accuracy"]


def agent_rule_balanced_accuracy(agents: Sequence[str], outcomes: Sequence[str]) -> float | None:
    """How well a continuation's agent name alone predicts its outcome: the balanced accuracy of the rule
    "each agent's majority outcome" fitted and scored on the same continuations (in sample, so an upper bound
    on what the name can tell). A tie counts as a coin (half right). None when every outcome is the same.

    A suite where this is high lets a model learn the agent's style instead of the outcome (docs/design.md,
    section 4); the benchmark's training suite aims at 0.75 or less.

    Example:
        >>> agent_rule_balanced_accuracy(["a", "a", "a", "b", "b"], ["success", "success", "failure",
        ...                                                          "failure", "failure"])
        0.8333
    """
    if len(agents) != len(outcomes):
        raise ValueError(f"agents and outcomes differ in length ({len(agents)} vs {len(outcomes)})")
    bad = sorted({o for o in outcomes if o not in ("success", "failure")})
    if bad:
        raise ValueError(f"outcomes must be 'success' or 'failure', got {', '.join(map(str, bad))}")
    counts: dict[str, Counter] = {}
    for agent, outcome in zip(agents, outcomes):
        counts.setdefault(agent, Counter())[outcome] += 1
    right = Counter()  # expected correct predictions per true outcome
    for c in counts.values():
        says_success = 1.0 if c["success"] > c["failure"] else 0.0 if c["success"] < c["failure"] else 0.5
        right["success"] += says_success * c["success"]
        right["failure"] += (1.0 - says_success) * c["failure"]
    total = Counter(outcomes)
    if not total["success"] or not total["failure"]:
        return None
    return round(0.5 * (right["success"] / total["success"] + right["failure"] / total["failure"]), 4)


def suite_stats(suite: Suite) -> dict:
    """Counts, success rates (annotator aggregate and references), agreement, marker spread, and how well the
    agent's name alone predicts the outcome (``agent_rule_balanced_accuracy``: by the annotators' aggregate,
    and by the simulator's truth where the suite has ``simulator_truth.jsonl``), as a JSON-able dict."""
    cont = pd.DataFrame({"continuation_id": suite.continuation_ids(),
                         "agent": [c.agent_id for c in suite.continuations],
                         "category": [suite.scenario_by_id[c.scenario_id].category for c in suite.continuations]})
    out: dict = {"suite": {"name": suite.info.name, "version": suite.info.version},
                 "scenarios": len(suite.scenarios), "continuations": len(suite.continuations),
                 "annotations": len(suite.annotations), "references": len(suite.references),
                 "by_category": dict(Counter(cont["category"])), "by_agent": dict(Counter(cont["agent"]))}
    table = label_table(suite.annotations)
    if len(table):
        agg = dawid_skene(table)
        outcome = agg["outcome"].reindex(cont["continuation_id"]).to_numpy()
        cont["aggregate_success"] = np.where(pd.isna(outcome), np.nan, outcome == "success")
        out["agent_rule_balanced_accuracy"] = {"annotators": agent_rule_balanced_accuracy(
            list(cont["agent"][cont["aggregate_success"].notna()]),
            ["success" if v else "failure" for v in cont["aggregate_success"].dropna()])}
        out["success_rate_annotators"] = {
            "overall": _mean(cont["aggregate_success"]),
            "by_agent": {k: _mean(v) for k, v in cont.groupby("agent")["aggregate_success"]},
            "by_category": {k: _mean(v) for k, v in cont.groupby("category")["aggregate_success"]}}
        spread = marker_spread(table)
        out["agreement"] = {"krippendorff_alpha": _finite(krippendorff_alpha(table)),  # None when undefined:
                            "fleiss_kappa": _finite(fleiss_kappa(table)),  # NaN is not JSON
                            "labels_per_continuation": float(table.groupby("continuation_id").size().mean()),
                            "marker_missing_share": float(table["marker_s"].isna().mean()),
                            "marker_spread_median_s": float(spread.median()) if len(spread) else None}
    if (suite.root / TRUTH_FILE).exists():
        truth = load_truth(suite.root)
        out.setdefault("agent_rule_balanced_accuracy", {})["truth"] = agent_rule_balanced_accuracy(
            [t["agent"] for t in truth], [t["outcome"] for t in truth])
    if suite.references:
        gold = reference_table(suite.references)
        ref = cont.set_index("continuation_id").loc[gold.index]
        ref["gold_success"] = (gold["outcome"] == "success").to_numpy()
        out["success_rate_references"] = {
            "overall": _mean(ref["gold_success"]),
            "by_agent": {k: _mean(v) for k, v in ref.groupby("agent")["gold_success"]}}
        if len(table):
            acc = annotator_accuracy(table, gold)
            out["annotators_on_references"] = {a: {k: _num(v) for k, v in row.items()}
                                               for a, row in acc.to_dict(orient="index").items()}
    return out


def _mean(values) -> float | None:
    values = pd.to_numeric(pd.Series(values), errors="coerce").dropna()
    return round(float(values.mean()), 4) if len(values) else None


def _finite(v: float) -> float | None:
    return float(v) if np.isfinite(v) else None


def _num(v):
    return None if isinstance(v, float) and np.isnan(v) else (round(float(v), 4) if isinstance(v, float) else int(v))


def format_stats(stats: dict) -> str:
    """A readable text block of :func:`suite_stats`."""
    lines = [f"suite {stats['suite']['name']} {stats['suite']['version']}: {stats['scenarios']} scenarios, "
             f"{stats['continuations']} continuations, {stats['annotations']} annotations, "
             f"{stats['references']} references"]
    rates = stats.get("success_rate_annotators", {})
    gold = stats.get("success_rate_references", {})
    lines.append(f"\n{'agent':<14}{'n':>6}{'success (annotators)':>22}{'success (references)':>22}")
    for agent, n in sorted(stats["by_agent"].items()):
        lines.append(f"{agent:<14}{n:>6}{_fmt(rates.get('by_agent', {}).get(agent)):>22}"
                     f"{_fmt(gold.get('by_agent', {}).get(agent)):>22}")
    lines.append(f"\n{'category':<14}{'n':>6}{'success (annotators)':>22}")
    for cat, n in sorted(stats["by_category"].items()):
        lines.append(f"{cat:<14}{n:>6}{_fmt(rates.get('by_category', {}).get(cat)):>22}")
    rule = stats.get("agent_rule_balanced_accuracy", {})
    if rule:
        lines.append("\nthe agent's name alone predicts the outcome with balanced accuracy "
                     + ", ".join(f"{_fmt(v)} ({k})" for k, v in rule.items())
                     + " (in sample; the lower, the less a model can learn the agent instead of the outcome)")
    if "agreement" in stats:
        a = stats["agreement"]
        lines.append(f"\nannotator agreement: Krippendorff alpha {_fmt(a['krippendorff_alpha'])}, "
                     f"Fleiss kappa {_fmt(a['fleiss_kappa'])}, {a['labels_per_continuation']:.2f} labels per "
                     f"continuation, markers missing {a['marker_missing_share']:.1%}, marker spread (median "
                     f"abs. deviation) {_fmt(a['marker_spread_median_s'])} s")
    if "annotators_on_references" in stats:
        lines.append(f"\n{'annotator':<12}{'n refs':>8}{'accuracy':>10}{'bal. acc.':>11}")
        for ann, row in sorted(stats["annotators_on_references"].items()):
            lines.append(f"{ann:<12}{row['n']:>8}{_fmt(row['accuracy']):>10}{_fmt(row['balanced_accuracy']):>11}")
    return "\n".join(lines)


def _fmt(v) -> str:
    return "-" if v is None or (isinstance(v, float) and np.isnan(v)) else f"{v:.3f}"
