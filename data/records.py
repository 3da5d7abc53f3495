"""The suite format's records, version 1 (``docs/suite-format.md``): their types and field rules, each line parsed
and checked with every problem kept (its file, line and fix), JSON Lines read and written.

Example:
    >>> problems = []
    >>> read_jsonl(Path("my-suite/annotations.jsonl"), Annotation, problems)   # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Iterable

from autorater.data.files import (
    commit,
    open_new,
    temp_path,
)
from autorater.data.paths import encodable, printable, unprintable

FORMAT = "autorater-suite"
FORMAT_VERSION = 1
OUTCOMES = ("success", "failure")

SUITE_FILE = "suite.json"
SCENARIOS_FILE = "scenarios.jsonl"
CONTINUATIONS_FILE = "continuations.jsonl"
ANNOTATIONS_FILE = "annotations.jsonl"
REFERENCES_FILE = "references.jsonl"
TRUTH_FILE = "simulator_truth.jsonl"  # synthetic suites only (data.generate): the full simulator truth
SWAP_TAG = "instruction-swap"  # the tag of a scenario whose instruction was swapped onto another's videos


# ----------------------------------------------------------------------------------------------
# Records


@dataclass
class SuiteInfo:
    name: str
    version: str
    description: str = ""
    created_at: str | None = None
    source: dict = field(default_factory=dict)
    format: str = FORMAT
    format_version: int = FORMAT_VERSION
    extra: dict = field(default_factory=dict, repr=False)


@dataclass
class Scenario:
    scenario_id: str
    instruction: str
    category: str
    tags: list[str] = field(default_factory=list)
    takeover_s: float = 0.0
    metadata: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict, repr=False)


@dataclass
class Continuation:
    continuation_id: str
    scenario_id: str
    agent_id: str
    video: str  # relative to the suite folder
    takeover_s: float | None = None  # overrides the scenario's
    metadata: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict, repr=False)


@dataclass
class Annotation:
    continuation_id: str
    annotator_id: str
    outcome: str  # "success" | "failure"
    marker_s: float | None = None
    failure_mode: str | None = None
    created_at: str | None = None
    source: str = "human"
    extra: dict = field(default_factory=dict, repr=False)


@dataclass
class Reference:
    continuation_id: str
    outcome: str
    marker_s: float | None = None
    failure_mode: str | None = None
    extra: dict = field(default_factory=dict, repr=False)


# Field rules: name -> (required, accepted python types, default). bool is never a number here.
_NUM = (int, float)
_OPT_NUM = (int, float, type(None))
_OPT_STR = (str, type(None))
_SCHEMAS: dict[type, dict[str, tuple[bool, tuple]]] = {
    SuiteInfo: {"format": (True, (str,)), "format_version": (True, (int,)), "name": (True, (str,)),
                "version": (True, (str,)), "description": (False, (str,)),
                "created_at": (False, _OPT_STR), "source": (False, (dict,))},
    Scenario: {"scenario_id": (True, (str,)), "instruction": (True, (str,)), "category": (True, (str,)),
               "tags": (False, (list,)), "takeover_s": (False, _NUM), "metadata": (False, (dict,))},
    Continuation: {"continuation_id": (True, (str,)), "scenario_id": (True, (str,)),
                   "agent_id": (True, (str,)), "video": (True, (str,)),
                   "takeover_s": (False, _OPT_NUM), "metadata": (False, (dict,))},
    Annotation: {"continuation_id": (True, (str,)), "annotator_id": (True, (str,)),
                 "outcome": (True, (str,)), "marker_s": (False, _OPT_NUM),
                 "failure_mode": (False, _OPT_STR), "created_at": (False, _OPT_STR),
                 "source": (False, (str,))},
    Reference: {"continuation_id": (True, (str,)), "outcome": (True, (str,)),
                "marker_s": (False, _OPT_NUM), "failure_mode": (False, _OPT_STR)},
}


# The text fields the product prints (reports, errors, the leaderboard, stratum names): no control character,
# terminal escape or bidirectional override may hide in them.
_PRINTED: dict[type, tuple[str, ...]] = {
    SuiteInfo: ("name", "version"), Scenario: ("scenario_id", "instruction", "category", "tags"),
    Continuation: ("continuation_id", "scenario_id", "agent_id", "video"),
    Annotation: ("continuation_id", "annotator_id", "outcome", "failure_mode", "source"),
    Reference: ("continuation_id", "outcome", "failure_mode"),
}


def record_to_dict(record) -> dict:
    """A record as the JSON object the format writes (unknown fields kept, None optionals kept)."""
    out = {f.name: getattr(record, f.name) for f in dataclasses.fields(record) if f.name != "extra"}
    if isinstance(record, SuiteInfo):  # the format's own fields first, as in the spec
        out = {"format": out.pop("format"), "format_version": out.pop("format_version"), **out}
    return {**out, **record.extra}


# ----------------------------------------------------------------------------------------------
# Problems


@dataclass(frozen=True)
class Problem:
    """One broken rule: where it is and how to fix it."""

    file: str
    line: int | None  # 1-based; None for whole-file problems
    message: str
    fix: str = ""

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.message}" + (f" (fix: {self.fix})" if self.fix else "")


class SuiteFormatError(ValueError):
    """A suite breaks the format. ``problems`` lists every broken rule."""

    def __init__(self, problems: list[Problem], root: str | os.PathLike = ""):
        self.problems = problems
        head = f"{len(problems)} problem(s) in suite {root}" if root else f"{len(problems)} problem(s)"
        shown = "\n  ".join(str(p) for p in problems[:50])
        more = f"\n  ... and {len(problems) - 50} more" if len(problems) > 50 else ""
        super().__init__(f"{head}:\n  {shown}{more}")


def parse_record(cls, obj: Any, file: str, line: int | None, problems: list[Problem]):
    """Build ``cls`` from a decoded JSON object, appending a Problem per broken rule."""
    if not isinstance(obj, dict):
        problems.append(Problem(file, line, f"expected a JSON object, got {type(obj).__name__}",
                                "write one JSON object per line"))
        return None
    schema = _SCHEMAS[cls]
    ok = True
    for name, (required, types) in schema.items():
        if name not in obj:
            if required:
                problems.append(Problem(file, line, f"missing required field '{name}'",
                                        f"add \"{name}\" ({_type_names(types)})"))
                ok = False
            continue
        value = obj[name]
        if isinstance(value, bool) or not isinstance(value, types):
            problems.append(Problem(file, line, f"field '{name}' must be {_type_names(types)}, "
                                                f"got {json.dumps(value)[:60]}",
                                    f"write '{name}' as {_type_names(types)}"))
            ok = False
        elif isinstance(value, float) and not math.isfinite(value) or isinstance(value, int) and abs(value) > 1e300:
            problems.append(Problem(file, line, f"field '{name}' is not a finite number",  # (float() overflows)
                                    f"write a finite number for '{name}'"))
            ok = False
    if not ok:
        return None
    problems.extend(_text_problems(cls, obj, file, line))
    known = {k: obj[k] for k in schema if k in obj}
    if "takeover_s" in known and known["takeover_s"] is not None:
        known["takeover_s"] = float(known["takeover_s"])
    if "marker_s" in known and known["marker_s"] is not None:
        known["marker_s"] = float(known["marker_s"])
    extra = {k: v for k, v in obj.items() if k not in schema}
    return cls(**known, extra=extra)


def _text_problems(cls, obj: dict, file: str, line: int | None) -> list[Problem]:
    """Text the product will later write or print: every field must be writable as UTF-8 (no lone surrogate), and
    the printed ones (``_PRINTED``) must hold no control character, terminal escape or bidirectional override."""
    out = []
    for name, value in obj.items():
        text = json.dumps({name: value}, ensure_ascii=False)
        if not encodable(text):
            out.append(Problem(file, line, f"field '{printable(name)}' holds text UTF-8 cannot hold (a lone "
                                           f"surrogate such as \\ud800): {printable(text)[:80]}",
                               f"correct the text of '{printable(name)}'; the suite's files are UTF-8"))
            continue
        texts = value if name == "tags" and isinstance(value, list) else [value]
        free = name == "instruction"  # free text: its line breaks and tabs are whitespace
        bad = next((c for t in texts if isinstance(t, str) and (c := unprintable(t, free))), None) \
            if name in _PRINTED[cls] else None
        if bad:
            out.append(Problem(file, line, f"field '{name}' holds {bad} (a control character, terminal escape or "
                                           f"bidirectional override): printed, it would move the cursor, recolour "
                                           f"the terminal or reverse the text", f"remove {bad} from '{name}'"))
    return out


def _type_names(types: tuple) -> str:
    names = {int: "an integer", float: "a number", str: "a string", list: "a list", dict: "an object",
             type(None): "null"}
    return " or ".join(dict.fromkeys(names[t] for t in types))


def read_jsonl(path: Path, cls, problems: list[Problem], label: str | None = None) -> list:
    """Read a JSON Lines file of records, appending problems (bad UTF-8, bad JSON, bad fields)."""
    label = label or path.name
    try:
        raw = path.read_bytes()
    except OSError as err:
        problems.append(Problem(label, None, f"cannot read: {err.strerror}", "check the file exists"))
        return []
    records = []
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line.decode("utf-8"))
        except UnicodeDecodeError:
            problems.append(Problem(label, number, "line is not valid UTF-8", "save the file as UTF-8"))
            continue
        except json.JSONDecodeError as err:
            problems.append(Problem(label, number, f"invalid JSON: {err.msg} (column {err.colno})",
                                    "write one complete JSON object per line"))
            continue
        except (ValueError, RecursionError) as err:  # an integer of over 4,300 digits; nesting deeper than Python's
            problems.append(Problem(label, number, f"cannot be read as JSON: {str(err).split(';')[0][:120]}",
                                    "write plain JSON values: numbers of a few digits, objects nested a few levels"))
            continue
        record = parse_record(cls, obj, label, number, problems)
        if record is not None:
            record.extra["_line"] = number  # where it came from, for later messages; never written
            records.append(record)
    return records


def write_jsonl(path: str | os.PathLike, records: Iterable) -> None:
    """Write records (dataclasses or dicts) as JSON Lines, atomically and durably (temp file, fsync, rename).

    A non-finite number (NaN, infinity) is refused with ValueError before the file is replaced."""
    path = Path(path)
    data = jsonl_bytes(records)  # every record checked (NaN, a lone surrogate) before the file is touched
    tmp = temp_path(path)
    try:
        with open_new(tmp) as f:
            f.write(data)
        commit(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def jsonl_bytes(records: Iterable) -> bytes:
    """Records (dataclasses or dicts; keys starting with ``_`` left out) as UTF-8 JSON Lines.

    Raises:
        ValueError: a non-finite number; UnicodeEncodeError (a ValueError): text UTF-8 cannot hold (a lone
            surrogate).
    """
    lines = []
    for r in records:
        obj = r if isinstance(r, dict) else record_to_dict(r)
        obj = {k: v for k, v in obj.items() if not k.startswith("_")}
        lines.append(json.dumps(obj, ensure_ascii=False, allow_nan=False) + "\n")
    return "".join(lines).encode("utf-8")


def annotation_problems(obj: Any, file: str = ANNOTATIONS_FILE, line: int | None = None,
                        duration_s: float | None = None, known_ids: Iterable[str] | None = None) -> list[Problem]:
    """Every rule an ``annotations.jsonl`` row breaks (empty: it may be appended and the suite still loads).

    The same checks as ``Suite.load`` (fields, types, finite numbers, the outcome, a marker >= 0), plus, when
    given, the marker inside the video (``duration_s``) and the continuation known (``known_ids``).
    """
    problems: list[Problem] = []
    record = parse_record(Annotation, obj, file, line, problems)
    if record is None:
        return problems
    if record.outcome not in OUTCOMES:
        problems.append(Problem(file, line, f"outcome {record.outcome!r} is not allowed",
                                "write \"success\" or \"failure\""))
    if known_ids is not None and record.continuation_id not in set(known_ids):
        problems.append(Problem(file, line, f"unknown continuation_id {record.continuation_id[:80]!r}",
                                f"add the continuation to {CONTINUATIONS_FILE} or correct the id"))
    if record.marker_s is not None:
        if record.marker_s < 0:
            problems.append(Problem(file, line, f"marker_s {record.marker_s} is negative",
                                    "markers are seconds from the first frame, >= 0"))
        elif duration_s is not None and record.marker_s > duration_s + 1e-6:
            problems.append(Problem(file, line, f"marker_s {record.marker_s:.6g} is after the end of the video "
                                                f"({duration_s:.3f} s)", "markers are seconds from the first frame"))
    try:
        json.dumps(obj, allow_nan=False)
    except (TypeError, ValueError) as err:
        problems.append(Problem(file, line, f"not writable as JSON: {err}", "write plain finite JSON values"))
    return problems


def safe_relative_path(value: str) -> bool:
    """True when ``value`` is a relative POSIX path that stays inside its folder."""
    p = PurePosixPath(value)
    return bool(value) and not p.is_absolute() and ".." not in p.parts and "\\" not in value \
        and not (len(value) > 1 and value[1] == ":")


__all__ = ["ANNOTATIONS_FILE", "CONTINUATIONS_FILE", "FORMAT", "FORMAT_VERSION", "OUTCOMES", "REFERENCES_FILE",
           "SCENARIOS_FILE", "SUITE_FILE", "SWAP_TAG", "TRUTH_FILE", "Annotation", "Continuation", "Problem",
           "Reference", "Scenario", "SuiteFormatError", "SuiteInfo", "annotation_problems", "jsonl_bytes",
           "parse_record", "read_jsonl", "record_to_dict", "safe_relative_path", "write_jsonl"]
