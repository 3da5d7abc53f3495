"""Issue 27: every case found by trying ``autorater serve`` and ``autorater ingest`` as an attacker would.

Each answers a 4xx or a clear error; none answers 500, none leaves a suite that no longer loads, none loses a label
or silently keeps a stale one. A body over the limit or without the token is refused before it is read.
"""

from __future__ import annotations

import asyncio
import json
import math
import shutil
import threading
import time

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient

from autorater.calibration import read_calibration_json
from autorater.data.suite import Suite, write_jsonl
from autorater.data.video import DecodeTimeout, VideoLimits, VideoTooLarge, read_video, video_info, write_video
from autorater.model import weights_sha256
from autorater.models import PRESETS, AutoModel
from autorater.rater import Rater
from autorater.serving.labelling.folder import HUMAN_HISTORY_FILE
from autorater.serving.labelling.history import SUITE_HISTORY_FILE
from autorater.serving.labelling.ingest import ingest
from autorater.serving.labelling.label import label_suite
from autorater.serving.labelstudio.formats import (
    annotation_from_result,
    annotations_to_export,
    annotator_id,
    parse_export,
)
from autorater.serving.service.app import create_app
from hardening_env import region, suite_rows, task_of, webhook_payload
from tiny_suites import FPS, N_FRAMES, new_version


def _finite_and_loads(root) -> list:
    suite = Suite.load(root)  # raises if the folder no longer loads
    for a in suite.annotations:
        assert a.marker_s is None or (math.isfinite(a.marker_s) and 0 <= a.marker_s <= N_FRAMES / FPS + 1e-6)
    return suite.annotations


# ----------------------------------------------------------------------------------------------
# The webhook


@pytest.mark.parametrize("fps", [-8, float("nan"), 1e-320, "abc", [8], "0", 0, float("inf"), True, {"x": 1}, 1e308])
def test_a_webhook_with_a_bad_fps_answers_4xx_and_the_suite_still_loads(pool, fps):
    payload = webhook_payload(pool["suite"], "c1")
    payload["task"]["data"]["fps"] = fps
    before = suite_rows(pool["suite"].root)
    r = pool["client"].post("/webhook", content=json.dumps(payload), headers={"content-type": "application/json"})
    assert 400 <= r.status_code < 500, r.text
    assert suite_rows(pool["suite"].root) == before
    _finite_and_loads(pool["suite"].root)
    good = pool["client"].post("/webhook", json=webhook_payload(pool["suite"], "c1"))  # later webhooks still work
    assert good.status_code == 201 and good.json()["status"] == "recorded"


@pytest.mark.parametrize("cid", [["c1"], {"a": 1}, 7, None, "c" * 5000, True])
def test_a_webhook_whose_continuation_id_is_not_a_known_string_answers_422(pool, cid):
    payload = webhook_payload(pool["suite"], "c1")
    payload["task"]["data"]["continuation_id"] = cid
    r = pool["client"].post("/webhook", json=payload)
    assert r.status_code == 422 and "continuation_id" in r.json()["detail"]


@pytest.mark.parametrize("frames", [-1, 0, 1.5, "8", 10 ** 12])
def test_a_webhook_with_bad_frames_answers_422(pool, frames):
    payload = webhook_payload(pool["suite"], "c1")
    payload["task"]["data"]["frames"] = frames
    r = pool["client"].post("/webhook", json=payload)
    assert r.status_code == 422 and "frames" in r.json()["detail"]


def test_a_webhook_marker_outside_the_video_or_not_a_number_answers_422(pool):
    for ranges in ([{"start": N_FRAMES + 3, "end": N_FRAMES + 3}], [{"start": 1e300, "end": 1e300}],
                   [{"start": "3", "end": 3}], [{"start": 0, "end": 0}]):
        payload = webhook_payload(pool["suite"], "c2")
        payload["annotation"]["result"][0]["value"]["ranges"] = ranges
        r = pool["client"].post("/webhook", json=payload)
        assert r.status_code == 422, (ranges, r.text)
    _finite_and_loads(pool["suite"].root)


def test_the_video_fps_wins_over_the_task_fps_in_a_webhook(pool):
    payload = webhook_payload(pool["suite"], "c3", marker_s=0.5)
    payload["task"]["data"]["fps"] = 2.0  # a plausible but wrong rate: the video says 8
    r = pool["client"].post("/webhook", json=payload)
    assert r.status_code == 201 and r.json()["marker_s"] == pytest.approx(0.5) and "video" in r.json()["note"]


def test_webhook_bodies_that_are_not_json_nan_or_deeply_nested_answer_400(pool):
    client = pool["client"]
    for body in (b"[" * 100_000 + b"]" * 100_000, b'{"action": NaN}', b"\xff\xfe", b"",
                 b'{"action": "ANNOTATION_CREATED"'):
        r = client.post("/webhook", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 400, (body[:20], r.status_code)
    assert client.post("/webhook", json=["ANNOTATION_CREATED"]).status_code == 422


def test_a_corrected_annotation_replaces_the_old_one_and_the_old_one_is_kept_in_history(pool):
    client, root = pool["client"], pool["suite"].root
    n0 = len(suite_rows(root))
    first = webhook_payload(pool["suite"], "c4", "success", 0.25, ann_id=501, updated_at="2026-11-23T12:00:00Z")
    assert client.post("/webhook", json=first).json()["status"] == "recorded"
    assert client.post("/webhook", json=first).json()["status"] == "duplicate"
    fixed = webhook_payload(pool["suite"], "c4", "failure", 0.75, ann_id=501, updated_at="2026-11-23T12:05:00Z",
                            action="ANNOTATION_UPDATED")
    assert client.post("/webhook", json=fixed).json()["status"] == "updated"
    stale = webhook_payload(pool["suite"], "c4", "success", 0.125, ann_id=501, updated_at="2026-11-23T11:00:00Z",
                            action="ANNOTATION_UPDATED")
    assert client.post("/webhook", json=stale).json()["status"] == "stale"
    rows = [r for r in suite_rows(root) if r.get("ls_annotation_id") == 501]
    assert len(suite_rows(root)) == n0 + 1 and len(rows) == 1
    assert rows[0]["outcome"] == "failure" and rows[0]["marker_s"] == pytest.approx(0.75)
    history = [json.loads(x) for x in (root / SUITE_HISTORY_FILE).read_text().splitlines()]
    assert [(h["action"], h["row"]["outcome"], h["row"]["ls_annotation_id"]) for h in history] == [
        ("add", "success", 501), ("replace", "failure", 501)]  # the first label kept, in arrival order
    _finite_and_loads(root)


def test_long_annotator_emails_stay_distinct():
    a = "annotator.with.a.very.long.name." * 3 + "one@example.com"
    b = "annotator.with.a.very.long.name." * 3 + "two@example.com"
    assert annotator_id({"email": a}) != annotator_id({"email": b})
    assert annotator_id({"email": "x" * 5000}) != annotator_id({"email": "x" * 4999 + "y"})
    assert len(annotator_id({"email": "x" * 5000})) < 150 and annotator_id("h1") == "ls-h1"


# ----------------------------------------------------------------------------------------------
# The token and the size limit, before the body is read


def _asgi(app, method: str, path: str, headers: list, chunks: list[bytes]) -> tuple[int, int]:
    """Call the ASGI app directly with a body streamed in ``chunks``; (status, chunks the app asked for)."""
    asked = 0
    status = []

    async def receive():
        nonlocal asked
        asked += 1
        if asked <= len(chunks):
            return {"type": "http.request", "body": chunks[asked - 1], "more_body": asked < len(chunks)}
        return {"type": "http.disconnect"}

    async def send(message):
        if message["type"] == "http.response.start":
            status.append(message["status"])

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(k.lower(), v) for k, v in headers], "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
    asyncio.run(app(scope, receive, send))
    return status[0], asked


def test_a_body_without_the_token_is_refused_before_a_byte_is_read(env):
    app = create_app(env["model"], env["media"], token="s3cret", suite=env["suite"].root, max_upload_bytes=1 << 20)
    big = [b"x" * (1 << 20)] * 400  # "400 MB": never read
    for path, ctype in (("/v1/rate/upload", b"multipart/form-data; boundary=zz"), ("/v1/rate", b"application/json"),
                        ("/webhook", b"application/json")):
        status, asked = _asgi(app, "POST", path, [(b"content-type", ctype),
                                                  (b"content-length", str(400 << 20).encode())], big)
        assert status == 401 and asked == 0
        status, asked = _asgi(app, "POST", path, [(b"content-type", ctype)], big)  # chunked, no length
        assert status == 401 and asked == 0


def test_a_body_over_the_limit_is_refused_while_it_streams(env):
    app = create_app(env["model"], env["media"], suite=env["suite"].root, max_upload_bytes=1 << 20)
    part = b'--zz\r\nContent-Disposition: form-data; name="file"; filename="a.mp4"\r\nContent-Type: video/mp4\r\n\r\n'
    for path, ctype in (("/webhook", b"application/json"), ("/v1/rate", b"application/json"),
                        ("/predict", b"application/json"), ("/v1/rate/upload", b"multipart/form-data; boundary=zz")):
        head = part if path.endswith("upload") else b""
        chunk = [head + b" " * (65536 - len(head))] + [b" " * 65536] * 319  # 21 MB, chunked: no Content-Length
        status, asked = _asgi(app, "POST", path, [(b"content-type", ctype)], chunk)
        assert status == 413, path
        limit = (1 << 20) + 65536 if path.endswith("upload") else 1 << 20
        assert asked * 65536 <= limit + 2 * 65536  # it stopped reading at the limit
        status, asked = _asgi(app, "POST", path, [(b"content-type", ctype), (b"content-length", b"300000000")], chunk)
        assert status == 413 and asked == 0
    assert _asgi(app, "POST", "/webhook", [(b"content-length", b"12abc")], [b"{}"])[0] == 413
    assert _asgi(app, "POST", "/webhook", [(b"content-length", b"9" * 5000)], [b"{}"])[0] == 413


def test_docs_and_the_schema_are_behind_the_token_and_basic_auth_with_the_token_works(env):
    client = TestClient(create_app(env["model"], env["media"], token="s3cret"))
    for path in ("/docs", "/openapi.json", "/redoc", "/health", "/nowhere"):
        assert client.get(path).status_code == 401
    assert client.get("/openapi.json", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert client.get("/docs", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert client.get("/health", auth=("label-studio", "s3cret")).status_code == 200  # Label Studio's basic auth
    assert client.get("/health", auth=("label-studio", "wrong")).status_code == 401
    assert client.get("/health", headers={"Authorization": "Basic !!!"}).status_code == 401


# ----------------------------------------------------------------------------------------------
# /v1/rate and /predict fields


@pytest.mark.parametrize("takeover", [float("nan"), float("inf"), -float("inf"), 1e308, "x", None, [1]])
def test_rate_with_a_non_finite_or_wrong_takeover_answers_422(env, takeover):
    client = TestClient(create_app(env["model"], env["media"]))
    body = json.dumps({"video": "suite/videos/c1.mp4", "instruction": "go", "takeover_s": takeover})
    r = client.post("/v1/rate", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422 and "takeover_s" in json.dumps(r.json())


@pytest.mark.parametrize("field,value", [("fps", float("inf")), ("fps", -1), ("fps", "8"), ("takeover_s", float("nan")),
                                         ("takeover_s", -2), ("instruction", ""), ("instruction", 5), ("video", 3),
                                         ("video", "x" * 5000)])
def test_predict_checks_every_task_field(env, field, value):
    client = TestClient(create_app(env["model"], env["media"]))
    task = task_of(env["suite"], "c1")
    task["data"][field] = value
    r = client.post("/predict", content=json.dumps({"tasks": [task_of(env["suite"], "c2"), task]}),
                    headers={"content-type": "application/json"})
    assert r.status_code == 422 and "task 1" in r.json()["detail"] and field in r.json()["detail"]


def test_upload_with_odd_file_names_and_nan_form_fields_answers_4xx(env):
    client = TestClient(create_app(env["model"], env["media"]))
    video = env["suite"].video_path("c1").read_bytes()
    r = client.post("/v1/rate/upload", files={"file": ("a.\x00mp4", video, "video/mp4")}, data={"instruction": "go"})
    assert r.status_code == 200, r.text
    r = client.post("/v1/rate/upload", files={"file": ("a.mp4", video, "video/mp4")},
                    data={"instruction": "go", "takeover_s": "nan"})
    assert r.status_code == 422


# ----------------------------------------------------------------------------------------------
# Decoding with limits, a bounded number at once, and deadlines that stop the work


def test_a_video_over_the_limits_is_refused_from_its_metadata_before_decoding(env, tmp_path):
    path = env["suite"].video_path("c1")  # 16 x 16, 8 frames at 8 fps
    for limits in (VideoLimits(max_width=8), VideoLimits(max_pixels=100), VideoLimits(max_frames=4),
                   VideoLimits(max_duration_s=0.5), VideoLimits(max_fps=4)):
        with pytest.raises(VideoTooLarge, match="fix:"):
            video_info(path, limits)
        with pytest.raises(VideoTooLarge):
            read_video(path, num_frames=4, limits=limits)
    client = TestClient(create_app(env["model"], env["media"], video_limits=VideoLimits(max_width=8)))
    r = client.post("/v1/rate", json={"video": "suite/videos/c1.mp4", "instruction": "go"})
    assert r.status_code == 422 and "limit" in r.json()["detail"]
    info = video_info(path)
    assert (info.width, info.height, info.num_frames, info.fps) == (16, 16, N_FRAMES, FPS)


def test_decoding_stops_at_its_deadline(env, tmp_path):
    path = write_video(tmp_path / "long.mp4", np.zeros((64, 16, 16, 3), np.uint8), fps=8.0)
    with pytest.raises(DecodeTimeout, match="deadline"):
        read_video(path, num_frames=32, deadline=time.monotonic() - 1)
    assert read_video(path, num_frames=32, deadline=time.monotonic() + 60).frames.shape[0] == 32


def test_many_slow_requests_never_500_and_the_service_recovers_at_once(env):
    app = create_app(env["model"], env["media"], timeout_s=0.05, max_decodes=1)
    client = TestClient(app)
    codes = []

    def hit():
        codes.append(client.post("/v1/rate", json={"video": "suite/videos/c1.mp4", "instruction": "go"}).status_code)

    threads = [threading.Thread(target=hit) for _ in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(codes) == 24 and set(codes) <= {200, 503, 504} and set(codes) & {503, 504}
    healthy = TestClient(create_app(env["model"], env["media"], timeout_s=30, max_decodes=1))
    assert healthy.post("/v1/rate", json={"video": "suite/videos/c1.mp4", "instruction": "go"}).status_code == 200
    # The slot of the timed-out work comes back once that work stops (it checks its deadline), not 9 s later.
    start = time.monotonic()
    while time.monotonic() - start < 5:
        r = client.get("/health")
        assert r.status_code == 200
        r = client.post("/v1/rate", json={"video": "suite/videos/c1.mp4", "instruction": "go"})
        if r.status_code != 503:
            break
        time.sleep(0.05)
    assert r.status_code in (200, 504)


def test_predict_has_one_deadline_for_the_whole_request(env):
    client = TestClient(create_app(env["model"], env["media"], timeout_s=0.3))
    tasks = [task_of(env["suite"], f"c{1 + i % 4}", i) for i in range(64)]
    start = time.monotonic()
    r = client.post("/predict", json={"tasks": tasks})
    assert r.status_code in (200, 504) and time.monotonic() - start < 0.3 + 3.0


# ----------------------------------------------------------------------------------------------
# Ingest


@pytest.fixture()
def labelled(env, tmp_path):
    shutil.copytree(env["suite"].root, tmp_path / "suite")
    suite = new_version(tmp_path / "suite")
    label_suite(env["model"], suite, tmp_path / "labels", audit_share=1.0)
    tasks = json.loads((tmp_path / "labels" / "labelstudio" / "tasks.json").read_text())
    assert len(tasks) == 4
    return {"suite": suite, "labels": tmp_path / "labels", "tasks": tasks, "root": tmp_path}


def _export(labelled, answers, name="export.json", start_id=1):
    from autorater.data.suite import Annotation

    export = annotations_to_export(labelled["tasks"], [Annotation(*a) for a in answers], start_id=start_id)
    path = labelled["root"] / name
    path.write_text(json.dumps(export))
    return path, export


def _ls_rows(root):
    return [r for r in suite_rows(root) if r.get("ls_annotation_id") is not None]


def test_ingest_rerun_after_no_suite_or_a_crash_brings_the_suite_up_to_date(labelled):
    answers = [("c1", "h7", "success", 0.5), ("c2", "h7", "failure", 0.25), ("c3", "h7", "success", 0.75)]
    export, _ = _export(labelled, answers)
    first = ingest(labelled["labels"], export, append_to_suite=False)  # the state a crash before the append leaves
    assert first["accepted"] == 3 and first["appended_to_suite"] == 0 and _ls_rows(labelled["suite"].root) == []
    again = ingest(labelled["labels"], export)
    assert again["accepted"] == 0 and again["duplicates"] == 3 and again["appended_to_suite"] == 3
    assert len(_ls_rows(labelled["suite"].root)) == 3
    third = ingest(labelled["labels"], export)  # idempotent
    assert third["appended_to_suite"] == 0 and len(_ls_rows(labelled["suite"].root)) == 3
    _finite_and_loads(labelled["suite"].root)


def test_ingest_replaces_a_corrected_annotation_and_keeps_the_old_one_in_history(labelled):
    export, data = _export(labelled, [("c1", "h7", "success", 0.5), ("c2", "h7", "failure", 0.25)])
    ingest(labelled["labels"], export)
    corrected = json.loads(json.dumps(data))
    ann = corrected[0]["annotations"][0]
    ann["result"] = [region("failure", 0.875)]
    ann["updated_at"] = "2026-11-24T09:00:00.000000Z"
    path = labelled["root"] / "corrected.json"
    path.write_text(json.dumps(corrected))
    result = ingest(labelled["labels"], path)
    assert result["updated"] == 1 and result["accepted"] == 0
    c1 = [r for r in _ls_rows(labelled["suite"].root) if r["continuation_id"] == "c1"]
    assert len(c1) == 1 and (c1[0]["outcome"], c1[0]["marker_s"]) == ("failure", 0.875)
    labels = {r["continuation_id"]: r for r in map(json.loads, (labelled["labels"] / "labels.jsonl").read_text()
                                                    .splitlines())}
    assert labels["c1"]["human_outcome"] == "failure"
    history = (labelled["labels"] / HUMAN_HISTORY_FILE).read_text()
    assert '"outcome": "success"' in history and '"action": "replace"' in history
    assert (labelled["suite"].root / SUITE_HISTORY_FILE).is_file()
    stale = ingest(labelled["labels"], export)  # the old export again: older updated_at, nothing changes
    assert stale["stale"] == 1 and stale["updated"] == 0
    c1 = [r for r in _ls_rows(labelled["suite"].root) if r["continuation_id"] == "c1"]
    assert c1[0]["outcome"] == "failure"
    _finite_and_loads(labelled["suite"].root)


@pytest.mark.parametrize("fps", [1e-320, 1e-300, -8, float("nan"), "abc"])
def test_the_export_fps_never_beats_tasks_json(labelled, fps):
    export, data = _export(labelled, [("c1", "h7", "success", 0.5)])
    data[0]["data"]["fps"] = fps
    data[0]["annotations"][0]["result"] = [region("success", 0.5)]
    export.write_text(json.dumps(data, allow_nan=True).replace("NaN", '"NaN"'))
    result = ingest(labelled["labels"], export)
    assert result["accepted"] == 1
    (row,) = _ls_rows(labelled["suite"].root)
    assert row["marker_s"] == pytest.approx(0.5)  # frame 5 at the video's 8 fps, not 4e299 s
    _finite_and_loads(labelled["suite"].root)


def test_a_deeply_nested_or_non_finite_export_is_a_clear_error(labelled, tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(ValueError, match="nested too deeply"):
        parse_export(deep, {})
    nan = tmp_path / "nan.json"
    nan.write_text('[{"data": {"fps": NaN}}]')
    with pytest.raises(ValueError, match="NaN"):
        parse_export(nan, {})
    from autorater.app import cli

    assert cli.main(["ingest", "--labels", str(labelled["labels"]), "--export", str(deep)]) == 2


def test_a_marker_that_is_not_a_time_is_refused(labelled):
    problems = []
    ann = {"id": 1, "completed_by": 1, "result": [region("success", 0.5)]}
    ann["result"][0]["value"]["ranges"] = [{"start": 4e299, "end": 4e299}]
    assert annotation_from_result(ann, "c1", 8.0, None, "here", problems) is None and "not a time" in str(problems[0])


# ----------------------------------------------------------------------------------------------
# Model folders


@pytest.fixture()
def model_dir(tmp_path):
    torch.manual_seed(0)
    return AutoModel.from_config(PRESETS["tiny"]).save_pretrained(tmp_path / "m")


def test_flipped_bytes_in_the_tensor_data_are_caught_by_the_checksum(model_dir):
    path = model_dir / "model.safetensors"
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x40  # tensor data is at the end; the header is at the start
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="checksum"):
        AutoModel.from_pretrained(model_dir)


def test_nan_weights_are_refused_at_save_and_at_load(model_dir):
    from safetensors.torch import save_file

    model = AutoModel.from_pretrained(model_dir)
    state = model.trainable_state_dict()
    name = sorted(k for k, v in state.items() if v.is_floating_point())[0]
    state[name] = state[name].clone().fill_(float("nan"))
    save_file(state, str(model_dir / "model.safetensors"), metadata={"format": "autorater",
                                                                      "weights_sha256": weights_sha256(state)})
    with pytest.raises(ValueError, match="non-finite"):
        AutoModel.from_pretrained(model_dir)
    model.load_state_dict(state, strict=False)
    with pytest.raises(ValueError, match="non-finite"):
        model.save_pretrained(model_dir / "again")


def test_serve_and_label_resume_refuse_a_nan_model_with_a_clear_error(env, tmp_path, capsys):
    from safetensors.torch import load_file, save_file

    from autorater.app import cli

    folder = tmp_path / "nan-model"
    shutil.copytree(env["model"], folder)
    state = load_file(str(folder / "model.safetensors"))
    name = sorted(k for k, v in state.items() if v.is_floating_point())[0]
    state[name] = torch.full_like(state[name], float("nan"))
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "autorater",
                                                                  "weights_sha256": weights_sha256(state)})
    with pytest.raises(ValueError, match="non-finite"):
        create_app(folder, env["media"])
    args = ["label", "--model", str(folder), "--suite", str(env["suite"].root), "--out", str(tmp_path / "labels")]
    assert cli.main(args) == 2 and cli.main(args + ["--resume"]) == 2
    assert "non-finite" in capsys.readouterr().err


def test_a_huge_config_is_refused_before_it_allocates(model_dir):
    import resource

    cfg = json.loads((model_dir / "config.json").read_text())
    cfg["places"] = 50_000_000
    (model_dir / "config.json").write_text(json.dumps(cfg))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.monotonic()
    with pytest.raises(ValueError, match="places"):
        AutoModel.from_pretrained(model_dir)
    assert time.monotonic() - start < 20
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 1 << 20  # KiB: under 1 GiB more


@pytest.mark.parametrize("field,value", [("t_success", "NaN"), ("temperature", "Infinity"), ("t_fail", "1.5"),
                                         ("temperature", "0"), ("bound", "-0.1"), ("score_quantiles", "[1, NaN]")])
def test_a_bad_calibration_json_is_refused(env, tmp_path, field, value):
    folder = tmp_path / "m"
    shutil.copytree(env["model"], folder)
    text = (folder / "calibration.json").read_text()
    d = json.loads(text)
    d[field] = "@@"
    (folder / "calibration.json").write_text(json.dumps(d).replace('"@@"', value))
    with pytest.raises(ValueError, match=field):
        read_calibration_json(folder / "calibration.json")
    with pytest.raises(ValueError, match="calibration.json"):
        Rater.load(folder)


# ----------------------------------------------------------------------------------------------
# Files


def test_write_jsonl_refuses_nan_and_leaves_the_old_file(tmp_path):
    path = tmp_path / "a.jsonl"
    write_jsonl(path, [{"x": 1}])
    with pytest.raises(ValueError):
        write_jsonl(path, [{"x": float("nan")}])
    assert path.read_text() == '{"x": 1}\n'


def test_a_stray_part_file_is_ignored_with_a_warning(env, tmp_path):
    out = tmp_path / "labels"
    label_suite(env["model"], env["suite"], out, batch_size=2)
    (out / "labels.jsonl").unlink()
    (out / "parts" / "part-x.jsonl").write_text("junk\n")
    (out / "parts" / "notes.txt").write_text("junk\n")
    with pytest.warns(UserWarning, match="part-x.jsonl"):
        summary = label_suite(env["model"], env["suite"], out, batch_size=2, resume=True)
    assert summary["continuations"] == 4


def test_an_annotation_deleted_in_label_studio_leaves_the_suite_and_is_kept_in_history(pool):
    client, root = pool["client"], pool["suite"].root
    payload = webhook_payload(pool["suite"], "c2", "failure", 0.5, ann_id=777)
    assert client.post("/webhook", json=payload).json()["status"] == "recorded"
    r = client.post("/webhook", json={"action": "ANNOTATIONS_DELETED", "annotations": [{"id": 777}, {"id": 4242}],
                                      "project": {"id": 1}})
    assert r.status_code == 201 and r.json() == {"status": "deleted", "removed": 1}
    assert [x for x in suite_rows(root) if x.get("ls_annotation_id") == 777] == []
    assert '"ls_annotation_id": 777' in (root / SUITE_HISTORY_FILE).read_text()
    for bad in ([{"id": [1]}], "777", [], None):
        r = client.post("/webhook", json={"action": "ANNOTATIONS_DELETED", "annotations": bad})
        assert r.status_code == 422
    _finite_and_loads(root)


def test_a_suite_broken_by_hand_answers_409_not_500(pool):
    path = pool["suite"].root / "annotations.jsonl"
    path.write_text(path.read_text() + '{"continuation_id": "c1", "annotator_id": "x", "outcome": "success", '
                                       '"marker_s": NaN}\n')
    r = pool["client"].post("/webhook", json=webhook_payload(pool["suite"], "c1"))
    assert r.status_code == 409 and "does not load" in r.json()["detail"] and "marker_s" in r.json()["detail"]
