"""Issue 58: a property-based fuzz (Hypothesis, derandomized) of the files the product reads back from its own
folders, since anyone may have changed them: a suite's journal (``.change.json``, in a suite with a sub-folder that
is a symlink out of it), a labels folder's ``labels.jsonl`` and ``job.json``, and its ``summary.json``.

Properties: a journal is finished, or refused naming ``.change.json``; whatever it says, nothing outside the suite
changes and no other exception escapes. A labels folder reads, or is refused with one line naming the file; what
reads holds what its readers assume (each continuation once, the job's count, fields of their types). Bounded for
CI: the same examples every run, no example database, ``EXAMPLES`` in all (a few seconds on 2 cores).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autorater.data.files import CHANGE_FILE, JournalError, recover_folder
from autorater.data.suite import Suite, SuiteFormatError, validate_suite
from autorater.serving.labelling.folder import LabelsFileError, LabelsFolder, uncertified_as_waiting
from autorater.serving.labelling.ingest import merge_labels
from folder_env import files_under, hand_labels
from tiny_suites import tiny_suite

EXAMPLES = {"journal": 150, "labels": 200, "summary": 100}
SETTINGS = dict(deadline=None, derandomize=True, database=None, print_blob=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.data_too_large])
CHANGE = "0123456789abcdef"
ODD = ["", ".", "..", "\ud800", "x\x00y", "a//b", "\x1b[2J", "/etc/passwd", "../victim/notes.txt"]
LEAVES = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
          | st.sampled_from([10 ** 400, -1, 1e400, 0.5, "success", "auto", "c1", *ODD]))
JSON = st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() if p.is_file() and not p.is_symlink() else b"<not a file>"
            for p in sorted(folder.iterdir())}


# ----------------------------------------------------------------------------------------------
# Journals


TARGETS = st.sampled_from(["scenarios.jsonl", "annotations.jsonl", "sub/notes.txt", "videos", "videos/c1.mp4",
                           "new/x.txt", "sub", CHANGE_FILE, ".lock", *ODD]) | st.text(max_size=10)
TEMPS = st.none() | st.just("<beside>") | st.just("<beside>") | st.integers() | st.text(max_size=10) \
    | st.sampled_from([f".x.{CHANGE}.part", f"sub/.x.{CHANGE}.part", *ODD])
PLANTS = st.sampled_from(["file", "symlink out", "fifo", "folder", "nothing"])


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz-journals")


def _plant(suite_dir: Path, temp: str, how: str) -> None:
    """Put ``how`` at the temp a journal names (through ``sub`` too: what a tarball may carry)."""
    path = suite_dir / temp
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if os.path.lexists(path):
            return  # planted by an earlier entry (writing to a FIFO planted there would wait for ever)
        if how == "file":
            path.write_text("{}\n")
        elif how == "symlink out":
            path.symlink_to(suite_dir.parent / "victim" / "notes.txt")
        elif how == "fifo":
            os.mkfifo(path)
        elif how == "folder":
            path.mkdir()
    except (OSError, ValueError):
        pass  # a name the file system refuses: nothing planted


@settings(max_examples=EXAMPLES["journal"], **SETTINGS)
@given(files=st.dictionaries(TARGETS, st.tuples(TEMPS, PLANTS), max_size=4),
       change=st.sampled_from([CHANGE, CHANGE, CHANGE, "xyz", 5, None]),
       raw=st.one_of(st.none(), st.none(), st.none(), JSON, st.binary(max_size=20)))
def test_fuzz_a_journal_reaches_nothing_outside_its_suite(sandbox, files, change, raw):
    base = sandbox / "case"
    shutil.rmtree(base, ignore_errors=True)
    (base / "victim").mkdir(parents=True)
    (base / "victim" / "notes.txt").write_text("untouched")
    suite_dir = base / "s"
    tiny_suite(suite_dir, videos=False)
    (suite_dir / "videos").mkdir()
    (suite_dir / "sub").symlink_to(base / "victim")
    journal = {}
    for target, (temp, how) in files.items():
        if temp == "<beside>" and isinstance(target, str) and target:
            temp = str(Path(target).with_name(f".{Path(target).name}.{CHANGE}.part")) if Path(target).name else None
        if isinstance(temp, str):
            _plant(suite_dir, temp, how)
        journal[target] = temp
    text = json.dumps({"change": change, "files": journal}) if raw is None else \
        raw if isinstance(raw, bytes) else json.dumps(raw)
    (suite_dir / CHANGE_FILE).write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    outside, around = _snapshot(base / "victim"), sorted(p.name for p in base.iterdir())
    before = files_under(suite_dir)
    problems = validate_suite(suite_dir, check_videos=False)  # a reader: finishes it, or refuses it
    refused = [p for p in problems if p.file == CHANGE_FILE]
    if refused:
        assert "fix: delete .change.json" in str(refused[0]) and files_under(suite_dir) == before
        with pytest.raises(JournalError):
            recover_folder(suite_dir)  # a writer refuses it too
    try:
        Suite.load(suite_dir)
    except SuiteFormatError:
        pass
    assert _snapshot(base / "victim") == outside and sorted(p.name for p in base.iterdir()) == around


# ----------------------------------------------------------------------------------------------
# Labels folders and summaries


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> tuple[Path, dict, list[dict], dict]:
    root = tmp_path_factory.mktemp("fuzz-labels")
    tiny_suite(root / "suite", videos=False)
    return (root, *hand_labels(root / "suite"))


def _replace(obj, path: tuple, value, delete: bool):
    """``obj`` with the node at ``path`` replaced by ``value`` (or deleted)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(obj, dict):
        out = dict(obj)
        if delete and not rest:
            out.pop(head, None)
        else:
            out[head] = _replace(obj.get(head), rest, value, delete)
        return out
    out = list(obj)
    if delete and not rest:
        del out[head]
    else:
        out[head] = _replace(obj[head], rest, value, delete)
    return out


FIELDS = st.sampled_from(["continuation_id", "decision", "outcome", "marker_s", "p_success", "audit", "model",
                          "model_outcome", "model_marker_s", "logit", "human_n", "label_source", "stratum",
                          "certified_by", "reason", "duration_s"])
JOB_FIELDS = st.sampled_from(["suite", "continuations", "ids_sha1", "batch_size", "audit_share", "seed", "strata",
                              "certify", "model_name"])


@settings(max_examples=EXAMPLES["labels"], **SETTINGS)
@given(which=st.sampled_from(["row field", "row field", "line", "job field", "lines"]), index=st.integers(0, 3),
       field=FIELDS, job_field=JOB_FIELDS, value=JSON, delete=st.booleans(),
       order=st.permutations(range(4)))
def test_fuzz_a_labels_folder_reads_whole_or_is_refused_in_one_line(made, which, index, field, job_field, value,
                                                                     delete, order):
    root, job, rows, _ = made
    out = root / "labels"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    if which == "row field":
        rows = _replace(rows, (index, field), value, delete)
    elif which == "line":
        rows = _replace(rows, (index,), value, delete)
    elif which == "lines":
        rows = [rows[i] for i in order] + (rows[:1] if delete else [])
    else:
        job = _replace(job, (job_field,), value, delete)
    (out / "job.json").write_text(json.dumps(job), encoding="utf-8", errors="surrogatepass")
    (out / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8",
                                      errors="surrogatepass")
    try:
        job_read, rows_read = LabelsFolder(out).read_finished()
    except LabelsFileError as err:
        assert "\n" not in str(err) and "fix:" in str(err) and ("labels.jsonl" in str(err) or "job.json" in str(err))
        return
    ids = [r["continuation_id"] for r in rows_read]
    assert len(ids) == len(set(ids)) == job_read["continuations"] and all(isinstance(i, str) for i in ids)
    merged = merge_labels(rows_read, [])  # what ingest does with the rows: no KeyError, no TypeError
    assert [uncertified_as_waiting(r)["continuation_id"] for r in merged] == ids


@settings(max_examples=EXAMPLES["summary"], **SETTINGS)
@given(key=st.sampled_from(["auto", "coverage", "reasons", "certification", "suite", "human", "drift", "new"]),
       value=JSON, whole=st.none() | JSON)
def test_fuzz_a_summary_reads_as_an_object_of_typed_counts_or_is_refused(made, key, value, whole):
    root, _, _, summary = made
    out = root / "summary"
    out.mkdir(exist_ok=True)
    text = json.dumps({**summary, key: value} if whole is None else whole)
    (out / "summary.json").write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        read = LabelsFolder(out).read_summary()
    except LabelsFileError as err:
        assert "\n" not in str(err) and "summary.json" in str(err) and "fix:" in str(err)
        return
    assert isinstance(read, dict)
    for count in ("auto", "human", "continuations"):
        assert count not in read or (isinstance(read[count], int) and read[count] >= 0)
    assert "coverage" not in read or 0 <= read["coverage"] <= 1
