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
