"""What a world is: a class with the names the generator and the CLI read (:class:`World`), defaults where worlds
share them, the jobs it runs (:class:`ScenarioJob`, :class:`SwapJob`), the demo it offers (:class:`DemoPlan`) and the
palette its renderer draws objects in (:class:`Palette`).

A world subclasses :class:`World`, sets its ``NAME``, ``TASKS``, ``AGENTS`` (and what differs from the defaults) and
defines ``run_scenario``; it is registered by an entry point (``autorater.data.worlds``), so a simulator package of
one's own adds a world without editing this repository.

Example:
    >>> class Blink(World):
    ...     NAME, TASKS, AGENTS = "blink", {"light": "light the lamp"}, {"on": "lights it", "off": "never does"}
    ...     def run_scenario(self, job):
    ...         raise NotImplementedError
    >>> world = Blink()
    >>> world.DEFAULT_TASKS, world.resolve_tasks(["light"]), world.check_options()
    (('light',), ['light'], {})
    >>> world.default_preset({})[0], world.augmentations({})
    ('general', frozenset())
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import ClassVar, Mapping, Sequence

from autorater.data.worlds.options import NoOptions, WorldOptions, flag


@dataclass(frozen=True)
class DemoPlan:
    """What ``autorater demo --world NAME`` runs on a world (its ``DEMO``): the model preset it trains, the
    (scenarios, continuations per scenario) of its training, reference and new-version suites, full and ``quick``,
    and its default working folder."""

    preset: str
    sizes: tuple[tuple[int, int], tuple[int, int], tuple[int, int]]
    quick: tuple[tuple[int, int], tuple[int, int], tuple[int, int]]
    out: str


@dataclass
class ScenarioJob:
    """One scenario to generate: which task, which agents, where the videos go (None: truth only), and the world's
    ``check_options`` dict (plain data: a job crosses into worker processes)."""

    index: int
    task: str
    agents: list[str]
    first_continuation: int
    seed: int
    out: str | None
    fps: float
    version: str
    options: dict = field(default_factory=dict)


@dataclass
class SwapJob:
    """One scenario of a suite to give another instruction: its record (a dict), its truth lines, and the
    world's swap options as a dict (its ``SWAP_OPTIONS``; Meta-World: ``cross_task``, ``shared_only``)."""

    index: int
    scenario: dict
    truths: list[dict]
    seed: int
    options: dict = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class Palette:
    """The colours a world draws its objects in and the words that name them: what the recolour and relax training
    augmentations read of a world that allows them (``autorater.training.inputs.augment``).

    Attributes:
        colours: colour name -> RGB (0-255) as the renderer draws an object of that colour.
        permuted: the colours a recolour may exchange (the others stay: an agent's, the walls').
        tint: on screen every object's colour is lightened this share towards white (MiniGrid's view: 0.3).
        floor: the floor's grey in [0, 1]: a cell's colour is the floor plus a share of one object's.
        objects: the object words of its instructions (with the colour words: what a weaker instruction may name).
    """

    colours: Mapping[str, tuple[int, int, int]]
    permuted: tuple[str, ...]
    tint: float = 0.0
    floor: float = 0.0
    objects: frozenset[str] = frozenset()


class World:
    """A world the suite generator records. A subclass sets the names below that differ from the defaults and
    defines :meth:`run_scenario` (and :meth:`swap_scenario` if its simulator can judge another instruction).

    The names the CLI and the generator read: ``NAME`` (the name it is registered under); ``TITLE`` (how its
    messages and suites name it; default ``NAME``); ``TASKS`` (task name -> what it is); ``AGENTS`` (agent name ->
    one line); ``DEFAULT_TASKS`` and ``DEFAULT_AGENTS`` (default: all); ``FAILURE_MODES`` (mode -> what it means);
    ``OPTIONS`` (its options dataclass, a ``WorldOptions``: the flags of ``autorater suite generate``);
    ``SWAP_OPTIONS`` (those of ``suite swap``; ``NoOptions`` if none); ``FPS`` (the frame rate by default, frames per
    second); ``DEMO`` (a :class:`DemoPlan`: what ``autorater demo`` runs on it; None: no demo); ``AUGMENTATIONS`` (the
    training augmentations its suites allow) and ``PALETTE`` (its objects' colours, for the recolour and relax
    augmentations; None: none). What it does:

    - ``resolve_tasks(names)`` and ``check_agents(names)``: canonical names (errors name the allowed values);
    - ``check_options(fps=FPS, **options) -> dict``: ``OPTIONS`` checked (``options_of``; ``None`` is a default) and
      what follows from them and the frame rate, as the plain dict every ``ScenarioJob`` carries;
    - ``run_scenario(job: ScenarioJob) -> dict``: plan one scenario, play its continuations, and write their
      videos (none when ``job.out`` is None: truth only), in a worker process too (the job is plain data). Returns
      ``{"index", "scenario", "continuations", "truths"}``: the suite records as dicts and the
      ``simulator_truth.jsonl`` lines (``autorater.data.generate`` lists the fields every world writes);
    - ``swap_scenario(job: SwapJob) -> dict``: another instruction for one scenario and its truth, recomputed
      by the simulator: ``{"index", "instruction", "category", "spec", "truths"}`` (``instruction`` None when
      the scenario has no usable swap: the default);
    - ``describe(tasks, agents, options, common) -> (description, source)``: suite.json's text and ``source``
      (``options``: the ``check_options`` dict; ``common``: the generator's settings; the source names the
      world, ``"world": NAME``, so that ``world_of`` finds it again);
    - ``augmentations(source) -> frozenset``: the training augmentations (``TrainConfig.augment`` fields) that need
      this world's renderer or words and that a suite of it (its suite.json ``source``) allows: BabyAI's
      ``recolour`` permutes its palette, ``relax`` drops its colour words, ``rotate`` turns its top-down view;
    - ``default_preset(source) -> (preset, why)``: the model preset that serves a suite of this world best (BabyAI's
      first-person view, the grid reader; camera video, the general model: the default), and why in one line.
    """

    NAME: ClassVar[str] = ""
    TITLE: ClassVar[str] = ""
    TASKS: ClassVar[Mapping[str, str]] = {}
    AGENTS: ClassVar[Mapping[str, str]] = {}
    DEFAULT_TASKS: ClassVar[Sequence[str]] = ()
    DEFAULT_AGENTS: ClassVar[Sequence[str]] = ()
    FAILURE_MODES: ClassVar[Mapping[str, str]] = {"timeout": "the task was not done by the end of the video"}
    OPTIONS: ClassVar[type[WorldOptions]] = NoOptions
    SWAP_OPTIONS: ClassVar[type[WorldOptions]] = NoOptions
    FPS: ClassVar[float] = 8.0
    DEMO: ClassVar[DemoPlan | None] = None
    AUGMENTATIONS: ClassVar[frozenset] = frozenset()
    PALETTE: ClassVar[Palette | None] = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.TITLE = cls.__dict__.get("TITLE") or cls.NAME
        cls.DEFAULT_TASKS = tuple(cls.__dict__.get("DEFAULT_TASKS") or cls.DEFAULT_TASKS or cls.TASKS)
        cls.DEFAULT_AGENTS = tuple(cls.__dict__.get("DEFAULT_AGENTS") or cls.DEFAULT_AGENTS or cls.AGENTS)

    def resolve_tasks(self, names: Sequence[str]) -> list[str]:
        """The tasks' canonical names (their keys in ``TASKS``)."""
        unknown = [n for n in names if n not in self.TASKS]
        if unknown:
            raise ValueError(f"unknown {self.TITLE} task(s) {', '.join(unknown)}; known: {', '.join(self.TASKS)}")
        return list(names)

    def check_agents(self, names: Sequence[str]) -> list[str]:
        """The agents, each one of ``AGENTS``."""
        unknown = [a for a in names if a not in self.AGENTS]
        if unknown or not names:
            raise ValueError(f"unknown {self.TITLE} agent(s) {', '.join(unknown) or '(none given)'}; known: "
                             f"{', '.join(self.AGENTS)}")
        return list(names)

    def options(self, **options) -> WorldOptions:
        """``OPTIONS`` of these values, checked (a name it lacks is refused; ``None`` is a default)."""
        names = {f.name for f in fields(self.OPTIONS)}
        unknown = [k for k in options if k not in names]
        if unknown:
            raise ValueError(f"{self.NAME} has no option {flag(unknown[0])} (fix: drop it; its options: "
                             f"{', '.join(sorted(names)) or 'none'})")
        return self.OPTIONS(**options)

    def check_options(self, fps: float | None = None, **options) -> dict:
        """``OPTIONS`` checked (:meth:`options`), as the plain dict every scenario job carries."""
        return asdict(self.options(**options))

    def run_scenario(self, job: ScenarioJob) -> dict:
        raise NotImplementedError(f"world {self.NAME!r} defines no run_scenario")

    def swap_scenario(self, job: SwapJob) -> dict:
        """No swap: this world's simulator does not judge another instruction."""
        return {"index": job.index, "spec": None, "instruction": None, "category": None, "truths": []}

    def describe(self, tasks: Sequence[str], agents: Sequence[str], options: dict, common: dict) -> tuple[str, dict]:
        """suite.json's description and ``source`` (naming the world, so that ``world_of`` finds it)."""
        source = {"generator": common["generator"], "world": self.NAME, "tasks": list(tasks), "agents": list(agents),
                  **{k: v for k, v in common.items() if k != "generator"}, **options}
        return f"Synthetic STS-style suite in the {self.TITLE} world ({', '.join(tasks)})", source

    def augmentations(self, source: dict) -> frozenset:
        """The training augmentations a suite of this world allows: ``AUGMENTATIONS``."""
        return self.AUGMENTATIONS

    def default_preset(self, source: dict) -> tuple[str, str]:
        """The general model (no preset of its own)."""
        return "general", "no preset of its own: the general model"


__all__ = ["DemoPlan", "Palette", "ScenarioJob", "SwapJob", "World"]
