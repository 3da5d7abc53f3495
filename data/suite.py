"""The suite format, version 1 (``docs/suite-format.md``): typed records, reading, validation, writing.

A suite is a folder of JSON Lines files plus videos. Reading never stops at the first problem: every
rule is checked and every problem is reported with its file, line and fix, so a team can repair a
suite in one pass.

Example:
    >>> suite = Suite.load("my-suite")                      # doctest: +SKIP
    >>> suite.instruction_of("c000913")                     # doctest: +SKIP
    'put the red box next to the grey key'
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Iterator

from autorater.data.files import (
    CHANGE_FILE,
    FolderChange,
    JournalError,
    commit,
    json_text,
    open_new,
    pending_files,
    recover_if_free,
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


def _parse_record(cls, obj: Any, file: str, line: int | None, problems: list[Problem]):
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
        record = _parse_record(cls, obj, label, number, problems)
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
    record = _parse_record(Annotation, obj, file, line, problems)
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


# ----------------------------------------------------------------------------------------------
# The suite


@dataclass
class Suite:
    """One suite version in memory. ``Suite.load`` validates; ``suite.write`` writes the format."""

    root: Path
    info: SuiteInfo
    scenarios: list[Scenario]
    continuations: list[Continuation]
    annotations: list[Annotation] = field(default_factory=list)
    references: list[Reference] = field(default_factory=list)

    def __post_init__(self):
        self.root = Path(self.root)
        self._index()

    def _index(self) -> None:
        self.scenario_by_id = {s.scenario_id: s for s in self.scenarios}
        self.continuation_by_id = {c.continuation_id: c for c in self.continuations}

    # -- reading ------------------------------------------------------------------------------
    @classmethod
    def load(cls, root: str | os.PathLike, check_videos: bool = False) -> "Suite":
        """Read and validate a suite folder; raise SuiteFormatError listing every problem.

        Args:
            root: the suite folder.
            check_videos: also open every video (slow on big suites; ``validate`` does it).
        """
        suite, problems = _load(Path(root), check_videos=check_videos)
        if problems:
            raise SuiteFormatError(problems, root)
        return suite

    def video_path(self, continuation_id: str) -> Path:
        return self.root / self.continuation_by_id[continuation_id].video

    def scenario_of(self, continuation_id: str) -> Scenario:
        return self.scenario_by_id[self.continuation_by_id[continuation_id].scenario_id]

    def instruction_of(self, continuation_id: str) -> str:
        return self.scenario_of(continuation_id).instruction

    def takeover_of(self, continuation_id: str) -> float:
        c = self.continuation_by_id[continuation_id]
        return c.takeover_s if c.takeover_s is not None else self.scenario_of(continuation_id).takeover_s

    def continuation_ids(self) -> list[str]:
        return [c.continuation_id for c in self.continuations]

    def get(self, continuation_id: str) -> Continuation:
        """The continuation with this id; a KeyError that names the id and the suite otherwise."""
        try:
            return self.continuation_by_id[continuation_id]
        except KeyError:
            raise KeyError(f"unknown continuation_id {continuation_id!r} in suite {self.root} "
                           f"(it is not in {CONTINUATIONS_FILE})") from None

    # -- writing ------------------------------------------------------------------------------
    def write(self, root: str | os.PathLike | None = None, change: FolderChange | None = None) -> Path:
        """Write the JSON files of the suite to ``root`` (default: its own root), all at once: after a crash the
        folder holds the old files or the new ones (``autorater.data.files.FolderChange``). Videos are not copied.

        Every file is encoded first: a value JSON or UTF-8 cannot hold (NaN, a lone surrogate) is a ValueError
        before anything is written.

        Args:
            root: the folder (created if needed).
            change: stage the files into this change (committed by its owner, with the videos and other files of
                the same change) instead of a change of their own.
        """
        root = Path(root) if root is not None else self.root
        files = {SUITE_FILE: json_text(record_to_dict(self.info)).encode("utf-8"),
                 SCENARIOS_FILE: jsonl_bytes(self.scenarios), CONTINUATIONS_FILE: jsonl_bytes(self.continuations)}
        for name, records in ((ANNOTATIONS_FILE, self.annotations), (REFERENCES_FILE, self.references)):
            files[name] = jsonl_bytes(records) if records else None  # optional: none left from an earlier write
        if change is not None:
            _stage(change, files)
            return root
        with FolderChange(root) as own:
            _stage(own, files)
        return root


def _stage(change: FolderChange, files: dict[str, bytes | None]) -> None:
    for name, data in files.items():
        if data is None:
            change.remove(name)
        else:
            change.write_bytes(name, data)


def iter_problems(root: str | os.PathLike, check_videos: bool = True) -> Iterator[Problem]:
    _, problems = _load(Path(root), check_videos=check_videos)
    yield from problems


def validate_suite(root: str | os.PathLike, check_videos: bool = True, progress: bool = False) -> list[Problem]:
    """Check every rule of the format; return all problems (empty when the suite is valid).

    Args:
        root: the suite folder.
        check_videos: open every video: it must exist, decode, and every marker must lie inside it.
        progress: show a progress bar while checking videos.
    """
    _, problems = _load(Path(root), check_videos=check_videos, progress=progress)
    return problems


def _load(root: Path, check_videos: bool, progress: bool = False) -> tuple[Suite | None, list[Problem]]:
    problems: list[Problem] = []
    if not root.is_dir():
        return None, [Problem(str(root), None, "suite folder does not exist", "pass the folder that holds suite.json")]
    try:
        recover_if_free(root)  # a change of several files that a crash interrupted is finished (or read through)
        pending = pending_files(root)
    except JournalError as err:  # a journal that would reach outside the suite: refused, nothing changed
        return None, [Problem(CHANGE_FILE, None, err.why, err.fix)]

    def path(name: str) -> Path | None:
        return pending[name] if name in pending else root / name

    def optional(name: str) -> Path | None:
        p = path(name)
        return p if p is not None and p.exists() else None

    info = _read_info(path(SUITE_FILE) or root / SUITE_FILE, problems)
    scenarios = _unique(read_jsonl(path(SCENARIOS_FILE) or root / SCENARIOS_FILE, Scenario, problems,
                                   SCENARIOS_FILE), "scenario_id", SCENARIOS_FILE, problems)
    continuations = _unique(read_jsonl(path(CONTINUATIONS_FILE) or root / CONTINUATIONS_FILE, Continuation, problems,
                                       CONTINUATIONS_FILE), "continuation_id", CONTINUATIONS_FILE, problems)
    annotations = read_jsonl(optional(ANNOTATIONS_FILE), Annotation, problems, ANNOTATIONS_FILE) \
        if optional(ANNOTATIONS_FILE) else []
    references = _unique(read_jsonl(optional(REFERENCES_FILE), Reference, problems, REFERENCES_FILE),
                         "continuation_id", REFERENCES_FILE, problems) if optional(REFERENCES_FILE) else []

    for s in scenarios:
        line = s.extra.get("_line")
        if not s.instruction.strip():
            problems.append(Problem(SCENARIOS_FILE, line, f"scenario {s.scenario_id!r} has an empty instruction",
                                    "write the instruction the agent was given"))
        if s.takeover_s < 0:
            problems.append(Problem(SCENARIOS_FILE, line, f"takeover_s {s.takeover_s} is negative",
                                    "takeover_s is seconds from the first frame, >= 0"))
        if not all(isinstance(t, str) for t in s.tags):
            problems.append(Problem(SCENARIOS_FILE, line, "tags must be a list of strings", "quote each tag"))
    scenario_ids = {s.scenario_id for s in scenarios}
    for c in continuations:
        line = c.extra.get("_line")
        if c.scenario_id not in scenario_ids:
            problems.append(Problem(CONTINUATIONS_FILE, line, f"unknown scenario_id {c.scenario_id!r}",
                                    f"add the scenario to {SCENARIOS_FILE} or correct the id"))
        if not safe_relative_path(c.video):
            problems.append(Problem(CONTINUATIONS_FILE, line, f"video path {c.video!r} leaves the suite folder",
                                    "use a path relative to the suite folder, without '..'"))
        if c.takeover_s is not None and c.takeover_s < 0:
            problems.append(Problem(CONTINUATIONS_FILE, line, f"takeover_s {c.takeover_s} is negative",
                                    "takeover_s is seconds from the first frame, >= 0"))
    continuation_ids = {c.continuation_id for c in continuations}
    for file, records in ((ANNOTATIONS_FILE, annotations), (REFERENCES_FILE, references)):
        for r in records:
            line = r.extra.get("_line")
            if r.continuation_id not in continuation_ids:
                problems.append(Problem(file, line, f"unknown continuation_id {r.continuation_id!r}",
                                        f"add the continuation to {CONTINUATIONS_FILE} or correct the id"))
            if r.outcome not in OUTCOMES:
                problems.append(Problem(file, line, f"outcome {r.outcome!r} is not allowed",
                                        "write \"success\" or \"failure\""))
            if r.marker_s is not None and r.marker_s < 0:
                problems.append(Problem(file, line, f"marker_s {r.marker_s} is negative",
                                        "markers are seconds from the first frame, >= 0"))

    suite = Suite(root, info, scenarios, continuations, annotations, references) if info is not None else None
    if check_videos:  # every video with a safe path is checked, even when suite.json or another path is broken
        checked = suite or Suite(root, SuiteInfo(name="", version=""), scenarios, continuations, annotations,
                                 references)
        problems.extend(_check_videos(checked, progress))
    return suite, problems


def _read_info(path: Path, problems: list[Problem]) -> SuiteInfo | None:
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        problems.append(Problem(SUITE_FILE, None, "missing", f"write {SUITE_FILE} with format, format_version, "
                                                             "name and version"))
        return None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        problems.append(Problem(SUITE_FILE, None, f"not valid UTF-8 JSON: {err}", "write one JSON object"))
        return None
    info = _parse_record(SuiteInfo, obj, SUITE_FILE, None, problems)
    if info is not None:
        if info.format != FORMAT:
            problems.append(Problem(SUITE_FILE, None, f"format is {info.format!r}", f"write \"format\": \"{FORMAT}\""))
        if info.format_version != FORMAT_VERSION:
            problems.append(Problem(SUITE_FILE, None, f"format_version {info.format_version} is not supported",
                                    f"this reader knows format_version {FORMAT_VERSION}"))
    return info


def _unique(records: list, key: str, file: str, problems: list[Problem]) -> list:
    seen: dict[str, int] = {}
    out = []
    for r in records:
        value = getattr(r, key)
        if value in seen:
            problems.append(Problem(file, r.extra.get("_line"), f"duplicate {key} {value!r} "
                                                                 f"(first on line {seen[value]})",
                                    "give every record its own id"))
            continue
        seen[value] = r.extra.get("_line")
        out.append(r)
    return out


def _check_videos(suite: Suite, progress: bool) -> list[Problem]:
    from autorater.data.video import VideoError, video_info

    problems = []
    markers: dict[str, list[tuple[str, int | None, float]]] = {}
    for file, records in ((ANNOTATIONS_FILE, suite.annotations), (REFERENCES_FILE, suite.references)):
        for r in records:
            if r.marker_s is not None:
                markers.setdefault(r.continuation_id, []).append((file, r.extra.get("_line"), r.marker_s))
    items = suite.continuations
    if progress:
        from tqdm import tqdm
        items = tqdm(items, desc="checking videos", unit="video")
    for c in items:
        line = c.extra.get("_line")
        if not safe_relative_path(c.video):
            continue  # already reported; never open a file outside the suite
        try:
            info = video_info(suite.root / c.video)
        except VideoError as err:
            problems.append(Problem(CONTINUATIONS_FILE, line, f"continuation {c.continuation_id!r}: {err}",
                                    "re-export the video, or fix the 'video' path"))
            continue
        takeover = suite.takeover_of(c.continuation_id) if c.scenario_id in suite.scenario_by_id else 0.0
        if takeover > info.duration_s:
            problems.append(Problem(CONTINUATIONS_FILE, line, f"takeover at {takeover:.3f} s is after the end of "
                                                              f"the video ({info.duration_s:.3f} s)",
                                    "takeover_s is seconds from the first frame"))
        for file, mline, marker in markers.get(c.continuation_id, []):
            if marker > info.duration_s + 1e-6:
                problems.append(Problem(file, mline, f"marker_s {marker:.3f} is after the end of video "
                                                     f"{c.video} ({info.duration_s:.3f} s)",
                                        "markers are seconds from the first frame; a timeout is marked at the end"))
    return problems


def load_truth(suite_dir: str | os.PathLike) -> list[dict]:
    """The lines of a suite's ``simulator_truth.jsonl``."""
    path = Path(suite_dir) / TRUTH_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: only suites written by data.generate.generate_suite "
                                f"(or swap_instructions) carry the simulator truth")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
