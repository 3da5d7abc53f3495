"""Has the model's score distribution moved since calibration? If so, the guarantee may not carry over."""

from __future__ import annotations

import numpy as np
from scipy import stats

from ._checks import as_float

_EPS = 1e-4  # floor on bin shares, so an empty bin does not make the PSI infinite


def drift_check(reference_scores, new_scores, psi_threshold: float = 0.2, ks_alpha: float = 0.01) -> dict:
    """Compares the scores of a new suite with those of the calibration references.

    Both statistics are unchanged by a monotone map of the scores, so raw logits and calibrated
    probabilities give the same answer (logits keep more resolution near 0 and 1).

    Args:
        reference_scores: (n_ref,) scores of the calibration references, or
            ``CalibrationRecord.score_sample()``.
        new_scores: (n_new,) scores of the suite about to be labelled.
        psi_threshold: population stability index at or above which the shift counts as large
            (0.1-0.2 is commonly read as moderate, above 0.2 as large).
        ks_alpha: significance level of the two-sample Kolmogorov-Smirnov test.

    Returns:
        ``psi`` (over 10 quantile bins of the reference scores), ``ks_statistic``, ``ks_pvalue``,
        ``drifted`` and a one-line ``message``. ``drifted`` needs both a large PSI and a
        significant KS test: the PSI alone is noisy on small suites, and the KS test alone flags
        negligible shifts on large ones.
    """
    reference, new = as_float(reference_scores, "reference_scores"), as_float(new_scores, "new_scores")
    if reference.size == 0 or new.size == 0 or np.isnan(reference).any() or np.isnan(new).any():
        raise ValueError("drift_check needs non-empty score arrays without NaN; drop episodes the model did not score")
    edges = np.quantile(reference, np.linspace(0.1, 0.9, 9))
    share_ref, share_new = _bin_shares(reference, edges), _bin_shares(new, edges)
    psi = float(np.sum((share_new - share_ref) * np.log(share_new / share_ref)))
    ks = stats.ks_2samp(reference, new)
    large, significant = psi >= psi_threshold, ks.pvalue < ks_alpha
    drifted = bool(large and significant)
    if drifted:
        verdict = "scores drifted: recalibrate on references drawn from the new suite before trusting the guarantee"
    elif large or significant:  # one sign without the other: say which, and why it is not called drift
        verdict = ("no drift called: the distributions differ by PSI but not significantly (too few scores?)"
                   if large else "no drift called: a significant but small shift")
    else:
        verdict = "no drift detected"
    return {
        "psi": psi,
        "ks_statistic": float(ks.statistic),
        "ks_pvalue": float(ks.pvalue),
        "drifted": drifted,
        "message": (
            f"{verdict} (PSI {psi:.3f} {'>=' if large else '<'} {psi_threshold}, "
            f"KS p = {ks.pvalue:.2g} {'<' if significant else '>='} {ks_alpha}; "
            f"{reference.size} reference vs {new.size} new scores)"
        ),
    }


def _bin_shares(x: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Share of x in each of the len(edges) + 1 bins, floored at _EPS."""
    counts = np.bincount(np.searchsorted(edges, x, side="right"), minlength=len(edges) + 1)
    return np.maximum(counts / x.size, _EPS)


def mmd_test(reference, new, permutations: int = 500, seed: int = 0) -> dict:
    """Kernel two-sample test (MMD with a Gaussian kernel) between two samples of input embeddings.

    The statistic is the unbiased squared MMD with the median-distance bandwidth of the pooled sample; its
    p-value comes from ``permutations`` random relabellings of the pooled rows (exact under exchangeability:
    ``(1 + #{MMD_perm >= MMD}) / (1 + permutations)``).

    Args:
        reference: (n_ref, d) embeddings of the calibration references.
        new: (n_new, d) embeddings of the episodes about to be labelled.
        permutations: random relabellings for the p-value.
        seed: their seed.

    Returns:
        ``mmd2`` (the statistic), ``pvalue``, ``n_reference``, ``n_new``. With fewer than 2 rows on a side the test
        cannot run: ``pvalue`` is None.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> same = mmd_test(rng.normal(size=(60, 8)), rng.normal(size=(40, 8)))["pvalue"]
        >>> moved = mmd_test(rng.normal(size=(60, 8)), rng.normal(1.0, 1.0, size=(40, 8)))["pvalue"]
        >>> same > 0.05, moved < 0.01
        (True, True)
    """
    a, b = np.asarray(reference, dtype=float), np.asarray(new, dtype=float)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"mmd_test needs two (rows, dim) arrays of one width, got {a.shape} and {b.shape}")
    out = {"mmd2": None, "pvalue": None, "n_reference": len(a), "n_new": len(b)}
    if len(a) < 2 or len(b) < 2:
        return out
    x = np.concatenate([a, b])
    sq = np.maximum(np.sum(x * x, 1)[:, None] + np.sum(x * x, 1)[None, :] - 2 * x @ x.T, 0.0)
    positive = sq[np.triu_indices(len(x), 1)]
    positive = positive[positive > 0]
    bandwidth = float(np.median(positive)) if positive.size else 1.0
    kernel = np.exp(-sq / bandwidth)
    np.fill_diagonal(kernel, 0.0)
    n_a = len(a)

    def statistic(order: np.ndarray) -> float:
        k = kernel[np.ix_(order, order)]
        ka, kb, kab = k[:n_a, :n_a], k[n_a:, n_a:], k[:n_a, n_a:]
        m = len(order) - n_a
        return float(ka.sum() / (n_a * (n_a - 1)) + kb.sum() / (m * (m - 1)) - 2 * kab.mean())

    rng = np.random.default_rng(seed)
    observed = statistic(np.arange(len(x)))
    beaten = sum(statistic(rng.permutation(len(x))) >= observed for _ in range(permutations))
    return {**out, "mmd2": observed, "pvalue": (1 + beaten) / (1 + permutations)}
