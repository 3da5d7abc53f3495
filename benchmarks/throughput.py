"""Throughput on this machine: suite generation per world (videos a minute) and video decoding (videos/s, frames/s).

    python -m benchmarks.throughput [--world babyai,metaworld] [--continuations 2000] [--metaworld-continuations 600]
                                    [--workers 2] [--out bench-out/throughput]

Meta-World is timed on the MT10 tasks with its five standard agents, 128 px from the corner camera.

Prints a table and writes ``throughput.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import time
from pathlib import Path


def bench_generation(out: Path, continuations: int, workers: int, world: str = "babyai", seed: int = 7) -> dict:
    from autorater.data.generate import generate_suite

    if out.exists():
        shutil.rmtree(out)
    per = 2 if world == "babyai" else 5
    start = time.perf_counter()
    generate_suite(out, world=world, scenarios=continuations // per, continuations_per_scenario=per, seed=seed,
                   workers=workers)
    wall = time.perf_counter() - start
    n = (continuations // per) * per
    return {"world": world, "continuations": n, "workers": workers, "wall_s": round(wall, 1),
            "continuations_per_s": round(n / wall, 2), "videos_per_min": round(60 * n / wall, 1)}


def bench_decode(suite_dir: Path, limit: int, num_frames: int | None, size: int | None) -> dict:
    from autorater.data.suite import Suite
    from autorater.data.video import read_video

    suite = Suite.load(suite_dir)
    paths = [suite.root / c.video for c in suite.continuations[:limit]]
    start = time.perf_counter()
    frames = sum(read_video(p, num_frames=num_frames, size=size).frames.shape[0] for p in paths)
    wall = time.perf_counter() - start
    return {"videos": len(paths), "num_frames": num_frames or "all", "size": size or "native",
            "videos_per_s": round(len(paths) / wall, 1), "frames_per_s": round(frames / wall, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", default="babyai,metaworld", help="worlds to time, comma-separated")
    parser.add_argument("--continuations", type=int, default=2000, help="BabyAI videos to generate")
    parser.add_argument("--metaworld-continuations", type=int, default=600, help="Meta-World videos to generate")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default="bench-out/throughput")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    counts = {"babyai": args.continuations, "metaworld": args.metaworld_continuations}
    gens, decode = [], []
    for world in [w.strip() for w in args.world.split(",") if w.strip()]:
        suite_dir = out / f"suite-{world}"
        gens.append(bench_generation(suite_dir, counts[world], args.workers, world))
        decode += [{"world": world, **bench_decode(suite_dir, 500, None, None)},
                   {"world": world, **bench_decode(suite_dir, 500, 32, 128)}]
    result = {"machine": {"cpu_count": __import__("os").cpu_count(), "platform": platform.platform()},
              "generation": gens, "decode": decode}
    (out / "throughput.json").write_text(json.dumps(result, indent=1) + "\n")
    print(f"\n{'what':<52}{'rate':>24}")
    for gen in gens:
        print(f"{'generate ' + gen['world'] + ' (render + H.264), ' + str(gen['workers']) + ' processes':<52}"
              f"{gen['videos_per_min']:>12} videos/min  ({gen['continuations']} in {gen['wall_s']} s)")
    for d in decode:
        label = f"decode {d['world']}: {d['num_frames']} frames at {d['size']} px"
        print(f"{label:<52}{d['videos_per_s']:>14} videos/s  {d['frames_per_s']:>8} frames/s")
    print(f"\nwritten to {out / 'throughput.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


tiny = None  # it trains or builds nothing of its own (its command line is checked: tests/test_benchmark_modules.py)
