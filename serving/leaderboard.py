"""``autorater leaderboard``: per-agent success rates with honest 95% intervals, and the figures around them.

Against gold (the default when the suite has references): the final labels (the model's where it
labelled alone, the annotators' majority elsewhere) are corrected by their measured error on the
suite's gold references. This is what stays honest when the annotators themselves are biased (they
are: a rigid annotator fails messy successes, a near miss fools a hurried one), which human-as-truth
intervals ignore. Two corrections (``group_estimates`` picks):

- **pooled** (``rate_pooled``, the default when the references allow it): the labels' sensitivity
  and specificity are measured once on all the references and correct every agent's share of success
  labels (the Rogan-Gladen estimator). All the suite's references instead of the agent's own, so the
  rate moves little when one reference is mislabelled, and agents rank as their label shares do. It
  assumes the error rates do not differ between agents; a permutation test on the references checks
  that, and when it rejects (or there are fewer than ``MIN_POOLED`` gold successes or failures) each
  agent is corrected by its own references instead.
- **per agent** (``rate_vs_gold``): the agent's own references, with prediction-powered inference
  (``ppi_py``). No assumption across agents, but with a dozen references one mislabelled one moves the
  rate by a twelfth. Always kept in the JSON as ``per_group``.

Against humans (no references, or ``use_references=False``), the rate of an agent mixes two strata
of its continuations:

- **human** (routed to annotators, human label in): a classical estimate. Alone, the Wilson
  interval; mixed, the Agresti-Coull standard error ``p~ = (k + 2) / (n + 4)``.
- **auto** (the model labelled them): prediction-powered inference (``ppi_py.ppi_mean_ci``, PPI++
  with a tuned lambda) on the audit slice, a uniform random sample of the auto-labelled
  continuations that humans labelled as well: the model's labels on all of them, corrected by its
  measured error on the audit. The standard error is floored by the one of a disagreement rate
  ``(d + 1) / (n_audit + 2)``, so that a small audit that happens to agree everywhere does not claim
  a perfect model. With fewer than 2 audited continuations the stratum is unknown and honestly
  counts anywhere in [0, 1].

The agent's rate is the share-weighted mean of the two, its standard error the weighted root sum
of squares, and the interval the normal one, clipped to [0, 1]. Continuations still waiting for a
human label are left out and counted (``waiting``): the rate is then of the labelled ones only.

Beside the rate, ``labelled_rate`` is the plain share of successes among the final labels: no
correction and no interval.

Also: per-category rates (the same estimator); time to completion (the CDF of success markers after
the takeover, and its median), each marker corrected by its source's lag (model or annotators) measured
on gold successes (``corrected_time_to_success``); consistency (the chance that two continuations of an
agent on one scenario have the same true outcome), corrected for the labels' sensitivity and
specificity on the gold references (``corrected_consistency``): label noise makes agreeing
continuations look split. Both have bootstrap intervals over scenarios that also resample the
references, and keep the uncorrected value beside them (``median_time_labelled_s``,
``consistency_labelled``). Scenario difficulty: the success rate of each scenario over all agents, and
the item-response model's ``ability`` per agent and ``difficulty`` per scenario (``calibration.irt``).
The report is JSON plus an HTML page with the figures.

Example:
    >>> board = leaderboard("labels-v3")                  # doctest: +SKIP
    >>> board["agents"]["expert"]["rate"], board["agents"]["expert"]["ci"]  # doctest: +SKIP
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
from pathlib import Path

import numpy as np
from scipy import stats

from calibration.metrics import rank_metrics
from data.files import write_text_atomic
from data.suite import Suite
from serving.label import JOB_FILE, LABELS_FILE, read_jsonl_rows

Z95 = float(stats.norm.ppf(0.975))


def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for k successes out of n."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))


def _floored_var(k: float, n: int) -> float:
    """Variance of a share k / n, floored by one pseudo-success and one pseudo-failure (as Agresti-Coull)."""
    q = (k + 1) / (n + 2)
    return q * (1 - q) / n


def _ppi(y: np.ndarray, yhat: np.ndarray, yhat_unlabeled: np.ndarray) -> tuple[float, float]:
    """PPI++ mean of ``y`` from labelled pairs (``y``, ``yhat``) and unlabelled predictions: (estimate, se)."""
    import ppi_py

    # PPI++ tunes lambda from the variance of the predictions; constant ones leave it undefined, and
    # then every lambda gives the same answer.
    lam = 1.0 if np.ptp(np.concatenate([yhat, yhat_unlabeled])) == 0 else None
    theta = float(ppi_py.ppi_mean_pointestimate(y, yhat, yhat_unlabeled, lam=lam)[0])
    lo, hi = (float(v[0]) for v in ppi_py.ppi_mean_ci(y, yhat, yhat_unlabeled, alpha=0.05, lam=lam))
    # A small check that happens to agree everywhere would claim zero error: floor the rectifier's
    # variance with one pseudo-disagreement and one pseudo-agreement.
    return theta, max((hi - lo) / (2 * Z95), float(np.sqrt(_floored_var(np.abs(y - yhat).sum(), len(y)))))


def rate_estimate(human: np.ndarray, auto_model: np.ndarray, audit_model: np.ndarray,
                  audit_human: np.ndarray) -> dict:
    """One success rate from a human stratum and an auto stratum with its audit slice.

    Args:
        human: (n_h,) 0/1 human labels of the continuations routed to humans.
        auto_model: (n_u,) 0/1 model labels of the auto-labelled continuations that were not audited.
        audit_model: (n_a,) 0/1 model labels of the audited auto-labelled continuations.
        audit_human: (n_a,) 0/1 human labels of the same.

    Returns:
        ``rate``, ``ci`` (95%), ``se``, ``method``, ``n_human``, ``n_auto``, ``n_audit``.
    """
    human, auto_model = np.asarray(human, float), np.asarray(auto_model, float)
    audit_model, audit_human = np.asarray(audit_model, float), np.asarray(audit_human, float)
    n_h, n_a = len(human), len(audit_model)
    n_auto = len(auto_model) + n_a
    n = n_h + n_auto
    out = {"n_human": n_h, "n_auto": n_auto, "n_audit": n_a}
    if n == 0:
        return {**out, "rate": None, "ci": [0.0, 1.0], "se": None, "method": "no labels"}
    if n_auto == 0:
        lo, hi = wilson_interval(int(human.sum()), n_h)
        return {**out, "rate": float(human.mean()), "ci": [lo, hi], "se": None, "method": "classical (humans only)"}
    w_h, w_a = n_h / n, n_auto / n
    k_h = human.sum()
    p_tilde = (k_h + 2) / (n_h + 4)
    se_h = float(np.sqrt(p_tilde * (1 - p_tilde) / (n_h + 4))) if n_h else 0.0
    mean_h = float(human.mean()) if n_h else 0.0
    if n_a < 2:  # nothing measures the model's error on this stratum: it could be anything
        lo_h, hi_h = wilson_interval(int(k_h), n_h) if n_h else (0.0, 0.0)
        model_rate = float(np.concatenate([auto_model, audit_model]).mean())
        return {**out, "rate": w_h * mean_h + w_a * model_rate, "ci": [w_h * lo_h, w_h * hi_h + w_a], "se": None,
                "method": "model labels unaudited (interval: worst case)"}
    theta_a, se_a = _ppi(audit_human, audit_model, auto_model if len(auto_model) else audit_model)
    rate = w_h * mean_h + w_a * theta_a
    se = float(np.sqrt((w_h * se_h) ** 2 + (w_a * se_a) ** 2))
    method = "ppi (auto + audit)" if n_h == 0 else "stratified: classical (humans) + ppi (auto + audit)"
    return {**out, "rate": float(np.clip(rate, 0, 1)), "ci": [float(max(0.0, rate - Z95 * se)),
                                                              float(min(1.0, rate + Z95 * se))],
            "se": se, "method": method}


def rate_vs_gold(gold: np.ndarray, label_on_gold: np.ndarray, label_rest: np.ndarray) -> dict:
    """A success rate from final labels (model or human) corrected by gold references, with PPI.

    The final labels of the reference continuations are compared with their gold outcome, and that
    measured error corrects the final labels of all the others: the human annotators' own errors
    (not only the model's) stop biasing the rate. Valid when the references are a random sample of
    the agent's continuations (the generator draws them so; STS suites mix them in at random).

    Args:
        gold: (n,) 0/1 gold outcomes of the agent's labelled reference continuations.
        label_on_gold: (n,) 0/1 final labels of the same.
        label_rest: (N,) 0/1 final labels of the agent's other labelled continuations.
    """
    gold, label_on_gold, label_rest = (np.asarray(x, float) for x in (gold, label_on_gold, label_rest))
    n = len(gold)
    out = {"n_gold": n, "n_labelled": n + len(label_rest)}
    if n < 2:
        return {**out, "rate": None, "ci": [0.0, 1.0], "se": None, "method": "too few references"}
    theta, se = _ppi(gold, label_on_gold, label_rest if len(label_rest) else label_on_gold)
    return {**out, "rate": float(np.clip(theta, 0, 1)), "ci": [float(max(0.0, theta - Z95 * se)),
                                                               float(min(1.0, theta + Z95 * se))],
            "se": se, "method": "ppi vs references (gold)"}


def estimate(rows: list[dict], gold: dict[str, str] | None = None, pooled: dict | None = None) -> dict:
    """The rate of ``rows`` (labels.jsonl rows), with its 95% interval.

    With ``pooled`` (``error_counts`` over the references of every group, see ``group_estimates``), the
    labels' share corrected by the pooled error rates (``rate_pooled``); else, against the gold references
    among ``rows`` when there are at least 2 (``rate_vs_gold``); else from the human and audited strata
    (``rate_estimate``). The other estimates are returned beside it: ``per_group`` (the gold references of
    these rows only) and ``vs_humans``; ``labelled_rate`` is the plain share of successes among the final
    labels."""
    by_humans = rate_estimate(**_strata(rows))
    labelled = [r for r in rows if r.get("outcome") is not None]
    plain = {"labelled_rate": float(np.mean([r["outcome"] == "success" for r in labelled])) if labelled else None}
    on_gold = [r for r in labelled if r["continuation_id"] in (gold or {})]
    counts = {"n_human": by_humans["n_human"], "n_auto": by_humans["n_auto"], "n_audit": by_humans["n_audit"]}
    if gold and len(on_gold) >= 2:
        rest = [r for r in labelled if r["continuation_id"] not in gold]
        own = rate_vs_gold([gold[r["continuation_id"]] == "success" for r in on_gold],
                           [r["outcome"] == "success" for r in on_gold],
                           [r["outcome"] == "success" for r in rest])
    else:
        own = None
    if gold and pooled is not None and labelled:
        est = rate_pooled([r["outcome"] == "success" for r in labelled], pooled)
        return {**est, **plain, **counts, "n_gold": len(on_gold), "per_group": own, "vs_humans": by_humans}
    if own is not None:
        return {**own, **plain, **counts, "vs_humans": by_humans}
    return {**by_humans, **plain, "n_gold": len(on_gold)}


# ----------------------------------------------------------------------------------------------
# References pooled across groups: the labels' error rates, measured once, correct every group

MIN_POOLED = 10  # gold successes, and gold failures, among the labelled references needed to pool


def error_counts(gold, labels) -> dict:
    """How the final labels fare on gold references: ``pos`` gold successes of which ``tp`` labelled success,
    ``neg`` gold failures of which ``tn`` labelled failure."""
    gold, labels = np.asarray(gold, bool), np.asarray(labels, bool)
    return {"pos": int(gold.sum()), "tp": int((gold & labels).sum()), "neg": int((~gold).sum()),
            "tn": int((~gold & ~labels).sum())}


def rate_pooled(labels, counts: dict) -> dict:
    """A success rate from labels whose sensitivity and specificity were measured on pooled gold references.

    The Rogan-Gladen estimator: with ``s`` the share of success labels, ``se`` = P(label success | gold
    success) and ``sp`` = P(label failure | gold failure), the rate is ``(s + sp - 1) / (se + sp - 1)``. Its
    standard error (delta method; Greenland 1996) adds the uncertainty of ``s`` (the labels as a sample of
    the agent's continuations) and of ``se`` and ``sp`` (the references as a sample), each floored by a
    pseudo-count. Valid when the labels' error rates, given the gold outcome, are the same for this group as
    over the pooled references (``error_heterogeneity`` tests that); the rate is then an increasing function of
    ``s``, so groups rank as their label shares do.

    Args:
        labels: (n,) 0/1 final labels of the group's labelled continuations.
        counts: ``error_counts`` of the pooled references.
    """
    labels = np.asarray(labels, float)
    n, k = len(labels), float(labels.sum())
    out = {"n_labelled": n, "pooled_references": counts["pos"] + counts["neg"]}
    se, sp = counts["tp"] / counts["pos"], counts["tn"] / counts["neg"]
    j = se + sp - 1
    if n == 0 or j <= 0.2:
        return {**out, "rate": None, "ci": [0.0, 1.0], "se": None, "method": "labels uninformative on the references"}
    s = k / n
    rate = float(np.clip((s + sp - 1) / j, 0, 1))
    var = (_floored_var(k, n) + rate ** 2 * _floored_var(counts["tp"], counts["pos"])
           + (1 - rate) ** 2 * _floored_var(counts["tn"], counts["neg"])) / j ** 2
    half = Z95 * float(np.sqrt(var))
    return {**out, "rate": rate, "ci": [max(0.0, rate - half), min(1.0, rate + half)], "se": float(np.sqrt(var)),
            "sensitivity": se, "specificity": sp, "method": "labels corrected by pooled references"}


def error_heterogeneity(groups, gold, labels, seed: int = 0, n_perm: int = 2000) -> float:
    """Permutation p-value of "the labels' error rates are the same in every group", on gold references.

    The statistic is the Pearson chi-square of group x (label right or wrong), summed over the gold
    successes and the gold failures; the permutations shuffle the groups within each gold outcome. With few
    references and few errors the test has little power: a high p-value says the references show no
    difference, not that there is none.

    Args:
        groups: (n,) the group of each reference (agent, category).
        gold, labels: (n,) 0/1 gold outcomes and final labels of the same references.
    """
    groups, gold, labels = np.asarray(groups), np.asarray(gold, bool), np.asarray(labels, bool)
    rng = np.random.default_rng(seed)

    def chi2(wrong: np.ndarray, onehot: np.ndarray) -> np.ndarray:  # wrong: (perms, m), onehot: (m, G)
        n_g = onehot.sum(0)  # every group holds a reference
        rate = wrong.mean(1, keepdims=True)  # strictly between 0 and 1
        return ((wrong @ onehot - n_g * rate) ** 2 / (n_g * rate * (1 - rate))).sum(1)

    observed, permuted = 0.0, np.zeros(n_perm)
    for outcome in (True, False):
        mask = gold == outcome
        if mask.sum() < 2:
            continue
        wrong = (labels[mask] != outcome).astype(float)
        shuffled = rng.permuted(np.tile(wrong, (n_perm, 1)), axis=1)  # drawn first: one random stream either way
        if wrong.min() == wrong.max():  # none or all wrong: 0 in every permutation
            continue
        _, idx = np.unique(groups[mask], return_inverse=True)
        onehot = np.eye(idx.max() + 1)[idx]
        observed += float(chi2(wrong[None], onehot)[0])
        permuted += chi2(shuffled, onehot)
    return float((1 + np.sum(permuted >= observed - 1e-9)) / (1 + n_perm))


def group_estimates(rows: list[dict], gold: dict[str, str] | None, key: str, seed: int = 0,
                    alpha: float = 0.05) -> tuple[dict, dict]:
    """``estimate`` for every group of ``rows`` (by ``rows[i][key]``: ``agent_id``, ``category``), and how.

    With gold references, the labels' error rates are measured once on all of them and correct every group
    (``rate_pooled``): with a dozen references per agent, one mislabelled reference would move a per-agent
    correction by a twelfth, enough to swap agents whose rates are close. Pooling assumes the error rates do
    not differ between groups, so it is used only when the references show no difference
    (``error_heterogeneity`` p-value >= ``alpha``) and hold at least ``MIN_POOLED`` gold successes and gold
    failures; otherwise each group is corrected by its own references (``rate_vs_gold``).

    Returns:
        ``({group: estimate}, pooling)``, ``pooling`` saying whether the references were pooled and why.
    """
    names = sorted({r[key] for r in rows})
    what = {"agent_id": "agents", "category": "categories"}.get(key, key)
    refs = [r for r in rows if r.get("outcome") is not None and r["continuation_id"] in (gold or {})]
    pooling = {"pooled": False, "references": len(refs)}
    pooled = None
    if gold:
        y = [gold[r["continuation_id"]] == "success" for r in refs]
        labels = [r["outcome"] == "success" for r in refs]
        counts = error_counts(y, labels)
        p_value = error_heterogeneity([r[key] for r in refs], y, labels, seed=seed) if refs else None
        pooling.update(counts=counts, heterogeneity_p=p_value)
        if min(counts["pos"], counts["neg"]) < MIN_POOLED:
            pooling["why"] = (f"too few references to pool: {counts['pos']} gold successes and {counts['neg']} gold "
                              f"failures (at least {MIN_POOLED} each); each of the {what} is corrected by its own")
        elif p_value < alpha:
            pooling["why"] = (f"the labels' error rates differ between {what} on the references (p = "
                              f"{p_value:.3f}); each is corrected by its own references")
        else:
            pooled, pooling["pooled"] = counts, True
            pooling["why"] = (f"the labels' error rates, measured on {len(refs)} references (sensitivity "
                              f"{counts['tp']}/{counts['pos']}, specificity {counts['tn']}/{counts['neg']}), show no "
                              f"difference between {what} (p = {p_value:.3f}) and correct every one")
    return {g: estimate([r for r in rows if r[key] == g], gold, pooled) for g in names}, pooling


def _strata(rows: list[dict]) -> dict:
    """Split labels rows into the arrays ``rate_estimate`` takes."""
    human = [r["human_outcome"] == "success" for r in rows if r["decision"] == "human" and r.get("human_outcome")]
    auto = [r for r in rows if r["decision"] == "auto"]
    audited = [r for r in auto if r.get("audit") and r.get("human_outcome")]
    unaudited = [r for r in auto if not (r.get("audit") and r.get("human_outcome"))]
    return {"human": np.array(human, float),
            "auto_model": np.array([r["model_outcome"] == "success" for r in unaudited], float),
            "audit_model": np.array([r["model_outcome"] == "success" for r in audited], float),
            "audit_human": np.array([r["human_outcome"] == "success" for r in audited], float)}


# ----------------------------------------------------------------------------------------------
# Consistency and time to completion, corrected by the labels' measured error on gold references


def _pair_types(groups: list[list[int]]) -> np.ndarray:
    """(n_groups, 3): per group with >= 2 labels, the shares of its pairs that are both success, both failure,
    and split (each group counts once, whatever its size)."""
    out = []
    for g in groups:
        g = np.asarray(g, float)
        m, k = len(g), g.sum()
        if m < 2:
            continue
        pairs = m * (m - 1) / 2
        out.append([k * (k - 1) / 2 / pairs, (m - k) * (m - k - 1) / 2 / pairs, k * (m - k) / pairs])
    return np.array(out, float).reshape(-1, 3)


def _pair_confusion(se, sp) -> np.ndarray:
    """(..., 3, 3): P(observed pair type | true pair type) for labels of sensitivity ``se`` and specificity ``sp``
    that err independently given the truth; types (both success, both failure, split), columns the truth."""
    se, sp = np.asarray(se, float), np.asarray(sp, float)
    fp, fn = 1 - sp, 1 - se
    m = np.stack([np.stack([se * se, fp * fp, se * fp], -1),
                  np.stack([fn * fn, sp * sp, fn * sp], -1),
                  np.stack([2 * se * fn, 2 * sp * fp, se * sp + fn * fp], -1)], -2)
    return m


def corrected_consistency(groups: list[list[int]], counts: dict | None, rng: np.random.Generator,
                          n_boot: int = 1000, level: float = 0.95) -> dict:
    """Consistency (the chance that two continuations of one agent on one scenario have the same true outcome),
    corrected for label errors, with a bootstrap interval.

    Label errors make agreeing continuations look split: with sensitivity ``se`` and specificity ``sp``
    measured on gold references (``counts``, as ``error_counts``), the observed shares of pairs that are both
    success, both failure or split are ``M q`` of the true shares ``q`` (``M`` from se and sp, errors
    independent given the truth), so ``q = M^-1`` of the observed ones, and consistency is its first two
    entries. Each group (scenario) weighs the same; for groups of two continuations this is the share of
    scenarios whose outcomes agree. The interval resamples scenarios and, at the same time, the references
    behind se and sp (binomial draws), so it carries both uncertainties. Without ``counts`` (or with
    uninformative labels: se + sp - 1 <= 0.2) the labels are taken as they are.

    Args:
        groups: per scenario, the 0/1 final labels of one agent's continuations (groups of one are ignored).
        counts: ``error_counts`` of the gold references, or None.
        rng: the bootstrap generator.

    Returns:
        ``consistency``, ``ci`` ([low, high], 95% by default), ``labelled`` (the uncorrected share), ``method``,
        ``scenarios`` (groups of >= 2).
    """
    types = _pair_types(groups)
    n = len(types)
    if n == 0:
        return {"consistency": None, "ci": [None, None], "labelled": None, "method": "no scenario with 2 labels",
                "scenarios": 0}
    observed = types.mean(0)
    labelled = float(observed[0] + observed[1])
    weights = rng.multinomial(n, np.full(n, 1 / n), size=n_boot) / n  # (n_boot, n)
    boot_observed = weights @ types  # (n_boot, 3)
    tail = 50 * (1 - level)
    usable = counts is not None and min(counts["pos"], counts["neg"]) > 0
    se, sp = (counts["tp"] / counts["pos"], counts["tn"] / counts["neg"]) if usable else (1.0, 1.0)
    if not usable or se + sp - 1 <= 0.2:
        boot = boot_observed[:, 0] + boot_observed[:, 1]
        return {"consistency": labelled, "ci": [float(v) for v in np.percentile(boot, [tail, 100 - tail])],
                "labelled": labelled, "method": "labels as they are (no informative gold references)", "scenarios": n}
    true = np.clip(np.linalg.solve(_pair_confusion(se, sp), observed), 0, None)
    estimate = float(np.clip((true[0] + true[1]) / true.sum(), 0, 1))
    boot_se = rng.binomial(counts["pos"], se, n_boot) / counts["pos"]
    boot_sp = rng.binomial(counts["neg"], sp, n_boot) / counts["neg"]
    ok = boot_se + boot_sp - 1 > 0.05
    solved = np.linalg.solve(_pair_confusion(boot_se[ok], boot_sp[ok]), boot_observed[ok][..., None])  # (b, 3, 1)
    boot_true = np.clip(solved[..., 0], 0, None)
    boot = np.clip((boot_true[:, 0] + boot_true[:, 1]) / np.maximum(boot_true.sum(1), 1e-12), 0, 1)
    return {"consistency": estimate, "ci": [float(v) for v in np.percentile(boot, [tail, 100 - tail])],
            "labelled": labelled, "method": f"corrected by the labels' error on gold references (sensitivity "
            f"{counts['tp']}/{counts['pos']}, specificity {counts['tn']}/{counts['neg']})", "scenarios": n}


MIN_MARKER_PAIRS = 3  # gold successes labelled success, with both markers, that a source's offset needs


def marker_offsets(pairs: dict[str, list[tuple[float, float]]]) -> dict[str, float]:
    """Per label source (``auto``, ``human``), the median of (label marker - gold marker) on gold successes
    labelled success: the lag that source adds (annotators press late; a model inherits some of it). A source
    with fewer than ``MIN_MARKER_PAIRS`` pairs gets 0."""
    return {src: float(np.median([m - g for m, g in v])) if len(v) >= MIN_MARKER_PAIRS else 0.0
            for src, v in pairs.items()}


def corrected_time_to_success(times: dict[str, list[tuple[float, str]]], pairs: dict[str, list[tuple[float, float]]],
                              rng: np.random.Generator, n_boot: int = 1000, level: float = 0.95) -> dict:
    """Median time to success after the takeover, each marker corrected by its source's lag on gold references,
    with a bootstrap interval over scenarios that re-measures the lags on resampled references too.

    Args:
        times: per scenario, ``(seconds after takeover, source)`` of the continuations labelled success.
        pairs: per source, ``(label marker, gold marker)`` of gold successes labelled success (``marker_offsets``).
        rng: the bootstrap generator.

    Returns:
        ``median_s``, ``ci``, ``labelled_median_s`` (uncorrected), ``offsets_s`` (per source), ``times_s``
        (corrected, sorted: the CDF).
    """
    offsets = marker_offsets(pairs)
    groups = [v for v in times.values() if v]
    if not groups:
        return {"median_s": None, "ci": [None, None], "labelled_median_s": None, "offsets_s": offsets, "times_s": []}
    sources = sorted({src for v in groups for _, src in v} | set(pairs))
    seconds = np.array([t for v in groups for t, _ in v], float)  # (n,)
    source = np.array([sources.index(src) for v in groups for _, src in v])  # (n,)
    group = np.repeat(np.arange(len(groups)), [len(v) for v in groups])  # (n,)
    lag, boot_lag = np.zeros(len(sources)), np.zeros((n_boot, len(sources)))
    for i, src in enumerate(sources):
        v = np.array([m - g for m, g in pairs.get(src, [])], float)
        if v.size >= MIN_MARKER_PAIRS:
            lag[i] = np.median(v)
            boot_lag[:, i] = np.median(v[rng.integers(0, v.size, (n_boot, v.size))], axis=1)
    picks = rng.multinomial(len(groups), np.full(len(groups), 1 / len(groups)), size=n_boot)  # (n_boot, groups)
    boot = _weighted_median(np.maximum(0.0, seconds[None, :] - boot_lag[:, source]), picks[:, group])
    values = np.maximum(0.0, seconds - lag[source])
    tail = 50 * (1 - level)
    return {"median_s": float(np.median(values)), "ci": [float(v) for v in np.percentile(boot, [tail, 100 - tail])],
            "labelled_median_s": float(np.median(seconds)), "offsets_s": offsets,
            "times_s": sorted(values.tolist())}


def _weighted_median(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """(b,) the lower weighted median of each row of ``values`` (b, n) with integer ``weights`` (b, n)."""
    order = np.argsort(values, axis=1)
    v, w = np.take_along_axis(values, order, 1), np.take_along_axis(weights, order, 1)
    cumulative = np.cumsum(w, axis=1)
    index = np.argmax(cumulative >= cumulative[:, -1:] / 2, axis=1)
    return v[np.arange(len(v)), index]


def _bootstrap(values_by_group: dict, stat, rng: np.random.Generator, n_boot: int = 1000) -> list[float]:
    """95% percentile interval of ``stat`` over groups resampled with replacement."""
    groups = list(values_by_group.values())
    if not groups:
        return [None, None]
    draws = []
    for _ in range(n_boot):
        pick = rng.integers(0, len(groups), len(groups))
        v = stat([groups[i] for i in pick])
        if v is not None and np.isfinite(v):
            draws.append(v)
    return [float(np.quantile(draws, 0.025)), float(np.quantile(draws, 0.975))] if draws else [None, None]


def _marker_pairs(rows: list[dict], suite: Suite) -> dict[str, list[tuple[float, float]]]:
    """Per label source (``decision``), (label marker, gold marker) of gold successes labelled success."""
    gold = {r.continuation_id: r for r in suite.references}
    pairs: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        g = gold.get(r["continuation_id"])
        if g is not None and g.outcome == "success" and r.get("outcome") == "success" and \
                g.marker_s is not None and r.get("marker_s") is not None:
            pairs.setdefault(r["decision"], []).append((float(r["marker_s"]), float(g.marker_s)))
    return pairs


def leaderboard(labels_dir: str | os.PathLike, seed: int = 0, with_truth: bool = False,
                use_references: bool = True) -> dict:
    """The leaderboard of a labels folder (after ``ingest``); see the module docstring.

    Args:
        labels_dir: the folder written by ``autorater label``.
        seed: bootstrap seed.
        with_truth: add the simulator truth of a synthetic suite (true rates, Spearman, MMRV, coverage).
        use_references: correct the labels with the suite's gold references (``rate_vs_gold``) where an
            agent has at least 2 labelled ones; otherwise, or when False, treat human labels as the truth.
    """
    labels_dir = Path(labels_dir)
    if not (labels_dir / LABELS_FILE).is_file():
        raise FileNotFoundError(f"{labels_dir} has no {LABELS_FILE}: pass a folder written by `autorater label`")
    job = json.loads((labels_dir / JOB_FILE).read_text(encoding="utf-8"))
    suite = Suite.load(job["suite"])
    rows = read_jsonl_rows(labels_dir / LABELS_FILE)
    rng = np.random.default_rng(seed)
    gold = {r.continuation_id: r.outcome for r in suite.references} if use_references else None
    for r in rows:
        c = suite.get(r["continuation_id"])
        r["agent_id"], r["scenario_id"] = c.agent_id, c.scenario_id
        r["category"] = suite.scenario_by_id[c.scenario_id].category
        r["takeover_s"] = suite.takeover_of(r["continuation_id"])
    agents = sorted({r["agent_id"] for r in rows})
    categories = sorted({r["category"] for r in rows})

    board = {"suite": f"{suite.info.name}@{suite.info.version}", "model": job["model_name"], "agents": {},
             "categories": {}, "scenarios": {}}
    by_agent, pool_agents = group_estimates(rows, gold, "agent_id", seed)
    by_category, pool_categories = group_estimates(rows, gold, "category", seed)
    board["pooling"] = {"agents": pool_agents, "categories": pool_categories}
    both = pool_agents["counts"] if pool_agents["pooled"] and pool_categories["pooled"] else None
    counts = pool_agents.get("counts")
    counts = counts if counts and min(counts["pos"], counts["neg"]) >= MIN_POOLED else None
    pairs = _marker_pairs(rows, suite) if use_references else {}
    for agent in agents:
        mine = [r for r in rows if r["agent_id"] == agent]
        est = by_agent[agent]
        waiting = sum(r["outcome"] is None for r in mine)
        labelled = [r for r in mine if r["outcome"] is not None]
        times: dict[str, list[tuple[float, str]]] = {}
        outcomes: dict[str, list[int]] = {}
        for r in labelled:
            outcomes.setdefault(r["scenario_id"], []).append(int(r["outcome"] == "success"))
            if r["outcome"] == "success" and r["marker_s"] is not None:
                times.setdefault(r["scenario_id"], []).append((max(0.0, r["marker_s"] - r["takeover_s"]),
                                                               r["decision"]))
        timing = corrected_time_to_success(times, pairs, rng)
        consistency = corrected_consistency(list(outcomes.values()), counts, rng)
        board["agents"][agent] = {
            **est, "continuations": len(mine), "waiting": waiting,
            "per_category": {cat: estimate([r for r in mine if r["category"] == cat], gold, both)
                             for cat in categories if any(r["category"] == cat for r in mine)},
            "time_to_success_s": timing["times_s"],
            "median_time_to_success_s": timing["median_s"], "median_time_ci": timing["ci"],
            "median_time_labelled_s": timing["labelled_median_s"], "marker_offsets_s": timing["offsets_s"],
            "consistency": consistency["consistency"], "consistency_ci": consistency["ci"],
            "consistency_labelled": consistency["labelled"], "consistency_method": consistency["method"],
            "scenario_success_shares": [float(np.mean(g)) for g in outcomes.values() if len(g) >= 2]}
    board["categories"] = by_category
    for sid in sorted({r["scenario_id"] for r in rows}):
        mine = [r for r in rows if r["scenario_id"] == sid and r["outcome"] is not None]
        k, n = sum(r["outcome"] == "success" for r in mine), len(mine)
        board["scenarios"][sid] = {"category": suite.scenario_by_id[sid].category, "success_rate": k / n if n else None,
                                   "ci": list(wilson_interval(k, n)), "n": n}
    by_cat: dict[str, dict[str, list[int]]] = {}
    for sid, s in board["scenarios"].items():
        if s["success_rate"] is not None:
            by_cat.setdefault(s["category"], {})[sid] = [s["success_rate"]]
    board["difficulty_by_category"] = {
        cat: {"mean_scenario_success_rate": float(np.mean([v[0] for v in d.values()])),
              "ci": _bootstrap(d, lambda g: float(np.mean([x[0] for x in g])), rng), "scenarios": len(d)}
        for cat, d in sorted(by_cat.items())}
    per_agent, per_scenario, board["irt"] = ability_and_difficulty(rows, gold if use_references else None)
    none = {"ability": None, "ability_ci": [None, None]}
    for agent in agents:
        board["agents"][agent].update(per_agent.get(agent, none))
    for sid, scenario in board["scenarios"].items():
        scenario.update(per_scenario.get(sid, {"difficulty": None, "difficulty_ci": [None, None]}))
    board["irt"]["difficulty_by_category"] = _difficulty_by_category(board["scenarios"])
    # a rate clipped at 0 or 1 ties agents whose labels still differ: their label shares break the tie
    board["ranking"] = sorted(agents, key=lambda a: (-(board["agents"][a]["rate"] or 0),
                                                     -(board["agents"][a]["labelled_rate"] or 0)))
    board["waiting"] = sum(a["waiting"] for a in board["agents"].values())
    if with_truth:
        board["truth"] = _truth_comparison(suite, board)
    return board


MIN_SOURCE_REFERENCES = 5  # gold successes, and gold failures, a label source needs to have its own error rates


def ability_and_difficulty(rows: list[dict], gold: dict[str, str] | None,
                           model: str = "1pl") -> tuple[dict, dict, dict]:
    """Agent ability and scenario difficulty from the final labels by ``calibration.ItemResponseModel``.

    A reference continuation counts with its gold outcome (sensitivity and specificity 1). Every other
    label counts with the error rates of its source (``decision``: ``auto`` for the model, ``human`` for
    the annotators) measured on the references that source labelled, with one pseudo-success and one
    pseudo-failure (``(k + 1) / (n + 2)``); a source with fewer than ``MIN_SOURCE_REFERENCES`` gold successes
    or failures takes the rates of all the references pooled; with no references the labels count as
    they are. The uncertainty of those rates is not carried into the intervals.

    Args:
        rows: labels.jsonl rows with ``agent_id``, ``scenario_id``, ``decision``, ``outcome``.
        gold: continuation id -> gold outcome, or None.
        model: ``"1pl"`` or ``"2pl"``.

    Returns:
        ``({agent: {"ability", "ability_ci"}}, {scenario: {"difficulty", "difficulty_ci"}}, summary)``, the
        summary naming the model, the sources' error rates and the difficulty prior's sd.
    """
    from calibration.irt import ItemResponseModel

    labelled = [r for r in rows if r.get("outcome") is not None]
    if not labelled:
        return {}, {}, {"model": model, "n_labels": 0}
    gold = gold or {}
    on_gold = [r for r in labelled if r["continuation_id"] in gold]

    def rates(subset) -> dict:
        c = error_counts([gold[r["continuation_id"]] == "success" for r in subset],
                         [r["outcome"] == "success" for r in subset])
        return {"sensitivity": (c["tp"] + 1) / (c["pos"] + 2), "specificity": (c["tn"] + 1) / (c["neg"] + 2), **c}

    pooled = rates(on_gold) if on_gold else None
    sources = {}
    for src in sorted({r["decision"] for r in labelled}):
        own = [r for r in on_gold if r["decision"] == src]
        counts = rates(own) if own else None
        if counts and min(counts["pos"], counts["neg"]) >= MIN_SOURCE_REFERENCES:
            sources[src] = {**counts, "from": "its own references"}
        elif pooled and min(pooled["pos"], pooled["neg"]) >= MIN_SOURCE_REFERENCES:
            sources[src] = {**pooled, "from": "all references pooled"}
        else:
            sources[src] = {"sensitivity": 1.0, "specificity": 1.0, "from": "no references: labels as they are"}
    keep = [r for r in labelled if r["continuation_id"] in gold or
            sources[r["decision"]]["sensitivity"] + sources[r["decision"]]["specificity"] - 1 > 0.2]
    y = [int((gold.get(r["continuation_id"]) or r["outcome"]) == "success") for r in keep]
    se = [1.0 if r["continuation_id"] in gold else sources[r["decision"]]["sensitivity"] for r in keep]
    sp = [1.0 if r["continuation_id"] in gold else sources[r["decision"]]["specificity"] for r in keep]
    fitted = ItemResponseModel(model=model).fit([r["agent_id"] for r in keep], [r["scenario_id"] for r in keep], y,
                                                se, sp)
    ability, difficulty = fitted.ability_interval(), fitted.difficulty_interval()
    per_agent = {str(a): {"ability": float(fitted.ability_[i]), "ability_ci": [float(v) for v in ability[i]]}
                 for i, a in enumerate(fitted.agents_)}
    per_scenario = {str(sid): {"difficulty": float(fitted.difficulty_[i]),
                               "difficulty_ci": [float(v) for v in difficulty[i]]}
                    for i, sid in enumerate(fitted.scenarios_)}
    summary = {"model": model, "n_labels": len(keep), "n_gold_labels": sum(r["continuation_id"] in gold for r in keep),
               "difficulty_sd": fitted.difficulty_sd_, "sources": sources, "level": fitted.level,
               "scale": "log-odds: ability is the log-odds of success on a scenario of difficulty 0 (the average)"}
    return per_agent, per_scenario, summary


def _difficulty_by_category(scenarios: dict) -> dict:
    """Per category: the mean item-response difficulty of its scenarios, with a normal interval from their
    standard errors (independence assumed) and the spread between scenarios."""
    by_cat: dict[str, list[tuple[float, float]]] = {}
    for s in scenarios.values():
        if s.get("difficulty") is not None:
            half = (s["difficulty_ci"][1] - s["difficulty_ci"][0]) / 2
            by_cat.setdefault(s["category"], []).append((s["difficulty"], half / Z95))
    out = {}
    for cat, v in sorted(by_cat.items()):
        d, se = np.array(v).T
        mean, half = float(d.mean()), float(Z95 * np.sqrt(np.sum(se ** 2)) / len(d))
        out[cat] = {"mean_difficulty": mean, "ci": [mean - half, mean + half], "sd_between_scenarios": float(d.std()),
                    "scenarios": len(d)}
    return out


def _truth_comparison(suite: Suite, board: dict) -> dict:
    from data.suite import load_truth

    truth = {t["continuation_id"]: t["outcome"] == "success" for t in load_truth(suite.root)}
    rates: dict[str, list[bool]] = {}
    for c in suite.continuations:
        rates.setdefault(c.agent_id, []).append(truth[c.continuation_id])
    true_rate = {a: float(np.mean(v)) for a, v in rates.items()}
    est = {a: board["agents"][a]["rate"] for a in true_rate if board["agents"][a]["rate"] is not None}
    plain = {a: board["agents"][a]["labelled_rate"] for a in true_rate
             if board["agents"][a]["labelled_rate"] is not None}
    covered = {a: bool(board["agents"][a]["ci"][0] - 1e-9 <= true_rate[a] <= board["agents"][a]["ci"][1] + 1e-9)
               for a in true_rate}
    out = {"true_rates": true_rate, **rank_metrics(est, true_rate), "labelled": rank_metrics(plain, true_rate),
           "covered": covered, "coverage": float(np.mean(list(covered.values())))}
    ability = {a: board["agents"][a].get("ability") for a in true_rate}
    out["ability"] = rank_metrics(true_rate, {a: v for a, v in ability.items() if v is not None})
    own = {a: board["agents"][a]["per_group"] for a in true_rate if board["agents"][a].get("per_group")}
    if own and all(v["rate"] is not None for v in own.values()):
        out["per_group"] = {**rank_metrics({a: v["rate"] for a, v in own.items()}, true_rate),
                            "coverage": float(np.mean([v["ci"][0] - 1e-9 <= true_rate[a] <= v["ci"][1] + 1e-9
                                                       for a, v in own.items()]))}
    return out


# ----------------------------------------------------------------------------------------------
# Text, figures, HTML


def format_leaderboard(board: dict) -> str:
    lines = [f"leaderboard of {board['suite']} (labels: {board['model']} + humans)",
             f"{'rank':>4}  {'agent':<14}{'success rate':>13}  {'95% interval':<16}{'labels':>7}{'human':>6}"
             f"{'auto':>6}{'audit':>6}"
             f"{'gold':>6}{'wait':>6}  {'median t (s)':>12}  {'consistency':>11}  method"]
    for i, agent in enumerate(board["ranking"], start=1):
        a = board["agents"][agent]
        rate = "-" if a["rate"] is None else f"{a['rate']:.3f}"
        t = "-" if a["median_time_to_success_s"] is None else f"{a['median_time_to_success_s']:.2f}"
        cons = "-" if a["consistency"] is None else f"{a['consistency']:.2f}"
        plain = "-" if a["labelled_rate"] is None else f"{a['labelled_rate']:.3f}"
        lines.append(f"{i:>4}  {agent:<14}{rate:>13}  [{a['ci'][0]:.3f}, {a['ci'][1]:.3f}]  {plain:>7}{a['n_human']:>6}"
                     f"{a['n_auto']:>6}{a['n_audit']:>6}{a['n_gold']:>6}{a['waiting']:>6}  {t:>12}  {cons:>11}  "
                     f"{a['method']}")
    with_ability = [a for a in board["ranking"] if board["agents"][a].get("ability") is not None]
    if with_ability:
        by_ability = sorted(with_ability, key=lambda a: -board["agents"][a]["ability"])
        lines.append(f"ability ({board['irt']['model'].upper()} item-response model, log-odds on an average scenario, "
                     f"95% interval): " + ", ".join(f"{a} {board['agents'][a]['ability']:+.2f} "
                                                   f"[{board['agents'][a]['ability_ci'][0]:+.2f}, "
                                                   f"{board['agents'][a]['ability_ci'][1]:+.2f}]" for a in by_ability))
    lines.append("per category: " + ", ".join(f"{c} {v['rate']:.2f} [{v['ci'][0]:.2f}, {v['ci'][1]:.2f}]"
                                               for c, v in board["categories"].items() if v["rate"] is not None))
    if board["waiting"]:
        lines.append(f"note: {board['waiting']} continuations still wait for a human label and are left out")
    pooling = board.get("pooling", {}).get("agents", {})
    if pooling.get("why"):
        lines.append(f"references: {pooling['why']}")
    if "truth" in board:
        t = board["truth"]
        lines.append(f"against the simulator truth: Spearman {t['spearman']:.3f}, MMRV {t['mmrv']:.3f}, "
                     f"intervals cover the true rate for {t['coverage']:.0%} of agents; the plain label shares: "
                     f"Spearman {t['labelled']['spearman']:.3f}, MMRV {t['labelled']['mmrv']:.3f}")
        if t.get("ability", {}).get("n_agents"):
            lines.append(f"  abilities against the true rates: Spearman {t['ability']['spearman']:.3f}")
        if "per_group" in t:
            lines.append(f"  each agent corrected by its own references instead: "
                         f"Spearman {t['per_group']['spearman']:.3f}, intervals cover {t['per_group']['coverage']:.0%}")
    lines.append("labels: the plain share of successes among the final labels (no correction, no interval)")
    return "\n".join(lines)


def _png(figure) -> str:
    buf = io.BytesIO()
    figure.savefig(buf, format="png", dpi=90)
    return base64.b64encode(buf.getvalue()).decode()


def leaderboard_figures(board: dict) -> dict[str, str]:
    """Base64 PNGs: the ranking with intervals, time-to-success CDFs, consistency and difficulty."""
    from calibration.plots import new_figure

    figs = {}
    agents = board["ranking"][::-1]
    f = new_figure(6, 0.5 * len(agents) + 1.5)
    ax = f.subplots()
    for i, a in enumerate(agents):
        v = board["agents"][a]
        if v["rate"] is not None:
            ax.errorbar(v["rate"], i, xerr=[[max(0.0, v["rate"] - v["ci"][0])], [max(0.0, v["ci"][1] - v["rate"])]],
                        fmt="o", capsize=4, color="C0")
        if "truth" in board:
            ax.plot(board["truth"]["true_rates"][a], i, "x", color="C3", label="truth" if i == 0 else None)
    ax.set(yticks=range(len(agents)), yticklabels=agents, xlim=(0, 1), xlabel="success rate (95% interval)",
           title="Agent leaderboard")
    if "truth" in board:
        ax.legend(loc="lower right")
    figs["leaderboard"] = _png(f)

    f = new_figure(6, 4)
    ax = f.subplots()
    for a in board["ranking"]:
        t = board["agents"][a]["time_to_success_s"]
        if t:
            n = board["agents"][a]["continuations"] - board["agents"][a]["waiting"]
            ax.step(t, np.arange(1, len(t) + 1) / max(n, 1), where="post", label=a)
    ax.set(xlabel="seconds after takeover", ylabel="share of continuations succeeded",
           title="Time to completion (CDF of success markers)", ylim=(0, 1))
    ax.legend(fontsize=8)
    figs["time_to_completion"] = _png(f)

    f = new_figure(6, 4)
    ax = f.subplots()
    shares = [board["agents"][a]["scenario_success_shares"] for a in board["ranking"]]
    if any(shares):
        ax.hist([s for s in shares], bins=np.linspace(0, 1, 6), label=board["ranking"], stacked=False)
        ax.legend(fontsize=8)
    ax.set(xlabel="share of an agent's continuations of one scenario that succeed", ylabel="scenarios",
           title="Consistency across continuations")
    figs["consistency"] = _png(f)

    f = new_figure(6, 0.5 * len(agents) + 1.5)
    ax = f.subplots()
    for i, a in enumerate(agents):
        v = board["agents"][a]
        if v.get("ability") is not None:
            xerr = [[v["ability"] - v["ability_ci"][0]], [v["ability_ci"][1] - v["ability"]]]
            ax.errorbar(v["ability"], i, xerr=xerr, fmt="o", capsize=4, color="C1")
    ax.axvline(0, color="grey", lw=0.5)
    ax.set(yticks=range(len(agents)), yticklabels=agents, xlabel="ability (log-odds of success on an average "
           "scenario, 95% interval)", title="Agent ability (item-response model)")
    figs["ability"] = _png(f)

    f = new_figure(6, 4)
    ax = f.subplots()
    cats = sorted({s["category"] for s in board["scenarios"].values() if s.get("difficulty") is not None})
    for i, cat in enumerate(cats):
        mine = [s for s in board["scenarios"].values() if s["category"] == cat and s.get("difficulty") is not None]
        jitter = np.linspace(-0.25, 0.25, len(mine)) if len(mine) > 1 else [0.0]
        for x, s in zip(jitter, mine):
            ax.errorbar(i + x, s["difficulty"], yerr=[[s["difficulty"] - s["difficulty_ci"][0]],
                                                      [s["difficulty_ci"][1] - s["difficulty"]]],
                        fmt=".", color="C2", alpha=0.4, lw=0.5)
        summary = board.get("irt", {}).get("difficulty_by_category", {}).get(cat)
        if summary:
            ax.errorbar(i, summary["mean_difficulty"], yerr=[[summary["mean_difficulty"] - summary["ci"][0]],
                                                             [summary["ci"][1] - summary["mean_difficulty"]]],
                        fmt="s", color="k", capsize=6)
    ax.set(xticks=range(len(cats)), xlabel="category", ylabel="difficulty (log-odds, 95% interval)",
           title="Scenario difficulty by category (black: category mean)")
    ax.set_xticklabels(cats, rotation=30, ha="right", fontsize=8)
    figs["difficulty_by_category"] = _png(f)

    f = new_figure(6, 4)
    ax = f.subplots()
    rates = [s["success_rate"] for s in board["scenarios"].values() if s["success_rate"] is not None]
    ax.hist(rates, bins=np.linspace(0, 1, 11), color="C2")
    ax.set(xlabel="scenario success rate over all agents", ylabel="scenarios", title="Scenario difficulty")
    figs["difficulty"] = _png(f)
    return figs


def write_report(board: dict, out_html: str | os.PathLike) -> Path:
    """The HTML page (figures inline) and the JSON next to it (same name, .json)."""
    out_html = Path(out_html)
    out_html.parent.mkdir(parents=True, exist_ok=True)
    figs = leaderboard_figures(board)
    rows = "".join(
        f"<tr><td>{i}</td><td>{html.escape(a)}</td><td>{_fmt(board['agents'][a]['rate'])}</td>"
        f"<td>[{board['agents'][a]['ci'][0]:.3f}, {board['agents'][a]['ci'][1]:.3f}]</td>"
        f"<td>{_fmt(board['agents'][a]['labelled_rate'])}</td>"
        f"<td>{board['agents'][a]['n_human']}</td><td>{board['agents'][a]['n_auto']}</td>"
        f"<td>{board['agents'][a]['n_audit']}</td><td>{board['agents'][a]['n_gold']}</td>"
        f"<td>{board['agents'][a]['waiting']}</td>"
        f"<td>{_fmt(board['agents'][a]['median_time_to_success_s'])} {_ci(board['agents'][a]['median_time_ci'])}</td>"
        f"<td>{_fmt(board['agents'][a]['consistency'])} {_ci(board['agents'][a]['consistency_ci'])}</td>"
        f"<td>{html.escape(board['agents'][a]['method'])}</td>"
        f"<td>{_fmt(board['agents'][a].get('ability'))} {_ci(board['agents'][a].get('ability_ci'))}</td></tr>"
        for i, a in enumerate(board["ranking"], start=1))
    cats = "".join(f"<tr><td>{html.escape(c)}</td><td>{_fmt(v['rate'])}</td><td>{_ci(v['ci'])}</td>"
                   f"<td>{_fmt(board['difficulty_by_category'].get(c, {}).get('mean_scenario_success_rate'))} "
                   f"{_ci(board['difficulty_by_category'].get(c, {}).get('ci', [None, None]))}</td></tr>"
                   for c, v in board["categories"].items())
    why = board.get("pooling", {}).get("agents", {}).get("why")
    why = f" References: {html.escape(why)}." if why else ""
    truth = ""
    if "truth" in board:
        t = board["truth"]
        truth = (f"<p>Against the simulator truth: Spearman {t['spearman']:.3f}, MMRV {t['mmrv']:.3f}; the 95% "
                 f"intervals contain the true rate for {t['coverage']:.0%} of agents.</p>")
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>Leaderboard {html.escape(board['suite'])}</title>
<style>body{{font-family:sans-serif;max-width:1000px;margin:2em auto}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}</style></head><body>
<h1>Agent leaderboard: {html.escape(board['suite'])}</h1>
<p>Labels from {html.escape(board['model'])} (auto-labelled) and human annotators (the uncertain continuations
and a random audit slice), corrected by the suite's gold references (pooled across agents, or each agent's own),
else by the audit slice.{why}
Every rate comes with its 95% interval; {board['waiting']} continuations still waiting for a human label are left
out.</p>{truth}
<table><tr><th>rank</th><th>agent</th><th>success rate</th><th>95% interval</th><th>plain share of the labels</th>
<th>human</th><th>auto</th>
<th>audit</th><th>gold</th><th>waiting</th><th>median time to success (s)</th><th>consistency</th><th>method</th>
<th>ability (log-odds)</th></tr>{rows}</table>
<img src="data:image/png;base64,{figs['leaderboard']}">
<h2>Ability and difficulty</h2><p>A {html.escape(board.get('irt', {}).get('model', '1pl').upper())} item-response model
fitted to every label at once: an agent's ability is its log-odds of success on an average scenario, a scenario's
difficulty how much harder it is; labels count by their source's error on the gold references. Median times and
consistency are corrected the same way (marker lag per source; label noise).</p>
<img src="data:image/png;base64,{figs['ability']}"><img src="data:image/png;base64,{figs['difficulty_by_category']}">
<h2>Per category</h2><table><tr><th>category</th><th>success rate</th><th>95% interval</th>
<th>mean scenario success rate</th></tr>{cats}</table>
<h2>Time to completion</h2><img src="data:image/png;base64,{figs['time_to_completion']}">
<h2>Consistency and scenario difficulty</h2><img src="data:image/png;base64,{figs['consistency']}">
<img src="data:image/png;base64,{figs['difficulty']}">
</body></html>
"""
    write_text_atomic(out_html, page)
    write_text_atomic(out_html.with_suffix(".json"), json.dumps(board, indent=1) + "\n")
    return out_html


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.3f}"


def _ci(ci) -> str:
    return "" if ci is None or ci[0] is None else f"[{ci[0]:.2f}, {ci[1]:.2f}]"


__all__ = ["ability_and_difficulty", "corrected_consistency", "corrected_time_to_success", "error_counts",
           "error_heterogeneity", "estimate", "format_leaderboard", "group_estimates", "leaderboard",
           "leaderboard_figures", "marker_offsets", "rate_estimate", "rate_pooled", "rate_vs_gold", "wilson_interval",
           "write_report"]
