"""The canonical long label table, its aggregation (majority vote, Dawid-Skene) and agreement statistics.

One row per label: ``continuation_id, annotator_id, outcome, marker_s, failure_mode, source``
(``outcome`` is "success" or "failure", ``marker_s`` NaN when missing). Everything that needs
another shape (Krippendorff's matrix, Fleiss' counts, Label Studio tasks) converts at the edge.

Example:
    >>> table = label_table(suite.annotations)                 # doctest: +SKIP
    >>> agg = dawid_skene(table)                               # doctest: +SKIP
    >>> agg.loc["c000913", ["outcome", "p_success", "marker_s"]]  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

COLUMNS = ["continuation_id", "annotator_id", "outcome", "marker_s", "failure_mode", "source"]


def label_table(annotations: Iterable) -> pd.DataFrame:
    """The long table from Annotation records (or dicts with the same fields)."""
    rows = []
    for a in annotations:
        get = a.get if isinstance(a, dict) else lambda k, d=None, a=a: getattr(a, k, d)
        rows.append({"continuation_id": get("continuation_id"), "annotator_id": get("annotator_id"),
                     "outcome": get("outcome"), "marker_s": get("marker_s"),
                     "failure_mode": get("failure_mode"), "source": get("source", "human") or "human"})
    table = pd.DataFrame(rows, columns=COLUMNS)
    table["marker_s"] = pd.to_numeric(table["marker_s"], errors="coerce").astype(float)
    return table


def _votes(table: pd.DataFrame) -> pd.Series:
    return (table["outcome"] == "success").astype(float)


def _aggregate_markers(table: pd.DataFrame, outcome: pd.Series) -> pd.Series:
    """Median marker of the annotators who agree with the aggregated outcome (NaN if none gave one)."""
    agree = table["outcome"].to_numpy() == outcome.reindex(table["continuation_id"]).to_numpy()
    return table[agree].groupby("continuation_id")["marker_s"].median().reindex(outcome.index)


def majority_vote(table: pd.DataFrame) -> pd.DataFrame:
    """Per continuation: ``outcome`` (ties go to failure), ``p_success`` (share of success votes),
    ``marker_s`` (median marker of the agreeing annotators) and ``n_labels``."""
    votes = _votes(table).groupby(table["continuation_id"])
    p = votes.mean()
    out = pd.DataFrame({"p_success": p, "n_labels": votes.size()})
    out["outcome"] = np.where(out["p_success"] > 0.5, "success", "failure")
    out["marker_s"] = _aggregate_markers(table, out["outcome"])
    return out


def dawid_skene(table: pd.DataFrame, n_iter: int = 100, tol: float = 1e-6, prior: float = 1.0) -> pd.DataFrame:
    """Binary Dawid-Skene: each annotator has a sensitivity and a specificity; EM from majority vote.

    Args:
        table: the long label table.
        n_iter: maximum EM iterations.
        tol: stop when no posterior moves more than this.
        prior: Beta pseudo-counts added to every confusion cell (keeps perfect annotators finite).

    Returns:
        Per continuation ``p_success`` (posterior), ``outcome``, ``marker_s``, ``n_labels``; the
        annotators' estimated ``sensitivity`` and ``specificity`` are in ``result.attrs["annotators"]``.
    """
    items, item_idx = np.unique(table["continuation_id"].to_numpy(), return_inverse=True)
    raters, rater_idx = np.unique(table["annotator_id"].to_numpy(), return_inverse=True)
    v = _votes(table).to_numpy()
    t = np.bincount(item_idx, weights=v, minlength=len(items)) / np.bincount(item_idx, minlength=len(items))
    for _ in range(n_iter):
        # M step: class prior and per-annotator sensitivity / specificity from soft labels t.
        ti = t[item_idx]
        sens = ((np.bincount(rater_idx, ti * v, len(raters)) + prior)
                / (np.bincount(rater_idx, ti, len(raters)) + 2 * prior))
        spec = (np.bincount(rater_idx, (1 - ti) * (1 - v), len(raters)) + prior) / \
               (np.bincount(rater_idx, 1 - ti, len(raters)) + 2 * prior)
        pi = np.clip(t.mean(), 1e-3, 1 - 1e-3)
        # E step: posterior of success per item, in log space.
        log1 = np.where(v == 1, np.log(sens[rater_idx]), np.log(1 - sens[rater_idx]))
        log0 = np.where(v == 0, np.log(spec[rater_idx]), np.log(1 - spec[rater_idx]))
        l1 = np.log(pi) + np.bincount(item_idx, log1, len(items))
        l0 = np.log(1 - pi) + np.bincount(item_idx, log0, len(items))
        new_t = 1 / (1 + np.exp(np.clip(l0 - l1, -50, 50)))
        done = np.max(np.abs(new_t - t)) < tol
        t = new_t
        if done:
            break
    out = pd.DataFrame({"p_success": t, "n_labels": np.bincount(item_idx, minlength=len(items))},
                       index=pd.Index(items, name="continuation_id"))
    out["outcome"] = np.where(out["p_success"] > 0.5, "success", "failure")
    out["marker_s"] = _aggregate_markers(table, out["outcome"])
    out.attrs["annotators"] = pd.DataFrame({"sensitivity": sens, "specificity": spec},
                                           index=pd.Index(raters, name="annotator_id"))
    return out


AGGREGATORS = {"majority": majority_vote, "dawid_skene": dawid_skene}


def aggregate(table: pd.DataFrame, method: str = "dawid_skene") -> pd.DataFrame:
    """Aggregate the long table by name: ``majority`` or ``dawid_skene``."""
    if method not in AGGREGATORS:
        raise ValueError(f"unknown aggregation {method!r}; choose one of {sorted(AGGREGATORS)}")
    return AGGREGATORS[method](table)


# ----------------------------------------------------------------------------------------------
# Agreement


def krippendorff_alpha(table: pd.DataFrame) -> float:
    """Krippendorff's alpha (nominal) of the outcomes; items labelled once still count as missing data."""
    import krippendorff

    matrix = table.assign(v=_votes(table)).pivot_table(index="annotator_id", columns="continuation_id",
                                                       values="v", aggfunc="first")
    if matrix.shape[0] < 2 or (matrix.notna().sum(axis=0) >= 2).sum() == 0:
        return float("nan")
    if pd.unique(matrix.to_numpy().ravel()[matrix.notna().to_numpy().ravel()]).size < 2:
        return float("nan")  # one outcome only: no expected disagreement, alpha is undefined
    return float(krippendorff.alpha(reliability_data=matrix.to_numpy(), level_of_measurement="nominal"))


def fleiss_kappa(table: pd.DataFrame) -> float:
    """Fleiss' kappa for two categories over items with at least two labels (varying counts allowed)."""
    counts = _votes(table).groupby(table["continuation_id"]).agg(["sum", "size"])
    counts = counts[counts["size"] >= 2]
    if counts.empty:
        return float("nan")
    n, s = counts["size"].to_numpy(float), counts["sum"].to_numpy(float)
    f = n - s
    p_item = (s * (s - 1) + f * (f - 1)) / (n * (n - 1))
    p_succ = s.sum() / n.sum()
    p_e = p_succ ** 2 + (1 - p_succ) ** 2
    return float((p_item.mean() - p_e) / (1 - p_e)) if p_e < 1 else float("nan")


def annotator_accuracy(table: pd.DataFrame, gold: pd.DataFrame) -> pd.DataFrame:
    """Each annotator against gold labels.

    Args:
        table: the long label table.
        gold: indexed by continuation_id with an ``outcome`` column (e.g. from :func:`reference_table`).

    Returns:
        One row per annotator: ``n``, ``accuracy``, ``balanced_accuracy``.
    """
    from sklearn.metrics import balanced_accuracy_score

    rows = table[table["continuation_id"].isin(gold.index)]
    truth = gold["outcome"].reindex(rows["continuation_id"]).to_numpy()
    out = {}
    for annotator, idx in rows.groupby("annotator_id").indices.items():
        y, p = truth[idx] == "success", rows["outcome"].to_numpy()[idx] == "success"
        ba = balanced_accuracy_score(y, p) if len(set(y)) == 2 else float("nan")
        out[annotator] = {"n": len(idx), "accuracy": float((y == p).mean()), "balanced_accuracy": float(ba)}
    return pd.DataFrame.from_dict(out, orient="index").rename_axis("annotator_id")


def marker_spread(table: pd.DataFrame) -> pd.Series:
    """Per continuation with >= 2 markers: median absolute deviation of markers from their median (s)."""
    m = table.dropna(subset=["marker_s"])
    grouped = m.groupby("continuation_id")["marker_s"]
    med = grouped.transform("median")
    dev = (m["marker_s"] - med).abs().groupby(m["continuation_id"])
    return dev.median()[grouped.size() >= 2]


def reference_table(references: Iterable) -> pd.DataFrame:
    """Gold labels (Reference records or dicts) indexed by continuation_id: ``outcome, marker_s, failure_mode``."""
    rows = []
    for r in references:
        get = r.get if isinstance(r, dict) else lambda k, d=None, r=r: getattr(r, k, d)
        rows.append({"continuation_id": get("continuation_id"), "outcome": get("outcome"),
                     "marker_s": get("marker_s"), "failure_mode": get("failure_mode")})
    out = pd.DataFrame(rows, columns=["continuation_id", "outcome", "marker_s", "failure_mode"])
    out["marker_s"] = pd.to_numeric(out["marker_s"], errors="coerce").astype(float)
    return out.set_index("continuation_id")
