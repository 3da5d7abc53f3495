"""Certify a suite version on its own audit, stratum by stratum, as soon as the evidence suffices.

The references say how often the autorater agrees with the annotators on episodes *like the references*. A new suite
version brings new tasks, cameras and agents, where that number silently stops holding; so each stratum of the version
(serving: category x camera x new agent) is certified on evidence drawn from the version itself: a uniform random
audit of its provisional auto-labels, answered by humans in rounds. The references only *design* the audit (the
confidence level to test, the bet, the first batch); they are never counted as evidence.

**The claim, per stratum.** A certified stratum is auto-labelled at a *level* ``c`` (a confidence ``max(p, 1 - p)`` at
or above the reference policy's threshold); the claim is that the *rate* at which its auto-labels agree with the
annotators, the chance that one of them drawn at random agrees, is at least ``target``. (The agreement realised on a
finite stratum scatters around its rate by binomial noise, about ``sqrt(a (1 - a) / n)`` for n labels.)

**The test, anytime-valid.** The audit visits the stratum's items at the level in a uniform random order fixed before
any human answers. With ``X_i = 1`` where the model agreed with the i-th answered audit label,

    K_n = prod_{i <= n} (1 + lambda_i (X_i - target)),    0 <= lambda_i <= cap / target,

where the bet ``lambda_i`` depends only on the answers before i (a Kelly bet on a running estimate of the
agreement, started from the references' estimate: :func:`bets`). If the rate is at most ``target``, every factor has
conditional mean at most 1, so ``K`` is a nonnegative supermartingale that starts at 1 (a test martingale), and by
Ville's inequality ``P(sup_n K_n >= 1 / alpha) <= alpha``. A stratum is certified once its ``K`` has reached
``1 / alpha`` anywhere in its answered audit, whenever one looks, however often, whatever the batch sizes: "audit
more" spends nothing twice. A second test martingale bets the other way (evidence that the rate is below target) and
routes a stratum early; routing never breaks a promise, it only costs labels.

**Across strata** (``claim``):

* ``"family"`` (the default): each stratum s is tested at ``alpha_s = delta * w_s`` with weights fixed before any
  label (proportional to the strata's sizes at their levels, summing to 1), so by the union bound the chance that
  *any* certified stratum's rate is below target is at most ``delta``: "every certified stratum, with probability
  1 - delta".
* ``"fcr"``: e-BH (Wang and Ramdas, 2022) over the strata's e-values (each stratum's ``K`` at the end of its answered
  audit, a stopped test supermartingale): the expected share of certified strata whose rate is below target is at
  most ``delta``. Cheaper when most strata are good (the e-BH threshold falls to ``1 / delta`` when every stratum
  passes); a bad stratum among good ones still needs ``K >= 1 / delta``, as if it stood alone.

Either way a bad stratum among good ones is certified no more often than if it stood alone at ``delta``.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> design = design_audit(np.full(1000, 0.97), target=0.9, alpha=0.1, prior=(0.95, 50))
    >>> audit = StratumAudit(design=design, requested=design.first_batch,
    ...                      answers=tuple(rng.random(design.first_batch) < 0.95))
    >>> verdict = audit_step(audit, target=0.9)
    >>> verdict.state in ("certified", "continue")
    True
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

LEVEL_FRACTIONS = (1.0, 0.8, 0.6, 0.4)  # candidate levels: the top share of a stratum's provisional labels
CAP = 0.9  # the largest bet is cap / target: one disagreement keeps at least 1 - cap of the evidence
MIN_BATCH = 10  # the smallest batch of audit labels a round asks for
FIRST_SHARE = 0.6  # the first batch: this share of the audit the references expect to need,
FIRST_CAP = 0.1  # ... but no more than this share of the stratum (a version better than its references stops early)
NEXT_SHARE = 0.4  # a later batch: this share of what the audit still seems to need
GROWTH = 0.25  # ... and at least this share of the audit asked so far (the rounds grow geometrically: few of them)
OVERSHOOT = 1.25  # a level is worth auditing when its labels exceed the expected audit times this
ROUTE_DELTA = 0.05  # the evidence that a stratum is below target at which it is routed early
DESIGN_MARGIN = 0.02  # the level is chosen as if the version agreed this much less than its references
CLAIMS = ("family", "fcr")
# The first model's share of a stratum's error budget when later models (version challengers) may follow, by what the
# input check saw: a stratum like the references' is usually certified by the first model; a new one rarely is.
FIRST_SHARE_BY_STATUS = {"known": 0.9, "unchecked": 0.9, "new": 0.5, "drifted": 0.5}


@dataclasses.dataclass(frozen=True)
class AuditDesign:
    """How one stratum is audited, fixed before any human answers (from its scores and the references).

    Attributes:
        level: the confidence ``max(p, 1 - p)`` at or above which the stratum is auto-labelled if certified.
        size: the stratum's provisional labels at the level (the audit draws from these).
        alpha: the error budget of this stratum's test (family: ``delta * w_s``; fcr: ``delta``).
        prior: the agreement the references expect at the level, where the bets start.
        prior_weight: how many answers the prior counts as (the bet moves to the audit's own estimate after that).
        expected_audit: the audit labels the references expect a certification to need (inf: not expected).
        first_batch: the audit labels the first round asks for.
        weight: this model's share of its stratum's error budget (:func:`model_weights`; 1 when no other model may
            follow it): ``alpha`` includes it under the family claim, and ``fcr`` weighs the stratum's e-value by it.
    """

    level: float
    size: int
    alpha: float
    prior: float
    prior_weight: float
    expected_audit: float
    first_batch: int
    weight: float = 1.0

    def to_dict(self) -> dict:
        return {k: (None if isinstance(v, float) and math.isinf(v) else v) for k, v in
                dataclasses.asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict) -> AuditDesign:
        values = {f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d or f.name != "weight"}
        values["expected_audit"] = math.inf if values["expected_audit"] is None else values["expected_audit"]
        return cls(**values)


@dataclasses.dataclass(frozen=True)
class StratumAudit:
    """One stratum's audit so far: its design, how many audit labels were asked for, and the answers in audit order
    (True where the model agreed with the humans; the answered prefix of the audit order)."""

    design: AuditDesign
    requested: int
    answers: tuple[bool, ...]


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What a round decides for one stratum.

    Attributes:
        state: ``"certified"``, ``"continue"`` (ask for ``requested`` audit labels in all), ``"waiting"`` (the asked
            labels are not all answered and nothing is decided yet) or ``"routed"`` (to humans; ``reason``).
        requested: the audit labels asked for, after this round.
        evidence: ``sup_n K_n`` over the answered audit (the e-value against "rate below target", by Ville).
        e_value: ``K`` at the end of the answered audit (a stopped e-value: what ``fcr`` combines).
        against: the evidence that the rate is below target (the routing test's ``sup``).
        threshold: the evidence this stratum needed (``1 / alpha``, or e-BH's for ``fcr``).
        estimate: the audit's agreement so far (None before any answer).
        reason: why a stratum was routed: ``"below_target"``, ``"futile"`` (it cannot pass within its size) or
            ``"budget"`` (the stated audit budget is spent).
    """

    state: str
    requested: int
    evidence: float
    e_value: float
    against: float
    threshold: float
    estimate: float | None
    reason: str | None = None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def bets(answers, target: float, prior: float, prior_weight: float, cap: float = CAP) -> np.ndarray:
    """(n,) the predictable bets on "the rate exceeds ``target``": a Kelly bet on the agreement estimated from the
    answers before each one, shrunk to ``prior`` with ``prior_weight`` pseudo-answers, clipped to ``[0, cap /
    target]``."""
    x = np.asarray(answers, dtype=float)
    before = np.concatenate([[0.0], np.cumsum(x)[:-1]]) if x.size else x
    estimate = (before + prior_weight * prior) / (np.arange(x.size) + prior_weight)
    return np.clip((estimate - target) / (target * (1 - target)), 0.0, cap / target)


def log_evidence(answers, target: float, prior: float, prior_weight: float) -> np.ndarray:
    """(n,) ``log K_n``, the test martingale against "the agreement rate is at most ``target``" (module docstring)."""
    x = np.asarray(answers, dtype=float)
    return np.cumsum(np.log1p(bets(x, target, prior, prior_weight) * (x - target)))


def log_evidence_against(answers, target: float) -> np.ndarray:
    """(n,) the log of the mirror test martingale, against "the rate is at least ``target``": a Kelly bet on the
    disagreement, started at the target itself (no prior help)."""
    flipped = 1.0 - np.asarray(answers, dtype=float)  # disagreement; the null is "disagreement <= 1 - target"
    return log_evidence(flipped, 1 - target, 1 - target, 10.0)


def growth(agreement: float, target: float, cap: float = CAP) -> float:
    """The expected ``log K`` gained per audit label when the rate is ``agreement`` and the bet is Kelly's for it."""
    lam = min(max((agreement - target) / (target * (1 - target)), 0.0), cap / target)
    return agreement * math.log1p(lam * (1 - target)) + (1 - agreement) * math.log1p(-lam * target)


def expected_audit(agreement: float, target: float, alpha: float) -> float:
    """About how many audit labels reach ``1 / alpha`` when the rate is ``agreement`` (inf at or below target)."""
    g = growth(agreement, target)
    return math.log(1 / alpha) / g if g > 1e-12 else math.inf


def smallest_audit(target: float, alpha: float, cap: float = CAP) -> int:
    """The fewest audit labels that can certify: every one agreeing, each bet at its largest."""
    return math.ceil(math.log(1 / alpha) / math.log1p(cap / target * (1 - target)))


def audited_agreement(agreement: float, annotators: float | None) -> float:
    """The agreement an audit sees when the model agrees with the gold labels at ``agreement`` and the annotators'
    majority does at ``annotators`` (independent errors; None: the annotators are taken as right)."""
    if annotators is None:
        return agreement
    return agreement * annotators + (1 - agreement) * (1 - annotators)


def design_audit(confidences, target: float, alpha: float, prior: tuple[float, float],
                 reference: tuple[np.ndarray, np.ndarray] | None = None,
                 fractions: tuple[float, ...] = LEVEL_FRACTIONS, annotators: float | None = None,
                 margin: float = DESIGN_MARGIN, weight: float = 1.0) -> AuditDesign | None:
    """Choose the level a stratum is audited at, from its scores and the references, before any human answers.

    Each candidate level keeps the top ``fraction`` of the stratum's provisional labels (their confidence
    ``max(p, 1 - p)``); the references' agreement above the level (shrunk to ``target`` by four pseudo-labels, seen
    through the annotators' own errors: :func:`audited_agreement`) less ``margin`` (a version is rarely as good as
    its references) estimates the audit a certification needs (:func:`expected_audit`), and the level that leaves
    the most auto-labels after its audit is chosen; the bets start at the estimate without the margin. None when the
    stratum is too small to pay even if every answer agreed (route it at once); when the references expect no level
    to pay, the whole stratum is audited from a small batch (trying costs no label: a routed stratum is labelled by
    hand in full anyway).

    Args:
        confidences: (N,) the stratum's provisional labels' confidences.
        target: the agreement to certify.
        alpha: the stratum's error budget.
        prior: ``(agreement, weight)`` of the references at the reference threshold: where the bets start when the
            references give no confidence profile, and the weight of the prior.
        reference: ``(confidence, correct)`` arrays of the references (their confidences and whether the model was
            right), or None: the stratum is then audited at its full size.
        fractions: the candidate levels' shares.
        weight: this model's share of the stratum's budget (kept in the design; ``alpha`` already includes it).
    """
    conf = np.sort(np.asarray(confidences, dtype=float))[::-1]
    if conf.size == 0:
        return None
    best, best_value = None, 0.0
    for fraction in fractions if reference is not None else (1.0,):
        size = max(1, int(round(fraction * conf.size)))
        level = float(conf[size - 1])
        size = int(np.sum(conf >= level))  # ties stay together
        agreement = prior[0]
        if reference is not None:
            above = reference[0] >= level
            agreement = audited_agreement((float(np.sum(reference[1][above])) + 4 * target) / (int(above.sum()) + 4),
                                          annotators)
        need = max(expected_audit(agreement - margin, target, alpha), smallest_audit(target, alpha))
        value = size - OVERSHOOT * need
        if value > best_value:
            best_value = value
            small = max(MIN_BATCH, 2 * smallest_audit(target, alpha))  # a version better than its references may
            first = min(size, max(small, min(math.ceil(FIRST_SHARE * need), math.ceil(FIRST_CAP * size))))  # stop soon
            best = AuditDesign(level=level, size=size, alpha=alpha, prior=agreement, prior_weight=float(prior[1]),
                               expected_audit=need, first_batch=first, weight=weight)
    if best is None and OVERSHOOT * smallest_audit(target, alpha) < conf.size:  # no level expected to pay: try
        first = min(conf.size, max(MIN_BATCH, 2 * smallest_audit(target, alpha)))
        best = AuditDesign(level=float(conf[-1]), size=int(conf.size), alpha=alpha, prior=prior[0],
                           prior_weight=float(prior[1]), expected_audit=math.inf, first_batch=first, weight=weight)
    return best


def audit_step(audit: StratumAudit, target: float, threshold: float | None = None, budget: float | None = None,
               stopped: bool = False) -> Verdict:
    """One round's decision for one stratum (the family claim's: ``threshold`` defaults to ``1 / alpha``).

    Certified once the evidence has reached the threshold anywhere in the answered audit (Ville; with ``stopped``, at
    its end: the e-value ``fcr`` combines); routed when the mirror test shows the rate below target (at
    ``ROUTE_DELTA``), when even agreeing answers on every remaining item could not reach the threshold (``futile``), or
    when ``budget`` (a share of the level's size) is spent; otherwise ``waiting`` for asked labels, or ``continue``
    with a next batch sized from what the audit still seems to need (a share of it, so that few rounds overshoot
    little).
    """
    d = audit.design
    threshold = 1 / d.alpha if threshold is None else threshold
    x = np.asarray(audit.answers, dtype=bool)
    n = x.size
    log_k = log_evidence(x, target, d.prior, d.prior_weight) if n else np.zeros(1)
    top, end = float(np.exp(max(0.0, log_k.max()))), float(np.exp(log_k[-1]))
    against = float(np.exp(max(0.0, log_evidence_against(x, target).max()))) if n else 1.0
    common = dict(evidence=top, e_value=end, against=against, threshold=threshold,
                  estimate=float(x.mean()) if n else None)
    if (end if stopped else top) >= threshold:
        return Verdict("certified", audit.requested, **common)
    if against >= 1 / ROUTE_DELTA:
        return Verdict("routed", audit.requested, reason="below_target", **common)
    left = d.size - n
    if log_k[-1] + left * math.log1p(CAP / target * (1 - target)) < math.log(threshold):
        return Verdict("routed", audit.requested, reason="futile", **common)  # even if every answer agreed
    if n < audit.requested:
        return Verdict("waiting", audit.requested, **common)
    cap = d.size if budget is None else min(d.size, math.floor(budget * d.size))
    if audit.requested >= cap:
        return Verdict("routed", audit.requested, reason="budget" if cap < d.size else "futile", **common)
    shrunk = (x.sum() + d.prior_weight * d.prior) / (n + d.prior_weight)
    hopeful = min(1.0, shrunk + 1.28 * math.sqrt(max(shrunk * (1 - shrunk), 0.01) / (n + 4)))  # a 90% upper bound
    need = (math.log(threshold) - log_k[-1]) / max(growth(hopeful, target), 1e-12)
    if need > left:
        return Verdict("routed", audit.requested, reason="futile", **common)
    more = min(cap - audit.requested, max(MIN_BATCH, math.ceil(NEXT_SHARE * need), math.ceil(GROWTH * audit.requested)))
    return Verdict("continue", audit.requested + more, **common)


def model_weights(adaptations: int, first: float) -> tuple[float, ...]:
    """Each successive model's share of a stratum's error budget, fixed before any answer: the labelling job's model
    ``first``, the j-th version challenger ``(1 - first) 2^-j``, the last the rest (they sum to 1, so the union bound
    over a stratum's models keeps the stratum's budget); ``(1.0,)`` when no challenger may follow.

    Example:
        >>> model_weights(2, 0.5)
        (0.5, 0.25, 0.25)
    """
    if adaptations < 0 or not 0.0 < first <= 1.0:
        raise ValueError(f"adaptations must be >= 0 and first in (0, 1], got {adaptations}, {first}")
    if adaptations == 0:
        return (1.0,)
    rest = 1.0 - first
    return (first, *(rest * 2.0 ** -j for j in range(1, adaptations)), rest * 2.0 ** -(adaptations - 1))


def stratum_budgets(sizes: dict[str, int], delta: float, claim: str) -> dict[str, float]:
    """Each stratum's error budget before it is split across its models: ``family`` shares ``delta`` in proportion to
    the strata's sizes (weighted Bonferroni), ``fcr`` gives each ``delta`` (e-BH combines them)."""
    total = sum(sizes.values())
    return {k: (delta * n / total if claim == "family" else delta) for k, n in sizes.items() if n}


def e_bh(e_values: dict[str, float], delta: float, hypotheses: int | None = None) -> set[str]:
    """The e-BH rejections (Wang and Ramdas, 2022): the k largest e-values where k is the largest with the k-th
    largest at least ``hypotheses / (delta k)``; controls the false discovery rate at ``delta`` under any
    dependence."""
    m = hypotheses or len(e_values)
    ranked = sorted(e_values, key=lambda key: -e_values[key])
    k = max((i for i in range(1, len(ranked) + 1) if e_values[ranked[i - 1]] >= m / (delta * i)), default=0)
    return set(ranked[:k])


def certify_strata(audits: dict[str, StratumAudit], target: float, delta: float, claim: str = "family",
                   budget: float | None = None, hypotheses: int | None = None) -> dict[str, Verdict]:
    """One round of every audited stratum of a version: the decision serving applies (and simulations call).

    ``family``: each stratum against its own ``1 / alpha_s`` (:func:`audit_step`). ``fcr``: e-BH over the strata's
    stopped e-values at ``delta`` (a certified stratum stops its audit, so its e-value stays); each other stratum goes
    on, waits or is routed as :func:`audit_step` says against the threshold it would need to join them. A stratum's
    e-value is its current model's stopped ``K`` times the model's ``weight`` (its share of the stratum's budget):
    summed over the stratum's successive models, the weighted e-values have expectation at most 1 under the null of
    whichever model is certified, which is what e-BH needs. ``hypotheses``: the number of strata of the version
    (default: those in ``audits``; strata already decided still count).
    """
    if claim not in CLAIMS:
        raise ValueError(f"claim must be one of {CLAIMS}, got {claim!r}")
    if claim == "family":
        return {key: audit_step(a, target, budget=budget) for key, a in audits.items()}
    ends = {key: a.design.weight * (float(np.exp(log_evidence(a.answers, target, a.design.prior,
                                                                a.design.prior_weight)[-1])) if a.answers else 1.0)
            for key, a in audits.items()}  # a later model's e-value counts by its share of the stratum's budget
    certified = e_bh(ends, delta, len(audits) if hypotheses is None else hypotheses)
    out = {}
    for key, a in audits.items():
        joined = len(certified) + (key not in certified)
        need = (len(audits) if hypotheses is None else hypotheses) / (delta * joined * a.design.weight)
        v = audit_step(a, target, threshold=need, budget=budget, stopped=True)
        if key in certified:
            v = dataclasses.replace(v, state="certified", reason=None)
        out[key] = v
    return out


def plan_strata(confidences: dict[str, np.ndarray], target: float, delta: float, claim: str,
                priors: dict[str, tuple[float, float]], reference: tuple[np.ndarray, np.ndarray] | None = None,
                annotators: float | None = None, weights: dict[str, float] | None = None,
                budgets: dict[str, float] | None = None) -> dict[str, AuditDesign | None]:
    """The audit design of every stratum of a version (None: route it at once), before any human answers.

    ``family``: stratum s gets ``alpha_s = delta * N_s / sum N`` over the audited strata (N: provisional labels), so
    the budgets sum to ``delta``; a stratum no level of which pays is dropped and the others share its budget.
    ``fcr``: each stratum is designed at ``delta`` (e-BH's threshold when every stratum passes). ``annotators``: the
    annotators' majority agreement with the references' gold labels (:func:`audited_agreement`). ``weights``: each
    stratum's first model's share of its budget (:func:`model_weights`; default 1: no later model). ``budgets``:
    each stratum's budget fixed in advance (:func:`stratum_budgets` over every stratum, when later models may use the
    budget of a stratum the first model cannot certify); by default the family claim shares ``delta`` among the
    strata the first model can certify.
    """
    keys = [k for k in confidences if len(confidences[k])]
    share = {k: 1.0 if weights is None else float(weights.get(k, 1.0)) for k in keys}
    while True:
        total = sum(len(confidences[k]) for k in keys)
        alpha = {k: (budgets[k] if budgets is not None else delta * len(confidences[k]) / total if claim == "family"
                     else delta) * share[k] for k in keys}
        designs = {k: design_audit(confidences[k], target, alpha[k], priors[k], reference, annotators=annotators,
                                   weight=share[k]) for k in keys}
        kept = [k for k in keys if designs[k] is not None]
        if claim != "family" or budgets is not None or kept == keys:
            return {k: designs.get(k) for k in confidences}
        keys = kept


__all__ = ["CLAIMS", "FIRST_SHARE_BY_STATUS", "AuditDesign", "StratumAudit", "Verdict", "audit_step", "bets",
           "certify_strata", "audited_agreement", "design_audit", "e_bh", "expected_audit", "growth", "log_evidence",
           "log_evidence_against", "model_weights", "plan_strata", "smallest_audit", "stratum_budgets"]
