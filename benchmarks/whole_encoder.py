"""The whole encoder from pixels against the cheaper cuts of the outcome path: a loop of arms over the product's
training, paired (same data, same seeds).

Arms (``ARMS``: ``outcome.blocks``): ``frozen`` (0: the stage-3 maps cached, the heads trained apart), ``block4`` (1:
block group 4 learns from the cached map below it) and ``whole`` (6: every block and the stem learn from the frames,
a random crop and colour jitter per clip), each the general model of ``--config`` with the arm's cut, trained by
``autorater.training.train.train`` with its own recipe (``recipe_for``) on the Meta-World one-camera training suite
and its judged swaps, each seed on the same rows. Every held-out set is rated by the trained model and scored against
the simulator truth: balanced accuracy and AUROC of P(success); the arms are compared pairwise on each set
(``autorater.calibration.compare.paired_comparison``: the gain in balanced accuracy, its interval over scenarios).

Two steps, so that the machine with the GPU needs neither decord nor the weight packages (the product's packs,
``autorater.training.inputs.pack``)::

    python -m benchmarks.whole_encoder --pack --packs .gpu          # CPU: one pack per arm, held-out sets inside
    python -m benchmarks.whole_encoder --run --packs .gpu --out OUT --device cuda     # any torch device

Results: docs/results/2026-11-28-whole-encoder-gpu.md (measured with this benchmark's first form, which trained
an outcome head alone).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

SUITES = "bench-out/quality-metaworld-one/suites"
SETS = ("unseen_scenarios", "instruction_swaps", "unseen_agents", "unseen_tasks", "unseen_scenarios_2", "unseen_camera")
ARMS = {"frozen": 0, "block4": 1, "whole": 6}  # arm -> outcome.blocks
HEAD = {"dim": 128, "queries": 4, "layers": 2, "pooling": "max"}  # the general-parts preset's head


def arm_config(base, blocks: int):
    """The general model config of an arm: ``base`` with the outcome path's cut at ``blocks`` and the arms' head."""
    return base.replace(outcome_blocks=blocks, outcome_dim=HEAD["dim"], outcome_queries=HEAD["queries"],
                        outcome_layers=HEAD["layers"], outcome_pooling=HEAD["pooling"])


def arm_recipe(config, args, seed: int):
    from autorater.training.recipe import recipe_for

    changes = {"epochs": args.epochs} if args.epochs else {}
    return recipe_for(config, seed=seed, device=args.device, cache_dir=args.cache_dir, **changes)


def pack(args) -> None:
    """One pack per arm (``--arms``): the training suites and every held-out set found under ``--suites``."""
    from autorater.data.suite import Suite
    from autorater.models import PRESETS
    from autorater.training.inputs.pack import write_pack

    root = Path(args.suites)
    train = [Suite.load(root / name) for name in ("train", "train_swaps") if (root / name).is_dir()]
    held = {name: Suite.load(root / name) for name in SETS if (root / name).is_dir()}
    for arm in args.arms.split(","):
        config = arm_config(PRESETS[args.config], ARMS[arm])
        out = write_pack(train, config, arm_recipe(config, args, 0), Path(args.packs) / arm, progress=True,
                         held_out=held)
        print(f"{arm}: {out}", flush=True)


def scores(rows: list[dict], truth: dict[str, int]) -> dict:
    """Balanced accuracy and AUROC of P(success) against the truth."""
    from sklearn.metrics import roc_auc_score

    from autorater.calibration import outcome_metrics

    y = np.array([truth[r["continuation_id"]] for r in rows])
    p = np.array([r["p_success"] for r in rows])
    auroc = float(roc_auc_score(y, p)) if 0 < y.sum() < len(y) else None
    return {"n": len(y), "ba": outcome_metrics(y, (p >= 0.5).astype(int))["balanced_accuracy"], "auroc": auroc}


def run(args) -> dict:
    """Every arm and seed trained from its pack by the product, rated on the pack's held-out sets, scored and
    compared (``--out``/whole_encoder.json)."""
    import torch

    from autorater.models import PRESETS
    from autorater.training.inputs.pack import Pack
    from autorater.training.train import train

    result, ratings = {"device": args.device, "torch": torch.__version__, "runs": [], "paired": {}}, {}
    for seed in (int(s) for s in args.seeds.split(",")):
        for arm in args.arms.split(","):
            source, config = Pack(Path(args.packs) / arm), arm_config(PRESETS[args.config], ARMS[arm])
            start = time.perf_counter()
            trained = train(source, config, arm_recipe(config, args, seed))
            rows = {name: source.rate_held_out(trained.model, name) for name in source.held_out_names}
            ratings[arm, seed] = rows
            run_ = {"arm": arm, "seed": seed, "wall_s": round(time.perf_counter() - start, 1),
                    "best": trained.best, "verdict": trained.verdict,
                    "scores": {n: scores(r, source.truth(n)) for n, r in rows.items()}}
            result["runs"].append(run_)
            print(f"{arm} seed {seed}: {json.dumps(run_['scores'])}", flush=True)
    result["paired"] = paired(ratings, args)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    Path(args.out, "whole_encoder.json").write_text(json.dumps(result, indent=1, default=float))
    return result


def paired(ratings: dict, args) -> dict:
    """For each pair of arms and held-out set, seed by seed: the gain in balanced accuracy and its paired interval
    over scenarios (``paired_comparison``)."""
    from autorater.calibration.compare import paired_comparison
    from autorater.training.inputs.pack import Pack

    arms, out = args.arms.split(","), {}
    for a, b in [(a, b) for i, a in enumerate(arms) for b in arms[i + 1:]]:
        source = Pack(Path(args.packs) / a)
        for name in source.held_out_names:
            truth, groups = source.truth(name), source.scenarios(name)
            for seed in {s for _, s in ratings}:
                ra, rb = ratings[a, seed][name], ratings[b, seed][name]
                y = np.array([truth[r["continuation_id"]] for r in ra])
                cmp = paired_comparison(y, [r["p_success"] >= 0.5 for r in ra], [r["p_success"] >= 0.5 for r in rb],
                                        groups=[groups[r["continuation_id"]] for r in ra], seed=seed)
                out.setdefault(f"{b} - {a}", {}).setdefault(name, []).append(
                    {"seed": seed, "difference": cmp["difference"], "ci": cmp["ci"], "n_groups": cmp["n_groups"]})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--pack", action="store_true", help="write one pack per arm (the machine with the videos and packages)")
    add("--run", action="store_true", help="train and score every arm from its pack (any torch device)")
    add("--packs", default=".gpu", help="the packs' folder")
    add("--suites", default=SUITES)
    add("--config", default="general", help="the preset each arm changes the cut of")
    add("--arms", default="frozen,block4,whole")
    add("--seeds", default="0,1,2")
    add("--epochs", type=int, default=0, help="each arm's epochs (0: its recipe's)")
    add("--device", default="auto")
    add("--cache-dir", default="runs/cache")
    add("--out", default=".")
    args = parser.parse_args(argv)
    if args.pack:
        pack(args)
    if args.run:
        run(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


# The benchmark built small, run by tests/test_benchmark_modules.py (a benchmark that drifts from the product fails
# there, not on the day someone runs it).


def tiny(tmp_path=None):
    """Its arms' configs, each reading other inputs (their models trained and scored end to end, from packs, by
    tests/test_gpu_path.py)."""
    from autorater.models import PRESETS, processor_for
    from benchmarks import rate_tiny

    keys = {processor_for(arm_config(PRESETS["tiny-general"], blocks)).cache_key(True) for blocks in ARMS.values()}
    assert len(keys) == len(ARMS)
    return rate_tiny(arm_config(PRESETS["tiny-general"], ARMS["block4"]))
