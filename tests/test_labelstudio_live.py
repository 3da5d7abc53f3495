"""A real Label Studio on loopback against ``autorater serve`` (slow; skipped unless Label Studio is installed).

Label Studio pins many packages, so it lives in its own environment, never the project's:

    python -m venv ~/ls-venv && ~/ls-venv/bin/pip install label-studio==1.23.2
    LABEL_STUDIO_BIN=~/ls-venv/bin/label-studio python -m pytest -m slow tests/test_labelstudio_live.py

The test starts Label Studio on 127.0.0.1 (1-3 minutes) and runs ``autorater labelstudio setup`` twice (the second
run changes nothing): the project with the product's labelling config, the webhook to ``/webhook``, ``autorater
serve`` as its ML backend (basic auth with the token as the password, as Label Studio's connector sends it), a
local-files storage that serves the videos, and the tasks of ``autorater label``. It asks for predictions, checks
that an annotation made through Label Studio's API, then corrected, reaches the pool suite (the correction
replacing the first label, which is kept in the history file), that the project's JSON export imports with
``autorater suite import --from-labelstudio`` with every annotation kept (and the project itself, through its API, with
``--from-labelstudio-project``), and that deleting the annotation there
removes it from the suite.

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

from autorater.app import cli
from autorater.data.suite import Suite
from autorater.data.versions import scenario_version
from autorater.serving.labelling.label import label_suite
from autorater.serving.labelstudio.formats import label_interface, labeling_config, marker_region
from hardening_env import make_hardening_env, suite_rows
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
            [sys.executable, "-c", "import sys; from autorater.app.cli import main; sys.exit(main(sys.argv[1:]))",
             "serve",
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


def test_setup_then_predictions_annotations_and_an_export_round_trip(live, capsys):
    import httpx

    ls = httpx.Client(base_url=live["ls"], headers={"Authorization": f"Token {LS_TOKEN}"}, timeout=120)
    labels = live["root"] / "labels"
    label_suite(live["model"], live["suite"], labels, audit_share=1.0, video_url_prefix="/data/local-files/?d=suite/")
    tasks_file = labels / "labelstudio" / "tasks.json"
    tasks = json.loads(tasks_file.read_text())

    # `autorater labelstudio setup`: the project, the webhook, the ML backend, the videos' storage and the tasks.
    setup = ["labelstudio", "setup", "--url", live["ls"], "--token", LS_TOKEN, "--serve-url", live["serve"],
             "--serve-token", TOKEN, "--local-files", str(live["suite"].root), "--tasks", str(tasks_file)]
    assert cli.main(setup) == 0
    first = capsys.readouterr().out
    assert "project 'autorater'" in first and "created" in first and "connected (Connected)" in first
    assert "registered for ANNOTATION_CREATED" in first and f"{len(tasks)} imported, 0 already" in first
    assert cli.main(setup) == 0  # idempotent: nothing new, nothing twice
    second = capsys.readouterr().out.splitlines()
    assert all(line.endswith("unchanged") or "unchanged (Connected)" in line for line in second[:-1]), second
    assert second[-1].endswith(f"0 imported, {len(tasks)} already in the project")
    (project,) = [p for p in ls.get("/api/projects").json()["results"] if p["title"] == "autorater"]
    pid = project["id"]
    assert project["label_config"].strip() == labeling_config().strip()
    (backend,) = ls.get("/api/ml", params={"project": pid}).json()
    assert backend["readable_state"] == "Connected" and backend["auth_method"] == "BASIC_AUTH"
    (hook,) = ls.get("/api/webhooks", params={"project": pid}).json()
    assert hook["url"] == f"{live['serve']}/webhook" and hook["headers"] == {"Authorization": f"Bearer {TOKEN}"}
    ls_tasks = ls.get("/api/tasks", params={"project": pid, "page_size": 100}).json()["tasks"]
    assert sorted(t["data"]["continuation_id"] for t in ls_tasks) == sorted(t["data"]["continuation_id"] for t in tasks)
    video = ls.get(ls_tasks[0]["data"]["video"])  # Label Studio serves the video from the local-files storage
    assert video.status_code == 200 and video.content == (live["suite"].root / live["suite"].get(
        ls_tasks[0]["data"]["continuation_id"]).video).read_bytes()

    # Predictions from autorater serve, through Label Studio's ML connection (basic auth, the token as password).
    r = ls.post("/api/dm/actions", params={"id": "retrieve_tasks_predictions", "project": pid},
                json={"selectedItems": {"all": True, "excluded": []}})
    assert r.status_code == 200, r.text
    predictions = [p for p in ls.get("/api/predictions", params={"project": pid}).json()
                   if p["model_version"] == backend["model_version"]]
    li = label_interface()
    assert len({p["task"] for p in predictions}) == len(tasks)
    for p in predictions:
        assert li.validate_prediction({"result": p["result"], "score": p["score"]}, return_errors=True) == []

    # An annotation made through the API reaches the pool suite through the webhook; then corrected, then deleted.
    task = ls_tasks[0]
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

    # The project's JSON export imports as a suite with every annotation kept.
    other = ls_tasks[1]
    r = ls.post(f"/api/tasks/{other['id']}/annotations", json={"result": [region], "was_cancelled": False,
                                                                "ground_truth": True})
    assert r.status_code == 201, r.text
    export = ls.get(f"/api/projects/{pid}/export", params={"exportType": "JSON"}).json()
    (live["root"] / "export.json").write_text(json.dumps(export))
    out = live["root"] / "from-label-studio"
    assert cli.main(["suite", "import", "--from-labelstudio", str(live["root"] / "export.json"), "--media-root",
                     str(live["media"]), "--out", str(out)]) == 0
    imported = Suite.load(out)
    exported = [a for t in export for a in t["annotations"] if not a["was_cancelled"]]
    assert len(imported.annotations) == len(exported) == 2
    assert {(a.continuation_id, a.outcome) for a in imported.annotations} == \
        {(cid, "success"), (other["data"]["continuation_id"], "failure")}
    assert [r.continuation_id for r in imported.references] == [other["data"]["continuation_id"]]
    assert len(imported.continuations) == len(export) == 2  # Label Studio exports the labelled tasks by default

    # The same project straight through its API: every task, labelled or not, and every annotation.
    via_api = live["root"] / "from-label-studio-project"
    assert cli.main(["suite", "import", "--from-labelstudio-project", str(pid), "--url", live["ls"], "--token",
                     LS_TOKEN, "--media-root", str(live["media"]), "--out", str(via_api), "--version", "v2"]) == 0
    fetched = Suite.load(via_api)
    assert len(fetched.continuations) == len(ls_tasks) and len(fetched.annotations) == 2
    assert {(a.continuation_id, a.outcome) for a in fetched.annotations} == \
        {(a.continuation_id, a.outcome) for a in imported.annotations}
    assert [r.continuation_id for r in fetched.references] == [other["data"]["continuation_id"]]
    assert all(scenario_version(s.tags) == "v2" for s in fetched.scenarios)
    assert (via_api / "labelstudio" / f"project-{pid}-export.json").is_file()

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
