"""Issue 58 (hardening, fifth pass): a suite someone hands you cannot reach outside it, concurrent writers lose
nothing, and every file the product wrote is checked when it is read back. Each finding of the issue (but the
certification ones) is a test here; the property-based fuzz of journals, labels folders and summaries is
tests/test_fuzz_folders.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autorater.app import cli
from autorater.data.files import CHANGE_FILE, FolderChange, JournalError, recover_folder
from autorater.data.imports.table import import_table
from autorater.data.suite import Suite, SuiteFormatError, validate_suite
from autorater.serving.labelling.folder import LabelsFileError, LabelsFolder
from folder_env import files_under, hand_labels
from tiny_suites import tiny_suite

CHANGE = "0123456789abcdef"
WORKER = Path(__file__).with_name("kill_worker.py")
ROUNDS = int(os.environ.get("AUTORATER_IMPORT_ROUNDS", "20"))


def write_table(path: Path, rows: list[dict]) -> Path:
    header = list(rows[0])
    path.write_text(",".join(header) + "\n" + "".join(",".join(str(r[k]) for k in header) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> Path:
    """A media root holding a tiny suite's four videos (``suite/videos/c1.mp4`` ...)."""
    root = tmp_path_factory.mktemp("media")
    tiny_suite(root / "suite")
    return root


# ----------------------------------------------------------------------------------------------
# A journal is replayed only inside its suite


@pytest.fixture
def handed(tmp_path):
    """A suite as someone may hand it over: a sub-folder ``sub`` that is a symlink to ``victim/`` outside it."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "notes.txt").write_text("untouched")
    suite_dir = tmp_path / "s"
    tiny_suite(suite_dir, videos=False)
    (suite_dir / "videos").mkdir()
    (suite_dir / "sub").symlink_to(victim)
    return suite_dir, victim


def _overwrite_through_the_link(s: Path, victim: Path) -> dict:
    (victim / f".notes.txt.{CHANGE}.part").write_text("overwritten")  # what a tarball carries behind the link
    return {"sub/notes.txt": f"sub/.notes.txt.{CHANGE}.part"}


def _temp_elsewhere(s: Path, victim: Path) -> dict:
    (s / f".x.{CHANGE}.part").write_text("overwritten")
    return {"sub/notes.txt": f".x.{CHANGE}.part"}  # the temp of issue 50's journals could be anywhere in the suite


def _a_temp_that_is_a_symlink(s: Path, victim: Path) -> dict:
    (s / f".scenarios.jsonl.{CHANGE}.part").symlink_to(victim / "notes.txt")  # would make the suite read outside
    return {"scenarios.jsonl": f".scenarios.jsonl.{CHANGE}.part"}


def _a_journal_that_is_a_symlink(s: Path, victim: Path) -> dict | None:
    (victim / "journal.json").write_text(json.dumps({"change": CHANGE, "files": {"sub/notes.txt": None}}))
    (s / CHANGE_FILE).symlink_to(victim / "journal.json")
    return None


ATTACKS = {
    "overwrite through a symlinked folder": (_overwrite_through_the_link, "symbolic link"),
    "delete through a symlinked folder": (lambda s, v: {"sub/notes.txt": None}, "symbolic link"),
    "move an outside file in": (lambda s, v: {"stolen.txt": f"sub/.stolen.txt.{CHANGE}.part"}, "not the temp"),
    "a temp that is not beside its target": (_temp_elsewhere, "not the temp"),
    "a temp that is a symlink": (_a_temp_that_is_a_symlink, "not a regular file"),
    "the journal is a symlink": (_a_journal_that_is_a_symlink, "symbolic link"),
    "a target outside": (lambda s, v: {"../victim/notes.txt": None}, "not a file inside"),
    "not JSON": (lambda s, v: "{", "not JSON"),
    "a name no file can have": (lambda s, v: {"\ud800": f".\ud800.{CHANGE}.part"}, "cannot be a file name"),
}


@pytest.mark.parametrize("attack", ATTACKS)
def test_a_crafted_journal_changes_nothing_outside_the_suite_and_is_refused_naming_it(handed, capsys, attack):
    s, victim = handed
    make, says = ATTACKS[attack]
    files = make(s, victim)
    if files is not None:
        (s / CHANGE_FILE).write_text(files if isinstance(files, str) else
                                     json.dumps({"change": CHANGE, "files": files}))
    outside, inside = files_under(victim), files_under(s)
    assert cli.main(["suite", "validate", str(s), "--no-videos"]) == 1  # a reader
    err = capsys.readouterr().err
    assert CHANGE_FILE in err and says in err and "fix: delete .change.json" in err and "Traceback" not in err
    assert cli.main(["suite", "tag", str(s), "--tag", "x", "--where", "category == goto"]) == 2  # a writer
    assert CHANGE_FILE in capsys.readouterr().err
    with pytest.raises(JournalError, match="nothing was changed"):
        FolderChange(s)
    assert files_under(victim) == outside and files_under(s) == inside
    assert sorted(p.name for p in victim.iterdir()) == sorted(outside) and (victim / "notes.txt").exists()
    (s / CHANGE_FILE).unlink()  # the fix the message gives
    assert Suite.load(s).info.name == "tiny" and (victim / "notes.txt").read_text() == "untouched"


def test_a_journal_naming_a_folder_says_so(handed):
    s, _ = handed
    (s / f".videos.{CHANGE}.part").write_text("{}")
    (s / CHANGE_FILE).write_text(json.dumps({"change": CHANGE, "files": {"videos": f".videos.{CHANGE}.part"}}))
    with pytest.raises(SuiteFormatError, match="names the folder 'videos'"):
        Suite.load(s)
    with pytest.raises(JournalError, match="names the folder 'videos'"):
        recover_folder(s)
    assert (s / "videos").is_dir()


def test_an_honest_journal_in_a_real_sub_folder_is_still_finished(tmp_path):
    s = tmp_path / "s"
    tiny_suite(s, videos=False)
    (s / "videos").mkdir()
    (s / "videos" / f".c1.mp4.{CHANGE}.part").write_bytes(b"new video")
    files = {"videos/c1.mp4": f"videos/.c1.mp4.{CHANGE}.part", "references.jsonl": None}
    (s / CHANGE_FILE).write_text(json.dumps({"change": CHANGE, "files": files}))
    assert not Suite.load(s).references  # a reader finishes it
    assert (s / "videos" / "c1.mp4").read_bytes() == b"new video" and not (s / CHANGE_FILE).exists()


# ----------------------------------------------------------------------------------------------
# A new folder is locked like an existing one; a commit whose staged file is gone fails


def test_a_commit_whose_staged_file_is_gone_fails_and_leaves_the_old_suite(tmp_path):
    suite = tiny_suite(tmp_path / "s", videos=False)
    before = files_under(tmp_path / "s")
    change = FolderChange(tmp_path / "s")
    suite.scenarios[0].instruction = "a new instruction"
    suite.write(change=change)
    (tmp_path / "s" / change.staged["scenarios.jsonl"]).unlink()  # what another writer's clean-up did
    with pytest.raises(FileNotFoundError, match="gone before the change was made"):
        change.commit()
    change.abort()
    assert files_under(tmp_path / "s") == before and not (tmp_path / "s" / CHANGE_FILE).exists()


def _labelled_rows(who: str) -> list[dict]:
    return [{"video": f"suite/videos/c{i + 1}.mp4", "instruction": f"task of {who}{i}", "agent": who,
             "continuation_id": f"{who}{i}", "outcome": "success", "marker_s": 0.5, "annotator": f"h-{who}"}
            for i in range(3)]


def test_two_imports_into_one_new_folder_at_once_each_land_whole(media, tmp_path):
    """Two processes import their own table into the same new folder at the same moment, ``ROUNDS`` times: each
    import lands whole (its continuations, videos and labels) or not at all, and the suite is valid."""
    tables = {who: write_table(tmp_path / f"{who}.csv", _labelled_rows(who)) for who in "ab"}
    workers = {who: subprocess.Popen([sys.executable, str(WORKER), "rounds", str(media), str(tables[who])],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for who in "ab"}
    answers = []
    try:
        assert all(w.stdout.readline().strip() == "ready" for w in workers.values())
        for k in range(ROUNDS):
            out = tmp_path / f"round-{k}"
            for w in workers.values():
                w.stdin.write(f"{out}\n")
                w.stdin.flush()
            answer = {who: w.stdout.readline().strip() for who, w in workers.items()}
            answers.append(answer)
            suite = Suite.load(out)
            assert validate_suite(out, check_videos=False) == []
            assert all((out / c.video).is_file() for c in suite.continuations)
            for who, said in answer.items():
                mine = {f"{who}{i}" for i in range(3)}
                held = mine & {c.continuation_id for c in suite.continuations}
                labelled = mine & {a.continuation_id for a in suite.annotations}
                assert (held, labelled) == ((mine, mine) if said == "ok" else (set(), set())), (k, answer)
    finally:
        for w in workers.values():
            w.stdin.close()
            w.wait(timeout=60)
            w.stdout.close()
    assert all(a == {"a": "ok", "b": "ok"} for a in answers), answers  # the second waits for the first


# ----------------------------------------------------------------------------------------------
# What the product will later encode or print is checked when the suite is validated or imported


@pytest.mark.parametrize("file, field, value", [
    ("scenarios.jsonl", "category", "go \ud800"),
    ("scenarios.jsonl", "category", "go\x1b[31m"),
    ("scenarios.jsonl", "tags", ["v1", "\u202egnp.exe"]),
    ("scenarios.jsonl", "instruction", "go \x1b]0;title\x07"),
    ("continuations.jsonl", "video", "videos/c1\x9b.mp4"),
    ("continuations.jsonl", "agent_id", "bad\u202e"),
    ("continuations.jsonl", "metadata", {"note": "\udc00"}),
    ("annotations.jsonl", "annotator_id", "h\x1b[2J"),
    ("references.jsonl", "failure_mode", "\u2028"),
])
def test_text_that_cannot_be_encoded_or_printed_is_a_problem_naming_file_line_and_field(tmp_path, capsys, file,
                                                                                        field, value):
    s = tmp_path / "s"
    tiny_suite(s, videos=False)
    lines = (s / file).read_text().splitlines()
    row = json.loads(lines[0])
    row[field] = value
    lines[0] = json.dumps(row)  # a lone surrogate written as its escape, as JSON allows
    (s / file).write_text("\n".join(lines) + "\n")
    problems = validate_suite(s, check_videos=False)
    assert [(p.file, p.line) for p in problems] == [(file, 1)] and f"'{field}'" in problems[0].message
    assert problems[0].fix
    assert cli.main(["suite", "validate", str(s), "--no-videos"]) == 1
    err = capsys.readouterr().err
    assert f"{file}:1" in err and not any(c in err for c in "\x1b\x07\x9b\u202e\u2028")
    err.encode("utf-8")  # printable: no lone surrogate reaches the terminal


def test_an_import_lists_a_row_whose_category_would_print_an_escape_and_takes_the_rest(media, tmp_path):
    rows = _labelled_rows("a")
    rows[1]["category"] = "goto\x1b[2J"
    for r in rows[:1] + rows[2:]:
        r["category"] = "goto"
    report = import_table(write_table(tmp_path / "t.csv", rows), media, tmp_path / "s")
    assert report.ok and [p.line for p in report.problems] == [3] and "category" in str(report.problems[0])
    assert [c.continuation_id for c in Suite.load(tmp_path / "s").continuations] == ["a0", "a2"]


# ----------------------------------------------------------------------------------------------
# Copies check the descriptor they read, never the path


@pytest.mark.parametrize("swap", ["symlink", "fifo", "another file"])
def test_a_video_swapped_between_its_check_and_its_copy_is_never_copied(media, tmp_path, monkeypatch, capsys, swap):
    videos = tmp_path / "videos"
    videos.mkdir()
    (videos / "v.mp4").write_bytes((media / "suite/videos/c1.mp4").read_bytes())
    secret = tmp_path / "secret.mp4"
    secret.write_bytes((media / "suite/videos/c2.mp4").read_bytes())
    table = write_table(tmp_path / "t.csv", [{"video": "v.mp4", "instruction": "go", "agent": "a",
                                              "continuation_id": "k1"}])
    real = FolderChange.place_file

    def hook(self, rel, source, *args, **kwargs):  # runs after the video's check, before its copy
        Path(source).unlink()
        if swap == "symlink":
            Path(source).symlink_to(secret)
        elif swap == "fifo":
            os.mkfifo(source)  # a plain open() would wait here for a writer forever
        else:
            Path(source).write_bytes(secret.read_bytes())  # a new file at the same path
        return real(self, rel, source, *args, **kwargs)

    monkeypatch.setattr(FolderChange, "place_file", hook)
    out = tmp_path / "s"
    assert cli.main(["suite", "import", "--table", str(table), "--videos", str(videos), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "v.mp4" in err and "Traceback" not in err
    assert not out.exists()  # nothing written, no folder left behind


# ----------------------------------------------------------------------------------------------
# The labels folder: its own temps, and every file checked as it is read


@pytest.fixture
def labels(tmp_path) -> Path:
    """A finished labels folder as ``autorater label`` writes it, by hand (four continuations, all to humans)."""
    tiny_suite(tmp_path / "suite", videos=False)
    job, rows, summary = hand_labels(tmp_path / "suite")
    out = tmp_path / "labels"
    (out / "parts").mkdir(parents=True)
    (out / "job.json").write_text(json.dumps(job, indent=1))
    (out / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return out


def test_a_writer_taking_the_lock_removes_the_temps_its_folder_was_left_with(labels):
    (labels / "labelstudio").mkdir()
    stale = ["labels.jsonl.1234abcd.tmp", "parts/part-00000.jsonl.deadbeef.tmp", "labelstudio/tasks.json.0badf00d.tmp",
             "summary.json.tmp", "human_annotations_history.snapshot.json.00ff00ff.tmp"]
    kept = ["notes.tmp", "leaderboard.html.12345678.tmp", "parts/part-00000.jsonl"]  # not ours, or not a temp
    for name in stale + kept:
        (labels / name).write_text("x")
    with LabelsFolder(labels).lock("test"):
        assert not any((labels / name).exists() for name in stale)
    assert all((labels / name).exists() for name in kept)


def _line(n: int, **changes) -> tuple[int, callable]:
    def edit(rows: list[dict]) -> list:
        rows[n - 1] = {k: v for k, v in {**rows[n - 1], **changes}.items() if v != "<deleted>"}
        return rows
    return n, edit


LABELS_CASES = {  # name -> (the line named, or None; an edit of the rows, or the raw text)
    "a line that is a list": (2, lambda rows: rows[:1] + [[1, 2]] + rows[2:]),
    "a line that is not JSON": (3, lambda rows: rows[:2] + ['{"continuation_id": ']),
    "p_success a list": _line(2, p_success=[0.5]),
    "decision 5": _line(1, decision=5),
    "a decision the product never writes": _line(1, decision="maybe"),
    "outcome a number": _line(4, outcome=7),
    "marker_s text": _line(2, marker_s="soon"),
    "audit text": _line(2, audit="yes"),
    "p_success NaN": (2, lambda rows: rows[:1] + [json.dumps(rows[1]).replace("0.9", "NaN")] + rows[2:]),
    "p_success above 1": _line(3, p_success=1.5),
    "a marker of 1e400": (2, lambda rows: rows[:1] + [json.dumps(rows[1]).replace('"marker_s": null',
                                                                                   '"marker_s": 1e400')] + rows[2:]),
    "continuation_id missing": _line(1, continuation_id="<deleted>"),
    "continuation_id a number": _line(1, continuation_id=913),
    "human_n negative": _line(1, human_n=-1),
    "a model label without the model's outcome": _line(2, decision="auto", model_outcome="<deleted>"),
    "a line twice": (4, lambda rows: rows[:3] + rows[:1]),
    "not UTF-8": (None, lambda rows: b"\xff\xfe{}\n"),
    "empty": (None, lambda rows: []),
    "an id the suite does not have": (None, _line(4, continuation_id="c9")[1]),  # only job.json's hash knows
    "the rows reordered": (None, lambda rows: rows[::-1]),
}
JOB_CASES = {
    "a list": [1], "continuations text": {"continuations": "4"}, "ids_sha1 a number": {"ids_sha1": 5},
    "strata text": {"strata": "category"}, "suite missing": {"suite": "<deleted>"}, "seed 1.5": {"seed": 1.5},
    "batch_size 0": {"batch_size": 0},
}
SUMMARY_CASES = {
    "a list": [1], "a string": "done", "auto text": {"auto": "many"}, "coverage 2": {"coverage": 2},
    "reasons a list": {"reasons": [1]}, "certification a number": {"certification": 3},
}


def _write(path: Path, value) -> None:
    if isinstance(value, bytes):
        path.write_bytes(value)
    elif isinstance(value, list):
        path.write_text("".join((v if isinstance(v, str) else json.dumps(v)) + "\n" for v in value))


def _check_one_line(err: Exception, name: str, line: int | None) -> None:
    text = str(err)
    assert "\n" not in text and name in text and "fix:" in text
    assert line is None or f"{name}:{line}:" in text


@pytest.mark.parametrize("case", LABELS_CASES)
def test_a_tampered_labels_jsonl_is_a_one_line_error_naming_the_file_and_the_line(labels, capsys, case):
    line, edit = LABELS_CASES[case]
    _, rows, _ = hand_labels(labels.parent / "suite")
    _write(labels / "labels.jsonl", edit(rows))
    with pytest.raises(LabelsFileError) as caught:
        LabelsFolder(labels).read_finished()
    _check_one_line(caught.value, "labels.jsonl", line)
    assert cli.main(["leaderboard", "--labels", str(labels), "--out", str(labels / "board.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "labels.jsonl" in err


@pytest.mark.parametrize("case", JOB_CASES)
def test_a_tampered_job_json_is_a_one_line_error_naming_the_file(labels, capsys, case):
    job, _, _ = hand_labels(labels.parent / "suite")
    change = JOB_CASES[case]
    job = change if not isinstance(change, dict) else \
        {k: v for k, v in {**job, **change}.items() if v != "<deleted>"}
    (labels / "job.json").write_text(json.dumps(job))
    with pytest.raises(LabelsFileError) as caught:
        LabelsFolder(labels).read_finished()
    _check_one_line(caught.value, "job.json", None)
    assert cli.main(["leaderboard", "--labels", str(labels)]) == 2
    assert "job.json" in capsys.readouterr().err


@pytest.mark.parametrize("case", SUMMARY_CASES)
def test_a_tampered_summary_json_is_a_one_line_error_naming_the_file(labels, case):
    _, _, summary = hand_labels(labels.parent / "suite")
    change = SUMMARY_CASES[case]
    (labels / "summary.json").write_text(json.dumps(change if not isinstance(change, dict) else {**summary, **change}))
    with pytest.raises(LabelsFileError) as caught:
        LabelsFolder(labels).read_summary()
    _check_one_line(caught.value, "summary.json", None)


def test_the_untampered_folder_reads(labels):
    job, rows = LabelsFolder(labels).read_finished()
    assert len(rows) == job["continuations"] == 4 and LabelsFolder(labels).read_summary()["human"] == 4


def test_a_queue_round_stopped_after_its_archive_finishes_as_an_uninterrupted_one(labels, monkeypatch):
    """The crash point of issue 58: ``tasks-round-K.json`` archived, ``tasks.json`` not yet replaced. The rerun
    writes the same files and reports the same round as a run that was never stopped."""
    import shutil

    import autorater.serving.labelling.folder as module

    suite = Suite.load(labels.parent / "suite")
    _, rows = LabelsFolder(labels).read_finished()
    LabelsFolder(labels).write_labelstudio(suite, rows)  # round 1: the labelling job's queue
    shutil.copytree(labels, labels.parent / "clean")
    clean = LabelsFolder(labels.parent / "clean")
    expected = [clean.write_queue_round(suite, rows[:2]), clean.write_queue_round(suite, rows[:1])]
    real = module.write_text_atomic

    def stop_before_tasks_json(path, text):
        if Path(path).name == "tasks.json":
            raise InterruptedError("stopped")
        return real(path, text)

    monkeypatch.setattr(module, "write_text_atomic", stop_before_tasks_json)
    with pytest.raises(InterruptedError):
        LabelsFolder(labels).write_queue_round(suite, rows[:2])
    monkeypatch.setattr(module, "write_text_atomic", real)
    folder = LabelsFolder(labels)
    assert [folder.write_queue_round(suite, rows[:2]), folder.write_queue_round(suite, rows[:1])] == expected == [2, 3]
    assert files_under(labels / "labelstudio") == files_under(clean.labelstudio)


def test_file_too_large_names_the_file(tmp_path):
    code = ("import resource, sys\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
            "from autorater.data.files import write_text_atomic\n"
            "try:\n"
            "    write_text_atomic(sys.argv[1], 'x' * 100_000)\n"
            "except OSError as err:\n"
            "    print(err)\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "summary.json")], capture_output=True, text=True,
                         timeout=60)
    assert "File too large" in out.stdout and "summary.json" in out.stdout, out
    assert not list(tmp_path.iterdir())
