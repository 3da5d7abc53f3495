"""Issue 65 (items 10 and 13 of its Why): markers at ingest are read at the video's own frame rate, whatever
``tasks.json`` or the export says, and one past the video's end is refused; one bad row of an ingest is listed
(``ingest-problems.jsonl``, naming where) while the good ones are taken; a lone surrogate in a stratum can be
neither a key nor a traceback. Real files: a hand-made suite with real videos, labelled by ``autorater label``."""

from __future__ import annotations

import json
import random
import shutil

import pytest

from autorater.app import cli
from autorater.data.files import write_text_atomic
from autorater.data.suite import Annotation, Suite
from autorater.serving.labelling.ingest import ingest
from autorater.serving.labelling.label import label_suite
from autorater.serving.labelling.strata import stratum_key
from autorater.serving.labelstudio.formats import annotations_to_export
from tiny_suites import FPS, N_FRAMES, new_version, read_lines


@pytest.fixture()
def labelled(env, tmp_path):
    """A fresh copy of the hand-made suite, labelled (every continuation goes to people: the model is untrained)."""
    shutil.copytree(env["suite"].root, tmp_path / "suite")
    suite = new_version(tmp_path / "suite")
    label_suite(env["model"], suite, tmp_path / "labels", audit_share=0.3, progress=False)
    tasks_file = tmp_path / "labels" / "labelstudio" / "tasks.json"
    return {"suite": suite, "labels": tmp_path / "labels", "tasks_file": tasks_file, "root": tmp_path,
            "tasks": json.loads(tasks_file.read_text())}


def _export(labelled, marker_s: float = 0.5, n: int | None = None) -> list[dict]:
    tasks = labelled["tasks"][:n]
    return annotations_to_export(tasks, [Annotation(t["data"]["continuation_id"], f"h{i}", "success",
                                                    marker_s=marker_s) for i, t in enumerate(tasks)])


def _write(path, obj):
    path.write_text(json.dumps(obj))
    return path


def _edit_tasks(labelled, **data):
    tasks = json.loads(labelled["tasks_file"].read_text())
    tasks[0]["data"].update(data)
    labelled["tasks_file"].write_text(json.dumps(tasks))


def _human(labelled) -> list[dict]:
    path = labelled["labels"] / "human_annotations.jsonl"
    return read_lines(path) if path.is_file() else []


@pytest.mark.parametrize("fps,frames", [(1000.0, N_FRAMES), (0.1, 100), (1000.0, 100)])
def test_markers_are_read_at_the_videos_own_frame_rate_whatever_tasks_json_says(labelled, fps, frames):
    """tasks.json's fps outranked the video's: a 3.625 s marker was stored as 0.029 s, a 145 s one kept for a 4.6 s
    video, and the warning called tasks.json's value the video's."""
    assert labelled["tasks"][0]["data"]["fps"] == FPS
    _edit_tasks(labelled, fps=fps, frames=frames)
    result = ingest(labelled["labels"], _write(labelled["root"] / "e.json", _export(labelled, marker_s=0.5)))
    assert result["errors"] == 0 and result["accepted"] == len(labelled["tasks"])
    assert {r["marker_s"] for r in _human(labelled)} == {0.5}  # frame 5 at the video's 8 fps
    assert {a.marker_s for a in Suite.load(labelled["suite"].root).annotations if a.annotator_id.startswith("ls-")} \
        == {0.5}
    (warning,) = [p for p in result["problems"] if "tasks.json says" in p]
    said, video = warning.split("tasks.json says ")[1].split(", the video ")
    assert f"{fps:g}" in said.replace(".0", "") and video.startswith(f"{FPS:g} fps and {N_FRAMES} frames")


def test_a_marker_past_the_end_of_the_video_is_refused_whatever_tasks_json_says(labelled):
    _edit_tasks(labelled, fps=0.1, frames=1000)  # would make frame 50 a time of 490 s, inside 1000 frames
    export = _export(labelled)
    export[0]["annotations"][0]["result"][0]["value"]["ranges"] = [{"start": 50, "end": 50}]
    result = ingest(labelled["labels"], _write(labelled["root"] / "e.json", export))
    cid = labelled["tasks"][0]["data"]["continuation_id"]
    assert result["errors"] == 1 and result["accepted"] == len(labelled["tasks"]) - 1
    assert any(f"frames 1..{N_FRAMES}" in p and cid in p for p in result["problems"])
    assert cid not in {r["continuation_id"] for r in _human(labelled)}
    problems = read_lines(labelled["labels"] / "ingest-problems.jsonl")
    assert any(p["level"] == "error" and "outside the video" in p["message"] for p in problems)


def test_an_exports_own_fps_is_named_the_right_way_round_and_the_videos_used(labelled):
    export = _export(labelled, n=1)
    export[0]["data"]["fps"] = 1000
    result = ingest(labelled["labels"], _write(labelled["root"] / "e.json", export))
    assert any(f"the task says fps 1000, the video {FPS:g}; the video's is used" in p for p in result["problems"])
    assert [r["marker_s"] for r in _human(labelled)] == [0.5]


def test_a_video_that_cannot_be_read_falls_back_to_tasks_json_and_says_so(labelled):
    cid = labelled["tasks"][0]["data"]["continuation_id"]
    (labelled["suite"].root / labelled["suite"].get(cid).video).write_bytes(b"not a video")
    result = ingest(labelled["labels"], _write(labelled["root"] / "e.json", _export(labelled, n=1)))
    assert result["accepted"] == 1 and [r["marker_s"] for r in _human(labelled)] == [0.5]
    assert any("cannot be read" in p and f"tasks.json's fps {FPS:g} is used" in p for p in result["problems"])


def test_one_bad_row_of_an_annotations_jsonl_is_listed_and_the_good_ones_are_taken(labelled):
    """One lone surrogate in an annotator id failed the whole ingest (and so did a NaN, a number of 5,001 digits or
    nesting 100,000 deep anywhere in a row): each is a listed problem naming its line now."""
    cids = [t["data"]["continuation_id"] for t in labelled["tasks"]]
    good = [json.dumps({"continuation_id": c, "annotator_id": f"h{i}", "outcome": "success", "marker_s": 0.5})
            for i, c in enumerate(cids)]
    row = '{"continuation_id": "%s", "annotator_id": "hbad", "outcome": "failure", %s}' % (cids[0], "%s")
    bad = [row % '"x": 1', row % '"annotator_id": "ann\\ud800"', row % '"created_at": "\\udfff"',
           row % '"note": NaN', row % '"n": 1%s' % ("0" * 5000), row % '"n": %s' % ("[" * 100_000 + "]" * 100_000),
           row % '"marker_s": 1e400', row % '"annotator_id": "a\\u001b[31m"', row % '"ls_annotation_id": "\\ud800"']
    bad[0] = bad[0].replace('"annotator_id": "hbad", ', "")  # no annotator at all
    lines = [good[0], *bad, *good[1:]]
    path = labelled["root"] / "more.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = ingest(labelled["labels"], path)
    assert result["accepted"] == len(good) and result["errors"] == len(bad)
    assert sorted(r["annotator_id"] for r in _human(labelled)) == sorted(f"h{i}" for i in range(len(good)))
    problems = read_lines(labelled["labels"] / "ingest-problems.jsonl")
    assert sorted(p["where"] for p in problems) == sorted(f"more.jsonl:{i + 2}" for i in range(len(bad)))
    assert all(p["fix"] for p in problems)
    assert len(Suite.load(labelled["suite"].root).annotations) == len(labelled["suite"].annotations) + len(good)


def test_one_bad_annotation_of_an_export_is_listed_and_the_rest_taken(labelled):
    export = _export(labelled)
    first, second = export[0]["annotations"][0], export[1]["annotations"][0]
    first["created_at"] = "2026-11-23T12:00:00Z\ud800"  # kept as written before: the history could not be written
    second["completed_by"] = "ann\ud800"  # an annotator is kept, escaped
    path = labelled["root"] / "e.json"
    path.write_text(json.dumps(export))
    result = ingest(labelled["labels"], path)
    assert result["errors"] == 1 and result["accepted"] == len(export) - 1
    assert any("created_at" in p and f"task {export[0]['id']} " in p for p in result["problems"])
    assert "ls-ann\\ud800" in {r["annotator_id"] for r in _human(labelled)}
    Suite.load(labelled["suite"].root)


def test_a_stratum_key_is_always_writable_and_two_strata_never_share_one():
    rng = random.Random(0)
    alphabet = ["a", "=", "|", "\\", "\ud800", "\udfff", "u", "d", "8", "0", "é"]
    values = {"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6))) for _ in range(3000)}
    values |= {"go\ud800", "go\\ud800", "go\\\ud800"}
    keys = {}
    for category in values:
        for camera in (None, "c|1", "\udc80"):
            key = stratum_key({"category": category, "camera": camera}, ("category", "camera"))
            key.encode("utf-8")  # writable
            assert keys.setdefault(key, (category, camera)) == (category, camera), key
    assert len(keys) == 3 * len(values)
    assert stratum_key({"category": "go\ud800"}, ("category",)) == "category=go\\ud800"


def test_text_that_utf8_cannot_hold_is_an_error_naming_the_file_and_nothing_is_written(tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_text("old\n")
    with pytest.raises(ValueError, match=r"cannot write .*labels\.jsonl: its line 2 .*lone surrogate.*\\ud800"):
        write_text_atomic(path, 'line one\n{"stratum": "go\ud800"}\n')
    assert path.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["labels.jsonl"]


def test_certify_ignores_a_lone_surrogate_written_into_labels_jsonl(labelled, capsys):
    """A stratum holding a lone surrogate made certify die with a UnicodeEncodeError naming no file. certify no
    longer reads labels.jsonl's decisions or strata (they are derived from the sealed plan): the edit is undone."""
    path = labelled["labels"] / "labels.jsonl"
    clean = read_lines(path)
    rows = [dict(r) for r in clean]
    rows[0]["stratum"] = rows[0].get("stratum", "all") + "\ud800"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert cli.main(["certify", str(labelled["labels"])]) == 0
    assert "Traceback" not in capsys.readouterr().err
    assert [r.get("stratum") for r in read_lines(path)] == [r.get("stratum") for r in clean]
