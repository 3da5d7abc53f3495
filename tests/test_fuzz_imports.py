"""Issue 50: a property-based fuzz (Hypothesis, derandomized) of the ways a user's data comes in: ``autorater suite
import`` from a Label Studio export and from a table (ids, text, paths, numbers drawn from hostile values), and
``suite tag --where``. Whatever the input: no traceback (``main`` returns, 0, 1 or 2), nothing written outside the
output folder, and the suite either unchanged or valid."""

from __future__ import annotations

import csv
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autorater.app import cli
from autorater.data.suite import validate_suite
from tiny_suites import tiny_suite

SETTINGS = dict(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
EXAMPLES = int(os.environ.get("AUTORATER_FUZZ_EXAMPLES", "20"))

HOSTILE_TEXT = ["", " ", "..", "../../escaped", "/tmp/abs", "a/b", ".hidden", "x" * 300, "go \ud800", "\x1b[2J",
                "c1", "ok-id", "s1", "\u202e", "\x00", "C:\\x", "~/.bashrc", "%2e%2e/x"]
texts = st.one_of(st.sampled_from(HOSTILE_TEXT), st.text(max_size=20))
numbers = st.one_of(st.sampled_from([0, -1, 0.5, 1e-320, 1e308, 10 ** 400, True, None, "nan", "1e400"]),
                    st.floats(allow_nan=False, allow_infinity=False), st.integers())
videos = st.sampled_from(["/data/local-files/?d=suite/videos/c1.mp4", "suite/videos/c2.mp4", "../outside.mp4",
                          "/data/local-files/?d=../outside.mp4", "/etc/passwd", "suite/videos/link-out.mp4",
                          "suite/videos/fifo.mp4", "suite/videos", "suite/videos/missing.mp4", "\ud800.mp4", ""])


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A sandbox: ``outside/`` (must never change), ``media/`` (a tiny suite's videos, a symlink out, a FIFO) and a
    suite grown by the imports."""
    base = tmp_path_factory.mktemp("fuzz-imports")
    media = base / "media"
    tiny_suite(media / "suite")
    (base / "outside").mkdir()
    (base / "outside.mp4").write_bytes((media / "suite" / "videos" / "c1.mp4").read_bytes())
    (media / "suite" / "videos" / "link-out.mp4").symlink_to(base / "outside.mp4")
    os.mkfifo(media / "suite" / "videos" / "fifo.mp4")
    return base


def snapshot(root) -> dict:
    return {str(p.relative_to(root)): (p.stat().st_size if p.is_file() and not p.is_symlink() else -1)
            for p in root.rglob("*") if not p.name.startswith(".lock")}


def check_run(world, out, argv, capsys) -> None:
    before_outside = snapshot(world / "outside") | {"outside.mp4": (world / "outside.mp4").stat().st_size}
    before_files = {p.name for p in world.iterdir()}
    before = snapshot(out) if out.exists() else None
    code = cli.main(argv)  # a traceback would raise out of here and fail the test
    captured = capsys.readouterr()
    assert code in (0, 1, 2) and "Traceback" not in captured.err
    assert snapshot(world / "outside") | {"outside.mp4": (world / "outside.mp4").stat().st_size} == before_outside
    assert {p.name for p in world.iterdir()} - before_files <= {out.name, "input.json", "input.csv"}
    if out.exists() and (before is None or snapshot(out) != before):
        assert validate_suite(out, check_videos=False) == []  # changed: then valid
    assert not [p for p in (out.rglob("*") if out.exists() else []) if p.name.endswith((".part", ".tmp"))]


task = st.fixed_dictionaries({"continuation_id": texts, "instruction": texts, "agent_id": texts, "scenario_id": texts,
                              "video": videos, "takeover_s": numbers, "fps": numbers, "category": texts},
                             optional={"tags": st.lists(texts, max_size=3), "frames": numbers})


@settings(max_examples=EXAMPLES, **SETTINGS)
@given(tasks=st.lists(task, min_size=1, max_size=3), frame=numbers, ann_id=numbers)
def test_fuzz_a_label_studio_export_import(world, capsys, tasks, frame, ann_id):
    export = [{"id": i, "data": data, "annotations": [
        {"id": ann_id, "completed_by": 1, "was_cancelled": False,
         "result": [{"type": "timelinelabels", "from_name": "outcome", "to_name": "video",
                     "value": {"ranges": [{"start": frame, "end": frame}], "timelinelabels": ["success"]}}]}]}
              for i, data in enumerate(tasks)]
    (world / "input.json").write_text(json.dumps(export))  # lone surrogates written as their escapes
    out = world / "suite-ls"
    check_run(world, out, ["suite", "import", "--from-labelstudio", str(world / "input.json"), "--media-root",
                           str(world / "media"), "--out", str(out)], capsys)


row = st.fixed_dictionaries({"video": videos, "instruction": texts, "agent": texts, "continuation_id": texts,
                             "scenario": texts, "takeover_s": numbers, "outcome": st.sampled_from(
                                 ["success", "failure", "maybe", "", "1"]), "marker_s": numbers, "annotator": texts})


@settings(max_examples=EXAMPLES, **SETTINGS)
@given(rows=st.lists(row, min_size=1, max_size=3))
def test_fuzz_a_table_import(world, capsys, rows):
    path = world / "input.csv"
    with open(path, "w", newline="", encoding="utf-8", errors="surrogateescape") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        for r in rows:
            writer.writerow({k: str(v).encode("utf-8", "replace").decode("utf-8") for k, v in r.items()})
    out = world / "suite-table"
    check_run(world, out, ["suite", "import", "--table", str(path), "--videos", str(world / "media"), "--out",
                           str(out)], capsys)


where_parts = st.sampled_from(["category == goto", "tags has v1", "not", "and", "or", "(", ")", "[", "]", ",", "in",
                               '"\ud800"', "instruction contains red", "scenario_id startswith s", "'", "==", "x"])


@settings(max_examples=EXAMPLES * 2, **SETTINGS)
@given(parts=st.lists(where_parts, max_size=12), depth=st.integers(0, 200))
def test_fuzz_where(world, capsys, parts, depth):
    out = world / "suite-tag"
    if not out.exists():
        tiny_suite(out, videos=False)
    expression = "(" * depth + " ".join(parts) + ")" * depth
    check_run(world, out, ["suite", "tag", str(out), "--tag", "fuzz", "--where", expression], capsys)
