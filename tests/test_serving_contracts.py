"""Issue 37, items 2, 3 and 5: no 500 from input, decode limits per frame, stricter contracts.

The answers of 500 found by the second attack (an integer of 309+ digits in a number field, a symlink loop under the
media root; the disconnect is in test_serving_limits.py), each a 4xx now; a video whose container lies about its
frame size, refused at the first oversized frame; strict types on ``/v1/rate``, bounded ids, ``config.json`` ranges,
model folders without a checksum, the video's own frame rate, and per-task errors in a ``/predict`` batch.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from autorater.data.video import FrameTooLarge, VideoLimits, read_video
from autorater.models import AutoModel
from autorater.serving.labelstudio.formats import label_interface
from autorater.serving.service.app import create_app
from hardening_env import make_pool, suite_rows, task_of, webhook_payload
from tiny_suites import FPS, N_FRAMES, new_version

HUGE = "1" + "0" * 400  # an integer of 401 digits: float() and math.isfinite() raise OverflowError on it


@pytest.fixture(scope="module")
def client(env, tmp_path_factory):
    """A client over this module's own copy of the suite (the session's ``env`` is read, never written)."""
    return make_pool(env, tmp_path_factory.mktemp("contracts"))["client"]


def _post(client, path: str, obj, big: dict | None = None):
    """POST ``obj`` as JSON, with each placeholder string of ``big`` replaced by a raw JSON number."""
    text = json.dumps(obj)
    for placeholder, number in (big or {}).items():
        text = text.replace(f'"{placeholder}"', number)
    return client.post(path, content=text, headers={"content-type": "application/json"})


# ----------------------------------------------------------------------------------------------
# No 500 from input


@pytest.mark.parametrize("field", ["fps", "takeover_s", "fps_override"])
def test_a_huge_integer_in_a_predict_task_is_a_422_naming_the_field(client, env, field):
    task = task_of(env["suite"], "c1")
    task["data"][field] = "@@"
    r = _post(client, "/predict", {"tasks": [task]}, {"@@": HUGE})
    assert r.status_code == 422 and f"data.{field}" in r.json()["detail"], r.text


@pytest.mark.parametrize("where", ["fps", "start", "end"])
def test_a_huge_integer_in_a_webhook_is_a_422_and_the_suite_is_unchanged(pool, where):
    payload = webhook_payload(pool["suite"], "c1")
    if where == "fps":
        payload["task"]["data"]["fps"] = "@@"
    else:
        payload["annotation"]["result"][0]["value"]["ranges"][0][where] = "@@"
    before = suite_rows(pool["suite"].root)
    r = _post(pool["client"], "/webhook", payload, {"@@": HUGE})
    assert r.status_code == 422 and ("fps" if where == "fps" else "marker") in r.json()["detail"], r.text
    assert suite_rows(pool["suite"].root) == before


def test_a_huge_integer_in_rate_is_a_422(client):
    r = _post(client, "/v1/rate", {"video": "suite/videos/c1.mp4", "instruction": "go", "takeover_s": "@@"},
              {"@@": HUGE})
    assert r.status_code == 422 and "takeover_s" in r.text


def test_an_export_with_huge_integers_is_ingested_with_clear_problems(env, tmp_path):
    from autorater.data.suite import Annotation
    from autorater.serving.labelling.folder import LabelsFolder
    from autorater.serving.labelling.ingest import ingest
    from autorater.serving.labelling.label import label_suite
    from autorater.serving.labelstudio.formats import annotations_to_export

    shutil.copytree(env["suite"].root, tmp_path / "suite")
    label_suite(env["model"], new_version(tmp_path / "suite"), tmp_path / "labels", audit_share=1.0)
    folder = LabelsFolder(tmp_path / "labels")
    export = annotations_to_export(folder.read_tasks(), [Annotation("c1", "h7", "success", 0.5),
                                                          Annotation("c2", "h7", "failure", 0.25)])
    export[0]["data"]["fps"] = "@@"  # the video's own rate (tasks.json) is used instead
    export[1]["annotations"][0]["result"][0]["value"]["ranges"][0]["start"] = "@@"
    path = tmp_path / "export.json"
    path.write_text(json.dumps(export).replace('"@@"', HUGE))
    result = ingest(folder.root, path)
    assert result["accepted"] == 1 and result["errors"] == 1 and "numeric start/end" in " ".join(result["problems"])
    rows = tmp_path / "annotations.jsonl"  # the same in a SUITE_FORMAT file
    rows.write_text('{"continuation_id": "c3", "annotator_id": "h9", "outcome": "success", "marker_s": @@}\n'
                    .replace("@@", HUGE))
    result = ingest(folder.root, rows)
    assert result["errors"] == 1 and "marker_s' is not a finite number" in result["problems"][0]


@pytest.mark.parametrize("link", ["loop", "loop/x.mp4", "a", "a/b/c.mp4"])
def test_a_symlink_loop_under_the_media_root_is_a_400(env, tmp_path, link):
    media = tmp_path / "media"
    shutil.copytree(env["media"], media)
    os.symlink("loop", media / "loop")
    os.symlink("b", media / "a")
    os.symlink("a", media / "b")
    client = TestClient(create_app(env["model"], media), raise_server_exceptions=False)
    r = client.post("/v1/rate", json={"video": link, "instruction": "go"})
    assert r.status_code == 400 and "loop of symbolic links" in r.json()["detail"], r.text
    task = task_of(env["suite"], "c1")
    task["data"]["video"] = link
    assert client.post("/predict", json={"tasks": [task]}).status_code == 400


# ----------------------------------------------------------------------------------------------
# Decode limits per frame, not per claim


def _lying_mjpeg(path: Path, claim: int, big: int, n_small: int = 2, n_big: int = 12, fps: int = 8) -> Path:
    """An MJPEG AVI whose container says ``claim`` x ``claim`` and whose frames from ``n_small`` on are ``big``."""
    import av
    from PIL import Image

    with av.open(str(path), "w", format="avi") as out:
        stream = out.add_stream("mjpeg", rate=fps)
        stream.width = stream.height = claim
        stream.pix_fmt = "yuvj420p"
        for i in range(n_small + n_big):
            side = claim if i < n_small else big
            buf = io.BytesIO()
            Image.fromarray(np.full((side, side, 3), 40 + 20 * (i % 8), np.uint8)).save(buf, "JPEG", quality=50)
            packet = av.Packet(buf.getvalue())
            packet.stream, packet.pts, packet.dts = stream, i, i
            out.mux(packet)
    return path


@pytest.mark.parametrize("big", [96, 2048])  # a little larger (decoded, then refused), much larger (never decoded)
def test_a_video_whose_frames_outgrow_its_container_is_refused_at_the_first_such_frame(tmp_path, big):
    path = _lying_mjpeg(tmp_path / "lying.avi", claim=64, big=big)
    with pytest.raises(FrameTooLarge, match="frame 2 .*64 x 64") as err:
        read_video(path, num_frames=8, size=32)
    assert err.value.frame == 2  # the first oversized frame: decoding stopped there
    assert read_video(path, num_frames=2, size=32, limits=None).frames.shape == (2, 32, 32, 3)  # trusted: no limits


def test_refusing_a_lying_video_costs_no_more_memory_than_one_small_frame(tmp_path):
    path = _lying_mjpeg(tmp_path / "lying.avi", claim=64, big=6000, n_big=3)  # a 6000 x 6000 frame: 54 MB decoded
    code = ("import resource, sys; from data.video import read_video, FrameTooLarge\n"
            "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            "try:\n    read_video(sys.argv[1], num_frames=8, size=64)\nexcept FrameTooLarge as e:\n"
            "    print(e.frame, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)\n")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).parent.parent)
    frame, grown_mb = map(int, out.stdout.split())
    assert frame == 2 and grown_mb < 24, out.stdout  # under half of the one frame the decoder did not allocate


def test_a_decode_stops_at_its_pixel_budget(env):
    path = env["suite"].video_path("c1")  # 8 frames of 16 x 16
    with pytest.raises(FrameTooLarge, match="budget of 1000 decoded pixels"):
        read_video(path, limits=VideoLimits(max_decoded_pixels=1000))
    assert read_video(path, limits=VideoLimits(max_decoded_pixels=8 * 256)).frames.shape[0] == N_FRAMES


# ----------------------------------------------------------------------------------------------
# Stricter contracts


@pytest.mark.parametrize("body", [
    {"takeover_s": "5"}, {"takeover_s": True}, {"instruction": "   "}, {"instruction": "\n\t"}, {"video": 5},
    {"instruction": ["go"]}, {"takeover_s": None}])
def test_rate_is_strict_about_types_and_blank_instructions(client, body):
    r = client.post("/v1/rate", json={"video": "suite/videos/c1.mp4", "instruction": "go", **body})
    assert r.status_code == 422 and next(iter(body)) in json.dumps(r.json()), r.text


def test_rate_takes_json_integers_and_floats(client):
    for takeover in (0, 0.25):
        r = client.post("/v1/rate", json={"video": "suite/videos/c1.mp4", "instruction": "go", "takeover_s": takeover})
        assert r.status_code == 200, r.text


def test_ids_are_bounded(pool, env):
    payload = webhook_payload(pool["suite"], "c1")
    payload["annotation"]["id"] = "x" * 200_000
    r = pool["client"].post("/webhook", json=payload)
    assert r.status_code == 422 and "annotation.id" in r.json()["detail"] and len(r.text) < 2000
    for bad in ("x" * 200_000, 10 ** 30, True, 1.5):
        r = pool["client"].post("/webhook", json={"action": "ANNOTATIONS_DELETED", "annotations": [{"id": bad}]})
        assert r.status_code == 422
    task = task_of(env["suite"], "c1")
    task["id"] = "t" * 5000
    r = pool["client"].post("/predict", json={"tasks": [task]})
    assert r.status_code == 422 and "'id'" in r.json()["detail"]


@pytest.fixture()
def model_copy(env, tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(env["model"], folder)
    return folder


def _set_config(folder: Path, text: str) -> None:
    (folder / "config.json").write_text(text)


@pytest.mark.parametrize("field,value", [("image_size", "0"), ("image_size", "-1"), ("image_size", "1000000000"),
                                         ("image_size", "1e9"), ("clip_frames", "0"), ("clip_frames", "20000"),
                                         ("places", HUGE), ("members", "1e400")])
def test_config_values_out_of_range_are_refused_naming_the_field(model_copy, field, value):
    cfg = json.loads((model_copy / "config.json").read_text())
    cfg[field] = "@@"
    _set_config(model_copy, json.dumps(cfg).replace('"@@"', value))
    with pytest.raises(ValueError, match=f"config.json.*{field}|{field}.*config.json"):
        AutoModel.from_pretrained(model_copy)


def test_a_deeply_nested_config_is_refused_with_a_message(model_copy):
    _set_config(model_copy, '{"vocab": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ValueError, match="nested too deeply"):
        AutoModel.from_pretrained(model_copy)
    cfg = json.loads((json.dumps({"architecture": "events"})))
    cfg["vocab"] = [["go"]]
    _set_config(model_copy, json.dumps(cfg))
    with pytest.raises(ValueError, match="vocab"):
        AutoModel.from_pretrained(model_copy)


def test_a_model_folder_without_a_checksum_is_refused_unless_allowed(model_copy, env, tmp_path, capsys):
    from safetensors.torch import load_file, save_file

    from autorater.app import cli

    weights = model_copy / "model.safetensors"
    state = load_file(str(weights))
    save_file(state, str(weights), metadata={"format": "autorater"})  # the checksum key removed
    with pytest.raises(ValueError, match="no checksum.*--allow-unverified"):
        AutoModel.from_pretrained(model_copy)
    assert AutoModel.from_pretrained(model_copy, allow_unverified=True) is not None  # an old folder still loads
    args = ["predict", "--model", str(model_copy), "--suite", str(env["suite"].root), "--out",
            str(tmp_path / "p.jsonl"), "--quiet", "--device", "cpu"]
    assert cli.main(args) == 2 and "--allow-unverified" in capsys.readouterr().err
    assert cli.main(args + ["--allow-unverified"]) == 0
    with pytest.raises(ValueError, match="no checksum"):
        create_app(model_copy, env["media"])
    assert create_app(model_copy, env["media"], allow_unverified=True) is not None


def _marker_frame(client, task) -> int:
    r = client.post("/predict", json={"tasks": [task]})
    assert r.status_code == 200, r.text
    return r.json()["results"][0]["result"][0]["value"]["ranges"][0]["start"]


def test_the_videos_own_fps_is_used_unless_the_task_overrides_it_explicitly(client, env):
    task = task_of(env["suite"], "c1")
    own = _marker_frame(client, task)
    task["data"]["fps"] = 1000  # informational: the video says 8
    assert _marker_frame(client, task) == own
    task["data"]["fps_override"] = 2 * FPS
    doubled = _marker_frame(client, task)
    assert 1 <= doubled <= 2 * N_FRAMES and abs(doubled - 1 - 2 * (own - 1)) <= 1


def test_an_fps_override_that_gives_too_many_frames_is_that_tasks_error(env):
    client = TestClient(create_app(env["model"], env["media"], video_limits=VideoLimits(max_frames=100)))
    task = task_of(env["suite"], "c1")
    task["data"]["fps_override"] = 500  # 500 frames over the 1 s video
    r = client.post("/predict", json={"tasks": [task]})
    assert r.status_code == 200 and "fps_override" in r.json()["results"][0]["error"]


def test_one_undecodable_video_fails_only_its_own_task(env, tmp_path):
    media = tmp_path / "media"
    shutil.copytree(env["media"], media)
    (media / "suite" / "videos" / "broken.mp4").write_bytes(b"not a video at all" * 100)
    client = TestClient(create_app(env["model"], media))
    tasks = [task_of(env["suite"], "c1", 1), task_of(env["suite"], "c2", 2), task_of(env["suite"], "c3", 3)]
    tasks[1]["data"]["video"] = "suite/videos/broken.mp4"
    r = client.post("/predict", json={"tasks": tasks})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert [bool(x["result"]) for x in results] == [True, False, True]
    assert "task 2" in results[1]["error"] and "broken.mp4" in results[1]["error"]
    li = label_interface()
    assert all(li.validate_prediction(x, return_errors=True) == [] for x in results)


def test_rating_slots_are_free_once_a_deadline_passed(env):
    app = create_app(env["model"], env["media"], timeout_s=0.05, max_decodes=1)
    client = TestClient(app)
    tasks = [task_of(env["suite"], f"c{1 + i % 4}", i) for i in range(64)]
    r = client.post("/predict", json={"tasks": tasks})
    assert r.status_code in (200, 504)
    start = time.monotonic()
    while app.state.slots.busy() and time.monotonic() - start < 5:
        time.sleep(0.01)
    assert app.state.slots.busy() == 0
