"""``autorater suite import --from-labelstudio-project``: a suite fetched from a Label Studio project through its API
(label-studio-sdk), here against a real HTTP server on loopback that answers as Label Studio does: the project
(``GET /api/projects/ID/``), its JSON export of every task (``GET /api/projects/ID/export``), token authentication
(a legacy token, or a personal access token traded at ``/api/token/refresh/``), DRF's error bodies. The live test
against a real Label Studio is tests/test_labelstudio_live.py (slow)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import jwt
import pytest

from autorater.app import cli
from autorater.data.suite import Suite, validate_suite
from autorater.data.versions import scenario_version
from autorater.serving.labelstudio.formats import annotations_to_export, labeling_config
from autorater.serving.labelstudio.project import fetch_project_export, video_frame_rate
from tiny_suites import FPS, N_FRAMES, tiny_suite

LEGACY = "0123456789abcdef0123456789abcdef01234567"
SECRET = "not-a-real-secret-only-for-this-test-server"
PROJECT = 7


def personal_token() -> str:
    """A personal access token: a JWT refresh token, as Label Studio issues them (Account & Settings)."""
    return jwt.encode({"token_type": "refresh", "exp": int(time.time()) + 3600, "jti": "r1", "user_id": 1}, SECRET,
                      algorithm="HS256")


def full_export(suite) -> list[dict]:
    """A project's JSON export with every field Label Studio's export serializer writes, an unlabelled task included
    (``download_all_tasks=true``)."""
    tasks = [{"data": {"continuation_id": c.continuation_id, "video": f"/data/local-files/?d=suite/{c.video}",
                       "instruction": suite.instruction_of(c.continuation_id), "fps": FPS, "frames": N_FRAMES,
                       "scenario_id": c.scenario_id, "agent_id": c.agent_id,
                       "category": suite.scenario_of(c.continuation_id).category,
                       "takeover_s": suite.takeover_of(c.continuation_id)}} for c in suite.continuations]
    labelled = [a for a in suite.annotations if a.marker_s is not None and a.continuation_id != "c4"]
    export = annotations_to_export(tasks, labelled, start_id=101)
    for task in export:
        task.update({"meta": {}, "created_at": "2026-11-20T09:00:00.000000Z", "updated_at": "2026-11-23T12:00:00Z",
                     "inner_id": task["id"], "total_annotations": len(task["annotations"]), "cancelled_annotations": 0,
                     "total_predictions": 0, "comment_count": 0, "unresolved_comment_count": 0,
                     "last_comment_updated_at": None, "project": PROJECT, "updated_by": 1, "file_upload": None,
                     "drafts": [], "comment_authors": []})
        for ann in task["annotations"]:
            who = ann["completed_by"]
            ann.update({"completed_by": {"id": 10 + int(who[1:]), "email": f"{who}@lab.org", "first_name": "",
                                         "last_name": ""},
                        "draft_created_at": None, "prediction": {}, "result_count": len(ann["result"]),
                        "unique_id": f"u-{ann['id']}", "import_id": None, "last_action": None, "project": PROJECT,
                        "updated_by": 1, "parent_prediction": None, "parent_annotation": None,
                        "last_created_by": None})
    return export


def project_json(label_config: str) -> dict:
    return {"id": PROJECT, "title": "agent evaluation v2", "description": "", "label_config": label_config,
            "expert_instruction": "", "show_instruction": False, "show_skip_button": True,
            "enable_empty_annotation": True, "show_annotation_history": False, "organization": 1, "color": "#FFFFFF",
            "maximum_annotations": 1, "is_published": False, "model_version": "", "is_draft": False,
            "created_by": {"id": 1, "first_name": "", "last_name": "", "email": "lead@lab.org", "avatar": None},
            "created_at": "2026-11-20T09:00:00.000000Z", "min_annotations_to_start_training": 0,
            "start_training_on_annotation_update": False, "show_collab_predictions": True,
            "num_tasks_with_annotations": 3, "task_number": 4, "useful_annotation_number": 8,
            "ground_truth_number": 0, "skipped_annotations_number": 0, "total_annotations_number": 8,
            "total_predictions_number": 0, "sampling": "Sequential sampling", "show_ground_truth_first": False,
            "show_overlap_first": False, "overlap_cohort_percentage": 100, "task_data_login": None,
            "task_data_password": None, "control_weights": {}, "parsed_label_config": {},
            "evaluate_predictions_automatically": False, "config_has_control_tags": True,
            "skip_queue": "REQUEUE_FOR_ME", "reveal_preannotations_interactively": False,
            "pinned_at": None, "finished_task_number": 3, "queue_total": 4, "queue_done": 3}


class FakeLabelStudio(BaseHTTPRequestHandler):
    """Label Studio's answers to the calls the import makes; every request is recorded on the server."""

    def log_message(self, *args):  # quiet
        pass

    def reply(self, status: int, body) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def authorised(self) -> bool:
        auth = self.headers.get("Authorization", "")
        if auth == f"Token {LEGACY}":
            return True
        if auth.startswith("Bearer "):
            try:
                claims = jwt.decode(auth[7:], SECRET, algorithms=["HS256"])
            except jwt.InvalidTokenError:
                return False
            return claims.get("token_type") == "access"
        return False

    def do_POST(self):
        self.server.requests.append(("POST", self.path))
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if self.path.rstrip("/") == "/api/token/refresh":
            try:
                jwt.decode(body.get("refresh", ""), SECRET, algorithms=["HS256"])
            except jwt.InvalidTokenError:
                return self.reply(401, {"detail": "Token is invalid or expired", "code": "token_not_valid"})
            access = jwt.encode({"token_type": "access", "exp": int(time.time()) + 300, "user_id": 1}, SECRET,
                                algorithm="HS256")
            return self.reply(200, {"access": access})
        self.reply(404, {"detail": "Not found."})

    def do_GET(self):
        url = urlparse(self.path)
        self.server.requests.append(("GET", self.path))
        if not self.authorised():
            return self.reply(401, {"detail": "Authentication credentials were not provided."})
        if url.path == f"/api/projects/{PROJECT}/":
            return self.reply(200, project_json(self.server.label_config))
        if url.path == f"/api/projects/{PROJECT}/export":
            query = parse_qs(url.query)
            assert query.get("export_type") == ["JSON"] and query.get("download_all_tasks") == ["true"], query
            return self.reply(200, self.server.export)
        self.reply(404, {"detail": "Not found."})


@pytest.fixture
def label_studio(tmp_path):
    media = tmp_path / "media"
    source = tiny_suite(media / "suite")
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeLabelStudio)
    server.export, server.label_config, server.requests = full_export(source), labeling_config(), []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield {"url": f"http://127.0.0.1:{server.server_port}", "server": server, "media": media, "source": source}
    finally:
        server.shutdown()
        server.server_close()


def _import(ls, out, token=LEGACY, project=PROJECT, *more):
    return cli.main(["suite", "import", "--from-labelstudio-project", str(project), "--url", ls["url"], "--token",
                     token, "--media-root", str(ls["media"]), "--out", str(out), "--version", "v2", *more])


@pytest.mark.parametrize("token", [LEGACY, "personal"])
def test_a_project_imports_through_its_api_with_either_kind_of_token(label_studio, tmp_path, token, capsys):
    token = personal_token() if token == "personal" else token
    out = tmp_path / "from-project"
    assert _import(label_studio, out, token) == 0
    text = capsys.readouterr().out
    assert f"Label Studio project {PROJECT} ('agent evaluation v2', 4 task(s))" in text and "OK:" in text
    suite = Suite.load(out)
    exported = [a for task in label_studio["server"].export for a in task["annotations"]]
    assert len(suite.annotations) == len(exported) == 8  # every annotation kept
    assert [c.continuation_id for c in suite.continuations] == ["c1", "c2", "c3", "c4"]  # the unlabelled one too
    assert sorted(a.extra["ls_annotation_id"] for a in suite.annotations) == sorted(a["id"] for a in exported)
    assert {a.annotator_id for a in suite.annotations} == {"ls-h1@lab.org", "ls-h2@lab.org", "ls-h3@lab.org"}
    assert all(scenario_version(s.tags) == "v2" for s in suite.scenarios)  # the version they came in
    assert suite.info.source["imported_from"] == f"{label_studio['url']}/projects/{PROJECT}/"
    assert json.loads((out / "labelstudio" / f"project-{PROJECT}-export.json").read_text()) == \
        label_studio["server"].export
    assert validate_suite(out) == []
    if token != LEGACY:
        assert ("POST", "/api/token/refresh/") in label_studio["server"].requests


def test_importing_the_project_again_adds_nothing_and_keeps_the_version_tags(label_studio, tmp_path, capsys):
    out = tmp_path / "grown"
    assert _import(label_studio, out) == 0
    before = (out / "scenarios.jsonl").read_text()
    assert _import(label_studio, out) == 0
    assert "imported 0 annotation(s)" in capsys.readouterr().out
    assert (out / "scenarios.jsonl").read_text() == before


def test_the_projects_own_frame_rate_reads_its_timeline(label_studio, tmp_path):
    config = labeling_config().replace('frameRate="$fps"', 'frameRate="4"')
    assert video_frame_rate(config) == 4.0 and video_frame_rate(labeling_config()) is None
    label_studio["server"].label_config = config
    for task in label_studio["server"].export:
        task["data"].pop("fps")
    assert _import(label_studio, tmp_path / "at-4-fps") == 0
    frame_of = {a["id"]: a["result"][0]["value"]["ranges"][0]["start"]
                for t in label_studio["server"].export for a in t["annotations"]}
    for a in Suite.load(tmp_path / "at-4-fps").annotations:  # frame f (from 1) is shown at (f - 1) / 4 s
        assert a.marker_s == pytest.approx((frame_of[a.extra["ls_annotation_id"]] - 1) / 4)


@pytest.mark.parametrize("token, project, says", [
    ("wrong-token", PROJECT, "answered 401.*Access Token"),
    (LEGACY, 999, "answered 404.*existing project"),
])
def test_a_refusal_says_what_label_studio_answered_and_the_fix(label_studio, tmp_path, capsys, token, project, says):
    assert _import(label_studio, tmp_path / "no", token, project) == 2
    import re

    assert re.search(says, capsys.readouterr().err)
    assert not (tmp_path / "no").exists()


def test_an_unreachable_label_studio_and_a_missing_token_are_clear_errors(tmp_path, monkeypatch, capsys):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ValueError, match="cannot reach Label Studio.*fix: start it"):
        fetch_project_export(PROJECT, f"http://127.0.0.1:{port}", LEGACY, tmp_path / "x.json")
    monkeypatch.delenv("LABEL_STUDIO_API_KEY", raising=False)
    assert cli.main(["suite", "import", "--from-labelstudio-project", "7", "--media-root", str(tmp_path), "--out",
                     str(tmp_path / "s")]) == 2
    assert "--token" in capsys.readouterr().err
