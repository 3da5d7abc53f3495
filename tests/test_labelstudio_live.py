"""A real Label Studio on loopback against ``autorater serve`` (slow; skipped unless Label Studio is installed).

Label Studio pins many packages, so it lives in its own environment, never the project's:

    python -m venv ~/ls-venv && ~/ls-venv/bin/pip install label-studio==1.23.2
    LABEL_STUDIO_BIN=~/ls-venv/bin/label-studio python -m pytest -m slow tests/test_labelstudio_live.py

The test starts Label Studio on 127.0.0.1 (1-3 minutes), creates a project with the product's labelling config,
imports the tasks of ``autorater label`` with their predictions, connects ``autorater serve`` as its ML backend
(basic auth with the token as the password, as Label Studio's connector sends it), asks it for predictions,
points a webhook at ``/webhook`` and checks that an annotation made through Label Studio's API, then corrected,
reaches the pool suite (the correction replacing the first label, which is kept in the history file), and that
deleting it there removes it from the suite.

Label Studio refuses ML backends and webhooks on loopback and private networks by default (SSRF protection):
the test starts it with ``ML_BLOCK_LOCAL_IP=false`` and ``USE_DEFAULT_BANNED_SUBNETS=false``, as an operator
running both on one machine must.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hardening_env import make_hardening_env, suite_rows
from serving.label import label_suite
from serving.labelstudio import label_interface, labeling_config, marker_region
from tiny_suites import FPS, N_FRAMES

pytestmark = pytest.mark.slow

LS_BIN = os.environ.get("LABEL_STUDIO_BIN") or shutil.which("label-studio") or "/work/ls-venv/bin/label-studio"
LS_TOKEN = "0123456789abcdef0123456789abcdef01234567"
TOKEN = "autorater-t0ken"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(url: str, seconds: float, proc: subprocess.Popen, log: Path, **kwargs) -> None:
    import httpx

    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited ({proc.returncode}): {log.read_text()[-2000:]}")
        try:
            if httpx.get(url, timeout=2, **kwargs).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(2)
    raise TimeoutError(f"{url} did not answer within {seconds} s: {log.read_text()[-2000:]}")


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    if not Path(LS_BIN).is_file():
        pytest.skip("Label Studio is not installed (set LABEL_STUDIO_BIN; see this module's docstring)")
    root = tmp_path_factory.mktemp("ls-live")
    env = make_hardening_env(root)
    ls_port, port = _port(), _port()
    ls_env = {**os.environ, "ML_BLOCK_LOCAL_IP": "false", "USE_DEFAULT_BANNED_SUBNETS": "false",
              "LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED": "true",
              "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT": str(env["media"]),
              "LABEL_STUDIO_BASE_DATA_DIR": str(root / "ls")}
    procs = []
    try:
        ls_log = root / "label-studio.log"
        procs.append(subprocess.Popen(
            [LS_BIN, "start", "--no-browser", "--internal-host", "127.0.0.1", "--port", str(ls_port), "--data-dir",
             str(root / "ls"), "--username", "lead@example.com", "--password", "pw-123456", "--user-token", LS_TOKEN,
             "--enable-legacy-api-token"], env=ls_env, stdout=open(ls_log, "w"), stderr=subprocess.STDOUT))
        serve_log = root / "serve.log"
        procs.append(subprocess.Popen(
            [sys.executable, "-c", "import sys; from autorater.cli import main; sys.exit(main(sys.argv[1:]))", "serve",
             "--model", str(env["model"]), "--media-root", str(env["media"]), "--suite", str(env["suite"].root),
             "--port", str(port), "--token", TOKEN], stdout=open(serve_log, "w"), stderr=subprocess.STDOUT))
        _wait(f"http://127.0.0.1:{port}/health", 120, procs[1], serve_log, auth=("ls", TOKEN))
        _wait(f"http://127.0.0.1:{ls_port}/health", 600, procs[0], ls_log)
        yield {**env, "ls": f"http://127.0.0.1:{ls_port}", "serve": f"http://127.0.0.1:{port}", "root": root}
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


def test_label_studio_gets_predictions_and_its_annotations_reach_the_suite(live):
    import httpx

    ls = httpx.Client(base_url=live["ls"], headers={"Authorization": f"Token {LS_TOKEN}"}, timeout=120)
    labels = live["root"] / "labels"
    label_suite(live["model"], live["suite"], labels, audit_share=1.0, video_url_prefix="/data/local-files/?d=suite/")
    tasks = json.loads((labels / "labelstudio" / "tasks.json").read_text())
    r = ls.post("/api/projects", json={"title": "autorater", "label_config": labeling_config()})
    assert r.status_code == 201, r.text
    pid = r.json()["id"]
    r = ls.post(f"/api/projects/{pid}/import", json=tasks)
    assert r.status_code == 201 and r.json()["task_count"] == len(tasks), r.text
    assert r.json()["prediction_count"] == sum(len(t.get("predictions", [])) for t in tasks)

    # autorater serve as the project's ML backend, with Label Studio's basic auth.
    r = ls.post("/api/ml", json={"url": live["serve"], "project": pid, "title": "autorater",
                                 "auth_method": "BASIC_AUTH", "basic_auth_user": "label-studio",
                                 "basic_auth_pass": TOKEN})
    assert r.status_code == 201 and r.json()["readable_state"] == "Connected", r.text
    model_version = r.json()["model_version"]
    r = ls.post("/api/dm/actions", params={"id": "retrieve_tasks_predictions", "project": pid},
                json={"selectedItems": {"all": True, "excluded": []}})
    assert r.status_code == 200, r.text
    predictions = [p for p in ls.get("/api/predictions", params={"project": pid}).json()
                   if p["model_version"] == model_version]
    li = label_interface()
    assert len({p["task"] for p in predictions}) == len(tasks)
    for p in predictions:
        assert li.validate_prediction({"result": p["result"], "score": p["score"]}, return_errors=True) == []

    # A webhook to /webhook with the bearer token; an annotation made through the API, then corrected.
    r = ls.post("/api/webhooks", json={"project": pid, "url": f"{live['serve']}/webhook", "send_payload": True,
                                       "send_for_all_actions": False, "actions": ["ANNOTATION_CREATED",
                                                                                  "ANNOTATION_UPDATED",
                                                                                  "ANNOTATIONS_DELETED"],
                                       "headers": {"Authorization": f"Bearer {TOKEN}"}, "is_active": True})
    assert r.status_code == 201, r.text
    task = ls.get("/api/tasks", params={"project": pid}).json()["tasks"][0]
    cid = task["data"]["continuation_id"]
    region = dict(marker_region("failure", 0.5, FPS, N_FRAMES, "m1"), origin="manual")
    r = ls.post(f"/api/tasks/{task['id']}/annotations", json={"result": [region], "was_cancelled": False})
    assert r.status_code == 201, r.text
    ann_id = r.json()["id"]
    row = _poll(live["suite"].root, ann_id, lambda row: row["outcome"] == "failure")
    assert row["continuation_id"] == cid and row["marker_s"] == pytest.approx(0.5)
    fixed = dict(marker_region("success", 0.25, FPS, N_FRAMES, "m1"), origin="manual")
    r = ls.patch(f"/api/annotations/{ann_id}", json={"result": [fixed]})
    assert r.status_code == 200, r.text
    row = _poll(live["suite"].root, ann_id, lambda row: row["outcome"] == "success")
    assert row["marker_s"] == pytest.approx(0.25)
    assert len([r for r in suite_rows(live["suite"].root) if r.get("ls_annotation_id") == ann_id]) == 1
    history = (live["suite"].root / "annotations_history.jsonl").read_text()
    assert '"failure"' in history
    assert ls.delete(f"/api/annotations/{ann_id}").status_code == 204  # deleted there: it leaves the suite
    start = time.monotonic()
    while [r for r in suite_rows(live["suite"].root) if r.get("ls_annotation_id") == ann_id]:
        assert time.monotonic() - start < 60, "the deleted annotation is still in the suite"
        time.sleep(0.5)


def _poll(suite_root: Path, ann_id: int, done, seconds: float = 60) -> dict:
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        rows = [r for r in suite_rows(suite_root) if r.get("ls_annotation_id") == ann_id]
        if rows and done(rows[0]):
            return rows[0]
        time.sleep(0.5)
    raise AssertionError(f"annotation {ann_id} did not reach {suite_root} within {seconds} s")
