"""``autorater calibrate`` in-process: calibration.json, the report and its plots, and predict applying it."""

from __future__ import annotations

import json
import math

import pytest

from autorater.app import cli
from autorater.calibration import CalibrationRecord
from model_suites import learnable_suite, trained_by_cli
from tiny_suites import read_lines


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("calibrate")
    suite = learnable_suite(root / "suite", n_scenarios=10, per_scenario=2, n_references=12)
    config = root / "config.json"
    config.write_text(json.dumps({"preset": "tiny", "train": {"epochs": 3}}))
    with trained_by_cli(root, suite, "--config", str(config)) as env:
        yield env


def test_calibrate_writes_calibration_json_report_and_plots(env, capsys):
    report = env["root"] / "report"
    code = cli.main(["calibrate", "--model", str(env["model"]), "--suite", str(env["suite"].root),
                     "--report", str(report), "--quiet"])
    assert code == 0
    record = CalibrationRecord.from_json(env["model"] / "calibration.json")
    assert record.temperature > 0 and record.n_references == 12
    assert record.reference_suite == "learnable" and record.target_agreement == 0.95
    # the scaler and the thresholds saw disjoint references, whole scenarios apart
    scaling, threshold = set(record.scaling_ids), set(record.threshold_ids)
    assert scaling and threshold and not scaling & threshold
    assert scaling | threshold == {r.continuation_id for r in env["suite"].references}
    scenario = {c.continuation_id: c.scenario_id for c in env["suite"].continuations}
    assert not {scenario[i] for i in scaling} & {scenario[i] for i in threshold}
    assert record.split_method.startswith("disjoint") and record.n_folds >= 2
    # 12 references cannot certify 0.95 agreement at 90% confidence: an honest refusal, everything to humans.
    assert not record.feasible
    out = capsys.readouterr().out
    assert "every continuation goes to a human" in out and "annotator0" in out
    for name in ("report.json", "reliability.png", "risk_coverage.png", "agreement.png"):
        assert (report / name).stat().st_size > 0
    rows = {r["name"] for r in json.loads((report / "report.json").read_text())["rows"]}
    assert {"autorater", "annotator0", "annotator1", "human_majority"} <= rows


def test_predict_applies_the_stored_temperature_and_shift(env):
    out = env["root"] / "predictions.jsonl"
    assert cli.main(["predict", "--model", str(env["model"]), "--suite", str(env["suite"].root),
                     "--out", str(out), "--quiet"]) == 0
    stored = json.loads((env["model"] / "calibration.json").read_text())
    temperature, bias = stored["temperature"], stored["bias"]
    for row in read_lines(out):
        want = 1 / (1 + math.exp(-(row["logit"] / temperature + bias)))
        assert math.isclose(row["p_success"], want, abs_tol=1e-3), (row, stored)  # logits are written to 1e-6


def test_calibrate_refuses_a_suite_without_references(env, tmp_path, capsys):
    bare = learnable_suite(tmp_path / "bare", n_scenarios=2)
    code = cli.main(["calibrate", "--model", str(env["model"]), "--suite", str(bare.root), "--quiet"])
    assert code == 2 and "references" in capsys.readouterr().err


def test_predict_reports_drift_against_the_calibration_suite(env, capsys):
    out = env["root"] / "again.jsonl"
    assert cli.main(["predict", "--model", str(env["model"]), "--suite", str(env["suite"].root),
                     "--out", str(out), "--quiet"]) == 0
    assert "drift against calibration suite learnable@v1" in capsys.readouterr().out


def test_check_drift_flags_a_shifted_score_distribution(tmp_path):
    import numpy as np

    from autorater.calibration import SelectivePolicy, TemperatureScaler
    from autorater.serving.labelling.model_calibration import check_drift

    rng = np.random.default_rng(0)
    logits = rng.normal(0, 2, 400)
    y = (rng.random(400) < 1 / (1 + np.exp(-logits))).astype(int)
    scaler = TemperatureScaler().fit(logits, y)
    policy = SelectivePolicy(target_agreement=0.8, on_infeasible="route_all").fit(scaler.predict_proba(logits), y)
    CalibrationRecord.from_fitted(scaler, policy, logits, "ref", "v1").to_json(tmp_path / "calibration.json")
    assert not check_drift(tmp_path, rng.normal(0, 2, 300))["drifted"]
    shifted = check_drift(tmp_path, rng.normal(4, 2, 300))
    assert shifted["drifted"] and shifted["calibration_suite"] == "ref@v1"
    assert check_drift(tmp_path / "nowhere", logits) is None


def test_calibrate_reports_the_marker_offset_and_predict_applies_a_stored_one(env, tmp_path):
    import shutil

    calibrated = json.loads((env["model"] / "calibration.json").read_text())
    # 12 references: fewer than MarkerOffset's 20 agreeing pairs per outcome, so nothing is shifted.
    assert calibrated["marker_offset_success_s"] == 0.0 and calibrated["marker_offset_failure_s"] == 0.0
    assert sum(calibrated["marker_offset_n"]) <= 12
    bare = tmp_path / "bare"
    shutil.copytree(env["model"], bare)
    (bare / "calibration.json").unlink()
    shifted = tmp_path / "shifted"
    shutil.copytree(env["model"], shifted)
    (shifted / "calibration.json").write_text(json.dumps(
        {**calibrated, "marker_offset_success_s": 0.3, "marker_offset_failure_s": -0.2}))
    rows = {}
    for name in ("bare", "shifted"):
        assert cli.main(["predict", "--model", str(tmp_path / name), "--suite", str(env["suite"].root),
                         "--out", str(tmp_path / f"{name}.jsonl"), "--quiet"]) == 0
        rows[name] = {r["continuation_id"]: r for r in read_lines(tmp_path / f"{name}.jsonl")}
    seen = set()
    for cid, raw in rows["bare"].items():
        new = rows["shifted"][cid]
        seen.add(new["outcome"])
        if new["outcome"] == "success":
            assert math.isclose(new["marker_s"], max(raw["marker_s"] - 0.3, 0.0), abs_tol=2e-4)
        else:
            assert new["marker_s"] >= raw["marker_s"] and new["marker_s"] <= raw["marker_s"] + 0.2 + 2e-4
    assert seen  # (each outcome's rule is checked where the model predicts it)


def test_a_corrupt_marker_offset_is_refused_with_the_fix(env, tmp_path):
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(env["model"], bad)
    record = json.loads((bad / "calibration.json").read_text())
    (bad / "calibration.json").write_text(json.dumps({**record, "marker_offset_success_s": "late"}))
    with pytest.raises(ValueError, match="marker_offset_success_s must be a finite number.*autorater calibrate"):
        from autorater.rater import read_calibration

        read_calibration(bad)
