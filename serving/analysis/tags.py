"""``autorater suite tag``: tags a team adds to a suite's scenarios, written into ``scenarios.jsonl``.

The scenarios are chosen by a file of ids or by a ``--where`` expression (``autorater.data.where``). The write holds
the suite's lock (the one ``suite import``, ``ingest`` and ``serve``'s webhook take), replaces ``scenarios.jsonl``
whole (``autorater.data.files.FolderChange``: temp file, fsync, journal, rename) and reloads the suite to check it;
tagging twice changes nothing the second time. :func:`stamp_version` gives every scenario without a ``version:`` tag
the one of the version it came in (the import does it in its own change).

Example:
    >>> result = tag_suite("my-suite", "hard-cases", where='category == "put_next"')   # doctest: +SKIP
    >>> result.changed, result.already                                                 # doctest: +SKIP
    (12, 0)
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from autorater.data.files import FolderChange
from autorater.data.suite import SCENARIOS_FILE, Suite, jsonl_bytes
from autorater.data.versions import check_tag, with_version_tag
from autorater.data.where import parse_where, scenario_fields
from autorater.serving.labelling.folder import folder_lock

LOCK_WHAT = "suite import, ingest, tag or webhook"


@dataclass
class TagResult:
    """What a tagging did: the scenarios matched, those changed, those that already had it (or lacked it)."""

    suite: str
    tag: str
    removed: bool
    matched: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)

    @property
    def already(self) -> int:
        return len(self.matched) - len(self.changed)

    def __str__(self) -> str:
        verb, prep = ("removed", "from") if self.removed else ("added", "to")
        state = "lacked" if self.removed else "had"
        return (f"tag {self.tag!r} {verb} {prep} {len(self.changed)} scenario(s) of {self.suite} "
                f"({len(self.matched)} matched, {self.already} already {state} it)")


def read_scenario_ids(path: str | os.PathLike) -> list[tuple[int, str]]:
    """(line, id) of a file of scenario ids: one per line (blank lines and ``#`` comments skipped), or JSON Lines
    objects with a ``scenario_id`` (what ``suite propose`` and ``suite diff --json`` hand on)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"cannot read the scenario ids in {path}: {err} (fix: pass a UTF-8 text file, one "
                         f"scenario_id per line)") from None
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("{"):
            try:
                sid = json.loads(line).get("scenario_id")
            except (ValueError, AttributeError):
                sid = None
            if not isinstance(sid, str):
                raise ValueError(f"{path}:{number}: a JSON line without a string 'scenario_id' (fix: one scenario_id "
                                 f"per line, or JSON objects with one)")
            line = sid
        out.append((number, line))
    if not out:
        raise ValueError(f"{path} lists no scenario id (fix: one scenario_id per line)")
    return out


def tag_suite(root: str | os.PathLike, tag: str, *, scenarios_file: str | os.PathLike | None = None,
              where: str | None = None, remove: bool = False) -> TagResult:
    """Add ``tag`` to (or, with ``remove``, take it from) the chosen scenarios of the suite at ``root``.

    Args:
        root: the suite folder.
        tag: the tag (``autorater.data.versions.check_tag``: no comma, no control character).
        scenarios_file: a file of scenario ids (:func:`read_scenario_ids`); every id must be in the suite.
        where: an expression over category, instruction, scenario_id and tags (``autorater.data.where``).
        remove: take the tag off instead.

    Raises:
        ValueError: a bad tag or expression, an unknown scenario id (with its line), nothing matched, or both or
            neither of ``scenarios_file`` and ``where``.
    """
    tag = check_tag(tag)
    if (scenarios_file is None) == (where is None):
        raise ValueError("choose the scenarios with --scenarios FILE or with --where EXPR (one of them)")
    match = parse_where(where) if where is not None else None
    root = Path(root)
    with folder_lock(root, LOCK_WHAT, wait=True):
        suite = Suite.load(root)
        if match is not None:
            chosen = [s for s in suite.scenarios if match(scenario_fields(s))]
            if not chosen:
                raise ValueError(f"--where {where!r} matches none of the {len(suite.scenarios)} scenarios of {root} "
                                 f"(fix: check the expression; `autorater suite stats {root}` lists the categories)")
        else:
            chosen = _chosen_by_file(suite, scenarios_file)
        result = TagResult(str(root), tag, remove, matched=[s.scenario_id for s in chosen])
        for s in chosen:
            if remove and tag in s.tags:
                s.tags = [t for t in s.tags if t != tag]
                result.changed.append(s.scenario_id)
            elif not remove and tag not in s.tags:
                s.tags = list(s.tags) + [tag]
                result.changed.append(s.scenario_id)
        if result.changed:
            _write_scenarios(suite)
    return result


def _chosen_by_file(suite: Suite, path) -> list:
    chosen, seen = [], set()
    for line, sid in read_scenario_ids(path):
        if sid not in suite.scenario_by_id:
            raise ValueError(f"{path}:{line}: unknown scenario_id {sid[:80]!r}: not in {suite.root / SCENARIOS_FILE} "
                             f"(fix: correct the id, or remove the line)")
        if sid not in seen:
            seen.add(sid)
            chosen.append(suite.scenario_by_id[sid])
    return chosen


def _write_scenarios(suite: Suite) -> None:
    """Replace ``scenarios.jsonl`` whole (a change of the folder: it also finishes one a crash cut short and removes
    a killed writer's temps), then check that the suite still loads."""
    with FolderChange(suite.root) as change:
        change.write_bytes(SCENARIOS_FILE, jsonl_bytes(suite.scenarios))
    Suite.load(suite.root)


def stamp_version(root: str | os.PathLike, version: str | None = None, lock: bool = True) -> list[str]:
    """Tag every scenario of the suite at ``root`` that has no ``version:`` tag with ``version:<version>`` (default:
    the suite's own version): the version it came in. Returns the scenarios stamped.

    ``lock=False`` for a caller that already holds the suite's lock (the import).
    """
    root = Path(root)
    with folder_lock(root, LOCK_WHAT, wait=True) if lock else contextlib.nullcontext():
        suite = Suite.load(root)
        version = version or suite.info.version
        stamped = []
        for s in suite.scenarios:
            tags = with_version_tag(s.tags, version)
            if tags != s.tags:
                s.tags = tags
                stamped.append(s.scenario_id)
        if stamped:
            _write_scenarios(suite)
    return stamped


__all__ = ["LOCK_WHAT", "TagResult", "read_scenario_ids", "stamp_version", "tag_suite"]
