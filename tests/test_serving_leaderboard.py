"""Leaderboard: PPI intervals cover the true rate about 95% of the time; classical intervals; a hand-made table."""

from __future__ import annotations

import json

import numpy as np
import pytest

from autorater import cli
from data.suite import load_truth
from serving.label import JOB_FILE, LABELS_FILE, job_spec
from serving.leaderboard import leaderboard, rate_estimate, rate_vs_gold, wilson_interval
from serving_env import make_env, torch_threads


def _draw(rng, n=240, rate=0.6, n_audit=40, flip_success=0.25, flip_failure=0.05, n_human=0):
    """A biased model (misses a quarter of the successes) over ``n`` auto items, a random audit slice."""
    y = (rng.random(n) < rate).astype(float)
    flip = np.where(y == 1, rng.random(n) < flip_success, rng.random(n) < flip_failure)
    yhat = np.where(flip, 1 - y, y)
    audit = rng.permutation(n)[:n_audit]
    rest = np.setdiff1d(np.arange(n), audit)
    human = (rng.random(n_human) < rate).astype(float)
    return y, human, {"human": human, "auto_model": yhat[rest], "audit_model": yhat[audit], "audit_human": y[audit]}


@pytest.mark.parametrize("n_human", [0, 60])
def test_ppi_intervals_cover_the_true_rate_about_95_percent_of_the_time(n_human):
    rng = np.random.default_rng(0)
    hits, naive_hits, widths = [], [], []
    for _ in range(400):
        y, human, strata = _draw(rng, n_human=n_human)
        truth = (y.sum() + human.sum()) / (len(y) + len(human))
        est = rate_estimate(**strata)
        hits.append(est["ci"][0] <= truth <= est["ci"][1])
        widths.append(est["ci"][1] - est["ci"][0])
        model_only = np.concatenate([strata["auto_model"], strata["audit_model"], human]).mean()
        naive_hits.append(abs(model_only - truth) < (est["ci"][1] - est["ci"][0]) / 2)
    assert 0.92 <= np.mean(hits) <= 0.99, np.mean(hits)
    assert np.mean(naive_hits) < 0.5  # the model's labels alone are biased: PPI is what fixes it
    assert np.mean(widths) < 0.3


def test_gold_references_correct_biased_labels_and_cover_the_true_rate():
    """Final labels that miss 20% of the successes (biased annotators), 15% gold references."""
    rng = np.random.default_rng(3)
    hits, naive = [], []
    for _ in range(400):
        y = (rng.random(120) < 0.55).astype(float)
        labels = np.where((y == 1) & (rng.random(120) < 0.2), 0.0, y)
        refs = rng.permutation(120)[:18]
        rest = np.setdiff1d(np.arange(120), refs)
        est = rate_vs_gold(y[refs], labels[refs], labels[rest])
        hits.append(est["ci"][0] <= y.mean() <= est["ci"][1])
        lo, hi = wilson_interval(int(labels.sum()), 120)
        naive.append(lo <= y.mean() <= hi)
    assert 0.92 <= np.mean(hits) <= 1.0, np.mean(hits)
    assert np.mean(naive) < 0.6  # taking the labels as the truth is what fails
    assert rate_vs_gold([1.0], [1.0], np.ones(5))["ci"] == [0.0, 1.0]  # one reference supports nothing


def test_humans_only_gives_the_wilson_interval_and_no_labels_gives_everything():
    est = rate_estimate(np.zeros(10), np.array([]), np.array([]), np.array([]))
    assert est["rate"] == 0.0 and est["ci"] == pytest.approx([0.0, 0.2775], abs=1e-4)
    assert est["method"].startswith("classical")
    lo, hi = wilson_interval(7, 10)
    assert lo == pytest.approx(0.3968, abs=1e-4) and hi == pytest.approx(0.8922, abs=1e-4)
    assert rate_estimate([], [], [], [])["ci"] == [0.0, 1.0]


def test_an_unaudited_auto_stratum_counts_anywhere_in_0_1():
    est = rate_estimate(np.ones(10), np.zeros(10), np.array([1.0]), np.array([1.0]))
    assert est["ci"][0] <= 0.5 * wilson_interval(10, 10)[0] + 1e-9 and est["ci"][1] == pytest.approx(1.0)
    assert "unaudited" in est["method"]


def test_a_small_audit_that_agrees_everywhere_does_not_claim_a_perfect_model():
    est = rate_estimate([], np.ones(100), np.ones(5), np.ones(5))
    assert est["ci"][0] < 0.85


@pytest.fixture(scope="module")
def board_env(tmp_path_factory):
    """A labels folder written by hand: every continuation human-labelled with its simulator truth."""
    with torch_threads(1):
        env = make_env(tmp_path_factory.mktemp("board"))
    suite = env["suite"]
    truth = {t["continuation_id"]: t for t in load_truth(suite.root)}
    out = env["root"] / "labels"
    out.mkdir()
    (out / JOB_FILE).write_text(json.dumps(job_spec(env["model"], suite, 16, 0.0, 0, "warn")))
    rows = []
    for c in suite.continuations:
        t = truth[c.continuation_id]
        rows.append({"continuation_id": c.continuation_id, "decision": "human", "audit": False,
                     "outcome": t["outcome"], "marker_s": t["marker_s"], "human_outcome": t["outcome"],
                     "human_marker_s": t["marker_s"], "model_outcome": "failure", "label_source": "human"})
    (out / LABELS_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return {**env, "labels": out, "truth": truth}


def test_leaderboard_on_a_hand_made_table(board_env):
    board = leaderboard(board_env["labels"], with_truth=True, use_references=False)
    suite, truth = board_env["suite"], board_env["truth"]
    for agent, a in board["agents"].items():
        outcomes = [truth[c.continuation_id]["outcome"] == "success" for c in suite.continuations if c.agent_id == agent]
        assert a["rate"] == pytest.approx(np.mean(outcomes)) and a["labelled_rate"] == pytest.approx(np.mean(outcomes))
        assert tuple(a["ci"]) == pytest.approx(wilson_interval(int(np.sum(outcomes)), len(outcomes)))
        assert a["n_human"] == len(outcomes) and a["n_auto"] == 0 and a["waiting"] == 0
        assert a["consistency"] is None or 0 <= a["consistency"] <= 1
        assert all(t >= 0 for t in a["time_to_success_s"]) and len(a["time_to_success_s"]) == sum(outcomes)
    rates = [board["agents"][a]["rate"] for a in board["ranking"]]
    assert rates == sorted(rates, reverse=True)
    assert board["truth"]["spearman"] == pytest.approx(1.0) and board["truth"]["coverage"] == 1.0
    assert board["truth"]["labelled"]["spearman"] == pytest.approx(1.0)
    for sid, s in board["scenarios"].items():
        assert 0 <= s["success_rate"] <= 1 and s["ci"][0] <= s["success_rate"] <= s["ci"][1]


def test_with_references_the_labels_are_checked_against_gold(board_env):
    board = leaderboard(board_env["labels"], with_truth=True)
    refs = {r.continuation_id for r in board_env["suite"].references}
    for agent, a in board["agents"].items():
        n_refs = sum(c.continuation_id in refs for c in board_env["suite"].continuations if c.agent_id == agent)
        assert a["n_gold"] == n_refs
        if n_refs >= 2:  # labels equal to the truth: nothing to correct, the interval still holds the truth
            assert a["method"] == "ppi vs references (gold)" and "vs_humans" in a
            assert a["ci"][0] <= board["truth"]["true_rates"][agent] <= a["ci"][1]
        assert a["labelled_rate"] == pytest.approx(board["truth"]["true_rates"][agent])


def test_cli_leaderboard_writes_json_and_html_with_figures(board_env, tmp_path, capsys):
    out = tmp_path / "report.html"
    assert cli.main(["leaderboard", "--labels", str(board_env["labels"]), "--out", str(out), "--truth"]) == 0
    text = capsys.readouterr().out
    assert "95% interval" in text and "Spearman" in text
    page = out.read_text()
    assert page.count("data:image/png;base64,") == 4
    board = json.loads(out.with_suffix(".json").read_text())
    assert set(board["agents"]) == {c.agent_id for c in board_env["suite"].continuations}
