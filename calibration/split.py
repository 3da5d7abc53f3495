"""Calibration that keeps its promise: the scaling and the selective thresholds fitted on disjoint references.

``SelectivePolicy``'s guarantee holds for probabilities fixed before its references are seen. Fitting the
temperature and shift on the same references that then choose the threshold reuses them: the scaler has
already bent the scores towards those references' labels, and the shift can reorder ``max(p, 1 - p)``.
``SplitCalibrator`` runs the whole procedure so that the guarantee covers it as run: the references are
split (by scenario when scenario ids are given), the scaler is fitted on one part, the path of candidate
thresholds and the start of each test sequence are fixed from that part too, and only the other part
tests them. ``cross_validated_calibration`` measures the scaler out of sample.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._checks import as_binary, as_float, check_fitted, same_length
from .metrics import brier_score, expected_calibration_error
from .selective import SelectivePolicy
from .temperature import TemperatureScaler

_NAN = float("nan")


def group_split(groups, share: float, rng: np.random.Generator) -> np.ndarray:
    """(n,) bool, True for the rows of whole groups drawn at random until they hold ``share`` of the rows.

    Args:
        groups: (n,) group ids (scenario ids), or None: every row its own group.
        share: target share of rows in the True part, in (0, 1).
        rng: the generator that orders the groups.
    """
    if not 0 < share < 1:
        raise ValueError(f"share must lie strictly between 0 and 1, e.g. 0.3; got {share}")
    groups = np.asarray(groups)
    _, index = np.unique(groups, return_inverse=True)
    sizes = np.bincount(index)
    order = rng.permutation(sizes.size)
    taken = np.zeros(sizes.size, dtype=bool)
    # groups in random order until the share is reached; never every group (the other part needs one)
    cumulative = np.cumsum(sizes[order])
    last = int(np.searchsorted(cumulative, share * groups.size))
    taken[order[: min(last + 1, sizes.size - 1)]] = True
    return taken[index]


def group_folds(groups, n_folds: int, rng: np.random.Generator) -> np.ndarray:
    """(n,) fold number of each row, whole groups per fold, groups dealt at random (fewer folds if fewer groups)."""
    groups = np.asarray(groups)
    _, index = np.unique(groups, return_inverse=True)
    n_groups = index.max() + 1 if index.size else 0
    fold_of_group = rng.permutation(n_groups) % max(1, min(n_folds, n_groups))
    return fold_of_group[index]


def cross_validated_calibration(logits, y, groups=None, n_folds: int = 5, seed: int = 0, bias: bool = True,
                                n_bins: int = 10) -> dict:
    """ECE and Brier of temperature scaling measured out of sample, by cross-fitting over groups.

    Each fold's P(success) comes from a ``TemperatureScaler`` fitted on the other folds, so no reference
    judges a scaler it trained. In-sample ECE flatters a scaler; this is the number to report.

    Args:
        logits: (n,) raw success scores of the references.
        y: (n,) gold outcomes, 1 = success.
        groups: (n,) scenario ids (folds hold whole scenarios); None: each reference its own.
        n_folds: number of folds (fewer when there are fewer groups).
        seed: seed of the fold assignment.
        bias: fit the shift as well (as ``TemperatureScaler``).
        n_bins: ECE bins.

    Returns:
        ``ece_raw`` and ``brier_raw`` (the sigmoid of the raw scores: nothing fitted), ``ece_cv`` and
        ``brier_cv`` (out-of-fold calibrated), ``n_folds`` (0 and NaNs with fewer than 2 groups), ``n``.
    """
    logits, y = as_float(logits, "logits"), as_binary(y, "y")
    n = same_length(logits=logits, y=y)
    groups = np.arange(n) if groups is None else np.asarray(groups)
    raw = 1 / (1 + np.exp(-logits))
    out = {"ece_raw": expected_calibration_error(raw, y, n_bins), "brier_raw": brier_score(raw, y), "n": n}
    folds = group_folds(groups, n_folds, np.random.default_rng(seed))
    k = int(folds.max()) + 1 if n else 0
    if k < 2:
        return {**out, "ece_cv": _NAN, "brier_cv": _NAN, "n_folds": 0}
    p = np.empty(n)
    for fold in range(k):
        test = folds == fold
        p[test] = TemperatureScaler(bias=bias).fit(logits[~test], y[~test]).predict_proba(logits[test])
    return {**out, "ece_cv": expected_calibration_error(p, y, n_bins), "brier_cv": brier_score(p, y), "n_folds": k}


@dataclass(eq=False)
class SplitCalibrator:
    """Temperature scaling and the selective policy fitted on disjoint parts of the references.

    Procedure, as run by ``autorater calibrate``:

    1. Split. Whole scenarios (``groups``) are drawn at random into the *scaling part* until it holds
       ``scaling_share`` of the references; the rest is the *threshold part*. The split sees no score
       and no label.
    2. Scale. ``TemperatureScaler`` is fitted on the scaling part only.
    3. Plan. On the scaling part, with the fitted scaler, the candidate thresholds are its references'
       confidences ``max(p, 1 - p)`` (most conservative first, then 0.5: everything), and each
       threshold's *planned count* is the number of threshold-part references it is expected to
       auto-label: the scaling part's share above it times the threshold part's size, less two binomial
       standard deviations (so that a sequence rarely starts at a point its own part cannot reach).
    4. Test. ``SelectivePolicy.fit`` on the threshold part, with that path and those planned counts
       (Clopper-Pearson bounds, fixed-sequence testing, several starts with Bonferroni).

    Guarantee. Assume the references are independent draws from the distribution of the episodes to be
    labelled (as for ``SelectivePolicy``; splitting by scenario keeps the two parts independent even
    when continuations of one scenario resemble each other). Then, with ``A(t)`` the population
    agreement of the auto part, ``P(A(t_success) >= target_agreement) >= confidence`` over the draw of
    the references, for the procedure above as a whole. No assumption on the scaler being calibrated,
    on ties, or on errors becoming rarer with confidence: given the scaling part, the scaler, the path
    and the starts are fixed; the threshold part is a fresh independent sample; at each point the
    errors among the k references it auto-labels are Binomial(k, 1 - A) given k, so each test is exact,
    and fixed-sequence testing over a fixed order (Bonferroni over the starts) accepts a point whose
    agreement misses the target with chance at most ``1 - confidence``. The price: the threshold part
    alone certifies, so expect lower coverage than fitting both on every reference (which promised
    what it could not prove).

    Args:
        target_agreement, confidence, min_references, max_marker_uncertainty_s, on_infeasible,
            start_errors: as ``SelectivePolicy`` (``min_references`` counts threshold-part references). One
            start by default, not ``SelectivePolicy``'s two: with a few hundred references the second start's
            Bonferroni share costs more than it finds (on a 0.94-BA BabyAI model's 300 references, over 20
            splits: certified 19 times, 81% auto-labelled on average, against 16 times and 65% with
            ``(2, 5)`` and a 0.3 scaling share).
        scaling_share: share of the references that fit the scaler (two parameters need few: 0.2 leaves
            the threshold part, which alone certifies, as large as it can be).
        min_per_class: the fewest gold successes, and gold failures, the scaling part needs to fit the
            scaler; with fewer, the scores are left as they are (temperature 1, shift 0) rather than fitted
            to one class (which sends every probability to 0 or 1). The rule reads the scaling part only, so
            the guarantee stands.
        n_folds: folds of the cross-validated ECE.
        seed: seed of the split and of the folds.

    Attributes:
        scaler_: the ``TemperatureScaler`` fitted on the scaling part (the one to deploy).
        policy_: the ``SelectivePolicy`` certified on the threshold part.
        scaling_mask_: (n,) bool, True for the references of the scaling part.
        scaler_fitted_: False when the scaling part held fewer than ``min_per_class`` of a class.
        calibration_: ``cross_validated_calibration`` of all the references, plus ``ece_threshold_part``
            and ``brier_threshold_part``: the deployed scaler on the part it never saw.

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> true_logit = rng.normal(0.0, 4.0, 600)
        >>> y = (rng.random(600) < 1 / (1 + np.exp(-true_logit))).astype(int)
        >>> fitted = SplitCalibrator(target_agreement=0.9).fit(3 * true_logit - 1, y, groups=np.arange(600) // 2)
        >>> int(fitted.scaling_mask_.sum()), fitted.policy_.n_references_
        (120, 480)
        >>> fitted.policy_.feasible_, fitted.policy_.bound_ >= 0.9
        (True, True)
        >>> fitted.decide([9.0, 0.1, -9.0]).tolist()
        ['auto', 'human', 'auto']
    """

    target_agreement: float = 0.95
    confidence: float = 0.9
    scaling_share: float = 0.2
    min_references: int = 100
    max_marker_uncertainty_s: float | None = None
    on_infeasible: str = "route_all"
    start_errors: int | tuple[int, ...] = 2
    min_per_class: int = 5
    n_folds: int = 5
    seed: int = 0

    def fit(self, logits, y, groups=None, marker_uncertainty=None) -> SplitCalibrator:
        """Splits the references, fits the scaler on one part and certifies the thresholds on the other.

        Args:
            logits: (n,) raw success scores of the references.
            y: (n,) gold outcomes, 1 = success.
            groups: (n,) scenario ids: a scenario's references stay in one part. None: split references.
            marker_uncertainty: (n,) seconds; needed when ``max_marker_uncertainty_s`` is set.

        Returns:
            self.
        """
        logits, y = as_float(logits, "logits"), as_binary(y, "y")
        n = same_length(logits=logits, y=y)
        groups = np.arange(n) if groups is None else np.asarray(groups)
        same_length(logits=logits, groups=groups)
        mu = None if marker_uncertainty is None else as_float(marker_uncertainty, "marker_uncertainty")
        rng = np.random.default_rng(self.seed)
        scaling = group_split(groups, self.scaling_share, rng) if len(np.unique(groups)) >= 2 else np.ones(n, bool)
        self.scaling_mask_ = scaling
        self.scaler_fitted_ = min(int(y[scaling].sum()), int((1 - y[scaling]).sum())) >= self.min_per_class
        self.scaler_ = TemperatureScaler().fit(logits[scaling], y[scaling]) if self.scaler_fitted_ else \
            TemperatureScaler.from_dict({"temperature": 1.0, "bias": 0.0})
        self.policy_ = SelectivePolicy(self.target_agreement, self.confidence, self.min_references,
                                       self.max_marker_uncertainty_s, self.on_infeasible, self.start_errors)
        thresholds, planned = self._plan(logits[scaling], None if mu is None else mu[scaling], int((~scaling).sum()))
        p_test = self.scaler_.predict_proba(logits[~scaling])
        self.policy_.fit(p_test, y[~scaling], None if mu is None else mu[~scaling], thresholds=thresholds,
                         planned_counts=planned)
        self.calibration_ = cross_validated_calibration(logits, y, groups, self.n_folds, self.seed)
        held_out = (~scaling).any()
        self.calibration_.update(ece_threshold_part=expected_calibration_error(p_test, y[~scaling]) if held_out
                                 else _NAN, brier_threshold_part=brier_score(p_test, y[~scaling]) if held_out
                                 else _NAN)
        return self

    def predict_proba(self, logits) -> np.ndarray:
        """(n,) calibrated P(success) by the deployed (scaling-part) scaler."""
        check_fitted(self, "scaler_")
        return self.scaler_.predict_proba(logits)

    def decide(self, logits, marker_uncertainty=None) -> np.ndarray:
        """(n,) ``"auto"`` or ``"human"`` for raw scores, as ``SelectivePolicy.decide`` of the calibrated ones."""
        return self.policy_.decide(self.predict_proba(logits), marker_uncertainty)

    def split_info(self) -> dict:
        """How the references were used, JSON-able: ``split_method``, ``scaling_share``, ``split_seed``,
        ``n_references`` (all of them), ``n_scaling``, ``n_threshold``."""
        check_fitted(self, "scaling_mask_")
        method = "disjoint: scaler on the scaling part, thresholds on the threshold part"
        if not self.scaler_fitted_:
            method += (f" (scaler not fitted: fewer than {self.min_per_class} gold successes or failures in the "
                       f"scaling part; scores left as they are)")
        return {"split_method": method,
                "scaling_share": self.scaling_share, "split_seed": self.seed, "n_references": self.scaling_mask_.size,
                "n_scaling": int(self.scaling_mask_.sum()), "n_threshold": int((~self.scaling_mask_).sum())}

    def _plan(self, logits, mu, n_test: int) -> tuple[np.ndarray, np.ndarray]:
        """The path of thresholds (descending) and each one's planned count, from the scaling part only."""
        p = self.scaler_.predict_proba(logits)
        confidence = np.maximum(p, 1 - p)
        eligible = np.ones(len(p), bool)
        if self.max_marker_uncertainty_s is not None:
            if mu is None:
                raise ValueError(f"max_marker_uncertainty_s={self.max_marker_uncertainty_s} is set, so pass "
                                 "marker_uncertainty (seconds, one per reference), or set it to None")
            eligible = mu <= self.max_marker_uncertainty_s  # NaN (unknown) -> human
        thresholds = np.unique(np.append(confidence[eligible], 0.5))[::-1]
        if p.size == 0:
            return thresholds, np.zeros(thresholds.size)
        share = (eligible[None, :] & (confidence[None, :] >= thresholds[:, None])).mean(1)
        planned = n_test * share - 2 * np.sqrt(n_test * share * (1 - share))
        return thresholds, planned


__all__ = ["SplitCalibrator", "cross_validated_calibration", "group_folds", "group_split"]
