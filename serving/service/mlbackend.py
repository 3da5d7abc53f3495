"""The Label Studio ML-backend adapter of ``autorater serve``: ``POST /setup`` and ``POST /predict``.

As label-studio-ml-backend's server speaks it: ``/setup`` checks the project's labelling config has the
``TimelineLabels`` control the predictions need; ``/predict`` takes ``tasks`` whose ``data`` holds ``video`` (a path
under the media root, or a ``/data/local-files/?d=...`` URL), ``instruction`` and optionally ``takeover_s``, and
answers ``{"results": [...], "model_version"}``, one prediction per task in the import file's format.

A labelling config (``/setup``'s ``schema``, ``/predict``'s ``label_config``) is at most :data:`MAX_LABEL_CONFIG`
characters (422) and is parsed in a worker thread, at most two at once, each config once (Label Studio sends the same
one with every request): parsing never holds up the event loop (``/health``).

Every task's fields are checked before any video is decoded (a malformed task: 422 naming it and the field). A task
whose video cannot be rated (undecodable, over the limits) gets its own error entry (``"result": []`` and
``"error"``), and the other tasks are still answered. The marker's frame is counted at the **video's own frame
rate**; a task's ``fps`` is informational (checked, never used), and only ``fps_override`` changes the rate the
marker is counted at (checked against the video's duration: the frames it gives must be within the limits).

Example:
    >>> app.include_router(ml_backend_router(rater, slots, Path("media")))   # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, ConfigDict, Field

from autorater.data.video import DEFAULT_LIMITS
from autorater.serving.fields import bounded_id, number_in
from autorater.serving.labelstudio.formats import FROM_NAME, TO_NAME, checked_fps, marker_region
from autorater.serving.service.guard import field_error, resolve_media
from autorater.serving.service.rating import RatingSlots, ServiceRater

MAX_TASKS = 64
MAX_TAKEOVER_S = 86400.0
MAX_TEXT = 2000
MAX_PATH = 1024
MAX_LABEL_CONFIG = 64 << 10  # characters of a labelling config (the product's is about 600)
_CONFIG_PARSERS = 2  # labelling configs parsed at once, each in a worker thread


class PredictRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    tasks: list[dict[str, Any]] = Field(..., max_length=MAX_TASKS)
    project: str | int | None = None
    label_config: str | None = None


class SetupRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    project: str | int | None = None
    schema_: str | None = Field(None, alias="schema")


def ml_backend_router(rater: ServiceRater, slots: RatingSlots, media_root: Path) -> APIRouter:
    """The ``/setup`` and ``/predict`` routes over ``rater``."""
    router = APIRouter()
    parsers = asyncio.Semaphore(_CONFIG_PARSERS)

    async def checked_config(config: str, field: str) -> None:
        if len(config) > MAX_LABEL_CONFIG:
            raise HTTPException(422, f"field '{field}': the labelling config is {len(config)} characters, over "
                                     f"{MAX_LABEL_CONFIG} (fix: use the config written by `autorater label`, "
                                     f"labelstudio/config.xml)")
        async with parsers:
            problem = await asyncio.to_thread(label_config_problem, config)
        if problem is not None:
            raise HTTPException(422, problem)

    @router.post("/setup")
    async def setup(body: SetupRequest) -> dict:
        if body.schema_:
            await checked_config(body.schema_, "schema")
        return {"model_version": rater.name}

    @router.post("/predict")
    async def predict(body: PredictRequest) -> dict:
        if body.label_config:
            await checked_config(body.label_config, "label_config")
        checked = [_check_task(media_root, task, i) for i, task in enumerate(body.tasks)]  # all, before decoding
        results = await slots.run(_predict_tasks, rater, checked, deadline=slots.deadline()) if checked else []
        return {"results": results, "model_version": rater.name}

    return router


@functools.lru_cache(maxsize=32)
def label_config_problem(config: str) -> str | None:
    """Why the labelling config cannot take the predictions (None: it can). Cached: Label Studio sends the same
    config again and again."""
    from label_studio_sdk.label_interface import LabelInterface

    try:
        li = LabelInterface(config)
        control = li.get_control(FROM_NAME)
    except Exception as err:  # the SDK raises several kinds; all mean "not our config"
        return (f"the project's labelling config is not usable: {str(err)[:300]} (fix: use the config written by "
                f"`autorater label`, labelstudio/config.xml)")
    if control.tag != "TimelineLabels" or TO_NAME not in control.to_name or \
            not {"success", "failure"} <= set(control.labels):
        return (f"the labelling config needs <TimelineLabels name='{FROM_NAME}' toName='{TO_NAME}'> with labels "
                f"success and failure (fix: use labelstudio/config.xml)")
    return None


def _check_task(media_root: Path, task: Any, i: int) -> tuple:
    """A /predict task checked field by field: (id, video path, instruction, takeover_s, fps_override or None)."""
    where = f"task {i}"
    data = task.get("data") if isinstance(task, dict) else None
    if not isinstance(data, dict):
        raise HTTPException(422, f"{where}: data needs 'video' (a path under the media root) and 'instruction'")
    video, instruction = data.get("video"), data.get("instruction")
    if not isinstance(video, str) or not 0 < len(video) <= MAX_PATH:
        raise field_error(where, "data.video", video, f"must be a path of 1..{MAX_PATH} characters",
                          "send the video's path under the media root")
    if not isinstance(instruction, str) or not instruction.strip() or len(instruction) > MAX_TEXT:
        raise field_error(where, "data.instruction", instruction, f"must be a non-blank string of up to {MAX_TEXT} "
                                                                  f"characters", "send the scenario's instruction")
    takeover = data.get("takeover_s")
    if takeover is not None and number_in(takeover, 0.0, MAX_TAKEOVER_S) is None:
        raise field_error(where, "data.takeover_s", takeover, f"must be a number in 0..{MAX_TAKEOVER_S:g}",
                          "seconds from the first frame, or leave it out")
    fps_range = f"{DEFAULT_LIMITS.min_fps:g}..{DEFAULT_LIMITS.max_fps:g}"
    for name in ("fps", "fps_override"):
        if data.get(name) is not None and checked_fps(data[name]) is None:
            raise field_error(where, f"data.{name}", data[name], f"must be a number in {fps_range}",
                              "leave it out: the video's own frame rate is used" if name == "fps" else
                              "the frame rate Label Studio plays the video at, or leave it out")
    tid = task.get("id", i)
    if bounded_id(tid) is None:
        raise field_error(where, "id", tid, "must be an integer or a string of up to 128 characters",
                          "send Label Studio's task id")
    return (str(tid), resolve_media(media_root, video), instruction, number_in(takeover, 0.0, MAX_TAKEOVER_S) or 0.0,
            checked_fps(data.get("fps_override")))


def _predict_tasks(rater: ServiceRater, tasks: list[tuple], deadline: float) -> list[dict]:
    """Predictions (Label Studio's format) for checked tasks, one after another, all within one deadline; a task
    whose video cannot be rated gets an error entry, the others are still answered."""
    results = []
    for tid, path, instruction, takeover, fps_override in tasks:
        try:
            r = rater.rate(path, instruction, takeover, deadline)
            fps, frames = _timing(r, fps_override, rater.limits.max_frames)
        except HTTPException as err:
            if err.status_code == 504:  # the request's deadline: nothing more can be answered in time
                raise
            results.append({"model_version": rater.name, "score": 0.0, "result": [],
                            "error": f"task {tid}: {err.detail}"})
            continue
        confidence = r["p_success"] if r["outcome"] == "success" else 1 - r["p_success"]
        region = marker_region(r["outcome"], r["marker_s"], fps, frames, f"{tid}-model", score=confidence)
        results.append({"model_version": r["model"], "score": round(confidence, 6), "result": [region]})
    return results


def _timing(rating: dict, fps_override: float | None, max_frames: int) -> tuple[float, int]:
    """(fps, frames) the marker is counted in: the video's own, or the task's explicit override, which must give a
    frame count within the limits over the video's duration."""
    if fps_override is None:
        return rating["fps"], rating["frames"]
    frames = round(rating["duration_s"] * fps_override)
    if not 1 <= frames <= max_frames:
        raise HTTPException(422, f"data.fps_override {fps_override:g} over the video's {rating['duration_s']:.3f} s "
                                 f"gives {frames} frames, outside 1..{max_frames} (fix: send the rate Label Studio "
                                 f"plays the video at, or leave it out)")
    return fps_override, frames


__all__ = ["MAX_LABEL_CONFIG", "MAX_TASKS", "PredictRequest", "SetupRequest", "label_config_problem",
           "ml_backend_router"]
