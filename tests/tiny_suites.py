"""Tiny hand-made suites for the data-layer tests: 2 scenarios, 4 continuations, 16x16 videos of 8 frames.

Every video lasts ``N_FRAMES / FPS`` = 1.0 s. Not a test module (no ``test_`` prefix): the tests import it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from autorater.data.suite import Annotation, Continuation, Reference, Scenario, Suite, SuiteInfo
from autorater.data.video import write_video

N_FRAMES, FPS, SIZE = 8, 8.0, 16
DURATION_S = N_FRAMES / FPS


def frames(seed: int = 0, n: int = N_FRAMES, size: int = SIZE) -> np.ndarray:
    """A smooth moving gradient (compresses well, so decoded frames stay close): (n, size, size, 3) uint8."""
    y, x = np.mgrid[0:size, 0:size]
    out = np.empty((n, size, size, 3), np.uint8)
    for i in range(n):
        out[i, ..., 0] = (x * 255 // size + 16 * i + 40 * seed) % 256
        out[i, ..., 1] = y * 255 // size
        out[i, ..., 2] = 64 + 8 * seed
    return out


def tiny_suite(root: str | Path, videos: bool = True) -> Suite:
    """A valid suite written to ``root``: every record type, optional and unknown fields included."""
    root = Path(root)
    info = SuiteInfo(name="tiny", version="v1", description="hand-made", created_at="2026-01-01T00:00:00Z",
                     source={"by": "tests"}, extra={"owner": "data-team"})
    scenarios = [
        Scenario("s1", "go to the red ball", "goto", tags=["v1", "local"], takeover_s=0.25,
                 metadata={"level": "GoToLocal"}, extra={"difficulty": 3}),
        Scenario("s2", "pick up the blue key", "pickup"),
    ]
    continuations = [
        Continuation("c1", "s1", "good", "videos/c1.mp4", metadata={"seed": 1}),
        Continuation("c2", "s1", "bad", "videos/c2.mp4", takeover_s=0.5),
        Continuation("c3", "s2", "good", "videos/c3.mp4", extra={"note": "é"}),
        Continuation("c4", "s2", "bad", "videos/c4.mp4"),
    ]
    annotations = [
        Annotation("c1", "h1", "success", 0.5), Annotation("c1", "h2", "success", 0.75),
        Annotation("c1", "h3", "failure", 1.0, failure_mode="timeout"),
        Annotation("c2", "h1", "failure", 0.375, failure_mode="wrong_object"),
        Annotation("c2", "h2", "failure", None), Annotation("c2", "h3", "failure", 0.5),
        Annotation("c3", "h1", "success", 0.625, created_at="2026-01-02T00:00:00Z"),
        Annotation("c3", "h2", "failure", 1.0), Annotation("c3", "h3", "success", 0.875, source="model"),
        Annotation("c4", "h1", "failure", 1.0), Annotation("c4", "h2", "success", 0.25, extra={"conf": 0.4}),
    ]
    references = [Reference("c1", "success", 0.5), Reference("c2", "failure", 0.375, "wrong_object"),
                  Reference("c3", "success", 0.75, extra={"checked_by": "lead"})]
    suite = Suite(root, info, scenarios, continuations, annotations, references)
    suite.write(root)
    if videos:
        for i, c in enumerate(continuations):
            write_video(root / c.video, frames(seed=i), fps=FPS)
    return suite


def read_lines(path: str | Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def write_lines(path: str | Path, objs: list) -> None:
    """Write JSON Lines; ``bytes`` items are written as they are (for broken lines)."""
    with open(path, "wb") as f:
        for obj in objs:
            f.write(obj if isinstance(obj, bytes) else json.dumps(obj).encode("utf-8"))
            f.write(b"\n")


def new_version(root: str | Path) -> Suite:
    """The suite at ``root`` rewritten as a version arrives: no human label yet (a continuation that carries human
    labels is never auto-labelled nor audited, so a labelling test starts from one)."""
    suite = Suite.load(root)
    Suite(suite.root, suite.info, suite.scenarios, suite.continuations, [], suite.references).write(suite.root)
    return Suite.load(root)
