"""The quality benchmark's suites: each world's (and camera regime's) training suite and held-out sets, generated once
under the output folder and reused.

Meta-World comes in three camera regimes (``--cameras``): ``one`` (training and held-out video from ``corner``, the
user with a fixed lab camera; ``corner2`` only as the unseen camera), ``views`` (drawn cameras, every training rollout
also from a second drawn camera: two views that must agree; held out: new drawn cameras and ``corner2``) and ``drawn``
(a camera drawn per scenario,
none within 30 degrees of ``corner2``, which is held out). Instruction swaps are judged by the simulator, of shared
scenes only (drawer open/close, window open/close, faucet, and with ``cross_task`` reach / push / pick-place), so
they can succeed: the training suite's swaps train beside it; the held-out swaps keep every success and enough
failures for successes to be 40% (a test that "always failure" cannot pass).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from autorater.data.worlds.metaworld.tasks import (
    HELD_OUT_WITH_RELATIVES,
    HELD_OUT_WITHOUT_RELATIVES,
    MT10,
    RECOMMENDED_MIX,
)

TRAIN_LEVELS = ("GoToLocal", "PickupLoc", "PutNextLocal", "OpenDoor")
TRAIN_AGENTS = ("expert", "noisy-0.2", "noisy-0.5", "distractor", "random")
UNSEEN_AGENTS = ("ditherer", "quitter")
UNSEEN_LEVELS = ("GoTo", "PickupDist", "OpenDoorLoc", "PutNextLocalS6N4")
MW_AGENTS = ("expert", "noisy-1.0", "noisy-3.0", "wrong-target", "random", "near-miss", "pause", "detour",
             "early-release", "success-then-undo")  # the agent-name rule scores about 0.74 BA on a training suite
MW_UNSEEN_AGENTS = ("sluggish", "stop-short")
MW_HELD_OUT_CAMERA = "corner2"  # no drawn training camera looks within 30 degrees of it
MW_ONE_CAMERA = "corner"
UNSEEN_TASKS = ("button-press-v3", "door-close-v3", "faucet-open-v3", "handle-press-v3", "plate-slide-v3",
                "push-wall-v3", "reach-wall-v3", "pick-place-wall-v3", "sweep-into-v3", "coffee-push-v3")
# The recommended mix's relatives of the unseen tasks (tasks.RECOMMENDED_MIX less MT10): a suite of their own
# (``train_relatives``) that trains beside MT10's with ``--train-mix recommended``; the unseen tasks without a relative
# in the mix are a held-out set of their own (``unseen_tasks_norel``)
MIX_RELATIVES = tuple(t for t in RECOMMENDED_MIX if t not in MT10)
SWAPS_FOR_TRAINING = 111  # seed of the training suite's judged swaps (shared scenes only), trained on beside it
HELD_OUT_SWAPS = 105  # seed of the held-out swaps of the unseen scenarios
HELD_OUT_SWAP_SUCCESS_SHARE = 0.4


@dataclasses.dataclass(frozen=True)
class HeldOut:
    """One generated suite of the benchmark: (scenarios, quick scenarios), tasks, agents, per scenario, seed; for
    Meta-World its camera (``random``: one drawn per scenario, none near ``MW_HELD_OUT_CAMERA``)."""

    scenarios: tuple[int, int]
    tasks: tuple[str, ...]
    agents: tuple[str, ...]
    per_scenario: int
    seed: int
    camera: str | None = None
    twin_camera: str = ""  # Meta-World: every rollout also from a second camera (``random``: drawn), for training


def plans() -> dict[str, dict[str, HeldOut]]:
    """Each world's (regime's) training suite and held-out sets."""
    assert set(UNSEEN_TASKS) == set(HELD_OUT_WITH_RELATIVES)  # the ten unseen tasks: each has a relative in the mix

    def mt10(scenarios, per, seed, camera):
        return HeldOut(scenarios, MT10, MW_AGENTS, per, seed, camera)

    def relatives(scenarios, per, seed, camera):  # the recommended mix's tasks outside MT10, 20 scenarios a task
        return HeldOut(scenarios, MIX_RELATIVES, MW_AGENTS, per, seed, camera)

    def norel(scenarios, per, seed, camera):  # held-out tasks with no relative in the mix (nor in MT10)
        return HeldOut(scenarios, HELD_OUT_WITHOUT_RELATIVES, MW_AGENTS, per, seed, camera)

    return {
        "babyai": {"train": HeldOut((1000, 60), TRAIN_LEVELS, TRAIN_AGENTS, 2, 101),
                   "unseen_scenarios": HeldOut((200, 20), TRAIN_LEVELS, TRAIN_AGENTS, 2, 102),
                   "unseen_scenarios_2": HeldOut((200, 20), TRAIN_LEVELS, TRAIN_AGENTS, 2, 106),
                   "unseen_agents": HeldOut((100, 15), TRAIN_LEVELS, UNSEEN_AGENTS, 2, 103),
                   "unseen_families": HeldOut((100, 15), UNSEEN_LEVELS, TRAIN_AGENTS, 2, 104)},
        # Drawn cameras: MT10, 800 x 5 (the learning curve's 4,000 clips; --train-scenarios takes the first n)
        "metaworld": {"train": mt10((800, 30), 5, 11, "random"),
                      "unseen_scenarios": mt10((100, 10), 4, 12, "random"),
                      "unseen_scenarios_2": mt10((100, 10), 4, 206, "random"),
                      "unseen_agents": HeldOut((50, 10), MT10, MW_UNSEEN_AGENTS, 2, 203, "random"),
                      "unseen_tasks": HeldOut((100, 10), UNSEEN_TASKS, MW_AGENTS, 4, 204, "random"),
                      "unseen_camera": mt10((100, 10), 4, 205, MW_HELD_OUT_CAMERA),
                      "train_relatives": relatives((200, 10), 5, 207, "random"),
                      "unseen_tasks_norel": norel((80, 8), 4, 208, "random")},
        # One camera: MT10, 400 x 4 from corner, held out from corner too; corner2 shows what one camera cannot do
        "metaworld-one": {"train": mt10((400, 30), 4, 21, MW_ONE_CAMERA),
                          "unseen_scenarios": mt10((100, 10), 4, 22, MW_ONE_CAMERA),
                          "unseen_scenarios_2": mt10((100, 10), 4, 26, MW_ONE_CAMERA),
                          "unseen_agents": HeldOut((50, 10), MT10, MW_UNSEEN_AGENTS, 2, 23, MW_ONE_CAMERA),
                          "unseen_tasks": HeldOut((100, 10), UNSEEN_TASKS, MW_AGENTS, 4, 24, MW_ONE_CAMERA),
                          "unseen_camera": mt10((100, 10), 4, 25, MW_HELD_OUT_CAMERA),
                          "train_relatives": relatives((200, 10), 4, 27, MW_ONE_CAMERA),
                          "unseen_tasks_norel": norel((80, 8), 4, 28, MW_ONE_CAMERA)},
        # Views: drawn cameras, every training rollout seen twice (its twin from another drawn camera), 200 x 4 x 2
        # views; held out: new drawn cameras (unseen scenarios) and the named camera corner2 (the one-camera plan's
        # unseen camera, the same seed)
        "metaworld-views": {"train": HeldOut((200, 20), MT10, MW_AGENTS, 4, 31, "random", twin_camera="random"),
                            "unseen_scenarios": mt10((100, 10), 4, 32, "random"),
                            "unseen_camera": mt10((100, 10), 4, 25, MW_HELD_OUT_CAMERA)},
    }


def generate(root: Path, quick: bool, plan_name: str = "babyai", view: str = "ego",
             image_size: int | None = None, workers: int = 2) -> dict[str, Path]:
    """Every suite of ``plans()[plan_name]`` under ``root`` (generated when missing), and for Meta-World the
    training suite's judged swaps (``train_swaps``); every world's held-out swaps (``instruction_swaps``)."""
    from autorater.data.generate import generate_suite, swap_instructions

    world = plan_name.split("-")[0]
    paths = {}
    for name, plan in plans()[plan_name].items():
        paths[name] = root / name
        if not (paths[name] / "suite.json").exists():
            extra = {"view": view} if world == "babyai" else {"camera": plan.camera or MW_ONE_CAMERA}
            if "random" in (plan.camera, plan.twin_camera):
                extra["hold_out_camera"] = MW_HELD_OUT_CAMERA
            if plan.twin_camera:
                extra["twin_camera"] = plan.twin_camera
            generate_suite(paths[name], world=world, tasks=plan.tasks, agents=plan.agents,
                           scenarios=plan.scenarios[quick], continuations_per_scenario=plan.per_scenario,
                           seed=plan.seed, version=name, image_size=image_size, workers=workers, **extra)
    judged = {"cross_task": True, "shared_only": True} if world == "metaworld" else {}
    if world == "metaworld":
        paths["train_swaps"] = root / "train_swaps"
        if not (paths["train_swaps"] / "suite.json").exists():
            swap_instructions(paths["train"], paths["train_swaps"], seed=SWAPS_FOR_TRAINING, annotators=3,
                              workers=workers, progress=True, **judged)
    paths["instruction_swaps"] = root / "instruction_swaps"
    if not (paths["instruction_swaps"] / "suite.json").exists():
        swap_instructions(paths["unseen_scenarios"], paths["instruction_swaps"], seed=HELD_OUT_SWAPS,
                          workers=workers, min_success_share=HELD_OUT_SWAP_SUCCESS_SHARE if judged else 0.0,
                          **judged)
    return paths


def first_scenarios(suite, n: int | None, scenario_ids: set[str] | None = None):
    """``suite`` cut to its first ``n`` scenarios (or to ``scenario_ids``), in memory: continuations, annotations
    and references of the others left out (the learning curve's smaller training sets)."""
    from autorater.data.suite import Suite

    if n is None and scenario_ids is None:
        return suite
    keep = scenario_ids if scenario_ids is not None else {s.scenario_id for s in suite.scenarios[:n]}
    continuations = [c for c in suite.continuations if c.scenario_id in keep]
    ids = {c.continuation_id for c in continuations}
    return Suite(suite.root, suite.info, [s for s in suite.scenarios if s.scenario_id in keep], continuations,
                 annotations=[a for a in suite.annotations if a.continuation_id in ids],
                 references=[r for r in suite.references if r.continuation_id in ids])


__all__ = ["HELD_OUT_SWAPS", "HeldOut", "MW_AGENTS", "MW_HELD_OUT_CAMERA", "MW_ONE_CAMERA", "MW_UNSEEN_AGENTS",
           "SWAPS_FOR_TRAINING", "UNSEEN_TASKS", "first_scenarios", "generate", "plans"]


tiny = None  # it trains or builds nothing of its own (its command line is checked: tests/test_benchmark_modules.py)
