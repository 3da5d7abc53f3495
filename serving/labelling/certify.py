"""``autorater certify``: each suite version certified on its own audit, stratum by stratum, round by round.

The references' promise holds for episodes like the references; a new version brings new tasks, cameras and agents.
So ``autorater label`` leaves its auto-labels *provisional* and plans an audit of each stratum
(``serving.labelling.strata``); then, round after round:

1. the annotators answer the queue (``labelstudio/tasks.json``: the uncertain continuations and the audit's batch);
2. ``autorater ingest`` takes their labels back;
3. ``autorater certify`` (:func:`certify`) updates each stratum's anytime-valid test on its answered audit
   (``calibration.certify_strata``, the decision the simulations run) and decides: **certified** (its provisional
   labels at its level become ``auto``), **routed** (to humans: the audit shows the stratum below target, or it
   cannot pass within its size, or the audit budget is spent), or **continue** (the next batch of its audit joins a
   new Label Studio round). Strata whose asked labels are not all answered wait.

The claim (``--claim``, fixed when the version is labelled): ``family`` (every certified stratum at once, with the
calibration's confidence) or ``fcr`` (the expected share of certified strata below target at most ``1 -
confidence``). The references design each audit but are never counted as evidence.

Everything is recomputed from ``labels.jsonl`` and the label-time plan in ``summary.json`` at every run: a stratum's
decision never outlives its evidence (a certificate whose audit answers were corrected is withdrawn, its continuations
go to humans and the summary says so), a crash is finished by the next run, and a run with nothing new changes
nothing. Rows whose ``decision`` the product did not write are refused.

Example:
    >>> cert = certify("labels-v3")                                   # doctest: +SKIP
    >>> cert["claim"], cert["strata"]["category=drawer-open-v3|camera=corner"]["state"]   # doctest: +SKIP
"""

from __future__ import annotations

import os

from autorater.calibration import AuditDesign, StratumAudit, Verdict, certify_strata
from autorater.data.suite import Suite
from autorater.serving.labelling.folder import LabelJobError, LabelsFolder

DECISIONS = ("auto", "provisional", "human")


def _confidence(row: dict) -> float:
    p = float(row["p_success"])
    return max(p, 1 - p)


def stratum_audits(rows: list[dict], plan: dict[str, dict]) -> dict[str, StratumAudit]:
    """Each audited stratum's audit as the rows hold it: the design from the plan, the labels asked for (one past the
    highest audit rank asked) and the answers in audit order (True: the model agreed with the humans) up to the first
    one not yet answered."""
    by_rank: dict[str, dict[int, dict]] = {}
    for r in rows:
        if r.get("audit_rank") is not None and r.get("audit"):
            by_rank.setdefault(r["stratum"], {})[int(r["audit_rank"])] = r
    audits = {}
    for key, p in plan.items():
        if p.get("design") is None:
            continue
        asked = by_rank.get(key, {})
        answers = []
        for rank in range(len(asked)):
            row = asked.get(rank)
            if row is None or row.get("label_source") != "human" or row.get("human_outcome") is None:
                break
            answers.append(row["model_outcome"] == row["human_outcome"])
        audits[key] = StratumAudit(AuditDesign.from_dict(p["design"]), max(asked, default=-1) + 1, tuple(answers))
    return audits


def check_rows(rows: list[dict], plan: dict[str, dict], before: dict[str, dict]) -> None:
    """Refuse rows whose ``decision`` the product did not write (LabelJobError naming the line): an unknown decision,
    an auto or provisional label outside any stratum's audited level, an auto label in a stratum no earlier run
    certified."""
    for line, r in enumerate(rows, 1):
        decision, key = r.get("decision"), r.get("stratum")
        where = f"labels.jsonl line {line} ({r.get('continuation_id')!r})"
        if decision not in DECISIONS:
            raise LabelJobError(f"{where}: decision {decision!r} is not one of {DECISIONS}; the product did not write "
                                f"it (fix: restore labels.jsonl from `autorater label`, or label the version again)")
        if decision in ("auto", "provisional") and (r.get("audit_rank") is None or key not in plan):
            raise LabelJobError(f"{where}: decision {decision!r} outside any audited stratum level; the product did "
                                f"not write it (fix: restore labels.jsonl, or label the version again)")
        if decision == "auto" and (before.get(key) or {}).get("state") != "certified":
            raise LabelJobError(f"{where}: decision 'auto' in stratum {key!r}, which no run of `autorater certify` "
                                f"certified; the product did not write it (fix: restore labels.jsonl, or label the "
                                f"version again)")


def apply_verdicts(rows: list[dict], verdicts: dict[str, Verdict]) -> list[dict]:
    """Every row at an audited level, decided again from its stratum's verdict: certified -> ``auto`` (an unanswered
    audit label leaves the audit: the model's label stands), continue -> ``provisional`` with the audit asked up to
    the new length, waiting -> unchanged, routed or revoked -> ``human`` (``reason``)."""
    out = []
    for row in rows:
        v = verdicts.get(row.get("stratum"))
        if row.get("audit_rank") is None or v is None:
            out.append(row)
            continue
        row = {k: val for k, val in row.items() if k not in ("reason", "certified_by")}
        human = row.get("label_source") == "human"
        if v.state == "certified":
            row.update(decision="auto", certified_by="audit", audit=bool(row.get("audit")) and human)
            if not human:
                row.update(outcome=row["model_outcome"], marker_s=row["model_marker_s"],
                           failure_mode=row["model_failure_mode"], label_source="model")
        elif v.state == "routed":
            row.update(decision="human", reason=v.reason)
            if not human:
                row.update(outcome=None, marker_s=None, failure_mode=None, label_source=None)
        else:
            row.update(decision="provisional", audit=int(row["audit_rank"]) < v.requested)
            if not human:
                row.update(outcome=row["model_outcome"], marker_s=row["model_marker_s"],
                           failure_mode=row["model_failure_mode"], label_source="provisional")
        out.append(row)
    return out


def certify(labels_dir: str | os.PathLike, video_url_prefix: str | None = None) -> dict:
    """Decide every audited stratum again, rewrite ``labels.jsonl``, the human queue and the summary's
    ``certification``; returns it. Idempotent (see the module docstring)."""
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
        if "plan" not in cert:
            raise LabelJobError(f"{folder.root} was labelled by an autorater before sequential audits (its summary "
                                f"has no audit plan); label the version again with `autorater label`")
        plan, op = cert["plan"], cert["operating_point"]
        check_rows(rows, plan, cert.get("strata") or {})
        verdicts = certify_strata(stratum_audits(rows, plan), op["target_agreement"], 1 - op["confidence"],
                                  cert["claim"], cert.get("audit_budget"))
        revoked = {key: v for key, v in verdicts.items() if v.state != "certified"
                   and (cert.get("strata") or {}).get(key, {}).get("state") == "certified"}
        verdicts.update({key: Verdict("routed", v.requested, v.evidence, v.e_value, v.against, v.threshold,
                                      v.estimate, reason="revoked") for key, v in revoked.items()})
        labelled = apply_verdicts(rows, verdicts)
        suite = Suite.load(job["suite"])
        queue = [r for r in labelled if r.get("label_source") != "human"
                 and (r["decision"] == "human" or (r.get("audit") and r["decision"] == "provisional"))]
        round_no = folder.write_queue_round(suite, queue, video_url_prefix)
        cert = certification(cert, plan, verdicts, labelled, round_no, sorted(revoked))
        summary.update(certification=cert, **counts(labelled))
        folder.write_labels(labelled)
        folder.write_summary(summary)
        return cert


def counts(rows: list[dict]) -> dict:
    """The summary's counts of a labels folder's rows (auto, provisional, human, coverage, audit, reasons)."""
    n = max(len(rows), 1)
    auto = sum(r["decision"] == "auto" for r in rows)
    provisional = sum(r["decision"] == "provisional" for r in rows)
    return {"auto": auto, "provisional": provisional, "human": len(rows) - auto - provisional,
            "coverage": auto / n, "audit": sum(bool(r.get("audit")) for r in rows),
            "reasons": {k: sum(r.get("reason") == k for r in rows if r["decision"] == "human")
                        for k in sorted({r["reason"] for r in rows if r["decision"] == "human" and "reason" in r})}}


def promise_line(claim: str, target: float, confidence: float, certified: int, strata: int) -> str:
    """The sentence a team lead reads: what every certified stratum is promised, and the claim across strata."""
    if not certified:
        return f"no stratum certified yet: no auto-label stands (0 of {strata} strata)"
    across = (f"every one of them at once with {confidence:.0%} confidence (family-wise)" if claim == "family" else
              f"on average at most {1 - confidence:.0%} of the certified strata fall below it (false certification "
              f"rate)")
    return (f"each certified stratum's auto-labels agree with the annotators at a rate >= {target}, {across}, shown "
            f"on this version's own audit alone; {certified} of {strata} strata certified")


def certification(cert: dict, plan: dict, verdicts: dict[str, Verdict], rows: list[dict], round_no: int,
                  revoked: list[str]) -> dict:
    """The summary's ``certification``, built afresh from the label-time plan and this run's verdicts (no field of an
    earlier run survives)."""
    strata = {}
    for key, p in plan.items():
        v = verdicts.get(key)
        mine = [r for r in rows if r.get("stratum") == key]
        strata[key] = {**p, "state": "routed" if v is None else v.state,
                       "reason": p.get("routed") if v is None else v.reason,
                       **({} if v is None else {"evidence": v.evidence, "e_value": v.e_value, "threshold": v.threshold,
                                                "against": v.against, "estimate": v.estimate,
                                                "audit_asked": v.requested}),
                       "audit_answered": sum(r.get("audit_rank") is not None and r.get("label_source") == "human"
                                             and bool(r.get("audit")) for r in mine),
                       "auto": sum(r["decision"] == "auto" and r.get("label_source") != "human" for r in mine)}
    pending = [k for k, s in strata.items() if s["state"] in ("continue", "waiting")]
    op = cert["operating_point"]
    certified = sum(s["state"] == "certified" for s in strata.values())
    audited = sum(p.get("design") is not None for p in plan.values())
    line = promise_line(cert["claim"], op["target_agreement"], op["confidence"], certified, audited)
    if pending:
        line += (f"; {len(pending)} strata still audited: answer the new round (labelstudio/tasks.json), "
                 f"`autorater ingest` it, then `autorater certify` again")
    keep = ("evidence", "claim", "audit_budget", "strata_by", "operating_point", "plan")
    return {**{k: cert[k] for k in keep if k in cert}, "state": "waiting" if pending else "final", "round": round_no,
            "promise": line, "strata": strata, "revoked": revoked,
            "human_labels_audit": sum(s["audit_answered"] for s in strata.values())}


def format_certification(cert: dict) -> str:
    """A few lines for the terminal: the promise, then one line per stratum."""
    lines = [f"certification (round {cert.get('round', 0)}, claim {cert.get('claim', '-')}): {cert['promise']}"]
    for key, s in sorted(cert["strata"].items()):
        design = s.get("design") or {}
        level = f" at confidence >= {design['level']:.3f}" if design else ""
        evidence = (f"evidence {s['evidence']:.3g} of {s['threshold']:.3g} needed, agreement {s['estimate']:.3f} on "
                    f"{s['audit_answered']} audit labels" if s.get("estimate") is not None else "no audit answer yet")
        what = {"certified": f"certified{level}: {s.get('auto', 0)} auto-labelled, {s['audit_answered']} by the "
                             f"audit's humans ({evidence})",
                "continue": f"audit goes on{level}: {s.get('audit_asked')} audit labels asked ({evidence})",
                "waiting": f"waiting for audit answers{level} ({evidence})",
                "routed": f"routed to humans ({s.get('reason')}{'; ' + evidence if s.get('estimate') else ''})"}
        lines.append(f"  {key} [{s['status']}, {s['provisional']} provisional]: {what[s['state']]}")
    if cert.get("revoked"):
        lines.append(f"  REVOKED (their audit answers no longer support the certificate; sent to humans): "
                     f"{', '.join(cert['revoked'])}")
    return "\n".join(lines)


__all__ = ["apply_verdicts", "certify", "certification", "check_rows", "counts", "format_certification",
           "promise_line", "stratum_audits"]
