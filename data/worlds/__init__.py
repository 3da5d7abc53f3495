"""The worlds the suite generator records: one package per world, all with the same interface.

A world package (``autorater.data.worlds.<name>``) offers:

- ``NAME``; ``TASKS`` (task name -> what it is); ``AGENTS`` (agent name -> one line);
  ``DEFAULT_TASKS``; ``DEFAULT_AGENTS``; ``FAILURE_MODES``;
- ``resolve_tasks(names) -> list[str]`` and ``check_agents(names) -> list[str]`` (errors name the allowed values);
- ``check_options(**options) -> dict``: its own generation options (BabyAI: ``view``, ``image_size``,
  ``tile_size``; Meta-World: ``camera``, ``hold_out_camera``, ``hold_out_degrees``, ``image_size``),
  validated, defaults filled;
- ``run_scenario(job: ScenarioJob) -> dict``: plan one scenario, play its continuations, and write their
  videos (none when ``job.out`` is None: truth only). Spawn-safe (a top-level function of plain data).
  Returns ``{"index", "scenario", "continuations", "truths"}``: the suite records as dicts and the
  ``simulator_truth.jsonl`` lines;
- ``swap_scenario(job: SwapJob) -> dict``: another instruction for one scenario and its truth, recomputed
  by the simulator (``job.options``: the world's swap options, Meta-World's ``cross_task``);
  ``{"index", "instruction", "category", "spec", "truths"}`` (``instruction`` None when the scenario has
  no usable swap);
- ``describe(tasks, agents, options) -> (description, source)``: suite.json's text and metadata.

``autorater.data.generate`` does the rest for every world: agents dealt to continuations, references, simulated
annotators, the suite files, the progress bar and the worker processes.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import ModuleType

__all__ = ["WORLDS", "ScenarioJob", "SwapJob", "load_world", "world_of"]

WORLDS = ("babyai", "metaworld")


@dataclass
class ScenarioJob:
    """One scenario to generate: which task, which agents, where the videos go (None: truth only)."""

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
    world's swap options (Meta-World: ``cross_task``)."""

    index: int
    scenario: dict
    truths: list[dict]
    seed: int
    options: dict = field(default_factory=dict)


def load_world(name: str) -> ModuleType:
    """The world package called ``name`` (``WORLDS``)."""
    if name not in WORLDS:
        raise ValueError(f"unknown world {name!r}; choose one of {', '.join(WORLDS)}")
    return importlib.import_module(f"autorater.data.worlds.{name}")


def world_of(source: dict | None) -> str | None:
    """The world a suite's ``source`` (suite.json) says made it: ``source["world"]``, or ``"babyai"`` for
    the generator's suites written before there were worlds; None for a suite from elsewhere."""
    source = source or {}
    if source.get("world") in WORLDS:
        return source["world"]
    return "babyai" if source.get("generator") == "data.generate.generate_suite" else None
