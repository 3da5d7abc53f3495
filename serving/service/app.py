"""``autorater serve``: the model over HTTP, and a Label Studio ML backend.

Endpoints (FastAPI; the OpenAPI schema is at ``/openapi.json``, the docs at ``/docs``):

- ``POST /v1/rate``: a video path relative to the media root (JSON) and an instruction -> the calibrated
  prediction (``p_success``, ``outcome``, ``marker_s``, ``failure_mode``, ``decision`` from the stored policy).
- ``POST /v1/rate/upload``: the same with the video uploaded (multipart: ``file``, ``instruction``).
- ``GET /health``, and the Label Studio ML-backend protocol: ``POST /setup`` and ``POST /predict``
  (``mlbackend``), ``POST /webhook`` (``webhook``: annotations created, updated or deleted in Label Studio
  reach the pool suite's labels through their history; needs ``--suite``).

This module builds the app and puts the guards in front of it (``guard``): the token and the body size before a
byte of the body is read, no cross-site writes (another site's ``Origin`` 403, a body that is not JSON 415), a body
deadline, ``Connection: close`` on a refusal; every answer UTF-8 (``SafeJSONResponse``) and naming paths relative to
the media root, never the server's own; every field checked (strict types:
no string or boolean numbers, no blank instruction; 422 that names the field); paths confined to the media root;
videos checked from their container and then frame by frame (data.video.VideoLimits; a playlist or file list is
refused, whatever its name); at most ``max_decodes``
ratings at once and one deadline per request (``rating``). Never a 500 for what a client sends. The server
binds to 127.0.0.1 unless told otherwise, and ``autorater serve`` refuses a non-loopback address without a token;
the connection limits (head and body timeouts, connections at once) are applied by ``guard.server_config``.

Example:
    >>> app = create_app("model", media_root="suites")                                    # doctest: +SKIP
    >>> uvicorn.Server(server_config(app, "127.0.0.1", 9090, ConnectionLimits())).run()   # doctest: +SKIP
"""

from __future__ import annotations

import functools
import os
import re
import tempfile
from pathlib import Path

from fastapi import FastAPI, File, Form, HTTPException, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator

from autorater.data.video import DEFAULT_LIMITS, VideoLimits
from autorater.device import DEFAULT_DEVICE
from autorater.serving.fields import json_safe, plain, without_roots
from autorater.serving.service.guard import ConnectionLimits, RequestGuard, resolve_media
from autorater.serving.service.mlbackend import MAX_PATH, MAX_TAKEOVER_S, MAX_TEXT, ml_backend_router
from autorater.serving.service.rating import RatingSlots, ServiceRater
from autorater.serving.service.webhook import webhook_router

MAX_JSON_BYTES = 1 << 20  # 1 MiB of JSON per request
MAX_UPLOAD_BYTES = 64 << 20
MAX_DECODES = 2  # ratings at once (each decodes a video and runs the model)


class RateRequest(BaseModel):
    """``/v1/rate``'s body. Strict: a number is a JSON number (not "5", not true), the instruction is not blank."""

    model_config = ConfigDict(extra="forbid")
    video: str = Field(..., min_length=1, max_length=MAX_PATH, strict=True,
                       description="path relative to the media root")
    instruction: str = Field(..., min_length=1, max_length=MAX_TEXT, strict=True)
    takeover_s: float = Field(0.0, ge=0.0, le=MAX_TAKEOVER_S, allow_inf_nan=False, strict=True)

    @field_validator("instruction")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the instruction is blank")
        return value


class SafeJSONResponse(JSONResponse):
    """A JSON response that is always UTF-8: a lone surrogate a client sent (``"\\ud800"``), which an answer may
    quote, is written as its escape instead of failing to encode (a 500)."""

    def render(self, content) -> bytes:
        try:
            return super().render(content)
        except UnicodeEncodeError:
            return super().render(json_safe(content))


class Rating(BaseModel):
    p_success: float
    outcome: str
    marker_s: float
    failure_mode: str | None
    decision: str = Field(description="'auto' when the calibrated policy lets the model label alone, else 'human'")
    promise: str = Field(description="which promise the decision carries: the calibration references' (a single "
                                     "video has no audit), never a suite version's certificate")
    model: str


def create_app(model_dir: str | os.PathLike, media_root: str | os.PathLike, *, token: str | None = None,
               suite: str | os.PathLike | None = None, timeout_s: float = 90.0,
               max_upload_bytes: int = MAX_UPLOAD_BYTES, max_json_bytes: int = MAX_JSON_BYTES,
               max_decodes: int = MAX_DECODES, video_limits: VideoLimits = DEFAULT_LIMITS,
               device: str = DEFAULT_DEVICE, allow_unverified: bool = False,
               body_timeout_s: float = ConnectionLimits.body_timeout_s, trusted_origins: tuple = ()) -> FastAPI:
    """The FastAPI app. ``suite``: the pool suite whose labels the webhook writes.

    ``timeout_s`` is one deadline per request (all of a ``/predict`` request's tasks together); ``max_decodes``
    ratings run at once, more are answered 503; videos over ``video_limits`` are refused (422). ``device``: where
    the model rates ("auto": a GPU when present). ``allow_unverified``: load a model folder whose weights carry no
    checksum (folders saved before it existed). ``body_timeout_s``: a request's whole body must arrive within it.
    ``trusted_origins``: web pages (``https://host:port``) allowed to send state-changing requests besides the
    service's own loopback address (see ``guard.cross_site_refusal``).
    """
    media_root = Path(media_root)
    if not media_root.is_dir():
        raise FileNotFoundError(f"media root {media_root} is not a folder (fix: pass --media-root, the folder the "
                                f"video paths are relative to)")
    slots = RatingSlots(max_decodes, timeout_s)
    rater = ServiceRater(Path(model_dir), video_limits, device, allow_unverified=allow_unverified,
                         media_root=media_root)
    app = FastAPI(title="autorater", version="1", default_response_class=SafeJSONResponse,
                  description="Rates agent continuation videos against their instruction; a Label Studio ML backend.")
    app.add_middleware(RequestGuard, token=token, json_limit=max_json_bytes, upload_limit=max_upload_bytes,
                       body_timeout_s=body_timeout_s, trusted_origins=trusted_origins)
    app.state.slots = slots
    roots = _server_roots(media_root, suite, model_dir)

    @app.get("/health")
    @app.get("/", include_in_schema=False)
    async def health() -> dict:
        return {"status": "UP", "model_version": rater.name, "calibrated": rater.record is not None}

    @app.post("/v1/rate", response_model=Rating)
    async def rate(body: RateRequest) -> dict:
        return await slots.run(rater.rate, resolve_media(media_root, body.video), body.instruction, body.takeover_s,
                               deadline=slots.deadline())

    @app.post("/v1/rate/upload", response_model=Rating)
    async def rate_upload(file: UploadFile = File(...), instruction: str = Form(..., min_length=1, max_length=MAX_TEXT,
                                                                               pattern=r"\S"),
                          takeover_s: float = Form(0.0, ge=0.0, le=MAX_TAKEOVER_S, allow_inf_nan=False)) -> dict:
        due = slots.deadline()
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
            shown = f"the upload {Path(file.filename or 'upload').name[:100]!r}"
            return await slots.run(functools.partial(rater.rate, shown=shown), path, instruction, takeover_s,
                                   deadline=due)

    app.include_router(ml_backend_router(rater, slots, media_root))
    app.include_router(webhook_router(Path(suite) if suite is not None else None, video_limits, timeout_s))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException):
        detail = without_roots(exc.detail, roots) if isinstance(exc.detail, str) else exc.detail
        return SafeJSONResponse({"detail": detail}, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError):
        errors = [{"loc": plain(e.get("loc")), "msg": str(e.get("msg"))[:300], "type": str(e.get("type"))}
                  for e in exc.errors()[:20]]
        fields = ", ".join(".".join(str(x) for x in e["loc"] if x != "body") or "body" for e in errors)
        return SafeJSONResponse({"detail": errors, "fix": f"correct {fields} (JSON numbers, not strings or booleans; "
                                                          f"a non-blank instruction; see /docs)"}, status_code=422)

    return app


def _server_roots(media_root: Path, suite, model_dir) -> dict[str, str]:
    """The server's own folders and their public names, to take out of every message (``fields.without_roots``):
    the media root (paths under it are named relative to it), the pool suite and the model folder (by name)."""
    root = media_root.resolve()
    roots = {str(root): "", str(media_root.absolute()): ""}
    for folder, kind in ((suite, "suite"), (model_dir, "model")):
        if folder is not None:
            path = Path(folder).resolve()
            roots[str(path)] = path.relative_to(root).as_posix() if path.is_relative_to(root) else \
                f"{kind} {path.name}"
    return roots


__all__ = ["MAX_DECODES", "MAX_JSON_BYTES", "MAX_UPLOAD_BYTES", "RateRequest", "Rating", "SafeJSONResponse",
           "create_app"]
