"""``autorater suite import`` from a folder of videos and a table: every good row imported, every bad one reported
with its line and the fix, ids stable when the table grows, the suite accepted by the validator and by training.

The videos are tiny (1 s, 32-64 px) files in four containers at three frame rates, written in the test with PyAV;
rows reuse them (one video, several agents and scenarios: different continuations).
"""

from __future__ import annotations

import csv
import json
import os
import random

import numpy as np
import pytest

from autorater.app import cli
from autorater.data.example import encode_video
from autorater.data.imports.table import import_table, read_table
from autorater.data.suite import Suite, validate_suite
from model_suites import one_thread
from tiny_suites import frames

FORMATS = [("a.mp4", 32, 32, 8.0), ("b.webm", 32, 48, 8.0), ("c.avi", 48, 32, 12.0), ("d.mkv", 32, 32, 4.0),
           ("e.mp4", 64, 64, 8.0), ("f.webm", 32, 32, 12.0), ("g.avi", 32, 32, 8.0), ("h.mkv", 48, 64, 8.0)]
HEADER = ["video", "instruction", "scenario", "agent", "category", "outcome", "marker_s", "annotator"]


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    """Eight 1-second videos of mixed containers, sizes and frame rates, and one that is not a video."""
    folder = tmp_path_factory.mktemp("videos")
    for i, (name, h, w, fps) in enumerate(FORMATS):
        n = int(fps)  # 1 second
        clip = np.stack([np.pad(f, ((0, h - 16), (0, w - 16), (0, 0)), mode="edge") for f in frames(i, n)])
        encode_video(folder / name, clip, fps)
    (folder / "notes.mp4").write_text("this is not a video\n")
    return folder


def good_rows(n_continuations: int = 65) -> list[list]:
    """Three annotators' rows per continuation; a video serves several (agent, scenario) pairs."""
    rows = []
    for k in range(n_continuations):
        name = FORMATS[k % len(FORMATS)][0]
        scenario = f"s{k // 5:02d}"
        for a in range(3):
            outcome = "success" if (k + (a == 2 and k % 4 == 0)) % 2 == 0 else "failure"
            rows.append([name, f"task of {scenario}", scenario, f"agent{k % 5}", "goto", outcome, 0.25 * a + 0.25,
                         f"h{a}"])
    return rows


def write_csv(path, rows, header=HEADER):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def broken_table(path) -> tuple:
    """200 rows: the 195 of ``good_rows()`` and five broken ones; returns the path and {line: what the report says}."""
    rows = good_rows()
    broken = {  # position in the data rows -> the row and what its report must say
        10: (["missing.mp4", "task of s01", "s01", "agent9", "goto", "success", 0.5, "h0"], "not found"),
        50: (["notes.mp4", "task of s03", "s03", "agent9", "goto", "success", 0.5, "h0"], "cannot decode"),
        90: (["a.mp4", "task of s06", "s06", "agent9", "goto", "success", 7.5, "h0"], "after the end"),
        130: (rows[3], "duplicate label"),
        170: (["b.webm", "task of s11", "s11", "agent9", "goto", "maybe", "", "h0"], "not an outcome"),
    }
    for position, (row, _) in sorted(broken.items()):
        rows.insert(position, list(row))
    assert len(rows) == 200
    return write_csv(path, rows), {position + 2: reason for position, (_, reason) in broken.items()}


def test_a_200_row_table_imports_195_rows_and_reports_each_broken_row(videos, tmp_path, capsys):
    table, broken = broken_table(tmp_path / "table.csv")
    out = tmp_path / "suite"
    assert cli.main(["suite", "import", "--videos", str(videos), "--table", str(table), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    report_lines = [line for line in printed.splitlines() if line.startswith("  table.csv:")]
    assert len(report_lines) == 5
    for (line_number, reason), line in zip(sorted(broken.items()), report_lines):
        assert line.startswith(f"  table.csv:{line_number}: ") and reason in line and "(fix: " in line
    suite = Suite.load(out)
    assert len(suite.annotations) == 195 and len(suite.continuations) == 65
    assert "imported 195 row(s)" in printed and f"OK: {out} is a valid suite" in printed
    assert cli.main(["suite", "validate", str(out), "--quiet"]) == 0
    assert {c.metadata["source_video"] for c in suite.continuations} == {f[0] for f in FORMATS}
    assert {os.path.splitext(c.video)[1] for c in suite.continuations} == {".mp4", ".webm", ".avi", ".mkv"}


@pytest.mark.slow
def test_the_imported_195_rows_train(videos, tmp_path):
    """The walkthrough's test trains on an imported suite in the default run; this one on the whole 195 rows."""
    table, _ = broken_table(tmp_path / "table.csv")
    out = tmp_path / "suite"
    assert import_table(table, videos, out).imported == 195
    config = tmp_path / "tiny.json"
    config.write_text(json.dumps({"preset": "tiny", "train": {"epochs": 2, "batch_size": 16}}))
    before = one_thread()
    try:
        assert cli.main(["train", "--suite", str(out), "--out", str(tmp_path / "model"), "--config", str(config),
                         "--no-tracking", "--cache-dir", str(tmp_path / "cache"), "--quiet"]) == 0
    finally:
        import torch

        torch.set_num_threads(before)
    assert (tmp_path / "model" / "model.safetensors").is_file()


def test_strict_writes_nothing_when_a_row_is_bad(videos, tmp_path, capsys):
    rows = good_rows(4) + [["missing.mp4", "task of s00", "s00", "agent7", "goto", "success", 0.5, "h0"]]
    table = write_csv(tmp_path / "t.csv", rows)
    argv = ["suite", "import", "--videos", str(videos), "--table", str(table), "--out", str(tmp_path / "s")]
    assert cli.main([*argv, "--strict"]) == 1
    assert not (tmp_path / "s").exists()
    assert "nothing written" in capsys.readouterr().out
    assert cli.main(argv) == 0  # without --strict the good rows go in


def test_a_grown_table_adds_only_what_is_new_and_ids_stay(videos, tmp_path):
    rows = good_rows(12)
    out = tmp_path / "suite"
    first = import_table(write_csv(tmp_path / "t.csv", rows), videos, out)
    assert first.ok and first.imported == 36
    ids = Suite.load(out).continuation_ids()
    videos_before = {p.name: p.stat().st_mtime_ns for p in (out / "videos").iterdir()}
    grown = rows + good_rows(15)[36:]  # three more continuations
    grown[0][5] = "failure" if grown[0][5] == "success" else "success"  # h0 changed their mind
    random.Random(0).shuffle(grown)  # and the table was re-sorted
    second = import_table(write_csv(tmp_path / "t.csv", grown), videos, out)
    assert second.ok and (second.continuations, second.annotations, second.updated) == (3, 9, 1)
    assert second.imported == 10 and second.already == 35
    suite = Suite.load(out)
    assert suite.continuation_ids()[:12] == ids and len(suite.continuations) == 15 and len(suite.annotations) == 45
    assert all(videos_before[p] == (out / "videos" / p).stat().st_mtime_ns for p in videos_before)  # not re-copied
    third = import_table(tmp_path / "t.csv", videos, out)
    assert (third.imported, third.already) == (0, 45)


def test_csv_jsonl_and_parquet_tables_make_the_same_suite(videos, tmp_path):
    import pandas as pd

    rows = good_rows(6)
    frame = pd.DataFrame(rows, columns=HEADER)
    write_csv(tmp_path / "t.csv", rows)
    frame.to_json(tmp_path / "t.jsonl", orient="records", lines=True)
    frame.to_parquet(tmp_path / "t.parquet")
    suites = []
    for name in ("t.csv", "t.jsonl", "t.parquet"):
        assert import_table(tmp_path / name, videos, tmp_path / name.replace(".", "-")).ok
        suite = Suite.load(tmp_path / name.replace(".", "-"))
        suites.append(([(c.continuation_id, c.scenario_id, c.agent_id) for c in suite.continuations],
                       [(a.continuation_id, a.annotator_id, a.outcome, a.marker_s) for a in suite.annotations]))
    assert suites[0] == suites[1] == suites[2]


def test_scenarios_come_from_the_column_else_instruction_and_context_else_one_per_continuation(videos, tmp_path):
    header = ["video", "instruction", "agent", "context_video"]
    rows = [["a.mp4", "go left", "x", "ctx1.mp4"], ["b.webm", "go left", "y", "ctx1.mp4"],
            ["c.avi", "go left", "x", "ctx2.mp4"], ["d.mkv", "go right", "x", "ctx1.mp4"]]
    report = import_table(write_csv(tmp_path / "t.csv", rows, header), videos, tmp_path / "ctx")
    assert report.ok and report.scenarios == 3  # the first two share an instruction and a context
    scenario = {c.metadata["source_video"]: c.scenario_id for c in Suite.load(tmp_path / "ctx").continuations}
    assert scenario["a.mp4"] == scenario["b.webm"] != scenario["c.avi"]
    report = import_table(write_csv(tmp_path / "u.csv", [r[:3] for r in rows], header[:3]), videos, tmp_path / "per")
    assert report.ok and report.scenarios == 4 and report.kept_columns == []


def test_columns_named_by_flags_and_a_missing_required_column_says_which(videos, tmp_path, capsys):
    table = write_csv(tmp_path / "t.csv", [["a.mp4", "go", "p1", "success", 0.5]],
                      ["file", "Instruction", "policy", "result", "marker"])
    code = cli.main(["suite", "import", "--videos", str(videos), "--table", str(table), "--out", str(tmp_path / "s")])
    assert code == 2 and "no column for video, agent" in capsys.readouterr().err
    assert cli.main(["suite", "import", "--videos", str(videos), "--table", str(table), "--out", str(tmp_path / "s"),
                     "--video-column", "file", "--agent-column", "policy", "--outcome-column", "result"]) == 0
    printed = capsys.readouterr().out
    assert "instruction <- 'Instruction'" in printed and "agent <- 'policy'" in printed  # another case is found
    assert "column 'marker' is kept as metadata, not read as marker_s" in printed  # a near miss is pointed out
    (annotation,) = Suite.load(tmp_path / "s").annotations
    assert annotation.outcome == "success" and annotation.marker_s is None
    assert cli.main(["suite", "import", "--videos", str(videos), "--table", str(table), "--out", str(tmp_path / "x"),
                     "--video-column", "file", "--agent-column", "policy", "--scenario-column", "level"]) == 0
    assert "t.csv:1: no column 'level' for scenario" in capsys.readouterr().out


def test_gold_columns_make_references_and_link_shares_the_file(videos, tmp_path):
    header = HEADER + ["gold_outcome", "gold_marker_s"]
    rows = [r + ["success", 0.5] for r in good_rows(2)[:3]] + [r + ["", ""] for r in good_rows(2)[3:]]
    out = tmp_path / "s"
    assert import_table(write_csv(tmp_path / "t.csv", rows, header), videos, out, link=True).ok
    suite = Suite.load(out)
    assert [(r.continuation_id, r.outcome, r.marker_s) for r in suite.references] == \
        [(suite.continuations[0].continuation_id, "success", 0.5)]
    copy = suite.video_path(suite.continuations[0].continuation_id)
    assert os.path.samefile(copy, videos / "a.mp4")  # hard-linked, not copied
    assert validate_suite(out) == []


def test_bad_lines_of_jsonl_are_reported_and_the_rest_read(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"video": "a.mp4", "instruction": "go", "agent": "x"}\n{"video": \n[1, 2]\n')
    columns, rows, problems = read_table(path)
    assert columns == ["video", "instruction", "agent"] and len(rows) == 1
    assert [(p.line, "JSON" in p.message) for p in problems] == [(2, True), (3, True)]
