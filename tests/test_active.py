"""Active learning: strategies, diversity, selection files, and a round that never promotes a worse challenger."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from autorater.app import cli
from autorater.data.suite import Annotation, Suite
from autorater.models import AutoModel
from autorater.serving.labelling.active import (
    acquisition_scores,
    class_balanced_top,
    diverse_top,
    run_round,
    select,
    unlabelled,
)
from autorater.serving.labelstudio.formats import annotations_to_export, validate_tasks
from autorater.training.recipe import TrainConfig
from model_suites import fresh_tracking_uri, learnable_suite, one_thread

RECIPE = {"epochs": 40, "lr": 3e-3, "batch_size": 8, "stream": {"mismatch_share": 0.0}, "aggregation": "majority",
          "patience": 40, "warmup_steps": 1, "val_share": 0.2}


def test_uncertainty_and_margin_rank_alike_and_entropy_also_counts_the_marker():
    p = np.array([0.5, 0.9, 0.3, 0.99, 0.6])
    u, m = acquisition_scores(p, strategy="uncertainty"), acquisition_scores(p, strategy="margin")
    assert list(np.argsort(-u)) == list(np.argsort(-m)) and np.argmax(u) == 0
    e = acquisition_scores(np.array([0.9, 0.9]), [0.1, 3.0], [4.0, 4.0], strategy="entropy")
    assert e[1] > e[0]  # same outcome confidence, a vaguer marker: ask about it first
    r1, r2 = (acquisition_scores(p, strategy="random", rng=np.random.default_rng(5)) for _ in range(2))
    assert np.array_equal(r1, r2)
    with pytest.raises(ValueError, match="unknown strategy"):
        acquisition_scores(p, strategy="loudest")


def test_diverse_top_spreads_over_scenarios_and_categories_then_fills():
    rng = np.random.default_rng(0)
    n = 60
    scenario = [f"s{i // 6}" for i in range(n)]  # 10 scenarios of 6
    category = [("a", "b")[(i // 6) % 2] for i in range(n)]
    scores = rng.random(n)
    scores[:6] += 10  # one scenario is far more uncertain than the rest
    chosen = diverse_top(scores, scenario, category, 8)
    assert len(chosen) == len(set(chosen)) == 8
    assert len({scenario[i] for i in chosen}) == 8  # one per scenario while scenarios last
    assert {category[i] for i in chosen} == {"a", "b"}
    assert 0 in chosen or any(scenario[i] == "s0" for i in chosen)  # the hardest scenario still gets its turn
    everything = diverse_top(scores, scenario, category, 100)
    assert sorted(everything) == list(range(n))  # fewer scenarios than the budget: filled by score


def test_select_returns_budget_distinct_ids():
    rows = [{"continuation_id": f"c{i}", "p_success": p, "scenario_id": f"s{i % 7}", "category": "x",
             "marker_spread_s": 0.2, "duration_s": 4.0} for i, p in enumerate(np.linspace(0.01, 0.99, 30))]
    for strategy in ("uncertainty", "margin", "entropy", "random"):
        ids = select(rows, 5, strategy)
        assert len(ids) == len(set(ids)) == 5
    plain = select(rows, 3, "uncertainty", diversity=False)
    assert plain == sorted(plain, key=lambda c: abs(rows[int(c[1:])]["p_success"] - 0.5))[:3]


def test_balanced_acquisition_does_not_over_draw_the_class_the_labelled_set_holds():
    rng = np.random.default_rng(0)
    # the model's doubts are among predicted successes; its predicted failures are confident
    p = rng.permutation(np.r_[rng.uniform(0.5, 0.7, 300), rng.uniform(0.05, 0.3, 100)])
    rows = [{"continuation_id": f"c{i}", "p_success": float(v), "scenario_id": f"s{i // 2}", "category": "xy"[i % 2]}
            for i, v in enumerate(p)]
    share = lambda ids: np.mean([p[int(c[1:])] >= 0.5 for c in ids])  # noqa: E731 - predicted successes drawn
    plain = select(rows, 40, "uncertainty")
    even = select(rows, 40, "balanced")
    leaning = select(rows, 40, "balanced", labelled=(70, 30))  # the labelled set already holds successes
    assert share(plain) > 0.6 and share(even) == 0.5 and share(leaning) == 0
    assert len(set(leaning)) == 40 and len({rows[int(c[1:])]["scenario_id"] for c in even}) == 40
    few_failures = class_balanced_top(np.ones(10), np.r_[np.full(8, 0.9), 0.1, 0.2], 6)
    assert len(set(few_failures)) == 6 and {8, 9} <= set(few_failures)  # the short class leaves its places


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("active")
    before = one_thread()
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(cli.common, "threads", lambda: None)
            # The champion learns the bright square on a fully labelled suite; the pool has 8 references,
            # 4 labelled continuations and 20 unlabelled ones.
            base = learnable_suite(root / "base", n_scenarios=12, per_scenario=2, seed=1)
            pool = learnable_suite(root / "pool", n_scenarios=16, per_scenario=2, n_references=8)
            judge = learnable_suite(root / "judge", n_scenarios=20, per_scenario=2, seed=3, n_references=40)
            truth = {a.continuation_id: a.outcome for a in pool.annotations}
            keep = set(pool.continuation_ids()[:12])
            pool.annotations = [a for a in pool.annotations if a.continuation_id in keep]
            pool.write()
            uri = fresh_tracking_uri(tmp_path_factory, root / "runs")
            (root / "config.json").write_text(json.dumps({"preset": "tiny", "train": RECIPE}))
            assert cli.main(["train", "--suite", str(base.root), "--out", str(root / "champion"), "--config",
                             str(root / "config.json"), "--tracking-uri", uri, "--cache-dir", str(root / "cache"),
                             "--quiet"]) == 0
            assert cli.main(["promote", "--tracking-uri", uri]) == 0
            yield {"root": root, "pool": Suite.load(pool.root), "truth": truth, "uri": uri, "mp": mp, "judge": judge}
    finally:
        torch.set_num_threads(before)


def test_active_select_writes_a_valid_queue_of_unlabelled_continuations(env):
    out = env["root"] / "queue"
    assert cli.main(["active", "select", "--model", str(env["root"] / "champion"), "--pool", str(env["pool"].root),
                     "--budget", "6", "--out", str(out), "--quiet"]) == 0
    chosen = [json.loads(line)["continuation_id"] for line in (out / "selection.jsonl").read_text().splitlines()]
    assert len(chosen) == 6 and set(chosen) <= set(unlabelled(env["pool"]))
    tasks = json.loads((out / "labelstudio" / "tasks.json").read_text())
    assert [t["data"]["continuation_id"] for t in tasks] == chosen and validate_tasks(tasks) == []


def _answer(env, tasks, flip: bool):
    answers = []
    for t in tasks:
        cid = t["data"]["continuation_id"]
        outcome = env["truth"][cid]
        if flip:
            outcome = "failure" if outcome == "success" else "success"
        answers += [Annotation(cid, who, outcome, marker_s=0.5) for who in ("h1", "h2")]
    return annotations_to_export(tasks, answers)


def test_a_round_never_promotes_a_worse_challenger(env, tmp_path):
    import shutil

    from autorater.mlflow_registry import mlflow_client

    pool_dir = tmp_path / "pool"
    shutil.copytree(env["pool"].root, pool_dir)
    out = tmp_path / "queue"
    assert cli.main(["active", "select", "--model", str(env["root"] / "champion"), "--pool", str(pool_dir),
                     "--budget", "20", "--out", str(out), "--quiet"]) == 0
    tasks = json.loads((out / "labelstudio" / "tasks.json").read_text())
    export = tmp_path / "export.json"
    export.write_text(json.dumps(_answer(env, tasks, flip=True)))  # annotators who say the opposite
    before = mlflow_client(env["uri"]).get_model_version_by_alias("autorater", "champion").version
    result = run_round(env["root"] / "champion", pool_dir, tmp_path / "round", env["uri"], export=export,
                       tasks_file=out / "labelstudio" / "tasks.json", finetune=False,
                       cache_dir=str(env["root"] / "cache"), train_config=TrainConfig.from_dict(RECIPE))
    assert result["new_labels"] == 40
    assert len(Suite.load(pool_dir).annotations) == len(env["pool"].annotations) + 40
    assert result["ba_champion"] >= 0.8 and result["ba_challenger"] < result["ba_champion"]  # a worse challenger
    assert not result["promoted"] and result["ba_gain_ci"][1] is not None
    split = result["references_split"]
    assert split["n_calibrate"] + split["n_judge"] == 8 and result["n_references"] == split["n_judge"]
    after = mlflow_client(env["uri"]).get_model_version_by_alias("autorater", "champion").version
    assert (str(after) == str(result["challenger_version"])) == result["promoted"]
    if not result["promoted"]:
        assert after == before
    saved = json.loads((tmp_path / "round" / "round.json").read_text())
    assert saved["ba_champion"] == result["ba_champion"] and "rule" in saved
    tags = mlflow_client(env["uri"]).get_run(result["challenger_run"]).data.tags
    assert tags["active.promoted"] == str(result["promoted"]).lower()


def test_cli_round_prints_the_comparison(env, tmp_path, capsys):
    import shutil

    pool_dir = tmp_path / "pool"
    shutil.copytree(env["pool"].root, pool_dir)
    code = cli.main(["active", "round", "--model", str(env["root"] / "champion"), "--pool", str(pool_dir), "--out",
                     str(tmp_path / "round"), "--tracking-uri", env["uri"], "--epochs", "2", "--cache-dir",
                     str(env["root"] / "cache"), "--quiet"])
    assert code == 0
    out = capsys.readouterr().out
    assert "champion BA" in out and "challenger BA" in out and ("promoted" in out)


def test_a_better_challenger_is_promoted(env, tmp_path):
    import shutil

    from autorater.mlflow_registry import mlflow_client
    from autorater.models import PRESETS

    pool_dir = tmp_path / "pool"
    shutil.copytree(env["pool"].root, pool_dir)
    torch.manual_seed(0)
    weak = AutoModel.from_config(PRESETS["tiny"]).save_pretrained(tmp_path / "weak")  # an untrained champion
    pool = Suite.load(pool_dir)
    tasks = [{"data": {"continuation_id": c, "fps": 8.0, "frames": 8}} for c in unlabelled(pool)]
    export = tmp_path / "export.json"
    export.write_text(json.dumps(_answer(env, tasks, flip=False)))
    result = run_round(weak, pool_dir, tmp_path / "round", env["uri"], export=export, finetune=False,
                       cache_dir=str(env["root"] / "cache"), train_config=TrainConfig.from_dict(RECIPE),
                       references_dir=env["judge"].root)
    assert result["ba_challenger"] > result["ba_champion"] and result["promoted"]
    assert result["ba_gain_ci"][0] > 0  # promoted on evidence: the whole interval above zero
    alias = mlflow_client(env["uri"]).get_model_version_by_alias("autorater", "champion").version
    assert str(alias) == str(result["challenger_version"])
    metrics = mlflow_client(env["uri"]).get_run(result["challenger_run"]).data.metrics  # MLflow holds the comparison
    assert metrics["round.comparison.difference"] == pytest.approx(result["ba_gain"])
    assert metrics["round.comparison.ci_low"] == pytest.approx(result["ba_gain_ci"][0])
    assert {f"round.comparison.{k}" for k in ("ba_champion", "ba_challenger", "ci_high")} <= set(metrics)
    calibrated = set(json.loads((tmp_path / "round" / "challenger" / "calibration.json").read_text())["scaling_ids"])
    assert calibrated and not calibrated & set(result["references_split"]["judge_ids"])


def test_references_that_calibrated_the_champion_never_judge():
    from autorater.serving.labelling.active import judging_split

    class Refs:  # the little of a Suite that judging_split reads
        root = "refs"
        references = [type("R", (), {"continuation_id": f"c{i}"})() for i in range(12)]

        def get(self, cid):
            return type("C", (), {"scenario_id": f"s{int(cid[1:]) // 2}"})()

    calibrate_on, judge_on, how = judging_split(Refs(), {"scaling_ids": ["c0", "c1"], "threshold_ids": ["c4"]})
    assert calibrate_on == ["c0", "c1", "c4"] and set(judge_on) == {f"c{i}" for i in range(12)} - {"c0", "c1", "c4"}
    calibrate_on, judge_on, how = judging_split(Refs(), {})  # nothing recorded: whole scenarios drawn
    assert not set(calibrate_on) & set(judge_on) and len(calibrate_on) + len(judge_on) == 12
    assert {int(c[1:]) // 2 for c in calibrate_on}.isdisjoint({int(c[1:]) // 2 for c in judge_on})
    with pytest.raises(ValueError, match="none is left to judge"):
        judging_split(Refs(), {"scaling_ids": [f"c{i}" for i in range(12)]})
