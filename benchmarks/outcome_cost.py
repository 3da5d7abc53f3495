"""What the general model's outcome path costs per cut of the encoder (issue 41): encoding, a training step, rating.

    python -m benchmarks.outcome_cost [--suite DIR] [--blocks 0,1,2] [--steps 12] [--batch 16] [--device auto]
                                      [--config general] [--threads 2] [--out bench-out/outcome_cost]

For each ``outcome_blocks`` (0 frozen, 1 block group 4, 2 blocks 3-4, 6 the whole encoder from pixels: a GPU's), on
one suite (default: a small Meta-World suite from the `corner` camera at 224 px, generated once under ``--out``):
the first encoding into an empty feature cache (videos/s: decode once at 224 px, the stream resized to 128 px, the
frozen bottoms), the cache's size per video, the median training step of the default recipe (forward, backward,
AdamW; one batch of ``--batch`` clips: the four outcome frames through the trainable top, the event head over
every frame; ``step_s``), for the frozen cut the step of one outcome head trained alone on the cached maps (the
parts apart, ``head_step_s``), and rating end to end through ``Rater`` (videos/s). Steps run through the product's
loop (``autorater.training.loop.fit``, timed) and are timed after five warm-up steps.

Prints a table and writes ``outcome_cost.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import time
from pathlib import Path


def suite_for(out: Path, continuations: int):
    """The suite to measure on: a Meta-World suite from one camera at 224 px, generated once."""
    from autorater.data.generate import generate_suite
    from autorater.data.suite import Suite

    folder = out / "suite"
    if not (folder / "suite.json").exists():
        generate_suite(folder, world="metaworld", scenarios=max(1, continuations // 4), continuations_per_scenario=4,
                       seed=5, image_size=224, camera="corner", progress=True)
    return Suite.load(folder)


def measure(suite, blocks: int, args, cache: Path) -> dict:
    import numpy as np

    from autorater.device import resolve_device
    from autorater.models import PRESETS
    from autorater.rater import Rater
    from autorater.training.inputs.batches import prepare
    from autorater.training.loop import Schedule
    from autorater.training.plan import part_stages
    from autorater.training.recipe import recipe_for
    from autorater.training.stages.joint import JointPart, trainable_parameters

    device = resolve_device(args.device)
    config = PRESETS[args.config].replace(outcome_blocks=blocks)
    tc = recipe_for(config, cache_dir=str(cache), batch_size=args.batch, device=str(device))
    shutil.rmtree(cache, ignore_errors=True)
    start = time.perf_counter()
    model, data = prepare([suite], config, tc)
    encode_s = time.perf_counter() - start
    n = len(data.ex)
    cache_bytes = sum(f.stat().st_size for f in cache.rglob("*") if f.is_file())
    model.to(device)
    joint = JointPart(model, data, np.arange(0), tc, part_stages(model, tc))
    step_s = _steps_s(joint, n, Schedule(epochs=1, batch_size=min(args.batch, n), lr=tc.lr, patience=None), args.steps)
    head_step_s = _head_step_s(model, data, tc, args.steps) if model.outcome.encoder.frozen else None
    model.eval()
    ids = suite.continuation_ids()[:args.rate]
    start = time.perf_counter()
    for _ in Rater(model).rate_suite(suite, ids=ids):
        pass
    rate = len(ids) / (time.perf_counter() - start)
    return {"outcome_blocks": blocks, "videos": n, "encode_videos_per_s": round(n / encode_s, 2),
            "cache_mb_per_video": round(cache_bytes / n / 2**20, 3), "step_s": round(step_s, 3),
            "clips_per_s": round(min(args.batch, n) / step_s, 1),
            "head_step_s": None if head_step_s is None else round(head_step_s, 4),
            "outcome_images_per_s": round(min(args.batch, n) * config.outcome.frames / step_s, 1),
            "rate_videos_per_s": round(rate, 2),
            "trainable_parameters": sum(p.numel() for p in trainable_parameters(model, tc.train_only))}


def _steps_s(part, n: int, schedule, steps: int) -> float:
    """The median step of ``part`` through the product's loop (``fit``, timed), after five warm-up steps: ``steps + 5``
    batches of ``schedule.batch_size`` rows drawn from the ``n`` rows (one epoch over them, with repeats)."""
    import numpy as np

    from autorater.training.loop import fit

    rows = np.resize(np.arange(n), (steps + 5) * schedule.batch_size)
    return statistics.median(fit(part, rows, schedule, np.random.default_rng(0), timed=True).step_s[5:])


def _head_step_s(model, data, tc, steps: int) -> float:
    """The median step of one outcome head trained alone on the cached maps (the parts apart; a frozen cut only), on
    the CPU, after five warm-up steps."""
    import copy

    import numpy as np

    from autorater.training.loop import Schedule
    from autorater.training.stages.outcome import OutcomeHeadPart, outcome_inputs

    head = copy.deepcopy(model.outcome.heads[0]).cpu()
    part = OutcomeHeadPart(head, outcome_inputs(model.outcome, data, tc.outcome), np.arange(0))
    n = len(data.ex)
    return _steps_s(part, n, Schedule(epochs=1, batch_size=min(tc.batch_size, n), lr=tc.outcome.lr, patience=None),
                    steps)


def main(argv: list[str] | None = None) -> int:
    import torch

    from autorater.data.suite import Suite

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--suite", help="a suite folder (default: a small Meta-World suite generated under --out)")
    p.add_argument("--continuations", type=int, default=48, help="size of the generated suite")
    p.add_argument("--blocks", default="0,1,2", help="outcome_blocks values, comma-separated (6: a GPU's)")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--rate", type=int, default=48, help="videos rated end to end per cut")
    p.add_argument("--config", default="general", help="the preset whose outcome path is measured")
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default="bench-out/outcome_cost")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    suite = Suite.load(args.suite) if args.suite else suite_for(out, args.continuations)
    rows = [measure(suite, int(b), args, out / "cache") for b in args.blocks.split(",") if b.strip()]
    result = {"machine": {"platform": platform.platform(), "threads": args.threads, "device": args.device,
                          "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None},
              "batch": args.batch, "rows": rows}
    (out / "outcome_cost.json").write_text(json.dumps(result, indent=1) + "\n")
    cols = ["outcome_blocks", "encode_videos_per_s", "cache_mb_per_video", "step_s", "head_step_s", "clips_per_s",
            "outcome_images_per_s", "rate_videos_per_s", "trainable_parameters"]
    print(" | ".join(cols))
    for r in rows:
        print(" | ".join(str(r[c]) for c in cols))
    print(f"written to {out / 'outcome_cost.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


# The benchmark built small, run by tests/test_benchmark_modules.py (a benchmark that drifts from the product fails
# there, not on the day someone runs it).


def tiny(tmp_path=None):
    """The cut it measures first (every cut is measured on a tiny suite by tests/test_benchmarks.py)."""
    from autorater.models import PRESETS
    from benchmarks import rate_tiny

    return rate_tiny(PRESETS["tiny-general"].replace(outcome_blocks=1))
