"""Failure modes are scored: accuracy and confusion among gold failures predicted as failures, per category too."""

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from autorater.calibration import failure_mode_metrics
from autorater.training.evaluate import format_failure_modes, score


def test_failure_mode_metrics_counts_a_missing_mode_as_wrong_and_tabulates_confusion():
    got = failure_mode_metrics(["timeout", "wrong_object", "wrong_object", "timeout"],
                               ["timeout", "timeout", None, "timeout"])
    assert got["n"] == 4 and got["accuracy"] == 0.5
    assert got["confusion"] == {"timeout": {"timeout": 2}, "wrong_object": {"none": 1, "timeout": 1}}
    assert got["recall"] == {"timeout": 1.0, "wrong_object": 0.0}
    assert np.isnan(failure_mode_metrics([], [])["accuracy"])


def test_score_counts_only_gold_failures_with_a_mode_that_were_predicted_failures():
    ids = [f"c{i}" for i in range(8)]
    gold = pd.DataFrame({"outcome": ["failure"] * 6 + ["success"] * 2, "marker_s": 1.0,
                         "failure_mode": ["timeout", "timeout", "wrong_object", "wrong_object", None, "timeout",
                                          None, None]}, index=ids)
    pred = pd.DataFrame({"outcome": ["failure", "failure", "failure", "failure", "failure", "success", "failure",
                                     "success"], "marker_s": 1.0,
                         "failure_mode": ["timeout", "wrong_object", "wrong_object", "timeout", "timeout", None,
                                          "timeout", None]}, index=ids)
    category = pd.Series(["a", "a", "b", "b", "a", "a", "b", "b"], index=ids)
    fm = score(gold, pred, {"category": category})["failure_mode"]
    # c4 (no gold mode), c5 (predicted success) and c6 (gold success) are left out
    assert fm["n"] == 4 and fm["accuracy"] == 0.5
    assert fm["confusion"] == {"timeout": {"timeout": 1, "wrong_object": 1},
                               "wrong_object": {"timeout": 1, "wrong_object": 1}}
    assert fm["by_category"]["a"]["n"] == 2 and fm["by_category"]["b"]["accuracy"] == 0.5
    report = {"methods": {"autorater": {"failure_mode": fm}}}
    text = format_failure_modes(report)
    assert "0.500 of 4" in text and "wrong_object" in text
    assert "no gold failure" in format_failure_modes({"methods": {"autorater": {}}})
    without = score(gold, pred[["outcome", "marker_s"]])
    assert "failure_mode" not in without  # a method that predicts no modes is not scored on them


def test_the_quality_benchmark_pools_failure_modes_over_both_draws(tmp_path):
    from benchmarks.quality import pooled_failure_modes

    def suite(name, truth, categories):
        (tmp_path / name).mkdir()
        (tmp_path / name / "simulator_truth.jsonl").write_text("".join(
            json.dumps({"continuation_id": f"{name}-{i}", "outcome": o, "failure_mode": m}) + "\n"
            for i, (o, m) in enumerate(truth)))
        scen = {f"{name}-{i}": SimpleNamespace(scenario_id=f"s{i}") for i in range(len(truth))}
        return SimpleNamespace(root=tmp_path / name, info=SimpleNamespace(version=name), get=scen.__getitem__,
                               scenario_by_id={f"s{i}": SimpleNamespace(category=c) for i, c in enumerate(categories)})

    a = suite("a", [("failure", "timeout"), ("failure", "wrong_object"), ("success", None)], ["x", "y", "x"])
    b = suite("b", [("failure", "wrong_object"), ("failure", "timeout")], ["y", "y"])
    rows_a = [{"continuation_id": "a-0", "outcome": "failure", "failure_mode": "timeout"},
              {"continuation_id": "a-1", "outcome": "failure", "failure_mode": "timeout"},
              {"continuation_id": "a-2", "outcome": "failure", "failure_mode": "timeout"}]
    rows_b = [{"continuation_id": "b-0", "outcome": "failure", "failure_mode": "wrong_object"},
              {"continuation_id": "b-1", "outcome": "success", "failure_mode": None}]
    got = pooled_failure_modes([(rows_a, a), (rows_b, b)])
    assert got["n"] == 3 and got["accuracy"] == pytest.approx(2 / 3)
    assert got["confusion"]["wrong_object"] == {"timeout": 1, "wrong_object": 1}
    assert got["by_category"]["x"] == {**got["by_category"]["x"], "n": 1, "accuracy": 1.0}
