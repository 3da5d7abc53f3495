"""What ``Suite.write`` writes is valid by an independent reading of the spec (``tests/suite_schema.py``)."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from autorater.data.suite import Suite, validate_suite
from suite_schema import SCHEMAS, independent_problems
from tiny_suites import read_lines, tiny_suite, write_lines


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("schema") / "suite"
    tiny_suite(root)
    return root


@pytest.fixture
def suite_dir(template, tmp_path) -> Path:
    return Path(shutil.copytree(template, tmp_path / "suite"))


def test_schemas_are_valid_draft_2020_12():
    for name, schema in SCHEMAS.items():
        Draft202012Validator.check_schema(schema)
        assert schema["$schema"].endswith("2020-12/schema"), name


def test_the_validator_is_independent_of_data_suite():
    source = (Path(__file__).parent / "suite_schema.py").read_text()
    imported = {n.module if isinstance(n, ast.ImportFrom) else a.name
                for n in ast.walk(ast.parse(source)) if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in (n.names if isinstance(n, ast.Import) else [n])}
    assert not {m for m in imported if m and (m == "data" or m.startswith(("data.", "autorater")))}


def test_a_suite_written_by_suite_write_is_valid(suite_dir, tmp_path):
    assert independent_problems(suite_dir) == []
    # a loaded suite written again (its records carry the reader's bookkeeping) is still valid
    Suite.load(suite_dir).write(suite_dir)
    assert independent_problems(suite_dir) == []
    assert validate_suite(suite_dir) == []


def test_a_suite_without_optional_files_is_valid(suite_dir):
    (suite_dir / "annotations.jsonl").unlink()
    (suite_dir / "references.jsonl").unlink()
    assert independent_problems(suite_dir) == []


def _edit(path: Path, line: int, **fields):
    lines = read_lines(path)
    lines[line - 1].update(fields)
    write_lines(path, lines)


def _append(path: Path, obj):
    write_lines(path, [json.dumps(o).encode() for o in read_lines(path)] + [obj])


def test_it_catches_a_broken_suite(suite_dir):
    root = suite_dir
    info = json.loads((root / "suite.json").read_text())
    (root / "suite.json").write_text(json.dumps({**info, "format_version": 2}))
    _edit(root / "scenarios.jsonl", 2, instruction=" ")
    _append(root / "scenarios.jsonl", {"scenario_id": "s1", "instruction": "again", "category": "goto"})
    _edit(root / "continuations.jsonl", 1, video="../c1.mp4")
    _edit(root / "continuations.jsonl", 2, scenario_id="s9")
    (root / "videos" / "c3.mp4").unlink()
    _append(root / "continuations.jsonl", b'{"continuation_id": "c5", "scenario_id": "s1", "agent_id": "a", '
                                          b'"video": "videos/c4.mp4", "takeover_s": NaN}')
    _edit(root / "annotations.jsonl", 1, outcome="yes")
    _edit(root / "annotations.jsonl", 2, marker_s=True)
    _edit(root / "annotations.jsonl", 3, continuation_id="c9")
    _edit(root / "annotations.jsonl", 4, _line=4)
    _edit(root / "annotations.jsonl", 5, markerS=1.0)
    _append(root / "references.jsonl", {"continuation_id": "c1", "outcome": "success"})
    _edit(root / "references.jsonl", 2, marker_s=-1)

    problems = independent_problems(root)
    expected = ["suite.json: format_version", "scenarios.jsonl:2: instruction", "scenarios.jsonl:3: duplicate",
                "continuations.jsonl:1: video '../c1.mp4'", "continuations.jsonl:2: scenario_id 's9'",
                "continuations.jsonl:3: video 'videos/c3.mp4' does not exist", "continuations.jsonl:5: not a JSON",
                "annotations.jsonl:1: outcome", "annotations.jsonl:2: marker_s", "annotations.jsonl:3: continuation_id",
                "annotations.jsonl:4: (object)", "annotations.jsonl:5: (object)", "references.jsonl:4: duplicate",
                "references.jsonl:2: marker_s"]
    for start in expected:
        assert any(p.startswith(start) for p in problems), (start, problems)
    assert len(problems) == len(expected), problems
    # data.suite finds every one of these lines too (its own reading of the same spec) ...
    found = {(p.file, p.line) for p in validate_suite(root)}
    for start in expected:
        file, _, rest = start.partition(":")
        line = int(rest.split(":")[0]) if rest[:1].isdigit() else None
        if "(object)" in start:  # ... except field-name style, which it does not check
            continue
        assert (file, line) in found, start


@pytest.mark.parametrize("missing", ["suite.json", "scenarios.jsonl", "continuations.jsonl"])
def test_required_files(suite_dir, missing):
    (suite_dir / missing).unlink()
    assert f"{missing}: missing" in independent_problems(suite_dir)
