"""The worlds the suite generator records: one package per world, each a :class:`World`, registered in ``WORLDS``.

A world package (``autorater.data.worlds.<name>``) plans scenarios, plays their continuations, writes their videos
and says the truth; ``autorater.data.generate`` does the rest for every world (agents dealt to continuations,
references, simulated annotators, the suite files, the progress bar and the worker processes). Its generation
options are a dataclass (:class:`WorldOptions`): each field is one option, its default the world's recipe, its
``help`` in the field's metadata (:func:`option`); the CLI makes a flag of each (``--image-size``), and a flag of
another world is refused with the name of the world it belongs to.

Adding a world is its own package and one line in :data:`WORLDS` (``toy`` is the smallest, a test's world; see
docs/worlds.md, "Adding a world"). Packages are imported when first used, so importing ``autorater.data`` stays
light; keep the simulator's own imports inside the functions that need them.

Example:
    >>> world = load_world("toy")
    >>> world.NAME, world.OPTIONS().image_size
    ('toy', 64)
    >>> options_of(world, {"image_size": 32, "grid_size": None})
    ToyOptions(grid_size=8, image_size=32)
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import numbers
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

__all__ = ["WORLDS", "DEFAULT_WORLD", "INTERFACE", "World", "WorldOptions", "NoOptions", "OptionInfo", "ScenarioJob",
           "SwapJob", "DemoPlan", "demo_worlds", "load_world", "preset_for", "world_allows", "world_of", "option",
           "options_of", "option_infos"]

# The registry: a world's name and its package (imported by ``load_world``). One line per world.
WORLDS: dict[str, str] = {
    "babyai": "autorater.data.worlds.babyai",
    "metaworld": "autorater.data.worlds.metaworld",
    "toy": "autorater.data.worlds.toy",
}
DEFAULT_WORLD = "babyai"  # the generator's default, and the world of its suites written before there were worlds


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


# ----------------------------------------------------------------------------------------------
# Options


def option(default: Any, help: str, *, choices: Sequence | None = None, low: float | None = None,
           high: float | None = None) -> Any:
    """A field of a world's options dataclass: its default, its help (the CLI flag's), and what
    :class:`WorldOptions` checks for every world (a value in ``choices``; a number from ``low`` to ``high``)."""
    return field(default=default, metadata={"help": help, "choices": tuple(choices) if choices else None,
                                            "low": low, "high": high})


@dataclass(frozen=True)
class WorldOptions:
    """The base of a world's options: one field per option (:func:`option`), defaults the world's recipe.

    On construction, for every world: ``None`` is the option's default; a comma-separated string or a list
    becomes a ``tuple[str, ...]`` option's tuple; numbers are converted to the field's type; ``choices`` and
    ``low`` / ``high`` are checked. A world adds its own checks in ``__post_init__`` (after calling this one),
    raising ValueError that names the option and the fix.

    Example:
        >>> @dataclass(frozen=True)
        ... class SquareOptions(WorldOptions):
        ...     side: int = option(8, "squares per side", low=2, high=64)
        >>> SquareOptions(side=None).side
        8
        >>> SquareOptions(side=1)
        Traceback (most recent call last):
        ...
        ValueError: option side (--side) must be a finite number from 2 to 64, got 1
    """

    def __post_init__(self):
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None:
                value = f.default
            kind, _ = _kind(hints[f.name])
            if value is not None:
                value = _convert(f.name, value, kind)
                meta = f.metadata
                items = value if kind is tuple else (value,)
                if meta.get("choices") is not None:
                    bad = [v for v in items if v not in meta["choices"]]
                    if bad:
                        raise ValueError(f"option {_flag(f.name)} must be one of {', '.join(map(str, meta['choices']))}"
                                         f", got {', '.join(map(repr, bad))}")
                low, high = meta.get("low"), meta.get("high")
                if kind in (int, float) and (not math.isfinite(value) or (low is not None and value < low)
                                             or (high is not None and value > high)):
                    raise ValueError(f"option {_flag(f.name)} must be a finite number{_range(low, high)}, got {value}")
            object.__setattr__(self, f.name, value)


@dataclass(frozen=True)
class NoOptions(WorldOptions):
    """A world with no options of this kind (BabyAI's swaps)."""


def _range(low: float | None, high: float | None) -> str:
    if low is not None and high is not None:
        return f" from {low:g} to {high:g}"
    return f" >= {low:g}" if low is not None else f" <= {high:g}" if high is not None else ""


def _flag(name: str) -> str:
    return f"{name} (--{name.replace('_', '-')})"


def _kind(hint) -> tuple[type, bool]:
    """``(int | float | str | bool | tuple, optional)`` of a field's type hint."""
    args = typing.get_args(hint)
    optional = type(None) in args
    if optional:
        rest = [a for a in args if a is not type(None)]
        hint = rest[0] if len(rest) == 1 else hint
    origin = typing.get_origin(hint) or hint
    if origin in (tuple, list):
        return tuple, optional
    if origin not in (int, float, str, bool):
        raise TypeError(f"an option is an int, float, str, bool or tuple[str, ...] (optional or not), got {hint}")
    return origin, optional


def _convert(name: str, value, kind: type):
    if kind is tuple:
        if isinstance(value, str):
            return tuple(v.strip() for v in value.split(",") if v.strip())
        return tuple(value)
    if kind is bool:
        if not isinstance(value, bool):
            raise ValueError(f"option {_flag(name)} is true or false, got {value!r}")
        return value
    if kind in (int, float) and (isinstance(value, bool) or not isinstance(value, numbers.Real)):
        raise ValueError(f"option {_flag(name)} must be a number, got {value!r}")
    if kind is int and value != int(value):
        raise ValueError(f"option {_flag(name)} must be a whole number, got {value}")
    return kind(value)


@dataclass(frozen=True)
class OptionInfo:
    """One option as the CLI shows it: name, type (``int``, ``float``, ``str``, ``bool`` or ``tuple``: a
    comma-separated list), default, help and the checked values."""

    name: str
    kind: type
    default: Any
    help: str
    choices: tuple | None = None
    low: float | None = None
    high: float | None = None


def option_infos(options: type[WorldOptions]) -> list[OptionInfo]:
    """The options of a world's options dataclass, in order."""
    hints = typing.get_type_hints(options)
    return [OptionInfo(f.name, _kind(hints[f.name])[0], f.default, f.metadata.get("help", ""),
                       f.metadata.get("choices"), f.metadata.get("low"), f.metadata.get("high"))
            for f in dataclasses.fields(options)]


def options_of(world: World | str, options: WorldOptions | Mapping | None = None, swap: bool = False,
               **more) -> WorldOptions:
    """``world``'s options (its ``OPTIONS``; ``swap``: its ``SWAP_OPTIONS``) from an instance, a mapping and
    keyword arguments (later ones win). A name the world lacks is refused with the world it belongs to."""
    world = load_world(world) if isinstance(world, str) else world
    cls = world.SWAP_OPTIONS if swap else world.OPTIONS
    if isinstance(options, WorldOptions):
        if not isinstance(options, cls):
            raise ValueError(f"{type(options).__name__} are not {world.NAME}'s options (fix: pass a {cls.__name__} "
                             f"or a dict of its fields)")
        given = {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}
    else:
        given = dict(options or {})
    given.update(more)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = [k for k in given if k not in names]
    if unknown:
        raise ValueError("; ".join(_not_ours(world.NAME, k, swap) for k in unknown)
                         + f" ({world.NAME}'s {'swap ' if swap else ''}options: {', '.join(names) or 'none'})")
    return cls(**given)


def _not_ours(name: str, key: str, swap: bool) -> str:
    owners = [w for w in WORLDS if w != name
              and key in {f.name for f in dataclasses.fields(getattr(load_world(w), "SWAP_OPTIONS" if swap
                                                                      else "OPTIONS"))}]
    if owners:
        fix = f"drop it: a {name} suite has no such swap" if swap else f"pass world {owners[0]!r}, or drop it"
        return f"{_flag(key)} is an option of {' and '.join(owners)}, not of {name} (fix: {fix})"
    return f"{name} has no option {_flag(key)} (fix: drop it)"


# ----------------------------------------------------------------------------------------------
# The interface


class World(Protocol):
    """What a world package offers, as module-level names (a module is a ``World``).

    The names the CLI and the generator read: ``NAME``; ``TASKS`` (task name -> what it is); ``AGENTS``
    (agent name -> one line); ``DEFAULT_TASKS``; ``DEFAULT_AGENTS``; ``FAILURE_MODES`` (mode -> what it means);
    ``OPTIONS`` (its options dataclass, a :class:`WorldOptions`: the flags of ``autorater suite generate``);
    ``SWAP_OPTIONS`` (those of ``suite swap``; :class:`NoOptions` if none); ``FPS`` (the frame rate by default,
    frames per second); ``DEMO`` (a :class:`DemoPlan`: what ``autorater demo`` runs on it; None: no demo). What it
    does:

    - ``resolve_tasks(names)`` and ``check_agents(names)``: canonical names (errors name the allowed values);
    - ``check_options(fps=FPS, **options) -> dict``: ``OPTIONS`` checked (:func:`options_of`; ``None`` is a
      default) and what follows from them and the frame rate, as the plain dict every ``ScenarioJob`` carries;
    - ``run_scenario(job: ScenarioJob) -> dict``: plan one scenario, play its continuations, and write their
      videos (none when ``job.out`` is None: truth only). Spawn-safe (a top-level function of plain data).
      Returns ``{"index", "scenario", "continuations", "truths"}``: the suite records as dicts and the
      ``simulator_truth.jsonl`` lines (``autorater.data.generate`` lists the fields every world writes);
    - ``swap_scenario(job: SwapJob) -> dict``: another instruction for one scenario and its truth, recomputed
      by the simulator: ``{"index", "instruction", "category", "spec", "truths"}`` (``instruction`` None when
      the scenario has no usable swap);
    - ``describe(tasks, agents, options, common) -> (description, source)``: suite.json's text and ``source``
      (``options``: the ``check_options`` dict; ``common``: the generator's settings; the source names the
      world, ``"world": NAME``, so that :func:`world_of` finds it again);
    - ``augmentations(source) -> frozenset``: the training augmentations (``TrainConfig`` fields) that need this
      world's renderer or words and that a suite of it (its suite.json ``source``) allows: BabyAI's ``recolour``
      permutes MiniGrid's palette, ``relax`` drops its colour words, ``rotate`` turns its top-down view; empty for
      most worlds;
    - ``default_preset(source) -> (preset, why)``: the model preset that serves a suite of this world best (its
      suite.json ``source``: BabyAI's first-person view, the grid reader; camera video, the general model), and
      why in one line: what ``autorater train`` picks without ``--config`` (:func:`preset_for`).
    """

    NAME: str
    TASKS: Mapping[str, str]
    AGENTS: Mapping[str, str]
    DEFAULT_TASKS: Sequence[str]
    DEFAULT_AGENTS: Sequence[str]
    FAILURE_MODES: Mapping[str, str]
    OPTIONS: type[WorldOptions]
    SWAP_OPTIONS: type[WorldOptions]
    FPS: float
    DEMO: DemoPlan | None

    resolve_tasks: Callable[[Sequence[str]], list[str]]
    check_agents: Callable[[Sequence[str]], list[str]]
    check_options: Callable[..., dict]
    run_scenario: Callable[[ScenarioJob], dict]
    swap_scenario: Callable[[SwapJob], dict]
    describe: Callable[[Sequence[str], Sequence[str], dict, dict], tuple[str, dict]]
    augmentations: Callable[[dict], frozenset]
    default_preset: Callable[[dict], tuple[str, str]]


INTERFACE: tuple[str, ...] = tuple(World.__annotations__)  # the names a world package defines


def world_allows(sources: Sequence[dict | None], augmentation: str) -> bool:
    """Whether the worlds that made every suite (their suite.json ``source``) allow a training augmentation that
    needs their renderer or words (each world's ``augmentations(source)``); a suite from elsewhere (no world) allows
    none."""
    worlds = [world_of(s) for s in sources]
    return bool(worlds) and all(w is not None and augmentation in load_world(w).augmentations(s or {})
                                for w, s in zip(worlds, sources))


def demo_worlds() -> list[str]:
    """The worlds with a demo (their ``DEMO``), in registry order."""
    return [name for name in WORLDS if load_world(name).DEMO is not None]


def preset_for(sources: Sequence[dict | None], fallback: str) -> tuple[str, str]:
    """The model preset to train on suites (their suite.json ``source``) when no ``--config`` names one, and why:
    the preset their worlds ask for (each world's ``default_preset``) when they all ask for the same one, else
    ``fallback`` (the general model: any camera, any wording) for a suite from no registered world or suites whose
    worlds disagree.

    Example:
        >>> preset_for([{"world": "metaworld"}], "general")[0]
        'general'
        >>> preset_for([None], "general")
        ('general', 'a suite from no registered world: the default for any camera and any wording')
    """
    asked = []
    for source in sources:
        world = world_of(source)
        if world is None:
            return fallback, "a suite from no registered world: the default for any camera and any wording"
        asked.append((world, *load_world(world).default_preset(source or {})))
    presets = {preset for _, preset, _ in asked}
    if len(presets) == 1:
        world, preset, why = asked[0]
        worlds = sorted({w for w, _, _ in asked})
        return preset, f"{' and '.join(worlds)} suite{'s' if len(asked) > 1 else ''}: {why}"
    return fallback, (f"suites whose worlds ask for different presets ({', '.join(sorted(presets))}): the default "
                      f"for any camera and any wording")


def load_world(name: str) -> World:
    """The world package registered as ``name`` in :data:`WORLDS` (checked for every name of :class:`World`)."""
    if name not in WORLDS:
        raise ValueError(f"unknown world {name!r}; choose one of {', '.join(WORLDS)}")
    module = importlib.import_module(WORLDS[name])
    missing = [n for n in INTERFACE if not hasattr(module, n)]
    if missing or getattr(module, "NAME", None) != name:
        what = f"it lacks {', '.join(missing)}" if missing else f"its NAME is {module.NAME!r}, not {name!r}"
        raise TypeError(f"world package {WORLDS[name]} is not a World: {what} (fix: define every name of "
                        f"autorater.data.worlds.World in its __init__.py, NAME the name it is registered under)")
    return module


def world_of(source: dict | None) -> str | None:
    """The world a suite's ``source`` (suite.json) says made it: ``source["world"]``, or :data:`DEFAULT_WORLD` for
    the generator's suites written before there were worlds; None for a suite from elsewhere."""
    source = source or {}
    if source.get("world") in WORLDS:
        return source["world"]
    return DEFAULT_WORLD if source.get("generator") == "data.generate.generate_suite" else None
