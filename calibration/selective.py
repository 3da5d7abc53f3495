"""When may the autorater label alone? Two thresholds chosen by Learn-then-Test on reference episodes."""

from __future__ import annotations

import functools

import numpy as np
from scipy import special

from ._checks import as_binary, as_float, as_probs, check_fitted, same_length

_PARAMS = ("target_agreement", "confidence", "min_references", "max_marker_uncertainty_s", "on_infeasible",
           "start_errors")
_FITTED = ("t_success", "t_fail", "bound", "expected_coverage", "empirical_agreement", "n_references", "feasible")


class InsufficientReferencesError(ValueError):
    """The references cannot certify any auto-labelling: too few of them, or too many errors."""


def _cp_upper(errors, n, delta: float) -> np.ndarray:
    """One-sided Clopper-Pearson upper bound, at level 1 - delta, on a binomial rate; 1 where n = 0."""
    errors, n = np.asarray(errors, dtype=float), np.asarray(n, dtype=float)
    return np.where(errors >= n, 1.0, special.betaincinv(errors + 1, np.maximum(n - errors, 1), 1 - delta))


@functools.lru_cache(maxsize=256)  # pure, and costly (a few thousand inverse betas): cached for simulations
def _min_references(alpha: float, delta: float, errors: int = 0) -> int:
    """Smallest n for which ``errors`` wrong out of n passes the bound (0 errors: (1 - alpha)^n <= delta)."""
    guess = int(np.ceil(np.log(delta) / np.log1p(-alpha)))  # the closed form for no error; the exact test decides
    candidates = np.arange(max(guess - 1, 1), 40 * guess * (errors + 1))
    return int(candidates[_cp_upper(errors, candidates, delta) <= alpha][0])


def certifying_size(target_agreement: float, confidence: float, errors: int = 0) -> int:
    """The smallest sample whose agreement bound can reach ``target_agreement`` at ``confidence`` with ``errors``
    wrong in it (the exact one-sided binomial test the policy runs; 45 at 0.95 / 90% with no error)."""
    if not (0 < target_agreement < 1 and 0 < confidence < 1) or errors < 0:
        raise ValueError(f"target_agreement and confidence must lie in (0, 1) and errors >= 0, got "
                         f"{target_agreement}, {confidence}, {errors}")
    return _min_references(1 - float(target_agreement), 1 - float(confidence), int(errors))


def agreement_lower_bound(errors: int, n: int, confidence: float) -> float:
    """One-sided Clopper-Pearson lower bound, at ``confidence``, on the agreement of n labels with ``errors`` wrong
    (0 when n = 0)."""
    return float(1 - _cp_upper(errors, n, 1 - confidence))


class SelectivePolicy:
    """Three-way decision: auto-success, auto-failure, or a human, with a stated agreement.

    The autorater labels an episode alone when ``p >= t_success_`` (success) or ``p <= t_fail_``
    (failure); in between, a human labels it. The thresholds come from gold reference episodes by
    Learn-then-Test (Angelopoulos et al., 2021) with fixed-sequence testing:

    * Path. Confidence is ``max(p, 1 - p)``; operating point k auto-labels the k most confident
      eligible references, i.e. threshold ``c_k`` = their k-th largest confidence, with
      ``t_success = c_k`` and ``t_fail = 1 - c_k`` (symmetric: one confidence scale for both
      sides). Ties are kept together (a point sits only where the confidence drops). The path
      runs from the most conservative point to the most permissive one and starts at the
      smallest k for which k correct out of k could pass; smaller auto sets never can.
    * Test. At each point, the Clopper-Pearson upper bound, at level ``confidence``, on the error
      rate of the auto-labelled references; the point is accepted while the bound is
      ``<= 1 - target_agreement``. Testing stops at the first failure (fixed sequence: no
      multiplicity penalty) and the last accepted point is chosen.
    * Several starts (``start_errors``, a tuple). One sequence that meets a few confident errors
      early stops there, however good the rest of the path is; a sequence that starts late has
      nothing to offer a model that cannot reach its start. So m sequences run, one per start,
      each at level ``1 - (1 - confidence) / m`` (Bonferroni), and the most permissive point any
      of them accepts is chosen. The union bound keeps the guarantee below.

    Guarantee. Let ``A(t)`` be the population agreement of the auto part under thresholds t,
    ``P(label == gold | auto)``, over episodes drawn from the distribution the references come
    from. Assume (1) the references are i.i.d. draws of that distribution (exchangeable with the
    suite being labelled: not picked because they look easy or hard), (2) confidences have no
    ties (continuous scores), and (3) the chance that the autorater's label is wrong does not
    increase with its confidence (true for calibrated ``p``, where it is ``min(p, 1 - p)``;
    this is what ``TemperatureScaler`` is for). Then ``P(A(t_success_, t_fail_) >= target_agreement)
    >= confidence`` over the draw of references. It is a statement about the population rate,
    not about the agreement realised on one finite suite (which scatters around it by binomial
    noise), and about the auto part as a whole, not each category, agent or side. ``bound_`` is
    the achieved lower confidence bound on ``A``. (Sketch: the first point on the path whose rule
    misses the target auto-labels the references above the confidence where the population
    agreement crosses the target, whose errors are binomial with rate exactly ``1 - target``, and
    at least one below it, whose chance of error is no lower; so its error count is at least
    ``Binomial(k, 1 - target)``, which the bound passes with probability at most ``1 -
    confidence``, and fixed-sequence testing must pass that point to choose any later one. With m
    sequences each at level ``1 - (1 - confidence) / m``, each passes a wrong point with chance at
    most ``(1 - confidence) / m``, so all of them together at most ``1 - confidence``.)
    Stopping at the first failure makes the procedure conservative: one early error ends the
    path, and with a few hundred references expect well under the best possible coverage.
    With a path and starts fixed before these references are seen (``fit(thresholds=...,
    planned_counts=...)``, as ``SplitCalibrator`` runs it from a disjoint part of the references),
    assumptions (2) and (3) are not needed: each point's test is then exact whatever the scores.

    Compared with MAPIE's ``BinaryClassificationController``: the same Learn-then-Test recipe (a
    p-value per candidate threshold from a conditional empirical risk and its effective sample
    size, then family-wise error control, fixed-sequence being one of its options), but MAPIE
    tunes one threshold of a binary decision on a preset grid with Hoeffding-Bentkus p-values;
    here the decision is three-way, the controlled risk is the error of the auto part only, the
    test is the exact binomial one, and the path comes from the references' own confidences so
    that testing starts where it has power.

    Args:
        target_agreement: required agreement of auto-labels with gold, in (0, 1).
        confidence: probability, over the draw of references, that the guarantee holds.
        min_references: floor on the number of references, on top of the statistical minimum,
            so that they can represent the suite's categories.
        max_marker_uncertainty_s: if set, episodes whose ``marker_uncertainty`` (seconds; NaN
            counts as unknown) exceeds it always go to a human, in ``fit`` and ``decide``.
        on_infeasible: ``"raise"`` an ``InsufficientReferencesError`` when no point passes, or
            ``"route_all"``: send everything to humans and set ``feasible_ = False``.
        start_errors: where each sequence starts: at the most confident k references among which this
            many errors would still pass, at the sequence's level (at 0.95 / 90% split over two
            sequences: 0 errors 59, 2 errors 124, 5 errors 208). An int runs one sequence at the full
            level. Any starts fixed before the labels are seen keep the guarantee. The default (2, 5):
            the early sequence serves a model that can auto-label only its most confident
            references (and survives two confident errors among them); the late one is not ended by
            a cluster of confident errors among the first hundred. Measured on six models of the
            quality benchmark (300 references, 0.95 / 90%), coverage 70-91% against 35-93% with one
            sequence from 2 errors; on the demo's weaker model 44% (58% with one sequence, none with
            (0, 5)) (README).

    Attributes:
        t_success_, t_fail_: the thresholds (NaN when infeasible: nothing is auto-labelled).
        bound_: lower confidence bound on the auto part's agreement (NaN when infeasible).
        expected_coverage_: share of references auto-labelled, the expected share of a suite.
        empirical_agreement_: agreement of the auto-labelled references with gold.
        n_references_: number of references given to ``fit``.
        feasible_: whether an operating point passed.

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> p = rng.beta(0.5, 0.5, 400)  # calibrated P(success) of 400 references
        >>> y = (rng.random(400) < p).astype(int)
        >>> policy = SelectivePolicy(target_agreement=0.9, confidence=0.9).fit(p, y)
        >>> policy.bound_ >= 0.9
        True
        >>> policy.decide([0.995, 0.5, 0.005]).tolist()
        ['auto', 'human', 'auto']
    """

    def __init__(
        self,
        target_agreement: float = 0.95,
        confidence: float = 0.9,
        min_references: int = 100,
        max_marker_uncertainty_s: float | None = None,
        on_infeasible: str = "raise",
        start_errors: int | tuple[int, ...] = (2, 5),
    ):
        self.start_errors = start_errors if isinstance(start_errors, int) else tuple(start_errors)
        self.target_agreement = target_agreement
        self.confidence = confidence
        self.min_references = min_references
        self.max_marker_uncertainty_s = max_marker_uncertainty_s
        self.on_infeasible = on_infeasible

    def fit(self, p, y, marker_uncertainty=None, thresholds=None, planned_counts=None) -> SelectivePolicy:
        """Chooses the thresholds on reference episodes.

        Args:
            p: (n,) calibrated P(success) of the references.
            y: (n,) gold outcomes, 1 = success.
            marker_uncertainty: (n,) marker uncertainty in seconds; needed when
                ``max_marker_uncertainty_s`` is set.
            thresholds: (m,) a path of confidence thresholds in [0.5, 1], most conservative first, fixed
                before these references' scores and labels were seen (e.g. from a disjoint part of the
                references: ``SplitCalibrator``). Default: the references' own confidences (assumption (3)).
                With a fixed path the guarantee needs assumption (1) only: each point's error count
                among the k references it auto-labels is Binomial(k, 1 - A) given k, whatever the scores.
            planned_counts: (m,) with ``thresholds``: the number of references each point is expected to
                auto-label, fixed with the path; each sequence starts at the first point whose planned
                count could pass with its ``start_errors`` errors.

        Returns:
            self.

        Raises:
            InsufficientReferencesError: no operating point passes and ``on_infeasible="raise"``.
        """
        if not (0 < self.target_agreement < 1 and 0 < self.confidence < 1):
            raise ValueError("target_agreement and confidence must lie strictly between 0 and 1, e.g. 0.95 and 0.9")
        if self.on_infeasible not in ("raise", "route_all"):
            raise ValueError(f"on_infeasible must be 'raise' or 'route_all', got {self.on_infeasible!r}")
        p, y = as_probs(p, "p"), as_binary(y, "y")
        n = same_length(p=p, y=y)
        alpha, delta = 1 - self.target_agreement, 1 - self.confidence
        starts = self._starts()
        delta = delta / len(starts)  # Bonferroni over the sequences
        if thresholds is None:
            threshold, k, errors = self._path(p, y, marker_uncertainty)
            planned = k
        else:
            threshold, k, errors, planned = self._fixed_path(p, y, marker_uncertainty, thresholds, planned_counts)
        upper = _cp_upper(errors, k, delta)
        n_min = _min_references(alpha, delta, min(starts))  # where the earliest sequence starts
        chosen = -1
        for start in starts:
            tested = np.flatnonzero(planned >= _min_references(alpha, delta, start))
            passed = tested[: np.argmax(np.append(upper[tested] > alpha, True))]  # accepted until the first failure
            if passed.size:
                chosen = max(chosen, int(passed[-1]))

        self.n_references_ = n
        needed = max(n_min, self.min_references)
        if n >= needed and chosen >= 0:
            i = chosen
            self.t_success_, self.t_fail_ = float(threshold[i]), float(1 - threshold[i])
            self.bound_ = float(1 - upper[i])
            self.expected_coverage_ = float(k[i] / n)
            self.empirical_agreement_ = float(1 - errors[i] / k[i])
            self.feasible_ = True
            return self
        target = f"target_agreement={self.target_agreement} at confidence={self.confidence}"
        if n < needed:
            problem = (
                f"{n} references are too few for {target}: at least {n_min} are needed (where the earliest "
                f"sequence starts, start_errors={self.start_errors}) even if the model were right on all of them, "
                f"and min_references={self.min_references}; label at least {needed}"
            )
        else:
            problem = (
                f"no operating point reaches {target} on {n} references ({k[-1] if k.size else 0} eligible by "
                f"marker uncertainty): the bound needs at least {n_min} auto-labelled references and the model "
                "errs too often among its most confident ones; add references, improve the model or lower the target"
            )
        if self.on_infeasible == "raise":
            raise InsufficientReferencesError(f"{problem}; or pass on_infeasible='route_all' to send all to humans")
        self.t_success_ = self.t_fail_ = self.bound_ = self.empirical_agreement_ = float("nan")
        self.expected_coverage_, self.feasible_ = 0.0, False
        return self

    def decide(self, p, marker_uncertainty=None) -> np.ndarray:
        """Returns (n,) strings, ``"auto"`` (the autorater's label ``p >= 0.5`` stands) or ``"human"``.

        Auto means ``p >= t_success_`` or ``p <= t_fail_``, evaluated as ``max(p, 1 - p) >=
        t_success_`` exactly as in ``fit`` (so no rounding in ``1 - t_success_`` can move an episode).

        Args:
            p: (n,) calibrated P(success).
            marker_uncertainty: (n,) seconds; needed when ``max_marker_uncertainty_s`` is set.
        """
        check_fitted(self, "t_success_")
        p = as_probs(p, "p")
        auto = (np.maximum(p, 1 - p) >= self.t_success_) & self._eligible(marker_uncertainty, len(p))
        return np.where(auto, "auto", "human")

    def risk_coverage_curve(self, p, y, marker_uncertainty=None) -> dict:
        """Coverage and error of the auto part along the path, for a risk-coverage plot.

        Args:
            p: (n,) calibrated P(success) of references.
            y: (n,) gold outcomes.
            marker_uncertainty: (n,) seconds; needed when ``max_marker_uncertainty_s`` is set.

        Returns:
            ``threshold`` (confidence c), ``coverage`` (share of the n references auto-labelled),
            ``error`` (their error rate) and ``error_upper_bound`` (Clopper-Pearson at the level each
            sequence tests at), each (n_points,), most conservative first; and ``target_error``.
        """
        p, y = as_probs(p, "p"), as_binary(y, "y")
        n = same_length(p=p, y=y)
        threshold, k, errors = self._path(p, y, marker_uncertainty)
        return {
            "threshold": threshold,
            "coverage": k / n,
            "error": errors / k,
            "error_upper_bound": _cp_upper(errors, k, (1 - self.confidence) / len(self._starts())),
            "target_error": 1 - self.target_agreement,
        }

    def to_dict(self) -> dict:
        """Returns parameters and fitted values as a JSON-able dict (NaN becomes None)."""
        check_fitted(self, "t_success_")
        fitted = {name: getattr(self, name + "_") for name in _FITTED}
        fitted = {name: None if isinstance(v, float) and np.isnan(v) else v for name, v in fitted.items()}
        return {**{name: getattr(self, name) for name in _PARAMS}, **fitted}  # a tuple of starts dumps as a list

    @classmethod
    def from_dict(cls, d: dict) -> SelectivePolicy:
        """Inverse of ``to_dict``; unknown keys are ignored, missing parameters take their defaults."""
        missing = [name for name in _FITTED if name not in d]
        if missing:
            raise KeyError(f"a SelectivePolicy dict needs the fitted fields {missing}; write it with to_dict()")
        policy = cls(**{name: d[name] for name in _PARAMS if name in d})
        for name in _FITTED:
            setattr(policy, name + "_", float("nan") if d[name] is None else d[name])
        return policy

    def _starts(self) -> tuple[int, ...]:
        starts = (self.start_errors,) if isinstance(self.start_errors, int) else tuple(self.start_errors)
        if not starts or any(not isinstance(s, (int, np.integer)) or s < 0 for s in starts):
            raise ValueError(f"start_errors must be a count of errors >= 0 or a non-empty tuple of them, e.g. (0, 5); "
                             f"got {self.start_errors!r}")
        return tuple(int(s) for s in starts)

    def _eligible(self, marker_uncertainty, n: int) -> np.ndarray:
        """(n,) bool: may the autorater label this episode alone as far as its marker goes?"""
        if self.max_marker_uncertainty_s is None:
            return np.ones(n, dtype=bool)
        if marker_uncertainty is None:
            raise ValueError(
                f"max_marker_uncertainty_s={self.max_marker_uncertainty_s} is set, so pass marker_uncertainty "
                "(seconds, one per episode), or set max_marker_uncertainty_s=None"
            )
        marker_uncertainty = as_float(marker_uncertainty, "marker_uncertainty")
        same_length(p=np.empty(n), marker_uncertainty=marker_uncertainty)
        return marker_uncertainty <= self.max_marker_uncertainty_s  # NaN (unknown) -> human

    def _fixed_path(self, p, y, marker_uncertainty, thresholds, planned_counts):
        """A path fixed in advance: (threshold, auto count k, errors, planned count), each (m,)."""
        threshold = as_float(thresholds, "thresholds")
        if planned_counts is None:
            raise ValueError("thresholds need planned_counts (the expected auto count at each, fixed with the path) "
                             "to place the start of each sequence; SplitCalibrator computes both")
        planned = as_float(planned_counts, "planned_counts")
        same_length(thresholds=threshold, planned_counts=planned)
        if threshold.size and (np.any(np.diff(threshold) > 0) or threshold.min() < 0.5 or threshold.max() > 1):
            raise ValueError("thresholds must be confidences in [0.5, 1], most conservative (highest) first")
        eligible = self._eligible(marker_uncertainty, len(p))
        confidence = np.maximum(p, 1 - p)
        auto = eligible[None, :] & (confidence[None, :] >= threshold[:, None])  # (m, n)
        wrong = (p >= 0.5) != y
        return threshold, auto.sum(1), (auto & wrong[None, :]).sum(1), planned

    def _path(self, p, y, marker_uncertainty) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Operating points, most conservative first: (threshold c, auto count k, errors), each (n_points,)."""
        eligible = self._eligible(marker_uncertainty, len(p))
        confidence = np.maximum(p, 1 - p)[eligible]
        order = np.argsort(-confidence, kind="stable")
        confidence = confidence[order]
        errors = np.cumsum(((p >= 0.5) != y)[eligible][order])
        ends_tie = np.diff(confidence, append=-np.inf) < 0  # a threshold keeps tied episodes together
        k = np.arange(1, confidence.size + 1)
        return confidence[ends_tie], k[ends_tie], errors[ends_tie]
