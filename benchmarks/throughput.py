"""Throughput on this machine: suite generation (continuations/s) and video decoding (videos/s, frames/s).

    python -m benchmarks.throughput [--continuations 2000] [--workers 2] [--out bench-out/throughput]

Prints a table and writes ``throughput.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import time
from pathlib import Path


def bench_generation(out: Path, continuations: int, workers: int, seed: int = 7) -> dict:
    from data.generate import generate_suite

    if out.exists():
        shutil.rmtree(out)
    start = time.perf_counter()
    generate_suite(out, scenarios=continuations // 2, continuations_per_scenario=2, seed=seed, workers=workers)
    wall = time.perf_counter() - start
    return {"continuations": continuations, "workers": workers, "wall_s": round(wall, 1),
            "continuations_per_s": round(continuations / wall, 2)}


def bench_decode(suite_dir: Path, limit: int, num_frames: int | None, size: int | None) -> dict:
    from data.suite import Suite
    from data.video import read_video

    suite = Suite.load(suite_dir)
    paths = [suite.root / c.video for c in suite.continuations[:limit]]
    start = time.perf_counter()
    frames = sum(read_video(p, num_frames=num_frames, size=size).frames.shape[0] for p in paths)
    wall = time.perf_counter() - start
    return {"videos": len(paths), "num_frames": num_frames or "all", "size": size or "native",
            "videos_per_s": round(len(paths) / wall, 1), "frames_per_s": round(frames / wall, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--continuations", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default="bench-out/throughput")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    suite_dir = out / "suite"
    gen = bench_generation(suite_dir, args.continuations, args.workers)
    decode = [bench_decode(suite_dir, 500, None, None), bench_decode(suite_dir, 500, 32, 128),
              bench_decode(suite_dir, 500, 32, 64)]
    result = {"machine": {"cpu_count": __import__("os").cpu_count(), "platform": platform.platform()},
              "generation": gen, "decode": decode}
    (out / "throughput.json").write_text(json.dumps(result, indent=1) + "\n")
    print(f"\n{'what':<44}{'rate':>24}")
    print(f"{'generate (render + H.264), ' + str(gen['workers']) + ' processes':<44}"
          f"{gen['continuations_per_s']:>14} cont./s  ({gen['continuations']} in {gen['wall_s']} s)")
    for d in decode:
        label = f"decode {d['num_frames']} frames at {d['size']} px"
        print(f"{label:<44}{d['videos_per_s']:>14} videos/s  {d['frames_per_s']:>8} frames/s")
    print(f"\nwritten to {out / 'throughput.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
