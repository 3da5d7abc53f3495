"""The Meta-World world: valid suites, fixed lengths, the simulator's truth, agents, swaps, upright frames."""

from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from autorater.app.cli import main
from autorater.data.generate import TRUTH_FILE, generate_suite, load_truth, simulate_truths, swap_instructions
from autorater.data.suite import Suite, validate_suite
from autorater.data.video import read_video
from autorater.data.worlds import load_world
from autorater.data.worlds.metaworld import check_options
from autorater.data.worlds.metaworld.scenes import _other_task_outcomes, _plan_of, _play, plan_scenario
from autorater.data.worlds.metaworld.sim import Judge, WrongTarget, environment, render, reset
from autorater.data.worlds.metaworld.tasks import MT10, TASKS
from suite_schema import independent_problems

AGENTS = ("expert", "random", "noisy-0.5", "wrong-target", "sluggish", "stop-short")
SMALL = dict(world="metaworld", tasks=["reach-v3", "drawer-open-v3", "button-press-topdown-v3"], agents=AGENTS,
             scenarios=3, continuations_per_scenario=3, seed=3, image_size=32, progress=False)


@pytest.fixture(scope="module")
def suite_dir(tmp_path_factory) -> Path:
    return generate_suite(tmp_path_factory.mktemp("mw") / "s", workers=1, **SMALL)


@pytest.fixture(scope="module")
def truths(suite_dir) -> list[dict]:
    return load_truth(suite_dir)


def test_suite_passes_both_validators_and_names_its_world(suite_dir):
    assert validate_suite(suite_dir) == []
    assert independent_problems(suite_dir) == []
    suite = Suite.load(suite_dir)
    assert suite.info.source["world"] == "metaworld" and suite.info.name == "metaworld-sts"
    assert [s.metadata["task"] for s in suite.scenarios] == SMALL["tasks"]
    assert all(s.instruction in TASKS[s.metadata["task"]].wordings for s in suite.scenarios)
    assert {s.category for s in suite.scenarios} == {"reach", "open", "press"}


def test_every_continuation_of_a_scenario_has_one_length_and_the_context_is_shared(suite_dir, truths):
    lengths, context = defaultdict(set), {}
    for t in truths:
        frames = read_video(suite_dir / "videos" / f"{t['continuation_id']}.mp4").frames
        assert frames.shape == (t["num_frames"], 32, 32, 3)
        assert t["num_frames"] == 1 + t["takeover_frame"] + 200 // t["steps_per_frame"]
        assert 1 <= t["takeover_frame"] and t["takeover_frame"] * t["steps_per_frame"] < t["expert_success_step"]
        lengths[t["scenario_id"]].add(t["num_frames"])
        head = frames[:t["takeover_frame"] + 1].astype(int)
        if t["scenario_id"] in context:  # the replayed context is the same video for every agent
            assert np.abs(context[t["scenario_id"]] - head).mean() < 2.0
        context[t["scenario_id"]] = head
    assert all(len(v) == 1 for v in lengths.values())


def test_truth_follows_the_simulator_and_its_marker_conventions(truths):
    for t in truths:
        if t["outcome"] == "success":
            assert t["failure_mode"] is None and t["event_frame"] > t["takeover_frame"]
            assert t["event_frame"] == -(-t["event_step"] // t["steps_per_frame"])  # the first frame showing it
            assert t["marker_s"] == pytest.approx(t["event_frame"] / t["fps"])
        elif t["failure_mode"] == "timeout":
            assert t["event_frame"] is None and t["marker_s"] == pytest.approx((t["num_frames"] - 1) / t["fps"])
        else:
            assert t["failure_mode"] in t["failure_modes"] and t["event_frame"] > t["takeover_frame"]
        assert 0 <= t["traits"]["messiness"] <= 1 and 0 <= t["traits"]["ambiguity"] <= 1
    by_agent = defaultdict(list)
    for t in truths:
        by_agent[t["agent"]].append(t["outcome"] == "success")
    assert all(by_agent["expert"]) and not any(by_agent["random"])
    assert all(t["traits"]["off_expert_share"] == 0 for t in truths if t["agent"] == "expert")


def test_same_seed_same_suite_whatever_the_workers_and_truth_without_videos(suite_dir, truths, tmp_path):
    other = generate_suite(tmp_path / "again", workers=2, **SMALL)
    for name in ("scenarios.jsonl", "continuations.jsonl", "annotations.jsonl", "references.jsonl", TRUTH_FILE):
        assert (other / name).read_text() == (suite_dir / name).read_text(), name
    assert simulate_truths(**{k: v for k, v in SMALL.items() if k != "progress"}) == truths


def test_frames_are_rendered_exactly_again_from_a_reused_environment():
    options = check_options(image_size=32)
    plan = plan_scenario(0, "push-v3", 5, options)
    (first,), _ = _play(plan, "noisy-0.5", np.random.default_rng(1), 32, True, None)  # one view: its frames
    plan_scenario(1, "push-v3", 6, options)  # the same process's environment, another scene in between
    (again,), _ = _play(plan, "noisy-0.5", np.random.default_rng(1), 32, True, None)
    assert len(first) == plan.num_frames and all(np.array_equal(a, b) for a, b in zip(first, again))


def test_an_environment_draws_the_same_frame_after_another_environment_has_drawn():
    """Each environment renders in its own GL context; drawing in another's (the one made last) gave garbage."""
    first = environment("reach-v3", 32)
    reset(first, env_seed=1)
    before = render(first, "corner")
    other = environment("window-open-v3", 32)
    reset(other, env_seed=1)
    render(other, "corner")
    assert np.array_equal(render(first, "corner"), before)


def test_corner_camera_frames_are_upright():
    """The table (brown wood: red > green > blue) fills the lower half of an upright corner view."""
    env = environment("drawer-open-v3", 64)
    reset(env, env_seed=0)
    frame = render(env, "corner").astype(int)
    wood = (frame[..., 0] > frame[..., 1] + 15) & (frame[..., 1] > frame[..., 2] + 5)
    assert wood[32:].mean() > 2 * wood[:32].mean()


def test_judge_decides_the_first_event():
    obs0 = np.zeros(39)
    obs0[4:7] = [0.0, 0.6, 0.02]
    drop = Judge("pick-place-v3", obs0, takeover_step=0)
    for step, (z, hand_z) in enumerate([(0.02, 0.1), (0.09, 0.1), (0.03, 0.1), (0.03, 0.3)], start=1):
        obs = obs0.copy()
        obs[6], obs[:3] = z, [0.0, 0.6, hand_z]
        drop.after(step, obs, {"success": 0.0})
    assert (drop.result().failure_mode, drop.result().event_step) == ("dropped", 4)  # not while the hand held it
    fell = Judge("push-v3", obs0, takeover_step=0)
    obs = obs0.copy()
    obs[6] = -0.3
    fell.after(7, obs, {"success": 0.0})
    fell.after(8, obs0, {"success": 1.0})
    assert (fell.result().failure_mode, fell.result().event_step) == ("knocked_off", 7)
    done = Judge("reach-v3", obs0, takeover_step=0)
    done.after(3, obs0, {"success": 1.0})
    assert done.result().outcome == "success" and done.result().event_step == 3
    assert Judge("reach-v3", obs0, takeover_step=0).result().failure_mode == "timeout"


def test_wrong_target_aims_12_to_20_cm_away():
    for seed in range(20):
        offset = WrongTarget("push-v3", np.random.default_rng(seed)).offset
        assert 0.12 <= np.linalg.norm(offset) <= 0.20 and offset[2] == 0


def test_swapped_instruction_names_an_object_the_scene_lacks(suite_dir, tmp_path):
    out = swap_instructions(suite_dir, tmp_path / "swapped", seed=1)
    assert validate_suite(out) == []
    swapped = Suite.load(out)
    for s in swapped.scenarios:
        task, other = TASKS[s.metadata["task"]], TASKS[s.metadata["instruction_spec"]["task"]]
        assert s.metadata["instruction_spec"]["kind"] == "absent_object"  # none of these tasks shares its scene
        assert s.instruction in other.wordings and other.target not in task.objects
    assert all(t["outcome"] == "failure" and t["original_instruction"] != t["instruction"] for t in load_truth(out))
    assert len(swapped.references) == len(swapped.continuations) == 9


def test_shared_scene_swaps_are_judged_by_the_other_tasks_own_rule(tmp_path):
    suite = generate_suite(tmp_path / "faucet", world="metaworld", tasks=["faucet-open-v3"], scenarios=2,
                           continuations_per_scenario=2, agents=["expert", "noisy-0.5"], seed=4, image_size=32,
                           workers=1, progress=False)
    truths = load_truth(suite)
    scenario = Suite.load(suite).scenarios[0]
    plan = _plan_of({"scenario_id": scenario.scenario_id, "instruction": scenario.instruction,
                     "metadata": scenario.metadata})
    mine = [t for t in truths if t["scenario_id"] == scenario.scenario_id]
    # judged through the copied physics state by its own task's rule, a continuation gets its own truth back
    again = _other_task_outcomes(plan, mine, "faucet-open-v3")
    assert [(o.outcome, o.event_step) for o in again] == [(t["outcome"], t["event_step"]) for t in mine]
    # the expert turned the faucet on: under "turn the faucet off" it failed
    closed = _other_task_outcomes(plan, mine, "faucet-close-v3")
    assert all(o.outcome == "failure" for o, t in zip(closed, mine) if t["agent"] == "expert")
    kinds = set()
    for seed in range(6):
        out = swap_instructions(suite, tmp_path / f"swapped-{seed}", seed=seed)
        for s in Suite.load(out).scenarios:
            kinds.add(s.metadata["instruction_spec"]["kind"])
            if s.metadata["instruction_spec"]["kind"] == "shared_scene":
                assert s.metadata["instruction_spec"]["task"] == "faucet-close-v3" and s.category == "turn"
    assert kinds == {"shared_scene", "absent_object"}
    # shared_only: every scenario swaps to the other task of its scene (judged), never to an absent object; thinned
    # to a success share, every success is kept
    judged = load_truth(swap_instructions(suite, tmp_path / "judged", seed=0, shared_only=True))
    assert judged and {t["instruction_spec"]["kind"] for t in judged} == {"shared_scene"}
    if any(t["outcome"] == "success" for t in judged):
        thinned = load_truth(swap_instructions(suite, tmp_path / "thinned", seed=0, shared_only=True,
                                               min_success_share=0.9))
        wins = [t for t in thinned if t["outcome"] == "success"]
        assert len(wins) == sum(t["outcome"] == "success" for t in judged) and len(wins) >= 0.9 * len(thinned)
    else:
        with pytest.raises(ValueError, match="no swapped continuation succeeds"):
            swap_instructions(suite, tmp_path / "thinned", seed=0, shared_only=True, min_success_share=0.9)


def test_options_and_names_are_checked_with_the_allowed_values():
    world = load_world("metaworld")
    assert set(MT10) <= set(world.TASKS) and len(world.TASKS) >= 20
    assert world.resolve_tasks(["drawer-open"]) == ["drawer-open-v3"]
    with pytest.raises(ValueError, match="known: .*drawer-open-v3"):
        world.resolve_tasks(["drawer-opne-v3"])
    with pytest.raises(ValueError, match="known: expert"):
        world.check_agents(["expret"])
    with pytest.raises(ValueError, match="corner2"):
        check_options(camera="ceiling")
    with pytest.raises(ValueError, match="4, 8, 16"):
        check_options(fps=7)
    assert check_options(camera="corner,topview")["cameras"] == ["corner", "topview"]
    assert all(len(t.wordings) >= 2 for t in TASKS.values())


def test_cli_generates_a_metaworld_suite(tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["suite", "generate", "--world", "metaworld", "--tasks", "reach-v3", "--agents", "expert,random",
                 "--scenarios", "1", "--image-size", "32", "--camera", "corner2", "--workers", "1", "--quiet",
                 "--out", str(out)]) == 0
    suite = Suite.load(out)
    assert len(suite.continuations) == 2 and suite.scenarios[0].metadata["camera"] == "corner2"


def test_a_missing_gl_back_end_says_what_to_install(monkeypatch):
    env = environment("reach-v3", 32)
    reset(env, env_seed=0)

    def no_gl(*args, **kwargs):
        raise AttributeError("'NoneType' object has no attribute 'glGetError'")

    monkeypatch.setattr(env.mujoco_renderer, "render", no_gl)
    with pytest.raises(RuntimeError, match="apt-get install libosmesa6"):
        render(env, "corner")
