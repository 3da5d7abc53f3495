"""Import a suite from your own videos: a folder of videos and a table (CSV, JSON Lines or Parquet) that says which
video belongs to which scenario, agent and instruction, with human labels where you have them.

Every video is probed (it must open and decode; its frame count, frame rate, size and duration are read), rows are
grouped into continuations and scenarios, the videos are copied (or hard-linked) into ``SUITE/videos/`` and a
SUITE_FORMAT suite is written, then checked by the validator. A bad row never stops the import: it is reported with
its line and the fix, and the rest is imported. Re-running on a grown table adds only what is new: the ids derive
from the row's content (the video as written, the agent, the scenario), not from its position.

The table, one row per continuation or one per label (several annotators of one continuation on several rows):

=================  =========================================================================================
column (default)   meaning
=================  =========================================================================================
``video``          the video file, relative to the videos folder (or absolute); required
``instruction``    what the agent was asked to do; required
``agent``          which agent acted (``agent_id`` is read too); required
``scenario``       the scenario id (``scenario_id`` too); without it, rows sharing an instruction and a
                   ``context_video`` form a scenario, and without that each continuation is its own scenario
``continuation_id`` an id of your own; without it one is derived from the video, the agent and the scenario
``takeover_s``     when the agent takes over, seconds from the first frame (default 0)
``category``       the scenario's category (default ``all``)
``tags``           ``a,b`` (or ``;`` / ``|`` separated, or a JSON list)
``outcome``        a human label: ``success`` / ``failure`` (also true/false, 1/0)
``marker_s``       the label's marker, seconds from the first frame
``annotator``      who labelled it (``annotator_id`` too; default ``imported``)
``failure_mode``   optional, with a failure
``gold_outcome``   the reference (gold) outcome: the row's continuation becomes a reference episode
``gold_marker_s``  the reference marker
=================  =========================================================================================

Other columns are kept in the continuation's ``metadata``. Row numbers in messages are the file's lines for CSV and
JSON Lines (the CSV header is line 1) and 1-based rows for Parquet.

Example:
    >>> report = import_table("table.csv", videos="recordings", out="my-suite")    # doctest: +SKIP
    >>> print(format_report(report))                                               # doctest: +SKIP
"""

from __future__ import annotations

import csv
import difflib
import hashlib
import json
import math
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from autorater.data.files import commit, temp_path
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
from autorater.data.video import VideoError, VideoInfo, read_video, video_info

COLUMNS = {"video": "video", "instruction": "instruction", "agent": "agent", "scenario": "scenario",
           "continuation_id": "continuation_id", "context_video": "context_video", "takeover_s": "takeover_s",
           "category": "category", "tags": "tags", "outcome": "outcome", "marker_s": "marker_s",
           "annotator": "annotator", "failure_mode": "failure_mode", "gold_outcome": "gold_outcome",
           "gold_marker_s": "gold_marker_s"}
REQUIRED = ("video", "instruction", "agent")
_ALIASES = {"agent": ("agent_id",), "scenario": ("scenario_id",), "annotator": ("annotator_id",)}
DEFAULT_CATEGORY, DEFAULT_ANNOTATOR = "all", "imported"
_TRUE, _FALSE = {"success", "true", "1", "yes"}, {"failure", "false", "0", "no"}


@dataclass
class Label:
    """One label of a row: an annotator's (``annotator_id``) or, for a reference, the gold one."""

    outcome: str
    marker_s: float | None = None
    failure_mode: str | None = None
    annotator_id: str = DEFAULT_ANNOTATOR
    label_id: str | int | None = None  # the source's own id of the label (a Label Studio annotation id), if any
    extra: dict = field(default_factory=dict)


@dataclass
class SourceRow:
    """One row of a table (or one annotation of a Label Studio task), with the place it came from.

    ``video`` is the file; ``video_name`` the video as the source writes it (ids derive from it).
    """

    file: str
    line: int | None
    video: Path
    video_name: str
    instruction: str
    agent_id: str
    scenario: str | None = None
    context: str | None = None
    continuation_id: str | None = None
    takeover_s: float | None = None
    category: str | None = None
    tags: list[str] = field(default_factory=list)
    label: Label | None = None
    gold: Label | None = None
    metadata: dict = field(default_factory=dict)
    where: str = ""  # more of the place ("task 12, annotation 345"), put before each message


@dataclass
class ImportReport:
    """What an import did. ``problems``: rows not imported; ``warnings``: imported, with something to know."""

    out: Path
    source: str
    rows: int = 0
    unit: str = "row(s)"  # what a row of the source is
    imported: int = 0  # rows of this source now in the suite for the first time
    already: int = 0  # rows that an earlier run had imported (unchanged)
    continuations: int = 0
    scenarios: int = 0
    annotations: int = 0
    updated: int = 0  # labels of an earlier run replaced by a changed row
    references: int = 0
    videos_bytes: int = 0
    linked: bool = False
    seconds: float = 0.0
    written: bool = False
    columns: dict = field(default_factory=dict)  # field -> the column read for it
    kept_columns: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    validation: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """At least one row is in the suite and the suite is valid."""
        return self.written and self.imported + self.already > 0 and not self.validation


# ----------------------------------------------------------------------------------------------
# Reading the table


def read_table(path: str | os.PathLike) -> tuple[list[str], list[tuple[int, dict]], list[Problem]]:
    """The columns and the rows of a CSV / TSV, JSON Lines or Parquet file, each row with its line (or row) number.

    Raises:
        ValueError: the file cannot be read as a table (naming it and what to do).
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"table {path} does not exist (fix: pass the CSV, JSON Lines or Parquet file)")
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        return _read_parquet(path)
    if suffix in (".jsonl", ".ndjson", ".json"):
        return _read_jsonl(path)
    return _read_csv(path, "\t" if suffix == ".tsv" else None)


def _read_csv(path: Path, delimiter: str | None) -> tuple[list[str], list[tuple[int, dict]], list[Problem]]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise ValueError(f"table {path} is not UTF-8 text ({err.reason} at byte {err.start}) (fix: save it as UTF-8 "
                         f"CSV)") from None
    if delimiter is None:
        try:
            delimiter = csv.Sniffer().sniff(text.split("\n", 1)[0], delimiters=",;\t").delimiter
        except csv.Error:
            delimiter = ","
    reader = csv.DictReader(text.splitlines(keepends=True), delimiter=delimiter, restkey="\0extra")
    columns = [c.strip() for c in reader.fieldnames or []]
    if not columns:
        raise ValueError(f"table {path} has no header line (fix: the first line names the columns, e.g. "
                         f"video,instruction,agent)")
    rows, problems = [], []
    line = reader.line_num
    for raw in reader:
        start, line = line + 1, reader.line_num
        extra = raw.pop("\0extra", None)
        if extra:
            problems.append(Problem(path.name, start, f"{len(columns) + len(extra)} fields, the header has "
                                                      f"{len(columns)}", "quote fields that contain the delimiter"))
            continue
        rows.append((start, {k.strip(): v for k, v in raw.items() if k is not None}))
    return columns, rows, problems


def _read_jsonl(path: Path) -> tuple[list[str], list[tuple[int, dict]], list[Problem]]:
    columns: dict[str, None] = {}
    rows, problems = [], []
    for number, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            problems.append(Problem(path.name, number, f"not a JSON object: {str(err)[:80]}",
                                    "write one JSON object per line, UTF-8"))
            continue
        if not isinstance(obj, dict):
            problems.append(Problem(path.name, number, f"expected a JSON object, got {type(obj).__name__}",
                                    "write one JSON object per line"))
            continue
        columns.update(dict.fromkeys(obj))
        rows.append((number, obj))
    return list(columns), rows, problems


def _read_parquet(path: Path) -> tuple[list[str], list[tuple[int, dict]], list[Problem]]:
    import pandas as pd

    try:
        frame = pd.read_parquet(path)
    except Exception as err:  # pyarrow raises its own error classes
        raise ValueError(f"cannot read Parquet table {path}: {str(err)[:200]} (fix: write it with pandas or "
                         f"pyarrow, or pass a CSV)") from None
    records = frame.astype(object).where(frame.notna(), None).to_dict("records")
    return [str(c) for c in frame.columns], [(i, _plain(r)) for i, r in enumerate(records, start=1)], []


def _plain(row: dict) -> dict:
    """numpy scalars and arrays (Parquet) as plain Python values."""
    out = {}
    for k, v in row.items():
        if hasattr(v, "tolist"):
            v = v.tolist()
        out[str(k)] = v
    return out


def resolve_columns(columns: list[str], names: dict[str, str] | None = None) -> tuple[dict[str, str], list[Problem],
                                                                                     list[str]]:
    """Which column gives each field: the name asked for (``names``, else ``COLUMNS``), else, for a default name,
    the same name in another case or a SUITE_FORMAT alias (``agent_id``).

    Returns:
        field -> column; problems (a column asked for that the table lacks: line 1); the columns left unread.
    """
    asked = {**COLUMNS, **(names or {})}
    unknown = sorted(set(asked) - set(COLUMNS))
    if unknown:
        raise ValueError(f"unknown field(s) {unknown}; the fields are {sorted(COLUMNS)}")
    by_folded = {_fold(c): c for c in columns}
    mapping, problems = {}, []
    for name, column in asked.items():
        if column in columns:
            mapping[name] = column
        elif names and name in names and names[name] != COLUMNS[name]:
            problems.append(Problem("header", 1, f"no column {column!r} for {name} (the columns are "
                                                 f"{', '.join(map(repr, columns))})",
                                    f"pass --{name.replace('_', '-')}-column with one of them"))
        else:
            found = next((by_folded[_fold(c)] for c in (column, *_ALIASES.get(name, ())) if _fold(c) in by_folded),
                         None)
            if found is not None and found not in mapping.values():
                mapping[name] = found
    left = [c for c in columns if c not in mapping.values()]
    return mapping, problems, left


def _fold(name: str) -> str:
    return re.sub(r"[\s_-]+", "_", name.strip().lower())


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip()) or \
        (isinstance(value, float) and math.isnan(value))


@dataclass
class Table:
    """A table read into rows: ``problems`` (rows that cannot be read, and columns asked for that it lacks),
    ``warnings`` (columns that look like a field but are not read as one), ``columns`` (field -> the column read
    for it), ``kept`` (the columns kept as metadata) and ``size`` (its rows, read or not)."""

    rows: list[SourceRow]
    problems: list[Problem]
    warnings: list[Problem]
    columns: dict[str, str]
    kept: list[str]
    size: int


def rows_from_table(path: str | os.PathLike, videos: str | os.PathLike, names: dict[str, str] | None = None) -> Table:
    """Read a table into ``SourceRow`` s, its videos under ``videos``.

    Raises:
        ValueError: the table cannot be read, or lacks a required column.
    """
    path, videos = Path(path), Path(videos)
    columns, raw_rows, problems = read_table(path)
    size = len(raw_rows) + len(problems)  # the rows read, and those that could not be
    mapping, header_problems, left = resolve_columns(columns, names)
    problems += [Problem(path.name, p.line, p.message, p.fix) for p in header_problems]
    missing = [f for f in REQUIRED if f not in mapping]
    if missing:
        raise ValueError(f"table {path} has no column for {', '.join(missing)} (its columns: "
                         f"{', '.join(map(repr, columns))}) (fix: add the column, or name yours with "
                         f"{', '.join(f'--{m}-column' for m in missing)})")
    warnings = []
    for column in left:
        close = difflib.get_close_matches(_fold(column), [f for f in COLUMNS if f not in mapping], n=1, cutoff=0.75)
        if close:
            warnings.append(Problem(path.name, 1, f"column {column!r} is kept as metadata, not read as {close[0]}",
                                    f"pass --{close[0].replace('_', '-')}-column {column} if it is"))
    rows = []
    for line, raw in raw_rows:
        row = _source_row(path.name, line, raw, mapping, left, videos, problems)
        if row is not None:
            rows.append(row)
    return Table(rows, problems, warnings, mapping, left, size)


def _source_row(file: str, line: int, raw: dict, mapping: dict[str, str], left: list[str], videos: Path,
                problems: list[Problem]) -> SourceRow | None:
    def get(name):
        value = raw.get(mapping[name]) if name in mapping else None
        return None if _missing(value) else value

    def bad(message, fix):
        problems.append(Problem(file, line, message, fix))

    for name in REQUIRED:
        if get(name) is None:
            bad(f"empty {mapping[name]!r}", f"give every row its {name}")
            return None
    text = {name: str(get(name)).strip() for name in ("video", "instruction", "agent", "scenario", "continuation_id",
                                                      "context_video", "category") if get(name) is not None}
    numbers = {}
    for name in ("takeover_s", "marker_s", "gold_marker_s"):
        if get(name) is not None:
            number = _number(get(name))
            if number is None or number < 0:
                bad(f"{mapping[name]} {get(name)!r} is not a time", "write seconds from the first frame, a number "
                                                                    ">= 0, or leave it empty")
                return None
            numbers[name] = number
    labels = {}
    for prefix, marker in (("", "marker_s"), ("gold_", "gold_marker_s")):
        raw_outcome = get(prefix + "outcome")
        if raw_outcome is None:
            if marker in numbers:
                bad(f"{mapping[marker]} without an {prefix}outcome", f"fill {prefix}outcome (success or failure)")
                return None
            continue
        outcome = outcome_of(raw_outcome)
        if outcome is None:
            bad(f"{mapping[prefix + 'outcome']} {raw_outcome!r} is not an outcome", "write success or failure; "
                                                                                   "true/false and 1/0 are read too")
            return None
        labels[prefix] = Label(outcome, numbers.get(marker))
    tags = _tags(get("tags"))
    if tags is None:
        bad(f"tags {get('tags')!r} are not a list of words", "write tags as a,b (or a JSON list of strings)")
        return None
    label, gold = labels.get(""), labels.get("gold_")
    if label is not None:
        label.annotator_id = str(get("annotator")).strip() if get("annotator") is not None else DEFAULT_ANNOTATOR
        label.failure_mode = str(get("failure_mode")).strip() if get("failure_mode") is not None else None
    video = Path(text["video"])
    metadata = {c: _json_safe(raw[c]) for c in left if not _missing(raw.get(c))}
    return SourceRow(file, line, video if video.is_absolute() else videos / video, text["video"],
                     text["instruction"], text["agent"], scenario=text.get("scenario"),
                     context=text.get("context_video"), continuation_id=text.get("continuation_id"),
                     takeover_s=numbers.get("takeover_s"), category=text.get("category"), tags=tags, label=label,
                     gold=gold, metadata=metadata)


def _json_safe(value: Any) -> Any:
    """A table's value as JSON can hold it: as it is, else its text (a Parquet timestamp, an infinity)."""
    try:
        json.dumps(value, allow_nan=False)
        return value
    except (TypeError, ValueError):
        return str(value)


def outcome_of(value: Any) -> str | None:
    """``success`` / ``failure`` from a table's value (the word, a boolean or 1/0, any case); None if neither."""
    text = str(value).strip().lower() if not isinstance(value, float) or value in (0.0, 1.0) else ""
    text = {"1.0": "1", "0.0": "0"}.get(text, text)
    return "success" if text in _TRUE else "failure" if text in _FALSE else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        number = float(str(value).strip()) if not isinstance(value, (int, float)) else float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _tags(value: Any) -> list[str] | None:
    if value is None:
        return []
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    if isinstance(value, list):
        return [str(v).strip() for v in value if str(v).strip()] if all(isinstance(v, (str, int)) for v in value) \
            else None
    return [t.strip() for t in re.split(r"[,;|]", str(value)) if t.strip()]


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


def import_table(table: str | os.PathLike, videos: str | os.PathLike, out: str | os.PathLike, *,
                 columns: dict[str, str] | None = None, link: bool = False, strict: bool = False,
                 name: str | None = None, version: str | None = None) -> ImportReport:
    """Import ``table`` (its videos under ``videos``) into the suite folder ``out`` (created, or grown).

    Args:
        columns: field -> column name, where yours differ from ``COLUMNS``.
        link: hard-link the videos instead of copying them (a copy where the file systems differ).
        strict: write nothing when any row has a problem or a warning.
        name, version: of a new suite (``suite.json``); default the folder's name and ``v1``.
    """
    start = time.monotonic()
    read = rows_from_table(table, videos, columns)
    report = import_rows(read.rows, out, source=str(table), problems=read.problems, warnings=read.warnings,
                         link=link, strict=strict, name=name, version=version)
    report.columns, report.kept_columns, report.rows = read.columns, read.kept, read.size
    report.seconds = time.monotonic() - start
    return report


def import_rows(rows: Iterable[SourceRow], out: str | os.PathLike, *, source: str,
                problems: list[Problem] | None = None, warnings: list[Problem] | None = None, link: bool = False,
                strict: bool = False, name: str | None = None, version: str | None = None) -> ImportReport:
    """Check ``rows`` (probing each video once), merge them into the suite at ``out`` and validate it.

    ``problems`` and ``warnings`` found while reading the source are carried into the report.
    """
    start = time.monotonic()
    out = Path(out)
    rows = list(rows)
    report = ImportReport(out=out, source=source, rows=len(rows), linked=link, problems=list(problems or []),
                          warnings=list(warnings or []))
    existing = _existing_suite(out)
    builder = _Builder(existing, report)
    for row in rows:
        builder.add(row)
    for items in (report.problems, report.warnings):
        items.sort(key=lambda p: (p.file, p.line or 0))  # in the source's order (stable: tasks keep theirs)
    if not (strict and (report.problems or report.warnings)) and (report.imported or existing is not None):
        builder.write(out, link, name, version, source)
        report.written = True
        report.validation = validate_suite(out, check_videos=True)
    report.seconds = time.monotonic() - start
    return report


def _existing_suite(out: Path) -> Suite | None:
    if not out.exists():
        return None
    if not out.is_dir():
        raise ValueError(f"{out} is a file (fix: pass a folder for the suite)")
    if not (out / SUITE_FILE).exists():
        if any(out.iterdir()):
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
        self.probes: dict[Path, VideoProbe | VideoError] = {}
        self.warned: set = set()

    def problem(self, row: SourceRow, message: str, fix: str, warning: bool = False) -> None:
        where = f"{row.where}: " if row.where else ""
        (self.report.warnings if warning else self.report.problems).append(
            Problem(row.file, row.line, where + message, fix))

    def probe(self, row: SourceRow) -> VideoProbe | None:
        path = row.video
        if path not in self.probes:
            try:
                if not path.is_file():
                    raise VideoError(f"video not found: {path}")
                self.probes[path] = probe_video(path)
            except VideoError as err:
                self.probes[path] = err
        found = self.probes[path]
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
        error = self.check_scenario(row, scenario_id) or self.check_continuation(row, cid, scenario_id) or \
            self.check_labels(row, cid)
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
                metadata = {"source_video": row.video_name, "fps": round(info.fps, 6), "frames": info.num_frames,
                            "width": info.width, "height": info.height, **row.metadata}
                old = Continuation(cid, scenario_id, row.agent_id, f"videos/{cid}{_suffix(row.video)}",
                                   takeover_s=row.takeover_s, metadata=metadata)
                self.report.continuations += 1
                changed = True
            self.pending[cid] = _Pending(old, row.video, row, new=changed)
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

    def write(self, out: Path, link: bool, name: str | None, version: str | None, source: str) -> None:
        """Place the new videos, then write the suite's files (a failure to place a video writes no file)."""
        out.mkdir(parents=True, exist_ok=True)
        new = [p for p in self.pending.values() if p.new]
        for p in new:
            try:
                self.report.videos_bytes += _place_video(p.source, out / p.record.video, link)
            except OSError as err:
                raise ValueError(f"cannot place {p.source} into {out / p.record.video}: {err.strerror} (fix: check "
                                 f"the disk space and permissions; the suite's files were not changed, and a re-run "
                                 f"reuses the videos already placed)") from None
            scenario = self.scenarios[p.record.scenario_id][0]
            if p.record.takeover_s is None or p.record.takeover_s == scenario.takeover_s:
                p.record.takeover_s = None  # the scenario's (its first row's) takeover holds
        old = self.existing
        info = old.info if old else SuiteInfo(
            name=name or out.name, version=version or "v1",
            description=f"imported by `autorater suite import` from {Path(source).name}",
            created_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), source={"imported_from": source})
        suite = Suite(out, info, [s for s, _ in self.scenarios.values()],
                      (old.continuations if old else []) + [p.record for p in new], self.annotations,
                      (old.references if old else []) + self.new_references)
        suite.write(out)


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


def _place_video(source: Path, target: Path, link: bool) -> int:
    """Copy (or hard-link) ``source`` to ``target`` atomically; an existing target of the same size is kept."""
    size = source.stat().st_size
    if target.is_file() and target.stat().st_size == size:
        return 0
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(target)
    tmp.unlink(missing_ok=True)
    if link:
        try:
            os.link(source, tmp)
            os.replace(tmp, target)
            return size
        except OSError:
            tmp.unlink(missing_ok=True)  # another file system, or no links there: copy
    shutil.copyfile(source, tmp)
    commit(tmp, target)
    return size


# ----------------------------------------------------------------------------------------------
# The report


def format_report(report: ImportReport, limit: int = 50) -> str:
    """The report as the CLI prints it: problems (with their lines and fixes), warnings, counts, the validation."""
    lines = [f"read {report.rows} {report.unit} of {report.source}"]
    if report.columns:
        lines[0] += "; columns read: " + ", ".join(f if f == c else f"{f} <- {c!r}" for f, c in report.columns.items())
    if report.kept_columns:
        lines.append(f"kept as continuation metadata: {', '.join(report.kept_columns)}")
    for title, items in ((f"{len(report.problems)} row(s) not imported:", report.problems),
                         (f"{len(report.warnings)} warning(s):", report.warnings)):
        if items:
            lines.append(title)
            lines += [f"  {p}" for p in items[:limit]]
            if len(items) > limit:
                lines.append(f"  ... and {len(items) - limit} more")
    if not report.written:
        lines.append("nothing written: " + ("--strict and problems above" if report.problems or report.warnings
                                            else "no row could be imported"))
        return "\n".join(lines)
    how = "linked" if report.linked else "copied"
    lines.append(f"imported {report.imported} {report.unit} into {report.out}: {report.continuations} new "
                 f"continuation(s) in {report.scenarios} new scenario(s), {report.annotations} new label(s), "
                 f"{report.updated} updated, {report.references} new reference(s); {report.already} already there; "
                 f"{report.videos_bytes / 2 ** 20:.1f} MiB of video {how} in {report.seconds:.1f} s")
    if report.validation:
        lines += [f"  {p}" for p in report.validation[:limit]]
        lines.append(f"INVALID: {len(report.validation)} problem(s) in {report.out}")
    else:
        lines.append(f"OK: {report.out} is a valid suite (format v1)")
    return "\n".join(lines)


__all__ = ["COLUMNS", "REQUIRED", "ImportReport", "Label", "SourceRow", "Table", "VideoProbe", "format_report",
           "import_rows", "import_table", "outcome_of", "probe_video", "read_table", "resolve_columns",
           "rows_from_table"]
