"""Tiny learnable suites for the model, training and CLI tests (not a test module: the tests import it).

Videos are 8 frames of 32x32 at 8 fps (1.0 s), the ``tiny`` preset's input size, over a dim noise background.

- ``learnable_suite``: a success lights a bright square at frame 4 (0.5 s); a failure stays dark.
- ``colour_suite``: a red or a blue square appears at frame 4; the instruction is ``"red"`` or ``"blue"``,
  and the label is whether the named colour appeared. The same kind of video is a success under one
  instruction and a failure under the other: only a model that reads the instruction can rate it.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

import numpy as np
import torch

from autorater.data.suite import Annotation, Continuation, Reference, Scenario, Suite, SuiteInfo
from autorater.data.video import write_video

N_FRAMES, FPS, SIZE = 8, 8.0, 32
GROUNDINGS = [{"architecture": "events"}, {"architecture": "events", "members": 2}]  # model options


def tiny_preset(options: dict):
    """The tiny preset of an architecture (``options["architecture"]``, default events) with the other options."""
    from autorater.models import PRESETS

    options = dict(options)
    name = {"events": "tiny", "general": "tiny-general"}[options.pop("architecture", "events")]
    return PRESETS[name].replace(**options)


def grounding_id(options: dict) -> str:
    return "-".join(f"{v}" if k == "architecture" else f"{k}{v}" for k, v in options.items())
MARKER_S = 0.5  # the square appears at frame 4
COLOURS = {"red": (230, 20, 20), "blue": (20, 20, 230)}


def saved_before_the_config_checksum(folder: str | Path) -> Path:
    """A model folder as saved before config.json carried a checksum (issue 44): its weights' header without
    ``config_sha256``, so that a test may edit config.json as an older version of the product wrote it."""
    from safetensors.torch import load_file, save_file

    from autorater.model import read_safetensors_header

    path = Path(folder) / "model.safetensors"
    meta = read_safetensors_header(path)[1]
    meta.pop("config_sha256", None)
    save_file(load_file(str(path)), str(path), metadata=meta)
    return Path(folder)


def one_thread():
    """Tiny models train 10-30x faster on one intra-op thread when the 2 cores are shared (OpenMP waits)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    return before


@contextlib.contextmanager
def trained_by_cli(root: Path, suite: Suite, *args: str):
    """``autorater train`` on ``suite`` into ``root/model`` (one torch thread, no MLflow; ``args``: more flags), for a
    test module's fixture; yields ``{"root", "suite", "model"}`` and puts the thread count back after."""
    import pytest

    from autorater.app import cli

    with pytest.MonkeyPatch.context() as mp:
        before = one_thread()
        mp.setattr(cli.common, "threads", lambda: None)
        try:
            assert cli.main(["train", "--suite", str(suite.root), "--out", str(root / "model"), "--no-tracking",
                             "--cache-dir", str(root / "cache"), "--quiet", *args]) == 0
            yield {"root": root, "suite": suite, "model": root / "model"}
        finally:
            torch.set_num_threads(before)


def bright_square_video(path: str | Path, success: bool, rng: np.random.Generator) -> Path:
    frames = rng.integers(0, 40, (N_FRAMES, SIZE, SIZE, 3), dtype=np.uint8)
    if success:
        frames[4:, 8:24, 8:24] = 255
    return write_video(path, frames, fps=FPS)


def colour_video(path: str | Path, colour: str, rng: np.random.Generator) -> Path:
    """A 16x16 square of ``colour`` appears at a random place at frame 4."""
    frames = rng.integers(0, 40, (N_FRAMES, SIZE, SIZE, 3), dtype=np.uint8)
    y, x = rng.integers(2, 14, 2)
    frames[4:, y:y + 16, x:x + 16] = COLOURS[colour]
    return write_video(path, frames, fps=FPS)


def learnable_suite(root: str | Path, n_scenarios: int = 4, per_scenario: int = 2, seed: int = 0,
                    n_references: int = 0) -> Suite:
    """Every continuation annotated by 2 agreeing annotators; the first ``n_references`` are also references."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    scenarios, continuations, annotations, references = [], [], [], []
    for s in range(n_scenarios):
        colour = ("red", "blue")[s % 2]
        scenarios.append(Scenario(f"s{s:02d}", f"go to the {colour} ball", category=f"goto_{colour}"))
        for k in range(per_scenario):
            cid = f"c{s:02d}{k}"
            success = (s + k) % 2 == 0
            bright_square_video(root / "videos" / f"{cid}.mp4", success, rng)
            continuations.append(Continuation(cid, f"s{s:02d}", agent_id=f"agent{k}", video=f"videos/{cid}.mp4"))
            outcome = "success" if success else "failure"
            marker = MARKER_S if success else 1.0
            mode = None if success else "timeout"
            for a in range(2):
                annotations.append(Annotation(cid, f"annotator{a}", outcome, marker_s=marker, failure_mode=mode))
            if len(references) < n_references:
                references.append(Reference(cid, outcome, marker_s=marker, failure_mode=mode))
    Suite(root, SuiteInfo(name="learnable", version="v1"), scenarios, continuations, annotations,
          references).write(root)
    return Suite.load(root)


def colour_suite(root: str | Path, n_scenarios: int = 8, per_scenario: int = 2, seed: int = 0) -> Suite:
    """Scenarios alternate the instructions "red" and "blue"; each shows both colours among its videos."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    scenarios, continuations, annotations = [], [], []
    for s in range(n_scenarios):
        named = ("red", "blue")[s % 2]
        scenarios.append(Scenario(f"s{s:02d}", named, category="goto"))
        for k in range(per_scenario):
            cid = f"c{s:02d}{k}"
            shown = ("red", "blue")[(s // 2 + k) % 2]
            colour_video(root / "videos" / f"{cid}.mp4", shown, rng)
            continuations.append(Continuation(cid, f"s{s:02d}", agent_id=f"agent{k}", video=f"videos/{cid}.mp4"))
            success = shown == named
            for a in range(2):
                annotations.append(Annotation(cid, f"annotator{a}", "success" if success else "failure",
                                              marker_s=MARKER_S if success else None))
    Suite(root, SuiteInfo(name="colour", version="v1"), scenarios, continuations, annotations).write(root)
    return Suite.load(root)


def make_tiny_suite(root: Path, n_scenarios: int = 10, per_scenario: int = 2, seed: int = 0) -> Suite:
    """8-frame 32x32 videos: a success lights a bright square at frame 4 (0.5 s); a failure stays dark."""
    rng = np.random.default_rng(seed)
    scenarios, continuations, annotations = [], [], []
    for s in range(n_scenarios):
        color = ("red", "blue")[s % 2]
        scenarios.append(Scenario(f"s{s:02d}", f"go to the {color} ball", category=f"goto_{color}"))
        for k in range(per_scenario):
            cid = f"c{s:02d}{k}"
            success = (s + k) % 2 == 0
            frames = rng.integers(0, 40, (8, 32, 32, 3), dtype=np.uint8)
            if success:
                frames[4:, 8:24, 8:24] = 255
            write_video(root / "videos" / f"{cid}.mp4", frames, fps=8.0)
            continuations.append(Continuation(cid, f"s{s:02d}", agent_id=f"agent{k}", video=f"videos/{cid}.mp4"))
            for a in range(2):
                annotations.append(Annotation(cid, f"annotator{a}", "success" if success else "failure",
                                              marker_s=0.5 if success else 0.25))
    Suite(root, SuiteInfo(name="tiny", version="v1"), scenarios, continuations, annotations).write(root)
    return Suite.load(root)


def fresh_tracking_uri(tmp_path_factory, folder: Path) -> str:
    """A new store in ``folder``: a copy of one session-wide initialised database (migrations run once)."""
    from autorater import mlflow_registry as registry

    template = tmp_path_factory.getbasetemp() / "mlflow-template"
    if not (template / "mlflow.db").exists():
        registry.mlflow_client(registry.default_tracking_uri(template))
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(template / "mlflow.db", folder / "mlflow.db")
    return registry.default_tracking_uri(folder)


CAMERA_SHAPE = (96, 160)  # height, width: a wide camera frame, not the square of a rendered grid
WORDINGS = ("is there a {} box anywhere?", "the {} block should show up", "make a {} cube appear",
            "we want to see something {} come into view")


def camera_suite(root: str | Path, n_scenarios: int = 8, per_scenario: int = 2, seed: int = 0) -> Suite:
    """``colour_suite`` as a camera would film it: 96 x 160 frames, a block that slides in from the right edge at
    frame 4, and free-form instructions (no two scenarios worded alike; none names a world)."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    scenarios, continuations, annotations = [], [], []
    for s in range(n_scenarios):
        named = ("red", "blue")[s % 2]
        scenarios.append(Scenario(f"s{s:02d}", WORDINGS[(s // 2) % len(WORDINGS)].format(named), category="appear"))
        for k in range(per_scenario):
            cid = f"c{s:02d}{k}"
            shown = ("red", "blue")[(s // 2 + k) % 2]
            frames = rng.integers(60, 100, (N_FRAMES, *CAMERA_SHAPE, 3), dtype=np.uint8)
            y = int(rng.integers(10, 50))
            for f in range(4, N_FRAMES):
                x = 160 - 20 * (f - 3)  # sliding in from the right
                frames[f, y:y + 36, x:x + 36] = COLOURS[shown]
            write_video(root / "videos" / f"{cid}.mp4", frames, fps=FPS)
            continuations.append(Continuation(cid, f"s{s:02d}", agent_id=f"agent{k}", video=f"videos/{cid}.mp4"))
            success = shown == named
            for a in range(2):
                annotations.append(Annotation(cid, f"annotator{a}", "success" if success else "failure",
                                              marker_s=MARKER_S if success else None,
                                              failure_mode=None if success else "timeout"))
    Suite(root, SuiteInfo(name="camera", version="v1"), scenarios, continuations, annotations).write(root)
    return Suite.load(root)
