"""The BabyAI world (minigrid): grid levels with rich language, agents of graded skill, the verifier's truth.

The simulation, module by module: ``levels`` (levels, environments, instruction specs), ``bot`` (the
expert bot, made robust), ``agents`` (agents of graded skill), ``judge`` (the ground truth), ``render``
(frames); ``scenes`` plans scenarios and records their continuations. Everything is deterministic for a
level, an environment seed, an instruction and an action list. Options (``BabyAIOptions``): ``view``
(``"ego"``, the agent's own 7 x 7 view, or ``"full"``, the grid from above), ``image_size`` (even pixels,
112 by default: 16 pixels a first-person tile), ``tile_size`` (pixels per cell; None fits the grid). One
frame per step, 8 a second by default.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

from autorater.data.worlds import DemoPlan, NoOptions, WorldOptions, option, options_of
from autorater.data.worlds.babyai.agents import AGENTS, check_agents
from autorater.data.worlds.babyai.levels import CATEGORIES, FAILURE_MODES, LEVELS, resolve_level
from autorater.data.worlds.babyai.scenes import run_scenario, swap_scenario

__all__ = ["NAME", "TASKS", "AGENTS", "CATEGORIES", "FAILURE_MODES", "DEFAULT_TASKS", "DEFAULT_AGENTS", "OPTIONS",
           "SWAP_OPTIONS", "FPS", "AUGMENTATIONS", "DEMO", "BabyAIOptions", "resolve_tasks", "check_agents",
           "check_options", "run_scenario", "swap_scenario", "describe", "augmentations", "default_preset"]

NAME = "babyai"
TASKS = LEVELS
DEFAULT_TASKS = ("GoToLocal", "PickupLoc", "PutNextLocal", "OpenDoor")
DEFAULT_AGENTS = ("expert", "noisy-0.2", "noisy-0.5", "distractor", "random")
FPS = 8.0  # one frame per step
AUGMENTATIONS = frozenset({"recolour", "relax"})  # MiniGrid's palette and colour words (training/inputs/augment.py)
# The demo trains the grid preset here, whose numbers the README's demo section quotes (the general model scores 0.77 on
# BabyAI, docs/results). 600 references let a model of about 0.85-0.9 balanced accuracy auto-label; 300 were too few to
# certify 0.95 at 90% confidence.
DEMO = DemoPlan(preset="babyai-grid", sizes=((600, 2), (300, 2), (100, 10)), quick=((60, 2), (30, 2), (10, 10)),
                out="demo-out")


def augmentations(source: dict) -> frozenset:
    """MiniGrid's palette and colour words (``recolour``, ``relax``) for every BabyAI suite; ``rotate`` for one seen
    from above (``view`` full: a rotated grid is another valid scene; the agent's first-person view has one
    orientation)."""
    return AUGMENTATIONS | ({"rotate"} if source.get("view") == "full" else set())


def default_preset(source: dict) -> tuple[str, str]:
    """The grid reader (``babyai-grid``) for the first-person view (``view`` ego, or unsaid: the generator's default):
    its 7 x 7 tiles, pose and words; the general model for the grid seen from above, which it does not read."""
    if source.get("view", "ego") == "ego":
        return "babyai-grid", ("the grid reader, BabyAI's first-person recipe (0.94 balanced accuracy on the "
                               "benchmark's unseen scenarios, the general model 0.77)")
    return "general", "BabyAI seen from above: the grid reader reads the first-person 7 x 7 view only"


@dataclass(frozen=True)
class BabyAIOptions(WorldOptions):
    """BabyAI's generation options (``autorater suite generate --world babyai``).

    Example:
        >>> BabyAIOptions(view="full", image_size=None)
        BabyAIOptions(view='full', image_size=112, tile_size=None)
    """

    view: str = option("ego", "the agent's first-person 7x7 view (as STS videos are) or the whole grid from above",
                       choices=("ego", "full"))
    image_size: int = option(112, "frame width and height in pixels, even (112: 16-pixel first-person tiles)",
                             low=16, high=1024)
    tile_size: int | None = option(None, "pixels per grid cell (default: the grid fits the frame)", low=1, high=1024)

    def __post_init__(self):
        super().__post_init__()
        if self.image_size % 2:
            raise ValueError(f"option image_size (--image-size) must be even (H.264), got {self.image_size}")


OPTIONS = BabyAIOptions
SWAP_OPTIONS = NoOptions


def resolve_tasks(names: Sequence[str]) -> list[str]:
    """Short level names for BabyAI ids or short names (an unknown one names the allowed levels)."""
    return [resolve_level(name)[0] for name in names]


def check_options(fps: float = FPS, **options) -> dict:
    """``BabyAIOptions`` checked, as the dict every scenario job carries (``view``, ``image_size``, ``tile_size``)."""
    return asdict(options_of(NAME, options))


def describe(tasks: Sequence[str], agents: Sequence[str], options: dict, common: dict) -> tuple[str, dict]:
    """suite.json's description and ``source`` (``common``: the generator's own settings, in order). BabyAI's
    source does not name its world: the generator's name says it (``world_of``), as it did before worlds."""
    from importlib.metadata import version

    text = f"Synthetic STS-style suite on BabyAI ({', '.join(tasks)})"
    source = {"generator": common["generator"], "levels": list(tasks), "agents": list(agents),
              **{k: v for k, v in common.items() if k != "generator"},
              "tile_size": options["tile_size"], "view": options["view"], "image_size": options["image_size"],
              "minigrid": version("minigrid")}
    return text, source
