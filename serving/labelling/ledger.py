"""A suite version's labelling jobs, recorded in the suite itself: labelling a version again cannot re-draw a verdict.

A certificate is a test of one committed plan on answers given blind. Labelled again (the same version, or a grown one
that keeps its ids) after a model learned the first audit's answers, or simply until one job certifies, a version would
re-draw its verdict: a stratum whose auto-labels agree at 0.88 was certified against 0.90 in 96% of draws that way. So
every labelling job is written into the suite's ``labelling_jobs.jsonl`` (one JSON event a line, appended under the
suite's lock):

    {"event": "planned", "job_id": "9f2c...", "folder": "/abs/labels-v3", "at": "...", "ids": ["c000001", ...]}
    {"event": "evidence", "job_id": "9f2c...", "at": "..."}      # certify saw the job's first audit answer
    {"event": "superseded", "job_id": "9f2c...", "by": "41ab...", "at": "..."}

**The first verdict binds.** Once a job has evidence (any audit answer), its continuations are *bound*: a later job
leaves them out of its audits (they stay as the first job decides them) and a job whose continuations are all bound is
refused, naming the first job's folder: that is where the version goes on (answers, ``autorater certify``, and version
challengers, whose error budget was split in advance). A job that never saw an answer spent nothing: a later job
supersedes it, and its own ``certify`` then refuses. Nothing else of the suite is touched.

Example:
    >>> bound = bound_ids(suite_root)                                   # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from autorater.data import files
from autorater.data.files import append_line_durably
from autorater.serving.fields import utc_now

LEDGER_FILE = "labelling_jobs.jsonl"


class VersionBoundError(ValueError):
    """Every continuation of the version is bound by an earlier job's evidence: its verdicts stand."""


def read_ledger(suite_root: str | os.PathLike) -> list[dict]:
    """The suite's labelling-job events, in order (a torn last line, never acknowledged, is left out; a line that is
    not an event is a ValueError naming the file and the line)."""
    path = Path(suite_root) / LEDGER_FILE
    if not path.is_file() or path.is_symlink():
        return []
    text = path.read_bytes().decode("utf-8", "surrogateescape")
    lines = text.split("\n") if text.endswith("\n") else text.split("\n")[:-1]
    events = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            raise ValueError(f"{path}:{number}: not JSON (fix: the product appends whole lines only; restore the file "
                             f"from a backup)") from None
        if not isinstance(event, dict) or event.get("event") not in ("planned", "evidence", "superseded") \
                or not isinstance(event.get("job_id"), str):
            raise ValueError(f"{path}:{number}: not a labelling-job event (fix: restore the file from a backup)")
        events.append(event)
    return events


def jobs(suite_root: str | os.PathLike) -> dict[str, dict]:
    """job id -> ``{"folder", "at", "ids", "evidence", "superseded"}`` from the suite's ledger."""
    out: dict[str, dict] = {}
    for e in read_ledger(suite_root):
        if e["event"] == "planned":
            out.setdefault(e["job_id"], {"folder": e.get("folder"), "at": e.get("at"), "ids": set(e.get("ids") or []),
                                         "evidence": False, "superseded": None})
        elif e["job_id"] in out:
            if e["event"] == "evidence":
                out[e["job_id"]]["evidence"] = True
            else:
                out[e["job_id"]]["superseded"] = e.get("by")
    return out


def bound_ids(suite_root: str | os.PathLike, except_job: str | None = None) -> dict[str, str]:
    """continuation id -> the folder of the earlier job whose evidence binds it."""
    out = {}
    for job_id, j in jobs(suite_root).items():
        if j["evidence"] and job_id != except_job:
            for cid in j["ids"]:
                out.setdefault(cid, j["folder"])
    return out


def _append(suite_root: Path, event: dict) -> None:
    with files.folder_lock(suite_root, "labelling-job ledger", wait=True):
        append_line_durably(suite_root / LEDGER_FILE, json.dumps(event, ensure_ascii=True))


def plan_job(suite_root: str | os.PathLike, job_id: str, folder: str | os.PathLike, ids: list[str]) -> dict[str, str]:
    """Record a new job on ``ids`` (idempotent for its own id); earlier jobs without evidence that share ids are
    superseded. Returns the bound ids (continuation id -> the binding job's folder); VersionBoundError when every id is
    bound."""
    root = Path(suite_root)
    known = jobs(root)
    bound = bound_ids(root, except_job=job_id)
    if ids and all(cid in bound for cid in ids):
        first = sorted(set(bound.values()))
        raise VersionBoundError(
            f"every continuation of this version was already decided by the labelling job in {', '.join(first)}, "
            f"which has audit answers: its verdicts bind (labelling again would re-draw them). Fix: go on there: "
            f"answer its queue, `autorater ingest`, `autorater certify` (version challengers learn from the answers "
            f"and are certified there, on a budget split in advance); or label a new version")
    if job_id not in known:
        now = utc_now().isoformat()
        mine = set(ids)
        for other, j in known.items():
            if not j["evidence"] and not j["superseded"] and j["ids"] & mine:
                _append(root, {"event": "superseded", "job_id": other, "by": job_id, "at": now})
        _append(root, {"event": "planned", "job_id": job_id, "folder": str(Path(folder).resolve()), "at": now,
                       "ids": list(ids)})
    return bound


def record_evidence(suite_root: str | os.PathLike, job_id: str) -> None:
    """Record that ``job_id`` saw its first audit answer (once)."""
    j = jobs(suite_root).get(job_id)
    if j is not None and not j["evidence"]:
        _append(Path(suite_root), {"event": "evidence", "job_id": job_id, "at": utc_now().isoformat()})


def superseded_by(suite_root: str | os.PathLike, job_id: str) -> str | None:
    """The folder of the job that superseded ``job_id``, or None."""
    known = jobs(suite_root)
    by = (known.get(job_id) or {}).get("superseded")
    return None if by is None else str((known.get(by) or {}).get("folder") or by)


__all__ = ["LEDGER_FILE", "VersionBoundError", "bound_ids", "jobs", "plan_job", "read_ledger", "record_evidence",
           "superseded_by"]
