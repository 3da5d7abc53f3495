"""``autorater label``: every continuation exactly once, routing, audit slice, bad videos, resume after kill -9."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from autorater.app import cli
from autorater.data.suite import Suite
from autorater.serving.labelling.folder import LabelJobError
from autorater.serving.labelling.label import audit_draw, label_suite
from serving_env import make_env, set_calibration, torch_threads
from tiny_suites import read_lines

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    with torch_threads(1):
        yield make_env(tmp_path_factory.mktemp("label"))


def _bytes(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in ("labels.jsonl", "errors.jsonl", "labelstudio/tasks.json")}


def test_every_continuation_exactly_once_and_routing_follows_the_calibration(env, tmp_path):
    # the references' promise carried over (--certify references): the routing is the calibration's alone
    summary = label_suite(env["model"], env["suite"], tmp_path / "out", batch_size=5, audit_share=0.3,
                          certify="references", seed=0)
    rows = read_lines(tmp_path / "out" / "labels.jsonl")
    assert [r["continuation_id"] for r in rows] == env["suite"].continuation_ids()
    assert "NOT checked on this version" in summary["certification"]["promise"]
    t = json.loads((env["model"] / "calibration.json").read_text())["t_success"]
    for r in rows:
        confident = max(r["p_success"], 1 - r["p_success"]) >= t
        assert r["decision"] == ("auto" if confident else "human")
        if r["decision"] == "auto":
            assert r["outcome"] == r["model_outcome"] == ("success" if r["p_success"] >= 0.5 else "failure")
        else:
            assert r["outcome"] is None and r["reason"] == "uncertain" and not r["audit"]
    n_auto = sum(r["decision"] == "auto" for r in rows)
    assert 0 < n_auto < len(rows) and summary["auto"] == n_auto and summary["coverage"] == n_auto / len(rows)
    # The audit slice is a subset of the auto part fixed by (seed, id), and the human tasks are queue + audit.
    assert all(r["audit"] == (r["decision"] == "auto" and audit_draw(r["continuation_id"], 0) < 0.3) for r in rows)
    tasks = json.loads((tmp_path / "out" / "labelstudio" / "tasks.json").read_text())
    assert {t["data"]["continuation_id"] for t in tasks} == \
        {r["continuation_id"] for r in rows if r["decision"] == "human" or r["audit"]}


def test_the_audit_draw_is_uniform_over_sequential_ids_and_old_folders_keep_theirs(env, tmp_path):
    from scipy import stats

    def lumpy(method):  # share of seeds whose draw over 400 sequential ids fails a chi-square test of uniformity
        counts = [np.histogram([audit_draw(f"c{i:06d}", seed, method) for i in range(400)], bins=10, range=(0, 1))[0]
                  for seed in range(20)]
        return np.mean([stats.chisquare(c).pvalue < 0.05 for c in counts])

    assert lumpy("blake2b") <= 0.25 and lumpy("crc32") >= 0.8
    out = tmp_path / "old"
    label_suite(env["model"], env["suite"], out, audit_share=0.5, certify="references", seed=0)
    job = json.loads((out / "job.json").read_text())
    assert job["audit_hash"] == "blake2b"
    del job["audit_hash"]  # a folder written before the draw changed, interrupted before assembling
    (out / "job.json").write_text(json.dumps(job))
    (out / "labels.jsonl").unlink()
    for part in (out / "parts").glob("part-*.jsonl"):
        part.unlink()
    label_suite(env["model"], env["suite"], out, audit_share=0.5, resume=True, certify="references", seed=0)
    rows = read_lines(out / "labels.jsonl")
    assert all(r["audit"] == (r["decision"] == "auto" and audit_draw(r["continuation_id"], 0, "crc32") < 0.5)
               for r in rows)


def test_same_labels_whatever_the_batch_size_and_workers(env, tmp_path):
    label_suite(env["model"], env["suite"], tmp_path / "a", batch_size=36, workers=1)
    label_suite(env["model"], env["suite"], tmp_path / "b", batch_size=4, workers=3)
    a, b = read_lines(tmp_path / "a" / "labels.jsonl"), read_lines(tmp_path / "b" / "labels.jsonl")
    assert [r["decision"] for r in a] == [r["decision"] for r in b]
    assert np.allclose([r["p_success"] for r in a], [r["p_success"] for r in b], atol=1e-5)


def test_a_finished_job_is_left_alone_and_an_unfinished_one_needs_resume(env, tmp_path):
    out = tmp_path / "out"
    label_suite(env["model"], env["suite"], out, batch_size=8)
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    label_suite(env["model"], env["suite"], out, batch_size=8)
    label_suite(env["model"], env["suite"], out, batch_size=8, resume=True)
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()} == before
    with pytest.raises(LabelJobError, match="another labelling job.*batch_size"):
        label_suite(env["model"], env["suite"], out, batch_size=4)
    (out / "labels.jsonl").unlink()  # as if the job had died before finishing
    with pytest.raises(LabelJobError, match="--resume"):
        label_suite(env["model"], env["suite"], out, batch_size=8)


def test_resume_after_a_crash_gives_the_same_bytes(env, tmp_path):
    label_suite(env["model"], env["suite"], tmp_path / "clean", batch_size=5)
    crashed = tmp_path / "crashed"
    label_suite(env["model"], env["suite"], crashed, batch_size=5)
    for name in ("labels.jsonl", "summary.json", "errors.jsonl"):
        (crashed / name).unlink()
    parts = sorted((crashed / "parts").glob("part-*.jsonl"))
    for p in parts[1::2]:
        p.unlink()
    (crashed / "parts" / "part-00003.jsonl.tmp").write_text('{"continuation_id": "half a li')  # a torn write
    summary = label_suite(env["model"], env["suite"], crashed, batch_size=5, resume=True)
    assert summary["rated_this_run"] == sum(len(read_lines(p)) for p in parts[1::2])
    assert _bytes(crashed) == _bytes(tmp_path / "clean")


def test_kill_9_mid_run_then_resume_loses_and_duplicates_nothing(env, tmp_path):
    args = ["--model", str(env["model"]), "--suite", str(env["suite"].root), "--batch-size", "1", "--workers", "1",
            "--quiet"]
    assert cli.main(["label", *args, "--out", str(tmp_path / "clean")]) == 0
    out = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "autorater.app.cli", "label", *args, "--out", str(out)], cwd=REPO,
                            env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and not list((out / "parts").glob("part-*.jsonl")):
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (out / "labels.jsonl").exists(), "the job finished before it could be killed: make the suite bigger"
    done = len(list((out / "parts").glob("part-*.jsonl")))
    assert 1 <= done < len(env["suite"].continuations)
    assert cli.main(["label", *args, "--out", str(out)]) == 2  # unfinished: refuses without --resume
    assert cli.main(["label", *args, "--out", str(out), "--resume"]) == 0
    rows = read_lines(out / "labels.jsonl")
    assert sorted(r["continuation_id"] for r in rows) == sorted(env["suite"].continuation_ids())
    assert _bytes(out) == _bytes(tmp_path / "clean")


def test_a_bad_video_is_reported_routed_to_humans_and_does_not_stop_the_run(env, tmp_path):
    root = tmp_path / "suite"
    shutil.copytree(env["suite"].root, root)
    suite = Suite.load(root)
    broken, missing = suite.continuations[3], suite.continuations[10]
    (root / broken.video).write_bytes(b"not a video at all")
    (root / missing.video).unlink()
    summary = label_suite(env["model"], suite, tmp_path / "out", batch_size=4)
    rows = {r["continuation_id"]: r for r in read_lines(tmp_path / "out" / "labels.jsonl")}
    assert len(rows) == len(suite.continuations) and summary["errors"] == 2
    for c in (broken, missing):
        assert rows[c.continuation_id]["decision"] == "human" and rows[c.continuation_id]["reason"] == "video_error"
    errors = read_lines(tmp_path / "out" / "errors.jsonl")
    assert {e["video"] for e in errors} == {broken.video, missing.video}
    assert all(e["error"] and e["fix"] for e in errors)


def test_without_calibration_everything_goes_to_humans(env, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(env["model"], model)
    (model / "calibration.json").unlink()
    summary = label_suite(model, env["suite"], tmp_path / "out")
    assert summary["auto"] == 0 and summary["routed_by"] == "uncalibrated"
    assert {r["reason"] for r in read_lines(tmp_path / "out" / "labels.jsonl")} == {"uncalibrated"}


def test_drift_is_reported_and_can_route_everything_to_humans(env, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(env["model"], model)
    set_calibration(model, 0.5, np.random.default_rng(0).normal(8.0, 1.0, 300))  # calibrated on far other scores
    summary = label_suite(model, env["suite"], tmp_path / "warn", certify="references")
    assert summary["drift"]["drifted"] and summary["auto"] > 0
    summary = label_suite(model, env["suite"], tmp_path / "route", on_drift="route")
    assert summary["auto"] == 0 and summary["routed_by"] == "drift"


def test_cli_label_prints_the_summary(env, tmp_path, capsys):
    assert cli.main(["label", "--model", str(env["model"]), "--suite", str(env["suite"].root), "--out",
                     str(tmp_path / "out"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "auto (" in out and "tasks for the annotators" in out
    assert cli.main(["label", "--model", str(tmp_path / "nowhere"), "--suite", str(env["suite"].root), "--out",
                     str(tmp_path / "x"), "--quiet"]) == 2
    assert "not a model folder" in capsys.readouterr().err
