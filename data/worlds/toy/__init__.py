"""The toy world: a white square walks a small board to the coloured square it is told to reach.

The smallest world behind the interface (:class:`Toy`, a ``autorater.data.worlds.World`` registered by an entry
point), in one file with numpy only: the example of docs/worlds.md, "Adding a world", and a world that makes a real
suite (H.264 videos included) in a fraction of a second, for tests. A *scenario* is a board of ``grid_size`` x
``grid_size`` cells, two or four coloured squares on it (``TASKS``), a start cell and the colour to reach; the expert
walks the shortest way there (an L, around the other squares) and plays 20-50% of it as context; each agent then moves
alone for ``2 x remaining + 4`` steps, the same for every continuation of the scenario, and keeps moving after it
reached a square. Frame 0 is the start, then one frame per step (8 a second by default).

Truth: the first frame that shows the agent on the named square is a success; on another square first, the
failure ``wrong_square``; neither by the end, ``timeout`` (marked at the end). Truth lines
(``simulator_truth.jsonl``) carry every field the generator reads, and ``task``, ``goal`` (the colour),
``targets`` (colour -> cell), ``positions`` (the agent's cell, frame by frame: enough to judge any other
instruction, as ``swap_scenario`` does) and ``traits`` (``off_expert_share``: share of the steps before the event
that do not get closer; ``near_miss`` / ``near_miss_frame``: a failure that came next to the named square).

Example:
    >>> toy = Toy()
    >>> job = ScenarioJob(0, "reach", ["expert", "random"], 0, seed=1, out=None, fps=toy.FPS, version="v1",
    ...                   options=toy.check_options())
    >>> [t["outcome"] for t in toy.run_scenario(job)["truths"]][0]
    'success'
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from autorater.data.annotators import trait_scores
from autorater.data.worlds.base import ScenarioJob, SwapJob, World
from autorater.data.worlds.options import WorldOptions, option

__all__ = ["Toy", "ToyOptions", "render"]


COLOURS = {"red": (220, 50, 50), "green": (40, 180, 70), "blue": (60, 90, 235), "yellow": (235, 205, 40)}
MOVES = ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1))  # stay, right, left, down, up: (dx, dy) in cells


@dataclass(frozen=True)
class ToyOptions(WorldOptions):
    """The toy world's options (``autorater suite generate --world toy``).

    Example:
        >>> ToyOptions(grid_size=6)
        ToyOptions(grid_size=6, image_size=64)
    """

    grid_size: int = option(8, "cells per side of the board", low=4, high=32)
    image_size: int = option(64, "frame width and height in pixels, even, at least 2 per cell", low=16, high=1024)

    def __post_init__(self):
        super().__post_init__()
        if self.image_size % 2 or self.image_size < 2 * self.grid_size:
            raise ValueError(f"option image_size (--image-size) must be even and at least 2 pixels a cell "
                             f"({2 * self.grid_size} for grid_size {self.grid_size}), got {self.image_size}")


# ----------------------------------------------------------------------------------------------
# Scenarios


def _rng(*key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(k) for k in key]))


def _step(cell, move, size: int) -> tuple[int, int]:
    return (min(max(cell[0] + move[0], 0), size - 1), min(max(cell[1] + move[1], 0), size - 1))


def _distance(a, b) -> int:
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


def _path(start, goal, blocked) -> list[tuple[int, int]] | None:
    """The cells after ``start`` on an L to ``goal`` (x first, else y first) that avoids ``blocked``."""
    for x_first in (True, False):
        cells, (x, y) = [], start
        for axis in ((0, 1) if x_first else (1, 0)):
            while (x, y)[axis] != goal[axis]:
                sign = 1 if goal[axis] > (x, y)[axis] else -1
                x, y = (x + sign, y) if axis == 0 else (x, y + sign)
                cells.append((x, y))
        if not any(c in blocked for c in cells):
            return cells
    return None


def _plan(index: int, task: str, seed: int, size: int) -> dict:
    """A board, a start, the colour to reach, the expert's way there and the takeover."""
    rng = _rng(seed, index, 0)
    colours = list(COLOURS)[:2 if task == "reach" else 4]
    for _ in range(100):
        cells = [tuple(int(v) for v in c) for c in rng.integers(0, size, (len(colours) + 1, 2))]
        if len(set(cells)) < len(cells):
            continue
        start, squares = cells[0], dict(zip(colours, cells[1:]))
        goal = colours[int(rng.integers(len(colours)))]
        path = _path(start, squares[goal], {c for k, c in squares.items() if k != goal})
        if path is None or len(path) < 4:
            continue
        context = min(max(int(round(rng.uniform(0.2, 0.5) * len(path))), 1), len(path) - 2)
        horizon = 2 * (len(path) - context) + 4
        return {"scenario_id": f"s{index:04d}", "task": task, "start": start, "squares": squares, "goal": goal,
                "path": path, "context": context, "horizon": horizon}
    raise RuntimeError(f"no usable toy board for scenario {index} in 100 tries (grid too small?)")


def _toward(cell, target, rng, size: int, others) -> tuple[int, int]:
    """One move closer to ``target`` (another square avoided where a move allows), at random among the best."""
    best = [m for m in MOVES[1:] if _distance(_step(cell, m, size), target) < _distance(cell, target)]
    free = [m for m in best if _step(cell, m, size) not in others]
    choice = free or best or [MOVES[0]]
    return choice[int(rng.integers(len(choice)))]


def _play(plan: dict, agent: str, rng: np.random.Generator, size: int) -> list[tuple[int, int]]:
    """The agent's cell frame by frame: the expert's context, then the agent's own moves."""
    cells = [plan["start"], *plan["path"][:plan["context"]]]
    squares = plan["squares"]
    goal = squares[plan["goal"]]
    target = goal
    if agent == "wrong-target":
        wrong = sorted(c for c in squares if c != plan["goal"])
        target = squares[wrong[int(rng.integers(len(wrong)))]]
    others = {c for c in squares.values() if c != target}
    rest = iter(plan["path"][plan["context"]:])
    for _ in range(plan["horizon"]):
        cell = cells[-1]
        if agent == "expert":
            cells.append(next(rest, cell))
            continue
        if agent == "random" or (agent == "noisy" and rng.random() < 0.3):
            move = MOVES[int(rng.integers(len(MOVES)))]
        else:
            move = _toward(cell, target, rng, size, others)
        cells.append(_step(cell, move, size))
    return cells


def _judge(positions: list, takeover: int, squares: dict, goal: str) -> dict:
    """The outcome of reaching ``goal`` along ``positions`` (frame by frame, the takeover's frame first)."""
    cell_of = {tuple(c): k for k, c in squares.items()}
    target = tuple(squares[goal])
    event, mode = None, "timeout"
    for frame in range(takeover + 1, len(positions)):
        reached = cell_of.get(tuple(positions[frame]))
        if reached is not None:
            event, mode = frame, None if reached == goal else "wrong_square"
            break
    end = event if event is not None else len(positions) - 1
    steps = list(range(takeover + 1, end + 1))
    off = sum(_distance(positions[f], target) >= _distance(positions[f - 1], target) for f in steps)
    near = [f for f in range(takeover + 1, end + 1) if _distance(positions[f], target) == 1]
    failed = mode is not None
    traits = {"off_expert_share": round(off / max(1, len(steps)), 4), "near_miss": bool(failed and near),
              "near_miss_frame": near[0] if failed and near else None, "n_matching": 1, "has_location": False}
    outcome = "failure" if failed else "success"
    traits["messiness"], traits["ambiguity"] = trait_scores(outcome, traits, takeover, event, len(positions))
    return {"outcome": outcome, "failure_mode": mode, "event_frame": event, "traits": traits}


def _truth(cid: str, plan: dict, agent: str, positions: list, fps: float) -> dict:
    takeover, n = plan["context"], len(positions)
    judged = _judge(positions, takeover, plan["squares"], plan["goal"])
    marker = judged["event_frame"] if judged["event_frame"] is not None else n
    return {"continuation_id": cid, "scenario_id": plan["scenario_id"], "agent": agent, "task": plan["task"],
            "instruction": f"go to the {plan['goal']} square", "category": "reach", "goal": plan["goal"],
            "outcome": judged["outcome"], "marker_s": round(marker / fps, 6), "failure_mode": judged["failure_mode"],
            "failure_modes": list(Toy.FAILURE_MODES), "event_frame": judged["event_frame"], "num_frames": n, "fps": fps,
            "duration_s": round(n / fps, 6), "takeover_frame": takeover, "takeover_s": round(takeover / fps, 6),
            "targets": {k: list(c) for k, c in plan["squares"].items()}, "positions": [list(c) for c in positions],
            "traits": judged["traits"]}


def render(positions: list, squares: dict, grid_size: int, image_size: int) -> np.ndarray:
    """The frames (frames, image_size, image_size, 3) uint8: the board, its squares, the agent in white."""
    cell = image_size // grid_size
    board = np.full((len(positions), grid_size * cell, grid_size * cell, 3), 30, dtype=np.uint8)
    for colour, (x, y) in squares.items():
        board[:, y * cell:(y + 1) * cell, x * cell:(x + 1) * cell] = COLOURS[colour]
    inset = cell // 4
    for i, (x, y) in enumerate(positions):
        board[i, y * cell + inset:(y + 1) * cell - inset, x * cell + inset:(x + 1) * cell - inset] = 255
    pad = image_size - grid_size * cell
    return np.pad(board, ((0, 0), (pad // 2, pad - pad // 2), (pad // 2, pad - pad // 2), (0, 0)))


def _run_scenario(job: ScenarioJob) -> dict:
    """Plan one scenario and record its continuations (videos written unless ``job.out`` is None)."""
    size = job.options["grid_size"]
    plan = _plan(job.index, job.task, job.seed, size)
    continuations, truths = [], []
    for k, agent in enumerate(job.agents):
        cid = f"c{job.first_continuation + k:06d}"
        positions = _play(plan, agent, _rng(job.seed, job.index, 1, k), size)
        if job.out is not None:
            from autorater.data.video import write_video

            frames = render(positions, plan["squares"], size, job.options["image_size"])
            write_video(Path(job.out) / "videos" / f"{cid}.mp4", frames, fps=job.fps)
        continuations.append({"continuation_id": cid, "scenario_id": plan["scenario_id"], "agent_id": agent,
                              "video": f"videos/{cid}.mp4"})
        truths.append(_truth(cid, plan, agent, positions, job.fps))
    scenario = {"scenario_id": plan["scenario_id"], "instruction": f"go to the {plan['goal']} square",
                "category": "reach", "tags": [plan["task"]], "takeover_s": round(plan["context"] / job.fps, 6),
                "metadata": {"task": plan["task"], "instruction_spec": {"goal": plan["goal"]},
                             "start": list(plan["start"]), "targets": {k: list(c) for k, c in plan["squares"].items()},
                             "context_steps": plan["context"], "continuation_steps": plan["horizon"]}}
    return {"index": job.index, "scenario": scenario, "continuations": continuations, "truths": truths}


def _swap_scenario(job: SwapJob) -> dict:
    """Another square of the board to reach; every continuation judged again from its recorded cells."""
    targets = job.scenario["metadata"]["targets"]
    goal = job.scenario["metadata"]["instruction_spec"]["goal"]
    others = sorted(c for c in targets if c != goal)
    if not job.truths or not others:
        return {"index": job.index, "spec": None, "instruction": None, "category": None, "truths": []}
    new = others[int(_rng(job.seed, job.index, 0x5A9).integers(len(others)))]
    instruction, truths = f"go to the {new} square", []
    for t in job.truths:
        judged = _judge(t["positions"], t["takeover_frame"], targets, new)
        marker = judged["event_frame"] if judged["event_frame"] is not None else t["num_frames"]
        truths.append({**t, **judged, "instruction": instruction, "goal": new, "marker_s": round(marker / t["fps"], 6),
                       "original_instruction": t["instruction"], "original_outcome": t["outcome"]})
    return {"index": job.index, "spec": {"goal": new}, "instruction": instruction, "category": "reach",
            "truths": truths}


class Toy(World):
    """The toy world (module docstring): a white square walks a small board to the coloured square it is told to
    reach. The rest of the interface is the defaults (``World``)."""

    NAME = "toy"
    TASKS = {"reach": "reach the named one of two coloured squares",
             "reach-crowded": "reach the named one of four coloured squares"}
    AGENTS = {"expert": "the shortest way to the named square, then stays on it",
              "noisy": "the expert's next move, but a random one 30% of the time",
              "wrong-target": "the shortest way to another square: right-looking, wrong square",
              "random": "a random move (or none) every step"}
    FAILURE_MODES = {"wrong_square": "stepped onto a square the instruction does not name first",
                     "timeout": "on no square by the end of the video"}
    OPTIONS = ToyOptions
    FPS = 8.0  # one frame per step

    def run_scenario(self, job: ScenarioJob) -> dict:
        """Plan one scenario and record its continuations (videos written unless ``job.out`` is None)."""
        return _run_scenario(job)

    def swap_scenario(self, job: SwapJob) -> dict:
        """Another square of the board to reach; every continuation judged again from its recorded cells."""
        return _swap_scenario(job)
