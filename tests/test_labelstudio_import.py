"""``autorater suite import --from-labelstudio``: a Label Studio JSON export becomes a suite with every annotation
kept (the count checked against the export), from the product's labelling config and from a common "choices +
timeline" config; what cannot be taken is listed with its task, its annotation and the fix."""

from __future__ import annotations

import copy
import json

import pytest

from autorater.app import cli
from autorater.data.suite import Suite, validate_suite
from autorater.serving.labelstudio.formats import annotations_to_export, label_interface
from autorater.serving.labelstudio.imports import import_labelstudio
from tiny_suites import FPS, N_FRAMES, tiny_suite

CHOICES_TIMELINE = """<View>
  <Video name="video" value="$video" frameRate="25"/>
  <Text name="task" value="$instruction"/>
  <Choices name="result" toName="video"><Choice value="Succeeded"/><Choice value="Failed"/></Choices>
  <Choices name="failure_mode" toName="video"><Choice value="wrong object"/><Choice value="too slow"/></Choices>
  <TimelineLabels name="moment" toName="video"><Label value="Key moment"/></TimelineLabels>
</View>"""


@pytest.fixture
def media(tmp_path):
    root = tmp_path / "media"
    return root, tiny_suite(root / "suite")


def product_export(suite) -> list[dict]:
    """What Label Studio exports after people labelled the tasks of ``autorater label`` (every one with a marker)."""
    tasks = [{"data": {"continuation_id": c.continuation_id, "video": f"/data/local-files/?d=suite/{c.video}",
                       "instruction": suite.instruction_of(c.continuation_id), "fps": FPS, "frames": N_FRAMES,
                       "scenario_id": c.scenario_id, "agent_id": c.agent_id,
                       "takeover_s": suite.takeover_of(c.continuation_id), "queue": "human"}}
             for c in suite.continuations]
    return annotations_to_export(tasks, [a for a in suite.annotations if a.marker_s is not None])


def test_every_annotation_of_an_export_in_the_products_config_is_kept(media, tmp_path):
    root, source = media
    export = product_export(source)
    export[1]["annotations"][0]["ground_truth"] = True
    (tmp_path / "export.json").write_text(json.dumps(export))
    report = import_labelstudio(tmp_path / "export.json", root, tmp_path / "imported")
    assert report.ok and not report.problems and not report.warnings
    suite = Suite.load(tmp_path / "imported")
    exported = [a for task in export for a in task["annotations"] if not a["was_cancelled"]]
    assert len(suite.annotations) == len(exported) == 10  # every annotation kept
    last_frame_s = (N_FRAMES - 1) / FPS  # Label Studio's last frame: a marker at the very end is shown there
    assert sorted((a.continuation_id, a.outcome, a.marker_s) for a in suite.annotations) == \
        sorted((a.continuation_id, a.outcome, min(a.marker_s, last_frame_s)) for a in source.annotations
               if a.marker_s is not None)
    assert [a.extra["ls_annotation_id"] for a in suite.annotations] == [a["id"] for a in exported]
    assert [(r.continuation_id, r.outcome) for r in suite.references] == [("c2", "failure")]  # the ground truth
    assert [c.continuation_id for c in suite.continuations] == ["c1", "c2", "c3", "c4"]
    assert {(c.scenario_id, c.agent_id) for c in suite.continuations} == \
        {(c.scenario_id, c.agent_id) for c in source.continuations}
    assert suite.takeover_of("c2") == 0.5 and suite.scenario_by_id["s1"].takeover_s == 0.25
    assert validate_suite(tmp_path / "imported") == []


def choices_timeline_export(videos) -> list[dict]:
    """A project of its own: outcome as a choice, the moment on the timeline at 25 fps, uploaded videos."""
    def region(kind, name, value):
        return {"id": f"r-{name}", "from_name": name, "to_name": "video", "type": kind, "origin": "manual",
                "value": value}

    def ann(ann_id, who, choice, frame=None, mode=None, **more):
        result = [region("choices", "result", {"choices": [choice]})]
        if frame is not None:
            result.append(region("timelinelabels", "moment", {"ranges": [{"start": frame, "end": frame + 2}],
                                                              "timelinelabels": ["Key moment"]}))
        if mode is not None:
            result.append(region("choices", "failure_mode", {"choices": [mode]}))
        return {"id": ann_id, "completed_by": {"id": who, "email": f"user{who}@lab.org"}, "result": result,
                "was_cancelled": False, "ground_truth": False, "created_at": "2026-11-20T10:00:00.000000Z",
                "updated_at": "2026-11-20T10:00:00.000000Z", "lead_time": 12.5, **more}

    return [
        {"id": 7, "data": {"video": f"/data/upload/1/{videos[0]}", "instruction": "open the drawer",
                           "agent": "policy-a"},
         "annotations": [ann(70, 1, "Succeeded", frame=13), ann(71, 2, "Failed", frame=26, mode="too slow")],
         "predictions": [{"result": [region("choices", "result", {"choices": ["Failed"]})], "score": 0.6}]},
        {"id": 8, "data": {"video": f"/data/upload/1/{videos[1]}", "instruction": "open the drawer",
                           "agent": "policy-b"},
         "annotations": [ann(80, 1, "Failed"), ann(81, 2, "Failed", frame=1, ground_truth=True)]},
    ]


def test_a_choices_and_timeline_project_imports_with_its_frame_rate(media, tmp_path):
    root, source = media
    upload = root / "upload" / "1"
    upload.mkdir(parents=True)
    names = ["1a2b3c4d-run7.mp4", "5e6f7a8b-run8.mp4"]
    for name, c in zip(names, ["c1", "c2"]):
        (upload / name).write_bytes(source.video_path(c).read_bytes())
    export = choices_timeline_export(names)
    li = label_interface(CHOICES_TIMELINE)  # the config and its results are what Label Studio accepts
    for task in export:
        for a in task["annotations"]:
            assert li.validate_prediction({"result": a["result"]}, return_errors=True) == []
    (tmp_path / "export.json").write_text(json.dumps(export))
    assert cli.main(["suite", "import", "--from-labelstudio", str(tmp_path / "export.json"), "--media-root",
                     str(root), "--out", str(tmp_path / "s"), "--frame-rate", "25"]) == 0
    suite = Suite.load(tmp_path / "s")
    assert [c.continuation_id for c in suite.continuations] == ["ls-7", "ls-8"]
    rows = {a.extra["ls_annotation_id"]: a for a in suite.annotations}
    assert len(rows) == 4  # every annotation; the prediction is the model's, not a label
    assert (rows[70].outcome, rows[70].marker_s, rows[70].annotator_id) == ("success", 0.48, "ls-user1@lab.org")
    assert (rows[71].outcome, rows[71].marker_s, rows[71].failure_mode) == ("failure", 1.0, "too slow")
    assert (rows[80].outcome, rows[80].marker_s) == ("failure", None)
    assert [(r.continuation_id, r.outcome, r.marker_s) for r in suite.references] == [("ls-8", "failure", 0.0)]
    assert suite.get("ls-7").agent_id == "policy-a" and suite.get("ls-7").metadata["ls_task_id"] == 7
    assert suite.scenario_of("ls-7").scenario_id != suite.scenario_of("ls-8").scenario_id  # a scenario per task


def test_what_cannot_be_taken_is_listed_with_task_annotation_and_fix(media, tmp_path, capsys):
    root, source = media
    export = product_export(source)
    export[0]["annotations"][0]["result"][0]["value"]["timelinelabels"] = ["maybe"]  # no outcome
    both = copy.deepcopy(export[0]["annotations"][1]["result"][0])
    both["value"]["timelinelabels"] = ["failure"]
    export[0]["annotations"][1]["result"].append(both)  # success and failure at once
    export[2]["annotations"][0]["was_cancelled"] = True  # skipped: a warning, not a label
    export[3]["data"]["video"] = "/data/local-files/?d=../../etc/passwd"  # never outside the media root
    (tmp_path / "export.json").write_text(json.dumps(export))
    report = import_labelstudio(tmp_path / "export.json", root, tmp_path / "s")
    messages = [str(p) for p in report.problems]
    assert len(messages) == 3
    assert messages[0].startswith("export.json: task 1, annotation 1: no outcome") and "(fix: " in messages[0]
    assert messages[1].startswith("export.json: task 1, annotation 2: both success and failure")
    assert messages[2].startswith("export.json: task 4: video /data/local-files/?d=../../etc/passwd is not under")
    assert [str(w).split(":")[1].strip() for w in report.warnings] == ["task 3, annotation 6"]
    suite = Suite.load(tmp_path / "s")
    assert [c.continuation_id for c in suite.continuations] == ["c1", "c2", "c3"]  # c1 kept, without its labels
    assert len(suite.annotations) == 10 - 2 - 1 - 2  # minus the two refused, the cancelled one and task 4's two
    assert cli.main(["suite", "import", "--from-labelstudio", str(tmp_path / "export.json"), "--media-root",
                     str(root), "--out", str(tmp_path / "strict"), "--strict"]) == 1
    assert not (tmp_path / "strict").exists()


def test_a_second_export_adds_only_new_annotations_and_takes_corrections(media, tmp_path):
    root, source = media
    export = product_export(source)
    path = tmp_path / "export.json"
    path.write_text(json.dumps(export))
    first = import_labelstudio(path, root, tmp_path / "s")
    assert (first.annotations, first.already) == (10, 0)
    region = export[0]["annotations"][0]["result"][0]["value"]
    region["timelinelabels"], region["ranges"] = ["failure"], [{"start": 8, "end": 8}]  # corrected in Label Studio
    export[0]["annotations"][0]["updated_at"] = "2026-11-24T09:00:00.000000Z"
    path.write_text(json.dumps(export))
    second = import_labelstudio(path, root, tmp_path / "s")
    assert (second.annotations, second.updated, second.already, second.imported) == (0, 1, 9, 1)
    suite = Suite.load(tmp_path / "s")
    assert len(suite.annotations) == 10
    first_label = next(a for a in suite.annotations if a.extra["ls_annotation_id"] == 1)
    assert (first_label.outcome, first_label.marker_s) == ("failure", 0.875)


def test_timeline_frames_without_a_frame_rate_are_read_at_label_studios_default_with_a_warning(media, tmp_path):
    root, source = media
    export = product_export(source)
    for task in export:
        del task["data"]["fps"]
    (tmp_path / "export.json").write_text(json.dumps(export))
    report = import_labelstudio(tmp_path / "export.json", root, tmp_path / "s")
    assert report.ok and len(report.warnings) == 1 and "24 fps, Label Studio's default" in str(report.warnings[0])
    assert "--frame-rate" in str(report.warnings[0])
