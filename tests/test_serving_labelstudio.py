"""Label Studio hand-off: the config and the tasks validate with label-studio-sdk; frames vs seconds; the export
round trip through ``ingest`` with every validation case."""

from __future__ import annotations

import copy
import json

import pytest

from autorater.app import cli
from autorater.data.suite import Annotation, Suite
from autorater.data.video import video_info
from autorater.serving.labelling.ingest import ingest
from autorater.serving.labelling.label import label_suite
from autorater.serving.labelstudio.formats import (
    annotations_to_export,
    frame_to_seconds,
    label_interface,
    labeling_config,
    marker_region,
    parse_export,
    seconds_to_frame,
    validate_tasks,
)
from serving_env import make_env, torch_threads
from tiny_suites import read_lines


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    with torch_threads(1):
        env = make_env(tmp_path_factory.mktemp("ls"))
        label_suite(env["model"], env["suite"], env["root"] / "labels", audit_share=0.3)
        env["tasks"] = json.loads((env["root"] / "labels" / "labelstudio" / "tasks.json").read_text())
        yield env


def test_the_config_validates_and_reads_the_instruction_video_fps_and_one_timeline_control():
    li = label_interface(labeling_config())
    assert {o.value_name for o in li.objects} == {"instruction", "video"}
    video = li.get_object("video")
    assert video.attr["frameRate"] == "$fps"
    control = li.get_control("outcome")
    assert control.tag == "TimelineLabels" and control.labels == ["success", "failure"]


@pytest.mark.parametrize("fps", [8.0, 10.0, 29.97, 30.0])
def test_frames_are_1_based_and_round_trip_with_seconds(fps):
    assert seconds_to_frame(0.0, fps) == 1 and frame_to_seconds(1, fps) == 0.0
    for i in range(300):  # SUITE_FORMAT frame i is shown at i / fps; Label Studio calls it frame i + 1
        assert seconds_to_frame(i / fps, fps) == i + 1
        assert frame_to_seconds(i + 1, fps) == pytest.approx(i / fps, abs=1e-6)
    assert seconds_to_frame(1e6, fps, frames=40) == 40 and seconds_to_frame(-1.0, fps) == 1


def test_the_tasks_validate_with_the_sdk_and_carry_the_model_guess_except_for_the_audit(env):
    tasks = env["tasks"]
    assert tasks and validate_tasks(tasks) == []
    labels = {r["continuation_id"]: r for r in read_lines(env["root"] / "labels" / "labels.jsonl")}
    li = label_interface()
    for t in tasks:
        d = t["data"]
        row = labels[d["continuation_id"]]
        info = video_info(env["suite"].video_path(d["continuation_id"]))
        assert d["fps"] == info.fps and d["frames"] == info.num_frames
        assert d["instruction"] == env["suite"].instruction_of(d["continuation_id"])
        if row["audit"]:
            assert d["queue"] == "audit" and "predictions" not in t  # an audit anchored on the model measures nothing
        else:
            (pred,) = t["predictions"]
            assert li.validate_prediction(pred)
            (region,) = pred["result"]
            frame = region["value"]["ranges"][0]["start"]
            assert region["value"]["ranges"][0]["end"] == frame and 1 <= frame <= d["frames"]
            assert frame == seconds_to_frame(row["model_marker_s"], d["fps"], d["frames"])
            assert region["value"]["timelinelabels"] == [row["model_outcome"]]
            assert pred["score"] == pytest.approx(max(row["p_success"], 1 - row["p_success"]), abs=1e-6)


def test_validate_tasks_reports_what_label_studio_would_refuse(env):
    task = copy.deepcopy(next(t for t in env["tasks"] if "predictions" in t))
    task["predictions"][0]["result"][0]["value"]["timelinelabels"] = ["maybe"]
    del task["data"]["instruction"]
    problems = validate_tasks([task])
    assert any("instruction" in p for p in problems) and any("maybe" in p for p in problems)


def _answers(env, tasks):
    """Two annotators per task, markers on frame times, outcome alternating with the task index."""
    out = []
    for i, t in enumerate(tasks):
        d = t["data"]
        for who in ("h1", "h2"):
            out.append(Annotation(d["continuation_id"], who, ("success", "failure")[i % 2],
                                  marker_s=round(min(i, d["frames"] - 1) / d["fps"], 6)))
    return out


def test_export_round_trip(env):
    answers = _answers(env, env["tasks"])
    export = annotations_to_export(env["tasks"], answers)
    known = {t["data"]["continuation_id"]: t["data"] for t in env["tasks"]}
    parsed = parse_export(_write(env["root"] / "roundtrip.json", export), known)
    assert parsed.problems == []
    got = sorted((a.continuation_id, a.annotator_id, a.outcome, a.marker_s) for a in parsed.annotations)
    want = sorted((a.continuation_id, f"ls-{a.annotator_id}", a.outcome, a.marker_s) for a in answers)
    assert [g[:3] for g in got] == [w[:3] for w in want]
    assert [g[3] for g in got] == pytest.approx([w[3] for w in want], abs=1e-6)


def _write(path, obj):
    path.write_text(json.dumps(obj))
    return path


def test_every_export_validation_case_is_reported_and_nothing_else_is_lost(env):
    tasks = env["tasks"][:8]
    export = annotations_to_export(tasks, _answers(env, tasks))
    frames = tasks[0]["data"]["frames"]
    export[0]["data"]["continuation_id"] = "c999999"                                   # unknown id
    export[1]["annotations"][0]["result"][0]["value"]["ranges"] = [{"start": frames + 5, "end": frames + 5}]
    second = copy.deepcopy(export[2]["annotations"][0]["result"][0])                  # several markers
    export[2]["annotations"][0]["result"].append(second)
    export[3]["annotations"][0]["was_cancelled"] = True                                # cancelled
    stale = copy.deepcopy(export[4]["annotations"][0])                                 # one annotator twice, differing
    stale["id"], stale["updated_at"] = 9999, "2026-11-01T00:00:00Z"
    stale["result"][0]["value"]["timelinelabels"] = ["failure" if export[4]["annotations"][0]["result"][0]["value"][
        "timelinelabels"] == ["success"] else "success"]
    export[4]["annotations"].append(stale)
    export[5]["annotations"][0]["result"][0]["value"]["timelinelabels"] = ["maybe"]    # not an outcome
    export[6]["annotations"][0]["result"] = []                                         # no marker
    export[7]["annotations"][0]["result"][0]["value"]["ranges"] = [{"start": 2, "end": 6}]  # a span: first frame
    known = {t["data"]["continuation_id"]: t["data"] for t in env["tasks"]}
    parsed = parse_export(_write(env["root"] / "cases.json", export), known)
    text = [str(p) for p in parsed.problems]
    expect = {0: "unknown continuation_id", 1: "outside the video", 2: "2 markers", 3: "cancelled",
              4: "labelled this task 2 times", 5: "not one of", 6: "no marker", 7: "first frame is taken"}
    for i, phrase in expect.items():
        assert any(phrase in t and f"task {export[i]['id']} " in t for t in text), (i, phrase, text)
    assert len(parsed.errors) == 5 and parsed.cancelled == 1
    # 16 labels in the export: 2 lost with the unknown task, 4 refused, 1 cancelled, 1 stale: 8 kept + the span.
    kept = {(a.continuation_id, a.annotator_id) for a in parsed.annotations}
    assert len(parsed.annotations) == 16 - 2 - 4 - 1 and len(kept) == len(parsed.annotations)
    latest = next(a for a in parsed.annotations if a.continuation_id == tasks[4]["data"]["continuation_id"]
                  and a.annotator_id == "ls-h1")
    assert latest.extra["ls_annotation_id"] != 9999  # the newer one wins
    span = next(a for a in parsed.annotations if a.continuation_id == tasks[7]["data"]["continuation_id"]
                and a.annotator_id == "ls-h1")
    assert span.marker_s == pytest.approx(frame_to_seconds(2, tasks[7]["data"]["fps"]))


def test_a_non_export_file_is_a_clear_error(env, tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="export the project as JSON"):
        parse_export(bad, {})
    bad.write_text('{"tasks": []}')
    with pytest.raises(ValueError, match="list of tasks"):
        parse_export(bad, {})


def test_marker_region_is_one_frame():
    r = marker_region("failure", 2.0, 8.0, 40, "x", score=0.8)
    assert r["value"] == {"ranges": [{"start": 17, "end": 17}], "timelinelabels": ["failure"]} and r["score"] == 0.8


# ----------------------------------------------------------------------------------------------
# ingest


@pytest.fixture()
def labelled(env, tmp_path):
    """A fresh copy of the suite, labelled: ingest appends to the suite, so each test gets its own."""
    import shutil

    shutil.copytree(env["suite"].root, tmp_path / "suite")
    suite = Suite.load(tmp_path / "suite")
    label_suite(env["model"], suite, tmp_path / "labels", audit_share=0.3, adapt=0)
    tasks = json.loads((tmp_path / "labels" / "labelstudio" / "tasks.json").read_text())
    return {"suite": suite, "labels": tmp_path / "labels", "tasks": tasks, "root": tmp_path}


def test_ingest_merges_human_labels_which_win_and_keeps_the_model_label(env, labelled):
    answers = _answers(env, labelled["tasks"])
    export = _write(labelled["root"] / "export.json", annotations_to_export(labelled["tasks"], answers))
    n_before = len(labelled["suite"].annotations)
    result = ingest(labelled["labels"], export)
    assert result["accepted"] == len(answers) and result["errors"] == 0 and result["waiting"] == 0
    rows = {r["continuation_id"]: r for r in read_lines(labelled["labels"] / "labels.jsonl")}
    human = {a.continuation_id: a for a in answers}
    for cid, r in rows.items():
        if cid in human:  # both annotators agree, so the majority is their label
            assert r["outcome"] == r["human_outcome"] == human[cid].outcome and r["label_source"] == "human"
            assert r["human_n"] == 2 and r["marker_s"] == pytest.approx(human[cid].marker_s, abs=1e-4)
            assert r["model_outcome"] in ("success", "failure")  # kept beside it
        elif r.get("reason") == "human_labelled":  # a reference the annotator pool labelled before the job
            assert r["decision"] == "human" and r["label_source"] == "human" and r["outcome"] == r["human_outcome"]
        else:
            assert r["decision"] == "auto" and r["outcome"] == r["model_outcome"] and r["label_source"] == "model"
    suite = Suite.load(labelled["suite"].root)  # still a valid suite, with the new labels in it
    assert len(suite.annotations) == n_before + len(answers)
    # The same export again adds nothing, anywhere.
    again = ingest(labelled["labels"], export)
    assert again["accepted"] == 0 and again["duplicates"] == len(answers)
    assert len(Suite.load(labelled["suite"].root).annotations) == n_before + len(answers)


def test_ingest_reports_what_is_still_waiting_and_refused_labels(env, labelled):
    half = labelled["tasks"][: len(labelled["tasks"]) // 2]
    export = annotations_to_export(half, _answers(env, half))
    export[0]["annotations"][0]["result"][0]["value"]["ranges"] = [{"start": 0, "end": 0}]  # before the video
    result = ingest(labelled["labels"], _write(labelled["root"] / "e.json", export), append_to_suite=False)
    queued = sum(t["data"]["queue"] == "human" for t in labelled["tasks"][len(half):])
    assert result["errors"] == 1 and result["waiting"] >= queued
    problems = read_lines(labelled["labels"] / "ingest-problems.jsonl")
    assert problems[0]["level"] == "error" and "outside the video" in problems[0]["message"]


def test_ingest_reads_suite_format_annotations_and_checks_them(env, labelled):
    cid = labelled["tasks"][0]["data"]["continuation_id"]
    lines = [json.dumps({"continuation_id": cid, "annotator_id": "h9", "outcome": "success", "marker_s": 0.5}),
             "{broken",
             json.dumps({"continuation_id": "nope", "annotator_id": "h9", "outcome": "success"}),
             json.dumps({"continuation_id": cid, "annotator_id": "h8", "outcome": "success", "marker_s": 1e4})]
    path = labelled["root"] / "more.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = ingest(labelled["labels"], path)
    assert result["accepted"] == 1 and result["errors"] == 3
    text = "\n".join(result["problems"])
    assert "more.jsonl:2" in text and "unknown continuation_id 'nope'" in text and "outside the video" in text


def test_cli_ingest_and_its_errors(env, labelled, capsys):
    export = _write(labelled["root"] / "export.json",
                    annotations_to_export(labelled["tasks"], _answers(env, labelled["tasks"])))
    assert cli.main(["ingest", "--labels", str(labelled["labels"]), "--export", str(export)]) == 0
    assert "new labels" in capsys.readouterr().out
    assert cli.main(["ingest", "--labels", str(labelled["root"]), "--export", str(export)]) == 2
    assert "labels.jsonl" in capsys.readouterr().err
    assert cli.main(["ingest", "--labels", str(labelled["labels"]), "--export", str(labelled["root"] / "no.json")]) == 2


def test_a_second_writer_on_one_labels_folder_is_refused_and_concurrent_appends_all_land(env, labelled):
    import threading

    from autorater.serving.labelling.folder import LabelJobError, folder_lock
    from autorater.serving.labelling.ingest import append_annotations

    export = _write(labelled["root"] / "export.json",
                    annotations_to_export(labelled["tasks"], _answers(env, labelled["tasks"])))
    with folder_lock(labelled["labels"], "test"):
        with pytest.raises(LabelJobError, match="busy"):
            ingest(labelled["labels"], export)
        with pytest.raises(LabelJobError, match="busy"):
            label_suite(env["model"], labelled["suite"], labelled["labels"], audit_share=0.3, resume=True)
    n_before = len(Suite.load(labelled["suite"].root).annotations)
    cids = labelled["suite"].continuation_ids()
    threads = [threading.Thread(target=append_annotations, args=(labelled["suite"], [
        Annotation(cids[i % len(cids)], f"t{i}", "success", marker_s=0.5)])) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(Suite.load(labelled["suite"].root).annotations) == n_before + 12
