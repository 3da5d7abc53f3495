"""``autorater serve``: /v1/rate, the Label Studio ML-backend protocol, and request validation, with an HTTP client
against the app (the documented request and response formats of label-studio-ml-backend; no Label Studio server)."""

from __future__ import annotations

import os
import shutil

import pytest
from fastapi.testclient import TestClient

from autorater.app import cli
from autorater.data.suite import Suite
from autorater.serving.labelstudio.formats import annotations_to_export, label_interface, labeling_config
from autorater.serving.service.app import create_app
from serving_env import make_env, torch_threads


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    with torch_threads(1):
        env = make_env(tmp_path_factory.mktemp("serve"))
        media = env["root"]  # the media root holds the suite folder: paths look like "suite/videos/c000001.mp4"
        env["client"] = TestClient(create_app(env["model"], media, suite=env["suite"].root, max_upload_bytes=200_000))
        env["video"] = f"suite/{env['suite'].continuations[0].video}"
        yield env


def test_health_and_openapi(env):
    r = env["client"].get("/health")
    assert r.status_code == 200 and r.json()["status"] == "UP" and r.json()["calibrated"] is True
    paths = env["client"].get("/openapi.json").json()["paths"]
    assert {"/v1/rate", "/v1/rate/upload", "/predict", "/setup", "/webhook", "/health"} <= set(paths)


def test_rate_a_video_by_path_and_by_upload_gives_the_same_prediction(env):
    c = env["suite"].continuations[0]
    body = {"video": env["video"], "instruction": env["suite"].instruction_of(c.continuation_id)}
    r = env["client"].post("/v1/rate", json=body)
    assert r.status_code == 200, r.text
    by_path = r.json()
    assert 0 <= by_path["p_success"] <= 1 and by_path["outcome"] in ("success", "failure")
    assert by_path["decision"] in ("auto", "human")
    with open(env["suite"].video_path(c.continuation_id), "rb") as f:
        r = env["client"].post("/v1/rate/upload", files={"file": ("v.mp4", f, "video/mp4")},
                               data={"instruction": body["instruction"]})
    assert r.status_code == 200, r.text
    assert r.json()["p_success"] == pytest.approx(by_path["p_success"], abs=1e-6)


@pytest.mark.parametrize("video", ["../../etc/passwd", "/etc/passwd", "suite/../../x.mp4", "C:/x.mp4",
                                   "/data/local-files/?d=../../etc/passwd"])
def test_paths_outside_the_media_root_are_refused(env, video):
    r = env["client"].post("/v1/rate", json={"video": video, "instruction": "go to the red ball"})
    assert r.status_code == 400 and "media root" in r.json()["detail"]


def test_a_symlink_out_of_the_media_root_is_refused(env, tmp_path):
    outside = tmp_path / "secret.mp4"
    shutil.copy(env["suite"].video_path(env["suite"].continuations[0].continuation_id), outside)
    link = env["root"] / "link.mp4"
    if not link.exists():
        os.symlink(outside, link)
    r = env["client"].post("/v1/rate", json={"video": "link.mp4", "instruction": "go to the red ball"})
    assert r.status_code == 400 and "outside" in r.json()["detail"]


def test_bad_requests_get_clear_4xx(env):
    client = env["client"]
    assert client.post("/v1/rate", json={"video": "suite/videos/none.mp4", "instruction": "x"}).status_code == 404
    assert client.post("/v1/rate", json={"video": env["video"]}).status_code == 422  # no instruction
    assert client.post("/v1/rate", json={"video": env["video"], "instruction": "x", "extra": 1}).status_code == 422
    bad = {"video": env["video"], "instruction": "x", "takeover_s": -1}
    assert client.post("/v1/rate", json=bad).status_code == 422
    not_video = env["root"] / "text.mp4"
    not_video.write_text("this is not a video")
    r = client.post("/v1/rate", json={"video": "text.mp4", "instruction": "x"})
    assert r.status_code == 422 and "decode" in r.json()["detail"]
    r = client.post("/v1/rate/upload", files={"file": ("big.mp4", b"0" * 300_000, "video/mp4")},
                    data={"instruction": "x"})
    assert r.status_code == 413
    r = client.post("/v1/rate", content=b"{" + b" " * (2 << 20) + b"}", headers={"content-type": "application/json"})
    assert r.status_code == 413


def test_label_studio_setup_predict_and_the_predictions_validate(env):
    client = env["client"]
    r = client.post("/setup", json={"project": "1.1700000000", "schema": labeling_config(), "hostname": "",
                                    "access_token": ""})
    assert r.status_code == 200 and r.json()["model_version"]
    bad = client.post("/setup", json={"project": "1", "schema": "<View><Image name='i' value='$image'/></View>"})
    assert bad.status_code == 422 and "config" in bad.json()["detail"]
    suite = env["suite"]
    tasks = [{"id": i + 1, "data": {"video": f"suite/{c.video}", "instruction": suite.instruction_of(c.continuation_id),
                                    "fps": 8.0}} for i, c in enumerate(suite.continuations[:3])]
    tasks[2]["data"]["video"] = f"/data/local-files/?d=suite/{suite.continuations[2].video}"
    r = client.post("/predict", json={"tasks": tasks, "project": "1.1700000000", "label_config": labeling_config(),
                                      "params": {"context": None}})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert len(results) == 3 and r.json()["model_version"]
    li = label_interface()
    for pred in results:
        assert li.validate_prediction(pred, return_errors=True) == []
        assert 0.5 <= pred["score"] <= 1
    r = client.post("/predict", json={"tasks": [{"id": 1, "data": {"video": "../x.mp4", "instruction": "x"}}]})
    assert r.status_code == 400
    r = client.post("/predict", json={"tasks": [{"id": 1, "data": {"image": "x.png"}}]})
    assert r.status_code == 422 and "task 0" in r.json()["detail"]
    r = client.post("/predict", json={"tasks": [{"data": {}}] * 65})
    assert r.status_code == 422  # too many tasks in one request


def test_webhook_records_annotations_in_the_pool_suite_once(env):
    client = env["client"]
    suite = env["suite"]
    c = suite.continuations[1]
    task = {"id": 7, "data": {"continuation_id": c.continuation_id, "video": f"suite/{c.video}",
                              "instruction": suite.instruction_of(c.continuation_id), "fps": 8.0, "frames": 30}}
    from autorater.data.suite import Annotation

    (exported,) = annotations_to_export([task], [Annotation(c.continuation_id, "h5", "success", marker_s=1.0)])
    payload = {"action": "ANNOTATION_CREATED", "annotation": exported["annotations"][0], "task": task,
               "project": {"id": 1}}
    before = len(Suite.load(suite.root).annotations)
    r = client.post("/webhook", json=payload)
    assert r.status_code == 201 and r.json()["status"] == "recorded" and r.json()["marker_s"] == pytest.approx(1.0)
    assert client.post("/webhook", json=payload).json()["status"] == "duplicate"
    after = Suite.load(suite.root).annotations
    assert len(after) == before + 1 and after[-1].annotator_id == "ls-h5"
    assert client.post("/webhook", json={"action": "PROJECT_UPDATED"}).json()["status"] == "ignored"
    assert client.post("/webhook", json={"no": "action"}).status_code == 422
    unknown = {**payload, "task": {**task, "data": {**task["data"], "continuation_id": "c999"}}}
    assert client.post("/webhook", json=unknown).status_code == 422
    empty = {**payload, "annotation": {**payload["annotation"], "result": []}}
    r = client.post("/webhook", json=empty)
    assert r.status_code == 422 and "no marker" in r.json()["detail"]


def test_a_token_is_required_when_set(env):
    client = TestClient(create_app(env["model"], env["root"], token="s3cret"))
    assert client.get("/health").status_code == 401
    assert client.get("/health", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/health", headers={"Authorization": "Bearer s3cret"}).status_code == 200


def test_serve_refuses_a_public_address_without_a_token(env, capsys, monkeypatch):
    monkeypatch.delenv("AUTORATER_TOKEN", raising=False)
    code = cli.main(["serve", "--model", str(env["model"]), "--media-root", str(env["root"]), "--host", "0.0.0.0"])
    assert code == 2 and "token" in capsys.readouterr().err
