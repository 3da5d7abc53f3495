"""Rows into a suite: what the table import (``autorater.data.imports.table``) and the Label Studio export import
(``autorater.serving.labelstudio.imports``) share once they have read their source.

Every video is probed once (it must open and decode; its frame count, frame rate, size and duration are read, and how
far its frame times stray from ``i / fps``), rows are grouped into continuations and scenarios whose ids derive from
the row's content (the video as written, the agent, the scenario), so that a re-run on a grown source adds only what
is new; each row is checked against the rows before it and against the suite already there before anything of it is
taken. The new videos are copied (or hard-linked) into ``SUITE/videos/`` and the suite's files written, all in one
change (``autorater.data.files.FolderChange``: a crash leaves the suite as it was, or with the whole import), then the
suite is validated.

Nothing of a row reaches a path before it is checked: a continuation id is a name (``autorater.data.paths``: letters,
digits, ``-_.``; ``../../x`` is a listed problem), a video is a regular file inside its folder (the videos folder, the
media root; a symlink leading out is refused), and the row's text must be writable as UTF-8 (a lone surrogate is a
listed problem for its row; the rest imports).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from autorater.data.files import LOCK_FILE, FolderChange, folder_lock, identity, recover_folder, remove_if_unused
from autorater.data.imports.common import ImportReport, Label, SourceRow
from autorater.data.paths import PathError, encodable, is_name, printable, resolve_under, unprintable
from autorater.data.suite import (
    SUITE_FILE,
    Annotation,
    Continuation,
    Problem,
    Reference,
    Scenario,
    Suite,
    SuiteFormatError,
    SuiteInfo,
    validate_suite,
)
from autorater.data.versions import with_version_tag
from autorater.data.video import VideoError, VideoInfo, read_video, video_info

DEFAULT_CATEGORY = "all"


# ----------------------------------------------------------------------------------------------
# Probing videos


@dataclass(frozen=True)
class VideoProbe:
    """What the importer learnt of a video: its container's info and how far its frame times stray from ``i / fps``
    (a variable frame rate)."""

    info: VideoInfo
    time_error_s: float


def probe_video(path: str | os.PathLike) -> VideoProbe:
    """Open, check and time a video: its info, a few frames decoded across it (a truncated file fails here), and the
    largest gap between a frame's timestamp and ``i / fps``.

    Raises:
        VideoError: naming the file.
    """
    info = video_info(path)
    read_video(path, num_frames=min(info.num_frames, 4), size=32)
    return VideoProbe(info, _time_error_s(Path(path), info.fps))


def _time_error_s(path: Path, fps: float, max_packets: int = 200_000) -> float:
    """The largest |timestamp of frame i - i / fps| in seconds, from the packets' timestamps (nothing decoded)."""
    import av

    try:
        with av.open(str(path), metadata_errors="ignore") as container:
            stream = container.streams.video[0]
            stamps = []
            for packet in container.demux(stream):
                if packet.pts is not None and packet.time_base is not None:
                    stamps.append(float(packet.pts * packet.time_base))
                if len(stamps) >= max_packets:
                    break
    except Exception:  # the frames decoded; timestamps are a nicety
        return 0.0
    if len(stamps) < 2:
        return 0.0
    stamps.sort()
    return max(abs(t - stamps[0] - i / fps) for i, t in enumerate(stamps))


# ----------------------------------------------------------------------------------------------
# Building the suite


@dataclass
class _Pending:
    """A continuation of this run: its record, where its video comes from, the first row that gave it, and whether
    it is new to the suite."""

    record: Continuation
    source: Path
    row: SourceRow
    new: bool
    identity: tuple[int, ...] | None = None  # the source as it was checked (autorater.data.files.identity)


def import_rows(rows: Iterable[SourceRow], out: str | os.PathLike, *, source: str,
                problems: list[Problem] | None = None, warnings: list[Problem] | None = None, link: bool = False,
                strict: bool = False, name: str | None = None, version: str | None = None, stamp: bool = False,
                extra_files: dict[str, Path] | None = None) -> ImportReport:
    """Check ``rows`` (probing each video once), merge them into the suite at ``out`` and validate it.

    ``problems`` and ``warnings`` found while reading the source are carried into the report.

    Args:
        stamp: tag every scenario without a ``version:`` tag with ``version:<version>`` (default: the suite's
            version), in the same change (what ``autorater suite import`` does).
        extra_files: more files written into the suite in the same change (path inside the suite -> the file).
    """
    start = time.monotonic()
    out = Path(out)
    rows = list(rows)
    report = ImportReport(out=out, source=source, rows=len(rows), linked=link, problems=list(problems or []),
                          warnings=list(warnings or []))
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out} is a file (fix: pass a folder for the suite)")
    new_folder = not out.exists()
    with folder_lock(out, "import or change of this suite", wait=True):  # a new folder too: one writer at a time
        try:
            _import_locked(rows, out, report, strict, (link, name, version, source, stamp, extra_files or {}))
        finally:
            if new_folder and not report.written:
                remove_if_unused(out)  # nothing written: no folder left behind
    report.seconds = time.monotonic() - start
    return report


def _import_locked(rows: list[SourceRow], out: Path, report: ImportReport, strict: bool, how: tuple) -> None:
    """Check the rows against the suite at ``out`` and write what is taken (``how``: the arguments of
    :meth:`_Builder.write`), then validate; the caller holds the folder's lock."""
    existing = _existing_suite(out)
    builder = _Builder(existing, report)
    for row in rows:
        builder.add(row)
    for items in (report.problems, report.warnings):
        items.sort(key=lambda p: (p.file, p.line or 0))  # in the source's order (stable: tasks keep theirs)
    if not (strict and (report.problems or report.warnings)) and (report.imported or existing is not None):
        builder.write(out, *how)
        report.written = True
        report.validation = validate_suite(out, check_videos=True)


def _existing_suite(out: Path) -> Suite | None:
    """The suite at ``out`` (the caller holds its lock); None for a new folder (empty but for the lock)."""
    recover_folder(out)  # a change a crash interrupted is finished, the temps of one that never happened removed
    if not (out / SUITE_FILE).exists():
        if any(p.name != LOCK_FILE for p in out.iterdir()):
            raise ValueError(f"{out} is a folder with files but no {SUITE_FILE} (fix: pass a new folder, or the "
                             f"suite an earlier import wrote)")
        return None
    try:
        return Suite.load(out)
    except SuiteFormatError as err:
        raise ValueError(f"the suite at {out} does not load, so nothing is added to it (fix: repair it with "
                         f"`autorater suite validate {out}`, or import into a new folder):\n{err}") from None


class _Builder:
    """Rows in, records out: continuations, scenarios, annotations and references, each row checked against the rows
    before it and against the suite already at ``out`` before anything of it is taken."""

    def __init__(self, existing: Suite | None, report: ImportReport):
        self.existing, self.report = existing, report
        old = existing or Suite(Path("."), SuiteInfo(name="", version=""), [], [])
        self.scenarios: dict[str, tuple[Scenario, SourceRow | None]] = {s.scenario_id: (s, None)
                                                                         for s in old.scenarios}
        self.pending: dict[str, _Pending] = {}
        self.annotations: list[Annotation] = list(old.annotations)  # updated in place; new ones appended
        self.labels: dict[tuple, tuple[int, SourceRow | None]] = {}  # key -> (index in annotations, row of this run)
        for i, a in enumerate(old.annotations):
            self.labels.setdefault(_label_key(a.continuation_id, a.annotator_id, a.extra.get("ls_annotation_id")),
                                   (i, None))
        self.references: dict[str, tuple[Reference, SourceRow | None]] = {r.continuation_id: (r, None)
                                                                           for r in old.references}
        self.new_references: list[Reference] = []
        self.probes: dict[Path, VideoProbe | VideoError | PathError] = {}
        self.resolved: dict[Path, Path] = {}  # a row's video -> the regular file inside its root that was probed
        self.identity: dict[Path, tuple[int, ...]] = {}  # a row's video -> the file probed (files.identity)
        self.warned: set = set()

    def problem(self, row: SourceRow, message: str, fix: str, warning: bool = False) -> None:
        where = f"{row.where}: " if row.where else ""
        (self.report.warnings if warning else self.report.problems).append(
            Problem(row.file, row.line, where + message, fix))

    def probe(self, row: SourceRow) -> VideoProbe | None:
        path = row.video
        if path not in self.probes:
            try:
                if row.root is not None:  # a regular file inside the root: no symlink out, no FIFO or device
                    resolved = resolve_under(row.root, path if path.is_absolute() else
                                             str(path.relative_to(row.root)) if _within(path, row.root) else str(path),
                                             what="video")
                elif not path.is_file():
                    raise VideoError(f"video not found: {path}")
                else:
                    resolved = path
                self.resolved[path] = resolved
                self.identity[path] = identity(os.stat(resolved))  # the copy must read this very file, unchanged
                self.probes[path] = probe_video(resolved)
            except PathError as err:
                self.probes[path] = err if err.kind != "missing" else VideoError(f"video not found: {path}")
            except VideoError as err:
                self.probes[path] = err
        found = self.probes[path]
        if isinstance(found, PathError):
            self.problem(row, str(found), "")
            return None
        if isinstance(found, VideoError):
            fix = "correct the path: it is relative to the videos folder" if "not found" in str(found) else \
                "re-encode it as H.264 mp4 (ffmpeg -i IN -c:v libx264 -pix_fmt yuv420p OUT.mp4), or drop the row"
            self.problem(row, str(found), fix)
            return None
        return found

    def add(self, row: SourceRow) -> None:
        """Check one row; take it whole, or report why not and take nothing of it."""
        probe = self.probe(row)
        if probe is None:
            return
        duration = probe.info.duration_s
        for what, value in (("takeover_s", row.takeover_s), ("marker_s", row.label and row.label.marker_s),
                            ("gold_marker_s", row.gold and row.gold.marker_s)):
            if value is not None and value > duration + 1e-6:
                self.problem(row, f"{what} {value:g} is after the end of the video {row.video_name} "
                                  f"({duration:.3f} s)", "write seconds from the first frame; a timeout is marked at "
                                                         "the end")
                return
        scenario_id = self.scenario_id(row)
        cid = row.continuation_id or _continuation_id(row)
        error = _text_problem(row) or self.check_name(cid) or self.check_scenario(row, scenario_id) or \
            self.check_continuation(row, cid, scenario_id) or self.check_labels(row, cid)
        if error:
            self.problem(row, *error)
            return
        if self.take(row, cid, scenario_id, probe):
            self.report.imported += 1
        else:
            self.report.already += 1
        if probe.time_error_s > 0.5 / probe.info.fps and row.video not in self.warned:
            self.warned.add(row.video)
            self.problem(row, f"{row.video_name} has a variable frame rate: frame times stray up to "
                              f"{probe.time_error_s:.3f} s from i / fps ({probe.info.fps:.3f} fps on average), so "
                              f"markers and the model's frame times are off by as much",
                         "re-encode it at a constant frame rate: ffmpeg -i IN -vf fps=30 OUT.mp4", warning=True)

    def scenario_id(self, row: SourceRow) -> str:
        if row.scenario:
            return row.scenario
        if row.context:
            return "s-" + _digest(row.instruction, row.context)
        return "s-" + (row.continuation_id or _continuation_id(row))

    def check_name(self, cid: str) -> tuple[str, str] | None:
        """A new continuation's id names its video file: it must be a name, never a path."""
        if is_name(cid) or (self.existing is not None and cid in self.existing.continuation_by_id):
            return None
        shown = printable(cid)[:80]
        return (f"continuation_id {shown!r} is not a name: it becomes the video's file name, so it must be 1 to 128 "
                f"letters, digits, '-', '_' or '.', not starting with '.'", "rename it (no '/', no '..', no spaces)")

    def check_scenario(self, row: SourceRow, scenario_id: str) -> tuple[str, str] | None:
        seen = self.scenarios.get(scenario_id)
        if seen is None:
            return None
        scenario, first = seen
        where = f"line {first.line}" if first is not None else "the suite"
        if scenario.instruction != row.instruction:
            return (f"scenario {scenario_id!r} has another instruction in {where}: {scenario.instruction[:60]!r}",
                    "one instruction per scenario: fix the row or its scenario")
        if row.category is not None and scenario.category != row.category and scenario_id not in self.warned:
            self.warned.add(scenario_id)
            self.problem(row, f"scenario {scenario_id!r} is in category {scenario.category!r} in {where}; that one is "
                              f"kept", "one category per scenario", warning=True)
        return None

    def check_continuation(self, row: SourceRow, cid: str, scenario_id: str) -> tuple[str, str] | None:
        if cid in self.pending:
            p = self.pending[cid]
            differs = [what for what, a, b in (("video", p.source.resolve(), row.video.resolve()),
                                               ("agent", p.record.agent_id, row.agent_id),
                                               ("scenario", p.record.scenario_id, scenario_id),
                                               ("takeover_s", p.row.takeover_s, row.takeover_s)) if a != b]
            if differs:
                return (f"duplicate continuation_id {cid!r}: line {p.row.line} gives it another "
                        f"{' and '.join(differs)}", "give each continuation its own id")
            return None
        old = self.existing.continuation_by_id.get(cid) if self.existing else None
        if old is not None:
            source = old.metadata.get("source_video")
            if (source is not None and source != row.video_name) or old.agent_id != row.agent_id or \
                    old.scenario_id != scenario_id:
                return (f"continuation_id {cid!r} is already in the suite with another video, agent or scenario",
                        "give the new continuation its own id")
        return None

    def check_labels(self, row: SourceRow, cid: str) -> tuple[str, str] | None:
        if row.label is not None:
            seen = self.labels.get(_label_key(cid, row.label.annotator_id, row.label.label_id))
            if seen is not None and seen[1] is not None:
                return (f"duplicate label: line {seen[1].line} already gives {row.label.annotator_id}'s label of "
                        f"continuation {cid}", "keep one row per continuation and annotator")
        if row.gold is not None and cid in self.references:
            reference, first = self.references[cid]
            if (reference.outcome, reference.marker_s) != (row.gold.outcome, row.gold.marker_s):
                where = f"line {first.line}" if first is not None else "the suite"
                return f"{where} gives continuation {cid} another gold label", "give one gold label per continuation"
        return None

    def take(self, row: SourceRow, cid: str, scenario_id: str, probe: VideoProbe) -> bool:
        """Take a checked row; True when it added or changed something."""
        changed = False
        if scenario_id not in self.scenarios:
            self.scenarios[scenario_id] = (Scenario(scenario_id, row.instruction, row.category or DEFAULT_CATEGORY,
                                                    tags=list(row.tags), takeover_s=row.takeover_s or 0.0), row)
            self.report.scenarios += 1
        if cid not in self.pending:
            old = self.existing.continuation_by_id.get(cid) if self.existing else None
            if old is None:
                info = probe.info
                probed = {"source_video": row.video_name, "fps": round(info.fps, 6), "frames": info.num_frames,
                          "width": info.width, "height": info.height}  # what the video says wins over the source
                metadata = {**{k: v for k, v in row.metadata.items() if k not in probed}, **probed}
                old = Continuation(cid, scenario_id, row.agent_id, f"videos/{cid}{_suffix(row.video)}",
                                   takeover_s=row.takeover_s, metadata=metadata)
                self.report.continuations += 1
                changed = True
            self.pending[cid] = _Pending(old, self.resolved.get(row.video, row.video), row, new=changed,
                                         identity=self.identity.get(row.video))
        if row.label is not None:
            changed |= self.take_label(row, cid)
        if row.gold is not None and cid not in self.references:
            reference = Reference(cid, row.gold.outcome, row.gold.marker_s, row.gold.failure_mode)
            self.references[cid] = (reference, row)
            self.new_references.append(reference)
            self.report.references += 1
            changed = True
        elif row.gold is not None:
            self.references[cid] = (self.references[cid][0], row)
        return changed

    def take_label(self, row: SourceRow, cid: str) -> bool:
        label = row.label
        annotation = Annotation(cid, label.annotator_id, label.outcome, label.marker_s, label.failure_mode,
                                created_at=label.extra.get("created_at"),
                                extra={k: v for k, v in label.extra.items() if k != "created_at"})
        if label.label_id is not None:
            annotation.extra["ls_annotation_id"] = label.label_id
        key = _label_key(cid, label.annotator_id, label.label_id)
        if key in self.labels:
            index = self.labels[key][0]
            self.labels[key] = (index, row)
            if _same_label(self.annotations[index], annotation):
                return False
            self.annotations[index] = annotation
            self.report.updated += 1
            return True
        self.labels[key] = (len(self.annotations), row)
        self.annotations.append(annotation)
        self.report.annotations += 1
        return True

    def write(self, out: Path, link: bool, name: str | None, version: str | None, source: str, stamp: bool,
              extra_files: dict[str, Path]) -> None:
        """Place the new videos and write the suite's files in one change: all of it lands, or nothing does."""
        new = [p for p in self.pending.values() if p.new]
        change = FolderChange(out)
        try:
            for p in new:
                resolve_under(out, p.record.video, regular=False, must_exist=False, what="video")  # videos/ inside
                target = out / p.record.video
                size = p.source.stat().st_size
                if not (target.is_file() and not target.is_symlink() and target.stat().st_size == size):
                    change.place_file(p.record.video, p.source, link, expect=p.identity)
                    self.report.videos_bytes += size
                scenario = self.scenarios[p.record.scenario_id][0]
                if p.record.takeover_s is None or p.record.takeover_s == scenario.takeover_s:
                    p.record.takeover_s = None  # the scenario's (its first row's) takeover holds
            old = self.existing
            info = old.info if old else SuiteInfo(
                name=name or out.name, version=version or "v1",
                description=f"imported by `autorater suite import` from {Path(source).name}",
                created_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), source={"imported_from": source})
            scenarios = [s for s, _ in self.scenarios.values()]
            if stamp:
                for s in scenarios:
                    s.tags = with_version_tag(s.tags, version or info.version)
            suite = Suite(out, info, scenarios, (old.continuations if old else []) + [p.record for p in new],
                          self.annotations, (old.references if old else []) + self.new_references)
            suite.write(out, change=change)
            for rel, path in extra_files.items():
                change.place_file(rel, path)
            change.commit()
        except OSError as err:
            change.abort()
            raise ValueError(f"cannot write the import into {out}: {err.strerror or err} (fix: check the disk space "
                             f"and permissions; the suite was not changed)") from None
        except BaseException:
            change.abort()
            raise


def _label_key(cid: str, annotator_id: str, label_id: Any) -> tuple:
    return (cid, annotator_id, None if label_id is None else str(label_id))


def _same_label(a: Annotation, b: Annotation) -> bool:
    return (a.outcome, a.marker_s, a.failure_mode) == (b.outcome, b.marker_s, b.failure_mode)


def _continuation_id(row: SourceRow) -> str:
    scenario = f"scenario:{row.scenario}" if row.scenario else f"instruction:{row.instruction}\ncontext:" \
                                                                f"{row.context or ''}"
    return f"{_slug(Path(row.video_name).stem)}-{_digest(row.video_name, row.agent_id, scenario)}"


def _slug(text: str, limit: int = 40) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:limit] or "video"


def _digest(*parts: str) -> str:
    return hashlib.sha1("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:8]


def _suffix(path: Path) -> str:
    suffix = path.suffix.lower()
    return suffix if re.fullmatch(r"\.[a-z0-9]{1,8}", suffix) else ".video"


def _within(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True


def _text_problem(row: SourceRow) -> tuple[str, str] | None:
    """A field of the row that UTF-8 cannot hold (a lone surrogate from a JSON source): the row is a problem, never a
    half-written suite."""
    fields = {"video": row.video_name, "instruction": row.instruction, "agent_id": row.agent_id,
              "scenario_id": row.scenario, "continuation_id": row.continuation_id, "category": row.category,
              "tags": row.tags, "metadata": row.metadata}
    for which, label in (("label", row.label), ("gold label", row.gold)):
        if isinstance(label, Label):
            fields.update({f"{which} annotator_id": label.annotator_id, f"{which} failure_mode": label.failure_mode,
                           f"{which} label id": label.label_id, f"{which} extra": label.extra})
    for name, value in fields.items():
        try:
            text = json.dumps(value, ensure_ascii=False, allow_nan=False, default=str)
        except (TypeError, ValueError):
            return f"{name} holds a value JSON cannot hold (NaN or infinity)", "write finite numbers"
        if not encodable(text):
            return (f"{name} holds text UTF-8 cannot hold (a lone surrogate such as \\ud800): "
                    f"{printable(text)[:80]}", "correct the text in the source")
        texts = value if isinstance(value, list) else [value]
        bad = next((c for t in texts if isinstance(t, str) and (c := unprintable(t, name == "instruction"))), None) \
            if name in _PRINTED_FIELDS else None
        if bad:
            return (f"{name} holds {bad} (a control character, terminal escape or bidirectional override), and it is "
                    f"printed", f"remove {bad} from the {name} in the source")
    return None


_PRINTED_FIELDS = ("instruction", "agent_id", "scenario_id", "continuation_id", "category", "tags",
                   "label annotator_id", "label failure_mode", "gold label failure_mode")


__all__ = ["DEFAULT_CATEGORY", "VideoProbe", "import_rows", "probe_video"]
