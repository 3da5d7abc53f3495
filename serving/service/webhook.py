"""The Label Studio webhook of ``autorater serve``: ``POST /webhook`` writes the pool suite's labels (``--suite``).

``ANNOTATION_CREATED`` / ``ANNOTATION_UPDATED``: the annotation is checked field by field like an export (the marker a
time inside the video, counted at the video's own frame rate; the row passes the suite's record checks, so the suite
always still loads) and goes through the suite's label history (``serving.labelling.history``): recorded, updated (a
newer version), a duplicate, or stale (older than the label kept); an annotation Label Studio deleted is refused
(409), and a time later than this machine's clock (plus a small skew) is refused (422), and so is an annotation id
that another continuation's label holds (409). ``ANNOTATIONS_DELETED``: the ids are tombstoned and their labels leave
``annotations.jsonl`` (the history keeps them). A webhook that would append more than ``history.MAX_WRITE_BYTES`` to
the history is refused (413). Other actions are ignored.

One read of the suite, under its folder's lock (Label Studio waits 1 s for a webhook's answer). A refusal changes
nothing in the suite folder.

Example:
    >>> app.include_router(webhook_router(Path("pool-suite"), DEFAULT_LIMITS, timeout_s=90))   # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path

from fastapi import APIRouter, HTTPException, Request

from autorater.data.suite import Suite, SuiteFormatError, annotation_problems, record_to_dict
from autorater.data.video import DEFAULT_LIMITS, VideoError, VideoLimits, video_info
from autorater.serving.fields import bounded_id, shown, utc_now
from autorater.serving.labelling.folder import folder_lock
from autorater.serving.labelling.history import MAX_WRITE_BYTES, HistoryWriteTooLarge, arriving, suite_history
from autorater.serving.labelstudio.formats import (
    ExportProblem,
    annotation_from_result,
    checked_fps,
    checked_frames,
    task_timing,
)
from autorater.serving.service.guard import field_error, json_body

RECORDED_ACTIONS = {"ANNOTATION_CREATED": "create", "ANNOTATION_UPDATED": "update"}
DELETED_ACTION = "ANNOTATIONS_DELETED"
MAX_DELETED = 100_000


def webhook_router(suite: Path | None, limits: VideoLimits, timeout_s: float) -> APIRouter:
    """The ``/webhook`` route writing to the pool suite ``suite`` (None: annotations are refused with 409)."""
    router = APIRouter()

    @router.post("/webhook", status_code=201)
    async def webhook(request: Request) -> dict:
        payload = json_body(await request.body(), "webhook")
        if not isinstance(payload, dict) or not isinstance(payload.get("action"), str):
            raise HTTPException(422, "a Label Studio webhook is an object with an 'action' string (fix: point the "
                                     "project's webhook at /webhook with 'send payload' on)")
        action = payload["action"]
        if action not in RECORDED_ACTIONS and action != DELETED_ACTION:
            return {"status": "ignored", "action": action[:100]}
        if suite is None:
            raise HTTPException(409, "this server records annotations only when started with --suite POOL_SUITE")
        args = (Path(suite), payload, utc_now()) if action == DELETED_ACTION else (Path(suite), payload, limits,
                                                                                    utc_now())
        work = delete_annotations if action == DELETED_ACTION else record_annotation
        try:
            return await asyncio.wait_for(asyncio.to_thread(work, *args), timeout_s)
        except asyncio.TimeoutError:
            raise HTTPException(504, f"recording the annotation took longer than {timeout_s:g} s") from None

    return router


def record_annotation(suite_dir: Path, payload: dict, limits: VideoLimits = DEFAULT_LIMITS,
                      now: datetime | None = None) -> dict:
    """Check a created or updated annotation field by field and take it into the pool suite's label history."""
    task, ann = payload.get("task"), payload.get("annotation")
    if not isinstance(task, dict) or not isinstance(ann, dict) or not isinstance(task.get("data"), dict):
        raise HTTPException(422, "the webhook payload needs 'task' (with 'data') and 'annotation' objects")
    data = task["data"]
    for name, check in (("fps", checked_fps), ("frames", checked_frames)):
        if data.get(name) is not None and check(data[name]) is None:
            raise field_error("webhook task", f"data.{name}", data[name], "must be a positive number within the video "
                              "limits", "send the task as `autorater label` wrote it (the video's own fps and frames)")
    if bounded_id(ann.get("id")) is None:
        raise field_error("webhook", "annotation.id", ann.get("id"), "must be an integer or a string of up to 128 "
                          "characters", "send Label Studio's annotation as it is")
    kind = RECORDED_ACTIONS[payload["action"]]
    with folder_lock(suite_dir, "ingest or webhook", wait=True):
        suite = _load(suite_dir, "recorded")
        return _record_checked(suite, data, ann, limits, kind, now or utc_now())


def delete_annotations(suite_dir: Path, payload: dict, now: datetime | None = None) -> dict:
    """``ANNOTATIONS_DELETED``: tombstone the ids; their labels leave the pool suite (kept in its history), so a label
    deleted in Label Studio is not kept for training, and a late create or update of it is refused."""
    items = payload.get("annotations")
    ok = isinstance(items, list) and 0 < len(items) <= MAX_DELETED and all(
        isinstance(a, dict) and bounded_id(a.get("id")) is not None for a in items)
    if not ok:
        raise field_error("webhook", "annotations", items, "must be a list of objects with an 'id' (an integer or a "
                          "string of up to 128 characters)", "send Label Studio's ANNOTATIONS_DELETED payload")
    with folder_lock(suite_dir, "ingest or webhook", wait=True):
        suite = _load(suite_dir, "removed")
        try:
            removed = suite_history(suite.root).delete([a["id"] for a in items], via=f"webhook {DELETED_ACTION}",
                                                       now=now or utc_now(), max_bytes=MAX_WRITE_BYTES)
        except HistoryWriteTooLarge as err:
            raise HTTPException(413, str(err)) from None
        except ValueError as err:
            raise HTTPException(409, f"{str(err)[:500]}; nothing was removed") from None
    return {"status": "deleted", "removed": len(removed)}


def _load(suite_dir: Path, what: str) -> Suite:
    try:
        return Suite.load(suite_dir)
    except SuiteFormatError as err:
        raise HTTPException(409, f"the pool suite does not load, so nothing was {what}: {str(err)[:500]} (fix: "
                                 f"repair it; `autorater suite validate` lists every problem)") from None


def _record_checked(suite: Suite, data: dict, ann: dict, limits: VideoLimits, kind: str, now: datetime) -> dict:
    cid = data.get("continuation_id")
    if not isinstance(cid, str) or cid not in suite.continuation_by_id:
        raise field_error("webhook task", "data.continuation_id", cid, f"must name a continuation of suite "
                          f"{suite.root.name}", "send tasks imported from the tasks.json of `autorater label`")
    if ann.get("was_cancelled") is True:
        return {"status": "ignored", "reason": "cancelled"}
    try:
        info = video_info(suite.video_path(cid), limits)
        known = {"fps": info.fps, "frames": info.num_frames}
    except VideoError:
        info, known = None, {}
    fps, frames, note = task_timing(data, known)
    if fps is None:
        raise HTTPException(422, f"webhook task {cid}: the video cannot be read and the task gives no fps (fix: "
                                 f"repair the video or send data.fps)")
    problems: list[ExportProblem] = []
    label = annotation_from_result(ann, cid, fps, frames, f"annotation {shown(ann.get('id'), 40)}", problems)
    if label is None:
        raise HTTPException(422, "; ".join(str(p) for p in problems))
    duration = info.duration_s if info is not None else frames / fps if frames else None
    row = {k: v for k, v in record_to_dict(label).items() if not k.startswith("_")}
    bad = annotation_problems(row, "webhook annotation", None, duration, suite.continuation_by_id)
    if bad:
        raise HTTPException(422, "; ".join(str(p) for p in bad))
    try:
        incoming = arriving(row, kind, now)
    except ValueError as err:
        raise HTTPException(422, f"webhook annotation {shown(ann.get('id'), 40)}: {err}") from None
    try:
        done = suite_history(suite.root).apply([incoming], via=f"webhook {kind}", now=now, max_bytes=MAX_WRITE_BYTES)
    except HistoryWriteTooLarge as err:
        raise HTTPException(413, str(err)) from None
    except ValueError as err:
        raise HTTPException(409, f"{str(err)[:500]}; nothing was recorded") from None
    status = done.statuses[0]
    what = "update" if kind == "update" else "creation"
    if status == "deleted":
        raise HTTPException(409, f"annotation {shown(ann.get('id'), 40)} was deleted in Label Studio, so this {what} "
                                 f"of it was not recorded (fix: a new label is a new annotation in Label Studio)")
    if status == "conflict":
        raise HTTPException(409, f"annotation {shown(ann.get('id'), 40)} belongs to another task's continuation, so "
                                 f"this {what} for {cid} was not recorded: an annotation id names one label (fix: "
                                 f"send Label Studio's own annotation ids)")
    return {"status": status, "continuation_id": cid, "outcome": label.outcome, "marker_s": label.marker_s,
            "ls_annotation_id": row.get("ls_annotation_id"), **({"note": note} if note else {})}


__all__ = ["DELETED_ACTION", "RECORDED_ACTIONS", "delete_annotations", "record_annotation", "webhook_router"]
