"""Data for new tasks and new cameras (issue 56): several wordings per task, written into the task table, that are
never another task's; the recommended training mix and the tasks kept out of it, with and without a relative;
same-scene swaps that keep the held-out tasks' words out; one rollout rendered from two cameras, each view a
continuation that names its twin."""

import json
from collections import defaultdict

import numpy as np
import pytest

from autorater.data.generate import generate_suite, load_truth, swap_instructions
from autorater.data.suite import Suite, validate_suite
from autorater.data.video import read_video
from autorater.data.worlds.metaworld import MetaWorldOptions, MetaWorldSwapOptions
from autorater.data.worlds.metaworld.tasks import (
    FAMILIES,
    HELD_OUT_WITH_RELATIVES,
    HELD_OUT_WITHOUT_RELATIVES,
    MT10,
    RECOMMENDED_MIX,
    RELATIVES,
    TASKS,
    family_of,
    relatives_in,
)
from suite_schema import independent_problems


def test_every_task_has_several_wordings_and_no_wording_belongs_to_two_tasks():
    assert all(len(task.wordings) >= 4 for task in TASKS.values())
    owner = defaultdict(set)
    for name, task in TASKS.items():
        for wording in task.wordings:
            owner[wording.lower()].add(name)
    assert all(len(tasks) == 1 for tasks in owner.values())  # a paraphrase of one task is never another's words


def test_families_cover_every_task_once():
    assert sorted(t for tasks in FAMILIES.values() for t in tasks) == sorted(TASKS)
    assert family_of("faucet-close-v3") == family_of("faucet-open-v3") == "faucet"


def test_the_mix_keeps_the_held_out_tasks_out_and_gives_each_of_the_first_set_a_relative():
    held_out = set(HELD_OUT_WITH_RELATIVES) | set(HELD_OUT_WITHOUT_RELATIVES)
    assert set(MT10) < set(RECOMMENDED_MIX) and not held_out & set(RECOMMENDED_MIX)
    assert not set(HELD_OUT_WITH_RELATIVES) & set(HELD_OUT_WITHOUT_RELATIVES)
    assert all(RELATIVES[t] and set(RELATIVES[t]) <= set(RECOMMENDED_MIX) for t in HELD_OUT_WITH_RELATIVES)
    assert not any(relatives_in(t, RECOMMENDED_MIX) for t in HELD_OUT_WITHOUT_RELATIVES)
    assert relatives_in("faucet-open-v3", MT10) == () and relatives_in("door-close-v3", MT10) == ("door-open-v3",)


@pytest.fixture(scope="module")
def twins(tmp_path_factory):
    """Drawer and faucet scenes rendered from ``corner`` and a drawn twin camera (corner2 held out)."""
    return generate_suite(tmp_path_factory.mktemp("twins") / "s", world="metaworld",
                          tasks=["drawer-close-v3", "faucet-close-v3"], agents=["expert", "random"], scenarios=2,
                          continuations_per_scenario=2, seed=5, image_size=32, progress=False, workers=1,
                          options=MetaWorldOptions(twin_camera="random", hold_out_camera=("corner2",)))


def test_a_scenario_carries_its_tasks_other_wordings_as_paraphrases(twins):
    for s in Suite.load(twins).scenarios:
        wordings = TASKS[s.metadata["task"]].wordings
        assert s.instruction in wordings
        assert sorted([s.instruction, *s.metadata["paraphrases"]]) == sorted(wordings)


def test_two_views_of_one_rollout_name_each_other_and_share_the_truth(twins):
    assert validate_suite(twins) == [] and independent_problems(twins) == []
    suite = Suite.load(twins)
    by_id = {c.continuation_id: c for c in suite.continuations}
    assert len(by_id) == 2 * 2 * 2
    truths = {t["continuation_id"]: t for t in load_truth(twins)}
    for c in suite.continuations:
        twin = by_id[c.metadata["twin"]]
        assert twin.metadata["twin"] == c.continuation_id and twin.scenario_id == c.scenario_id
        assert twin.agent_id == c.agent_id and {c.metadata["camera"], twin.metadata["camera"]} == {"corner", "random"}
        first, second = truths[c.continuation_id], truths[twin.continuation_id]
        assert (first["outcome"], first["marker_s"]) == (second["outcome"], second["marker_s"])
        a = read_video(twins / c.video).frames
        b = read_video(twins / twin.video).frames
        assert a.shape == b.shape and np.abs(a.astype(int) - b.astype(int)).mean() > 5  # another viewpoint
    poses = {json.dumps(c.metadata["camera_pose"], sort_keys=True) for c in suite.continuations
             if "camera_pose" in c.metadata}
    assert len(poses) == 2  # one drawn camera per scenario, both views of a rollout from it


def test_references_keep_both_views_of_a_rollout_together(twins):
    suite = Suite.load(twins)
    refs = {r.continuation_id for r in suite.references}
    by_id = {c.continuation_id: c for c in suite.continuations}
    assert all(by_id[cid].metadata["twin"] in refs for cid in refs)


def test_training_swaps_judge_the_other_task_of_the_scene_and_keep_held_out_words_out(twins, tmp_path):
    kept = swap_instructions(twins, tmp_path / "kept", seed=1, annotators=3,
                             options=MetaWorldSwapOptions(shared_only=True, keep_out=("faucet-open",)))
    scenarios = Suite.load(kept).scenarios
    assert {s.metadata["instruction_spec"]["task"] for s in scenarios} == {"drawer-open-v3"}  # faucet-open kept out
    for s in scenarios:  # the same scene judged by the simulator, worded with the swapped task's own paraphrases
        assert s.metadata["instruction_spec"]["kind"] == "shared_scene"
        assert sorted([s.instruction, *s.metadata["paraphrases"]]) == sorted(TASKS["drawer-open-v3"].wordings)
    swapped = {t["continuation_id"]: t["outcome"] for t in load_truth(kept)}
    original = {t["continuation_id"]: t["outcome"] for t in load_truth(twins)}
    assert any(swapped[c] != original[c] for c in swapped)  # the other task's truth, not a copy


def test_twin_camera_options_are_checked():
    with pytest.raises(ValueError, match="twin_camera corner is already"):
        MetaWorldOptions(twin_camera="corner")
    with pytest.raises(ValueError, match="twin"):
        MetaWorldOptions(twin_camera="ceiling")
    with pytest.raises(ValueError, match="unknown Meta-World task"):
        MetaWorldSwapOptions(keep_out=("faucet-opne",))
    assert MetaWorldOptions(twin_camera="random", hold_out_camera="corner2").twin_camera == "random"
