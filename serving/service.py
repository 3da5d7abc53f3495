"""``autorater serve``: the model over HTTP, and a Label Studio ML backend.

Endpoints (FastAPI; the OpenAPI schema is at ``/openapi.json``, the docs at ``/docs``):

- ``POST /v1/rate``: a video path relative to the media root (JSON) and an instruction -> the calibrated
  prediction (``p_success``, ``outcome``, ``marker_s``, ``failure_mode``, ``decision`` from the stored policy).
- ``POST /v1/rate/upload``: the same with the video uploaded (multipart: ``file``, ``instruction``).
- The Label Studio ML-backend protocol: ``GET /health``, ``POST /setup`` (checks the project's labelling
  config has what the predictions need), ``POST /predict`` (tasks in, whose ``data`` holds ``video`` (a
  path relative to the media root, or a ``/data/local-files/?d=...`` URL under it), ``instruction`` and
  ``fps``; ``{"results": [...], "model_version"}`` out, each prediction as in the import file of
  ``autorater label``) and ``POST /webhook`` (an annotation created or updated: checked and appended to
  the pool suite's ``annotations.jsonl``, ready for the next round; needs ``--suite``).

Every request is validated: JSON bodies by their schema and a size limit, uploads by a size limit
(streamed, refused past it), paths confined to the media root (no absolute paths, no ``..``, no
symlink that leads out), prediction time by a timeout, and, when a token is set, a bearer token.
Errors are 4xx with a message that says what to fix; the server binds to 127.0.0.1 unless told
otherwise, and ``autorater serve`` refuses a non-loopback address without a token.

Example:
    >>> app = create_app("model", media_root="suites")        # doctest: +SKIP
    >>> uvicorn.run(app, host="127.0.0.1", port=9090)          # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import tempfile
import threading
import urllib.parse
from pathlib import Path, PurePosixPath
from typing import Any

from fastapi import Depends, FastAPI, File, Form, HTTPException, Request, UploadFile
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from autorater.model import Autorater
from autorater.predict import load_clip, model_name, predict_clips, read_calibration, to_records
from data.video import VideoError, video_info
from serving.labelstudio import FROM_NAME, TO_NAME, marker_region

MAX_JSON_BYTES = 1 << 20  # 1 MiB of JSON per request
MAX_UPLOAD_BYTES = 64 << 20
MAX_TASKS = 64


class RateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    video: str = Field(..., min_length=1, max_length=1024, description="path relative to the media root")
    instruction: str = Field(..., min_length=1, max_length=2000)
    takeover_s: float = Field(0.0, ge=0.0, le=86400.0)


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
    if not value or p.is_absolute() or ".." in p.parts or "\\" in value or "\x00" in value or ":" in value:
        raise HTTPException(400, f"video path {value!r} must be relative to the media root, without '..' "
                                 f"(fix: send e.g. 'suite-v3/videos/c000001.mp4')")
    root = media_root.resolve()
    path = (root / p).resolve()  # follows symlinks: one that points out of the root is caught here
    if root != path and root not in path.parents:
        raise HTTPException(400, f"video path {value!r} leads outside the media root")
    if not path.is_file():
        raise HTTPException(404, f"no video at {value!r} under the media root")
    return path


class _Rater:
    """The model, its calibration and a lock: one prediction at a time (the model is not re-entrant)."""

    def __init__(self, model_dir: Path):
        self.model_dir = model_dir
        self.model = Autorater.from_pretrained(model_dir)
        self.calibration = read_calibration(model_dir)
        self.name = model_name(model_dir)
        self.lock = threading.Lock()
        from calibration import CalibrationRecord

        path = model_dir / "calibration.json"
        self.record = CalibrationRecord.from_json(path) if path.is_file() else None

    def rate(self, path: Path, instruction: str, takeover_s: float) -> dict:
        cfg = self.model.config
        try:
            clip = load_clip(path, instruction, takeover_s, cfg.num_frames, cfg.image_size)
        except VideoError as err:
            raise HTTPException(422, f"cannot decode the video: {err}") from None
        with self.lock:
            raw = predict_clips(self.model, [clip], self.calibration)
        row = to_records(["x"], raw, self.model, self.name)[0]
        decision = "human"
        if self.record is not None and self.record.feasible:
            decision = str(self.record.policy().decide([row["p_success"]], marker_uncertainty=[row["marker_spread_s"]])[0])
        return {**{k: row[k] for k in ("p_success", "outcome", "marker_s", "failure_mode", "model")},
                "decision": decision, "duration_s": clip.duration_s}


def create_app(model_dir: str | os.PathLike, media_root: str | os.PathLike, *, token: str | None = None,
               suite: str | os.PathLike | None = None, timeout_s: float = 120.0,
               max_upload_bytes: int = MAX_UPLOAD_BYTES) -> FastAPI:
    """The FastAPI app. ``suite``: the pool suite whose ``annotations.jsonl`` the webhook appends to."""
    media_root = Path(media_root)
    if not media_root.is_dir():
        raise FileNotFoundError(f"media root {media_root} is not a folder (fix: pass --media-root, the folder the "
                                f"video paths are relative to)")
    rater = _Rater(Path(model_dir))
    app = FastAPI(title="autorater", version="1",
                  description="Rates agent continuation videos against their instruction; a Label Studio ML backend.")

    async def check_request(request: Request) -> None:
        if token is not None:
            given = request.headers.get("authorization", "")
            if not secrets.compare_digest(given.encode(), f"Bearer {token}".encode()):
                raise HTTPException(401, "missing or wrong bearer token (fix: send 'Authorization: Bearer <token>')",
                                    headers={"WWW-Authenticate": "Bearer"})
        length = request.headers.get("content-length")
        limit = max_upload_bytes + 65536 if request.url.path.endswith("/upload") else MAX_JSON_BYTES
        if length is not None and (not length.isdigit() or int(length) > limit):
            raise HTTPException(413, f"request body too large (limit {limit} bytes)")

    async def run(fn, *args):
        try:
            return await asyncio.wait_for(asyncio.to_thread(fn, *args), timeout_s)
        except asyncio.TimeoutError:
            raise HTTPException(504, f"rating took longer than {timeout_s:.0f} s") from None

    guarded = [Depends(check_request)]

    @app.get("/health", dependencies=guarded)
    @app.get("/", dependencies=guarded, include_in_schema=False)
    async def health() -> dict:
        return {"status": "UP", "model_version": rater.name, "calibrated": rater.record is not None}

    @app.post("/v1/rate", response_model=Rating, dependencies=guarded)
    async def rate(body: RateRequest) -> dict:
        return await run(rater.rate, resolve_media(media_root, body.video), body.instruction, body.takeover_s)

    @app.post("/v1/rate/upload", response_model=Rating, dependencies=guarded)
    async def rate_upload(file: UploadFile = File(...), instruction: str = Form(..., min_length=1, max_length=2000),
                          takeover_s: float = Form(0.0, ge=0.0, le=86400.0)) -> dict:
        suffix = Path(file.filename or "video.mp4").suffix[:8] or ".mp4"
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"upload{suffix}"
            size = 0
            with open(path, "wb") as f:
                while chunk := await file.read(1 << 20):
                    size += len(chunk)
                    if size > max_upload_bytes:
                        raise HTTPException(413, f"upload larger than {max_upload_bytes} bytes")
                    f.write(chunk)
            return await run(rater.rate, path, instruction, takeover_s)

    @app.post("/setup", dependencies=guarded)
    async def setup(body: SetupRequest) -> dict:
        if body.schema_:
            _check_config(body.schema_)
        return {"model_version": rater.name}

    @app.post("/predict", dependencies=guarded)
    async def predict(body: PredictRequest) -> dict:
        if body.label_config:
            _check_config(body.label_config)
        results = []
        for i, task in enumerate(body.tasks):
            results.append(await run(_predict_task, rater, media_root, task, i))
        return {"results": results, "model_version": rater.name}

    @app.post("/webhook", status_code=201, dependencies=guarded)
    async def webhook(request: Request) -> dict:
        try:
            payload = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise HTTPException(400, "the webhook body is not JSON") from None
        if not isinstance(payload, dict) or not isinstance(payload.get("action"), str):
            raise HTTPException(422, "a Label Studio webhook has an 'action' field")
        if payload["action"] not in ("ANNOTATION_CREATED", "ANNOTATION_UPDATED"):
            return {"status": "ignored", "action": payload["action"]}
        if suite is None:
            raise HTTPException(409, "this server records annotations only when started with --suite POOL_SUITE")
        return await run(_record_annotation, Path(suite), payload)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException):
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)

    return app


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


def _predict_task(rater: _Rater, media_root: Path, task: dict, i: int) -> dict:
    data = task.get("data") if isinstance(task, dict) else None
    if not isinstance(data, dict) or not isinstance(data.get("video"), str) or \
            not isinstance(data.get("instruction"), str) or not data["instruction"]:
        raise HTTPException(422, f"task {i}: data needs 'video' (a path under the media root) and 'instruction'")
    path = resolve_media(media_root, data["video"])
    takeover = data.get("takeover_s", 0.0)
    takeover = float(takeover) if isinstance(takeover, (int, float)) and not isinstance(takeover, bool) else 0.0
    r = rater.rate(path, data["instruction"], max(0.0, takeover))
    info = video_info(path)
    fps = data.get("fps")
    fps = float(fps) if isinstance(fps, (int, float)) and not isinstance(fps, bool) and fps > 0 else info.fps
    confidence = r["p_success"] if r["outcome"] == "success" else 1 - r["p_success"]
    region = marker_region(r["outcome"], r["marker_s"], fps, info.num_frames, f"{task.get('id', i)}-model",
                           score=confidence)
    return {"model_version": r["model"], "score": round(confidence, 6), "result": [region]}


def _record_annotation(suite_dir: Path, payload: dict) -> dict:
    from data.suite import Suite
    from serving.ingest import append_annotations
    from serving.labelstudio import ExportProblem, annotation_from_result

    task, ann = payload.get("task"), payload.get("annotation")
    if not isinstance(task, dict) or not isinstance(ann, dict) or not isinstance(task.get("data"), dict):
        raise HTTPException(422, "the webhook payload needs 'task' (with 'data') and 'annotation'")
    suite = Suite.load(suite_dir)
    cid = task["data"].get("continuation_id")
    if cid not in suite.continuation_by_id:
        raise HTTPException(422, f"unknown continuation_id {cid!r} in suite {suite.root}")
    if ann.get("was_cancelled"):
        return {"status": "ignored", "reason": "cancelled"}
    fps, frames = task["data"].get("fps"), task["data"].get("frames")
    if not fps or not frames:  # read the video once for what the task does not say
        info = video_info(suite.video_path(cid))
        fps, frames = fps or info.fps, frames or info.num_frames
    problems: list[ExportProblem] = []
    label = annotation_from_result(ann, cid, float(fps), frames, f"annotation {ann.get('id')}", problems)
    if label is None:
        raise HTTPException(422, "; ".join(str(p) for p in problems))
    added = append_annotations(suite, [label])
    return {"status": "recorded" if added else "duplicate", "continuation_id": cid, "outcome": label.outcome,
            "marker_s": label.marker_s}


__all__ = ["create_app", "resolve_media"]
