"""Agent success rates from imperfect labels, with honest intervals: the estimators behind the leaderboard.

Torch-free (numpy, scipy, ``ppi_py``), on plain rows (dicts with ``outcome``, ``decision``...) and gold outcomes;
``autorater.serving.analysis.leaderboard`` assembles them over a labels folder, and its docstring says when each one
is used:
Wilson and Agresti-Coull for human labels, prediction-powered inference (``rate_estimate``) for model labels
with an audit slice, Rogan-Gladen correction pooled over the references (``rate_pooled``) or per agent
(``rate_vs_gold``), a permutation test of whether error rates differ between agents
(``error_heterogeneity``), consistency and time to completion corrected for label error
(``corrected_consistency``, ``corrected_time_to_success``), and a bootstrap over groups
(``bootstrap_interval``).

Example:
    >>> wilson_interval(8, 10)   # doctest: +ELLIPSIS
    (0.49..., 0.94...)
"""

from __future__ import annotations

import numpy as np
from scipy import stats

__all__ = [
    "Z95", "MIN_POOLED", "MIN_MARKER_PAIRS", "wilson_interval", "rate_estimate", "rate_vs_gold", "estimate",
    "error_counts", "rate_pooled", "error_heterogeneity", "group_estimates", "corrected_consistency",
    "marker_offsets", "corrected_time_to_success", "bootstrap_interval",
]

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


def bootstrap_interval(values_by_group: dict, stat, rng: np.random.Generator, n_boot: int = 1000) -> list[float]:
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
