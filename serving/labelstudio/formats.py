"""The human hand-off in Label Studio's formats: labelling config, task import file, export reader.

One marker per continuation, as annotators already place it: a ``TimelineLabels`` region of one
frame labelled ``success`` or ``failure`` on the video, whose ``frameRate`` comes from the task.

Frames vs seconds. SUITE_FORMAT times are seconds from the first frame, frame ``i`` (0-based)
shown at ``i / fps``. Label Studio's video timeline numbers frames from 1 (its video results
start at ``"frame": 1`` and a timeline region over the first 15 frames is ``{"start": 1, "end":
15}``), so frame ``f`` of Label Studio is shown at ``(f - 1) / fps``:

    >>> seconds_to_frame(0.0, fps=8.0), seconds_to_frame(1.0, fps=8.0), frame_to_seconds(9, fps=8.0)
    (1, 9, 1.0)

Tasks carry ``fps`` and ``frames`` (the video's frame count) so that ``frameRate="$fps"`` plays
the video at its own rate and an export can be checked and converted back without the video.

The import file holds the human queue (``decision: human``) with the model's guess as a
pre-annotation (``predictions``: ``model_version``, ``score`` = the model's confidence in its
label, the marker region), so annotators start from it and can sort by confidence; and the audit
slice *without* the model's guess, so that the audit, which measures the model, is not anchored
on it. Everything is checked offline with ``label_studio_sdk.label_interface.LabelInterface``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from autorater.data.files import json_text, write_text_atomic
from autorater.data.suite import Annotation, Suite
from autorater.data.video import DEFAULT_LIMITS, VideoError, video_info
from autorater.serving.fields import MAX_ID_CHARS, bounded_id, has_surrogates, integer_in, number_in, safe_text

FROM_NAME, TO_NAME, TEXT_NAME = "outcome", "video", "instruction"
OUTCOMES = ("success", "failure")
CONFIG_FILE, TASKS_FILE = "config.xml", "tasks.json"


def labeling_config(timeline_height: int = 80) -> str:
    """The Label Studio labelling config: the instruction, the video at the task's fps, one marker."""
    return f"""<View>
  <Header value="Did the agent do what the instruction says? Place ONE marker on the first frame of success or of failure (a timeout: the last frame)."/>
  <Text name="{TEXT_NAME}" value="$instruction"/>
  <Video name="{TO_NAME}" value="$video" frameRate="$fps" timelineHeight="{int(timeline_height)}"/>
  <TimelineLabels name="{FROM_NAME}" toName="{TO_NAME}">
    <Label value="success" background="#2ca02c"/>
    <Label value="failure" background="#d62728"/>
  </TimelineLabels>
</View>
"""  # noqa: E501 (the question is one line of the XML)


def label_interface(config: str | None = None):
    """``label_studio_sdk``'s ``LabelInterface`` for the config (validated: raises if Label Studio would refuse it)."""
    from label_studio_sdk.label_interface import LabelInterface

    li = LabelInterface(config or labeling_config())
    li.validate()
    return li


def seconds_to_frame(marker_s: float, fps: float, frames: int | None = None) -> int:
    """Label Studio's 1-based frame showing the moment ``marker_s`` (clipped to the video when ``frames`` is given)."""
    f = int(math.floor(marker_s * fps + 0.5)) + 1
    return max(1, min(f, frames)) if frames else max(1, f)


def frame_to_seconds(frame: float, fps: float) -> float:
    """Seconds from the first frame of Label Studio's 1-based ``frame``."""
    return round((float(frame) - 1.0) / fps, 6)


def marker_region(outcome: str, marker_s: float, fps: float, frames: int, region_id: str,
                  score: float | None = None) -> dict:
    """One ``timelinelabels`` result: a one-frame region at the marker."""
    f = seconds_to_frame(marker_s, fps, frames)
    region = {"id": region_id, "from_name": FROM_NAME, "to_name": TO_NAME, "type": "timelinelabels",
              "value": {"ranges": [{"start": f, "end": f}], "timelinelabels": [outcome]}}
    if score is not None:
        region["score"] = round(float(score), 6)
    return region


def build_tasks(suite: Suite, labels: list[dict], video_url_prefix: str | None = None) -> list[dict]:
    """Import tasks for the continuations that need a human (the queue and the audit slice).

    Args:
        suite: the suite being labelled.
        labels: rows of ``labels.jsonl`` (serving.labelling.label).
        video_url_prefix: prepended to the suite-relative video path. Default
            ``/data/local-files/?d=<suite folder name>/``: Label Studio's local-files storage with
            ``LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT`` set to the folder that holds the suite.
    """
    prefix = video_url_prefix if video_url_prefix is not None else f"/data/local-files/?d={suite.root.name}/"
    tasks = []
    for row in labels:
        if row["decision"] != "human" and not row.get("audit"):
            continue
        cid = row["continuation_id"]
        c = suite.get(cid)
        try:
            info = video_info(suite.video_path(cid))
            fps, frames = info.fps, info.num_frames
        except VideoError:
            fps, frames = None, None  # a broken video still goes to people; they will say it is broken
        data = {"continuation_id": cid, "video": prefix + c.video, "instruction": suite.instruction_of(cid),
                "fps": fps if fps is not None else 24.0, "frames": frames, "scenario_id": c.scenario_id,
                "agent_id": c.agent_id, "takeover_s": suite.takeover_of(cid),
                "queue": "audit" if row.get("audit") else "human", "reason": row.get("reason", "audit")}
        task = {"data": data}
        if row["decision"] == "human" and row.get("p_success") is not None and frames:
            p = float(row["p_success"])
            outcome = row["model_outcome"]
            confidence = p if outcome == "success" else 1 - p
            task["predictions"] = [{
                "model_version": row["model"], "score": round(confidence, 6),
                "result": [marker_region(outcome, float(row["model_marker_s"]), fps, frames, f"{cid}-model",
                                         score=confidence)]}]
        tasks.append(task)
    return tasks


def validate_tasks(tasks: list[dict], config: str | None = None) -> list[str]:
    """Problems Label Studio would raise with these tasks (empty when they import cleanly)."""
    li = label_interface(config)
    problems = []
    for i, task in enumerate(tasks):
        missing = [obj.value_name for obj in li.objects if obj.value_is_variable and task["data"].get(obj.value_name)
                   is None]
        if missing:
            problems.append(f"task {i} ({task['data'].get('continuation_id')}): data lacks {missing}")
        for pred in task.get("predictions", []):
            for err in li.validate_prediction(pred, return_errors=True):
                problems.append(f"task {i} ({task['data'].get('continuation_id')}): prediction: {err}")
    return problems


def labelstudio_texts(suite: Suite, labels: list[dict],
                      video_url_prefix: str | None = None) -> tuple[dict[str, str], int]:
    """(``{config.xml: text, tasks.json: text}``, the task count) for the human queue, validated with the SDK."""
    config = labeling_config()
    tasks = build_tasks(suite, labels, video_url_prefix)
    problems = validate_tasks(tasks, config)
    if problems:
        raise ValueError("the Label Studio tasks do not validate (a bug: please report it): " + "; ".join(problems[:5]))
    return {CONFIG_FILE: config, TASKS_FILE: json_text(tasks)}, len(tasks)


def write_labelstudio_files(folder: str | os.PathLike, suite: Suite, labels: list[dict],
                            video_url_prefix: str | None = None) -> int:
    """Write ``config.xml`` and ``tasks.json`` (validated with the SDK) into ``folder``; returns the task count."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    texts, n = labelstudio_texts(suite, labels, video_url_prefix)
    for name, text in texts.items():
        write_text_atomic(folder / name, text)
    return n


def read_tasks(path: str | os.PathLike) -> list:
    """The tasks of an import file (``tasks.json``); ValueError naming the file when it cannot be read."""
    path = Path(path)
    try:
        tasks = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as err:
        raise ValueError(f"cannot read {path}: {str(err)[:200]} (fix: rerun `autorater label --resume` to "
                         f"rewrite it)") from None
    return tasks if isinstance(tasks, list) else []


# ----------------------------------------------------------------------------------------------
# Export


@dataclass
class ExportProblem:
    """Something wrong in an export: ``level`` "error" (the label was not taken) or "warning" (taken, noted)."""

    level: str
    where: str  # "task 12 (c000913), annotation 345"
    message: str
    fix: str = ""

    def __str__(self) -> str:
        return f"{self.level}: {self.where}: {self.message}" + (f" (fix: {self.fix})" if self.fix else "")


@dataclass
class ParsedExport:
    annotations: list[Annotation] = field(default_factory=list)
    problems: list[ExportProblem] = field(default_factory=list)
    cancelled: int = 0

    @property
    def errors(self) -> list[ExportProblem]:
        return [p for p in self.problems if p.level == "error"]


MAX_ANNOTATOR_CHARS = 120


def annotator_id(completed_by) -> str:
    """The suite's ``annotator_id`` of Label Studio's ``completed_by`` (a user id, or an object with ``email``).

    Distinct people stay distinct: an id is never cut; one longer than ``MAX_ANNOTATOR_CHARS`` is shortened to its
    start plus a hash of the whole.
    """
    if isinstance(completed_by, dict):
        who = completed_by.get("email") or completed_by.get("id")
    else:
        who = completed_by
    if not isinstance(who, (str, int)) or isinstance(who, bool):
        return "ls-unknown"
    text = safe_text(str(who))  # a lone surrogate is written as its escape: the row stays valid UTF-8
    if len(text) > MAX_ANNOTATOR_CHARS:
        text = f"{text[:80]}...{hashlib.sha256(text.encode('utf-8')).hexdigest()[:16]}"
    return f"ls-{text}"


def parse_export(path: str | os.PathLike, known: dict[str, dict]) -> ParsedExport:
    """Human labels from a Label Studio JSON export (a list of tasks with their ``annotations``).

    Args:
        path: the export file.
        known: continuation id -> {"fps", "frames"} of every continuation that may be labelled.

    Every annotation becomes one SUITE_FORMAT ``Annotation`` (``source`` "human", ``ls_annotation_id``
    kept), or a problem: unknown continuation id, cancelled (skipped), no marker, several markers, a
    label other than success/failure, a marker outside the video, several differing annotations of one
    annotator on one task (the latest is kept, by ``updated_at`` then id).
    """
    path = Path(path)
    tasks = read_export(path)
    parsed = ParsedExport()
    for ti, task in enumerate(tasks):
        task = task if isinstance(task, dict) else {}
        data = task.get("data") if isinstance(task.get("data"), dict) else {}
        cid = data.get("continuation_id")
        where = f"{path.name}: task {_short(task.get('id', ti))} (index {ti}, {_short(cid)})"
        if not isinstance(cid, str) or cid not in known:
            parsed.problems.append(ExportProblem("error", where, f"unknown continuation_id {_short(cid)!r}",
                                                 "import tasks built by `autorater label` for this suite"))
            continue
        fps, frames, note = task_timing(data, known[cid])
        annotations = task.get("annotations") or []
        if fps is None or not isinstance(annotations, list):
            parsed.problems.append(ExportProblem("error", where, "the task has no usable fps or annotations list",
                                                 "export the project as JSON from Label Studio, unedited"))
            continue
        if known[cid].get("note"):  # what the product wrote (tasks.json) no longer matches the video
            parsed.problems.append(ExportProblem("warning", where, known[cid]["note"], "the video was replaced or "
                                                 "tasks.json edited since `autorater label`: label the version again"))
        if note:
            parsed.problems.append(ExportProblem("warning", where, note,
                                                 "re-import the tasks written by `autorater label`"))
        by_annotator: dict[str, list[tuple[tuple, Annotation, str]]] = {}
        for ai, ann in enumerate(annotations):
            ann = ann if isinstance(ann, dict) else {"result": None}
            awhere = f"{where}, annotation {_short(ann.get('id', ai))} (index {ai})"
            if ann.get("was_cancelled") is True:
                parsed.cancelled += 1
                parsed.problems.append(ExportProblem("warning", awhere, "cancelled (skipped) by the annotator",
                                                     "ask another annotator for this task"))
                continue
            label = annotation_from_result(ann, cid, fps, frames, awhere, parsed.problems)
            if label is None:
                continue
            label.extra["_where"] = awhere  # named again if a later check refuses it (not written: a "_" key)
            key = (str(ann.get("updated_at") or ann.get("created_at") or ""), str(ann.get("id", ai)))
            by_annotator.setdefault(label.annotator_id, []).append((key, label, awhere))
        for who, items in by_annotator.items():
            items.sort(key=lambda t: t[0])
            latest = items[-1][1]
            differing = {(a.outcome, a.marker_s) for _, a, _ in items}
            if len(differing) > 1:
                parsed.problems.append(ExportProblem(
                    "warning", items[-1][2], f"annotator {who} labelled this task {len(items)} times differently "
                    f"({sorted(o for o, _ in differing)}); the latest is kept", "remove the stale annotation"))
            parsed.annotations.append(latest)
    return parsed


def read_export(path: str | os.PathLike) -> list:
    """The tasks of a Label Studio JSON export; a ValueError that names the file and the fix if it is not one."""
    path = Path(path)
    try:
        tasks = json.loads(path.read_text(encoding="utf-8"), parse_constant=_refuse_constant)
    except RecursionError:
        raise ValueError(f"cannot read Label Studio export {path}: it is nested too deeply to be an export "
                         f"(fix: export the project as JSON from Label Studio, unedited)") from None
    except (OSError, UnicodeDecodeError, ValueError) as err:  # JSONDecodeError, and NaN / Infinity
        raise ValueError(f"cannot read Label Studio export {path}: {err} (fix: export the project as JSON, "
                         f"not JSON_MIN or CSV)") from None
    if not isinstance(tasks, list):
        raise ValueError(f"{path}: a Label Studio JSON export is a list of tasks, got {type(tasks).__name__} "
                         f"(fix: export the project as JSON)")
    return tasks


def _short(value, limit: int = 60) -> str:
    text = safe_text(str(value))
    return text if len(text) <= limit else text[:limit] + "..."


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def checked_fps(value) -> float | None:
    """A frame rate as a float if it is a plain number within the video limits, else None (never raises)."""
    return number_in(value, DEFAULT_LIMITS.min_fps, DEFAULT_LIMITS.max_fps)


def checked_frames(value) -> int | None:
    """A frame count if it is a plain positive integer within the video limits, else None (never raises)."""
    return integer_in(value, 1, DEFAULT_LIMITS.max_frames)


def task_timing(data: dict, known: dict) -> tuple[float | None, int | None, str]:
    """(fps, frames, a note) of a task: what the product knows of the video (``known``: the video's own, read from
    it; ``known["source"]`` names another source, e.g. ``tasks.json`` where the video cannot be read) wins over what
    the export or webhook says, which is used only when nothing else is known; the note says when the two differ,
    each value named by its source."""
    known_fps, known_frames = checked_fps(known.get("fps")), checked_frames(known.get("frames"))
    given_fps, given_frames = checked_fps(data.get("fps")), checked_frames(data.get("frames"))
    source = known.get("source", "the video")
    note = ""
    if known_fps is not None and data.get("fps") is not None and (given_fps is None or abs(given_fps - known_fps) >
                                                                  1e-3 * known_fps):
        note = f"the task says fps {_short(data.get('fps'))}, {source} {known_fps:g}; {source}'s is used"
    elif known_frames is not None and data.get("frames") is not None and given_frames != known_frames:
        note = f"the task says {_short(data.get('frames'))} frames, {source} {known_frames}; {source}'s is used"
    if known_fps is not None:
        return known_fps, known_frames or given_frames, note
    return given_fps, known_frames or given_frames, note


def annotation_from_result(ann: dict, cid: str, fps: float, frames: int | None, where: str,
                           problems: list[ExportProblem]) -> Annotation | None:
    """One Label Studio annotation of continuation ``cid`` as an ``Annotation``; None (and a problem) if unusable."""
    result = ann.get("result")
    if result is not None and not isinstance(result, list):
        problems.append(ExportProblem("error", where, "'result' is not a list", "export the project as JSON"))
        return None
    regions = [r for r in result or [] if isinstance(r, dict) and r.get("type") == "timelinelabels"
               and r.get("from_name") == FROM_NAME]
    if not regions:
        problems.append(ExportProblem("error", where, "no marker", "place one success or failure marker"))
        return None
    if len(regions) > 1:
        problems.append(ExportProblem("error", where, f"{len(regions)} markers; the format takes one",
                                      "keep only the first moment of success or failure"))
        return None
    value = regions[0].get("value")
    value = value if isinstance(value, dict) else {}
    names, ranges = value.get("timelinelabels") or [], value.get("ranges") or []
    if not isinstance(names, list) or not isinstance(ranges, list):
        problems.append(ExportProblem("error", where, "the marker region's value is malformed",
                                      "use the labelling config written by `autorater label`"))
        return None
    if len(names) != 1 or names[0] not in OUTCOMES:
        problems.append(ExportProblem("error", where, f"label {names} is not one of {list(OUTCOMES)}",
                                      "use the labelling config written by `autorater label`"))
        return None
    if len(ranges) != 1:
        problems.append(ExportProblem("error", where, f"{len(ranges)} ranges in the marker region; expected one",
                                      "place one marker"))
        return None
    r0 = ranges[0] if isinstance(ranges[0], dict) else {}
    start, end = (number_in(r0.get(k), -1e300, 1e300) for k in ("start", "end"))  # bounded before any arithmetic
    if start is None or end is None:
        problems.append(ExportProblem("error", where, f"marker range {_short(ranges[0])} has no numeric start/end "
                                                      f"(a frame number)", "place one marker"))
        return None
    if start < 1 or (frames and start > frames):
        problems.append(ExportProblem("error", where, f"marker at frame {start:g} is outside the video "
                                                      f"(frames 1..{frames})", "move the marker onto the video"))
        return None
    if end != start:
        problems.append(ExportProblem("warning", where, f"marker spans frames {start:g}-{end:g}; its first frame "
                                                        f"is taken", "a marker is one frame"))
    marker_s = frame_to_seconds(start, fps)
    if not math.isfinite(marker_s) or marker_s > DEFAULT_LIMITS.max_duration_s:
        problems.append(ExportProblem("error", where, f"marker at frame {start:g} at {fps:g} fps is not a time in a "
                                                      f"video", "check the task's fps and the marker"))
        return None
    created, updated, ann_id = ann.get("created_at"), ann.get("updated_at"), ann.get("id")
    if ann_id is not None and bounded_id(ann_id) is None:
        problems.append(ExportProblem("error", where, f"annotation id {_short(ann_id)} is not an id (an integer, or a "
                                                      f"string of up to {MAX_ID_CHARS} characters)",
                                      "export the project from Label Studio, unedited"))
        return None
    unwritable = next(((name, value) for name, value in (("created_at", created), ("updated_at", updated))
                       if isinstance(value, str) and has_surrogates(value)), None)
    if unwritable is not None:
        problems.append(ExportProblem("error", where, f"{unwritable[0]} {_short(unwritable[1])} holds text UTF-8 "
                                                      f"cannot hold (a lone surrogate)",
                                      "export the project from Label Studio, unedited"))
        return None
    extra = {"ls_annotation_id": ann_id}
    if isinstance(updated, str):
        extra["ls_updated_at"] = updated[:64]
    return Annotation(continuation_id=cid, annotator_id=annotator_id(ann.get("completed_by")), outcome=names[0],
                      marker_s=marker_s, created_at=created[:64] if isinstance(created, str) else None,
                      source="human", extra=extra)


def annotations_to_export(tasks: list[dict], annotations: list[Annotation], start_id: int = 1) -> list[dict]:
    """A Label Studio JSON export of ``tasks`` answered with ``annotations`` (one per annotator and task).

    What Label Studio writes when its annotators label the imported tasks (``id``, ``completed_by``,
    ``result``, ``was_cancelled``, ``created_at``, ...), used by the demo, where the generator's
    simulated annotators stand in for people, and by the tests.
    """
    by_cid: dict[str, list[Annotation]] = {}
    for a in annotations:
        by_cid.setdefault(a.continuation_id, []).append(a)
    export, next_id = [], start_id
    for ti, task in enumerate(tasks, start=1):
        data = task["data"]
        anns = []
        for a in by_cid.get(data["continuation_id"], []):
            result = []
            if a.marker_s is not None and data.get("frames"):
                result = [marker_region(a.outcome, a.marker_s, data["fps"], data["frames"], f"r{next_id}")]
                result[0]["origin"] = "manual"
            anns.append({"id": next_id, "completed_by": a.annotator_id, "result": result, "was_cancelled": False,
                         "ground_truth": False, "created_at": "2026-11-23T12:00:00.000000Z",
                         "updated_at": "2026-11-23T12:00:00.000000Z", "lead_time": 30.0, "task": ti})
            next_id += 1
        export.append({"id": ti, "data": dict(data), "annotations": anns,
                       "predictions": copy.deepcopy(task.get("predictions", []))})
    return export


__all__ = ["ExportProblem", "ParsedExport", "annotations_to_export", "annotator_id", "build_tasks", "checked_fps",
           "labelstudio_texts",
           "checked_frames", "frame_to_seconds", "task_timing",
           "annotation_from_result", "label_interface", "labeling_config", "marker_region", "parse_export",
           "read_export", "read_tasks", "seconds_to_frame",
           "validate_tasks", "write_labelstudio_files"]
