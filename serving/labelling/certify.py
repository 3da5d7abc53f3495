"""``autorater certify``: each suite version certified on its own audit, stratum by stratum, round by round, and the
strata its model fails handed to version challengers that learn from the version's own labels.

``autorater label`` leaves its auto-labels *provisional*, plans an audit of each stratum and seals the plan
(``plan.json``); then, round after round:

1. the annotators answer the queue (``labelstudio/tasks.json``: audit items, learning batches, continuations only
   humans can label);
2. ``autorater ingest`` takes their labels back (the ingest history);
3. ``autorater certify`` (:func:`certify`) decides every stratum again (``serving.labelling.rounds.decide``, the
   decision the simulations run): **certified** (its current model's auto-labels stand), **audit goes on**, **learning**
   (its model was routed and a version challenger may follow: a learning batch is asked; once answered, the challenger
   is trained on the version's human labels, ``serving.labelling.adapt``, rates the stratum's unlabelled continuations
   and its own audit is committed) or **routed** (to humans, for good).

The claim (``--claim``, fixed when the version is labelled): ``family`` (every certified stratum at once, with the
calibration's confidence) or ``fcr`` (the expected share of certified strata below target at most ``1 -
confidence``). Each stratum's budget is split in advance across its successive models. The references design the
first model's audit, a challenger's held-out labels design its own; neither is ever evidence.

**What certify reads is the product's.** The plan is ``plan.json``, checked against its seal and recomputed from the
part files and the model's ``calibration.json`` (a plan edited into a certificate is refused naming the field); the
human answers come from the ingest history only, never from ``labels.jsonl``; the journal (``rounds.jsonl``) is a hash
chain. ``labels.jsonl``, the queue and ``summary.json`` are derived and rewritten every run (``version.py``): a run
with nothing new changes nothing, a run killed at any point is finished identically by the next, and a withdrawn
certificate stays in the journal with its date.

Example:
    >>> cert = certify("labels-v3")                                   # doctest: +SKIP
    >>> cert["claim"], cert["strata"]["category=drawer-open-v3|camera=corner"]["state"]   # doctest: +SKIP
"""

from __future__ import annotations

import math
import os

from autorater.data.suite import Suite
from autorater.device import DEFAULT_DEVICE
from autorater.serving.fields import utc_now
from autorater.serving.labelling import ledger
from autorater.serving.labelling.folder import LabelJobError, LabelsFileError, LabelsFolder
from autorater.serving.labelling.rounds import decide
from autorater.serving.labelling.version import (
    VersionState,
    chained,
    check_chain,
    counts,
    derive_rows,
    human_majority,
    rules_of,
)

DECISIONS = ("auto", "provisional", "human")


def base_rows(folder: LabelsFolder, job: dict) -> list[dict]:
    """The labelling job's model's rows, one per continuation, from its part files (what it rated, as it rated it)."""
    n = math.ceil(job["continuations"] / job["batch_size"]) if job["continuations"] else 0
    return [r for k in range(n) for r in folder.read_part(k)]


def human_labels(folder: LabelsFolder, suite: Suite, plan: dict) -> tuple[dict[str, list[dict]], dict[str, dict]]:
    """The version's human labels: the ingest history's, and the suite's own for continuations the plan left out as
    human-labelled. (continuation id -> label rows, continuation id -> majority.)"""
    rows: dict[str, list[dict]] = {}
    for r in folder.human_labels().rebuild():
        rows.setdefault(r["continuation_id"], []).append(r)
    prior = {cid for cid, why in (plan.get("excluded") or {}).items() if why == "human_labelled"}
    for a in suite.annotations:
        if a.continuation_id in prior and a.continuation_id not in rows:
            rows.setdefault(a.continuation_id, []).append(
                {"continuation_id": a.continuation_id, "annotator_id": a.annotator_id, "outcome": a.outcome,
                 "marker_s": a.marker_s, "failure_mode": a.failure_mode, "source": a.source})
    return rows, human_majority([r for v in rows.values() for r in v])


def blind_answers(folder: LabelsFolder) -> dict[str, str]:
    """Each continuation's blind answer: the majority of the labels the first ingest that brought any of its labels
    brought (events of one write share their time), before any later answer (a correction, a re-ask) could change it."""
    first: dict[str, tuple[str, list[dict]]] = {}
    for event in folder.human_labels().events():
        row = event.get("row")
        if event.get("action") not in ("add", "adopt") or not isinstance(row, dict):
            continue
        cid, stamp = row.get("continuation_id"), str(event.get("received_at"))
        batch = first.setdefault(cid, (stamp, []))
        if batch[0] == stamp:
            batch[1].append(row)
    return {cid: h["outcome"] for cid, h in human_majority([r for _, rows in first.values() for r in rows]).items()}


def _read_plan(folder: LabelsFolder, job: dict, summary: dict) -> dict:
    cert = summary.get("certification")
    if not cert or cert.get("evidence") != "audit":
        raise LabelJobError(f"{folder.root} was labelled without an audit to certify (its labels "
                            f"{'carry the references promise' if cert else 'predate certification'}); "
                            f"label the version again with `autorater label` to certify it on its own audit")
    return folder.read_plan(job)


def load_version(folder: LabelsFolder, job: dict, plan: dict, suite: Suite | None = None,
                 verify: bool = True) -> tuple[VersionState, list[dict]]:
    """The version's state and its base rows, every input checked: the plan recomputed from the part files (when the
    model folder is still there), the journal's chain."""
    base = base_rows(folder, job)
    if verify:
        from autorater.serving.labelling.label import verify_plan

        verify_plan(folder, job, plan, base, suite or Suite.load(job["suite"]))
    records = folder.read_journal()
    broken = check_chain(records)
    if broken is not None:
        raise LabelsFileError(folder.journal, broken, "breaks the journal's hash chain (a record was edited, dropped "
                                                      "or moved after certify wrote it)")
    return VersionState.fold(plan, records), base


def certify(labels_dir: str | os.PathLike, video_url_prefix: str | None = None, *, adapt: bool = True,
            device: str = DEFAULT_DEVICE, tracking_uri: str | None = None, progress: bool = False) -> dict:
    """Decide every stratum again, train a version challenger where a stratum's learning labels are in (``adapt``),
    rewrite ``labels.jsonl``, the human queue and the summary's ``certification``; returns it. Idempotent (see the
    module docstring).

    Args:
        labels_dir: a labels folder written by ``autorater label``.
        video_url_prefix: how Label Studio reaches the videos (the queue's tasks).
        adapt: train the challengers the plan allows (False: strata whose learning labels are in wait).
        device: where a challenger trains and rates.
        tracking_uri: the MLflow store a challenger is registered in (None: not registered).
        progress: progress bars while a challenger trains.
    """
    folder = LabelsFolder(labels_dir)
    folder.check_finished(" (finish it with `autorater label --resume` first)")
    with folder.lock("labelling, ingest or certify job"):
        job, summary = folder.read_job(), folder.read_summary()
        cert = summary.get("certification") or {}
        if cert.get("state") == "none" and cert.get("evidence") == "audit":  # nothing auto-labelled: nothing to
            rows = folder.read_labels()  # certify; the queue is what still waits for a human label, every run
            folder.write_queue_round(Suite.load(job["suite"]), [r for r in rows if r.get("label_source") != "human"],
                                     video_url_prefix)
            folder.write_summary({**summary, **counts(rows)})
            return cert
        plan = _read_plan(folder, job, summary)
        suite = Suite.load(job["suite"])
        by = ledger.superseded_by(suite.root, job.get("job_id") or "")
        if by is not None:
            raise LabelJobError(f"{folder.root}: this labelling job was superseded by the job in {by} before any audit "
                                f"answer reached it; certify that folder instead")
        state, base = load_version(folder, job, plan, suite)
        rows_by_id, human = human_labels(folder, suite, plan)
        at = utc_now().isoformat()
        rnd = decide(state.states, state.current(), state.first, {c: h["outcome"] for c, h in human.items()},
                     rules_of(plan), _strata_ids(plan), _categories(suite), run=state.runs + 1, at=at,
                     blind=blind_answers(folder))
        record = state.round_record(rnd, at, sum(len(v) for v in rows_by_id.values()))
        if record is not None:
            folder.append_journal(record)
            state.append(record)
        if state.first:
            ledger.record_evidence(suite.root, job.get("job_id") or "")
        trained = None
        if rnd.ready and adapt:
            logits = {r["continuation_id"]: r["logit"] for r in base if "logit" in r}
            trained = _adapt(folder, job, state, rows_by_id, human, suite, rnd.ready, logits, device, tracking_uri,
                             progress)
        return _write_outputs(folder, suite, state, base, human, summary, video_url_prefix, trained)


def _strata_ids(plan: dict) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {k: [] for k in plan["strata"]}
    errors = set(plan.get("errors") or [])
    for cid, key in plan["stratum_of"].items():
        if cid not in errors and (plan.get("excluded") or {}).get(cid) in (None, "human_labelled"):
            out.setdefault(key, []).append(cid)
    return out


def _categories(suite: Suite) -> dict[str, str]:
    return {c.continuation_id: suite.scenario_by_id[c.scenario_id].category for c in suite.continuations}


def _adapt(folder: LabelsFolder, job: dict, state: VersionState, rows_by_id: dict, human: dict, suite: Suite,
           ready: list[str], logits: dict, device: str, tracking_uri: str | None, progress: bool) -> dict:
    """Train the next challenger for the ready strata and commit its plans to the journal."""
    from autorater.serving.labelling.adapt import train_challenger

    k = len(state.challengers) + 1
    ch = train_challenger(folder.root / "models", k, state, rules_of(state.plan), rows_by_id, human, suite, ready,
                          job=job, parent_logits=logits, device=device, tracking_uri=tracking_uri, progress=progress)
    record = chained(state.records, {
        "kind": "commit", "k": k, "name": ch.name, "folder": str(ch.folder.relative_to(folder.root)),
        "at": utc_now().isoformat(), "plans": [p.to_dict() for p in ch.plans], "learned": len(ch.learned),
        "train_s": round(ch.train_s, 1), "rate_s": round(ch.rate_s, 1), "mlflow_run": ch.run_id,
        "registered_version": ch.registered_version, "strata": list(ready)})
    folder.append_journal(record)
    state.append(record)
    return record


def _ratings(folder: LabelsFolder, state: VersionState) -> dict[str, dict[str, dict]]:
    from autorater.serving.labelling.folder import read_jsonl_rows

    out = {}
    for c in state.challengers:
        path = folder.root / c["folder"] / "ratings.jsonl"
        if not path.is_file():
            raise LabelsFileError(path, None, f"is missing: challenger {c['name']} was committed with its ratings")
        for r in read_jsonl_rows(path):  # by the name of the model that rated it (a candidate's)
            out.setdefault(r["model"], {})[r["continuation_id"]] = r
    return out


def _write_outputs(folder: LabelsFolder, suite: Suite, state: VersionState, base: list[dict], human: dict,
                   summary: dict, video_url_prefix: str | None, trained: dict | None) -> dict:
    """``labels.jsonl``, the queue (every run) and the summary, derived from the state."""
    rows, queue = derive_rows(base, state, _ratings(folder, state), human)
    round_no = folder.write_queue_round(suite, queue, video_url_prefix)
    cert = certification(state, rows, round_no, summary.get("certification") or {})
    summary.update(certification=cert, **counts(rows))
    folder.write_labels(rows)
    folder.write_summary(summary)
    return cert


def promise_line(claim: str, target: float, confidence: float, certified: int, strata: int) -> str:
    """The sentence a team lead reads: what every certified stratum is promised, and the claim across strata."""
    if not certified:
        return f"no stratum certified yet: no auto-label stands (0 of {strata} strata)"
    across = (f"every one of them at once with {confidence:.0%} confidence (family-wise)" if claim == "family" else
              f"on average at most {1 - confidence:.0%} of the certified strata fall below it (false certification "
              f"rate)")
    return (f"each certified stratum's auto-labels agree with the annotators at a rate >= {target}, {across}, shown "
            f"on this version's own audit alone (each audit item's first answer, lowered by any correction); "
            f"{certified} of {strata} strata certified")


def _models_tried(state: VersionState, key: str, rows: list[dict]) -> list[dict]:
    """Each model a stratum tried: its name, budget share and level, the audit it asked and had answered, the
    learning labels it learned from (a challenger), its last verdict."""
    st, out, models = state.states[key], [], state.models.get(key, [])
    for m in models:
        later = {c for n in models[m.index + 1:] for c in (*n.order, *n.rest)}  # a later model's population
        asked = st.requested if m.index == st.model else len(m.order)
        answered = sum(c in state.first and c not in later for c in m.order[:asked])
        entry = {"model": m.name, "index": m.index, "weight": None if m.design is None else m.design.weight,
                 "alpha": None if m.design is None else m.design.alpha,
                 "level": None if m.design is None else m.design.level, "provisional": len(m.order),
                 "audit_answered": answered, "learned": len(m.learned)}
        if m.index == st.model:
            entry.update(state=st.state, verdict=st.verdict)
        out.append(entry)
    return out


def certification(state: VersionState, rows: list[dict], round_no: int, before: dict) -> dict:
    """The summary's ``certification``, built afresh from the state (no field of an earlier run survives)."""
    plan = state.plan
    strata = {}
    for key, p in plan["strata"].items():
        st = state.states[key]
        mine = [r for r in rows if r.get("stratum") == key]
        v = st.verdict or {}
        strata[key] = {k: p.get(k) for k in ("continuations", "provisional", "status", "drift", "routed", "design",
                                            "budget", "weights")}
        strata[key].update(
            state={"audit": "continue"}.get(st.state, st.state), reason=st.reason, model=_model_name(state, key),
            models=_models_tried(state, key, rows), learning_asked=len(st.learning),
            evidence=v.get("evidence"), e_value=v.get("e_value"), threshold=v.get("threshold"),
            against=v.get("against"), estimate=v.get("estimate"), audit_asked=st.requested,
            audit_answered=sum(c in state.first for c in {c for m in state.models.get(key, []) for c in m.order}),
            human_labels=sum(r.get("label_source") == "human" for r in mine),
            auto=sum(r["decision"] == "auto" and r.get("label_source") != "human" for r in mine),
            withdrawable_by=_withdrawable_by(state, key) if st.state == "certified" else None,
            revoked=list(st.revoked))
    pending = [k for k, s in strata.items() if s["state"] in ("continue", "waiting", "learning")]
    certified = sum(s["state"] == "certified" for s in strata.values())
    line = promise_line(plan["claim"], plan["target"], plan["confidence"], certified, len(strata))
    if pending:
        line += (f"; {len(pending)} strata still audited or learning: answer the new round (labelstudio/tasks.json), "
                 f"`autorater ingest` it, then `autorater certify` again")
    revoked = [{"stratum": k, **r} for k, s in state.states.items() for r in s.revoked]
    return {"evidence": "audit", "claim": plan["claim"], "audit_budget": plan.get("audit_budget"),
            "strata_by": plan.get("strata_by"), "operating_point": before.get("operating_point"),
            "adapt": plan.get("adapt"), "state": "waiting" if pending else "final", "round": round_no,
            "promise": line, "strata": strata, "revoked": revoked,
            "challengers": [{k: c.get(k) for k in ("k", "name", "folder", "at", "learned", "train_s", "rate_s",
                                                   "strata", "mlflow_run", "registered_version")}
                            for c in state.challengers],
            "human_labels_audit": sum(s["audit_answered"] for s in strata.values())}


def _model_name(state: VersionState, key: str) -> str | None:
    models, st = state.models.get(key, []), state.states[key]
    return models[st.model].name if st.model < len(models) else None


def _withdrawable_by(state: VersionState, key: str) -> int | None:
    """How many of a certificate's agreeing audit answers, corrected to disagreements, would withdraw it (the latest
    first, the fewest that do; None when no correction can)."""
    from autorater.calibration import StratumAudit, audit_step

    st, m = state.states[key], state.models[key][state.states[key].model]
    if m.design is None:
        return None
    answers = [m.said[i] == state.first.get(c) for i, c in enumerate(m.order[:st.used])]
    agreeing = [i for i, a in enumerate(answers) if a]
    threshold = None if state.plan["claim"] == "family" else (st.verdict or {}).get("threshold")
    for n in range(1, len(agreeing) + 1):
        flipped = list(answers)
        for i in agreeing[:n]:  # the earliest answers move the test most
            flipped[i] = False
        v = audit_step(StratumAudit(m.design, st.requested, tuple(flipped)), state.plan["target"],
                       threshold=threshold, stopped=state.plan["claim"] != "family")
        if v.state != "certified":
            return n
    return None


def format_certification(cert: dict) -> str:
    """A few lines for the terminal: the promise, then one line per stratum (its models, what they cost)."""
    lines = [f"certification (round {cert.get('round', 0)}, claim {cert.get('claim', '-')}): {cert['promise']}"]
    for key, s in sorted(cert["strata"].items()):
        lines.append(f"  {key} [{s['status']}, {s['continuations']} continuations]: {_stratum_line(s)}")
        for m in s.get("models") or []:
            if m["index"] > 0 or len(s["models"]) > 1:
                lines.append(f"      model {m['index']} {m['model']}: learned from {m['learned']} labels, "
                             f"{m['provisional']} at its level, {m['audit_answered']} audit answers"
                             + (f", budget share {m['weight']:.3g}" if m.get("weight") else ""))
    for r in cert.get("revoked") or []:
        lines.append(f"  WITHDRAWN {r['stratum']} (model {r['model']}) at run {r['run']}, {r['at']}: its audit "
                     f"answers, corrected, no longer support it; its labels went to humans")
    return "\n".join(lines)


def _stratum_line(s: dict) -> str:
    design = s.get("design") or {}
    level = f" at confidence >= {design['level']:.3f}" if design else ""
    evidence = (f"evidence {s['evidence']:.3g} of {s['threshold']:.3g} needed, agreement {s['estimate']:.3f}"
                if s.get("estimate") is not None else "no audit answer yet")
    fragile = f"; {s['withdrawable_by']} corrected answers would withdraw it" if s.get("withdrawable_by") else ""
    return {"certified": f"certified ({s['model']}): {s['auto']} auto-labelled, {s['human_labels']} human labels "
                         f"({evidence}){fragile}",
            "continue": f"audit goes on ({s['model']}){level}: {s['audit_asked']} audit labels asked ({evidence})",
            "learning": f"learning: {s['learning_asked']} labels asked for a version challenger "
                        f"(its model {s['model']} was routed: {s.get('reason')})",
            "routed": f"routed to humans ({s.get('reason')}); {s['human_labels']} human labels so far"}.get(
        s["state"], s["state"])


__all__ = ["base_rows", "certification", "certify", "counts", "format_certification", "human_labels",
           "load_version", "promise_line"]
