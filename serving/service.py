"""``autorater serve``: the model over HTTP, and a Label Studio ML backend.

Endpoints (FastAPI; the OpenAPI schema is at ``/openapi.json``, the docs at ``/docs``):

- ``POST /v1/rate``: a video path relative to the media root (JSON) and an instruction -> the calibrated
  prediction (``p_success``, ``outcome``, ``marker_s``, ``failure_mode``, ``decision`` from the stored policy).
- ``POST /v1/rate/upload``: the same with the video uploaded (multipart: ``file``, ``instruction``).
- The Label Studio ML-backend protocol: ``GET /health``, ``POST /setup`` (checks the project's labelling
  config has what the predictions need), ``POST /predict`` (tasks in, whose ``data`` holds ``video`` (a
  path relative to the media root, or a ``/data/local-files/?d=...`` URL under it), ``instruction`` and
  ``fps``; ``{"results": [...], "model_version"}`` out, each prediction as in the import file of
  ``autorater label``) and ``POST /webhook`` (an annotation created or updated: checked and added to the
  pool suite's ``annotations.jsonl``, or replacing its earlier version there; deleted: removed; the rows
  replaced or removed are kept in ``annotations_history.jsonl``; needs ``--suite``).

Every request is validated, and refused with a 4xx that says what to fix (never a 500):

- before a byte of the body is read, an ASGI middleware (:class:`RequestGuard`) checks the token (when one is
  set; ``/docs`` and ``/openapi.json`` included) and the size: a ``Content-Length`` over the limit is refused at
  once, and a chunked body is counted as it streams and refused (413) as soon as it passes the limit, so the
  server's memory does not grow with what a client sends;
- every field of ``/v1/rate``, ``/predict`` and the webhook is checked like the suite's own records (the right
  type, finite, in range, the marker inside the video), and a webhook's label is checked with the suite's record
  checks before it is appended, so the pool suite always still loads;
- paths are confined to the media root (no absolute paths, no ``..``, no symlink that leads out);
- videos are checked from their container's metadata (size, frame count, duration: data.video.VideoLimits)
  before a frame is decoded; at most ``max_decodes`` ratings run at once (503 with ``Retry-After`` when full);
  each request has one deadline (504 past it), and decoding checks it between frames, so a timed-out rating
  really stops and gives its slot back.

The server binds to 127.0.0.1 unless told otherwise, and ``autorater serve`` refuses a non-loopback address
without a token. The token is sent as ``Authorization: Bearer <token>`` or, as Label Studio's ML-backend
connection sends it, HTTP basic auth whose password is the token.

Example:
    >>> app = create_app("model", media_root="suites")        # doctest: +SKIP
    >>> uvicorn.run(app, host="127.0.0.1", port=9090)          # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import concurrent.futures as futures
import json
import math
import os
import re
import secrets
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path, PurePosixPath
from typing import Any

from fastapi import FastAPI, File, Form, HTTPException, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from autorater.predict import ClipInput
from autorater.rater import Rater
from data.suite import Suite, SuiteFormatError, annotation_problems, record_to_dict
from data.video import DEFAULT_LIMITS, DecodeTimeout, VideoError, VideoLimits, read_video, video_info
from serving.labelstudio import FROM_NAME, TO_NAME, checked_fps, checked_frames, marker_region

MAX_JSON_BYTES = 1 << 20  # 1 MiB of JSON per request
MAX_UPLOAD_BYTES = 64 << 20
MAX_TASKS = 64
MAX_DECODES = 2  # ratings at once (each decodes a video and runs the model)
MAX_TAKEOVER_S = 86400.0
MAX_TEXT = 2000
MAX_PATH = 1024


class RateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    video: str = Field(..., min_length=1, max_length=MAX_PATH, description="path relative to the media root")
    instruction: str = Field(..., min_length=1, max_length=MAX_TEXT)
    takeover_s: float = Field(0.0, ge=0.0, le=MAX_TAKEOVER_S, allow_inf_nan=False)


class Rating(BaseModel):
    p_success: float
    outcome: str
    marker_s: float
    failure_mode: str | None
    decision: str = Field(description="'auto' when the calibrated policy lets the model label alone, else 'human'")
    model: str


class PredictRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    tasks: list[dict[str, Any]] = Field(..., max_length=MAX_TASKS)
    project: str | int | None = None
    label_config: str | None = None


class SetupRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    project: str | int | None = None
    schema_: str | None = Field(None, alias="schema")


def resolve_media(media_root: Path, value: str) -> Path:
    """The file ``value`` names under ``media_root``; HTTPException 400/404 if it leaves the root or is missing.

    Accepts a relative POSIX path or a Label Studio local-files URL (``/data/local-files/?d=rel/path``).
    """
    if value.startswith("/data/local-files/"):
        value = urllib.parse.parse_qs(urllib.parse.urlparse(value).query).get("d", [""])[0]
    p = PurePosixPath(value)
    shown = value[:200]
    if not value or p.is_absolute() or ".." in p.parts or "\\" in value or "\x00" in value or ":" in value:
        raise HTTPException(400, f"video path {shown!r} must be relative to the media root, without '..' "
                                 f"(fix: send e.g. 'suite-v3/videos/c000001.mp4')")
    try:
        root = media_root.resolve()
        path = (root / p).resolve()  # follows symlinks: one that points out of the root is caught here
        if root != path and root not in path.parents:
            raise HTTPException(400, f"video path {shown!r} leads outside the media root")
        found = path.is_file()
    except (OSError, ValueError) as err:  # a name too long, a loop of symlinks, ...
        raise HTTPException(400, f"video path {shown!r} cannot be opened: {err.__class__.__name__} "
                                 f"(fix: send the path of a video file under the media root)") from None
    if not found:
        raise HTTPException(404, f"no video at {shown!r} under the media root")
    return path


def _authorized(header: bytes | None, token: str) -> bool:
    """``Authorization: Bearer <token>``, or basic auth (any user) whose password is the token."""
    given = (header or b"").decode("latin-1")
    ok = secrets.compare_digest(given.encode("latin-1"), f"Bearer {token}".encode())
    if given[:6].lower() == "basic ":
        try:
            _, _, password = base64.b64decode(given[6:].strip(), validate=True).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            password = ""
        ok = secrets.compare_digest(password.encode("utf-8", "surrogatepass"), token.encode()) or ok
    return ok


class RequestGuard:
    """ASGI middleware: the token, then the body size, before the application reads a byte of the body.

    ``Content-Length`` over the limit is refused at once; a body without it (chunked) is counted as it streams and
    refused with 413 as soon as it passes the limit. ``upload_paths`` (path suffixes) get ``upload_limit``.
    """

    def __init__(self, app, token: str | None, json_limit: int, upload_limit: int, upload_paths: tuple = ("/upload",)):
        self.app, self.token = app, token
        self.json_limit, self.upload_limit, self.upload_paths = json_limit, upload_limit, upload_paths

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        if self.token is not None and not _authorized(headers.get(b"authorization"), self.token):
            return await _send_json(send, 401, "missing or wrong token (fix: send 'Authorization: Bearer <token>', "
                                               "or basic auth with the token as the password)",
                                    [(b"www-authenticate", b'Bearer realm="autorater"')])
        upload = scope.get("path", "").endswith(self.upload_paths)
        limit = self.upload_limit + 65536 if upload else self.json_limit
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or len(length) > 18 or int(length) > limit):
            return await _send_json(send, 413, f"request body too large (limit {limit} bytes)")
        seen = 0

        async def limited_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise HTTPException(413, f"request body too large (limit {limit} bytes)")
            return message

        await self.app(scope, limited_receive, send)


async def _send_json(send, status: int, detail: str, headers: list | None = None) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close"), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


def _plain(value: Any, depth: int = 0) -> Any:
    """A JSON-safe copy of a validation error's parts (no NaN, no bytes, nothing deep or long)."""
    if isinstance(value, bool) or value is None or isinstance(value, int) and abs(value) < 2 ** 53:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple)) and depth < 4:
        return [_plain(v, depth + 1) for v in value[:10]]
    if isinstance(value, dict) and depth < 4:
        return {str(k)[:60]: _plain(v, depth + 1) for k, v in list(value.items())[:10]}
    return str(value)[:200]


class _Rater:
    """The rater (model, calibration, name) and a lock: one prediction at a time (the model is not re-entrant)."""

    def __init__(self, model_dir: Path, limits: VideoLimits = DEFAULT_LIMITS, device: str = "cpu"):
        self.rater = Rater.load(model_dir, device)
        self.model, self.name = self.rater.model, self.rater.name
        self.record = self.rater.record()
        self.lock = threading.Lock()
        self.limits = limits

    def rate(self, path: Path, instruction: str, takeover_s: float, deadline: float) -> dict:
        """The rating of one video; HTTPException 422 (undecodable, too large) or 504 (past ``deadline``)."""
        try:
            video = read_video(path, **self.model.config.decode_args(), limits=self.limits, deadline=deadline)
        except DecodeTimeout:
            raise HTTPException(504, "rating passed the request's deadline while decoding; it was stopped (fix: "
                                     "send a shorter or smaller video, or raise the server's --timeout-s)") from None
        except VideoError as err:
            raise HTTPException(422, f"cannot decode the video: {err}") from None
        clip = ClipInput(video.frames, video.times_s.astype("float32"), video.info.duration_s, float(takeover_s),
                         instruction)
        if not self.lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise HTTPException(504, "rating passed the request's deadline waiting for the model")
        try:
            row = self.rater.rate_clips(["x"], [clip]).records(self.name)[0]
        finally:
            self.lock.release()
        if not all(math.isfinite(row[k]) for k in ("p_success", "marker_s")):
            raise HTTPException(422, "the model gave no finite rating for this video (fix: check the video plays; "
                                     "if it does, report the model folder)")
        decision = "human"
        if self.record is not None and self.record.feasible:
            policy = self.record.policy()
            decision = str(policy.decide([row["p_success"]], marker_uncertainty=[row["marker_spread_s"]])[0])
        return {**{k: row[k] for k in ("p_success", "outcome", "marker_s", "failure_mode", "model")},
                "decision": decision, "duration_s": clip.duration_s, "fps": video.info.fps,
                "frames": video.info.num_frames}


def create_app(model_dir: str | os.PathLike, media_root: str | os.PathLike, *, token: str | None = None,
               suite: str | os.PathLike | None = None, timeout_s: float = 90.0,
               max_upload_bytes: int = MAX_UPLOAD_BYTES, max_json_bytes: int = MAX_JSON_BYTES,
               max_decodes: int = MAX_DECODES, video_limits: VideoLimits = DEFAULT_LIMITS,
               device: str = "cpu") -> FastAPI:
    """The FastAPI app. ``suite``: the pool suite whose ``annotations.jsonl`` the webhook appends to.

    ``timeout_s`` is one deadline per request (all of a ``/predict`` request's tasks together); ``max_decodes``
    ratings run at once, more are answered 503; videos over ``video_limits`` are refused (422) before decoding.
    ``device``: where the model rates ("auto": a GPU when present).
    """
    media_root = Path(media_root)
    if not media_root.is_dir():
        raise FileNotFoundError(f"media root {media_root} is not a folder (fix: pass --media-root, the folder the "
                                f"video paths are relative to)")
    if not (timeout_s > 0 and max_decodes >= 1):
        raise ValueError(f"timeout_s must be > 0 and max_decodes >= 1, got {timeout_s} and {max_decodes}")
    rater = _Rater(Path(model_dir), video_limits, device)
    app = FastAPI(title="autorater", version="1",
                  description="Rates agent continuation videos against their instruction; a Label Studio ML backend.")
    app.add_middleware(RequestGuard, token=token, json_limit=max_json_bytes, upload_limit=max_upload_bytes)
    slots = threading.BoundedSemaphore(max_decodes)
    pool = futures.ThreadPoolExecutor(max_workers=max_decodes, thread_name_prefix="autorater-rate")

    async def run(fn, *args, deadline: float):
        """``fn(*args, deadline)`` in a rating slot (503 when all are busy), 504 past the deadline. The slot is
        given back when the work really ends (it checks the deadline), not when the request gives up on it."""
        if not slots.acquire(blocking=False):
            raise HTTPException(503, f"all {max_decodes} rating slots are busy; retry shortly",
                                headers={"Retry-After": "1"})
        try:
            job = pool.submit(fn, *args, deadline)
        except RuntimeError:
            slots.release()
            raise
        job.add_done_callback(lambda _: slots.release())
        try:
            return await asyncio.wait_for(asyncio.wrap_future(job), max(0.0, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            raise HTTPException(504, f"rating took longer than {timeout_s:g} s (fix: send a shorter video, or "
                                     f"raise the server's --timeout-s)") from None

    def deadline() -> float:
        return time.monotonic() + timeout_s

    @app.get("/health")
    @app.get("/", include_in_schema=False)
    async def health() -> dict:
        return {"status": "UP", "model_version": rater.name, "calibrated": rater.record is not None}

    @app.post("/v1/rate", response_model=Rating)
    async def rate(body: RateRequest) -> dict:
        return await run(rater.rate, resolve_media(media_root, body.video), body.instruction, body.takeover_s,
                         deadline=deadline())

    @app.post("/v1/rate/upload", response_model=Rating)
    async def rate_upload(file: UploadFile = File(...), instruction: str = Form(..., min_length=1, max_length=MAX_TEXT),
                          takeover_s: float = Form(0.0, ge=0.0, le=MAX_TAKEOVER_S, allow_inf_nan=False)) -> dict:
        due = deadline()
        suffix = re.sub(r"[^A-Za-z0-9.]", "", Path(file.filename or "").suffix)[:8] or ".mp4"
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"upload{suffix}"
            size = 0
            with open(path, "wb") as f:
                while chunk := await file.read(1 << 20):
                    size += len(chunk)
                    if size > max_upload_bytes:
                        raise HTTPException(413, f"upload larger than {max_upload_bytes} bytes")
                    f.write(chunk)
            return await run(rater.rate, path, instruction, takeover_s, deadline=due)

    @app.post("/setup")
    async def setup(body: SetupRequest) -> dict:
        if body.schema_:
            _check_config(body.schema_)
        return {"model_version": rater.name}

    @app.post("/predict")
    async def predict(body: PredictRequest) -> dict:
        if body.label_config:
            _check_config(body.label_config)
        checked = [_check_task(media_root, task, i) for i, task in enumerate(body.tasks)]  # all, before decoding
        results = await run(_predict_tasks, rater, checked, deadline=deadline()) if checked else []
        return {"results": results, "model_version": rater.name}

    @app.post("/webhook", status_code=201)
    async def webhook(request: Request) -> dict:
        payload = _json_body(await request.body(), "webhook")
        if not isinstance(payload, dict) or not isinstance(payload.get("action"), str):
            raise HTTPException(422, "a Label Studio webhook is an object with an 'action' string (fix: point the "
                                     "project's webhook at /webhook with 'send payload' on)")
        if payload["action"] not in ("ANNOTATION_CREATED", "ANNOTATION_UPDATED", "ANNOTATIONS_DELETED"):
            return {"status": "ignored", "action": payload["action"][:100]}
        if suite is None:
            raise HTTPException(409, "this server records annotations only when started with --suite POOL_SUITE")
        work = _delete_annotations if payload["action"] == "ANNOTATIONS_DELETED" else _record_annotation
        try:
            return await asyncio.wait_for(asyncio.to_thread(work, Path(suite), payload, video_limits), timeout_s)
        except asyncio.TimeoutError:
            raise HTTPException(504, f"recording the annotation took longer than {timeout_s:g} s") from None

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException):
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError):
        errors = [{"loc": _plain(e.get("loc")), "msg": str(e.get("msg"))[:300], "type": str(e.get("type"))}
                  for e in exc.errors()[:20]]
        fields = ", ".join(".".join(str(x) for x in e["loc"] if x != "body") or "body" for e in errors)
        return JSONResponse({"detail": errors, "fix": f"correct {fields} (finite numbers, the documented types; "
                                                      f"see /docs)"}, status_code=422)

    return app


def _json_body(raw: bytes, what: str) -> Any:
    """A request body as JSON: 400 when it is not JSON (NaN and Infinity are not JSON), or nested too deeply."""
    def refuse(name):
        raise ValueError(f"{name} is not a JSON number")

    try:
        return json.loads(raw.decode("utf-8"), parse_constant=refuse)
    except RecursionError:
        raise HTTPException(400, f"the {what} body is nested too deeply") from None
    except (UnicodeDecodeError, ValueError) as err:
        raise HTTPException(400, f"the {what} body is not JSON: {str(err)[:200]}") from None


def _check_config(config: str) -> None:
    from label_studio_sdk.label_interface import LabelInterface

    try:
        li = LabelInterface(config)
        control = li.get_control(FROM_NAME)
    except Exception as err:  # the SDK raises several kinds; all mean "not our config"
        raise HTTPException(422, f"the project's labelling config is not usable: {err} (fix: use the config "
                                 f"written by `autorater label`, labelstudio/config.xml)") from None
    if control.tag != "TimelineLabels" or TO_NAME not in control.to_name or \
            not {"success", "failure"} <= set(control.labels):
        raise HTTPException(422, f"the labelling config needs <TimelineLabels name='{FROM_NAME}' toName='{TO_NAME}'> "
                                 f"with labels success and failure (fix: use labelstudio/config.xml)")


def _field(where: str, name: str, value, why: str, fix: str) -> HTTPException:
    shown = json.dumps(_plain(value))[:80]
    return HTTPException(422, f"{where}: field '{name}' {why}, got {shown} (fix: {fix})")


def _number(where: str, name: str, value, low: float, high: float, fix: str) -> float:
    ok = (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
          and low <= value <= high)
    if not ok:
        raise _field(where, name, value, f"must be a finite number in {low:g}..{high:g}", fix)
    return float(value)


def _check_task(media_root: Path, task: Any, i: int) -> tuple:
    """A /predict task checked field by field: (id, video path, instruction, takeover_s, fps or None)."""
    where = f"task {i}"
    data = task.get("data") if isinstance(task, dict) else None
    if not isinstance(data, dict):
        raise HTTPException(422, f"{where}: data needs 'video' (a path under the media root) and 'instruction'")
    video, instruction = data.get("video"), data.get("instruction")
    if not isinstance(video, str) or not 0 < len(video) <= MAX_PATH:
        raise _field(where, "data.video", video, f"must be a path of 1..{MAX_PATH} characters",
                     "send the video's path under the media root")
    if not isinstance(instruction, str) or not instruction.strip() or len(instruction) > MAX_TEXT:
        raise _field(where, "data.instruction", instruction, f"must be a non-empty string of up to {MAX_TEXT} "
                                                             f"characters", "send the scenario's instruction")
    takeover = data.get("takeover_s")
    takeover = 0.0 if takeover is None else _number(where, "data.takeover_s", takeover, 0.0, MAX_TAKEOVER_S,
                                                    "seconds from the first frame, or leave it out")
    fps = data.get("fps")
    if fps is not None and checked_fps(fps) is None:
        raise _field(where, "data.fps", fps, f"must be a number in {DEFAULT_LIMITS.min_fps:g}.."
                                             f"{DEFAULT_LIMITS.max_fps:g}",
                     "send the video's frame rate, or leave it out")
    tid = task.get("id", i)
    tid = tid if isinstance(tid, (int, str)) and not isinstance(tid, bool) else i
    return str(tid)[:64], resolve_media(media_root, video), instruction, takeover, checked_fps(fps)


def _predict_tasks(rater: _Rater, tasks: list[tuple], deadline: float) -> list[dict]:
    """Predictions (Label Studio's format) for checked tasks, one after another, all within one deadline."""
    results = []
    for tid, path, instruction, takeover, fps in tasks:
        r = rater.rate(path, instruction, takeover, deadline)
        confidence = r["p_success"] if r["outcome"] == "success" else 1 - r["p_success"]
        region = marker_region(r["outcome"], r["marker_s"], fps or r["fps"], r["frames"], f"{tid}-model",
                               score=confidence)
        results.append({"model_version": r["model"], "score": round(confidence, 6), "result": [region]})
    return results


def _record_annotation(suite_dir: Path, payload: dict, limits: VideoLimits = DEFAULT_LIMITS) -> dict:
    """Check a webhook's annotation field by field and bring the pool suite up to date with it (added, updated,
    or already there); the row passes the suite's record checks first, so the suite still loads. One read of the
    suite, under its folder's lock (Label Studio waits 1 s for a webhook's answer)."""
    from serving.folder import folder_lock

    task, ann = payload.get("task"), payload.get("annotation")
    if not isinstance(task, dict) or not isinstance(ann, dict) or not isinstance(task.get("data"), dict):
        raise HTTPException(422, "the webhook payload needs 'task' (with 'data') and 'annotation' objects")
    data = task["data"]
    for name, check in (("fps", checked_fps), ("frames", checked_frames)):
        if data.get(name) is not None and check(data[name]) is None:
            raise _field("webhook task", f"data.{name}", data[name], "must be a positive number within the video "
                         "limits", "send the task as `autorater label` wrote it (the video's own fps and frames)")
    with folder_lock(suite_dir, "ingest or webhook", wait=True):
        try:
            suite = Suite.load(suite_dir)
        except SuiteFormatError as err:
            raise HTTPException(409, f"the pool suite does not load, so nothing was recorded: {str(err)[:500]} "
                                     f"(fix: repair it; `autorater suite validate` lists every problem)") from None
        return _record_checked(suite, data, ann, limits)


def _delete_annotations(suite_dir: Path, payload: dict, limits: VideoLimits = DEFAULT_LIMITS) -> dict:
    """``ANNOTATIONS_DELETED``: the deleted annotations' labels leave the pool suite (kept in its history file), so
    a label deleted in Label Studio is not silently kept for training."""
    from serving.folder import folder_lock
    from serving.ingest import remove_loaded_suite

    items = payload.get("annotations")
    ok = isinstance(items, list) and 0 < len(items) <= 100_000 and all(
        isinstance(a, dict) and isinstance(a.get("id"), (int, str)) and not isinstance(a.get("id"), bool)
        for a in items)
    if not ok:
        raise _field("webhook", "annotations", items, "must be a list of objects with an 'id'",
                     "send Label Studio's ANNOTATIONS_DELETED payload")
    with folder_lock(suite_dir, "ingest or webhook", wait=True):
        try:
            suite = Suite.load(suite_dir)
        except SuiteFormatError as err:
            raise HTTPException(409, f"the pool suite does not load, so nothing was removed: {str(err)[:500]}"
                                ) from None
        removed = remove_loaded_suite(suite, [a["id"] for a in items])
    return {"status": "deleted", "removed": len(removed)}


def _record_checked(suite: Suite, data: dict, ann: dict, limits: VideoLimits) -> dict:
    from serving.ingest import upsert_loaded_suite
    from serving.labelstudio import ExportProblem, annotation_from_result, task_timing

    cid = data.get("continuation_id")
    if not isinstance(cid, str) or cid not in suite.continuation_by_id:
        raise _field("webhook task", "data.continuation_id", cid, f"must name a continuation of suite {suite.root}",
                     "send tasks imported from the tasks.json of `autorater label`")
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
    where = f"annotation {json.dumps(_plain(ann.get('id')))[:40]}"
    label = annotation_from_result(ann, cid, fps, frames, where, problems)
    if label is None:
        raise HTTPException(422, "; ".join(str(p) for p in problems))
    duration = info.duration_s if info is not None else frames / fps if frames else None
    row = {k: v for k, v in record_to_dict(label).items() if not k.startswith("_")}
    bad = annotation_problems(row, "webhook annotation", None, duration, suite.continuation_by_id)
    if bad:
        raise HTTPException(422, "; ".join(str(p) for p in bad))
    done = upsert_loaded_suite(suite, [row])
    status = "recorded" if done.added else "updated" if done.replaced else "stale" if done.stale else "duplicate"
    return {"status": status, "continuation_id": cid, "outcome": label.outcome, "marker_s": label.marker_s,
            "ls_annotation_id": row.get("ls_annotation_id"), **({"note": note} if note else {})}


__all__ = ["RequestGuard", "create_app", "resolve_media"]
