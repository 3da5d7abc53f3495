"""``autorater train / predict / evaluate`` in-process on a tiny suite: files written, formats, errors.

One training (tiny preset, 2 epochs, no MLflow) for the module; torch stays on one thread.
"""

from __future__ import annotations

import json
import math
import shutil

import pytest
import torch

from autorater.app import cli
from autorater.data.suite import Suite
from autorater.models import AutoModel
from model_suites import learnable_suite, one_thread
from tiny_suites import read_lines

OFFLINE_ENV = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "MLFLOW_DISABLE_TELEMETRY", "DO_NOT_TRACK",
               "TOKENIZERS_PARALLELISM")


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """A suite with references, a config file, and the model ``autorater train`` wrote from them."""
    root = tmp_path_factory.mktemp("cli")
    with pytest.MonkeyPatch.context() as mp:
        before = one_thread()
        mp.setattr(cli.common, "threads", lambda: None)  # the CLI's 2 threads are slower than 1 on a shared 2-core box
        for key in OFFLINE_ENV:  # main() sets these with setdefault: give them back afterwards
            mp.setenv(key, "1" if key != "TOKENIZERS_PARALLELISM" else "false")
        suite = learnable_suite(root / "suite", n_scenarios=6, per_scenario=2, n_references=4)
        config = root / "config.json"
        config.write_text(json.dumps({"preset": "tiny", "train": {"epochs": 2}}))
        code = cli.main(["train", "--suite", str(suite.root), "--out", str(root / "model"), "--config", str(config),
                         "--no-tracking", "--cache-dir", str(root / "cache"), "--quiet"])
        assert code == 0
        try:
            yield {"root": root, "suite": suite, "model": root / "model", "cache": root / "cache"}
        finally:
            torch.set_num_threads(before)


def test_train_writes_a_model_folder_from_the_config_file(env, capsys):
    model = env["model"]
    assert {p.name for p in model.iterdir()} == {"config.json", "model.safetensors", "metadata.json"}
    loaded = AutoModel.from_pretrained(model)
    assert loaded.config.encoder == "pixels" and loaded.config.text_encoder == "bow"  # the tiny preset
    meta = json.loads((model / "metadata.json").read_text())
    assert meta["train_config"]["epochs"] == 2 and meta["train_config"]["cache_dir"] == str(env["cache"])
    suite = env["suite"]
    assert meta["n_train"] + meta["n_val"] == len(suite.continuations) - len(suite.references)
    assert any(env["cache"].rglob("*.safetensors"))


def test_predict_writes_one_suite_format_line_per_continuation_in_order(env, capsys):
    out = env["root"] / "predictions.jsonl"
    code = cli.main(["predict", "--model", str(env["model"]), "--suite", str(env["suite"].root), "--out", str(out),
                     "--quiet"])
    assert code == 0
    rows = read_lines(out)
    assert [r["continuation_id"] for r in rows] == env["suite"].continuation_ids()
    for r in rows:
        assert {"continuation_id", "p_success", "outcome", "marker_s", "failure_mode", "model"} <= set(r)
        assert "error" not in r
        assert 0.0 <= r["p_success"] <= 1.0
        assert r["outcome"] == ("success" if r["p_success"] >= 0.5 else "failure")
        assert math.isfinite(r["marker_s"]) and 0.0 <= r["marker_s"] <= 1.0  # 1-s videos
        assert r["failure_mode"] in (None, "timeout") and (r["failure_mode"] is None or r["outcome"] == "failure")
        assert isinstance(r["model"], str) and r["model"]
    assert f"wrote {len(rows)} predictions" in capsys.readouterr().out


def test_evaluate_reports_the_autorater_beside_the_human_majority(env, capsys):
    out = env["root"] / "report.json"
    code = cli.main(["evaluate", "--model", str(env["model"]), "--suite", str(env["suite"].root),
                     "--gold", "references", "--out", str(out), "--quiet"])
    assert code == 0
    reports = json.loads(out.read_text())
    assert set(reports) == {"references"}
    report = reports["references"]
    assert report["gold"] == "references" and report["n_gold"] == len(env["suite"].references)
    assert {"autorater", "human_majority"} <= set(report["methods"])
    for method in ("autorater", "human_majority"):
        assert report["methods"][method]["outcome"]["n"] == report["n_gold"]
    assert report["methods"]["human_majority"]["outcome"]["accuracy"] == 1.0  # the annotators agree with gold
    printed = capsys.readouterr().out
    assert "autorater" in printed and "human_majority" in printed


def test_a_missing_video_gives_an_error_row_and_a_warning(env, tmp_path, capsys):
    suite_dir = tmp_path / "suite"
    shutil.copytree(env["suite"].root, suite_dir)
    suite = Suite.load(suite_dir)
    gone = suite.continuation_ids()[2]
    (suite_dir / suite.get(gone).video).unlink()
    out = tmp_path / "p.jsonl"
    code = cli.main(["predict", "--model", str(env["model"]), "--suite", str(suite_dir), "--out", str(out),
                     "--quiet"])
    assert code == 0
    rows = read_lines(out)
    assert [r["continuation_id"] for r in rows] == suite.continuation_ids()  # none dropped, none duplicated
    bad = [r for r in rows if "error" in r]
    assert [r["continuation_id"] for r in bad] == [gone]
    assert gone in bad[0]["error"] and "not found" in bad[0]["error"]
    assert all(0.0 <= r["p_success"] <= 1.0 for r in rows if "error" not in r)
    captured = capsys.readouterr()
    assert f"warning: {gone}:" in captured.err
    assert "1 videos could not be decoded" in captured.out


@pytest.mark.parametrize("kind", ["suite-folder", "empty-folder", "no-such-folder"])
def test_model_pointing_at_a_non_model_folder_exits_2_with_a_clear_message(env, tmp_path, capsys, kind):
    target = {"suite-folder": env["suite"].root, "empty-folder": tmp_path, "no-such-folder": tmp_path / "nope"}[kind]
    out = tmp_path / "p.jsonl"
    code = cli.main(["predict", "--model", str(target), "--suite", str(env["suite"].root), "--out", str(out),
                     "--quiet"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(target) in err
    assert "config.json" in err and "model.safetensors" in err
    assert "Traceback" not in err and not out.exists()


def test_a_damaged_metadata_json_exits_2_naming_the_file(env, tmp_path, capsys):
    model = tmp_path / "model"
    shutil.copytree(env["model"], model)
    (model / "metadata.json").write_text('{"registered_name": ')
    code = cli.main(["predict", "--model", str(model), "--suite", str(env["suite"].root),
                     "--out", str(tmp_path / "p.jsonl"), "--quiet"])
    assert code == 2
    assert str(model / "metadata.json") in capsys.readouterr().err
