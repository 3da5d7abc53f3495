"""The BabyAI world (minigrid): grid levels with rich language, agents of graded skill, the verifier's truth.

The simulation, module by module: ``levels`` (levels, environments, instruction specs), ``bot`` (the
expert bot, made robust), ``agents`` (agents of graded skill), ``judge`` (the ground truth), ``render``
(frames); ``scenes`` plans scenarios and records their continuations. Everything is deterministic for a
level, an environment seed, an instruction and an action list. Options: ``view`` (``"ego"``, the agent's own
7 x 7 view, or ``"full"``, the grid from above), ``image_size`` (even pixels, 112 by default: 16 pixels a
first-person tile), ``tile_size`` (pixels per cell; None fits the grid).
"""

from __future__ import annotations

from typing import Sequence

from autorater.data.worlds.babyai.agents import AGENTS, check_agents
from autorater.data.worlds.babyai.levels import CATEGORIES, FAILURE_MODES, LEVELS, resolve_level
from autorater.data.worlds.babyai.scenes import run_scenario, swap_scenario

__all__ = ["NAME", "TASKS", "AGENTS", "CATEGORIES", "FAILURE_MODES", "DEFAULT_TASKS", "DEFAULT_AGENTS",
           "resolve_tasks", "check_agents", "check_options", "run_scenario", "swap_scenario", "describe"]

NAME = "babyai"
TASKS = LEVELS
DEFAULT_TASKS = ("GoToLocal", "PickupLoc", "PutNextLocal", "OpenDoor")
DEFAULT_AGENTS = ("expert", "noisy-0.2", "noisy-0.5", "distractor", "random")


def resolve_tasks(names: Sequence[str]) -> list[str]:
    """Short level names for BabyAI ids or short names (an unknown one names the allowed levels)."""
    return [resolve_level(name)[0] for name in names]


def check_options(view: str = "ego", image_size: int | None = None, tile_size: int | None = None,
                  camera=None, **_) -> dict:
    if camera:
        raise ValueError("--camera is for Meta-World; BabyAI's view is chosen with view='ego' or 'full'")
    if view not in ("ego", "full"):
        raise ValueError(f"view must be 'ego' or 'full', got {view!r}")
    return {"view": view, "image_size": 112 if image_size is None else int(image_size), "tile_size": tile_size}


def describe(tasks: Sequence[str], agents: Sequence[str], options: dict, common: dict) -> tuple[str, dict]:
    """suite.json's description and ``source`` (``common``: the generator's own settings, in order)."""
    from importlib.metadata import version

    text = f"Synthetic STS-style suite on BabyAI ({', '.join(tasks)})"
    source = {"generator": common["generator"], "levels": list(tasks), "agents": list(agents),
              **{k: v for k, v in common.items() if k != "generator"},
              "tile_size": options["tile_size"], "view": options["view"], "image_size": options["image_size"],
              "minigrid": version("minigrid")}
    return text, source
