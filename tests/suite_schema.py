"""An independent validator of SUITE_FORMAT v1, written from ``docs/suite-format.md`` with JSON Schema.

It shares no code with ``autorater.data.suite`` (deliberately: two readings of the spec that must agree), so a
test can check that what ``Suite.write`` or the generator writes is a valid suite by the spec itself.

Per-record rules are JSON Schema (draft 2020-12); the rest are plain cross-file checks: unique ids,
references to known ids, relative paths that stay inside the suite, videos that exist. Videos are
not decoded here.

Readings of the spec made here:
- An optional field may be written as ``null`` when it has no value (``marker_s`` says so; the same is
  accepted for ``created_at``, ``failure_mode`` and a continuation's ``takeover_s``, which overrides
  the scenario's only when present). A scenario's ``takeover_s`` has a default (0) and must be a number.
- "Field names in snake_case" is checked on the top-level fields of every object, unknown fields
  included (which also catches leaked internal keys such as ``_line``).
- Numbers must be finite: ``NaN`` / ``Infinity`` are not JSON.
- Blank lines are ignored.

Example:
    >>> independent_problems("my-suite")          # doctest: +SKIP
    []
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path, PurePosixPath

from jsonschema import Draft202012Validator

__all__ = ["SCHEMAS", "independent_problems"]

_SNAKE = {"propertyNames": {"pattern": "^[a-z][a-z0-9]*(_[a-z0-9]+)*$"}}
_ID = {"type": "string"}
_STR = {"type": "string"}
_OPT_STR = {"type": ["string", "null"]}
_SECONDS = {"type": "number", "minimum": 0}
_OPT_SECONDS = {"type": ["number", "null"], "minimum": 0}
_OUTCOME = {"enum": ["success", "failure"]}


def _object(required: dict, optional: dict) -> dict:
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
            "required": list(required), "properties": {**required, **optional}, **_SNAKE}


SCHEMAS = {
    "suite.json": _object(
        {"format": {"const": "autorater-suite"}, "format_version": {"type": "integer", "const": 1},
         "name": _STR, "version": _STR},
        {"description": _STR, "created_at": _OPT_STR, "source": {"type": "object"}}),
    "scenarios.jsonl": _object(
        {"scenario_id": _ID, "instruction": {"type": "string", "pattern": r"\S"}, "category": _STR},
        {"tags": {"type": "array", "items": _STR}, "takeover_s": _SECONDS, "metadata": {"type": "object"}}),
    "continuations.jsonl": _object(
        {"continuation_id": _ID, "scenario_id": _ID, "agent_id": _STR, "video": _STR},
        {"takeover_s": _OPT_SECONDS, "metadata": {"type": "object"}}),
    "annotations.jsonl": _object(
        {"continuation_id": _ID, "annotator_id": _STR, "outcome": _OUTCOME},
        {"marker_s": _OPT_SECONDS, "failure_mode": _OPT_STR, "created_at": _OPT_STR, "source": _STR}),
    "references.jsonl": _object(
        {"continuation_id": _ID, "outcome": _OUTCOME},
        {"marker_s": _OPT_SECONDS, "failure_mode": _OPT_STR}),
}
_REQUIRED_FILES = ("suite.json", "scenarios.jsonl", "continuations.jsonl")
_VALIDATORS = {name: Draft202012Validator(schema) for name, schema in SCHEMAS.items()}


class _NotJson(ValueError):
    pass


def _reject_constant(token: str):
    raise _NotJson(f"{token} is not a JSON number")


def _schema_problems(name: str, where: str, obj) -> list[str]:
    out = []
    for err in sorted(_VALIDATORS[name].iter_errors(obj), key=lambda e: list(map(str, e.path))):
        field = "/".join(map(str, err.path)) or "(object)"
        out.append(f"{where}: {field}: {err.message}")
    return out


def _read_jsonl(root: Path, name: str, problems: list[str]) -> list[tuple[int, dict, bool]]:
    """(line number, object, schema-valid) of every line holding an object; problems for the others.

    Objects that break their schema are returned too, so that their ids still count as known (one
    broken field is one problem, not a cascade of unknown ids)."""
    path = root / name
    if not path.is_file():
        if name in _REQUIRED_FILES:
            problems.append(f"{name}: missing")
        return []
    out = []
    for number, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        where = f"{name}:{number}"
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
        except UnicodeDecodeError:
            problems.append(f"{where}: not UTF-8")
            continue
        except (json.JSONDecodeError, _NotJson) as err:
            problems.append(f"{where}: not a JSON value: {err}")
            continue
        found = _schema_problems(name, where, obj)
        problems.extend(found)
        if isinstance(obj, dict):
            out.append((number, obj, not found))
    return out


def _inside(path: str) -> bool:
    """A relative POSIX path that stays inside the suite folder."""
    if not path or "\\" in path or re.match(r"^[A-Za-z]:", path):
        return False
    p = PurePosixPath(path)
    return not p.is_absolute() and ".." not in p.parts


def _unique(name: str, records: list[tuple[int, dict, bool]], key: str, problems: list[str]) -> set:
    first: dict = {}
    for number, obj, _ in records:
        if not isinstance(obj.get(key), str):
            continue  # already reported by the schema
        if obj[key] in first:
            problems.append(f"{name}:{number}: duplicate {key} {obj[key]!r} (first on line {first[obj[key]]})")
        else:
            first[obj[key]] = number
    return set(first)


def independent_problems(suite_dir: str | os.PathLike) -> list[str]:
    """Every broken rule of SUITE_FORMAT v1 found in ``suite_dir`` as ``file[:line]: message``; [] when valid."""
    root = Path(suite_dir)
    if not root.is_dir():
        return [f"{root}: not a folder"]
    problems: list[str] = []
    info_path = root / "suite.json"
    if not info_path.is_file():
        problems.append("suite.json: missing")
    else:
        try:
            info = json.loads(info_path.read_bytes().decode("utf-8"), parse_constant=_reject_constant)
        except (UnicodeDecodeError, json.JSONDecodeError, _NotJson) as err:
            problems.append(f"suite.json: not UTF-8 JSON: {err}")
        else:
            problems.extend(_schema_problems("suite.json", "suite.json", info))

    scenarios = _read_jsonl(root, "scenarios.jsonl", problems)
    continuations = _read_jsonl(root, "continuations.jsonl", problems)
    annotations = _read_jsonl(root, "annotations.jsonl", problems)
    references = _read_jsonl(root, "references.jsonl", problems)

    scenario_ids = _unique("scenarios.jsonl", scenarios, "scenario_id", problems)
    continuation_ids = _unique("continuations.jsonl", continuations, "continuation_id", problems)
    _unique("references.jsonl", references, "continuation_id", problems)
    for number, c, valid in continuations:
        if not valid:
            continue
        where = f"continuations.jsonl:{number}"
        if c["scenario_id"] not in scenario_ids:
            problems.append(f"{where}: scenario_id {c['scenario_id']!r} is not in scenarios.jsonl")
        if not _inside(c["video"]):
            problems.append(f"{where}: video {c['video']!r} is not a relative path inside the suite")
        elif not (root / c["video"]).is_file() or (root / c["video"]).stat().st_size == 0:
            problems.append(f"{where}: video {c['video']!r} does not exist (or is empty)")
    for name, records in (("annotations.jsonl", annotations), ("references.jsonl", references)):
        for number, r, valid in records:
            if valid and r["continuation_id"] not in continuation_ids:
                problems.append(f"{name}:{number}: continuation_id {r['continuation_id']!r} is not in "
                                f"continuations.jsonl")
    return problems
