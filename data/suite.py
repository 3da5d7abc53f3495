"""The suite format, version 1 (``docs/suite-format.md``): a suite folder read, validated and written (its records
and their lines: :mod:`autorater.data.records`).

A suite is a folder of JSON Lines files plus videos. Reading never stops at the first problem: every
rule is checked and every problem is reported with its file, line and fix, so a team can repair a
suite in one pass.

Example:
    >>> suite = Suite.load("my-suite")                      # doctest: +SKIP
    >>> suite.instruction_of("c000913")                     # doctest: +SKIP
    'put the red box next to the grey key'
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from autorater.data.files import (
    CHANGE_FILE,
    FolderChange,
    JournalError,
    json_text,
    pending_files,
    recover_if_free,
)
from autorater.data.records import (
    ANNOTATIONS_FILE,
    CONTINUATIONS_FILE,
    FORMAT,
    FORMAT_VERSION,
    OUTCOMES,
    REFERENCES_FILE,
    SCENARIOS_FILE,
    SUITE_FILE,
    SWAP_TAG,
    TRUTH_FILE,
    Annotation,
    Continuation,
    Problem,
    Reference,
    Scenario,
    SuiteFormatError,
    SuiteInfo,
    annotation_problems,
    jsonl_bytes,
    parse_record,
    read_jsonl,
    record_to_dict,
    safe_relative_path,
    write_jsonl,
)


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
    info = parse_record(SuiteInfo, obj, SUITE_FILE, None, problems)
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


# The records are the format's too: importers name them through the suite (their home: data/records.py).
__all__ = ["ANNOTATIONS_FILE", "CONTINUATIONS_FILE", "FORMAT", "FORMAT_VERSION", "OUTCOMES", "REFERENCES_FILE",
           "SCENARIOS_FILE", "SUITE_FILE", "SWAP_TAG", "TRUTH_FILE", "Annotation", "Continuation", "Problem",
           "Reference", "Scenario", "Suite", "SuiteFormatError", "SuiteInfo", "annotation_problems", "iter_problems",
           "jsonl_bytes", "load_truth", "parse_record", "read_jsonl", "record_to_dict", "safe_relative_path",
           "validate_suite", "write_jsonl"]
