"""A version's strata and the plan of their audits (``autorater label``'s part of certification).

A new suite version is certified stratum by stratum on its own audit (``serving.labelling.certify``). Here, before any
human answers, each continuation gets its stratum and each stratum its audit design:

1. **Strata.** By default category x camera x *new agent*: the continuations of an agent the references never saw form
   strata of their own (``new-agent``), so a version whose novelty is its agents is audited as new; ``--strata`` also
   takes ``agent`` (every agent apart) and ``tag:NAME`` (the scenario tag ``NAME:value``), or ``none`` (one stratum).
   Keys escape their separators, so no two different strata share a key.
2. **Input check.** Each stratum's inputs (``autorater.signature``: the scenario's first frame and words) are compared
   with the references' scenarios of the same stratum (``calibration.mmd_test``): ``known``, ``new`` (the references
   have no such stratum) or ``drifted``. The status only sets how far the audit's bets trust the references
   (``prior_weight``) and lets ``--on-drift route`` send new and drifted strata to humans whole; it is never evidence.
3. **Design** (``calibration.plan_strata``): the confidence level each stratum is audited at, chosen from the
   references' confidences and errors; its error budget (family claim: ``delta`` shared in proportion to the strata's
   provisional labels); its first batch. A stratum no level of which pays goes to humans at once.
4. **Audit order.** The stratum's provisional labels at its level are ordered by a hash of their id and the job's seed
   (a uniform random order fixed before any answer); row ``audit_rank`` is the position, and the first batch of the
   order is the round-1 audit.

Example:
    >>> decided, plan = plan_audit(rows, fields, record, strata=STRATA, draw=draw)   # doctest: +SKIP
    >>> plan["category=drawer-open-v3|camera=corner"]["design"]["level"]             # doctest: +SKIP
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from autorater.calibration import (
    CLAIMS,
    FIRST_SHARE_BY_STATUS,
    audited_agreement,
    mmd_test,
    model_weights,
    plan_strata,
    stratum_budgets,
)
from autorater.data.paths import encodable
from autorater.data.suite import Suite

STRATA = ("category", "camera", "new-agent")  # the default cut of a version into strata
# What can cut a version into strata (``--strata``), each with what it is (the flag's help is made of these), and
# ``tag:NAME``: the value of the scenario's tag ``NAME:value``. A new key: a line here and its value in stratum_fields.
STRATUM_FIELDS = {"category": "the scenario's category", "camera": "the camera it was filmed from",
                  "agent": "every agent apart", "new-agent": "the agents the references never saw, each apart"}
TAG_FIELD = ("tag:NAME", "the value of the scenario's tag NAME:value")
DRIFT_ALPHA = 0.01  # a stratum whose inputs differ from the references' at this level counts as drifted
MIN_SAME_STRATUM_REFERENCES = 5  # fewer reference scenarios of a stratum: its inputs are not tested
PRIOR_WEIGHT = {"known": 100.0, "unchecked": 30.0, "new": 10.0, "drifted": 10.0}  # answers the references' prior counts


def parse_strata(text: str | Sequence[str]) -> tuple[str, ...]:
    """``"category,camera"`` -> ("category", "camera"); ``"none"`` -> () (one stratum); ValueError naming the allowed
    names."""
    names = tuple(n.strip() for n in (text.split(",") if isinstance(text, str) else text) if n.strip())
    if names == ("none",):
        return ()
    bad = [n for n in names if n not in STRATUM_FIELDS and not (n.startswith("tag:") and len(n) > 4)]
    if bad or not names:
        raise ValueError(f"--strata {','.join(names) or '(empty)'}: unknown {bad}; use a comma-separated list of "
                         f"{', '.join(STRATUM_FIELDS)} and {TAG_FIELD[0]} ({TAG_FIELD[1]}), e.g. "
                         f"{','.join(STRATA)}; or none (one stratum)")
    return names


def strata_help() -> str:
    """``--strata``'s help, made of :data:`STRATUM_FIELDS` (each key and what it cuts by)."""
    keys = "; ".join(f"{name} ({what})" for name, what in (*STRATUM_FIELDS.items(), TAG_FIELD))
    return (f"what cuts the version into strata, each certified on its own: comma-separated {keys}; or none (one "
            f"stratum). Default: {','.join(STRATA)}")


def stratum_fields(suite: Suite, continuation_id: str) -> dict:
    """The fields a stratum is cut by: ``category``, ``camera`` (a ``camera:X`` tag, or ``camera`` in the scenario's
    or continuation's metadata; None where the suite does not say), ``agent`` and ``tags``; and its ``scenario`` (the
    unit the input check compares)."""
    c = suite.get(continuation_id)
    s = suite.scenario_by_id[c.scenario_id]
    tags = list(s.tags or [])
    camera = next((t.split(":", 1)[1] for t in tags if t.startswith("camera:")), None)
    for meta in (c.metadata, s.metadata):
        if camera is None and isinstance(meta, dict) and isinstance(meta.get("camera"), str):
            camera = meta["camera"]
    return {"category": s.category, "camera": camera, "agent": c.agent_id, "tags": tags, "scenario": c.scenario_id}


def _escape(value: str) -> str:
    """A stratum value in a key: ``\\``, ``|`` and ``=`` escaped with a backslash, and a lone surrogate (text UTF-8
    cannot hold) written as its escape ``\\udXXX``: a key is always writable, and since a backslash of the value is
    itself escaped, two different values never share a key."""
    text = str(value).replace("\\", "\\\\").replace("|", "\\|").replace("=", "\\=")
    return text if encodable(text) else text.encode("utf-8", "backslashreplace").decode("utf-8")


def stratum_key(fields: dict, by: Sequence[str], known_agents: set[str] | None = None) -> str:
    """``"category=put_next|camera=corner"``; a field the suite does not give is left out; ``new-agent`` is the agent
    when ``known_agents`` (the references' agents) lacks it. Values escape ``\\``, ``|`` and ``=``, so two strata never
    share a key."""
    parts = []
    for name in by:
        if name.startswith("tag:"):
            prefix = name[4:] + ":"
            value = next((t[len(prefix):] for t in fields.get("tags") or [] if t.startswith(prefix)), None)
        elif name == "new-agent":
            agent = fields.get("agent")
            value = agent if known_agents is not None and agent is not None and agent not in known_agents else None
        else:
            value = fields.get(name)
        if value is not None:
            parts.append(f"{name}={_escape(value)}")
    return "|".join(parts) or "all"


def input_drift(reference: list[dict], new: list[dict], seed: int = 0, permutations: int = 500) -> dict:
    """Do ``new`` inputs (``{"frames": [...], "text": [...]}`` each) differ from ``reference``'s? MMD on frames and
    on words apart, Bonferroni over the two: ``pvalue``, ``frames_p``, ``text_p``, ``changed`` (which moved)."""
    out = {}
    for block in ("frames", "text"):
        ref = np.array([r[block] for r in reference], dtype=float)
        out[f"{block}_p"] = mmd_test(ref, np.array([r[block] for r in new], dtype=float), permutations,
                                     seed)["pvalue"]
    ps = [p for p in out.values() if p is not None]
    out["pvalue"] = min(1.0, 2 * min(ps)) if ps else None
    out["changed"] = [b for b in ("frames", "text") if out[f"{b}_p"] is not None and 2 * out[f"{b}_p"] < DRIFT_ALPHA]
    return out


def _by_scenario(rows: list[dict]) -> list[dict]:
    """One input signature per scenario (its first continuation's, by id; a row without a scenario is its own unit):
    the continuations of a scenario share its scene and instruction, so they are one draw, not several."""
    units: dict = {}
    for i, r in enumerate(sorted(rows, key=lambda r: str(r.get("continuation_id", "")))):
        units.setdefault(r.get("scenario", f"#{i}"), {"frames": r["frames"], "text": r["text"]})
    return list(units.values())


def _stratum_status(key: str, mine: list[dict], references: dict, everyone: list, seed: int) -> tuple[str, dict | None]:
    """"known", "new" (no reference of the stratum), "drifted" or "unchecked" (no reference inputs stored). The input
    check compares scenarios (one signature each) with the references' scenarios of the same stratum; with fewer than
    ``MIN_SAME_STRATUM_REFERENCES`` of them it is not run (against all references it read Meta-World's other
    categories as drift)."""
    if not everyone:
        return "unchecked", None
    if key not in references:
        return "new", None
    same = _by_scenario(references[key])
    if len(same) < MIN_SAME_STRATUM_REFERENCES:
        return "known", {"pvalue": None, "changed": [], "reference_scenarios": len(same)}
    scored = _by_scenario([{**r["inputs"], "scenario": r.get("scenario"), "continuation_id": r["continuation_id"]}
                           for r in mine if r.get("inputs")])
    if len(scored) < 2:
        return "known", None
    drift = input_drift(same, scored, seed=seed)
    return ("drifted" if drift["pvalue"] is not None and drift["pvalue"] < DRIFT_ALPHA else "known"), drift


def _reference_profile(record) -> tuple[np.ndarray, np.ndarray] | None:
    profile = getattr(record, "reference_profile", None) or []
    if not profile:
        return None
    arr = np.asarray(profile, dtype=float).reshape(-1, 2)
    return arr[:, 0], arr[:, 1].astype(bool)


def plan_audit(rows: list[dict], fields: dict[str, dict], record, *, strata: Sequence[str], draw,
               on_drift: str = "warn", claim: str = "family", seed: int = 0,
               adaptations: int = 0) -> tuple[dict[str, dict], dict]:
    """Strata, input check, audit designs and round-1 audits of a version's rated rows (the module docstring).

    Args:
        rows: the rated rows (``continuation_id``, ``provisional``: the reference policy would auto-label it and no
            human label or training label of it exists, ``confidence``: ``max(p, 1 - p)``, ``inputs``).
        fields: continuation id -> :func:`stratum_fields`.
        record: the model's ``CalibrationRecord`` (operating point, references' inputs and confidence profile).
        strata: the fields that cut the version into strata (``STRATA``).
        draw: continuation id -> a uniform number in [0, 1) fixed by the job's seed (the audit order).
        on_drift: ``"route"`` sends a new or drifted stratum to humans whole instead of auditing it.
        claim: the claim across strata (``calibration.CLAIMS``): how the error budget is shared.
        seed: the permutation tests' seed.
        adaptations: how many version challengers may follow each stratum's first model: each stratum's budget is then
            fixed over all strata (by their sizes) and split across its models (``calibration.model_weights``, the
            first model's share by the input check's status).

    Returns:
        (continuation id -> ``{"stratum", "audit", "audit_rank", "routed"}``, stratum key -> its plan: counts, status,
        drift, ``routed``, ``design``, ``budget`` and ``weights``).
    """
    if claim not in CLAIMS:
        raise ValueError(f"claim must be one of {CLAIMS}, got {claim!r}")
    target, delta = record.target_agreement, 1 - record.confidence
    known_agents = {ref["agent"] for ref in record.input_sample if ref.get("agent") is not None} or None
    references: dict[str, list[dict]] = {}
    for ref in record.input_sample:
        references.setdefault(stratum_key(ref, strata, known_agents), []).append(ref)
    everyone = [ref for refs in references.values() for ref in refs]
    by_stratum: dict[str, list[dict]] = {}
    for r in rows:
        by_stratum.setdefault(stratum_key(fields[r["continuation_id"]], strata, known_agents), []).append(r)
    status = {key: _stratum_status(key, mine, references, everyone, seed) for key, mine in by_stratum.items()}
    annotators = getattr(record, "annotator_agreement", None)
    agreement = audited_agreement(record.empirical_agreement if record.empirical_agreement is not None else target,
                                  annotators)
    audited = {key: np.array([r["confidence"] for r in mine if r["provisional"]]) for key, mine in by_stratum.items()
               if not (on_drift == "route" and status[key][0] in ("new", "drifted"))}
    priors = {key: (agreement, PRIOR_WEIGHT[status[key][0]]) for key in audited}
    weights = {key: model_weights(adaptations, FIRST_SHARE_BY_STATUS[status[key][0]]) for key in by_stratum}
    budgets = None
    if adaptations:  # every stratum keeps a budget: a challenger may certify where the first model cannot
        budgets = stratum_budgets({key: sum(not r.get("excluded") for r in mine) for key, mine in by_stratum.items()},
                                  delta, claim)
    designs = plan_strata(audited, target, delta, claim, priors, _reference_profile(record), annotators,
                          weights={k: w[0] for k, w in weights.items()}, budgets=budgets)
    decided, plan = {}, {}
    for key, mine in sorted(by_stratum.items()):
        design = designs.get(key)
        provisional = [r for r in mine if r["provisional"]]
        routed = None if design is not None else ("drift" if key not in audited else
                                                  "too_few_to_certify" if provisional else None)
        order = [] if design is None else sorted(
            (r["continuation_id"] for r in provisional if r["confidence"] >= design.level), key=draw)
        rank = {cid: i for i, cid in enumerate(order)}
        for r in mine:
            cid = r["continuation_id"]
            below = r["provisional"] and design is not None and cid not in rank
            decided[cid] = {"stratum": key, "audit_rank": rank.get(cid),
                            "audit": rank.get(cid, len(order)) < (design.first_batch if design else 0),
                            "routed": (routed or ("below_stratum_level" if below else None)) if r["provisional"]
                            else None}
        budget = None if design is None else design.alpha / design.weight
        if budgets is not None:
            budget = budgets.get(key)
        plan[key] = {"continuations": len(mine), "provisional": len(provisional), "status": status[key][0],
                     "drift": status[key][1], "routed": routed,
                     "design": None if design is None else design.to_dict(), "budget": budget,
                     "weights": list(weights[key])}
    return decided, plan


__all__ = ["STRATA", "STRATUM_FIELDS", "TAG_FIELD", "input_drift", "parse_strata", "plan_audit", "strata_help",
           "stratum_fields", "stratum_key"]
