"""The project's one definition of its metrics (docs/design.md section 5); everything else imports these.

Outcomes are 0/1 arrays with 1 = success; markers are seconds from the first frame of the video.
Results are plain Python numbers, NaN where a value is undefined, so they drop into JSON reports.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping

import numpy as np
from scipy import stats

from ._checks import as_binary, as_float, as_probs, same_length

_NAN = float("nan")


def outcome_metrics(y_true, y_pred) -> dict:
    """Agreement of predicted outcomes with true ones.

    Args:
        y_true: (n,) true (gold) outcomes, 1 = success, 0 = failure.
        y_pred: (n,) predicted outcomes, same coding.

    Returns:
        ``balanced_accuracy``: mean recall over the classes present in ``y_true`` (with a single
        class present, that class's recall); ``accuracy``; ``success_precision``: share of
        predicted successes that are true successes, NaN when nothing is predicted a success;
        ``cohen_kappa``: NaN when both sequences are the same single class (chance agreement is 1);
        ``n``. Every metric is NaN when n = 0. No warnings are raised for these cases.
    """
    y_true, y_pred = as_binary(y_true, "y_true"), as_binary(y_pred, "y_pred")
    same_length(y_true=y_true, y_pred=y_pred)
    return outcome_metrics_unchecked(y_true, y_pred)


def outcome_metrics_unchecked(y_true: np.ndarray, y_pred: np.ndarray) -> dict:
    """``outcome_metrics`` without the checks, for arrays already checked (fast: bootstrap loops).

    Args:
        y_true: (n,) int array of 0/1, as ``as_binary`` returns it.
        y_pred: (n,) int array of 0/1, same length.
    """
    tn, fp, fn, tp = np.bincount(2 * y_true + y_pred, minlength=4).tolist()
    n = tn + fp + fn + tp
    if n == 0:
        return {"balanced_accuracy": _NAN, "accuracy": _NAN, "success_precision": _NAN, "cohen_kappa": _NAN, "n": 0}
    recalls = [hits / total for hits, total in ((tn, tn + fp), (tp, tp + fn)) if total]
    accuracy, true_rate, pred_rate = (tp + tn) / n, (tp + fn) / n, (tp + fp) / n
    chance = true_rate * pred_rate + (1 - true_rate) * (1 - pred_rate)
    return {
        "balanced_accuracy": sum(recalls) / len(recalls),
        "accuracy": accuracy,
        "success_precision": tp / (tp + fp) if tp + fp else _NAN,
        "cohen_kappa": (accuracy - chance) / (1 - chance) if chance < 1 else _NAN,
        "n": n,
    }


def marker_metrics(true_s, pred_s) -> dict:
    """Error of predicted marker times; pairs with a NaN on either side are dropped.

    Args:
        true_s: (n,) true marker times in seconds (NaN or None where unknown).
        pred_s: (n,) predicted marker times in seconds.

    Returns:
        ``median_abs_error_s``, ``within_0_5s`` and ``within_1s`` (shares of |error| <= 0.5 s and
        <= 1 s) and ``n`` (pairs kept); the metrics are NaN when n = 0.
    """
    true_s, pred_s = as_float(true_s, "true_s"), as_float(pred_s, "pred_s")
    same_length(true_s=true_s, pred_s=pred_s)
    error = np.abs(true_s - pred_s)
    error = error[~np.isnan(error)]
    if error.size == 0:
        return {"median_abs_error_s": _NAN, "within_0_5s": _NAN, "within_1s": _NAN, "n": 0}
    return {
        "median_abs_error_s": float(np.median(error)),
        "within_0_5s": float(np.mean(error <= 0.5)),
        "within_1s": float(np.mean(error <= 1.0)),
        "n": int(error.size),
    }


def failure_mode_metrics(true_mode, pred_mode) -> dict:
    """Agreement of predicted failure modes with true ones, on failures both call failures.

    Pass the episodes that are gold failures with a known mode *and* predicted failures (docs/design.md
    section 5: the mode is scored where the outcome is right). A predicted failure with no mode (None,
    NaN, "") counts as wrong and appears as ``"none"`` in the table.

    Args:
        true_mode: (n,) gold failure modes (strings).
        pred_mode: (n,) predicted failure modes (strings or None).

    Returns:
        ``accuracy`` (NaN when n = 0), ``n``, ``confusion``: ``{true mode: {predicted mode: count}}``, and
        ``recall``: ``{true mode: share predicted as that mode}``.

    Example:
        >>> failure_mode_metrics(["timeout", "wrong_object", "wrong_object"], ["timeout", "timeout", None])["accuracy"]
        0.3333333333333333
    """
    def name(m) -> str:
        return "none" if m is None or (isinstance(m, float) and np.isnan(m)) or m == "" else str(m)

    true = [name(m) for m in true_mode]
    pred = [name(m) for m in pred_mode]
    same_length(true_mode=true, pred_mode=pred)
    confusion: dict[str, dict[str, int]] = {}
    for t, p in zip(true, pred):
        row = confusion.setdefault(t, {})
        row[p] = row.get(p, 0) + 1
    n = len(true)
    right = sum(t == p for t, p in zip(true, pred))
    return {"accuracy": right / n if n else _NAN, "n": n,
            "confusion": {t: dict(sorted(row.items())) for t, row in sorted(confusion.items())},
            "recall": {t: row.get(t, 0) / sum(row.values()) for t, row in sorted(confusion.items())}}


def reliability_curve(p, y, n_bins: int = 10) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Reliability diagram data over equal-width bins of [0, 1]; empty bins are left out.

    Args:
        p: (n,) predicted P(success).
        y: (n,) outcomes, 1 = success.
        n_bins: number of equal-width bins.

    Returns:
        ``(mean_p, frac_pos, counts)``, each (n_nonempty_bins,): the mean predicted probability,
        the observed success rate and the number of episodes in each non-empty bin.
    """
    p, y = as_probs(p, "p"), as_binary(y, "y")
    same_length(p=p, y=y)
    index = np.minimum((p * n_bins).astype(int), n_bins - 1)
    counts = np.bincount(index, minlength=n_bins)
    kept = counts > 0
    mean_p = np.bincount(index, weights=p, minlength=n_bins)[kept] / counts[kept]
    frac_pos = np.bincount(index, weights=y, minlength=n_bins)[kept] / counts[kept]
    return mean_p, frac_pos, counts[kept]


def expected_calibration_error(p, y, n_bins: int = 10) -> float:
    """ECE: count-weighted mean |mean predicted - observed rate| over equal-width bins; NaN when empty."""
    mean_p, frac_pos, counts = reliability_curve(p, y, n_bins)
    return float(np.sum(counts * np.abs(mean_p - frac_pos)) / counts.sum()) if counts.size else _NAN


def brier_score(p, y) -> float:
    """Mean squared difference between predicted P(success) and the 0/1 outcome; NaN when empty."""
    p, y = as_probs(p, "p"), as_binary(y, "y")
    same_length(p=p, y=y)
    return float(np.mean((p - y) ** 2)) if p.size else _NAN


def auroc(y_true, score) -> float:
    """Area under the ROC curve of ``score`` for ``y_true`` (how well the score ranks successes above failures).

    The Mann-Whitney statistic: the share of (success, failure) pairs the score orders right, ties counted half.
    It does not depend on a threshold, so it says how well a model ranks a new stratum's outcomes before an
    audit sets the threshold there (docs/design.md section 5: per held-out set and per stratum).

    Args:
        y_true: (n,) outcomes, 1 = success.
        score: (n,) a score that rises with success: P(success) or its logit.

    Returns:
        The AUROC in [0, 1]; NaN when either class is missing (or n = 0), or a score is NaN.

    Example:
        >>> auroc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
        0.75
    """
    y_true, score = as_binary(y_true, "y_true"), as_float(score, "score")
    same_length(y_true=y_true, score=score)
    positives = int(y_true.sum())
    negatives = y_true.size - positives
    if not positives or not negatives or np.isnan(score).any():
        return _NAN
    ranks = stats.rankdata(score)  # ties share their mean rank: a tied pair counts half
    return float((ranks[y_true == 1].sum() - positives * (positives + 1) / 2) / (positives * negatives))


def rank_metrics(rate_a: Mapping[str, float], rate_b: Mapping[str, float]) -> dict:
    """How well estimated per-agent success rates reproduce the true ranking of agents.

    Args:
        rate_a: the truth, agent id -> success rate (e.g. from references or human labels).
        rate_b: the estimate, agent id -> success rate (e.g. from auto-labels).
            Only agents present in both are compared.

    Returns:
        ``spearman`` and ``pearson`` correlations (NaN with fewer than 2 agents or a constant
        side), ``mmrv`` and ``n_agents``. MMRV is the mean maximum rank violation of AutoEval
        (Zhou et al., 2025): with a the true and b the estimated rates,
        ``RV_ij = |a_i - a_j| * 1[(b_i < b_j) != (a_i < a_j)]`` and ``MMRV = mean_i max_j RV_ij``;
        0 when b orders the agents as a does, and in units of success rate otherwise.
    """
    agents = sorted(set(rate_a) & set(rate_b))
    if not agents:
        return {"spearman": _NAN, "pearson": _NAN, "mmrv": _NAN, "n_agents": 0}
    a = np.array([rate_a[k] for k in agents], dtype=float)
    b = np.array([rate_b[k] for k in agents], dtype=float)
    violated = (b[:, None] < b[None, :]) != (a[:, None] < a[None, :])
    mmrv = float((np.abs(a[:, None] - a[None, :]) * violated).max(axis=1).mean())
    varied = len(agents) >= 2 and np.ptp(a) > 0 and np.ptp(b) > 0
    return {
        "spearman": float(stats.spearmanr(a, b).statistic) if varied else _NAN,
        "pearson": float(stats.pearsonr(a, b).statistic) if varied else _NAN,
        "mmrv": mmrv,
        "n_agents": len(agents),
    }


def bootstrap_ci(
    fn: Callable[..., float | np.ndarray],
    *arrays,
    groups=None,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
):
    """Percentile bootstrap interval of a statistic of paired arrays.

    Args:
        fn: statistic of the arrays, ``fn(*arrays)``; returns a float or a 1-D array of floats
            (several statistics sharing the same resamples). NaN resamples are ignored.
        *arrays: (n,) arrays resampled together, row by row.
        groups: (n,) group ids (e.g. scenario ids). When given, whole groups are resampled, so
            episodes of one scenario stay together and the interval reflects scenario variation.
        n_boot: number of resamples.
        level: coverage of the interval.
        seed: seed of the resampling generator.

    Returns:
        ``(estimate, lo, hi)``: ``fn`` on the full data and the interval bounds (floats, or
        arrays when ``fn`` returns an array); bounds are NaN where every resample is NaN.

    Example:
        >>> y, pred = np.array([1, 0, 1, 1]), np.array([1, 0, 0, 1])
        >>> est, lo, hi = bootstrap_ci(lambda a, b: np.mean(a == b), y, pred, n_boot=200)
    """
    arrays = [np.asarray(a) for a in arrays]
    named = {f"arrays[{i}]": a for i, a in enumerate(arrays)}
    n = same_length(**named) if groups is None else same_length(**named, groups=groups)
    if n == 0:
        raise ValueError("bootstrap_ci needs at least one row; filter empty subsets out before calling it")
    rng = np.random.default_rng(seed)
    if groups is None:
        draws = (rng.integers(0, n, n) for _ in range(n_boot))
    else:
        _, group_index = np.unique(np.asarray(groups), return_inverse=True)
        order = np.argsort(group_index, kind="stable")
        members = np.split(order, np.cumsum(np.bincount(group_index))[:-1])  # rows of each group
        draws = (
            np.concatenate([members[g] for g in rng.integers(0, len(members), len(members))]) for _ in range(n_boot)
        )
    boot = np.array([fn(*(a[rows] for a in arrays)) for rows in draws], dtype=float)
    tail = 50 * (1 - level)
    with warnings.catch_warnings():  # a statistic NaN in every resample has a NaN interval
        warnings.simplefilter("ignore", RuntimeWarning)
        lo, hi = np.nanpercentile(boot, [tail, 100 - tail], axis=0)
    estimate = np.asarray(fn(*arrays), dtype=float)
    if estimate.ndim == 0:
        return float(estimate), float(lo), float(hi)
    return estimate, lo, hi
