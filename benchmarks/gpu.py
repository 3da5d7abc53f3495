"""The GPU path measured: the product's default recipes trained from packs on a GPU, beside the CPU run of each.

Recipes (:data:`RECIPES`), each the product's training (``autorater.training.train.train``) from a pack of the
quality benchmark's suites (``benchmarks/quality_suites.py``: generated when missing, the same suites and held-out sets
as ``python -m benchmarks.quality``):

- ``babyai``: BabyAI's default, the grid reader ``babyai-grid``, on the BabyAI plan's training suite (first person);
- ``metaworld``: Meta-World's default, ``general``, with the whole encoder learning from pixels (``outcome.blocks``
  6), on the one-camera plan's training suite and its judged swaps;
- ``metaworld-parts``: ``general-parts`` with the whole encoder (``outcome.blocks`` 6: its heads then train jointly
  with the encoder and the stream, not apart).

Two steps, so that the GPU machine needs no decoder and no weight package (what it needs: ``autorater pack`` prints
it, ``autorater.training.inputs.pack.NEEDS``)::

    python -m benchmarks.gpu --pack --packs .gpu                                   # CPU: suites -> one pack a recipe
    python -m benchmarks.gpu --run --packs .gpu --devices cuda,cpu --out OUT        # where the GPU is

For each recipe and device (``--devices``; ``--beside FILE``: an earlier run's ``gpu.json``, e.g. the CPU's, shown
beside): the training's wall time (s, packing excluded, the pack's reading included), its frames per second (the
training clips' frames x the epochs trained, over that wall time; the match warm-up and validation inside it), the
best epoch's validation balanced accuracy, and each held-out set's balanced accuracy at 0.5 and AUROC of P(success)
against the simulator truth (rated from the pack's held-out clips). Prints a table and writes ``gpu.json``.

Results: not yet run on a GPU (docs/benchmarks.md says when it is).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

# recipe -> (the quality benchmark's plan, preset, model config changes)
RECIPES = {"babyai": ("babyai", "babyai-grid", {}),
           "metaworld": ("metaworld-one", "general", {"outcome_blocks": 6}),
           "metaworld-parts": ("metaworld-one", "general-parts", {"outcome_blocks": 6})}
SETS = ("unseen_scenarios", "unseen_scenarios_2", "unseen_agents", "unseen_families", "unseen_tasks",
        "unseen_camera", "instruction_swaps")


def recipe_config(name: str, presets: dict[str, str]):
    """The model config of recipe ``name``: its preset (``presets`` may name another, e.g. a tiny one) with the
    recipe's changes."""
    from autorater.models import PRESETS

    _, preset, changes = RECIPES[name]
    return PRESETS[presets.get(name, preset)].replace(**changes)


def recipe_train_config(config, args, device: str):
    from autorater.training.recipe import recipe_for

    changes = {"epochs": args.epochs} if args.epochs else {}
    return recipe_for(config, seed=args.seed, device=device, cache_dir=args.cache_dir, **changes)


def plan_suites(plan: str, args) -> tuple[list, dict]:
    """The training suites (Meta-World: the training suite and its judged swaps) and the held-out sets of ``plan``,
    under ``--suites`` (generated there when missing, as the quality benchmark does)."""
    from autorater.data.suite import Suite
    from benchmarks.quality_suites import generate

    root = Path(args.suites) / f"quality-{plan}" / "suites"
    if not (root / "train" / "suite.json").exists():
        generate(root, args.quick, plan, image_size=None if plan == "babyai" else 224)
    train = [Suite.load(root / name) for name in ("train", "train_swaps") if (root / name / "suite.json").exists()]
    held = {name: Suite.load(root / name) for name in SETS if (root / name / "suite.json").exists()}
    return train, held


def pack(args) -> None:
    """One pack per recipe (``--recipes``), its held-out sets inside."""
    from autorater.training.inputs.pack import write_pack

    for name in args.recipes.split(","):
        config = recipe_config(name, args.presets)
        train, held = plan_suites(RECIPES[name][0], args)
        out = write_pack(train, config, recipe_train_config(config, args, "cpu"), Path(args.packs) / name,
                         progress=not args.quiet, held_out=held)
        size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
        print(f"{name}: {out} ({size / 2 ** 20:.1f} MiB)", flush=True)


def train_one(name: str, device: str, args) -> dict:
    """Recipe ``name`` trained on ``device`` from its pack and scored on the pack's held-out sets."""
    import torch

    from autorater.training.inputs.pack import Pack
    from autorater.training.train import train
    from benchmarks.whole_encoder import scores

    config = recipe_config(name, args.presets)
    start = time.perf_counter()
    source = Pack(Path(args.packs) / name)
    trained = train(source, config, recipe_train_config(config, args, device))
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    wall = time.perf_counter() - start
    epochs = sum(1 for h in trained.history if h.get("part", "stream") == "stream")
    frames = trained.n_train * config.clip_frames * epochs  # the stream's frames (the outcome path reads 4 of them)
    rows = {held: source.rate_held_out(trained.model, held) for held in source.held_out_names}
    return {"recipe": name, "device": device, "preset": RECIPES[name][1], "changes": RECIPES[name][2],
            "torch": torch.__version__, "gpu": torch.cuda.get_device_name() if device.startswith("cuda") else None,
            "wall_s": round(wall, 3), "epochs": epochs, "n_train": trained.n_train,
            "frames_per_s": round(frames / wall, 1) if wall else None, "verdict": trained.verdict,
            "val_ba": trained.best.get("val_balanced_accuracy"),
            "scores": {held: scores(r, source.truth(held)) for held, r in rows.items()}}


def table(runs: list[dict]) -> str:
    """One line per run: recipe, device, wall time, frames/s, validation BA, then BA / AUROC per held-out set."""
    sets = sorted({s for r in runs for s in r["scores"]})
    head = f"{'recipe':16} {'device':8} {'wall s':>8} {'frames/s':>9} {'val BA':>6}  " + "  ".join(
        f"{s[:18]:>18}" for s in sets)
    lines = [head, "-" * len(head)]
    for r in runs:
        cells = []
        for s in sets:
            sc = r["scores"].get(s)
            cells.append(f"{'-':>18}" if sc is None else
                         f"{sc['ba']:.3f} / {sc['auroc']:.3f}".rjust(18) if sc["auroc"] is not None else
                         f"{sc['ba']:.3f} / -".rjust(18))
        val = f"{r['val_ba']:.3f}" if r.get("val_ba") is not None else "-"
        lines.append(f"{r['recipe']:16} {r['device']:8} {r['wall_s']:8.1f} {r['frames_per_s'] or 0:9.1f} {val:>6}  "
                     + "  ".join(cells))
    return "\n".join(lines) + "\n(held-out: balanced accuracy at 0.5 / AUROC of P(success), against the truth)"


def run(args) -> dict:
    """Every recipe on every device, then the table (with ``--beside``'s runs) and ``--out``/gpu.json."""
    runs = []
    for name in args.recipes.split(","):
        for device in args.devices.split(","):
            runs.append(train_one(name, device, args))
            print(json.dumps({k: runs[-1][k] for k in ("recipe", "device", "wall_s", "frames_per_s")}), flush=True)
    beside = json.loads(Path(args.beside).read_text())["runs"] if args.beside else []
    result = {"runs": runs, "beside": beside}
    print(table(runs + beside))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    Path(args.out, "gpu.json").write_text(json.dumps(result, indent=1, default=float))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--pack", action="store_true", help="write one pack per recipe (the machine with the videos and packages)")
    add("--run", action="store_true", help="train and score every recipe from its pack on every device")
    add("--recipes", default=",".join(RECIPES))
    add("--preset", action="append", default=[], metavar="RECIPE=PRESET",
        help="train a recipe from another preset (its changes kept), e.g. babyai=tiny for a quick check")
    add("--devices", default="cuda,cpu", help="devices to train each recipe on, in turn")
    add("--beside", default=None, help="an earlier run's gpu.json, its runs shown in the table (e.g. the CPU's)")
    add("--packs", default=".gpu", help="the packs' folder")
    add("--suites", default="bench-out", help="where the quality benchmark's suites are (or are generated)")
    add("--quick", action="store_true", help="generate the quality benchmark's quick suites (a pipeline check)")
    add("--epochs", type=int, default=0, help="each recipe's epochs (0: its own)")
    add("--seed", type=int, default=0)
    add("--cache-dir", default="runs/cache")
    add("--out", default="bench-out/gpu")
    add("--quiet", action="store_true")
    args = parser.parse_args(argv)
    args.presets = dict(item.split("=", 1) for item in args.preset)
    unknown = set(args.recipes.split(",")) - set(RECIPES) | set(args.presets) - set(RECIPES)
    if unknown:
        parser.error(f"unknown recipe(s) {sorted(unknown)}; known: {', '.join(RECIPES)}")
    if args.pack:
        pack(args)
    if args.run:
        run(args)
    return 0


# The benchmark built small, run by tests/test_benchmark_modules.py (a benchmark that drifts from the product fails
# there, not on the day someone runs it).


def tiny(tmp_path=None):
    """Its recipes: the worlds' defaults, Meta-World's two with the whole encoder (trained end to end from packs at
    tiny size by tests/test_gpu_path.py)."""
    from autorater.models import PRESETS
    from benchmarks import rate_tiny

    configs = {name: recipe_config(name, {}) for name in RECIPES}
    assert configs["babyai"] == PRESETS["babyai-grid"]
    assert configs["metaworld"].outcome.blocks == configs["metaworld-parts"].outcome.blocks == 6
    return rate_tiny(recipe_config("metaworld", {"metaworld": "tiny-general"}))


if __name__ == "__main__":
    raise SystemExit(main())
