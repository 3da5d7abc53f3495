"""Issue 50: the ways a user's data comes in (a Label Studio export or project, a table of videos, ``suite tag
--where``, ``suite diff``, ``suite propose``) cannot write outside their folders or leave a suite half-written. Each
finding of the issue is a test here; the property-based fuzz is tests/test_fuzz_imports.py."""

from __future__ import annotations

import csv
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from autorater.app import cli
from autorater.data.files import CHANGE_FILE, FolderChange, recover_folder, write_text_atomic
from autorater.data.imports.common import ImportReport, format_report
from autorater.data.imports.table import import_table
from autorater.data.paths import PathError, check_name, is_name, printable, resolve_under
from autorater.data.suite import Problem, Suite, validate_suite
from autorater.serving.labelstudio.client import public_url, read_token
from autorater.serving.labelstudio.formats import annotations_to_export
from autorater.serving.labelstudio.imports import import_labelstudio
from tiny_suites import FPS, N_FRAMES, tiny_suite


def files_under(root: Path, skip: Path | None = None) -> dict[str, bytes]:
    """Every file under ``root`` (but under ``skip``) with its bytes: what a test compares before and after."""
    out = {}
    for p in sorted(root.rglob("*")):
        if skip is not None and (p == skip or skip in p.parents):
            continue
        if p.is_file() and not p.is_symlink():
            out[str(p.relative_to(root))] = p.read_bytes()
    return out


def temps(root: Path) -> list[str]:
    return [p.name for p in root.rglob("*") if p.name.endswith((".tmp", ".part")) or p.name == CHANGE_FILE]


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A media root holding a tiny suite's four videos (``suite/videos/c1.mp4`` ...)."""
    root = tmp_path_factory.mktemp("media")
    return root, tiny_suite(root / "suite")


def export(suite, **changes) -> list[dict]:
    """A Label Studio export of the tiny suite's tasks; ``changes``: task index -> data fields to set."""
    tasks = [{"data": {"continuation_id": c.continuation_id, "video": f"/data/local-files/?d=suite/{c.video}",
                       "instruction": suite.instruction_of(c.continuation_id), "fps": FPS, "frames": N_FRAMES,
                       "scenario_id": c.scenario_id, "agent_id": c.agent_id}} for c in suite.continuations]
    out = annotations_to_export(tasks, [a for a in suite.annotations if a.marker_s is not None])
    for index, data in changes.items():
        out[int(index[1:])]["data"].update(data)
    return out


def write_table(path: Path, rows: list[dict]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


# ----------------------------------------------------------------------------------------------
# Ids are names; paths stay under their root


@pytest.mark.parametrize("bad", ["../../escaped", "/tmp/absolute-escape", "../../../home/u/", ".hidden", "a/b",
                                 "x" * 200])
def test_an_id_that_is_a_path_writes_nothing_outside_the_suite_from_an_export(source, tmp_path, bad):
    media, suite = source
    (tmp_path / "export.json").write_text(json.dumps(export(suite, t0={"continuation_id": bad})))
    out = tmp_path / "deep" / "er" / "suite"
    before = files_under(tmp_path, skip=out)
    report = import_labelstudio(tmp_path / "export.json", media, out)
    assert files_under(tmp_path, skip=out) == before  # nothing written beside or above the suite
    assert not Path("/tmp/absolute-escape.mp4").exists()
    assert any("is not a name" in str(p) for p in report.problems)
    assert report.ok and validate_suite(out) == []  # the rest imported
    assert {c.continuation_id for c in Suite.load(out).continuations} == {"c2", "c3", "c4"}


@pytest.mark.parametrize("bad", ["../../escaped", "/tmp/absolute-escape"])
def test_an_id_that_is_a_path_writes_nothing_outside_the_suite_from_a_table(source, tmp_path, bad):
    media, _ = source
    table = write_table(tmp_path / "t.csv", [
        {"video": "suite/videos/c1.mp4", "instruction": "go", "agent": "a", "continuation_id": bad},
        {"video": "suite/videos/c2.mp4", "instruction": "go", "agent": "a", "continuation_id": "ok-1"}])
    out = tmp_path / "a" / "suite"
    before = files_under(tmp_path, skip=out)
    report = import_table(table, media, out)
    assert files_under(tmp_path, skip=out) == before
    assert [p.line for p in report.problems] == [2] and "is not a name" in str(report.problems[0])
    assert report.ok and [c.continuation_id for c in Suite.load(out).continuations] == ["ok-1"]


def test_a_table_video_outside_the_videos_folder_is_refused(source, tmp_path):
    media, _ = source
    table = write_table(tmp_path / "t.csv", [
        {"video": "../elsewhere/c1.mp4", "instruction": "go", "agent": "a"},
        {"video": str(media / "suite/videos/c2.mp4"), "instruction": "go", "agent": "a"},  # absolute, inside: taken
        {"video": str(media / "suite/videos/c3.mp4"), "instruction": "go", "agent": "a"}])
    report = import_table(table, media / "suite", tmp_path / "s")  # the videos folder is media/suite
    assert [p.line for p in report.problems] == [2] and "outside its folder" in str(report.problems[0])
    assert report.ok and len(Suite.load(tmp_path / "s").continuations) == 2


def test_name_and_path_helpers():
    assert is_name("c000913") and is_name("ls-12") and is_name("a.b_c-d")
    for bad in ["", ".x", "..", "a/b", "a\\b", "a b", "x" * 129, "\ud800", None, 3]:
        assert not is_name(bad)
    with pytest.raises(ValueError, match="not a name.*fix"):
        check_name("../x", "continuation_id")
    with pytest.raises(PathError) as err:
        resolve_under("/tmp", "../etc/passwd")
    assert err.value.kind == "outside"
    assert printable("a\x1b[2Jb\ud800\n") == "a\\x1b[2Jb\\ud800\\n"


# ----------------------------------------------------------------------------------------------
# Text checked before anything is written; a suite changes all at once


def test_a_lone_surrogate_is_a_listed_problem_and_the_rest_imports(source, tmp_path):
    media, suite = source
    path = tmp_path / "export.json"
    path.write_text(json.dumps(export(suite, t1={"instruction": "go \ud800"})))  # json writes it as its escape
    report = import_labelstudio(path, media, tmp_path / "new")
    assert any("lone surrogate" in str(p) for p in report.problems)
    assert report.ok and validate_suite(tmp_path / "new") == [] and not temps(tmp_path / "new")
    assert "c2" not in Suite.load(tmp_path / "new").continuation_by_id
    # into an existing suite: the same, and the suite keeps every old record
    existing = tmp_path / "existing"
    path.write_text(json.dumps(export(suite)[2:]))
    assert import_labelstudio(path, media, existing).ok
    before = Suite.load(existing)
    path.write_text(json.dumps(export(suite, t1={"instruction": "go \ud800"})))
    report = import_labelstudio(path, media, existing)
    after = Suite.load(existing)
    assert report.ok and validate_suite(existing) == [] and not temps(existing)
    assert {c.continuation_id for c in after.continuations} == {"c1", "c3", "c4"}
    assert {c.continuation_id for c in before.continuations} <= {c.continuation_id for c in after.continuations}


def test_a_suite_write_that_fails_half_way_leaves_the_suite_as_it_was(tmp_path):
    suite = tiny_suite(tmp_path / "s", videos=False)
    before = files_under(tmp_path / "s")
    suite.scenarios[1].instruction = "go \ud800"  # scenarios.jsonl is the second file written
    with pytest.raises(UnicodeEncodeError):
        suite.write()
    assert files_under(tmp_path / "s") == before and not temps(tmp_path / "s")


def test_a_change_is_finished_by_the_next_open_after_a_crash_after_its_journal(tmp_path):
    suite = tiny_suite(tmp_path / "s", videos=False)
    change = FolderChange(tmp_path / "s")
    suite.scenarios[0].instruction = "new instruction"
    suite.annotations, suite.references = [], []
    suite.write(change=change)
    applied = []
    import autorater.data.files.change as files

    real = files._apply
    files._apply = lambda root, staged: applied.append(staged)  # "crash" right after the journal is written
    try:
        change.commit()
    finally:
        files._apply = real
    assert applied and (tmp_path / "s" / CHANGE_FILE).exists()
    loaded = Suite.load(tmp_path / "s")  # the reader finishes it (no writer holds the lock)
    assert loaded.scenarios[0].instruction == "new instruction" and not loaded.annotations
    assert not temps(tmp_path / "s")


def test_stray_temps_of_a_change_that_never_happened_are_ignored_then_removed(tmp_path):
    tiny_suite(tmp_path / "s", videos=False)
    before = Suite.load(tmp_path / "s")
    (tmp_path / "s" / ".scenarios.jsonl.0123456789abcdef.part").write_text("garbage")
    (tmp_path / "s" / "scenarios.jsonl.tmp").write_text("garbage")
    assert Suite.load(tmp_path / "s").scenarios == before.scenarios
    assert recover_folder(tmp_path / "s") and not temps(tmp_path / "s")


def test_a_planted_symlink_at_a_temp_name_is_never_written_through(tmp_path):
    target = tmp_path / "victim.txt"
    target.write_text("untouched")
    folder = tmp_path / "shared"
    folder.mkdir()
    (folder / "scenarios.jsonl.tmp").symlink_to(target)  # the name the old writer used
    write_text_atomic(folder / "scenarios.jsonl", "{}\n")
    assert target.read_text() == "untouched" and (folder / "scenarios.jsonl").read_text() == "{}\n"


WORKER = Path(__file__).with_name("kill_worker.py")
KILLS = int(os.environ.get("AUTORATER_KILLS", "20"))


def _killed_at_random(args: list[str], check, kills: int, seed: int) -> None:
    """Start a writer (tests/kill_worker.py), kill -9 it at a random moment of its writing, ``check()`` the suite;
    ``kills`` times. The next two writers start (import their modules) while the one before writes, so a kill costs
    about its random delay and the check, not a Python start."""
    rng = random.Random(seed)

    def spawn():
        return subprocess.Popen([sys.executable, str(WORKER), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True)

    upcoming = [spawn() for _ in range(min(2, kills))]
    for k in range(kills):
        writer = upcoming.pop(0)
        assert writer.stdout.readline().strip() == "ready"
        if k + len(upcoming) + 1 < kills:
            upcoming.append(spawn())
        writer.stdin.write("go\n")
        writer.stdin.flush()
        time.sleep(rng.uniform(0.05, 0.5))
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        writer.stdin.close()
        writer.stdout.close()
        check()


def test_an_import_killed_at_random_points_leaves_the_old_or_the_new_suite(source, tmp_path):
    from kill_worker import row

    media, _ = source
    out = tmp_path / "s"
    tables = tmp_path / "tables"
    tables.mkdir()
    assert import_table(write_table(tmp_path / "t0.csv", [row(0)]), media, out).ok
    sizes = []

    def check():
        suite = Suite.load(out)  # loads: the old content or the new (a change the kill cut short is finished)
        ids = [c.continuation_id for c in suite.continuations]
        assert ids == [row(i)["continuation_id"] for i in range(len(ids))]  # a whole number of imports
        assert len(suite.scenarios) == len(ids) and all((out / c.video).is_file() for c in suite.continuations)
        assert validate_suite(out, check_videos=False) == []
        sizes.append(len(ids))

    _killed_at_random(["import", str(out), str(media), str(tables)], check, KILLS, seed=1)
    assert sizes[-1] > 1  # the writers did write between kills
    assert import_table(write_table(tmp_path / "t1.csv", [row(i) for i in range(sizes[-1] + 1)]), media, out).ok
    assert not temps(out)  # the next writer removes what a killed one left


def test_a_tag_killed_at_random_points_leaves_the_old_or_the_new_suite(tmp_path):
    from autorater.serving.analysis.tags import tag_suite

    tiny_suite(tmp_path / "s", videos=False)

    def check():
        suite = Suite.load(tmp_path / "s")
        assert len({"hot" in s.tags for s in suite.scenarios}) == 1  # one write tags both, or neither

    _killed_at_random(["tag", str(tmp_path / "s")], check, max(5, KILLS // 3), seed=2)
    tag_suite(tmp_path / "s", "cold", where="category == goto")
    assert not temps(tmp_path / "s")


# ----------------------------------------------------------------------------------------------
# Symlinks, FIFOs and devices


def test_a_symlink_in_the_media_root_leading_out_is_refused(source, tmp_path):
    media, suite = source
    secret = tmp_path / "elsewhere" / "secret.mp4"
    secret.parent.mkdir()
    secret.write_bytes((media / "suite/videos/c1.mp4").read_bytes())
    root = tmp_path / "root"
    (root / "suite" / "videos").mkdir(parents=True)
    for c in suite.continuations[1:]:
        (root / "suite" / c.video).symlink_to(media / "suite" / c.video)  # links that lead out: all refused
    (root / "suite" / "videos" / "c1.mp4").symlink_to(secret)
    inside = root / "suite" / "videos" / "real.mp4"
    inside.write_bytes(secret.read_bytes())
    (root / "suite" / "videos" / "c4.mp4").unlink()
    (root / "suite" / "videos" / "c4.mp4").symlink_to("real.mp4")  # a link that stays inside: fine
    (tmp_path / "export.json").write_text(json.dumps(export(suite)))
    report = import_labelstudio(tmp_path / "export.json", root, tmp_path / "out")
    refused = [str(p) for p in report.problems if "leads outside" in str(p)]
    assert {r.split(",")[0] for r in refused} == {"export.json: task 1", "export.json: task 2", "export.json: task 3"}
    assert str(secret) not in "".join(refused)
    assert [c.continuation_id for c in Suite.load(tmp_path / "out").continuations] == ["c4"]


def test_a_fifo_is_never_opened_by_an_import_diff_or_propose(source, tmp_path):
    from autorater.data.diff import diff_suites

    media, suite = source
    root = tmp_path / "root"
    (root / "suite" / "videos").mkdir(parents=True)
    os.mkfifo(root / "suite" / "videos" / "c1.mp4")
    (tmp_path / "export.json").write_text(json.dumps(export(suite)[:1]))
    report = import_labelstudio(tmp_path / "export.json", root, tmp_path / "out")
    assert "not a regular file" in str(report.problems)
    old = tiny_suite(tmp_path / "old", videos=False)
    new = tiny_suite(tmp_path / "new", videos=False)
    (tmp_path / "old" / "videos").mkdir(exist_ok=True)
    os.mkfifo(tmp_path / "old" / "videos" / "c1.mp4")
    (tmp_path / "new" / "videos").mkdir(exist_ok=True)
    (tmp_path / "new" / "videos" / "c1.mp4").symlink_to("/dev/zero")
    start = time.monotonic()
    diff = diff_suites(old, new)  # neither the FIFO nor /dev/zero is read: this returns at once
    assert time.monotonic() - start < 10
    assert diff.continuations_changed["c1"]["video"]


def test_propose_refuses_a_pool_video_that_leads_out(tmp_path, monkeypatch):
    import autorater.serving.analysis.propose as propose

    pool = tiny_suite(tmp_path / "pool")
    outside = tmp_path / "secret.mp4"
    outside.write_bytes((tmp_path / "pool" / "videos" / "c1.mp4").read_bytes())
    (tmp_path / "pool" / "videos" / "c1.mp4").unlink()
    (tmp_path / "pool" / "videos" / "c1.mp4").symlink_to(outside)
    chosen = [propose.Candidate("s1", "goto", 0.0, [-1.0, 1.0], {"good": 0.5})]
    with pytest.raises(PathError, match="leads outside"):
        propose._write_draft(pool, chosen, tmp_path / "draft", "v2", {"predicted_by": "test"})
    assert not (tmp_path / "draft").exists() or not [p for p in (tmp_path / "draft").rglob("*") if p.is_file()
                                                      and p.name != ".lock"]


@pytest.mark.parametrize("line, says", [
    ('{"continuation_id": "c1", "p_success": 1e400}', "line|:2: p_success"),
    ('{"continuation_id": "c1", "p_success": NaN}', ":2: not a JSON line"),
    ('{"continuation_id": "c1", "p_success": 1.5}', ":2: p_success 1.5"),
    ('[1, 2]', ":2: expected a JSON object"),
    ('"text"', ":2: expected a JSON object"),
])
def test_propose_refuses_bad_predictions_naming_the_line(tmp_path, line, says):
    from autorater.serving.analysis.propose import read_predictions

    path = tmp_path / "p.jsonl"
    path.write_text('{"continuation_id": "c0", "p_success": 0.5}\n' + line + "\n")
    with pytest.raises(ValueError, match=says.split("|")[-1]):
        read_predictions(path)


# ----------------------------------------------------------------------------------------------
# Bounded parsers, numeric options


def test_a_170_deep_where_is_a_one_line_error_not_a_traceback(tmp_path, capsys):
    tiny_suite(tmp_path / "s", videos=False)
    expression = "(" * 170 + 'category == "goto"' + ")" * 170
    assert len(expression) < 2000
    assert cli.main(["suite", "tag", str(tmp_path / "s"), "--tag", "x", "--where", expression]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "nested more than" in err and len(err.strip().splitlines()) <= 3
    assert cli.main(["suite", "tag", str(tmp_path / "s"), "--tag", "x", "--where", "not " * 400 + "tags has a"]) == 2


def test_a_deeply_nested_export_is_a_one_line_error(source, tmp_path, capsys):
    media, _ = source
    (tmp_path / "export.json").write_text("[" * 100_000)
    assert cli.main(["suite", "import", "--from-labelstudio", str(tmp_path / "export.json"), "--media-root",
                     str(media), "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "nested too deeply" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "s").exists()


def test_the_label_configs_frame_rate_is_read_in_linear_time():
    from autorater.serving.labelstudio.project import video_frame_rate

    def timed(config: str) -> float:
        start = time.perf_counter()
        video_frame_rate(config)
        return time.perf_counter() - start

    hostile = "<View>" + "<Video " * 150_000  # 1 MB: the old regex took tens of minutes
    valid = "<View>" + '<Text name="t" value="$x"/>' * 38_000 + '<Video name="v" frameRate="12.5"/></View>'
    assert len(hostile) > 1_000_000 and len(valid) > 1_000_000
    assert video_frame_rate(valid) == 12.5 and video_frame_rate(hostile) is None
    small, large = min(timed(hostile[:100_000]) for _ in range(3)), min(timed(hostile) for _ in range(3))
    assert large < 1.0 and large < 40 * max(small, 1e-4)  # about 10x the time for 10x the text, never 100x
    assert min(timed(valid) for _ in range(3)) < 1.0
    assert video_frame_rate('<!DOCTYPE x [<!ENTITY a "aaaa">]><View><Video frameRate="&a;"/></View>') is None


@pytest.mark.parametrize("rate", ["-1", "0", "nan", "inf", "1e400", "abc"])
def test_a_frame_rate_out_of_range_is_refused(source, tmp_path, capsys, rate):
    media, suite = source
    (tmp_path / "export.json").write_text(json.dumps(export(suite)))
    with pytest.raises(SystemExit) as exited:
        cli.main(["suite", "import", "--from-labelstudio", str(tmp_path / "export.json"), "--media-root", str(media),
                  "--out", str(tmp_path / "s"), "--frame-rate", rate])
    assert exited.value.code == 2 and "--frame-rate" in capsys.readouterr().err
    with pytest.raises(ValueError, match="not a frame rate"):
        import_labelstudio(tmp_path / "export.json", media, tmp_path / "s", frame_rate=-1.0)
    assert not (tmp_path / "s").exists()


def test_probed_facts_win_over_the_tasks_data(source, tmp_path):
    media, suite = source
    (tmp_path / "export.json").write_text(json.dumps(export(suite, t0={"source_video": "/etc/shadow",
                                                                        "frames": 10 ** 9, "width": -1})))
    assert import_labelstudio(tmp_path / "export.json", media, tmp_path / "s").ok
    metadata = Suite.load(tmp_path / "s").continuation_by_id["c1"].metadata
    assert metadata["frames"] == N_FRAMES and metadata["width"] == 16
    assert metadata["source_video"].startswith("/data/local-files/")


# ----------------------------------------------------------------------------------------------
# Secrets


class _Recorder(BaseHTTPRequestHandler):
    """Server B: records every request it gets (a credential reaching it is the failure)."""

    seen: list = []

    def _any(self):
        length = int(self.headers.get("Content-Length") or 0)
        type(self).seen.append((self.command, self.path, dict(self.headers), self.rfile.read(length)))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"status": "UP", "access": "x"}')

    do_GET = do_POST = do_PATCH = _any

    def log_message(self, *args):
        pass


def _redirector(to: str):
    class Redirect(BaseHTTPRequestHandler):
        def _any(self):
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            self.send_response(307)
            self.send_header("Location", to + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = do_PATCH = _any

        def log_message(self, *args):
            pass
    return Redirect


@pytest.fixture
def two_servers():
    _Recorder.seen = []
    b = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    a = ThreadingHTTPServer(("127.0.0.1", 0), _redirector(f"http://127.0.0.1:{b.server_address[1]}"))
    for server in (a, b):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{a.server_address[1]}", _Recorder.seen
    for server in (a, b):
        server.shutdown()
        server.server_close()


def test_no_credential_follows_a_redirect_to_another_host(two_servers, tmp_path):
    import jwt

    from autorater.serving.labelstudio.project import fetch_project_export
    from autorater.serving.labelstudio.setup import setup_labelstudio

    a, seen = two_servers
    personal = jwt.encode({"token_type": "refresh", "exp": int(time.time()) + 3600, "jti": "r", "user_id": 1},
                          "k" * 32, algorithm="HS256")
    for token in (personal, "0123456789abcdef0123456789abcdef01234567"):  # a personal token is posted to refresh
        with pytest.raises(ValueError, match="another address.*token is not sent"):
            fetch_project_export(7, a, token, tmp_path / "x.json")
    with pytest.raises(ValueError, match="another address"):
        setup_labelstudio(a, "ls-token", a, serve_token="serve-secret")
    assert seen == []  # server B never got a request, so never a token
    for bad in ("file:///etc/passwd", "ftp://host/x", "localhost:8080"):
        with pytest.raises(ValueError, match="not an http"):
            setup_labelstudio("http://127.0.0.1:1", "t", bad)
        with pytest.raises(ValueError, match="not an http"):
            fetch_project_export(7, bad, "t", tmp_path / "x.json")


def test_urls_are_stored_without_credentials_and_tokens_come_from_a_file_or_the_environment(source, tmp_path):
    media, suite = source
    assert public_url("https://me:pw@ls.example:8443/projects/7/") == "https://ls.example:8443/projects/7/"
    (tmp_path / "export.json").write_text(json.dumps(export(suite)))
    import_labelstudio(tmp_path / "export.json", media, tmp_path / "s", source="http://me:pw@ls.example/projects/7/")
    assert "pw" not in (tmp_path / "s" / "suite.json").read_text()
    (tmp_path / "token").write_text("from-file\n")
    assert read_token(None, tmp_path / "token", {}) == "from-file"
    assert read_token(None, None, {"LABEL_STUDIO_API_KEY": "from-env"}) == "from-env"
    assert read_token("flag", tmp_path / "token", {"LABEL_STUDIO_API_KEY": "e"}) == "flag"


def test_task_values_are_printed_with_control_characters_escaped(tmp_path):
    report = ImportReport(out=tmp_path, source="x", problems=[Problem("export.json", None, "task \x1b[2J\x07: bad",
                                                                      "fix \x1b]0;title\x07")])
    text = format_report(report)
    assert "\x1b" not in text and "\x07" not in text and "\\x1b[2J" in text


def test_labelstudio_setup_reads_the_token_from_a_file_and_says_how_when_it_cannot(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("LABEL_STUDIO_API_KEY", raising=False)
    base = ["labelstudio", "setup", "--url", "http://127.0.0.1:9", "--serve-url", "http://127.0.0.1:9"]
    assert cli.main([*base, "--token-file", str(tmp_path / "missing")]) == 2
    assert "cannot read the token file" in capsys.readouterr().err
    assert cli.main(base) == 2
    assert "LABEL_STUDIO_API_KEY" in capsys.readouterr().err
