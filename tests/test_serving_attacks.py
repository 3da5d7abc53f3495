"""Issue 44: the third attack on ``autorater serve``, ``ingest`` and model folders, one category a test.

Nothing is read outside the media root (playlists refused by content; FFmpeg limited to the demuxers of one video
file), no cross-site writes (a foreign ``Origin`` or a body that is not JSON is refused before it is read), no 500 from
what a client sends (lone surrogates, times outside the years 1..9999, a tampered ``metadata.json``), the label
history stays cheap and bounded, the ordering holes are closed, and the last limits hold (``takeover_s`` past the end,
the label config's size, ``config.json``'s checksum and the decode budget as a product).
"""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import av
import pytest
import torch
from fastapi.testclient import TestClient

from autorater.data.suite import Suite
from autorater.data.video import FFMPEG_OPEN_OPTIONS, VideoError, video_info, write_video
from autorater.models import PRESETS, AutoModel
from autorater.serving.labelling.history import (
    MAX_UNSEEN_TOMBSTONES,
    SUITE_HISTORY_FILE,
    HistoryWriteTooLarge,
    LabelHistory,
    arriving,
    suite_history,
)
from autorater.serving.service import mlbackend
from autorater.serving.service.app import create_app
from hardening_env import suite_rows, task_of, webhook_payload
from tiny_suites import frames, new_version

JSON = {"content-type": "application/json"}


def _no_server_paths(response, *roots: Path) -> None:
    """The answer is JSON in UTF-8 and names no folder of the server (paths are relative to the media root)."""
    text = response.content.decode("utf-8")
    json.loads(text)
    for root in roots:
        assert str(Path(root).resolve()) not in text and str(root) not in text, text


# ----------------------------------------------------------------------------------------------
# 1. Decoding opens only the file it was given


PLAYLISTS = {
    "playlist.m3u8": "#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:1.0,\n{secret}\n#EXT-X-ENDLIST\n",
    "disguised.mp4": "#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:1.0,\n{secret}\n#EXT-X-ENDLIST\n",
    "bom.mp4": "\ufeff  #extm3u\n#EXTINF:1.0,\n{secret}\n",
    "list.ffconcat": "ffconcat version 1.0\nfile '{secret}'\n",
    "concat.mp4": "ffconcat version 1.0\nfile '{secret}'\n",
    "plain.m3u": "{secret}\n",
}


@pytest.fixture()
def outside(env, tmp_path):
    """A video outside the media root, and playlists naming it inside the media root."""
    secret = write_video(tmp_path / "elsewhere" / "secret.mp4", frames(seed=3), fps=8.0)
    media = tmp_path / "media"
    shutil.copytree(env["media"], media)
    for name, text in PLAYLISTS.items():
        (media / "suite" / "videos" / name).write_text(text.format(secret=secret))
    return {"secret": secret, "media": media, "client": TestClient(create_app(env["model"], media))}


@pytest.mark.parametrize("name", sorted(PLAYLISTS))
def test_a_playlist_that_points_outside_the_media_root_is_refused_by_its_content(outside, name):
    client, media = outside["client"], outside["media"]
    r = client.post("/v1/rate", json={"video": f"suite/videos/{name}", "instruction": "go"})
    assert r.status_code == 422 and f"suite/videos/{name}" in r.json()["detail"], r.text
    _no_server_paths(r, media, outside["secret"].parent)
    with open(media / "suite" / "videos" / name, "rb") as f:
        r = client.post("/v1/rate/upload", files={"file": (name, f.read(), "video/mp4")}, data={"instruction": "go"})
    assert r.status_code == 422 and "the upload" in r.json()["detail"], r.text
    _no_server_paths(r, media, outside["secret"].parent)
    task = {"id": 7, "data": {"video": f"suite/videos/{name}", "instruction": "go"}}
    r = client.post("/predict", json={"tasks": [task]})
    assert r.status_code == 200 and r.json()["results"][0]["result"] == [] and "error" in r.json()["results"][0]
    _no_server_paths(r, media, outside["secret"].parent)
    assert client.post("/v1/rate", json={"video": "suite/videos/c1.mp4", "instruction": "go"}).status_code == 200


def test_ffmpeg_itself_opens_only_the_demuxers_of_one_video_file(outside):
    playlist = outside["media"] / "suite" / "videos" / "playlist.m3u8"
    with av.open(str(playlist)) as container:  # what FFmpeg does unasked: it follows the playlist
        assert container.format.name == "hls"
    with pytest.raises(av.error.FFmpegError):  # past the content check too, the demuxer is not allowed
        av.open(str(playlist), container_options=FFMPEG_OPEN_OPTIONS)
    with pytest.raises(VideoError, match="playlist"):
        video_info(playlist)
    assert video_info(outside["secret"]).num_frames == 8


def test_error_messages_name_paths_relative_to_the_media_root(env, pool, tmp_path):
    media, client = pool["media"], pool["client"]
    (media / "suite" / "videos" / "broken.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * 8)
    cases = [("/v1/rate", {"video": "suite/videos/missing.mp4", "instruction": "go"}),
             ("/v1/rate", {"video": "suite/videos/broken.mp4", "instruction": "go"}),
             ("/predict", {"tasks": [{"id": 1, "data": {"video": "suite/videos/broken.mp4", "instruction": "go"}}]}),
             ("/webhook", dict(webhook_payload(pool["suite"], "c1"), task={"id": 1,
                                                                            "data": {"continuation_id": "c9"}}))]
    for path, body in cases:
        r = client.post(path, json=body)
        assert r.status_code in (200, 404, 422), r.text
        _no_server_paths(r, media, env["model"])
    r = client.post("/v1/rate", json={"video": "suite/videos/broken.mp4", "instruction": "go"})
    assert "suite/videos/broken.mp4" in r.json()["detail"]


def test_messages_lose_the_server_folders_and_nothing_else():
    from autorater.serving.fields import without_roots

    roots = {"/srv/media": "", "/srv/media/pool": "pool", "/opt/models/m1": "model m1", "/": ""}
    assert without_roots("video /srv/media/suite/c1.mp4 under /srv/media.", roots) == \
        "video suite/c1.mp4 under the media root."
    assert without_roots("/srv/media/pool/annotations.jsonl:3 and /opt/models/m1", roots) == \
        "pool/annotations.jsonl:3 and model m1"
    kept = "/srv/media2/x, /data/srv/media/y, /srv/media.bak and a/b"
    assert without_roots(kept, roots) == kept


# ----------------------------------------------------------------------------------------------
# 2. No cross-site writes


def test_a_web_page_of_another_site_cannot_delete_labels(pool):
    """What a page on evil.example can send without CORS: a text/plain POST with its Origin."""
    client, root = pool["client"], pool["suite"].root
    assert client.post("/webhook", json=webhook_payload(pool["suite"], "c1", ann_id=5)).status_code == 201
    before = {p.name: p.read_bytes() for p in root.iterdir() if p.is_file()}
    body = json.dumps({"action": "ANNOTATIONS_DELETED", "annotations": [{"id": i} for i in range(1, 500)]})
    browser = {"origin": "https://evil.example", "content-type": "text/plain;charset=UTF-8"}
    for headers, status in ((browser, 403), ({**browser, "content-type": "application/json"}, 403),
                            ({"content-type": "text/plain"}, 415),
                            ({"content-type": "application/x-www-form-urlencoded"}, 415),
                            ({"content-type": "multipart/form-data; boundary=x"}, 415),
                            ({**JSON, "sec-fetch-site": "cross-site"}, 403),
                            ({**JSON, "origin": "null"}, 403),
                            ({**JSON, "origin": "http://evil.example:80", "host": "evil.example:80"}, 403)):
        r = client.post("/webhook", content=body, headers=headers)
        assert r.status_code == status and "fix:" in r.json()["detail"], (headers, r.text)
    assert {p.name: p.read_bytes() for p in root.iterdir() if p.is_file()} == before  # nothing was deleted
    for path in ("/v1/rate", "/predict", "/setup", "/v1/rate/upload"):
        assert client.post(path, content=b"{}", headers=browser).status_code == 403
    assert client.get("/health", headers={"origin": "https://evil.example"}).status_code == 200  # reads are fine


def test_label_studio_and_the_service_own_pages_still_write(env, pool):
    client = pool["client"]
    r = client.post("/webhook", content=json.dumps(webhook_payload(pool["suite"], "c2", ann_id=6)), headers=JSON)
    assert r.status_code == 201  # Label Studio: JSON, no Origin
    own = {**JSON, "host": "127.0.0.1:9090", "origin": "http://127.0.0.1:9090"}  # /docs, served by the service
    assert client.post("/webhook", content=json.dumps(webhook_payload(pool["suite"], "c3", ann_id=7)),
                       headers=own).status_code == 201
    trusted = TestClient(create_app(env["model"], pool["media"], suite=pool["suite"].root,
                                    trusted_origins=("https://labels.example",)))
    r = trusted.post("/webhook", content=json.dumps(webhook_payload(pool["suite"], "c4", ann_id=8)),
                     headers={**JSON, "origin": "https://labels.example"})
    assert r.status_code == 201


# ----------------------------------------------------------------------------------------------
# 3. No 500 from input


SURROGATES = ['"\\ud800"', '"x\\udfffy"', '{"\\ud800": 1}']


def _with(obj, path, value):
    obj = json.loads(json.dumps(obj))
    parent = obj
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = "@@"
    return json.dumps(obj).replace('"@@"', value)


@pytest.mark.parametrize("value", SURROGATES)
def test_lone_surrogates_in_any_quoted_field_never_answer_500(pool, value):
    client, suite = pool["client"], pool["suite"]
    hook = webhook_payload(suite, "c1", ann_id=9)
    bodies = [("/webhook", _with(hook, path, value)) for path in (
        ("action",), ("task", "data", "continuation_id"), ("annotation", "id"), ("annotation", "completed_by"),
        ("annotation", "updated_at"), ("annotation", "created_at"), ("task", "data", "fps"),
        ("annotation", "result", 0, "value", "timelinelabels", 0))]
    bodies.append(("/webhook", _with({"action": "ANNOTATIONS_DELETED", "annotations": [{"id": 1}]},
                                     ("annotations", 0, "id"), value)))
    task = task_of(suite, "c1")
    bodies += [("/predict", _with({"tasks": [task]}, path, value)) for path in (
        ("tasks", 0, "id"), ("tasks", 0, "data", "video"), ("tasks", 0, "data", "instruction"),
        ("tasks", 0, "data", "fps"), ("label_config",))]
    bodies += [("/v1/rate", _with({"video": "suite/videos/c1.mp4", "instruction": "go"}, (k,), value))
               for k in ("video", "instruction", "extra")]
    for path, body in bodies:
        r = client.post(path, content=body, headers=JSON)
        assert r.status_code < 500, (path, body[:200], r.text)
        json.loads(r.content.decode("utf-8"))  # strict UTF-8 JSON
    Suite.load(suite.root)


@pytest.mark.parametrize("stamp", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-00:01"])
def test_times_outside_the_years_1_to_9999_in_utc_answer_422_naming_the_field(pool, stamp):
    for field in ("updated_at", "created_at"):
        payload = webhook_payload(pool["suite"], "c2", ann_id=10, updated_at=None)
        payload["annotation"][field] = stamp
        r = pool["client"].post("/webhook", json=payload)
        assert r.status_code == 422 and field in r.json()["detail"] and "1..9999" in r.json()["detail"], r.text


def test_ingest_of_an_export_with_bad_labels_keeps_the_others_and_names_each_refused_one(env, tmp_path):
    from autorater.data.suite import Annotation
    from autorater.serving.labelling.folder import LabelsFolder
    from autorater.serving.labelling.ingest import ingest
    from autorater.serving.labelling.label import label_suite
    from autorater.serving.labelstudio.formats import annotations_to_export

    shutil.copytree(env["suite"].root, tmp_path / "suite")
    suite = new_version(tmp_path / "suite")
    label_suite(env["model"], suite, tmp_path / "labels", audit_share=1.0)
    folder = LabelsFolder(tmp_path / "labels")
    export = annotations_to_export(folder.read_tasks(), [Annotation(c, "h7", "success", 0.5) for c in
                                                          ("c1", "c2", "c3", "c4")])
    export[1]["annotations"][0]["updated_at"] = "0001-01-01T00:00:00+01:00"
    export[2]["annotations"][0]["created_at"] = "9999-12-31T23:59:59-00:01"
    export[2]["annotations"][0].pop("updated_at")
    export[3]["annotations"][0]["id"] = export[0]["annotations"][0]["id"]  # a second task claims an annotation id
    path = tmp_path / "export.json"
    path.write_text(json.dumps(export))
    result = ingest(folder.root, path)
    assert result["accepted"] == 1 and result["errors"] == 3
    refused = [p for p in result["problems"] if "1..9999" in p]
    assert len(refused) == 2 and "(index 1" in refused[0] and "(index 2" in refused[1], result["problems"]
    (claimed,) = [p for p in result["problems"] if "another continuation" in p]
    assert "(index 3" in claimed
    kept = {r["continuation_id"] for r in suite_rows(suite.root) if r.get("ls_annotation_id") is not None}
    assert kept == {"c1"}


@pytest.mark.parametrize("meta", ['{"registered_version": "\\ud800"}', '{"registered_name": ["x"]}',
                                  '{"registered_name": {"a": 1}}', '{"registered_version": true}',
                                  '{"mlflow_run_id": "a\\nb"}', '{"registered_name": "' + "x" * 300 + '"}',
                                  '["not", "an", "object"]', '{"registered_version": '])
def test_a_tampered_metadata_json_is_refused_when_the_model_loads(env, tmp_path, meta):
    folder = tmp_path / "model"
    shutil.copytree(env["model"], folder)
    (folder / "metadata.json").write_text(meta)
    with pytest.raises(ValueError, match="metadata.json") as err:
        create_app(folder, env["media"])
    assert "fix:" in str(err.value)
    (folder / "metadata.json").write_text('{"registered_name": "autorater", "registered_version": 3}')
    client = TestClient(create_app(folder, env["media"]))
    assert client.get("/health").json()["model_version"] == "autorater@3"


# ----------------------------------------------------------------------------------------------
# 4. History that stays cheap


def test_a_flood_of_unknown_deletions_is_one_event_each_and_the_tombstones_stay_bounded(pool):
    client, root = pool["client"], pool["suite"].root
    n = 25_000
    for start in (0, n, 2 * n):  # 75,000 ids the service never saw, in three requests
        r = client.post("/webhook", json={"action": "ANNOTATIONS_DELETED",
                                          "annotations": [{"id": 10 ** 6 + i} for i in range(start, start + n)]})
        assert r.status_code == 201 and r.json()["removed"] == 0
    events = suite_history(root).events()
    assert len(events) == 3 and all(e["action"] == "delete" for e in events)
    deleted = suite_history(root).deleted_ids()
    assert len(deleted) == MAX_UNSEEN_TOMBSTONES and str(10 ** 6 + 3 * n - 1) in deleted
    assert (root / SUITE_HISTORY_FILE).stat().st_size < 3 * MAX_UNSEEN_TOMBSTONES * 12  # ~10 bytes an id kept
    late = webhook_payload(pool["suite"], "c1", ann_id=10 ** 6 + 3 * n - 1)  # deleted before its creation: refused
    assert client.post("/webhook", json=late).status_code == 409
    fresh = webhook_payload(pool["suite"], "c1", ann_id=42)
    assert client.post("/webhook", json=fresh).json()["status"] == "recorded"


def _store(tmp_path) -> LabelHistory:
    return LabelHistory(tmp_path / "annotations.jsonl", tmp_path / "annotations_history.jsonl")


def _label(i: int, cid: str = "c1", **extra) -> dict:
    return {"continuation_id": cid, "annotator_id": f"ls-{i % 3}", "outcome": ("success", "failure")[i % 2],
            "marker_s": 0.125 * (i % 8), "ls_annotation_id": i, **extra}


def test_the_history_snapshot_gives_what_every_event_gives_and_a_bad_one_is_ignored(tmp_path):
    store = _store(tmp_path)
    for i in range(400):  # past SNAPSHOT_AFTER_BYTES: a snapshot is written
        store.apply([arriving(_label(i % 150, ls_updated_at=f"2026-11-23T12:{i // 10 % 60:02d}:00Z"))], via="t")
        if i % 37 == 0:
            store.delete([i % 150, 10 ** 9 + i], via="t")
    assert store.snapshot.is_file() and store.rebuild() == store.rows()
    state = (store.rows(), store.deleted_ids())
    store.snapshot.write_text(store.snapshot.read_text().replace('"deleted"', '"deleted_"'))  # damaged: ignored
    assert (store.rows(), store.deleted_ids()) == state
    store.snapshot.unlink()  # lost: the events decide
    store.apply([arriving(_label(1000))], via="t")
    assert store.rebuild() == store.rows() and store.deleted_ids() == state[1]


def test_a_torn_last_history_line_is_never_read_and_is_cut_off_by_the_next_write(tmp_path):
    store = _store(tmp_path)
    store.apply([arriving(_label(1))], via="t")
    with open(store.history, "ab") as f:
        f.write(b'{"event": 2, "action": "add", "key": ["ls", "c1", "2"], "row"')  # a crash mid-append
    assert len(store.events()) == 1
    store.apply([arriving(_label(2))], via="t")
    assert [e["event"] for e in store.events()] == [1, 2] and store.rebuild() == store.rows()


def test_a_write_over_the_bound_is_refused_and_changes_nothing(tmp_path):
    store = _store(tmp_path)
    store.apply([arriving(_label(1))], via="t")
    before = (store.history.read_bytes(), store.labels.read_bytes())
    with pytest.raises(HistoryWriteTooLarge, match="limit"):
        store.delete(range(10, 5000), via="t", max_bytes=1000)
    with pytest.raises(HistoryWriteTooLarge):
        store.apply([arriving(_label(i)) for i in range(2, 40)], via="t", max_bytes=1000)
    assert (store.history.read_bytes(), store.labels.read_bytes()) == before


def test_a_history_of_one_event_per_deleted_id_still_loads(tmp_path):
    store = _store(tmp_path)
    old = [{"event": 1, "action": "add", "key": ["ls", "c1", "5"], "row": _label(5), "version": None, "bump": 0},
           {"event": 2, "action": "delete", "ls_annotation_id": "5"},
           {"event": 3, "action": "delete", "ls_annotation_id": "6"}]
    store.history.write_text("".join(json.dumps(e) + "\n" for e in old))
    assert store.deleted_ids() == {"5", "6"} and store.rebuild() == []
    assert store.apply([arriving(_label(6), "create")], via="t").statuses == ["deleted"]


# ----------------------------------------------------------------------------------------------
# 5. Ordering


def _final(pool, ann_id: int) -> tuple:
    (row,) = [r for r in suite_rows(pool["suite"].root) if r.get("ls_annotation_id") == ann_id]
    return row["outcome"], row["marker_s"]


def _hook(pool, outcome, marker, ann_id, action, updated_at=None, created_at=None, cid="c1"):
    payload = webhook_payload(pool["suite"], cid, outcome, marker, ann_id=ann_id, updated_at=updated_at,
                              action=action)
    payload["annotation"]["created_at"] = created_at
    return pool["client"].post("/webhook", json=payload)


@pytest.mark.parametrize("created_at", [None, "2026-11-23T10:00:00Z"])
def test_an_update_is_never_overwritten_by_a_late_or_replayed_creation(pool, created_at):
    """An update without updated_at before its creation; and, without any times, a replayed creation."""
    update = _hook(pool, "failure", 0.75, 21, "ANNOTATION_UPDATED", created_at=created_at)
    assert update.json()["status"] == "recorded"
    assert _hook(pool, "success", 0.25, 21, "ANNOTATION_CREATED", created_at=created_at).json()["status"] == "stale"
    assert _final(pool, 21) == ("failure", 0.75)
    assert _hook(pool, "success", 0.25, 22, "ANNOTATION_CREATED").json()["status"] == "recorded"  # no times at all
    assert _hook(pool, "failure", 0.5, 22, "ANNOTATION_UPDATED").json()["status"] == "updated"
    assert _hook(pool, "success", 0.25, 22, "ANNOTATION_CREATED").json()["status"] == "stale"  # replayed
    assert _final(pool, 22) == ("failure", 0.5)


def test_an_updated_at_beyond_the_small_skew_is_refused(pool):
    from datetime import datetime, timedelta, timezone

    now = datetime.now(timezone.utc)
    ahead = _hook(pool, "success", 0.5, 23, "ANNOTATION_UPDATED", (now + timedelta(seconds=290)).isoformat())
    assert ahead.status_code == 422 and "updated_at" in ahead.json()["detail"]
    near = _hook(pool, "success", 0.5, 23, "ANNOTATION_UPDATED", (now + timedelta(seconds=5)).isoformat())
    assert near.status_code == 201
    fixed = _hook(pool, "failure", 0.25, 23, "ANNOTATION_UPDATED", (now + timedelta(seconds=6)).isoformat())
    assert fixed.json()["status"] == "updated"


def test_an_annotation_id_belongs_to_one_task(pool):
    assert _hook(pool, "success", 0.5, 24, "ANNOTATION_CREATED", cid="c1").json()["status"] == "recorded"
    other = _hook(pool, "failure", 0.25, 24, "ANNOTATION_UPDATED", "2026-11-23T13:00:00Z", cid="c2")
    assert other.status_code == 409 and "another" in other.json()["detail"]
    assert [r["continuation_id"] for r in suite_rows(pool["suite"].root) if r.get("ls_annotation_id") == 24] == ["c1"]
    r = pool["client"].post("/webhook", json={"action": "ANNOTATIONS_DELETED", "annotations": [{"id": 24}]})
    assert r.json()["removed"] == 1


def test_ingest_takes_an_annotation_id_once_and_lists_the_other_task_claiming_it(tmp_path):
    store = _store(tmp_path)
    done = store.apply([arriving(_label(7, "c1")), arriving(_label(7, "c2")), arriving(_label(8, "c2"))], via="t")
    assert done.statuses == ["recorded", "conflict", "recorded"]
    assert sorted((r["continuation_id"], r["ls_annotation_id"]) for r in store.rows()) == [("c1", 7), ("c2", 8)]
    store.labels.write_text(store.labels.read_text() + json.dumps(_label(9, "c3")) + "\n")  # a suite's own row
    assert store.apply([arriving(_label(9, "c4"))], via="t").statuses == ["conflict"]


# ----------------------------------------------------------------------------------------------
# 6. Limits


def test_takeover_past_the_end_of_the_video_answers_422(env):
    client = TestClient(create_app(env["model"], env["media"]))
    r = client.post("/v1/rate", json={"video": "suite/videos/c1.mp4", "instruction": "go", "takeover_s": 5.0})
    assert r.status_code == 422 and "takeover_s" in r.json()["detail"] and "end" in r.json()["detail"]
    assert client.post("/v1/rate", json={"video": "suite/videos/c1.mp4", "instruction": "go",
                                         "takeover_s": 1.0}).status_code == 200  # at the end: allowed
    task = dict(task_of(env["suite"], "c1"), id=3)
    task["data"]["takeover_s"] = 60.0
    (result,) = client.post("/predict", json={"tasks": [task]}).json()["results"]
    assert result["result"] == [] and "takeover_s" in result["error"]


def test_label_configs_are_bounded_and_parsed_off_the_event_loop_once_each(env):
    client = TestClient(create_app(env["model"], env["media"]))
    r = client.post("/setup", json={"schema": "<View>" + " " * (mlbackend.MAX_LABEL_CONFIG + 1) + "</View>"})
    assert r.status_code == 422 and "schema" in r.json()["detail"]
    threads = []
    real = mlbackend.label_config_problem

    def spy(config):
        threads.append(threading.current_thread())
        return real(config)

    spy.cache_info = real.cache_info
    mlbackend.label_config_problem = spy
    try:
        from autorater.serving.labelstudio.formats import labeling_config

        assert client.post("/setup", json={"schema": labeling_config()}).status_code == 200
        assert client.post("/setup", json={"schema": "<View><Text"}).status_code == 422
    finally:
        mlbackend.label_config_problem = real
    assert len(threads) == 2 and threading.main_thread() not in threads
    before = real.cache_info().hits
    assert client.post("/setup", json={"schema": labeling_config()}).status_code == 200
    assert real.cache_info().hits == before + 1


@pytest.fixture()
def model_dir(tmp_path):
    torch.manual_seed(0)
    return AutoModel.from_config(PRESETS["tiny"]).save_pretrained(tmp_path / "m")


def _edit(folder: Path, **changes) -> None:
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(changes)
    (folder / "config.json").write_text(json.dumps(cfg, indent=4, sort_keys=True))


def test_config_json_is_covered_by_the_checksum(model_dir):
    _edit(model_dir)  # another order and spacing: the same content
    AutoModel.from_pretrained(model_dir)
    _edit(model_dir, clip_frames=64)  # in its range, but not what was saved
    with pytest.raises(ValueError, match="config.json does not match the checksum"):
        AutoModel.from_pretrained(model_dir)
    with pytest.warns(UserWarning, match="checksum"):
        assert AutoModel.from_pretrained(model_dir, allow_unverified=True).config.clip_frames == 64


def test_the_decode_budget_is_bounded_as_a_product_at_load(model_dir):
    _edit(model_dir, image_size=1024, clip_frames=1024)  # each in its range
    with pytest.raises(ValueError, match="clip_frames.*image_size.*config.json|config.json.*clip_frames.*image_size"):
        AutoModel.from_pretrained(model_dir, allow_unverified=True)
