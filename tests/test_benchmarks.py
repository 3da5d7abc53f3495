"""The quality benchmark: its recipe-variant options (--set / --train-set FIELD=VALUE), its pooled score on the two
unseen-scenario draws, and the grounding probe's windows."""

import numpy as np
import pytest
import torch

from autorater.models import PRESETS, EventsConfig, GeneralConfig
from autorater.training.recipe import TrainConfig
from benchmarks.quality import nested, parse_overrides
from benchmarks.quality_suites import plans


def test_set_takes_json_values_and_bare_strings():
    got = parse_overrides(["image_size=112", "text_encoder=bow", "pose=true", 'encoder="tiny_cnn"'], EventsConfig)
    assert got == {"image_size": 112, "text_encoder": "bow", "pose": True, "encoder": "tiny_cnn"}
    assert PRESETS["babyai-grid"].replace(**got).encoder == "tiny_cnn"
    with pytest.raises(SystemExit, match="not a GeneralConfig field"):  # each architecture has its own fields
        parse_overrides(["places=3"], type(PRESETS["general"]))


def test_set_reaches_a_part_of_the_config_by_its_dotted_or_flat_name():
    got = parse_overrides(["outcome.blocks=0", "outcome_dim=64"], GeneralConfig)
    config = PRESETS["general"].replace(**got)
    assert (config.outcome.blocks, config.outcome.dim, config.outcome.frames) == (0, 64, 4)
    with pytest.raises(SystemExit, match="must be int"):
        parse_overrides(["outcome.blocks=all"], GeneralConfig)


def test_each_world_holds_out_scenarios_agents_tasks_and_meta_world_a_camera():
    from autorater.data.worlds.metaworld.tasks import MT10

    for world, sets in plans().items():
        train = sets.pop("train")
        assert len({p.seed for p in sets.values()} | {train.seed}) == len(sets) + 1  # every set is a new draw
        if world != "metaworld-views":  # views: two views of every training rollout, scored on new cameras only
            assert not set(sets["unseen_agents"].agents) & set(train.agents)
    views = plans()["metaworld-views"]
    assert set(views) == {"train", "unseen_scenarios", "unseen_camera"} and views["train"].camera == "random"
    mw = plans()["metaworld"]
    assert not set(mw["unseen_tasks"].tasks) & set(MT10) and len(mw["unseen_tasks"].tasks) == 10
    assert mw["unseen_camera"].camera not in (None, "corner")
    assert all(p.camera == "random" for name, p in mw.items() if name != "unseen_camera")
    one = plans()["metaworld-one"]  # one camera: every set but the unseen camera from corner
    assert {p.camera for name, p in one.items() if name != "unseen_camera"} == {"corner"}
    assert one["unseen_camera"].camera == mw["unseen_camera"].camera


def test_train_set_checks_train_config_fields_and_widens_ints_to_floats():
    got = parse_overrides(["augment.rotate=false", "lr=1"], TrainConfig, "--train-set")
    assert got == {"augment.rotate": False, "lr": 1.0} and isinstance(got["lr"], float)
    assert nested(got) == {"augment": {"rotate": False}, "lr": 1.0}
    with pytest.raises(SystemExit, match="rotate: not a TrainConfig field; known: .*augment.rotate"):
        parse_overrides(["rotate=false"], TrainConfig, "--train-set")  # one name per field


@pytest.mark.parametrize("item, names", [("image_size", "FIELD=VALUE"), ("imagesize=112", "imagesize"),
                                         ("image_size=big", "must be int.*image_size=112"), ("pose=1", "bool")])
def test_a_bad_set_names_the_field_and_the_fix(item, names):
    with pytest.raises(SystemExit, match=names):
        parse_overrides([item], EventsConfig)


def test_readability_tiles_keep_each_tiles_colours_in_place():
    import numpy as np

    from benchmarks.readability import FRONT, tile_features

    frame = np.zeros((112, 112, 3), dtype=np.uint8)
    r, c = FRONT
    frame[r * 16:(r + 1) * 16, c * 16:c * 16 + 8] = (255, 0, 0)  # the left half of the front tile is red
    x = tile_features(frame, cells=7, block=4)
    assert x.shape == (7, 7, 3 * 4 * 4)
    assert x.sum() == x[r, c].sum() > 0  # nothing leaks into other tiles
    blocks = x[r, c].reshape(4, 4, 3)
    assert np.allclose(blocks[:, :2], (1, 0, 0)) and np.allclose(blocks[:, 2:], 0)  # left half red, right black


def test_long_variant_names_stay_distinct_and_short():
    from benchmarks.quality import variant_slug

    first = [f"field_{i}=true" for i in range(12)]
    second = first + ["init_from=bench-out/model-" + "x" * 100]
    assert variant_slug(["image_size=112"]) == "image_size_112"
    assert len(variant_slug(first)) <= 120 and len(variant_slug(second)) <= 120
    assert variant_slug(first) != variant_slug(second)  # a second stage never overwrites its first


def test_active_benchmark_refuses_a_pool_folder_without_a_suite(tmp_path):
    from benchmarks.active_learning import main

    with pytest.raises(SystemExit, match="no suite.json there"):
        main(["--pool", str(tmp_path / "missing"), "--out", str(tmp_path / "out")])
    assert not (tmp_path / "missing").exists()  # nothing generated into a folder the user named


def test_pooled_outcome_scores_both_draws_as_one_sample(tmp_path):
    """The two unseen-scenario draws are pooled row by row, each against its own truth; errors and rows
    without truth are left out."""
    import json
    from types import SimpleNamespace

    from autorater.calibration.metrics import outcome_metrics
    from benchmarks.quality_scores import pooled_outcome

    def suite(name, outcomes):
        (tmp_path / name).mkdir()
        (tmp_path / name / "simulator_truth.jsonl").write_text("".join(
            json.dumps({"continuation_id": f"{name}-{i}", "outcome": o}) + "\n" for i, o in enumerate(outcomes)))
        return SimpleNamespace(root=tmp_path / name, info=SimpleNamespace(version=name))

    a = suite("a", ["success", "success", "failure", "failure"])
    b = suite("b", ["success", "failure", "failure", "failure", "failure", "failure"])
    rows_a = [{"continuation_id": "a-0", "outcome": "success"}, {"continuation_id": "a-1", "outcome": "failure"},
              {"continuation_id": "a-2", "outcome": "failure"}, {"continuation_id": "a-3", "error": "decode"},
              {"continuation_id": "other", "outcome": "success"}]
    rows_b = [{"continuation_id": f"b-{i}", "outcome": o} for i, o in
              enumerate(["success", "success", "failure", "failure", "failure", "failure"])]
    got = pooled_outcome([(rows_a, a), (rows_b, b)])
    want = outcome_metrics([1, 1, 0] + [1, 0, 0, 0, 0, 0], [1, 0, 0] + [1, 1, 0, 0, 0, 0])
    assert got["n"] == 9 and got["suites"] == ["a", "b"]
    assert got["balanced_accuracy"] == pytest.approx(want["balanced_accuracy"])
    assert got["auroc"] != got["auroc"]  # rows without a score: no AUROC (NaN), the rest still scored
    # pooling is not the mean of the two suites' balanced accuracies (their class balance differs)
    mean = (outcome_metrics([1, 1, 0], [1, 0, 0])["balanced_accuracy"] +
            outcome_metrics([1, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0])["balanced_accuracy"]) / 2
    assert got["balanced_accuracy"] != pytest.approx(mean)
    lo, hi = got["balanced_accuracy_ci95"]
    assert 0 <= lo <= got["balanced_accuracy"] <= hi <= 1 and hi > lo


def test_paired_compares_two_prediction_folders_on_the_videos_both_rated_by_scenario(tmp_path):
    """B is right where A errs on one scenario's videos: the difference is B - A, the interval resamples scenarios,
    a set only one folder scored is left out, and an unknown folder names the ones there are."""
    import json

    from benchmarks.paired import compare, main

    truth = [{"continuation_id": f"c{i}", "scenario_id": f"s{i // 2}", "outcome": "success" if i % 2 else "failure"}
             for i in range(40)]
    (tmp_path / "suites" / "held").mkdir(parents=True)
    (tmp_path / "suites" / "held" / "suite.json").write_text("{}")
    (tmp_path / "suites" / "held" / "simulator_truth.jsonl").write_text("".join(json.dumps(t) + "\n" for t in truth))

    def write(name, wrong, set_name="held"):
        (tmp_path / "predictions" / name).mkdir(parents=True, exist_ok=True)
        flip = {"success": "failure", "failure": "success"}
        rows = [{"continuation_id": t["continuation_id"], "outcome": flip[t["outcome"]] if i in wrong else t["outcome"]}
                for i, t in enumerate(truth)]
        (tmp_path / "predictions" / name / f"{set_name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    write("a", wrong=set(range(10)))
    write("b", wrong={11})
    write("b", wrong=set(), set_name="only_in_b")
    table = compare(tmp_path, "a", "b")
    assert list(table) == ["held"] and table["held"]["n"] == 40 and table["held"]["n_groups"] == 20
    assert table["held"]["difference"] == pytest.approx(table["held"]["ba_b"] - table["held"]["ba_a"])
    assert table["held"]["difference"] > 0.15
    assert table["held"]["ci"][0] <= table["held"]["difference"] <= table["held"]["ci"][1]
    assert main(["a", "b", "--root", str(tmp_path)]) == 0
    assert (tmp_path / "results" / "paired-a-vs-b.json").is_file()
    with pytest.raises(SystemExit, match="not a prediction folder.*'a', 'b'"):
        main(["a", "c", "--root", str(tmp_path)])


def test_swap_pairs_count_only_videos_the_swap_turns_to_failure_and_a_blind_rater_scores_zero(tmp_path):
    import json
    from types import SimpleNamespace

    from benchmarks.quality_scores import swap_pairs

    def suite(name, outcomes):
        (tmp_path / name).mkdir()
        (tmp_path / name / "simulator_truth.jsonl").write_text("".join(
            json.dumps({"continuation_id": f"c{i}", "outcome": o}) + "\n" for i, o in enumerate(outcomes)))
        return SimpleNamespace(root=tmp_path / name)

    own = suite("own", ["success", "success", "success", "failure"])
    swapped = suite("swapped", ["failure", "failure", "success", "failure"])  # c0, c1 turn; c2 stays; c3 was failed

    def rows(outcomes, p):
        return [{"continuation_id": f"c{i}", "outcome": o, "p_success": q} for i, (o, q) in enumerate(zip(outcomes, p))]

    reader = swap_pairs(rows(["success", "success", "success", "failure"], [0.9, 0.8, 0.9, 0.1]),
                        rows(["failure", "success", "success", "failure"], [0.1, 0.6, 0.9, 0.1]), own, swapped)
    assert reader == {"n": 2, "both_right": 0.5, "p_drops": 1.0}
    same = rows(["success"] * 4, [0.7] * 4)  # the words change nothing: one answer for both
    assert swap_pairs(same, same, own, swapped) == {"n": 2, "both_right": 0.0, "p_drops": 0.0}
    assert swap_pairs(same, [], own, swapped)["n"] == 0


def test_labels_to_reach_interpolates_and_the_shares_cover_every_budget():
    from benchmarks.active_learning import labels_to_reach, shares_by_budget

    random = [{"labels": 100, "balanced_accuracy": 0.6}, {"labels": 200, "balanced_accuracy": 0.7},
              {"labels": 300, "balanced_accuracy": 0.8}]
    smart = [{"labels": 100, "balanced_accuracy": 0.6}, {"labels": 200, "balanced_accuracy": 0.8},
             {"labels": 300, "balanced_accuracy": 0.78}]
    assert labels_to_reach(smart, 0.7) == pytest.approx(150)
    assert labels_to_reach(smart, 0.8) == 200 and labels_to_reach(smart, 0.9) is None
    shares = shares_by_budget({"random": random, "smart": smart})
    assert list(shares) == [200, 300]
    assert shares[200] == {"random": 1.0, "smart": pytest.approx(0.75)}
    assert shares[300] == {"random": 1.0, "smart": pytest.approx(200 / 300)}
    assert shares_by_budget({"smart": smart}) == {}


def test_rescoring_a_saved_model_refuses_a_variant_and_a_folder_without_its_record(tmp_path):
    from benchmarks.quality import _reuse

    with pytest.raises(SystemExit, match="leave --set/--train-set out"):
        _reuse(str(tmp_path), {"train": {}}, ["seed=1"])
    with pytest.raises(SystemExit, match="no metadata.json.*model-seed_0"):
        _reuse(str(tmp_path), {"train": {}}, [])


def _truth_suite(root):
    """A learnable suite that also carries the simulator truth file the active benchmark scores against."""
    import json

    from model_suites import learnable_suite

    suite = learnable_suite(root, n_scenarios=4, per_scenario=2, seed=1)
    outcomes = {a.continuation_id: a.outcome for a in suite.annotations}
    (root / "simulator_truth.jsonl").write_text("".join(json.dumps({"continuation_id": c, "outcome": o}) + "\n"
                                                        for c, o in outcomes.items()))
    return suite


def _tiny_active(tmp_path, epochs: int) -> tuple:
    """run_strategy's arguments after the strategy: a learnable pool of 16, a truth suite, +3 a round, 2 rounds."""
    from model_suites import learnable_suite

    pool, test = learnable_suite(tmp_path / "pool", n_scenarios=8, per_scenario=2), _truth_suite(tmp_path / "test")
    tc = TrainConfig(epochs=epochs, patience=epochs, batch_size=8, warmup_steps=1, val_share=0.25,
                     cache_dir=str(tmp_path / "cache"), seed=0)
    durations = {c: 1.0 for c in pool.continuation_ids()}
    return pool, test, set(pool.continuation_ids()[::4]), 3, 2, tc, PRESETS["tiny"], durations, 0


def test_an_interrupted_active_benchmark_resumes_to_the_same_curve_without_retraining_finished_rounds(tmp_path):
    from benchmarks.active_learning import run_strategy
    from model_suites import one_thread

    before = one_thread()
    try:
        args = ("uncertainty", *_tiny_active(tmp_path, epochs=3))
        saved = []
        full = run_strategy(*args, on_round=lambda curve: saved.append([dict(p) for p in curve]))
        assert [len(s) for s in saved] == [1, 2, 3] and saved[-1] == full  # progress after every round
        assert [p["labels"] for p in full] == [4, 7, 10]
        trained: dict = {}
        resumed = run_strategy(*args, trained=trained, done=saved[1])  # the crash came during round 2
        def same(curve):
            return [{k: v for k, v in p.items() if k != "train_s"} for p in curve]  # seconds vary

        assert same(resumed) == same(full)  # same picks, same scores
        assert sum(model is not None for model, _, _ in trained.values()) == 2  # round 0 was not trained again
    finally:
        torch.set_num_threads(before)


def test_a_random_first_round_takes_randoms_picks_and_shares_its_model(tmp_path):
    from benchmarks.active_learning import run_strategy
    from model_suites import one_thread

    before = one_thread()
    try:
        args, trained = _tiny_active(tmp_path, epochs=2), {}
        random = run_strategy("random", *args, trained=trained)
        warm = run_strategy("uncertainty", *args, trained=trained, random_rounds=1)
        assert warm[1]["labelled"] == random[1]["labelled"]  # round 1: random's picks
        assert len(trained) == 4  # the start, random's two rounds, and the warm start's own last round
    finally:
        torch.set_num_threads(before)


def test_combining_seeds_averages_the_budgets_all_runs_reached_and_refuses_another_setup():
    from benchmarks.active_learning import combine

    def run(seed, random, smart, **changes):
        def curve(bas):
            return [{"labels": 100 * (i + 1), "balanced_accuracy": b} for i, b in enumerate(bas)]

        return {"args": {"seed": seed, "start": 100, "budget": 100, "rounds": 2, "pool": "p", "test": "t",
                         **changes}, "curves": {"random": curve(random), "smart": curve(smart)}}

    runs = {"a": run(0, [0.6, 0.7, 0.8], [0.6, 0.8, 0.85]), "b": run(1, [0.6, 0.7, 0.9], [0.6, 0.9])}  # b unfinished
    out = combine(runs)
    assert [p["labels"] for p in out["mean_curves"]["random"]] == [100, 200, 300]
    assert [p["labels"] for p in out["mean_curves"]["smart"]] == [100, 200]  # 300: only one run got there
    assert out["mean_curves"]["random"][-1]["balanced_accuracy"] == pytest.approx(0.85)
    assert out["labels_needed_share"] == {"random": 1.0, "smart": pytest.approx(200 / 300)}  # smart's mean 0.85
    assert out["labels_needed_share_per_run"]["a"]["smart"] == pytest.approx(200 / 300)
    with pytest.raises(ValueError, match="budget differ"):
        combine({**runs, "c": run(2, [0.6], [0.6], budget=50)})
    with pytest.raises(ValueError, match="random_rounds differ"):  # a warm start is another setup
        combine({**runs, "d": run(3, [0.6], [0.6], random_rounds=1)})
    assert combine({"a": runs["a"], "e": run(4, [0.6], [0.6], random_rounds=0)})["setup"]["random_rounds"] == 0


def test_the_headline_counts_labels_to_each_target_and_the_lead_over_random_with_its_interval():
    from benchmarks.active_learning import headline

    def run(random, smart, full):
        def curve(bas):
            return [{"labels": 100 * (i + 1), "balanced_accuracy": b} for i, b in enumerate(bas)]

        return {"curves": {"random": curve(random), "smart": curve(smart)}, "full_pool_ba": full}

    runs = {"a": run([0.6, 0.8, 0.9], [0.6, 0.9, 0.92], 0.9), "b": run([0.6, 0.7, 0.8], [0.6, 0.8, 0.9], 1.0),
            "c": run([0.6, 0.75, 0.84], [0.6, 0.86, 0.88], 0.9)}
    h = headline(runs)
    smart, random = h["labels_needed"]["smart"], h["labels_needed"]["random"]
    expected = [100 + 100 * 0.25 / 0.3, 250, 100 + 100 * 0.25 / 0.26]  # linear between rounds
    assert smart["fixed"]["per_run"] == pytest.approx(expected)
    assert smart["fixed"]["mean"] == pytest.approx(np.mean(expected))
    assert random["fixed"]["reached"] == 1 and random["fixed"]["mean"] is None  # b and c never reach 0.85
    assert smart["of_full"]["per_run"][1] is None and smart["of_full"]["reached"] == 2  # 95% of 1.0: not reached
    assert smart["of_full"]["per_run"][0] == pytest.approx(100 + 100 * (0.855 - 0.6) / 0.3)
    lead = h["lead_over_random"]["smart"]
    assert [p["labels"] for p in lead] == [200, 300]  # not the shared start
    assert lead[0]["mean_lead"] == pytest.approx((0.1 + 0.1 + 0.11) / 3)
    lo, hi = lead[0]["ci95"]
    assert lo < lead[0]["mean_lead"] < hi and lo > 0  # three leads of about 0.1: the interval excludes 0
    assert headline({"a": runs["a"]})["lead_over_random"]["smart"][0]["ci95"] is None  # one run: no interval


def test_a_resumed_active_benchmark_refuses_progress_from_other_settings(tmp_path):
    import json

    from benchmarks.active_learning import _resume

    progress = tmp_path / "progress.json"
    progress.write_text(json.dumps({"settings": {"seed": 0, "budget": 250},
                                    "curves": {"random": [{"labelled": ["a", "b"]}]}}))
    assert _resume(progress, {"seed": 0, "budget": 250}, {"a", "b"})["random"][0]["labelled"] == ["a", "b"]
    with pytest.raises(SystemExit, match="other settings \\(budget\\)"):
        _resume(progress, {"seed": 0, "budget": 100}, {"a", "b"})
    with pytest.raises(SystemExit, match="start set"):
        _resume(progress, {"seed": 0, "budget": 250}, {"a", "c"})
    assert _resume(tmp_path / "none.json", {}, set()) == {}


def test_outcome_cost_measures_each_cut_and_the_trained_top_adds_parameters(tmp_path):
    """One row per ``outcome_blocks`` with a positive step time, encoding and rating rate and cache size; a cut whose
    top learns trains more parameters than the frozen one."""
    import json

    from benchmarks.outcome_cost import main
    from model_suites import make_tiny_suite

    suite = make_tiny_suite(tmp_path / "suite", n_scenarios=3, per_scenario=2)
    main(["--suite", str(suite.root), "--config", "tiny-general", "--blocks", "0,1", "--steps", "1", "--batch", "4",
          "--rate", "2", "--threads", "1", "--device", "cpu", "--out", str(tmp_path / "out")])
    rows = json.loads((tmp_path / "out" / "outcome_cost.json").read_text())["rows"]
    assert [r["outcome_blocks"] for r in rows] == [0, 1]
    for r in rows:
        assert r["step_s"] > 0 and r["encode_videos_per_s"] > 0 and r["rate_videos_per_s"] > 0
        assert r["cache_mb_per_video"] > 0 and r["videos"] == 6
    assert rows[1]["trainable_parameters"] > rows[0]["trainable_parameters"]
