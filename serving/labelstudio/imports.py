"""Import a suite from a Label Studio video project: its JSON export, and the videos under a media root.

Each task becomes a continuation, each of its annotations one annotator's label (``annotations.jsonl``, with the
annotation's id kept as ``ls_annotation_id``), and an annotation marked as ground truth in Label Studio also the
continuation's reference (``references.jsonl``). Nothing is dropped silently: a cancelled (skipped) annotation, a
label with no outcome or a video that cannot be found is listed with its task, its annotation and the fix.

Two kinds of labelling config are read:

- the product's own (``formats.labeling_config``): one ``TimelineLabels`` region of one frame, labelled
  ``success`` or ``failure``;
- the common "choices + timeline" configs: the outcome from a ``Choices`` control (its choice, or a region's label,
  one of the words of success or failure: ``Success``, ``Failed``, ``pass``, ``yes``...; add your own with
  ``success_labels`` / ``failure_labels``), the marker from the earliest ``TimelineLabels`` range (frames) or
  audio-synced ``Labels`` region (seconds), and a failure mode from a ``Choices`` control whose name holds "mode"
  or "fail".

Frames become seconds at the frame rate Label Studio played the video at: the ``<Video frameRate>``. It is the task's
``fps`` where the config says ``frameRate="$fps"`` (as the product's does and its tasks carry), else pass
``frame_rate``; without either, Label Studio's default of 24 is assumed, with a warning.

The task's data gives the rest: ``instruction`` (or ``prompt``, ``text``), ``agent_id`` (or ``agent``; default
``unknown``), ``scenario_id`` (or ``scenario``; without it each task is its own scenario), ``continuation_id``
(default ``ls-<task id>``), ``takeover_s``, ``category``, ``tags``; other fields are kept in the continuation's
metadata. Videos are found under ``media_root``: local-files URLs (``/data/local-files/?d=PATH``: the root is
Label Studio's ``LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT``), uploads (``/data/upload/...``: the root is its media
folder), paths and URLs (their path under the root, else their file name).

Example:
    >>> report = import_labelstudio("export.json", media_root="/data/videos", out="my-suite")  # doctest: +SKIP
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path, PurePosixPath
from urllib.parse import parse_qs, unquote, urlparse

from autorater.data.imports.common import ImportReport, Label, SourceRow
from autorater.data.imports.to_suite import import_rows
from autorater.data.paths import printable
from autorater.data.suite import Problem
from autorater.serving.labelstudio.client import public_url
from autorater.serving.labelstudio.formats import annotator_id, checked_fps, frame_to_seconds, read_export

SUCCESS_WORDS = ("success", "successful", "succeeded", "pass", "passed", "yes", "true", "done", "completed")
FAILURE_WORDS = ("failure", "failed", "fail", "no", "false", "not done", "incomplete")
LABEL_STUDIO_FRAME_RATE = 24.0  # the <Video frameRate> default
VIDEO_SUFFIXES = (".mp4", ".webm", ".avi", ".mkv", ".mov", ".m4v", ".ogv", ".mpg", ".mpeg", ".wmv")
_KEYS = {"instruction": ("instruction", "prompt", "text"), "agent": ("agent_id", "agent"),
         "scenario": ("scenario_id", "scenario"), "category": ("category",), "tags": ("tags",),
         "continuation_id": ("continuation_id",), "takeover_s": ("takeover_s",)}


def import_labelstudio(export: str | os.PathLike, media_root: str | os.PathLike, out: str | os.PathLike, *,
                       frame_rate: float | None = None, success_labels=(), failure_labels=(), link: bool = False,
                       strict: bool = False, name: str | None = None, version: str | None = None,
                       source: str | None = None, stamp: bool = False,
                       extra_files: dict[str, Path] | None = None) -> ImportReport:
    """Import a Label Studio JSON export into the suite folder ``out`` (created, or grown: a re-run adds only the new
    tasks and annotations, and takes an annotation changed since as an update).

    Args:
        export: the project's JSON export (Export > JSON; not JSON-MIN or CSV).
        media_root: the folder its videos are under.
        frame_rate: the ``<Video frameRate>`` of the project (default: each task's ``fps``, else 24).
        success_labels, failure_labels: your project's names of the outcomes, beside the known words.
        link, strict, name, version: as ``autorater.data.imports.to_suite.import_rows``.
        source: where the export came from, for a new suite's ``suite.json`` (default: the export's path).
        stamp, extra_files: as ``autorater.data.imports.to_suite.import_rows``.

    Raises:
        ValueError: the export cannot be read, or ``frame_rate`` is not a frame rate (0.1..1000).
    """
    export = Path(export)
    if frame_rate is not None and checked_fps(frame_rate) is None:
        raise ValueError(f"--frame-rate {printable(str(frame_rate))[:40]} is not a frame rate (fix: pass the "
                         f"<Video frameRate> of your project, a number from 0.1 to 1000; Label Studio's default is 24)")
    tasks = read_export(export)
    words = {**{w: "success" for w in SUCCESS_WORDS}, **{w: "failure" for w in FAILURE_WORDS},
             **{w.strip().lower(): "success" for w in success_labels},
             **{w.strip().lower(): "failure" for w in failure_labels}}
    reader = _ExportReader(export.name, Path(media_root), frame_rate, words)
    for i, task in enumerate(tasks):
        reader.task(task, i)
    report = import_rows(reader.rows, out, source=public_url(source) if source else str(export),
                         problems=reader.problems, warnings=reader.warnings, link=link, strict=strict, name=name,
                         version=version, stamp=stamp, extra_files=extra_files)
    report.rows, report.unit = len(reader.rows) + len(reader.problems), "annotation(s) and unannotated task(s)"
    return report


class _ExportReader:
    """Tasks in, ``SourceRow`` s out: one per annotation (one per task without any), or a problem."""

    def __init__(self, file: str, media_root: Path, frame_rate: float | None, words: dict[str, str]):
        self.file, self.media_root, self.frame_rate, self.words = file, media_root, frame_rate, words
        self.rows: list[SourceRow] = []
        self.problems: list[Problem] = []
        self.warnings: list[Problem] = []
        self.assumed_rate = self.no_agent = False

    def problem(self, where: str, message: str, fix: str, warning: bool = False) -> None:
        (self.warnings if warning else self.problems).append(Problem(self.file, None, f"{where}: {message}", fix))

    def task(self, task, index: int) -> None:
        task = task if isinstance(task, dict) else {}
        task_id = task.get("id", index)
        where = f"task {_short(task_id)}"
        data = task.get("data")
        annotations = task.get("annotations") or []
        if not isinstance(data, dict) or not isinstance(annotations, list):
            self.problem(where, "no 'data' object or 'annotations' list", "export the project as JSON, unedited")
            return
        base = self.base_row(data, task_id, where)
        if base is None:
            return
        labelled = False
        for ai, ann in enumerate(annotations):
            ann = ann if isinstance(ann, dict) else {}
            awhere = f"{where}, annotation {_short(ann.get('id', ai))}"
            if ann.get("was_cancelled") is True:
                self.problem(awhere, "cancelled (skipped) by the annotator: not a label", "ask another annotator for "
                                                                                          "this task", warning=True)
                continue
            label = self.label(ann, data, awhere)
            if label is None:
                continue
            labelled = True
            gold = Label(label.outcome, label.marker_s, label.failure_mode) if ann.get("ground_truth") is True \
                else None
            if gold is not None:
                label.extra["ground_truth"] = True
            self.rows.append(_replace(base, label=label, gold=gold, where=awhere))
        if not labelled:
            self.rows.append(base)

    def base_row(self, data: dict, task_id, where: str) -> SourceRow | None:
        found = _pick(data, _KEYS)
        video_key = "video" if isinstance(data.get("video"), str) else next(
            (k for k, v in data.items() if isinstance(v, str) and _looks_like_video(v)), None)
        if video_key is None:
            self.problem(where, f"no video in the task's data (its keys: {', '.join(map(str, data))})",
                         "import tasks whose data has 'video' (a URL or path of the video)")
            return None
        value = data[video_key]
        path = self.find_video(value)
        if path is None:
            self.problem(where, f"video {_short(value)} is not under the media root {self.media_root}",
                         "pass --media-root: Label Studio's local-files document root, or its media folder for "
                         "uploads")
            return None
        instruction = found.get("instruction")
        if not isinstance(instruction, str) or not instruction.strip():
            self.problem(where, f"no instruction in the task's data (its keys: {', '.join(map(str, data))})",
                         "add 'instruction' (what the agent was asked to do) to the tasks' data")
            return None
        agent = found.get("agent")
        if not isinstance(agent, (str, int)) or isinstance(agent, bool):
            agent = "unknown"
            if not self.no_agent:
                self.no_agent = True
                self.problem(where, "no agent_id in the task's data: its agent is 'unknown' (and so is that of "
                                    "every such task)", "add 'agent_id' to the tasks' data", warning=True)
        takeover = found.get("takeover_s")
        takeover = float(takeover) if isinstance(takeover, (int, float)) and not isinstance(takeover, bool) and \
            math.isfinite(takeover) and takeover >= 0 else None
        tags = found.get("tags")
        tags = [str(t) for t in tags if isinstance(t, (str, int))] if isinstance(tags, list) else \
            [t.strip() for t in tags.split(",") if t.strip()] if isinstance(tags, str) else []
        cid = found.get("continuation_id")
        used = {video_key, *(k for keys in _KEYS.values() for k in keys)}
        metadata = {"ls_task_id": task_id, **{k: v for k, v in data.items() if k not in used}}
        scenario = found.get("scenario")
        return SourceRow(self.file, None, path, str(value), instruction.strip(), str(agent), root=self.media_root,
                         scenario=str(scenario) if isinstance(scenario, (str, int)) else None,
                         continuation_id=cid if isinstance(cid, str) and cid.strip() else f"ls-{_short(task_id)}",
                         takeover_s=takeover, category=found.get("category") if isinstance(found.get("category"), str)
                         else None, tags=tags, metadata=metadata, where=where)

    def find_video(self, value: str) -> Path | None:
        """The first candidate path under the media root that exists (inside the root or not: the import refuses one
        that leads out, naming it, rather than looking further)."""
        for relative in _candidates(value):
            path = self.media_root / relative
            try:
                if relative and (path.is_file() or path.is_symlink() or (path.exists() and not path.is_dir())):
                    return path
            except OSError:  # a name too long, a loop of symlinks: the import names the problem
                return path
        return None

    def label(self, ann: dict, data: dict, where: str) -> Label | None:
        result = ann.get("result")
        if not isinstance(result, list):
            self.problem(where, "'result' is not a list", "export the project as JSON, unedited")
            return None
        fps = self.frame_rate or checked_fps(data.get("fps"))
        outcomes, markers, modes, other = set(), [], [], {}
        for region in result:
            if not isinstance(region, dict):
                continue
            kind, name = region.get("type"), str(region.get("from_name", ""))
            value = region.get("value") if isinstance(region.get("value"), dict) else {}
            names = value.get("choices") if kind == "choices" else value.get(kind) if kind in ("timelinelabels",
                                                                                               "labels") else None
            names = [str(n) for n in names] if isinstance(names, list) else []
            mapped = {self.words.get(n.strip().lower()) for n in names} - {None}
            outcomes |= mapped
            if kind == "timelinelabels":
                for r in value.get("ranges") or []:
                    start = r.get("start") if isinstance(r, dict) else None
                    if _finite(start) and start >= 1:
                        if fps is None:
                            fps = LABEL_STUDIO_FRAME_RATE
                            self.warn_rate(where)
                        markers.append(frame_to_seconds(start, fps))
            elif kind == "labels" and _finite(value.get("start")) and value["start"] >= 0:
                markers.append(round(float(value["start"]), 6))  # audio-synced regions are in seconds
            elif kind == "choices" and not mapped and re.search("mode|fail", name, re.I) and names:
                modes.append(names[0])
            elif not mapped:
                other[name or kind or "?"] = value.get("text", names or value) if kind != "videorectangle" else \
                    "videorectangle"
        if len(outcomes) != 1:
            message = "both success and failure" if outcomes else "no outcome (no choice or label that means " \
                                                                  "success or failure)"
            self.problem(where, message, "label it once; name your project's outcomes with --success-label / "
                                         "--failure-label")
            return None
        outcome = outcomes.pop()
        if len(markers) > 1:
            self.problem(where, f"{len(markers)} marked moments; the earliest ({min(markers):g} s) is the marker",
                         "a marker is one moment: the first of success or of failure", warning=True)
        extra = {k: ann[k] for k in ("created_at", "lead_time") if isinstance(ann.get(k), (str, int, float))}
        if isinstance(ann.get("updated_at"), str):
            extra["ls_updated_at"] = ann["updated_at"][:64]
        if other:
            extra["ls_other"] = other
        ann_id = ann.get("id")
        return Label(outcome, min(markers) if markers else None, modes[0] if modes and outcome == "failure" else None,
                     annotator_id=annotator_id(ann.get("completed_by")),
                     label_id=ann_id if isinstance(ann_id, (int, str)) and not isinstance(ann_id, bool) else None,
                     extra=extra)

    def warn_rate(self, where: str) -> None:
        if not self.assumed_rate:
            self.assumed_rate = True
            self.problem(where, f"the task has no fps: its timeline frames are read at {LABEL_STUDIO_FRAME_RATE:g} "
                                f"fps, Label Studio's default (and so are those of every such task)",
                         "pass --frame-rate with your project's <Video frameRate>", warning=True)


def _pick(data: dict, keys: dict[str, tuple[str, ...]]) -> dict:
    return {field: next(data[k] for k in names if data.get(k) is not None) for field, names in keys.items()
            if any(data.get(k) is not None for k in names)}


def _replace(row: SourceRow, **changes) -> SourceRow:
    from dataclasses import replace

    return replace(row, **changes)


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _short(value, limit: int = 60) -> str:
    text = printable(str(value))
    return text if len(text) <= limit else text[:limit] + "..."


def _looks_like_video(value: str) -> bool:
    return value.startswith(("/data/local-files/", "/data/upload/")) or \
        PurePosixPath(urlparse(value).path).suffix.lower() in VIDEO_SUFFIXES


def _candidates(value: str) -> list[str]:
    """Paths under the media root that a task's video may be, most specific first (none that leaves the root)."""
    url = urlparse(value)
    if url.path.startswith("/data/local-files"):
        paths = [unquote(d) for d in parse_qs(url.query).get("d", [])]
    else:
        path = unquote(url.path).lstrip("/")
        path = path[len("data/"):] if path.startswith("data/upload/") else path  # <media>/upload/<project>/<file>
        paths = [path, PurePosixPath(path).name]
        name = PurePosixPath(path).name
        if path.startswith("upload/") and re.match(r"^[0-9a-f]{8}-.", name):  # stored as <hash>-<original name>
            paths.append(name[9:])
    paths = [p.lstrip("/") for p in paths]
    return list(dict.fromkeys(p for p in paths if p and ".." not in PurePosixPath(p).parts and "\\" not in p))


__all__ = ["FAILURE_WORDS", "LABEL_STUDIO_FRAME_RATE", "SUCCESS_WORDS", "import_labelstudio"]
