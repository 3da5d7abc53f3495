"""Leaderboard: PPI intervals cover the true rate about 95% of the time; classical intervals; a hand-made table."""

from __future__ import annotations

import json

import numpy as np
import pytest

from autorater.app import cli
from autorater.calibration.agents.rates import (
    MIN_POOLED,
    error_counts,
    error_heterogeneity,
    group_estimates,
    rate_estimate,
    rate_pooled,
    rate_vs_gold,
    wilson_interval,
)
from autorater.data.suite import load_truth
from autorater.serving.analysis.leaderboard import leaderboard
from autorater.serving.analysis.report import format_leaderboard, write_report
from autorater.serving.labelling.folder import JOB_FILE, LABELS_FILE
from autorater.serving.labelling.label import job_spec
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


def _agents(rng, rates=(0.05, 0.08, 0.5, 0.9, 0.97), n=80, n_refs=12, miss=0.06, false_hit=0.04, miss_by=None):
    """Five agents' continuations as labels.jsonl-like rows: labels that miss ``miss`` of the successes (or
    ``miss_by[agent]``) and accept ``false_hit`` of the failures; ``n_refs`` gold references per agent."""
    rows, gold, truth = [], {}, {}
    for a, rate in enumerate(rates):
        y = rng.random(n) < rate
        m = miss if miss_by is None else miss_by[a]
        label = np.where(y, rng.random(n) >= m, rng.random(n) < false_hit)
        truth[f"a{a}"] = y.mean()
        for i in range(n):
            cid = f"a{a}-{i}"
            rows.append({"continuation_id": cid, "agent_id": f"a{a}", "outcome": "success" if label[i] else "failure",
                         "decision": "auto", "model_outcome": "success" if label[i] else "failure"})
            if i < n_refs:
                gold[cid] = "success" if y[i] else "failure"
    return rows, gold, truth


def test_pooled_references_recover_the_rates_cover_them_and_rank_as_the_label_shares():
    rng = np.random.default_rng(5)
    hits, errors, own_errors = [], [], []
    for _ in range(150):
        rows, gold, truth = _agents(rng)
        est, pooling = group_estimates(rows, gold, "agent_id")
        if not pooling["pooled"]:
            continue
        for a, e in est.items():
            hits.append(e["ci"][0] <= truth[a] <= e["ci"][1])
            errors.append(abs(e["rate"] - truth[a]))
            own_errors.append(abs(e["per_group"]["rate"] - truth[a]))
        shares = [est[a]["labelled_rate"] for a in sorted(est)]
        rates = [est[a]["rate"] for a in sorted(est)]
        assert np.all(np.diff(np.array(rates)[np.argsort(shares)]) >= -1e-12)  # an increasing function of the share
    assert len(hits) >= 500  # the references were pooled in most draws (errors do not differ between agents)
    assert np.mean(hits) >= 0.92, np.mean(hits)
    assert np.mean(errors) < 0.75 * np.mean(own_errors)  # five times the references: closer to the truth


def test_rate_pooled_undoes_known_error_rates_and_refuses_uninformative_labels():
    counts = {"pos": 100, "tp": 90, "neg": 100, "tn": 80}  # sensitivity 0.9, specificity 0.8
    labels = np.r_[np.ones(62), np.zeros(38)]  # 0.9 * 0.6 + 0.2 * 0.4 = 0.62 success labels at a true rate of 0.6
    assert rate_pooled(labels, counts)["rate"] == pytest.approx(0.6, abs=1e-9)
    assert rate_pooled(np.ones(10), {"pos": 10, "tp": 5, "neg": 10, "tn": 6})["ci"] == [0.0, 1.0]
    assert error_counts([1, 1, 0, 0, 0], [1, 0, 0, 1, 0]) == {"pos": 2, "tp": 1, "neg": 3, "tn": 2}


def test_the_heterogeneity_test_holds_its_level_and_sees_a_labeller_that_fails_one_agent():
    rng = np.random.default_rng(8)
    null = [group_estimates(*_agents(rng)[:2], "agent_id", seed=s)[1]["heterogeneity_p"] for s in range(100)]
    assert np.mean(np.array(null) < 0.05) <= 0.1
    rows, gold, _ = _agents(rng, rates=(0.9,) * 5, n_refs=30, miss_by=(0.02, 0.02, 0.02, 0.02, 0.6))
    est, pooling = group_estimates(rows, gold, "agent_id")
    assert pooling["heterogeneity_p"] < 0.05 and not pooling["pooled"] and "differ" in pooling["why"]
    assert all(e["method"] == "ppi vs references (gold)" for e in est.values())  # each by its own references
    groups, y = np.repeat(["a", "b"], 20), np.ones(40)
    assert error_heterogeneity(groups, y, y) == 1.0  # no error anywhere: nothing differs


def test_too_few_references_are_not_pooled():
    rows, gold, _ = _agents(np.random.default_rng(1), n_refs=2)
    est, pooling = group_estimates(rows, gold, "agent_id")
    assert not pooling["pooled"] and min(pooling["counts"]["pos"], pooling["counts"]["neg"]) < MIN_POOLED
    assert "too few" in pooling["why"] and all(e["method"] == "ppi vs references (gold)" for e in est.values())


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
        outcomes = [truth[c.continuation_id]["outcome"] == "success"
                    for c in suite.continuations if c.agent_id == agent]
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
    assert page.count("data:image/png;base64,") == 6  # rates, ability, difficulty by category, time, consistency, rates
    board = json.loads(out.with_suffix(".json").read_text())
    assert set(board["agents"]) == {c.agent_id for c in board_env["suite"].continuations}


def test_the_labelling_benchmark_scores_every_estimate_over_repeated_draws(board_env):
    from benchmarks.labelling import bench_leaderboard

    res = bench_leaderboard(board_env["labels"], board_env["suite"], repeats=2, audit_share=0.2)
    g, h = res["vs_references"], res["vs_humans"]
    assert set(g) == {"pooled_share", "ability", "rate", "labelled", "per_group"} and "per_group" not in h
    assert -1 <= g["ability"]["spearman_min"] <= g["ability"]["spearman_mean"] <= 1
    assert g["ability"]["every_agent_and_scenario_with_an_interval"] == 1.0
    assert g["pooled_share"] == 0.0  # a handful of references: never pooled, so the rate is each agent's own
    assert g["rate"] == g["per_group"]
    for r in (g["rate"], g["per_group"], h["rate"]):
        assert -1 <= r["spearman_min"] <= r["spearman_mean"] <= 1 and 0 <= r["coverage_95"] <= 1
    assert "coverage_95" not in g["labelled"]  # the plain share has no interval


def test_every_agent_has_an_ability_and_every_scenario_a_difficulty_with_intervals(board_env, tmp_path):
    board = leaderboard(board_env["labels"], with_truth=True)
    for a in board["agents"].values():
        assert a["ability_ci"][0] <= a["ability"] <= a["ability_ci"][1]
    for s in board["scenarios"].values():
        assert s["difficulty_ci"][0] <= s["difficulty"] <= s["difficulty_ci"][1]
    assert set(board["irt"]["difficulty_by_category"]) == {s["category"] for s in board["scenarios"].values()}
    assert board["truth"]["ability"]["n_agents"] == len(board["agents"])
    assert "ability (1PL" in format_leaderboard(board)
    page = write_report(board, tmp_path / "board.html").read_text()
    assert "Ability and difficulty" in page and page.count("data:image/png") == 6
    saved = json.loads((tmp_path / "board.json").read_text())
    assert all("ability_ci" in a for a in saved["agents"].values())
