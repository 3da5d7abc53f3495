"""AUROC beside BA (issue 56): one definition (``calibration.metrics.auroc``) that every report uses: the evaluation
report, the quality benchmark's pooled sets and its unseen tasks split by relatives, and the paired comparison."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from autorater.calibration import auroc
from benchmarks.paired import paired_auroc
from benchmarks.quality_scores import by_relatives


def test_auroc_is_the_share_of_success_failure_pairs_ranked_right_ties_half():
    assert auroc([0, 1], [0.2, 0.9]) == 1.0 and auroc([0, 1], [0.9, 0.2]) == 0.0
    assert auroc([0, 0, 1, 1], [0.5, 0.5, 0.5, 0.5]) == 0.5
    assert auroc([0, 0, 1], [0.1, 0.7, 0.7]) == pytest.approx(0.75)  # one pair right, one tied
    rng = np.random.default_rng(0)
    y, s = rng.integers(0, 2, 300), rng.normal(size=300)
    brute = np.mean([(a > b) + 0.5 * (a == b) for a in s[y == 1] for b in s[y == 0]])
    assert auroc(y, s) == pytest.approx(brute) and auroc(y, np.exp(3 * s)) == pytest.approx(brute)  # ranks only


def test_auroc_is_nan_without_both_classes_or_with_a_missing_score():
    assert np.isnan(auroc([1, 1, 1], [0.1, 0.2, 0.3])) and np.isnan(auroc([], []))
    assert np.isnan(auroc([0, 1], [0.1, float("nan")]))


def test_the_evaluation_report_has_auroc_beside_balanced_accuracy_for_methods_with_a_score(tmp_path):
    from autorater.data.suite import Continuation, Reference, Scenario, Suite, SuiteInfo
    from autorater.training.evaluate import evaluate, format_report

    scenarios = [Scenario(scenario_id=f"s{i}", instruction="open the drawer", category="open") for i in range(4)]
    continuations = [Continuation(continuation_id=f"c{i}", scenario_id=f"s{i}", agent_id="a", video=f"videos/c{i}.mp4")
                     for i in range(4)]
    references = [Reference(continuation_id=f"c{i}", outcome=o) for i, o in
                  enumerate(["success", "success", "failure", "failure"])]
    suite = Suite(tmp_path, SuiteInfo(name="t", version="v1"), scenarios, continuations, references=references)
    rows = [{"continuation_id": f"c{i}", "outcome": o, "p_success": p, "logit": z, "marker_s": 0.5} for i, (o, p, z) in
            enumerate([("success", 0.9, 2.2), ("failure", 0.4, -0.4), ("failure", 0.3, -0.8), ("failure", 0.1, -2.2)])]
    report = evaluate(suite, rows, gold="references", include_humans=False)
    outcome = report["methods"]["autorater"]["outcome"]
    assert outcome["balanced_accuracy"] == pytest.approx(0.75) and outcome["auroc"] == 1.0  # ranks all, misses one
    assert report["methods"]["autorater"]["by_category"]["open"]["auroc"] == 1.0
    assert "auroc" in format_report(report).splitlines()[1]


def test_the_paired_auroc_difference_has_an_interval_over_scenarios():
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 400)
    groups = np.arange(400) // 4
    good, poor = y + rng.normal(0, 0.5, 400), y + rng.normal(0, 2.0, 400)
    out = paired_auroc(y, poor, good, groups)
    assert out["auroc_b"] > out["auroc_a"] and out["auroc_difference"] == pytest.approx(out["auroc_b"] - out["auroc_a"])
    assert 0 < out["auroc_ci"][0] < out["auroc_difference"] < out["auroc_ci"][1]
    same = paired_auroc(y, good, good, groups)
    assert same["auroc_difference"] == 0 and same["auroc_ci"] == [0, 0]


def test_unseen_tasks_are_split_by_whether_their_family_was_trained(tmp_path):
    tasks = ["faucet-open-v3", "door-close-v3", "dial-turn-v3"]
    (tmp_path / "held").mkdir()
    truth = [{"continuation_id": f"c{i}", "scenario_id": f"s{i // 2}", "task": tasks[i % 3],
              "outcome": "success" if i % 2 else "failure"} for i in range(24)]
    (tmp_path / "held" / "simulator_truth.jsonl").write_text("".join(json.dumps(t) + "\n" for t in truth))
    held = SimpleNamespace(root=tmp_path / "held", info=SimpleNamespace(version="unseen_tasks"))
    rows = [{"continuation_id": t["continuation_id"], "outcome": t["outcome"], "logit": 1.0 if i % 2 else -1.0}
            for i, t in enumerate(truth)]
    train = [SimpleNamespace(scenarios=[SimpleNamespace(metadata={"task": t}) for t in ("door-open-v3", "reach-v3")])]
    out = by_relatives([(rows, held)], train)
    assert out["with_relatives"]["tasks"] == ["door-close-v3"]  # door-open trained: a relative
    assert out["without_relatives"]["tasks"] == ["dial-turn-v3", "faucet-open-v3"]
    assert out["per_task"]["door-close-v3"]["relatives"] == ["door-open-v3"]
    assert out["with_relatives"]["auroc"] == 1.0 and out["without_relatives"]["n"] == 16
