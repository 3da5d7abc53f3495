"""Meta-World data variety: drawn cameras, agents whose motion does not give the outcome away, the
"agent name predicts the outcome" rule, and instruction swaps as a training suite."""

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from autorater.app.cli import main
from autorater.data.generate import generate_suite, load_truth, swap_instructions
from autorater.data.stats import agent_rule_balanced_accuracy, suite_stats
from autorater.data.suite import Suite, validate_suite
from autorater.data.worlds.metaworld import AGENTS, check_options
from autorater.data.worlds.metaworld.cameras import HOLD_OUT_DEGREES, CameraPose, angle_degrees, draw_pose, named_axis
from autorater.data.worlds.metaworld.scenes import _play, plan_scenario
from autorater.data.worlds.metaworld.sim import environment, render, reset
from autorater.data.worlds.metaworld.tasks import CROSS_SCENES

NEW_AGENTS = ("near-miss", "pause", "detour", "early-release", "overshoot", "success-then-undo")
RANDOM = dict(world="metaworld", tasks=["reach-v3", "drawer-open-v3", "pick-place-v3"], agents=("expert",) + NEW_AGENTS,
              scenarios=3, continuations_per_scenario=3, seed=5, image_size=32, progress=False, camera="random",
              hold_out_camera="corner2")


@pytest.fixture(scope="module")
def suite_dir(tmp_path_factory) -> Path:
    return generate_suite(tmp_path_factory.mktemp("mwr") / "s", workers=1, **RANDOM)


def test_a_drawn_camera_differs_per_scenario_is_recorded_and_the_suite_does_not_depend_on_workers(suite_dir,
                                                                                                    tmp_path):
    assert validate_suite(suite_dir) == []
    suite = Suite.load(suite_dir)
    poses = [s.metadata["camera_pose"] for s in suite.scenarios]
    assert all(s.metadata["camera"] == "random" and "camera:random" in s.tags for s in suite.scenarios)
    assert len({json.dumps(p, sort_keys=True) for p in poses}) == len(poses)  # a new camera per scenario
    by_scenario = {s.scenario_id: s.metadata["camera_pose"] for s in suite.scenarios}
    assert all(t["camera_pose"] == by_scenario[t["scenario_id"]] for t in load_truth(suite_dir))  # and in the truth
    again = generate_suite(tmp_path / "again", workers=2, **RANDOM)
    for name in ("scenarios.jsonl", "continuations.jsonl", "annotations.jsonl", "simulator_truth.jsonl"):
        assert (again / name).read_text() == (suite_dir / name).read_text(), name
    source = suite.info.source
    assert source["camera_range"]["hold_out_cameras"] == ["corner2"] and source["cameras"] == ["random"]


def test_no_drawn_camera_comes_within_the_held_out_cameras_neighbourhood(suite_dir):
    env = environment("reach-v3", 32)
    corner2 = named_axis(env.model, "corner2")
    points = np.array([[0.0, 0.6, 0.0], [0.1, 0.8, 0.3], [-0.1, 0.7, 0.02]])
    rng = np.random.default_rng(0)
    for degrees in (HOLD_OUT_DEGREES, 60.0):
        angles = [angle_degrees(draw_pose(rng, points, [corner2], degrees).axis(), corner2) for _ in range(300)]
        assert min(angles) >= degrees
    free = [angle_degrees(draw_pose(rng, points).axis(), corner2) for _ in range(300)]
    assert min(free) < HOLD_OUT_DEGREES  # the range does reach there when nothing is held out
    for s in Suite.load(suite_dir).scenarios:
        assert angle_degrees(CameraPose.from_dict(s.metadata["camera_pose"]).axis(), corner2) >= HOLD_OUT_DEGREES


def test_a_drawn_camera_shows_the_objects_where_it_says_upright():
    """The pose's projection of the puck lands on the rendered red puck (an upside-down or mirrored frame
    would put it elsewhere), and the task's points stay in the frame."""
    options = check_options(image_size=64, camera="random")
    for index in range(3):
        plan = plan_scenario(index, "push-v3", 9, options)
        env = environment("push-v3", 64)
        obs = reset(env, rand_vec=plan.rand_vec)
        frame = render(env, plan.camera_pose).astype(int)
        x, y = plan.camera_pose.project([obs[4:7], obs[36:39], obs[:3]]).T
        assert np.all(np.abs(x) < 1) and np.all(np.abs(y) < 1)
        col, row = int(round((x[0] + 1) / 2 * 63)), int(round((1 - y[0]) / 2 * 63))
        patch = frame[max(row - 1, 0):row + 2, max(col - 1, 0):col + 2].reshape(-1, 3)
        assert np.any(patch[:, 0] > patch[:, 1] + 50), (index, plan.camera_pose)


def test_every_new_agent_is_described_runs_and_keeps_the_truths_conventions(suite_dir):
    truths = load_truth(suite_dir)
    assert set(NEW_AGENTS) <= set(AGENTS) and {"sluggish", "stop-short"} <= set(AGENTS)
    assert set(NEW_AGENTS) <= {t["agent"] for t in truths}
    for t in truths:
        if t["outcome"] == "success":
            assert t["event_frame"] > t["takeover_frame"] and t["failure_mode"] is None
            assert t["marker_s"] == pytest.approx(t["event_frame"] / t["fps"])
        elif t["failure_mode"] == "timeout":
            assert t["marker_s"] == pytest.approx((t["num_frames"] - 1) / t["fps"])
    assert all(t["outcome"] == "success" for t in truths if t["agent"] == "success-then-undo")


@pytest.mark.parametrize("task", ["reach-v3", "drawer-open-v3"])
def test_success_then_undo_is_a_success_marked_at_the_first_one_and_then_undone(task):
    options = check_options(image_size=32)
    plan = plan_scenario(0, task, 2, options)
    done = []

    def observe(step, env, action):
        done.append(bool(env.evaluate_state(env._get_obs(), action)[1]["success"]))

    _, stats = _play(plan, "success-then-undo", np.random.default_rng(0), 32, False, None, observe=observe)
    first = plan.takeover + done[plan.takeover:].index(True) + 1  # steps are counted from 1
    assert stats["event"].outcome == "success" and stats["event"].event_step == first
    assert not done[-1]  # it carried on and broke the success


def test_the_agent_rule_balanced_accuracy_on_hand_made_cases_and_in_suite_json(suite_dir):
    # a: 3 of 4 succeed -> says success; b: 1 of 3 -> failure; c: a tie -> half right either way
    agents = ["a"] * 4 + ["b"] * 3 + ["c"] * 2
    outcomes = ["success"] * 3 + ["failure"] + ["success"] + ["failure"] * 2 + ["success", "failure"]
    # successes 5: right 3 (a) + 0.5 (c); failures 4: right 2 (b) + 0.5 (c)
    assert agent_rule_balanced_accuracy(agents, outcomes) == pytest.approx(round((3.5 / 5 + 2.5 / 4) / 2, 4))
    assert agent_rule_balanced_accuracy(["a", "b"], ["success", "failure"]) == 1.0
    assert agent_rule_balanced_accuracy(["a", "b"], ["success", "success"]) is None
    with pytest.raises(ValueError, match="'success' or 'failure'"):
        agent_rule_balanced_accuracy(["a"], ["done"])
    truths = load_truth(suite_dir)
    expected = agent_rule_balanced_accuracy([t["agent"] for t in truths], [t["outcome"] for t in truths])
    assert Suite.load(suite_dir).info.source["agent_rule_balanced_accuracy"] == expected
    assert suite_stats(Suite.load(suite_dir))["agent_rule_balanced_accuracy"]["truth"] == expected


def test_an_annotated_swap_is_a_valid_training_suite_on_drawn_cameras(suite_dir, tmp_path):
    from autorater.training.inputs.dataset import build_examples

    out = swap_instructions(suite_dir, tmp_path / "swapped", seed=3, annotators=3)
    assert validate_suite(out) == []
    swapped, truths = Suite.load(out), load_truth(out)
    refs = {r.continuation_id for r in swapped.references}
    assert 0 < len(refs) < len(swapped.continuations)  # a share, as generate_suite chooses them
    labels = Counter(a.continuation_id for a in swapped.annotations)
    assert all(labels[c.continuation_id] == (12 if c.continuation_id in refs else 3) for c in swapped.continuations)
    assert all(s.metadata["camera_pose"] for s in swapped.scenarios)  # the drawn camera travels with the scenario
    examples = build_examples([swapped])
    assert len(examples) == len(swapped.continuations) - len(refs)
    source = swapped.info.source
    assert source["instruction_swap"]["annotators"] == 3 and source["annotators"] == 3
    assert source["agent_rule_balanced_accuracy"] == agent_rule_balanced_accuracy(
        [t["agent"] for t in truths], [t["outcome"] for t in truths])
    held_out = swap_instructions(suite_dir, tmp_path / "held-out", seed=3)  # the default: a test, all references
    assert not Suite.load(held_out).annotations and len(Suite.load(held_out).references) == len(truths)


def test_reach_push_and_pick_place_are_cross_judged_only_when_asked(tmp_path):
    suite = generate_suite(tmp_path / "s", world="metaworld", tasks=["reach-v3", "pick-place-v3", "push-v3"],
                           agents=["expert"], scenarios=3, continuations_per_scenario=1, seed=4, image_size=32,
                           workers=1, progress=False)
    seen = Counter()
    for seed in range(4):
        plain = swap_instructions(suite, tmp_path / f"plain-{seed}", seed=seed)
        assert all(s.metadata["instruction_spec"]["kind"] == "absent_object" for s in Suite.load(plain).scenarios)
        crossed = swap_instructions(suite, tmp_path / f"cross-{seed}", seed=seed, cross_task=True)
        for t in load_truth(crossed):
            spec = t["instruction_spec"]
            if spec["kind"] == "shared_scene":
                assert spec["task"] in CROSS_SCENES[t["task"]]
                seen[(t["task"], spec["task"], t["outcome"])] += 1
    # the expert reaching the goal never placed the puck there; carrying the puck there, it reached the goal
    assert seen[("reach-v3", "pick-place-v3", "failure")] and not seen[("reach-v3", "pick-place-v3", "success")]
    assert not seen[("pick-place-v3", "reach-v3", "failure")]
    assert len(seen) >= 2


def test_the_cli_draws_cameras_holds_one_out_swaps_and_reports_the_agent_rule(tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["suite", "generate", "--world", "metaworld", "--tasks", "reach-v3", "--agents", "expert,near-miss",
                 "--scenarios", "2", "--image-size", "32", "--camera", "random", "--hold-out-camera", "corner2",
                 "--hold-out-degrees", "40", "--workers", "1", "--quiet", "--out", str(out)]) == 0
    assert "predicts the true outcome" in capsys.readouterr().out
    suite = Suite.load(out)
    assert suite.info.source["camera_range"]["hold_out_degrees"] == 40.0
    assert main(["suite", "swap", "--suite", str(out), "--out", str(tmp_path / "sw"), "--annotators", "2",
                 "--seed", "1", "--quiet"]) == 0
    assert Suite.load(tmp_path / "sw").annotations
    assert main(["suite", "stats", str(out)]) == 0
    assert "agent's name alone predicts" in capsys.readouterr().out


def test_camera_options_name_the_field_and_the_fix():
    with pytest.raises(ValueError, match="needs camera='random'"):
        check_options(camera="corner", hold_out_camera="corner2")
    with pytest.raises(ValueError, match="hold_out_camera: unknown camera"):
        check_options(camera="random", hold_out_camera="ceiling")
    with pytest.raises(ValueError, match="both recorded from and held out"):
        check_options(camera="random,corner2", hold_out_camera="corner2")
    with pytest.raises(ValueError, match="or random"):
        check_options(camera="orbit")
    assert check_options(camera="random", hold_out_camera="corner2,corner3")["hold_out_cameras"] == ["corner2",
                                                                                                     "corner3"]
