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
``video``          the video file, relative to the videos folder (or an absolute path inside it); required
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
    >>> from autorater.data.imports.common import format_report
    >>> report = import_table("table.csv", videos="recordings", out="my-suite")    # doctest: +SKIP
    >>> print(format_report(report))                                               # doctest: +SKIP
"""

from __future__ import annotations

import csv
import difflib
import json
import math
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autorater.data.imports.common import DEFAULT_ANNOTATOR, ImportReport, Label, SourceRow
from autorater.data.imports.to_suite import import_rows
from autorater.data.suite import Problem

COLUMNS = {"video": "video", "instruction": "instruction", "agent": "agent", "scenario": "scenario",
           "continuation_id": "continuation_id", "context_video": "context_video", "takeover_s": "takeover_s",
           "category": "category", "tags": "tags", "outcome": "outcome", "marker_s": "marker_s",
           "annotator": "annotator", "failure_mode": "failure_mode", "gold_outcome": "gold_outcome",
           "gold_marker_s": "gold_marker_s"}
REQUIRED = ("video", "instruction", "agent")
_ALIASES = {"agent": ("agent_id",), "scenario": ("scenario_id",), "annotator": ("annotator_id",)}
_TRUE, _FALSE = {"success", "true", "1", "yes"}, {"failure", "false", "0", "no"}


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
                     gold=gold, metadata=metadata, root=videos)


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
# The import


def import_table(table: str | os.PathLike, videos: str | os.PathLike, out: str | os.PathLike, *,
                 columns: dict[str, str] | None = None, link: bool = False, strict: bool = False,
                 name: str | None = None, version: str | None = None, stamp: bool = False) -> ImportReport:
    """Import ``table`` (its videos under ``videos``) into the suite folder ``out`` (created, or grown).

    Args:
        columns: field -> column name, where yours differ from ``COLUMNS``.
        link: hard-link the videos instead of copying them (a copy where the file systems differ).
        strict: write nothing when any row has a problem or a warning.
        name, version: of a new suite (``suite.json``); default the folder's name and ``v1``.
        stamp: tag every scenario without a ``version:`` tag with the version (``import_rows``).
    """
    start = time.monotonic()
    read = rows_from_table(table, videos, columns)
    report = import_rows(read.rows, out, source=str(table), problems=read.problems, warnings=read.warnings,
                         link=link, strict=strict, name=name, version=version, stamp=stamp)
    report.columns, report.kept_columns, report.rows = read.columns, read.kept, read.size
    report.seconds = time.monotonic() - start
    return report


__all__ = ["COLUMNS", "REQUIRED", "Table", "import_table", "outcome_of", "read_table", "resolve_columns",
           "rows_from_table"]
