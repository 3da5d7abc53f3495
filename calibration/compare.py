"""Is the challenger better than the champion? A paired comparison on the same gold references."""

from __future__ import annotations

import numpy as np
from scipy import stats

from ._checks import as_binary, same_length


def _balanced_accuracy(tp, fn, tn, fp) -> np.ndarray:
    """Mean recall over the two classes from counts (arrays); NaN where a class is absent."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return (tp / (tp + fn) + tn / (tn + fp)) / 2


def paired_comparison(y, pred_a, pred_b, groups=None, level: float = 0.95, margin: float = 0.0,
                      n_boot: int = 2000, seed: int = 0) -> dict:
    """Balanced accuracy of b minus a on the same references, with a paired bootstrap interval and McNemar.

    Both models label the same references, so their errors are compared reference by reference: the
    bootstrap resamples whole groups (scenarios) and recomputes both balanced accuracies on each
    resample, so what the two share cancels and a scenario's references move together. A resample that
    lacks a class is dropped. ``better`` is True only when the lower end of the ``level`` interval lies
    above ``margin``: a challenger whose gain is within noise is not better. With ``level=0.95`` a
    challenger no better than the champion is declared better with chance about 2.5% (one side of the
    interval). McNemar's exact test on the discordant references is reported beside it.

    Args:
        y: (n,) gold outcomes, 1 = success.
        pred_a: (n,) outcomes predicted by model a (the champion).
        pred_b: (n,) outcomes predicted by model b (the challenger).
        groups: (n,) scenario ids (resampled whole); None: each reference alone.
        level: two-sided level of the interval.
        margin: the gain in balanced accuracy that must be exceeded (0: any real gain).
        n_boot: bootstrap resamples.
        seed: seed of the resampling.

    Returns:
        ``ba_a``, ``ba_b``, ``difference`` (b - a), ``ci`` ([low, high], None where no resample has both
        classes), ``level``, ``margin``, ``better``, ``mcnemar_p`` (two-sided exact), ``only_a_right``,
        ``only_b_right``, ``n``, ``n_groups``, ``n_boot_used``.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> y = rng.integers(0, 2, 300)
        >>> champion = np.where(rng.random(300) < 0.25, 1 - y, y)      # wrong a quarter of the time
        >>> challenger = np.where(rng.random(300) < 0.05, 1 - y, y)    # wrong one time in twenty
        >>> result = paired_comparison(y, champion, challenger, groups=np.arange(300) // 2)
        >>> result["better"], result["ci"][0] > 0.1
        (True, True)
    """
    y, a, b = as_binary(y, "y"), as_binary(pred_a, "pred_a"), as_binary(pred_b, "pred_b")
    n = same_length(y=y, pred_a=a, pred_b=b)
    if not 0 < level < 1:
        raise ValueError(f"level must lie strictly between 0 and 1, e.g. 0.95; got {level}")
    groups = np.arange(n) if groups is None else np.asarray(groups)
    same_length(y=y, groups=groups)
    _, index = np.unique(groups, return_inverse=True)
    n_groups = int(index.max()) + 1 if n else 0
    # per group: (tp, fn, tn, fp) of a and of b, shape (n_groups, 8)
    cells = np.stack([(y == 1) & (a == 1), (y == 1) & (a == 0), (y == 0) & (a == 0), (y == 0) & (a == 1),
                      (y == 1) & (b == 1), (y == 1) & (b == 0), (y == 0) & (b == 0), (y == 0) & (b == 1)], 1)
    per_group = np.zeros((n_groups, 8))
    np.add.at(per_group, index, cells.astype(float))
    total = per_group.sum(0)
    ba_a, ba_b = float(_balanced_accuracy(*total[:4])), float(_balanced_accuracy(*total[4:]))
    ci, used = [None, None], 0
    if n_groups:
        rng = np.random.default_rng(seed)
        weights = rng.multinomial(n_groups, np.full(n_groups, 1 / n_groups), size=n_boot)  # (n_boot, n_groups)
        counts = weights @ per_group  # (n_boot, 8)
        diff = _balanced_accuracy(*counts[:, 4:].T) - _balanced_accuracy(*counts[:, :4].T)
        diff = diff[np.isfinite(diff)]
        used = int(diff.size)
        if used:
            tail = 50 * (1 - level)
            ci = [float(v) for v in np.percentile(diff, [tail, 100 - tail])]
    only_a, only_b = int(((a == y) & (b != y)).sum()), int(((b == y) & (a != y)).sum())
    mcnemar = float(stats.binomtest(only_b, only_a + only_b, 0.5).pvalue) if only_a + only_b else 1.0
    return {"ba_a": ba_a, "ba_b": ba_b, "difference": ba_b - ba_a, "ci": ci, "level": level, "margin": margin,
            "better": bool(ci[0] is not None and ci[0] > margin), "mcnemar_p": mcnemar, "only_a_right": only_a,
            "only_b_right": only_b, "n": n, "n_groups": n_groups, "n_boot_used": used}


__all__ = ["paired_comparison"]
