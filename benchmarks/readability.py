"""Where and when is the instruction's object readable in a first-person video? A pixel-level ceiling.

    python -m benchmarks.readability [--suites bench-out/quality-ego/suites] [--image-size 112]
                                     [--block 4] [--offsets -1 0 1]

For every successful training continuation whose instruction names a colour, the frames at the
simulator's event (offset 0) and around it are decoded at ``image_size`` (112: the 7x7 tiles of the
first-person view fall on 16-pixel cells), each tile is reduced to its mean colours on ``block``-pixel
blocks (48 numbers per tile at 112 px, block 4), and a logistic regression decodes the instruction
object's colour from one tile (every tile tried) or from the whole frame, split by scenario. It prints,
per category and offset, the validation accuracy in the tile in front of the agent, the best tile, and
the whole frame, and writes JSON.

It answers what the model must do to see the outcome: which frame, which place, which pixels (README,
"Model quality"). The simulator truth is used to *measure*, never to train. It needs the quality
benchmark's first-person suites (``python -m benchmarks.quality --view ego``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

FRONT = (5, 3)  # first-person view: the agent at the bottom centre (row 6, column 3), facing up


def tile_features(frame: np.ndarray, cells: int, block: int) -> np.ndarray:
    """(cells, cells, 3 * (tile // block) ** 2): each tile's mean colours on ``block``-pixel blocks, in [0, 1]."""
    tile = frame.shape[0] // cells
    f = frame[:tile * cells, :tile * cells].astype(np.float32) / 255
    k = tile // block
    f = f.reshape(cells, tile, cells, tile, 3)[:, :k * block, :, :k * block]
    f = f.reshape(cells, k, block, cells, k, block, 3).mean(axis=(2, 5))  # (cells, k, cells, k, 3)
    return f.transpose(0, 2, 1, 3, 4).reshape(cells, cells, -1)


def decode_accuracy(x: np.ndarray, y: np.ndarray, groups: list[str], seed: int) -> float:
    """Validation accuracy of a logistic regression, 30% of the scenarios held out."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupShuffleSplit

    tr, te = next(GroupShuffleSplit(1, test_size=0.3, random_state=seed).split(x, groups=groups))
    model = LogisticRegression(max_iter=3000, C=100.0).fit(x[tr], y[tr])
    return float(model.score(x[te], y[te]))


def main(argv: list[str] | None = None) -> int:
    from tqdm import tqdm

    from autorater.data.video import VideoError, read_video

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", default="bench-out/quality-ego/suites", help="the quality benchmark's suites")
    parser.add_argument("--image-size", type=int, default=112)
    parser.add_argument("--block", type=int, default=4, help="pixels per colour block inside a tile")
    parser.add_argument("--offsets", type=int, nargs="+", default=[-1, 0, 1], help="frames from the event")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="JSON report (default: next to the suites)")
    args = parser.parse_args(argv)
    root = Path(args.suites) / "train"
    info = json.loads((root / "suite.json").read_text()) if (root / "suite.json").exists() else None
    if info is None:
        raise SystemExit(f"{root} is not a suite: run python -m benchmarks.quality --view ego first, or pass --suites")
    if (info.get("source") or {}).get("view") != "ego":
        raise SystemExit(f"{root} is not first-person (suite.json source.view is not 'ego'): the tile in front "
                         f"of the agent is only fixed in the agent's own view; generate with --view ego")
    cells = 7
    truth = [json.loads(line) for line in (root / "simulator_truth.jsonl").read_text().splitlines() if line.strip()]
    rows = [t for t in truth if t["outcome"] == "success" and t.get("event_frame") is not None
            and (t["instruction_spec"].get("object") or {}).get("color")]
    data: dict[tuple[str, int], list] = {}
    start = time.perf_counter()
    for t in tqdm(rows, desc="decoding", unit="clip"):
        try:
            clip = read_video(root / "videos" / f"{t['continuation_id']}.mp4", size=args.image_size)
        except VideoError as err:
            print(f"skipped: {err}")
            continue
        for k in args.offsets:
            i = t["event_frame"] + k
            if 0 <= i < len(clip.frames):
                data.setdefault((t["category"], k), []).append(
                    (tile_features(clip.frames[i], cells, args.block), t["instruction_spec"]["object"]["color"],
                     t["scenario_id"]))

    results = []
    for (category, k), items in sorted(data.items()):
        x = np.stack([d[0] for d in items])  # (n, cells, cells, f)
        y = np.array([d[1] for d in items])
        groups = [d[2] for d in items]
        per_tile = np.array([[decode_accuracy(x[:, r, c], y, groups, args.seed) for c in range(cells)]
                             for r in range(cells)])
        best = np.unravel_index(per_tile.argmax(), per_tile.shape)
        majority = max(np.mean(y == v) for v in set(y))
        results.append({"category": category, "offset": k, "clips": len(items), "majority": round(majority, 3),
                        "front_tile": round(float(per_tile[FRONT]), 3),
                        "best_tile": [int(best[0]), int(best[1])],
                        "best_tile_accuracy": round(float(per_tile.max()), 3),
                        "whole_frame": round(decode_accuracy(x.reshape(len(x), -1), y, groups, args.seed), 3),
                        "per_tile": per_tile.round(3).tolist()})

    print(f"\nthe instruction object's colour decoded from raw colours ({args.image_size} px, {args.block}-px blocks), "
          f"validation accuracy, scenarios held out")
    print(f"{'category':<10} {'frame':>6} {'clips':>6} {'majority':>9} {'front tile':>11} {'best tile':>14} "
          f"{'whole frame':>12}")
    for r in results:
        frame = "event" if r["offset"] == 0 else f"{r['offset']:+d}"
        best = f"{tuple(r['best_tile'])} {r['best_tile_accuracy']:.2f}"
        print(f"{r['category']:<10} {frame:>6} {r['clips']:>6} {r['majority']:>9.2f} {r['front_tile']:>11.2f} "
              f"{best:>14} {r['whole_frame']:>12.2f}")
    out = Path(args.out or Path(args.suites).parent / f"readability-{args.image_size}px-b{args.block}.json")
    out.write_text(json.dumps({"args": vars(args), "wall_s": round(time.perf_counter() - start, 1),
                               "front_tile_position": list(FRONT), "results": results}, indent=1) + "\n")
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


# The benchmark built small, run by tests/test_benchmark_modules.py (a benchmark that drifts from the product fails
# there, not on the day someone runs it).


def tiny(tmp_path=None):
    """A tile's colours decoded from its pixel blocks, on random frames."""
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (12, 28, 28, 3)).astype(np.uint8)
    x = np.stack([tile_features(f, cells=7, block=2)[5, 3] for f in frames])
    return decode_accuracy(x, np.arange(12) % 2, [str(i) for i in range(12)], seed=0)
