"""The Meta-World world: a Sawyer arm on a table (MuJoCo), rendered headless through a camera.

``tasks`` words the tasks; ``sim`` makes environments, renders frames, plays the agents and judges the
outcome (it imports metaworld and mujoco, so this package stays light to import); ``scenes`` plans
scenarios and records their continuations; ``cameras`` draws free camera poses. Options
(``MetaWorldOptions``): ``camera`` (a name or a list; one is drawn per scenario; default ``corner``;
``random``: a free camera drawn per scenario from a wide range, see ``cameras``), ``hold_out_camera`` (named
cameras whose neighbourhood, ``hold_out_degrees`` around their optical axis, 30 by default, no drawn camera
enters), ``image_size`` (even pixels, 128 by default); swap options (``MetaWorldSwapOptions``): ``cross_task``,
``shared_only``. Time: a control step is 12.5 ms; at 8 fps a frame shows every 10th step; the agent acts for 200
steps (2.5 s) after the takeover.

Rendering needs an OpenGL back-end without a display: OSMesa (Debian package ``libosmesa6``); the
generator sets ``MUJOCO_GL=osmesa`` and ``PYOPENGL_PLATFORM=osmesa`` unless they are set. The world is
:class:`MetaWorld`, registered by an entry point.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from autorater.data.worlds.base import DemoPlan, World
from autorater.data.worlds.metaworld.cameras import HOLD_OUT_DEGREES, IN_VIEW, RANDOM, RANGE
from autorater.data.worlds.metaworld.tasks import HELD_OUT, MT10
from autorater.data.worlds.metaworld.tasks import TASKS as _TASK_TABLE
from autorater.data.worlds.options import WorldOptions, option

__all__ = ["AGENTS", "CAMERAS", "HELD_OUT", "MT10", "MetaWorld", "MetaWorldOptions", "MetaWorldSwapOptions",
           "resolve_tasks"]

AGENTS: dict[str, str] = {
    "expert": "Meta-World's scripted policy for the task",
    "noisy-0.5": "the expert with Gaussian noise (sd 0.5) on every action component, clipped to [-1, 1]",
    "noisy-1.0": "the expert with Gaussian noise (sd 1.0) on every action component, clipped to [-1, 1]",
    "noisy-3.0": "the expert with Gaussian noise (sd 3.0), clipped to [-1, 1]: flailing with a pull toward the task, "
                 "succeeds about half the time",
    "wrong-target": "the expert aimed 12-20 cm away from the object and the goal: the right motion in the wrong place",
    "random": "uniform random actions",
    "sluggish": "the expert's moves at 15-45% of their size: smooth and right, often too slow to finish",
    "stop-short": "the expert until 40-85% of the way to success, then hovering on the spot: smooth, never done",
    "near-miss": "the expert aimed 2-8 cm away from the object and the goal: right-looking, sometimes succeeds",
    "pause": "the expert with one or two pauses (hovering) before its success: a late success or none",
    "detour": "the expert aimed 12-20 cm off for the first 25-90% of the continuation, then right: late or never",
    "early-release": "the expert until 35-115% of its time to success, then it lets go and withdraws as if done",
    "overshoot": "the expert's moves at 1-2x their size with momentum: swings past its targets and back",
    "success-then-undo": "the expert until its first success, then it undoes it (object back, other task, retrace)",
}
CAMERAS = ("corner", "corner2", "corner3", "topview", "behindGripper", "gripperPOV")
CONTROL_STEP_S = 0.0125  # 5 MuJoCo steps of 2.5 ms
CONTINUATION_S = 2.5  # 200 control steps after the takeover


def resolve_tasks(names: Sequence[str]) -> list[str]:
    """Meta-World environment names (``drawer-open-v3``; ``drawer-open`` is taken too)."""
    out = []
    for name in names:
        full = name if name.endswith("-v3") else f"{name}-v3"
        if full not in _TASK_TABLE:
            raise ValueError(f"unknown Meta-World task {name!r}; known: {', '.join(_TASK_TABLE)}")
        out.append(full)
    return out


@dataclass(frozen=True)
class MetaWorldOptions(WorldOptions):
    """Meta-World's generation options (``autorater suite generate --world metaworld``).

    Example:
        >>> MetaWorldOptions(camera="random", hold_out_camera="corner2").camera
        ('random',)
    """

    camera: tuple[str, ...] = option(("corner",), f"camera(s), comma-separated, one drawn per scenario: "
                                     f"{', '.join(CAMERAS)}; {RANDOM}: a free camera drawn per scenario around the "
                                     f"table, every object in view")
    hold_out_camera: tuple[str, ...] = option((), f"with camera {RANDOM}: named camera(s) no drawn camera comes near "
                                              f"(its optical axis stays hold_out_degrees away from theirs), e.g. "
                                              f"corner2 for an unseen-camera test")
    hold_out_degrees: float = option(HOLD_OUT_DEGREES, "how far drawn cameras keep from the held-out ones (degrees, "
                                     "under 90)", low=0.0, high=90.0)
    image_size: int = option(128, "frame width and height in pixels, even", low=16, high=1024)
    twin_camera: str = option("", f"render every rollout a second time from this camera ({RANDOM}: a free camera "
                                  f"drawn per scenario, kept away from hold_out_camera; or a named one): each view a "
                                  f"continuation of its own in the scenario, whose metadata names its twin (two "
                                  f"views of one rollout, for training)", choices=("", *CAMERAS, RANDOM))

    def __post_init__(self):
        super().__post_init__()
        if self.twin_camera and self.twin_camera != RANDOM and self.twin_camera in (*self.camera,
                                                                                    *self.hold_out_camera):
            raise ValueError(f"twin_camera {self.twin_camera} is already the first view or held out; pick another "
                             f"camera, or {RANDOM}")
        bad = [c for c in self.camera if c not in (*CAMERAS, RANDOM)]
        if bad or not self.camera:
            raise ValueError(f"unknown Meta-World camera(s) {', '.join(bad) or '(none)'}; known: {', '.join(CAMERAS)}, "
                             f"or {RANDOM} (a free camera drawn per scenario)")
        bad = [c for c in self.hold_out_camera if c not in CAMERAS]
        if bad:
            raise ValueError(f"hold_out_camera: unknown camera(s) {', '.join(bad)}; known: {', '.join(CAMERAS)}")
        if self.hold_out_camera and RANDOM not in (*self.camera, self.twin_camera):
            raise ValueError(f"hold_out_camera keeps drawn cameras away from {', '.join(self.hold_out_camera)}; it "
                             f"needs camera={RANDOM!r} (or a list with {RANDOM} in it)")
        both = [c for c in self.hold_out_camera if c in self.camera]
        if both:
            raise ValueError(f"camera {', '.join(both)} is both recorded from and held out; drop it from one of them")
        if self.hold_out_degrees >= 90.0:
            raise ValueError(f"hold_out_degrees must be in [0, 90), got {self.hold_out_degrees}")
        if self.image_size % 2:
            raise ValueError(f"image_size must be an even number of pixels >= 16, got {self.image_size}")




@dataclass(frozen=True)
class MetaWorldSwapOptions(WorldOptions):
    """Meta-World's instruction-swap options (``autorater suite swap``; ``scenes.swap_scenario``)."""

    cross_task: bool = option(False, "also swap between reach, push and pick-place where the simulator can judge it")
    shared_only: bool = option(False, "only the judged swaps of shared scenes (with cross_task, of reach, push and "
                                      "pick-place too), never an object the scene lacks: swaps that can succeed")
    keep_out: tuple[str, ...] = option((), "tasks whose words no swap uses, comma-separated (held-out tasks: keep "
                                           "their words out of a training suite's swaps)")

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "keep_out", tuple(resolve_tasks(self.keep_out)))


class MetaWorld(World):
    """Meta-World (module docstring): a Sawyer arm on a table, its tasks Meta-World's environments."""

    NAME = "metaworld"
    TITLE = "Meta-World"
    TASKS: dict[str, str] = {name: task.wordings[0] for name, task in _TASK_TABLE.items()}
    AGENTS = AGENTS
    DEFAULT_TASKS = MT10
    DEFAULT_AGENTS = ("expert", "noisy-0.5", "noisy-1.0", "wrong-target", "random")
    FAILURE_MODES = {"timeout": "the task was not done by the end of the video",
                     "knocked_off": "an object fell off the table",
                     "dropped": "the carried object fell from the gripper before the task was done"}
    OPTIONS = MetaWorldOptions
    SWAP_OPTIONS = MetaWorldSwapOptions
    FPS = 8.0  # a frame every 10 control steps
    # The demo trains the default recipe (the general model) on one-camera robot video.
    DEMO = DemoPlan(preset="general", sizes=((200, 5), (120, 5), (20, 10)), quick=((24, 5), (12, 5), (4, 10)),
                    out="demo-out-metaworld")

    def resolve_tasks(self, names: Sequence[str]) -> list[str]:
        return resolve_tasks(names)

    def check_options(self, fps: float | None = None, **options) -> dict:
        return check_options(self.FPS if fps is None else fps, **options)

    def run_scenario(self, job) -> dict:
        from autorater.data.worlds.metaworld.scenes import run_scenario as run

        return run(job)

    def swap_scenario(self, job) -> dict:
        from autorater.data.worlds.metaworld.scenes import swap_scenario as swap

        return swap(job)

    def describe(self, tasks: Sequence[str], agents: Sequence[str], options: dict, common: dict) -> tuple[str, dict]:
        return describe(tasks, agents, options, common)

    def default_preset(self, source: dict) -> tuple[str, str]:
        """Camera video: the general model."""
        return "general", "camera video: the general model (any camera, any wording)"


def check_options(fps: float = 8.0, **options) -> dict:
    """``MetaWorldOptions`` checked, and the steps per frame: the dict every scenario job carries (``cameras``,
    ``image_size``, ``steps_per_frame``, ``horizon_steps``, ``hold_out_cameras``, ``hold_out_degrees``)."""
    checked = MetaWorld().options(**options)
    steps_per_frame = 1.0 / (fps * CONTROL_STEP_S)
    horizon = CONTINUATION_S / CONTROL_STEP_S
    if abs(steps_per_frame - round(steps_per_frame)) > 1e-9 or horizon % round(steps_per_frame):
        raise ValueError(f"fps {fps} does not divide Meta-World's 80 control steps a second into whole steps per "
                         f"frame that also divide the 200-step continuation; use 4, 8, 16, 20, 40 or 80")
    return {"cameras": list(checked.camera), "image_size": checked.image_size,
            "steps_per_frame": int(round(steps_per_frame)), "horizon_steps": int(horizon),
            "hold_out_cameras": list(checked.hold_out_camera), "hold_out_degrees": checked.hold_out_degrees,
            **({"twin_camera": checked.twin_camera} if checked.twin_camera else {})}


def describe(tasks: Sequence[str], agents: Sequence[str], options: dict, common: dict) -> tuple[str, dict]:
    """suite.json's description and ``source``."""
    from importlib.metadata import version

    text = f"Synthetic STS-style suite on Meta-World ({', '.join(tasks)})"
    source = {"generator": common["generator"], "world": "metaworld", "tasks": list(tasks), "agents": list(agents),
              **{k: v for k, v in common.items() if k != "generator"}, "cameras": options["cameras"],
              "image_size": options["image_size"], "steps_per_frame": options["steps_per_frame"],
              "continuation_steps": options["horizon_steps"], "metaworld": version("metaworld"),
              "mujoco": version("mujoco")}
    if options.get("twin_camera"):
        source["twin_camera"] = options["twin_camera"]
    if RANDOM in (*options["cameras"], options.get("twin_camera")):
        source["camera_range"] = {**RANGE, "in_view": IN_VIEW, "hold_out_cameras": options["hold_out_cameras"],
                                  "hold_out_degrees": options["hold_out_degrees"]}
    return text, source
