"""The BabyAI world (minigrid): grid levels with rich language, agents of graded skill, the verifier's truth.

The simulation, module by module: ``levels`` (levels, environments, instruction specs), ``bot`` (the
expert bot, made robust), ``agents`` (agents of graded skill), ``judge`` (the ground truth), ``render``
(frames); ``scenes`` plans scenarios and records their continuations. Everything is deterministic for a
level, an environment seed, an instruction and an action list. Options (``BabyAIOptions``): ``view``
(``"ego"``, the agent's own 7 x 7 view, or ``"full"``, the grid from above), ``image_size`` (even pixels,
112 by default: 16 pixels a first-person tile), ``tile_size`` (pixels per cell; None fits the grid). One
frame per step, 8 a second by default. The world is :class:`BabyAI`, registered by an entry point; its palette
(MiniGrid's colours as its renderer shows them, :data:`PALETTE`) is what the recolour and relax augmentations read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from autorater.data.worlds.babyai.agents import AGENTS, check_agents
from autorater.data.worlds.babyai.levels import CATEGORIES, FAILURE_MODES, LEVELS, resolve_level
from autorater.data.worlds.babyai.scenes import run_scenario, swap_scenario
from autorater.data.worlds.base import DemoPlan, Palette, World
from autorater.data.worlds.options import WorldOptions, option

__all__ = ["BabyAI", "BabyAIOptions", "CATEGORIES", "PALETTE"]

# MiniGrid draws objects in six colours. Inside the agent's view every tile is lightened 30% towards white, so on
# screen an object of colour c is c + 0.3 (255 - c) on a (76, 76, 76) floor (measured in the cached cells: floor 76,
# red 242 76 76, purple 153 102 204 after compression). Red is also the agent's triangle and grey the walls: those two
# stay in a recolour; the other four are permuted.
PALETTE = Palette(colours={"red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255), "purple": (112, 39, 195),
                           "yellow": (255, 255, 0), "grey": (100, 100, 100)},
                  permuted=("green", "blue", "purple", "yellow"), tint=0.3, floor=0.3,
                  objects=frozenset({"ball", "box", "key", "door"}))


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


class BabyAI(World):
    """BabyAI (module docstring): its levels are its tasks; a suite's source names it by the generator's name, as
    before there were worlds (``world_of``)."""

    NAME = "babyai"
    TITLE = "BabyAI"
    TASKS = LEVELS
    AGENTS = AGENTS
    DEFAULT_TASKS = ("GoToLocal", "PickupLoc", "PutNextLocal", "OpenDoor")
    DEFAULT_AGENTS = ("expert", "noisy-0.2", "noisy-0.5", "distractor", "random")
    FAILURE_MODES = FAILURE_MODES
    OPTIONS = BabyAIOptions
    FPS = 8.0  # one frame per step
    AUGMENTATIONS = frozenset({"recolour", "relax"})  # its palette and colour words (PALETTE)
    PALETTE = PALETTE
    # The demo trains the grid preset here, whose numbers the README's demo section quotes (the general model scores
    # 0.77 on BabyAI, docs/results). 600 references let a model of about 0.85-0.9 balanced accuracy auto-label; 300
    # were too few to certify 0.95 at 90% confidence.
    DEMO = DemoPlan(preset="babyai-grid", sizes=((600, 2), (300, 2), (100, 10)), quick=((60, 2), (30, 2), (10, 10)),
                    out="demo-out")

    def resolve_tasks(self, names: Sequence[str]) -> list[str]:
        """Short level names for BabyAI ids or short names (an unknown one names the allowed levels)."""
        return [resolve_level(name)[0] for name in names]

    def check_agents(self, names: Sequence[str]) -> list[str]:
        return check_agents(names)

    def run_scenario(self, job) -> dict:
        return run_scenario(job)

    def swap_scenario(self, job) -> dict:
        return swap_scenario(job)

    def describe(self, tasks: Sequence[str], agents: Sequence[str], options: dict, common: dict) -> tuple[str, dict]:
        """suite.json's description and ``source`` (``common``: the generator's own settings, in order). BabyAI's
        source does not name its world: the generator's name says it (``world_of``), as it did before worlds."""
        from importlib.metadata import version

        text = f"Synthetic STS-style suite on BabyAI ({', '.join(tasks)})"
        source = {"generator": common["generator"], "levels": list(tasks), "agents": list(agents),
                  **{k: v for k, v in common.items() if k != "generator"},
                  "tile_size": options["tile_size"], "view": options["view"], "image_size": options["image_size"],
                  "minigrid": version("minigrid")}
        return text, source

    def augmentations(self, source: dict) -> frozenset:
        """Its palette and colour words (``recolour``, ``relax``) for every BabyAI suite; ``rotate`` for one seen
        from above (``view`` full: a rotated grid is another valid scene; the agent's first-person view has one
        orientation)."""
        return self.AUGMENTATIONS | ({"rotate"} if source.get("view") == "full" else set())

    def default_preset(self, source: dict) -> tuple[str, str]:
        """The grid reader (``babyai-grid``) for the first-person view (``view`` ego, or unsaid: the generator's
        default): its 7 x 7 tiles, pose and words; the general model for the grid seen from above, which it does not
        read."""
        if source.get("view", "ego") == "ego":
            return "babyai-grid", ("the grid reader, BabyAI's first-person recipe (0.94 balanced accuracy on the "
                                   "benchmark's unseen scenarios, the general model 0.77)")
        return "general", "BabyAI seen from above: the grid reader reads the first-person 7 x 7 view only"
