"""A version's audits, round by round, as a pure function of what was planned, committed and answered.

``autorater certify`` reads files and trains models; everything it *decides* is here, free of files, so that the
simulations (``benchmarks/certify_sim.py``) run exactly the product's decisions on thousands of simulated versions.

**Models in succession.** Each stratum of a version is labelled by a succession of models: model 0 is the labelling
job's; model j >= 1 is the j-th *version challenger* (the job's model fine-tuned on the version's human labels so far,
``serving.labelling.adapt``). Each model's audit is committed (:class:`ModelPlan`) before any of its answers: its level,
its error budget (the stratum's budget times the model's share, fixed at label time: ``calibration.model_weights``)
and its audit order, a uniform random order of the continuations it would auto-label. A challenger's population is the
stratum's continuations that carry **no human label when it is committed**: the labels it learned from (and every
other human label) are never its evidence, and the certificate covers only what it was audited on.

**One stratum's states.** ``audit`` (the current model's audit goes on or waits for answers), ``certified`` (its
auto-labels stand), ``learning`` (the current model was routed and a challenger may follow: a *learning batch* of
human labels is asked, ``after`` per category of the stratum), ``routed`` (final: every continuation without a human
label goes to humans). A certified stratum is decided again every round: an answer corrected to a disagreement can
withdraw the certificate (``revoked``, with the run and date kept), never earn one.

**Evidence is the first answer, given blind.** An audit item's evidence is the humans' majority the first round it
was seen answered (``first``), lowered, never raised, by what the humans say now: it counts as an agreement only if
the model agreed with both. Re-asking an audit item because it disagreed cannot earn a certificate; a correction can
withdraw one. So the test runs on answers at most as favourable as the blind first pass, whose order was fixed before
any answer: Ville's bound holds for each model's test, the union over a stratum's models holds the stratum's budget,
and the claim across strata (family or fcr) holds as ``calibration.audit`` says.

Example:
    >>> plan = ModelPlan("all", 0, "autorater@1", design, order=("c1", "c2"), said=("success", "failure"),
    ...                  rest=())                                                  # doctest: +SKIP
    >>> result = decide(states, plans, first={}, human={"c1": "success"}, rules=rules)  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from typing import Iterable, Mapping, Sequence

import numpy as np

from autorater.calibration import AuditDesign, StratumAudit, Verdict, certify_strata
from autorater.calibration.audit import OVERSHOOT, smallest_audit

STATES = ("audit", "certified", "learning", "routed")
DESIGN_SHARE = 0.3  # of a stratum's human labels (whole scenarios) held out of a challenger's training: its design


def uniform(seed: int, *key: str) -> float:
    """A uniform number in [0, 1) fixed by the seed and the key (blake2b: uniform however alike the keys are)."""
    text = ":".join([str(seed), *key]).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big") / 2 ** 64


@dataclasses.dataclass(frozen=True)
class ModelPlan:
    """One model's audit of one stratum, committed before any of its answers.

    Attributes:
        stratum: the stratum's key.
        index: 0 for the labelling job's model, j for the j-th version challenger.
        name: who labels (``model`` of the rows it labels), e.g. ``autorater@3`` or ``challenger-1``.
        design: the audit's design (level, size, alpha: the stratum's budget times ``design.weight``, the bets'
            prior, the first batch); None: nothing of the stratum can be certified by this model.
        order: the continuations it would auto-label (confidence at or above the level), in audit order.
        said: its outcome for each of ``order`` (what an audit answer is compared with).
        rest: the other continuations it rated in the stratum (below its level, or uncertain): humans label them.
        learned: the continuations whose human labels it learned from (a challenger; empty for model 0).
    """

    stratum: str
    index: int
    name: str
    design: AuditDesign | None
    order: tuple[str, ...]
    said: tuple[str, ...]
    rest: tuple[str, ...] = ()
    learned: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"stratum": self.stratum, "index": self.index, "name": self.name,
                "design": None if self.design is None else self.design.to_dict(), "order": list(self.order),
                "said": list(self.said), "rest": list(self.rest), "learned": list(self.learned)}

    @classmethod
    def from_dict(cls, d: Mapping) -> ModelPlan:
        return cls(str(d["stratum"]), int(d["index"]), str(d["name"]),
                   None if d.get("design") is None else AuditDesign.from_dict(d["design"]),
                   tuple(d["order"]), tuple(d["said"]), tuple(d.get("rest") or ()), tuple(d.get("learned") or ()))


@dataclasses.dataclass(frozen=True)
class StratumState:
    """Where one stratum stands after a round (see the module docstring).

    Attributes:
        state: one of :data:`STATES`.
        model: the index of the current (or certified) model.
        requested: the audit labels asked of the current model.
        reason: why the stratum was routed (or why its last model was), or None.
        learning: the continuations asked for a challenger to learn from (state ``learning``).
        verdict: the current model's last verdict (``calibration.Verdict.to_dict``), or None.
        revoked: withdrawn certificates: ``{"model", "run", "at"}`` each, kept for good.
        used: the audit answers a certificate rests on (answers that arrive after it do not move it; corrections of
            these can withdraw it).
    """

    state: str
    model: int = 0
    requested: int = 0
    reason: str | None = None
    learning: tuple[str, ...] = ()
    verdict: dict | None = None
    revoked: tuple[dict, ...] = ()
    used: int = 0

    def to_dict(self) -> dict:
        return {"state": self.state, "model": self.model, "requested": self.requested, "reason": self.reason,
                "learning": list(self.learning), "verdict": self.verdict, "revoked": list(self.revoked),
                "used": self.used}

    @classmethod
    def from_dict(cls, d: Mapping) -> StratumState:
        return cls(str(d["state"]), int(d.get("model", 0)), int(d.get("requested", 0)), d.get("reason"),
                   tuple(d.get("learning") or ()), d.get("verdict"), tuple(d.get("revoked") or ()),
                   int(d.get("used", 0)))


@dataclasses.dataclass(frozen=True)
class Rules:
    """What the label-time plan fixed for every round: the target, the claim and its confidence, the audit budget, the
    stratum budgets and model shares, and the adaptation settings.

    Attributes:
        target: the agreement each certified stratum promises.
        delta: 1 - confidence: the claim's error rate.
        claim: ``family`` or ``fcr``.
        budget: the largest share of a model's audited population its audit may take (None: no cap).
        strata_budget: each audited stratum's error budget before it is split across its models.
        weights: each stratum's model shares (``calibration.model_weights``); one entry: no challenger.
        adapt_after: human labels per category a stratum needs before a challenger learns from them.
        seed: the job's seed (learning batches, design sets, challengers' audit orders).
    """

    target: float
    delta: float
    claim: str
    budget: float | None
    strata_budget: Mapping[str, float]
    weights: Mapping[str, Sequence[float]]
    adapt_after: int = 10
    seed: int = 0

    def adaptations(self, key: str) -> int:
        return len(self.weights.get(key, (1.0,))) - 1

    def alpha(self, key: str, model: int) -> float:
        return self.strata_budget.get(key, self.delta) * self.weights.get(key, (1.0,))[model]


@dataclasses.dataclass
class Round:
    """What one round decided: the new states, the first answers it recorded, the verdicts, the withdrawn
    certificates, and the strata ready for a challenger (their learning labels are in)."""

    states: dict[str, StratumState]
    first: dict[str, str]
    verdicts: dict[str, Verdict]
    revoked: list[str]
    ready: list[str]


def evidence(plan: ModelPlan, first: Mapping[str, str], human: Mapping[str, str]) -> tuple[bool, ...]:
    """The audit's answers in order, up to the first item without a first answer: True where the model agreed with
    the first answer and with the humans' current one (a later answer can lower the evidence, never raise it)."""
    out = []
    for cid, said in zip(plan.order, plan.said):
        if cid not in first:
            break
        now = human.get(cid)
        out.append(said == first[cid] and (now is None or now == said))
    return tuple(out)


def record_first(plans: Mapping[str, ModelPlan], states: Mapping[str, StratumState], first: Mapping[str, str],
                 human: Mapping[str, str], blind: Mapping[str, str] | None = None) -> dict[str, str]:
    """The first answers of this round: each asked audit item of a current model that has a human label now and had
    none recorded before: its blind answer (the humans' first, ``blind``: what the first ingest that brought it said,
    before anyone saw the model disagree), else the humans' answer now."""
    blind = blind or {}
    new = {}
    for key, st in states.items():
        plan = plans.get(key)
        if plan is None or st.state not in ("audit", "certified"):
            continue
        for cid in plan.order[:st.requested]:
            if cid not in first and cid in human:
                new[cid] = blind.get(cid, human[cid])
    return new


def learning_batch(ids: Sequence[str], category: Mapping[str, str], labelled: set[str], after: int,
                   seed: int) -> tuple[str, ...]:
    """The continuations to ask so that each category of a stratum has ``after`` human labels: per category, the
    unlabelled ones in a uniform random order fixed by the seed, as many as it lacks."""
    by_cat: dict[str, list[str]] = {}
    for cid in ids:
        by_cat.setdefault(category.get(cid, ""), []).append(cid)
    out = []
    for cat, mine in sorted(by_cat.items()):
        need = after - sum(c in labelled for c in mine)
        if need > 0:
            out += sorted((c for c in mine if c not in labelled), key=lambda c: uniform(seed, "learn", c))[:need]
    return tuple(out)


def can_pay(unlabelled: int, target: float, alpha: float) -> bool:
    """Whether a model could certify anything among ``unlabelled`` continuations at budget ``alpha``: more than
    ``OVERSHOOT`` times the smallest audit that can certify."""
    return alpha > 0 and unlabelled > OVERSHOOT * smallest_audit(target, alpha)


def decide(states: Mapping[str, StratumState], plans: Mapping[str, ModelPlan], first: Mapping[str, str],
           human: Mapping[str, str], rules: Rules, strata_ids: Mapping[str, Sequence[str]],
           category: Mapping[str, str], run: int = 0, at: str = "", blind: Mapping[str, str] | None = None) -> Round:
    """One round of every stratum (the module docstring): record first answers, decide every audited or certified
    stratum's current model (``calibration.certify_strata``), withdraw certificates the answers no longer support,
    hand routed strata with challengers left to learning, and say which learning strata are ready.

    Args:
        states: each stratum's state after the previous round.
        plans: each stratum's current model's plan (strata in ``learning`` or ``routed`` may have none).
        first: the first answers recorded so far (continuation id -> outcome).
        human: the humans' current majority outcome of every labelled continuation.
        rules: what the label-time plan fixed.
        strata_ids: each stratum's continuations (all of them).
        category: each continuation's category (learning batches are drawn per category).
        run, at: this round's number and date, kept with any certificate it withdraws.
        blind: the humans' first answers (the first ingest's), where known: an answer re-asked before this round
            cannot stand in for them.
    """
    first_now = record_first(plans, states, first, human, blind)
    seen = {**first, **first_now}
    audits = {}
    for key, st in states.items():
        plan = plans.get(key)
        if st.state in ("audit", "certified") and plan is not None and plan.design is not None:
            answers = evidence(plan, seen, human)
            if st.state == "certified":  # the certificate rests on the answers it was given, corrected
                answers = answers[:st.used]
            audits[key] = StratumAudit(plan.design, st.requested, answers)
    hypotheses = max(1, len(rules.strata_budget))
    verdicts = certify_strata(audits, rules.target, rules.delta, rules.claim, rules.budget, hypotheses=hypotheses) \
        if audits else {}
    out, revoked = dict(states), []
    for key, v in verdicts.items():
        st = states[key]
        if st.state == "certified" and v.state != "certified":
            revoked.append(key)
            gone = ({"model": st.model, "run": run, "at": at},)
            v = dataclasses.replace(v, state="routed", reason="revoked")
            out[key] = dataclasses.replace(st, revoked=st.revoked + gone)
        st = out[key]
        if v.state == "certified":
            used = st.used if st.state == "certified" else len(audits[key].answers)
            out[key] = dataclasses.replace(st, state="certified", requested=v.requested, reason=None,
                                           verdict=v.to_dict(), used=used)
        elif v.state == "routed":
            out[key] = _after_routing(dataclasses.replace(st, verdict=v.to_dict()), v.reason, key, rules,
                                      strata_ids[key], category, human)
        else:
            out[key] = dataclasses.replace(st, state="audit", requested=v.requested, verdict=v.to_dict())
    ready = []
    for key, st in out.items():
        if st.state == "learning":
            st = _refresh_learning(st, key, rules, strata_ids[key], category, human)
            out[key] = st
            if st.state == "learning" and all(c in human for c in st.learning):
                ready.append(key)
    return Round(out, first_now, verdicts, revoked, sorted(ready))


def _after_routing(st: StratumState, reason: str | None, key: str, rules: Rules, ids: Sequence[str],
                   category: Mapping[str, str], human: Mapping[str, str]) -> StratumState:
    """A routed model's stratum: learning when a challenger may follow and could pay, else routed for good."""
    routed = dataclasses.replace(st, state="routed", reason=reason, learning=())
    nxt = st.model + 1
    if nxt > rules.adaptations(key):
        return routed
    unlabelled = sum(c not in human for c in ids)
    if not can_pay(unlabelled, rules.target, rules.alpha(key, nxt)):
        return routed
    return dataclasses.replace(st, state="learning", reason=reason, learning=learning_batch(
        ids, category, {c for c in ids if c in human}, rules.adapt_after, rules.seed))


def _refresh_learning(st: StratumState, key: str, rules: Rules, ids: Sequence[str], category: Mapping[str, str],
                      human: Mapping[str, str]) -> StratumState:
    """A learning stratum's batch, kept as asked; routed for good if the labels since asked leave too little to pay."""
    unlabelled = sum(c not in human for c in ids)
    if not can_pay(unlabelled, rules.target, rules.alpha(key, st.model + 1)):
        return dataclasses.replace(st, state="routed", learning=())
    return st


def initial_state(plan: ModelPlan | None, routed: str | None, key: str, rules: Rules, ids: Sequence[str],
                  category: Mapping[str, str], human: Mapping[str, str]) -> StratumState:
    """A stratum's state at label time: audited from the first batch of model 0's plan, or (no design) routed, or
    learning when a challenger may follow."""
    if plan is not None and plan.design is not None:
        return StratumState("audit", 0, plan.design.first_batch)
    return _after_routing(StratumState("routed", 0), routed or "nothing_to_certify", key, rules, ids, category,
                          human)


def open_strata(strata: dict[str, dict], planned: Mapping[str, dict], outcome: Mapping[str, str],
                stratum_of: Mapping[str, str], excluded: Mapping[str, str], model_name: str, rules: Rules,
                category: Mapping[str, str], prior: Mapping[str, str]) -> None:
    """Each planned stratum's model 0 (its audit order, what it says, the rest it rated) and its state at label time,
    added to the plan's strata (``"model"``, ``"state"``): what ``autorater label`` seals and the simulations run.

    Args:
        strata: the plan's strata (``serving.labelling.strata.plan_audit``), completed in place.
        planned: continuation id -> ``{"audit_rank", ...}`` from the same plan.
        outcome: continuation id -> model 0's outcome.
        stratum_of: continuation id -> its stratum.
        excluded: continuation id -> why no audit may draw it (``human_labelled``, ``learned``, ``bound``).
        model_name: who labels (the job's model).
        rules: the plan's rules (:func:`version.rules_of`).
        category: continuation id -> its category (learning batches).
        prior: the continuations human-labelled before the job (they count towards a learning batch).
    """
    members: dict[str, list[str]] = {}
    for cid, key in stratum_of.items():  # a stratum's continuations a model may learn from or label
        if excluded.get(cid) in (None, "human_labelled"):
            members.setdefault(key, []).append(cid)
    for key, p in strata.items():
        ids = members.get(key, [])
        ranked = sorted((c for c in ids if planned[c]["audit_rank"] is not None),
                        key=lambda c: planned[c]["audit_rank"])
        design = None if p["design"] is None else AuditDesign.from_dict(p["design"])
        model = ModelPlan(key, 0, model_name, design, tuple(ranked), tuple(outcome[c] for c in ranked),
                          tuple(c for c in ids if c not in excluded and planned[c]["audit_rank"] is None))
        p["model"] = model.to_dict()
        p["state"] = initial_state(model, p["routed"], key, rules, ids, category, prior).to_dict()


def design_split(ids: Iterable[str], scenario: Mapping[str, str], seed: int,
                 share: float = DESIGN_SHARE) -> tuple[list[str], list[str]]:
    """(train, design) of a stratum's human-labelled continuations: whole scenarios drawn into the design set with
    chance ``share`` (held out of the challenger's training; its level is designed on them)."""
    train, design = [], []
    for cid in ids:
        (design if uniform(seed, "design", scenario.get(cid, cid)) < share else train).append(cid)
    return train, design


def commit_challenger(key: str, index: int, name: str, rated: Mapping[str, tuple[float, str]],
                      design_set: Mapping[str, tuple[float, bool]], learned: Sequence[str], rules: Rules,
                      prior_weight: float = 10.0) -> ModelPlan:
    """The audit plan of a challenger for one stratum, from its ratings of the stratum's unlabelled continuations.

    Args:
        key: the stratum.
        index: the challenger's place in the stratum's succession (its budget share ``rules.weights[key][index]``).
        name: who labels.
        rated: continuation id -> (confidence ``max(p, 1 - p)``, outcome), for every continuation of the stratum that
            has no human label now (its population).
        design_set: continuation id -> (confidence, whether it agreed with the humans) on the held-out labels: they
            design the level and start the bets (never evidence: they are human-labelled, outside the population).
        learned: the continuations it learned from.
        rules: the plan's rules.
        prior_weight: how many answers the design set's agreement counts as in the bets.
    """
    from autorater.calibration import design_audit

    alpha = rules.alpha(key, index)
    ids = sorted(rated)
    conf = np.array([rated[c][0] for c in ids], dtype=float)
    ref = None
    agreement = rules.target
    if design_set:
        dconf = np.array([v[0] for v in design_set.values()], dtype=float)
        dright = np.array([v[1] for v in design_set.values()], dtype=bool)
        ref, agreement = (dconf, dright), float(dright.mean())
    design = design_audit(conf, rules.target, alpha, (agreement, prior_weight), ref,
                          weight=rules.weights[key][index]) if ids else None
    level = math.inf if design is None else design.level
    order = sorted((c for c in ids if rated[c][0] >= level), key=lambda c: uniform(rules.seed, f"model{index}", c))
    rest = tuple(c for c in ids if rated[c][0] < level)
    return ModelPlan(key, index, name, design, tuple(order), tuple(rated[c][1] for c in order), rest, tuple(learned))


__all__ = ["DESIGN_SHARE", "STATES", "ModelPlan", "Round", "Rules", "StratumState", "can_pay", "commit_challenger",
           "decide", "design_split", "evidence", "initial_state", "learning_batch", "open_strata", "record_first",
           "uniform"]
