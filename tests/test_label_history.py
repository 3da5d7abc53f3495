"""Issue 37, item 1: the label history is the truth.

A stream of Label Studio webhooks (``data/labelstudio_webhook_stream.json``: payloads as Label Studio 1.23 sends
them, with deletions, out-of-order updates, missing and naive timestamps and a far-future one) replayed against
``autorater serve``: the pool suite ends with exactly the expected labels, and its labels rebuild from the history
alone, byte for byte. Then the same rules through ``ingest``, and the history's own properties.
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from autorater.data.files import jsonl_text
from autorater.data.suite import Suite
from autorater.serving.labelling.history import LabelHistory, arriving, suite_history
from hardening_env import suite_rows, webhook_payload
from tiny_suites import new_version

STREAM = Path(__file__).parent / "data" / "labelstudio_webhook_stream.json"
# (HTTP status, "status" of the answer) for each event of the stream, in order
EXPECTED = [(201, "recorded"), (201, "updated"), (201, "stale"), (201, "recorded"), (201, "deleted"), (409, None),
            (201, "recorded"), (201, "updated"), (201, "stale"), (201, "recorded"), (201, "updated"), (201, "stale"),
            (201, "recorded"), (201, "stale"), (422, None), (201, "recorded"), (201, "updated"), (201, "deleted"),
            (409, None), (201, "ignored")]
# annotation id -> (continuation, outcome, marker_s) that the suite must hold at the end
FINAL = {11: ("c1", "failure", 0.25), 13: ("c3", "failure", 0.875), 14: ("c4", "success", 0.375),
         15: ("c1", "success", 0.625), 16: ("c2", "success", 0.25)}


def _ls_rows(root) -> dict:
    return {r["ls_annotation_id"]: (r["continuation_id"], r["outcome"], r["marker_s"])
            for r in suite_rows(root) if r.get("ls_annotation_id") is not None}


def test_a_recorded_label_studio_stream_ends_in_the_expected_labels_and_the_history_rebuilds_them(pool):
    root, client = pool["suite"].root, pool["client"]
    own = suite_rows(root)  # the suite's own annotations: no event touches them
    for i, (event, (code, status)) in enumerate(zip(json.loads(STREAM.read_text()), EXPECTED)):
        before = (root / "annotations.jsonl").read_bytes()
        r = client.post("/webhook", json=event)
        assert r.status_code == code, (i, r.text)
        if status is not None:
            assert r.json()["status"] == status, (i, r.json())
        else:  # a refusal names what was wrong and changes nothing
            assert (root / "annotations.jsonl").read_bytes() == before
            assert {409: "deleted", 422: "updated_at"}[code] in r.json()["detail"]
    assert _ls_rows(root) == FINAL
    Suite.load(root)  # still a valid suite
    history = suite_history(root)
    assert jsonl_text(history.rebuild()) == (root / "annotations.jsonl").read_text()
    assert history.rebuild(rows=own) == suite_rows(root)  # from the suite's own rows and the events alone
    assert history.deleted_ids() == {"12", "17"}


def test_the_labels_file_is_made_good_from_the_history_after_it_is_lost(pool):
    root, client = pool["suite"].root, pool["client"]
    for event in json.loads(STREAM.read_text())[:4]:
        client.post("/webhook", json=event)
    kept = (root / "annotations.jsonl").read_text()
    own = [r for r in suite_rows(root) if r.get("ls_annotation_id") is None]
    (root / "annotations.jsonl").write_text(jsonl_text(own))  # a crash between the history and the labels file
    assert jsonl_text(suite_history(root).rebuild()) == kept
    r = client.post("/webhook", json=webhook_payload(pool["suite"], "c3", ann_id=900))  # the next write heals it
    assert r.status_code == 201 and r.json()["status"] == "recorded"
    assert {11, 12, 900} <= set(_ls_rows(root))


def test_an_old_folder_history_of_plain_rows_still_loads_and_its_labels_are_adopted(tmp_path):
    store = LabelHistory(tmp_path / "annotations.jsonl", tmp_path / "annotations_history.jsonl")
    old = {"continuation_id": "c1", "annotator_id": "ls-3", "outcome": "success", "marker_s": 0.5,
           "ls_annotation_id": 5, "ls_updated_at": "2026-11-20T09:00:00Z"}
    older = dict(old, outcome="failure", ls_updated_at="2026-11-19T09:00:00Z")
    mine = {"continuation_id": "c2", "annotator_id": "h1", "outcome": "failure", "marker_s": None}
    store.labels.write_text(jsonl_text([mine, old]))
    store.history.write_text(jsonl_text([older]))  # written before the event format: a replaced row
    assert store.events() == [] and store.rebuild() == [mine, old]
    done = store.apply([arriving(dict(old, outcome="failure", ls_updated_at="2026-11-19T08:00:00Z"))], via="test")
    assert done.statuses == ["stale"]  # compared with the version the adopted row had
    done = store.apply([arriving(dict(old, marker_s=0.75, ls_updated_at="2026-11-21T09:00:00Z"))], via="test")
    assert done.statuses == ["updated"] and store.rows()[1]["marker_s"] == 0.75
    assert json.loads(store.history.read_text().splitlines()[0]) == older  # the old line is kept as it was
    assert [e["action"] for e in store.events()] == ["adopt", "replace"]
    assert store.rebuild(rows=[mine]) == store.rows()


def test_ingest_refuses_far_future_times_and_takes_deletions_from_the_suite_history(env, tmp_path):
    from autorater.data.suite import Annotation
    from autorater.serving.labelling.folder import LabelsFolder
    from autorater.serving.labelling.ingest import ingest
    from autorater.serving.labelling.label import label_suite
    from autorater.serving.labelstudio.formats import annotations_to_export
    from autorater.serving.service.webhook import delete_annotations

    shutil.copytree(env["suite"].root, tmp_path / "suite")
    suite = new_version(tmp_path / "suite")
    label_suite(env["model"], suite, tmp_path / "labels", audit_share=1.0)
    folder = LabelsFolder(tmp_path / "labels")
    export = annotations_to_export(folder.read_tasks(), [Annotation("c1", "h7", "success", 0.5),
                                                          Annotation("c2", "h7", "failure", 0.25),
                                                          Annotation("c3", "h7", "success", 0.75)])
    export[1]["annotations"][0]["updated_at"] = "9999-12-31T00:00:00Z"
    path = tmp_path / "export.json"
    path.write_text(json.dumps(export))
    result = ingest(folder.root, path)
    assert result["accepted"] == 2 and result["errors"] == 1 and "later than this machine's clock" in \
        " ".join(result["problems"])
    ids = sorted(r["ls_annotation_id"] for r in folder.human_labels().rows())
    delete_annotations(suite.root, {"action": "ANNOTATIONS_DELETED", "annotations": [{"id": ids[0]}]})
    again = ingest(folder.root, path)  # the same export again: the deleted label is refused, and leaves the folder
    assert again["deleted"] >= 1 and [r["ls_annotation_id"] for r in folder.human_labels().rows()] == ids[1:]
    assert sorted(r["ls_annotation_id"] for r in suite_rows(suite.root) if r.get("ls_annotation_id")) == ids[1:]
    labels = {r["continuation_id"]: r for r in folder.read_labels()}
    assert labels["c1"].get("label_source") != "human"  # its only human label was deleted
    assert jsonl_text(folder.human_labels().rebuild()) == folder.human.read_text()


@pytest.mark.parametrize("stamp,expected", [
    ("2026-11-23T12:00:00", "2026-11-23T12:00:00+00:00"),  # no timezone: read as UTC
    ("2026-11-23T13:00:00+01:00", "2026-11-23T12:00:00+00:00"),
    ("2026-11-23T12:00:00.000000Z", "2026-11-23T12:00:00+00:00")])
def test_times_are_read_as_utc(stamp, expected):
    row = {"continuation_id": "c1", "ls_annotation_id": 1, "ls_updated_at": stamp}
    assert arriving(row, "update", None).version.isoformat() == expected


def test_a_time_beyond_the_clock_is_refused_but_a_small_skew_is_not():
    now = datetime(2026, 11, 27, tzinfo=timezone.utc)
    row = {"continuation_id": "c1", "ls_annotation_id": 1}
    assert arriving(dict(row, ls_updated_at=(now + timedelta(seconds=20)).isoformat()), "update", now).version
    for ahead in (timedelta(seconds=290), timedelta(hours=2)):  # 290 s: five minutes of a frozen label (issue 44)
        with pytest.raises(ValueError, match="updated_at.*later than this machine's clock"):
            arriving(dict(row, ls_updated_at=(now + ahead).isoformat()), "update", now)
    with pytest.raises(ValueError, match="ISO 8601"):
        arriving(dict(row, ls_updated_at="yesterday"), "update", now)
