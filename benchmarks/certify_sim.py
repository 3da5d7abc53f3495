"""Does every certified stratum keep its word? The decision simulated through the product's own functions.

    python -m benchmarks.certify_sim [--draws 1000] [--out bench-out/certify-sim]

A simulated version: strata of provisional auto-labels whose confidences ``max(p, 1 - p)`` are uniform above the
reference threshold and whose errors follow a profile (``flat``; ``calibrated``: among the least confident;
``confident``: among the most confident) at a stated overall agreement rate. The references (a record of 435
auto-labelled, as Learn-then-Test leaves them, with their confidences) design the audits. Then exactly what
``autorater label`` and ``certify`` run: ``calibration.plan_strata`` (levels, error budgets, first batches), and
round after round ``calibration.certify_strata`` on the answers of the audit asked so far, until every stratum is
certified or routed. The judge is the target itself: a failure is a certified stratum whose agreement *rate* at its
certified level (from the generating model, not the realised sample) is below the target. Also reported: the
agreement realised by the delivered auto-labels, and the cost, human labels per provisional label (audit labels plus
routed provisional labels, over provisional labels).

Prints a table and writes ``certify-sim.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import time
from pathlib import Path

import numpy as np

PROFILES = ("flat", "calibrated", "confident")
LOW = 0.8  # provisional confidences are uniform on [LOW, 1]


def error_chance(profile: str, rate: float, conf: np.ndarray, low: float = LOW) -> np.ndarray:
    """(n,) the chance that the model is wrong at each confidence, for an overall agreement ``rate`` over U(low, 1)."""
    u = (np.asarray(conf, dtype=float) - low) / (1 - low)  # 0 at the least confident, 1 at the most
    shape = {"flat": np.ones_like(u), "calibrated": 2 * (1 - u), "confident": 2 * u}[profile]
    return np.clip((1 - rate) * shape, 0.0, 1.0)


def rate_at(profile: str, rate: float, level: float, low: float = LOW) -> float:
    """The agreement rate of the auto-labels at confidence >= ``level`` under the generating model."""
    grid = np.linspace(max(level, low), 1.0, 2001)
    return float(1 - error_chance(profile, rate, grid, low).mean())


@dataclasses.dataclass
class Stratum:
    """One simulated stratum.

    Attributes:
        size: its continuations.
        rate: the job's model's agreement rate on its provisional labels (with the truth; the annotators' errors on
            top: :class:`Team`).
        profile: where the errors sit (:data:`PROFILES`).
        challengers: the successive version challengers' rates on what they did not learn (the last repeats).
        uncertain: the share the job's model does not auto-label (a challenger may).
        labelled: the share human-labelled before the job (the model learned them: right on every one).
        status: what the input check saw (``known``, ``new``, ``unchecked``): the first model's share of the budget.
    """

    size: int
    rate: float
    profile: str = "flat"
    challengers: tuple[float, ...] = ()
    uncertain: float = 0.0
    labelled: float = 0.0
    status: str = "known"


@dataclasses.dataclass(frozen=True)
class Team:
    """How a team runs the rounds: its annotators' accuracy, answers corrected after they were given (a share of the
    answered audit items each round gets a fresh answer), disagreements re-asked (the new answer replaces the old)."""

    accuracy: float = 1.0
    corrections: float = 0.0
    reask: bool = False


def references(rate: float, rng, n: int = 435, profile: str = "flat") -> tuple[np.ndarray, np.ndarray]:
    """The references' (confidence, correct): ``n`` auto-labelled at agreement ``rate`` (435 with 32 wrong is the
    BabyAI benchmark's record at a 0.90 target: 0.926)."""
    conf = rng.uniform(LOW, 1.0, n)
    return conf, rng.random(n) >= error_chance(profile, rate, conf)


def _record(reference, target: float, delta: float, strata: dict[str, Stratum]):
    """A calibration record as the simulation's plan reads it (its input sample says which strata the references
    know; no drift test runs on fewer than five reference scenarios of a stratum)."""
    import types

    statuses = {s.status for s in strata.values()}
    sample = [] if statuses == {"unchecked"} else [{"category": "references", "agent": "a", "frames": [0.0],
                                                     "text": [0.0], "scenario": "r0"}]
    sample += [{"category": k.split("=", 1)[1], "agent": "a", "frames": [0.0], "text": [0.0], "scenario": f"r-{k}"}
               for k, st in strata.items() if st.status == "known"]
    agreement = float(np.mean(reference[1][reference[0] >= LOW])) if reference is not None else target
    profile = [] if reference is None else [[float(c), int(r)] for c, r in zip(*reference)]
    return types.SimpleNamespace(target_agreement=target, confidence=1 - delta, input_sample=sample,
                                 empirical_agreement=agreement, annotator_agreement=None, reference_profile=profile)


@dataclasses.dataclass
class _Version:
    """One simulated version: each item's stratum, category, scenario, truth, and each model's confidence and
    correctness (drawn when the model is)."""

    strata: dict[str, Stratum]
    ids: list[str]
    stratum: dict[str, str]
    category: dict[str, str]
    scenario: dict[str, str]
    truth: dict[str, bool]


def _flip(outcome: str) -> str:
    return "failure" if outcome == "success" else "success"


def _model_outcomes(st: Stratum, rate: float, ids: list[str], truth: dict, rng, learned: set = frozenset(),
                    low: float = LOW) -> tuple[dict, dict]:
    """(confidence, outcome) of a model on ``ids``: confidences uniform on [low, 1], errors by the stratum's profile
    at ``rate``; right on every item it ``learned``."""
    conf = rng.uniform(low, 1.0, len(ids))
    wrong = rng.random(len(ids)) < error_chance(st.profile, rate, conf)
    out = {}
    for cid, c, w in zip(ids, conf, wrong):
        said = "success" if truth[cid] else "failure"
        out[cid] = (float(c), _flip(said) if w and cid not in learned else said)
    return {c: v[0] for c, v in out.items()}, {c: v[1] for c, v in out.items()}


def _plan(version: _Version, target: float, delta: float, claim: str, reference, rng, adapt: int, after: int,
          seed: int, excluded: dict[str, str]):
    """``autorater label``'s plan of the version (``strata.plan_audit``, ``rounds.open_strata``) and model 0's
    outcomes."""
    import functools

    from autorater.serving.labelling.label import audit_draw
    from autorater.serving.labelling.rounds import open_strata
    from autorater.serving.labelling.strata import plan_audit
    from autorater.serving.labelling.version import VersionState, rules_of

    conf, outcome, rows = {}, {}, []
    for key, st in version.strata.items():
        mine = [c for c in version.ids if version.stratum[c] == key]
        n_unc = int(round(st.uncertain * len(mine)))
        learned = {c for c in mine if excluded.get(c)}
        c1, o1 = _model_outcomes(st, st.rate, mine, version.truth, rng, learned)
        conf.update(c1)
        outcome.update(o1)
        unsure = set(rng.permutation(mine)[:n_unc].tolist())
        rows += [{"continuation_id": c, "provisional": c not in unsure and c not in excluded, "confidence": conf[c],
                  "inputs": None, "excluded": c in excluded, "scenario": version.scenario[c]} for c in mine]
    fields = {c: {"category": version.stratum[c].split("=", 1)[1], "camera": None, "agent": "a", "tags": [],
                  "scenario": version.scenario[c]} for c in version.ids}
    planned, strata = plan_audit(rows, fields, _record(reference, target, delta, version.strata), strata=("category",),
                                 draw=functools.partial(audit_draw, seed=seed), claim=claim, seed=seed,
                                 adaptations=adapt)
    doc = {"target": target, "confidence": 1 - delta, "claim": claim, "audit_budget": None, "seed": seed,
           "adapt": {"max": adapt, "after": after}, "excluded": excluded,
           "stratum_of": {c: planned[c]["stratum"] for c in version.ids}, "strata": strata}
    rules = rules_of(doc)
    prior = {c: "labelled" for c, why in excluded.items() if why == "human_labelled"}
    open_strata(strata, planned, outcome, doc["stratum_of"], excluded, "model-0", rules, version.category, prior)
    return VersionState.fold(doc, []), rules


def _answer(cid: str, version: _Version, team: Team, rng) -> str:
    truth = "success" if version.truth[cid] else "failure"
    return truth if rng.random() < team.accuracy else _flip(truth)


def _challenger(state, key: str, version: _Version, human: dict, rules, rng) -> dict:
    """A version challenger of one ready stratum, drawn at its rate, committed by the product's own function."""
    from autorater.serving.labelling.rounds import commit_challenger, design_split
    from autorater.serving.labelling.version import chained

    st, spec = state.states[key], version.strata[key]
    index = st.model + 1
    rate = spec.challengers[min(index - 1, len(spec.challengers) - 1)] if spec.challengers else spec.rate
    mine = [c for c in version.ids if version.stratum[c] == key]
    labelled = [c for c in mine if c in human]
    design = design_split(labelled, version.scenario, rules.seed)[1]
    learned = [c for c in labelled if c not in set(design)]
    conf, said = _model_outcomes(spec, rate, mine, version.truth, rng, set(learned))
    population = {c: (conf[c], said[c]) for c in mine if c not in human}
    design_set = {c: (conf[c], said[c] == human[c]) for c in design}
    plan = commit_challenger(key, index, f"challenger-{index}", population, design_set, learned, rules)
    return chained(state.records, {"kind": "commit", "plans": [plan.to_dict()]})


def _rate_of(state, key: str, version: _Version, team: Team) -> float:
    """The agreement rate with the annotators of a stratum's current model on what its certificate covers."""
    from autorater.calibration import audited_agreement

    m = state.models[key][state.states[key].model]
    spec = version.strata[key]
    rate = spec.rate if m.index == 0 else (spec.challengers[min(m.index - 1, len(spec.challengers) - 1)]
                                           if spec.challengers else spec.rate)
    return audited_agreement(rate_at(spec.profile, rate, m.design.level), team.accuracy)


def _asked(state) -> list[str]:
    """What the product's queue asks this round of the simulation's annotators: audit items and learning batches."""
    out = []
    for key, st in state.states.items():
        if st.state in ("audit", "certified") and key in state.models:
            out += list(state.models[key][st.model].order[:st.requested])
        elif st.state == "learning":
            out += list(st.learning)
    return out


def simulate_version(strata: dict[str, Stratum], target: float, delta: float, claim: str, reference, rng,
                     adapt: int = 0, after: int = 10, team: Team = Team(), max_rounds: int = 50,
                     excluded: dict[str, str] | None = None, ids: list[str] | None = None) -> dict[str, dict]:
    """One draw of a version through what ``label`` plans and what ``certify`` decides (``rounds.decide``, challengers
    committed by ``rounds.commit_challenger``), the annotators answering every asked item, the team's behaviour on
    top. Per stratum: ``certified`` (at the end), ``failed_any_run`` (certified at some run while the certified
    model's rate is below the target), ``rate``, ``humans``, ``auto``, ``models`` and ``rounds``."""
    from autorater.serving.labelling.rounds import decide

    keyed = {f"category={k}": st for k, st in strata.items()}  # the plan's stratum keys (strata by category)
    version = _version(keyed, rng, None if ids is None else [f"category={c}" for c in ids])
    excluded = {f"category={c}": why for c, why in (excluded or {}).items()}
    for key, st in keyed.items():  # continuations the suite already holds human labels of: the model learned them
        mine = [c for c in version.ids if version.stratum[c] == key and c not in excluded]
        excluded.update({c: "human_labelled" for c in mine[:int(round(st.labelled * len(mine)))]})
    seed = int(rng.integers(2 ** 62))
    state, rules = _plan(version, target, delta, claim, reference, rng, adapt, after, seed, excluded)
    members = {k: [c for c in version.ids if version.stratum[c] == k and excluded.get(c) in (None, "human_labelled")]
               for k in keyed}
    human = {c: _answer(c, version, team, rng) for c, why in excluded.items() if why == "human_labelled"}
    blind = dict(human)  # what the first ingest of each item brought (the product reads it from the history)
    failed, rounds, quiet = {k: False for k in keyed}, 0, 0
    while rounds < max_rounds and quiet < (3 if team.corrections else 1):
        rounds += 1
        _team_answers(state, version, human, blind, team, rng)
        rnd = decide(state.states, state.current(), state.first, human, rules, members, version.category, run=rounds,
                     blind=blind)
        record = state.round_record(rnd, "", 0)
        if record is not None:
            state.append(record)
        for key in rnd.ready if adapt else ():
            state.append(_challenger(state, key, version, human, rules, rng))
        for key, st in state.states.items():
            if st.state == "certified" and _rate_of(state, key, version, team) < target:
                failed[key] = True
        done = all(st.state in ("certified", "routed") for st in state.states.values())
        quiet = quiet + 1 if done else 0
    out = _outcome(state, version, team, target, failed, rounds, human)
    return {k.split("=", 1)[1]: v for k, v in out.items()}


def _version(strata: dict[str, Stratum], rng, ids: list[str] | None = None) -> _Version:
    """Items ``KEY|i``: ten categories in turn (the tasks a learning batch is drawn over), four to a scenario."""
    names = ids or [f"{k}|{i}" for k, st in strata.items() for i in range(st.size)]
    stratum = {c: c.split("|")[0] for c in names}
    index = {c: int(c.split("|")[1]) for c in names}
    return _Version(strata, names, stratum, {c: f"task{index[c] % 10}" for c in names},
                    {c: f"{stratum[c]}/s{index[c] // 4}" for c in names}, {c: bool(rng.random() < 0.5) for c in names})


def _team_answers(state, version: _Version, human: dict, blind: dict, team: Team, rng) -> None:
    """The annotators answer what is asked (an ingest: ``blind`` keeps each first answer); corrections replace some
    answered audit items' answers; re-asked disagreements get a new answer that replaces the old, before the
    product's next round sees them."""
    audit = {c: (key, st) for key, st in state.states.items() if key in state.models
             for c in state.models[key][st.model].order[:st.requested]}
    for cid in _asked(state):
        if cid not in human:
            human[cid] = blind[cid] = _answer(cid, version, team, rng)
    for cid, (key, st) in audit.items():
        if cid not in human:
            continue
        plan = state.models[key][st.model]
        said = plan.said[plan.order.index(cid)] if team.reask else None
        if (team.corrections and rng.random() < team.corrections) or (team.reask and human[cid] != said):
            human[cid] = _answer(cid, version, team, rng)


def _outcome(state, version: _Version, team: Team, target: float, failed: dict, rounds: int, human: dict) -> dict:
    out = {}
    for key, spec in version.strata.items():
        st = state.states[key]
        models = state.models.get(key, [])
        certified = st.state == "certified"
        auto = [c for c in models[st.model].order[st.requested:]] if certified else []
        auto += [c for c in models[st.model].order[:st.requested] if c not in human] if certified else []
        first = models[0].design if models else None
        out[key] = {"certified": certified, "failed_any_run": failed[key],
                    "first": None if first is None else {"level": first.level, "size": len(models[0].order),
                                                         "alpha": first.alpha, "prior": first.prior,
                                                         "rate": rate_at(spec.profile, spec.rate, first.level)},
                    "rate": _rate_of(state, key, version, team) if certified else None,
                    "level": models[st.model].design.level if certified else None,
                    "model": st.model, "models": len(models), "auto": len(auto), "humans": spec.size - len(auto),
                    "rounds": rounds, "reason": st.reason}
    return out


@functools.lru_cache(maxsize=4096)
def one_look_size(expected: float, target: float, alpha: float, size: int, power: float = 0.8) -> int:
    """The one-look audit designed for a level: the fewest audit labels whose exact (Clopper-Pearson) bound at
    ``1 - alpha`` reaches the target with chance ``power`` when the agreement is ``expected`` (the references
    estimate at the level, where the sequential audit's bets start); ``size`` when none does."""
    from scipy.stats import binom

    from autorater.calibration import agreement_lower_bound

    allowed = -1  # the most errors n labels may hold and certify: never fewer as n grows
    for n in range(1, size + 1):
        while allowed + 1 <= n and agreement_lower_bound(allowed + 1, n, 1 - alpha) >= target:
            allowed += 1
        if allowed >= 0 and binom.cdf(allowed, n, 1 - expected) >= power:
            return n
    return size


def one_look_humans(order_size: int, stratum_size: int, rate: float, expected: float, target: float, alpha: float,
                    rng) -> int:
    """What a one-look audit designed at the sequential design's level costs on one stratum: its audit, certified
    when the exact bound reaches the target (then the rest of the level is auto-labelled), else the stratum by hand."""
    from autorater.calibration import agreement_lower_bound

    n = one_look_size(round(expected, 3), target, round(alpha, 6), order_size)
    errors = int(np.sum(rng.random(n) >= rate))
    certified = n < order_size and agreement_lower_bound(errors, n, 1 - alpha) >= target
    return stratum_size - (order_size - n) if certified else stratum_size


def fixed_audit_humans(size: int, rate: float, profile: str, target: float, delta: float, rng) -> int:
    """The fixed audit this replaced, on the same kind of stratum: the smallest audit that can certify alone
    (``certifying_size``: 22 labels at 0.90 / 90%), certified when its exact binomial bound reaches the target (every
    audited label right), else the whole stratum to humans. Returns the human labels it costs."""
    from autorater.calibration import agreement_lower_bound, certifying_size

    n = min(size, certifying_size(target, 1 - delta))
    conf = rng.uniform(LOW, 1.0, n)
    errors = int(np.sum(rng.random(n) < error_chance(profile, rate, conf)))
    return n if n < size and agreement_lower_bound(errors, n, 1 - delta) >= target else size


def run_cell(strata: dict[str, Stratum], target: float, delta: float, claim: str, reference_rate: float,
             draws: int, seed: int, reference_profile: str = "flat", adapt: int = 0, after: int = 10,
             team: Team = Team(), fixed: bool = True) -> dict:
    """``draws`` versions of one cell; the failure rates against the target (at the end, and at any run) and the
    cost (human labels per continuation, and per provisional label of the job's model)."""
    rng, other = np.random.default_rng(seed), np.random.default_rng(seed + 10_000)  # the fixed arm draws apart
    any_false, ever_false, false_share = 0, 0, []
    per = {k: {"certified": 0, "failed": 0, "failed_any_run": 0, "challenger_certified": 0} for k in strata}
    humans, rounds, fixed_humans, one_look = 0, [], 0, 0
    for _ in range(draws):
        if fixed:
            fixed_humans += sum(fixed_audit_humans(st.size, st.rate, st.profile, target, delta, other)
                                for st in strata.values())
        reference = references(reference_rate, rng, profile=reference_profile)
        out = simulate_version(strata, target, delta, claim, reference, rng, adapt=adapt, after=after, team=team)
        certified = [k for k, o in out.items() if o["certified"]]
        false = [k for k in certified if out[k]["rate"] < target]
        any_false += bool(false)
        ever_false += any(o["failed_any_run"] for o in out.values())
        false_share.append(len(false) / max(len(certified), 1))
        for k, o in out.items():
            per[k]["certified"] += o["certified"]
            per[k]["failed"] += k in false
            per[k]["failed_any_run"] += o["failed_any_run"]
            per[k]["challenger_certified"] += o["certified"] and o["model"] > 0
        humans += sum(o["humans"] for o in out.values())
        one_look += sum(one_look_humans(o["first"]["size"], strata[k].size, o["first"]["rate"],
                                        o["first"]["prior"], target, o["first"]["alpha"], other)
                        if o["first"] is not None else strata[k].size for k, o in out.items())
        rounds.append(max(o["rounds"] for o in out.values()))
    total = sum(s.size for s in strata.values()) * draws
    return {"draws": draws, "family_failure": any_false / draws, "failure_any_run": ever_false / draws,
            "false_certification_rate": float(np.mean(false_share)), "humans_per_continuation": humans / total,
            "humans_per_provisional": humans / total, "fixed_audit_humans_per_provisional": fixed_humans / total,
            "one_look_humans_per_continuation": one_look / total,
            "rounds_mean": float(np.mean(rounds)),
            "strata": {k: {key: val / draws for key, val in c.items()} for k, c in per.items()}}


def cells(target: float) -> dict[str, dict]:
    """The cells at one target: name -> ``{"strata", "reference"}`` and, where the cell asks, ``adapt`` (version
    challengers) and ``team`` (how the team runs the rounds)."""
    margin = target + 0.026 if target < 0.95 else target + 0.02  # as Learn-then-Test leaves the references
    top = min(target + 0.07, 0.995)
    out = {}
    for profile in PROFILES:
        for size in (100, 400, 2000):
            out[f"margin {profile} n={size}"] = {"strata": {"s": Stratum(size, target - 0.005, profile)}}
    out["hidden shift 0.03 (refs optimistic)"] = {"strata": {"s": Stratum(1000, target - 0.01)},
                                                  "reference": target + 0.04}
    out["alike +0.04, n=1000"] = {"strata": {"s": Stratum(1000, min(target + 0.04, 0.995))},
                                  "reference": min(target + 0.04, 0.995)}
    out["alike +0.04, adaptation on"] = {**out["alike +0.04, n=1000"], "adapt": 2}
    out["just above: +0.02, n=1000"] = {"strata": {"s": Stratum(1000, target + 0.02)}, "reference": target + 0.02}
    spread = np.linspace(-0.05, 0.05, 10)
    out["ten strata around target"] = {"strata": {f"s{i}": Stratum(300, float(target + d))
                                                  for i, d in enumerate(spread)}}
    good = {f"good{i}": Stratum(200, top) for i in range(4)}
    out["bad among good"] = {"strata": {**good, "bad": Stratum(400, target - 0.03)}}
    out["bad alone"] = {"strata": {"bad": Stratum(400, target - 0.03)}}
    # version challengers (issue 62): the job's model fails, the model changes between rounds
    new = {"adapt": 2}
    out["challenger at the margin"] = {**new, "strata": {"s": Stratum(1000, target - 0.15, challengers=(
        target - 0.005,), status="new")}}
    out["challenger at the margin, confident errors"] = {**new, "strata": {"s": Stratum(
        1000, target - 0.15, "confident", challengers=(target - 0.005,), status="new")}}
    out["challenger worse than its parent"] = {**new, "strata": {"s": Stratum(1000, target - 0.01, challengers=(
        target - 0.05,))}}
    out["never good (two challengers under)"] = {**new, "strata": {"s": Stratum(1000, target - 0.10, challengers=(
        target - 0.03, target - 0.005), status="new")}}
    out["good challenger (new tasks)"] = {**new, "strata": {"s": Stratum(1000, 0.70, challengers=(top,), uncertain=0.3,
                                                                          status="new")}}
    out["ten failing strata, challengers at the margin"] = {**new, "strata": {f"s{i}": Stratum(
        300, target - 0.10, challengers=(target - 0.005,), status="new") for i in range(10)}}
    # how a team runs it (issue 65): human labels in the version, corrections, re-asked disagreements
    out["30% human-labelled (learned), the rest under"] = {"strata": {"s": Stratum(1000, target - 0.02,
                                                                                   labelled=0.3)}}
    out["30% human-labelled, challenger at the margin"] = {**new, "strata": {"s": Stratum(
        1000, target - 0.10, labelled=0.3, challengers=(target - 0.005,), status="new")}}
    accuracy = 0.9  # annotators right 90% of the time; the model agrees with them at target - 0.005
    model = (target - 0.005 - (1 - accuracy)) / (2 * accuracy - 1)
    for share in (0.1, 0.3):
        out[f"corrections {share:.0%} of answers"] = {"strata": {"s": Stratum(1000, model)},
                                                        "team": Team(accuracy, corrections=share)}
    out["disagreements re-asked"] = {"strata": {"s": Stratum(1000, model)}, "team": Team(accuracy, reask=True)}
    return {name: {"reference": margin, "adapt": 0, "team": Team(), **cell} for name, cell in out.items()}


def relabel_cell(kind: str, target: float, draws: int, seed: int, jobs: int = 3) -> dict:
    """A version labelled again as a team would (issue 65): ``again`` (the model fine-tuned on the first audit's
    answers, the version labelled again, up to ``jobs`` jobs until one certifies) or ``grown`` (a grown version that
    keeps the first one's ids, its new continuations as bad as the rest). Each job is planned through the suite's
    ledger (``serving.labelling.ledger``): a job whose continuations an earlier job's evidence binds is refused, a
    grown version's old continuations are left out of its audit. Failure: any job's certificate below the target."""
    import tempfile
    from pathlib import Path

    from autorater.serving.labelling import ledger

    rng, failures, refused, humans, total = np.random.default_rng(seed), 0, 0, 0, 0
    stratum = Stratum(1000, target - 0.02)
    for d in range(draws):
        with tempfile.TemporaryDirectory() as root:
            ids = [f"s|{i}" for i in range(stratum.size)]
            reference = references(target + 0.026, rng)
            failed = False
            for job in range(jobs if kind == "again" else 2):
                now = ids if (kind == "again" or job == 0) else ids + [f"s|{i}" for i in range(1000, 1500)]
                try:
                    bound = ledger.plan_job(root, f"job{job}", Path(root) / f"labels{job}", now)
                except ledger.VersionBoundError:
                    refused += 1
                    break
                excluded = {c: "bound" for c in now if c in bound}
                size = len(now)
                out = simulate_version({"s": dataclasses.replace(stratum, size=size)}, target, 0.1, "family",
                                       reference, rng, excluded=excluded, ids=now)["s"]
                ledger.record_evidence(root, f"job{job}")
                failed |= out["certified"] and out["rate"] < target
                humans += out["humans"] - len(excluded)
                total += size - len(excluded)
                if out["certified"]:
                    break
            failures += failed
    return {"draws": draws, "family_failure": failures / draws, "refused_per_draw": refused / draws,
            "humans_per_continuation": humans / max(total, 1)}


def run(targets: list[float], claims: list[str], draws: int, out: Path, seed: int = 0) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    results = {"draws": draws, "cells": []}
    print(f"{'target':>6} {'claim':<7} {'cell':<46}{'family':>8}{'any run':>8}{'FCR':>7}{'h/cont':>8}"
          f"{'by chal.':>9}{'fixed':>7}{'1-look':>7}{'rounds':>7}")
    for target in targets:
        for claim in claims:
            for i, (name, cell) in enumerate(cells(target).items()):
                started = time.time()
                r = run_cell(cell["strata"], target, 1 - 0.9, claim, cell["reference"], draws, seed + i,
                             adapt=cell["adapt"], team=cell["team"])
                r.update(target=target, claim=claim, cell=name, reference_rate=cell["reference"],
                         adapt=cell["adapt"], wall_s=round(time.time() - started, 1))
                results["cells"].append(r)
                by = float(np.mean([s["challenger_certified"] for s in r["strata"].values()]))
                print(f"{target:>6.2f} {claim:<7} {name:<46}{r['family_failure']:>8.3f}{r['failure_any_run']:>8.3f}"
                      f"{r['false_certification_rate']:>7.3f}{r['humans_per_continuation']:>8.3f}{by:>9.2f}"
                      f"{r['fixed_audit_humans_per_provisional']:>7.3f}{r['one_look_humans_per_continuation']:>7.3f}"
                      f"{r['rounds_mean']:>7.1f}", flush=True)
        for kind in ("again", "grown"):
            r = relabel_cell(kind, target, draws, seed + 99)
            r.update(target=target, claim="family", cell=f"labelled again ({kind})")
            results["cells"].append(r)
            print(f"{target:>6.2f} {'family':<7} {r['cell']:<46}{r['family_failure']:>8.3f}{'':>8}{'':>7}"
                  f"{r['humans_per_continuation']:>8.3f}   refused {r['refused_per_draw']:.2f} a draw", flush=True)
    (out / "certify-sim.json").write_text(json.dumps(results, indent=1) + "\n")
    return results


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--targets", default="0.9,0.95")
    p.add_argument("--claims", default="family,fcr")
    p.add_argument("--draws", type=int, default=1000)
    p.add_argument("--out", default="bench-out/certify-sim")
    args = p.parse_args(argv)
    run([float(t) for t in args.targets.split(",")], args.claims.split(","), args.draws, Path(args.out))
    print(f"written: {Path(args.out) / 'certify-sim.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


# The benchmark built small, run by tests/test_benchmark_modules.py (a benchmark that drifts from the product fails
# there, not on the day someone runs it).


def tiny(tmp_path=None):
    """The decision it simulates, on one small stratum for a few draws (its cells run in tests/test_certify.py)."""
    return run_cell({"s": Stratum(200, 0.97)}, 0.9, 0.1, "family", 0.95, draws=3, seed=0)["humans_per_provisional"]
