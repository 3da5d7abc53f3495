"""A picture of each world: frames of a few continuations of freshly generated suites, one row each.

    python -m benchmarks.strip [--out docs/img/worlds.png] [--frames 8]

Each row is one continuation, frames spread evenly from the first to the last, and the takeover frame
(white border); the title gives the world, the instruction, the agent and the simulator's outcome.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from autorater.data.generate import generate_suite, load_truth
from autorater.data.video import read_video

ROWS = {"babyai": dict(tasks=["PickupLoc", "OpenDoor"], agents=["expert", "distractor"], seed=3),
        "metaworld": dict(tasks=["drawer-open-v3", "pick-place-v3", "window-close-v3"],
                          agents=["expert", "wrong-target", "noisy-1.0"], seed=2)}


def _row(suite: Path, truth: dict, count: int) -> np.ndarray:
    frames = read_video(suite / "videos" / f"{truth['continuation_id']}.mp4").frames
    takeover = truth["takeover_frame"]
    spread = np.linspace(0, len(frames) - 1, count - 1).round().astype(int)
    picks = np.unique(np.append(spread, takeover))
    tiles = []
    for i in picks:
        tile = np.pad(frames[i], ((2, 2), (2, 2), (0, 0)), constant_values=0)
        if i == takeover:
            tile[:2], tile[-2:], tile[:, :2], tile[:, -2:] = 255, 255, 255, 255
        tiles.append(tile)
    return np.concatenate(tiles, axis=1)


def main(argv: list[str] | None = None) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/img/worlds.png")
    parser.add_argument("--frames", type=int, default=8)
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for world, spec in ROWS.items():
            suite = generate_suite(Path(tmp) / world, world=world, scenarios=len(spec["tasks"]),
                                   continuations_per_scenario=1, agents=spec["agents"], tasks=spec["tasks"],
                                   seed=spec["seed"], workers=1, progress=False)
            for t in load_truth(suite):
                title = (f"{world}: \"{t['instruction']}\"  agent {t['agent']}  ->  {t['outcome']}"
                         + (f" ({t['failure_mode']})" if t["failure_mode"] else f" at {t['marker_s']:.2f} s"))
                rows.append((title, _row(suite, t, args.frames)))
    fig, axes = plt.subplots(len(rows), 1, figsize=(args.frames * 1.4, len(rows) * 1.75))
    for ax, (title, image) in zip(axes, rows):
        ax.imshow(image)
        ax.set_title(title, fontsize=9, loc="left")
        ax.axis("off")
    fig.tight_layout()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


tiny = None  # it trains or builds nothing of its own (its command line is checked: tests/test_benchmark_modules.py)
