"""The worlds the suite generator records: each a :class:`World` subclass, registered by an entry point.

A world (``autorater.data.worlds.base.World``) plans scenarios, plays their continuations, writes their videos and
says the truth; ``autorater.data.generate`` does the rest for every world (agents dealt to continuations, references,
simulated annotators, the suite files, the progress bar and the worker processes). Its generation options are a
dataclass (``WorldOptions``): each field is one option, its default the world's recipe, its ``help`` in the field's
metadata (``option``); the CLI makes a flag of each (``--image-size``), and a flag of another world is refused with the
name of the world it belongs to.

Worlds are found through the entry-point group :data:`GROUP` (``importlib.metadata``), by any installed package, so a
simulator package of one's own adds a world without editing this repository: in its ``pyproject.toml``::

    [project.entry-points."autorater.worlds"]
    lamp = "lamp_world:Lamp"        # a World subclass whose NAME is "lamp"

BabyAI, Meta-World and the toy world (the smallest: a test's world, and the example of docs/worlds.md) are
registered the same way, by this project's ``pyproject.toml``. :data:`WORLDS` reads the group live (a package
installed, or put on the path, since is seen); a world's package is imported when first used, so importing
``autorater.data`` stays light (keep the simulator's own imports inside the functions that need them).

Example:
    >>> world = load_world("toy")
    >>> world.NAME, world.OPTIONS().image_size, type(world).__mro__[1].__name__
    ('toy', 64, 'World')
    >>> options_of(world, {"image_size": 32, "grid_size": None})
    ToyOptions(grid_size=8, image_size=32)
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from typing import Iterator, Mapping, Sequence

from autorater.data.worlds.base import DemoPlan, Palette, ScenarioJob, SwapJob, World
from autorater.data.worlds.options import NoOptions, OptionInfo, WorldOptions, flag, option, option_infos

__all__ = ["WORLDS", "DEFAULT_WORLD", "GROUP", "INTERFACE", "World", "WorldOptions", "NoOptions", "OptionInfo",
           "Palette", "ScenarioJob", "SwapJob", "DemoPlan", "demo_worlds", "load_world", "palette_of", "preset_for",
           "world_allows", "world_of", "option", "options_of", "option_infos"]

GROUP = "autorater.worlds"  # the entry-point group worlds register in: name = "package.module:WorldClass"
BUILT_IN = ("babyai", "metaworld", "toy")  # this project's own, registered by its pyproject.toml
DEFAULT_WORLD = "babyai"  # the generator's default, and the world of its suites written before there were worlds
INTERFACE: tuple[str, ...] = ("NAME", "TASKS", "AGENTS", "run_scenario")  # what a world must define; the rest default


@functools.lru_cache(maxsize=16)
def _registered(path: tuple[str, ...]) -> dict:
    """The group's entry points by name, for one ``sys.path`` (the first of a name on the path wins)."""
    from importlib.metadata import entry_points

    found: dict = {}
    for entry in entry_points(group=GROUP):
        found.setdefault(entry.name, entry)
    return dict(sorted(found.items()))


class RegisteredWorlds(Mapping[str, str]):
    """The worlds registered in :data:`GROUP`, read live: name -> ``module:Class`` of its entry point."""

    def __getitem__(self, name: str) -> str:
        return _registered(tuple(sys.path))[name].value

    def __iter__(self) -> Iterator[str]:
        return iter(_registered(tuple(sys.path)))

    def __len__(self) -> int:
        return len(_registered(tuple(sys.path)))

    def __repr__(self) -> str:
        return f"RegisteredWorlds({dict(self)!r})"


WORLDS = RegisteredWorlds()


def load_world(name: str) -> World:
    """The world registered as ``name`` (an instance of its class), checked: a ``World`` subclass with every name
    of :data:`INTERFACE`, its ``NAME`` the name it is registered under."""
    if not isinstance(name, str) or name not in WORLDS:
        missing = [w for w in BUILT_IN if w not in WORLDS]
        hint = (f" (the installed autorater's entry points predate its worlds' ({', '.join(missing)} missing); fix: "
                f"pip install -e . again)") if missing else ""
        raise ValueError(f"unknown world {str(name)[:60]!r}; choose one of {', '.join(WORLDS)}{hint}")
    return _world(name, WORLDS[name])


@functools.lru_cache(maxsize=None)
def _world(name: str, value: str) -> World:
    entry = _registered(tuple(sys.path))[name]
    cls = entry.load()
    where = f"world {name} = {value} (entry point group {GROUP})"
    if not (isinstance(cls, type) and issubclass(cls, World)):
        raise TypeError(f"{where} is not a World (fix: point it at a subclass of autorater.data.worlds.World)")
    missing = [n for n in INTERFACE if not getattr(cls, n, None) or getattr(cls, n) is getattr(World, n, None)]
    if missing or cls.NAME != name:
        what = f"it lacks {', '.join(missing)}" if missing else f"its NAME is {cls.NAME!r}, not {name!r}"
        raise TypeError(f"{where}: {what} (fix: define {', '.join(INTERFACE)} in the class, NAME the name it is "
                        f"registered under)")
    return cls()


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
    owners = [w for w in WORLDS if w != name and key in _option_names(w, swap)]
    if owners:
        fix = f"drop it: a {name} suite has no such swap" if swap else f"pass world {owners[0]!r}, or drop it"
        return f"{flag(key)} is an option of {' and '.join(owners)}, not of {name} (fix: {fix})"
    return f"{name} has no option {flag(key)} (fix: drop it)"


def _option_names(world: str, swap: bool) -> set[str]:
    """A registered world's option names (none when it does not load: a broken package is not this error's)."""
    try:
        return {f.name for f in dataclasses.fields(getattr(load_world(world), "SWAP_OPTIONS" if swap else "OPTIONS"))}
    except (ImportError, TypeError, ValueError):
        return set()


def palette_of(sources: Sequence[dict | None]) -> Palette | None:
    """The palette of the worlds that made every suite (their suite.json ``source``): their one ``PALETTE``, or None
    when a suite comes from elsewhere, a world has none, or the worlds' differ."""
    worlds = {world_of(s) for s in sources}
    if not worlds or None in worlds:
        return None
    palettes = {id(load_world(w).PALETTE): load_world(w).PALETTE for w in worlds}
    return next(iter(palettes.values())) if len(palettes) == 1 else None


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


def world_of(source: dict | None) -> str | None:
    """The world a suite's ``source`` (suite.json) says made it: ``source["world"]``, or :data:`DEFAULT_WORLD` for
    the generator's suites written before there were worlds; None for a suite from elsewhere."""
    source = source or {}
    if source.get("world") in WORLDS:
        return source["world"]
    return DEFAULT_WORLD if source.get("generator") == "data.generate.generate_suite" else None
