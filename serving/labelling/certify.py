"""Each suite version certified on its own audit, stratum by stratum (``autorater label`` plans, ``certify`` decides).

The references' promise ("these auto-labels agree with the annotators at >= 95%, with 90% confidence") holds for
episodes like the references. A new version brings new tasks, cameras and agents; so its auto-labels stay
*provisional* until evidence drawn from the version itself certifies them:

1. ``autorater label`` cuts the version into strata (by default category x camera, ``--strata``), compares each
   stratum's inputs with the references' (``autorater.signature``, ``calibration.mmd_test``: frames and words,
   permutation p-values), and draws a uniform random audit of each stratum's provisional auto-labels into the human
   queue: ``audit_share`` of a *known* stratum (one the references cover, inputs alike), and the smallest sample
   that can certify on its own (``calibration.audit_size``) of a *new* or *drifted* one. A new stratum too small to
   certify even if the model were right on every audit goes to humans at once.
2. The annotators answer the queue; ``autorater ingest`` takes the labels back.
3. ``autorater certify`` (this module's :func:`certify`) decides each stratum whose audit is answered
   (``calibration.certify_stratum``): pooled with the references where the stratum is known and its audit agrees
   with them, on the audit alone otherwise (the reference threshold or a stricter one), or not at all. Certified
   provisional labels become ``auto``; the others go to humans in a new Label Studio round. ``summary.json`` keeps
   the promise per stratum (target, bound, evidence, audit size, audits that would certify a routed stratum).

Everything ``certify`` decides is a function of ``labels.jsonl`` (each row keeps its stratum, audit flag and, once
decided, its ``certified_by``), so running it again changes nothing, a crash mid-way is finished by the next run,
and a second ingest + certify decides the strata whose audits were still waiting.

Example:
    >>> result = certify("labels-v3")                # doctest: +SKIP
    >>> result["auto"], result["strata"]["category=drawer-open-v3|camera=corner"]["bound"]   # doctest: +SKIP
"""

from __future__ import annotations

import math
import os
from typing import Sequence

import numpy as np

from autorater.calibration import audit_size, certify_stratum, consistency_pvalue, mmd_test
from autorater.data.suite import Suite
from autorater.serving.labelling.folder import LabelJobError, LabelsFolder

STRATA = ("category", "camera")  # the default cut of a version into strata
STRATUM_FIELDS = ("category", "camera", "agent")  # and "tag:NAME": the value of the scenario's "NAME:value" tag
DRIFT_ALPHA = 0.01  # a stratum whose inputs differ from the references' at this level counts as drifted
CONSISTENCY_ALPHA = 0.2  # an audit that errs more than the references at this level contradicts them
MIN_SAME_STRATUM_REFERENCES = 5  # fewer reference scenarios of a stratum: its inputs are not tested


def parse_strata(text: str | Sequence[str]) -> tuple[str, ...]:
    """``"category,camera"`` -> ("category", "camera"); ValueError naming the allowed names."""
    names = tuple(n.strip() for n in (text.split(",") if isinstance(text, str) else text) if n.strip())
    bad = [n for n in names if n not in STRATUM_FIELDS and not (n.startswith("tag:") and len(n) > 4)]
    if bad or not names:
        raise ValueError(f"--strata {','.join(names) or '(empty)'}: unknown {bad}; use a comma-separated list "
                         f"of {', '.join(STRATUM_FIELDS)} and tag:NAME (the scenario tag NAME:value), e.g. "
                         f"category,camera")
    return names


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


def stratum_key(fields: dict, by: Sequence[str]) -> str:
    """``"category=put_next|camera=corner"``; a field the suite does not give is left out."""
    parts = []
    for name in by:
        if name.startswith("tag:"):
            prefix = name[4:] + ":"
            value = next((t[len(prefix):] for t in fields.get("tags") or [] if t.startswith(prefix)), None)
        else:
            value = fields.get(name)
        if value is not None:
            parts.append(f"{name}={value}")
    return "|".join(parts) or "all"


def _inputs(rows: list[dict], block: str) -> np.ndarray:
    return np.array([r[block] for r in rows], dtype=float)


def input_drift(reference: list[dict], new: list[dict], seed: int = 0, permutations: int = 500) -> dict:
    """Do ``new`` inputs (``{"frames": [...], "text": [...]}`` each) differ from ``reference``'s? MMD on frames and
    on words apart, Bonferroni over the two: ``pvalue``, ``frames_p``, ``text_p``, ``changed`` (which moved)."""
    out = {}
    for block in ("frames", "text"):
        out[f"{block}_p"] = mmd_test(_inputs(reference, block), _inputs(new, block), permutations, seed)["pvalue"]
    ps = [p for p in out.values() if p is not None]
    out["pvalue"] = min(1.0, 2 * min(ps)) if ps else None
    out["changed"] = [b for b in ("frames", "text") if out[f"{b}_p"] is not None and 2 * out[f"{b}_p"] < DRIFT_ALPHA]
    return out


def plan_audit(rows: list[dict], fields: dict[str, dict], record, *, strata: Sequence[str], audit_share: float,
               draw, on_drift: str = "warn", seed: int = 0) -> tuple[dict[str, dict], dict]:
    """Strata, input drift and the audit of a version's provisional auto-labels (step 1 of the module docstring).

    Args:
        rows: the rated rows (``continuation_id``, ``provisional``: the reference policy would auto-label it,
            ``inputs``).
        fields: continuation id -> :func:`stratum_fields`.
        record: the model's ``CalibrationRecord`` (its operating point and the references' ``input_sample``).
        strata: the fields that cut the version (``STRATA``).
        audit_share: the audited share of a known stratum's provisional auto-labels (raised where needed so that the
            known strata's audit together holds at least ``audit_size(target, confidence)``).
        draw: continuation id -> a uniform number in [0, 1) fixed by the job's seed (the audit is the smallest).
        on_drift: ``"route"`` sends a new or drifted stratum to humans whole instead of auditing it.
        seed: the permutation tests' seed.

    Returns:
        (continuation id -> ``{"stratum", "audit", "routed"}`` with ``routed`` the reason or None, per-stratum plan).
    """
    target, confidence = record.target_agreement, record.confidence
    references: dict[str, list[dict]] = {}
    for ref in record.input_sample:
        references.setdefault(stratum_key(ref, strata), []).append(ref)
    everyone = [ref for refs in references.values() for ref in refs]
    by_stratum: dict[str, list[dict]] = {}
    for r in rows:
        by_stratum.setdefault(stratum_key(fields[r["continuation_id"]], strata), []).append(r)
    decided, plan = {}, {}
    alone = audit_size(target, confidence)
    status = {key: _stratum_status(key, mine, references, everyone, seed) for key, mine in by_stratum.items()}
    # the known strata are certified as one group: its audit is audit_share of their provisional labels, and at least
    # the smallest audit that could certify the target on its own
    known = sum(r["provisional"] for key, mine in by_stratum.items() if status[key][0] == "known" for r in mine)
    share = max(audit_share, min(1.0, alone / known)) if known else audit_share
    for key, mine in sorted(by_stratum.items()):
        stratum_status, drift = status[key]
        provisional = sorted((r["continuation_id"] for r in mine if r["provisional"]), key=draw)
        if stratum_status == "known":
            n_audit = min(len(provisional), math.ceil(share * len(provisional)))
            routed = None
        elif on_drift == "route":
            n_audit, routed = 0, "drift"
        elif alone >= len(provisional):  # the audit would take every one of them: nothing left to auto-label
            n_audit, routed = 0, "too_few_to_certify"
        else:
            n_audit, routed = alone, None
        audited = set(provisional[:n_audit])
        for r in mine:
            cid = r["continuation_id"]
            decided[cid] = {"stratum": key, "audit": cid in audited, "routed": routed if r["provisional"] else None}
        plan[key] = {"continuations": len(mine), "provisional": len(provisional), "audit": n_audit,
                     "status": stratum_status, "drift": drift, "routed": routed, "audit_alone": alone}
    return decided, plan


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
    categories as drift: 5 of 7 strata of an alike version; the permutation test is exact with few units, if weak)."""
    if not everyone:
        return "unchecked", None
    if key not in references:
        return "new", None
    same = _by_scenario(references[key])
    if len(same) < MIN_SAME_STRATUM_REFERENCES:  # too few to test: the audit's consistency test is the guard
        return "known", {"pvalue": None, "changed": [], "reference_scenarios": len(same)}
    scored = _by_scenario([{**r["inputs"], "scenario": r.get("scenario"), "continuation_id": r["continuation_id"]}
                           for r in mine if r.get("inputs")])
    if len(scored) < 2:
        return "known", None
    drift = input_drift(same, scored, seed=seed)
    return ("drifted" if drift["pvalue"] is not None and drift["pvalue"] < DRIFT_ALPHA else "known"), drift


# -- step 3: certify -----------------------------------------------------------------------------------------------

def _wrong(row: dict) -> bool:
    return row["model_outcome"] != row["human_outcome"]


def _confidence(row: dict) -> float:
    p = float(row["p_success"])
    return max(p, 1 - p)


def decide_strata(rows: list[dict], plan: dict, record: dict) -> dict[str, dict]:
    """The certification of each stratum whose audit is fully answered; the others ``{"waiting": n}`` unanswered
    audits. ``record``: the summary's operating point.

    The known strata are certified as one group on their audits together (``calibration.certify_stratum``: pooled
    with the references where the group's audit agrees with them, else on the audit alone), less any known stratum
    whose own audit contradicts the references (the same test, Bonferroni over the known strata): that one, like a
    new or drifted stratum, stands on its audit alone.
    A group decides only when all its audits are answered."""
    target, confidence, threshold = record["target_agreement"], record["confidence"], record["t_success"]
    reference = tuple(record["reference_evidence"]) if record.get("reference_evidence") else None
    audits: dict[str, list[dict]] = {}
    for r in rows:
        if r.get("audit") and r.get("stratum") is not None:
            audits.setdefault(r["stratum"], []).append(r)
    waiting = {k: sum(r.get("human_outcome") is None for r in audits.get(k, [])) for k in plan}
    open_ = [k for k, p in plan.items() if p["provisional"] and not p["routed"]]
    known = [k for k in open_ if plan[k]["status"] == "known"]
    out = {k: {"evidence": "none", "certified": False, "routed": plan[k]["routed"] or "nothing_provisional"}
           for k in plan if k not in open_}
    if any(waiting[k] for k in known):
        out.update({k: {"waiting": sum(waiting[j] for j in known)} for k in known})
    elif known:
        def errs(k: str) -> int:
            return sum(map(_wrong, audits.get(k, [])))

        # each known stratum against the references, Bonferroni over them: with four strata each at 0.2, an alike
        # version lost one good stratum to a false alarm in more than half of the benchmark's audit draws
        contradicting = [k for k in known if reference is not None and consistency_pvalue(
            errs(k), len(audits.get(k, [])), reference[1], reference[0]) < CONSISTENCY_ALPHA / len(known)]
        group = [k for k in known if k not in contradicting]
        if group:
            verdict = _certify_audits([r for k in group for r in audits.get(k, [])], threshold, reference, target,
                                      confidence)
            out.update({k: {**verdict, "group": len(group), "group_audit_n": verdict["audit_n"],
                            "group_audit_errors": verdict["audit_errors"], "audit_n": len(audits.get(k, [])),
                            "audit_errors": errs(k)} for k in group})
        out.update({k: {**_certify_audits(audits.get(k, []), threshold, None, target, confidence),
                        "contradicts_references": True} for k in contradicting})
    for k in open_:
        if k not in known:
            out[k] = {"waiting": waiting[k]} if waiting[k] else \
                _certify_audits(audits.get(k, []), threshold, None, target, confidence)
    return out


def _certify_audits(audited: list[dict], threshold: float, reference, target: float, confidence: float) -> dict:
    """``calibration.certify_stratum`` of answered audit rows: pooled with ``reference`` when given (a known group),
    on the audit alone otherwise."""
    return certify_stratum([_confidence(r) for r in audited], [_wrong(r) for r in audited], threshold, reference,
                           known=reference is not None, target=target, confidence=confidence,
                           consistency_alpha=CONSISTENCY_ALPHA)


def apply_certification(rows: list[dict], verdicts: dict[str, dict]) -> list[dict]:
    """Provisional rows of decided strata become ``auto`` (certified, at or above the stratum's threshold) or
    ``human`` (routed: ``reason`` says why); the rest stay as they are."""
    out = []
    for row in rows:
        verdict = verdicts.get(row.get("stratum"))
        if row.get("decision") != "provisional" or verdict is None or "waiting" in verdict:
            out.append(row)
            continue
        row = dict(row)
        if verdict["certified"] and _confidence(row) >= verdict["threshold"]:
            row.update(decision="auto", certified_by=verdict["evidence"])
        else:
            why = "below_stratum_threshold" if verdict["certified"] else "uncertified"
            row.update(decision="human", reason=why, certified_by=None)
            if row.get("label_source") != "human":
                row.update(outcome=None, marker_s=None, failure_mode=None, label_source=None)
        out.append(row)
    return out


def certify(labels_dir: str | os.PathLike, video_url_prefix: str | None = None) -> dict:
    """Decide every stratum whose audit is answered, rewrite ``labels.jsonl``, the human queue and ``summary.json``;
    returns the certification (``summary["certification"]``). Idempotent (see the module docstring)."""
    folder = LabelsFolder(labels_dir)
    folder.check_finished(" (finish it with `autorater label --resume` first)")
    with folder.lock("labelling, ingest or certify job"):
        job, rows = folder.read_finished()
        summary = folder.read_summary()
        cert = summary.get("certification")
        if not cert or cert.get("evidence") != "audit":
            raise LabelJobError(f"{folder.root} was labelled without an audit to certify (its labels "
                                f"{'carry the references promise' if cert else 'predate certification'}); "
                                f"label the version again with `autorater label` to certify it on its own audit")
        if cert.get("state") == "none":  # nothing was auto-labelled: nothing to certify
            return cert
        verdicts = decide_strata(rows, cert["strata"], cert["operating_point"])
        labelled = apply_certification(rows, verdicts)
        suite = Suite.load(job["suite"])
        queue = [r for r in labelled if r.get("label_source") != "human"
                 and (r["decision"] == "human" or (r.get("audit") and r["decision"] == "provisional"))]
        round_no = folder.write_queue_round(suite, queue, video_url_prefix)
        cert = {**cert, "round": round_no, **_promise(labelled, verdicts, cert)}
        summary.update(certification=cert, **counts(labelled))
        folder.write_labels(labelled)
        folder.write_summary(summary)
        return cert


def counts(rows: list[dict]) -> dict:
    """The summary's counts of a labels folder's rows (auto, provisional, human, coverage)."""
    n = max(len(rows), 1)
    auto = sum(r["decision"] == "auto" for r in rows)
    provisional = sum(r["decision"] == "provisional" for r in rows)
    return {"auto": auto, "provisional": provisional, "human": len(rows) - auto - provisional,
            "coverage": auto / n, "audit": sum(bool(r.get("audit")) for r in rows),
            "reasons": {k: sum(r.get("reason") == k for r in rows if r["decision"] == "human")
                        for k in sorted({r["reason"] for r in rows if r["decision"] == "human" and "reason" in r})}}


def _promise(rows: list[dict], verdicts: dict, cert: dict) -> dict:
    """What the version's auto-labels are promised, per stratum and in all."""
    strata = {}
    for key, plan in cert["strata"].items():
        v = verdicts.get(key, {})
        strata[key] = {**plan, **{k: v[k] for k in ("evidence", "certified", "threshold", "bound", "audit_n",
                                                    "audit_errors", "consistency_p", "audits_needed", "waiting",
                                                    "group", "group_audit_n", "group_audit_errors",
                                                    "contradicts_references") if k in v},
                       "auto": sum(r["decision"] == "auto" and r.get("stratum") == key for r in rows)}
    certified = [s for s in strata.values() if s.get("certified")]
    waiting = sum(s.get("waiting", 0) for s in strata.values())
    state = "waiting" if waiting else "certified"
    op = cert["operating_point"]
    lines = {"waiting": f"{waiting} audit labels are still unanswered: auto-labels stay provisional until "
                        f"`autorater ingest` brings them and `autorater certify` runs again",
             "certified": (f"each certified stratum's auto-labels agree with the annotators at >= "
                           f"{op['target_agreement']} with {op['confidence']:.0%} confidence, shown on this "
                           f"version's own audit; {len(certified)} of {len(strata)} strata certified"
                           if certified else "no stratum could be certified: every continuation goes to humans")}
    return {"state": state, "promise": lines[state], "strata": strata,
            "bound": min((s["bound"] for s in certified), default=None),
            "human_labels_audit": sum(s.get("audit", 0) for s in strata.values())}


def format_certification(cert: dict) -> str:
    """A few lines for the terminal: the promise, then one line per stratum."""
    lines = [f"certification (round {cert.get('round', 0)}): {cert['promise']}"]
    for key, s in sorted(cert["strata"].items()):
        if "waiting" in s:
            what = f"waiting for {s['waiting']} audit labels"
        elif s.get("certified"):
            group = (f"; with the {s['group']} known strata: {s['group_audit_errors']} wrong of {s['group_audit_n']}"
                     if s.get("group") else "")
            what = (f"certified on {s['evidence']} evidence: {s['auto']} auto-labelled at agreement >= "
                    f"{s['bound']:.3f} ({s['audit_errors']} wrong of {s['audit_n']} audited{group})")
        elif s.get("routed"):
            what = f"routed to humans ({s['routed']}; {s['status']} stratum)"
        else:
            what = (f"NOT certified ({s.get('audit_errors', 0)} wrong of {s.get('audit_n', 0)} audited"
                    + ("; it contradicts the references" if s.get("contradicts_references") else "") + "; "
                    f"{s.get('audits_needed', '?')} more agreeing audits would certify it): sent to humans")
        lines.append(f"  {key} [{s['status']}, {s['provisional']} provisional]: {what}")
    return "\n".join(lines)


__all__ = ["STRATA", "STRATUM_FIELDS", "apply_certification", "certify", "counts", "decide_strata",
           "format_certification", "input_drift", "parse_strata", "plan_audit", "stratum_fields", "stratum_key"]
