"""The outcome heads' options, paired: each arm a recipe of the heads trained apart on the same cached frozen maps,
the same rows, the same seeds; every held-out set of the quality benchmark rated by the heads alone.

    python -m benchmarks.head_ablations --root /work/bench56/quality-metaworld-one \
        --arms base,paraphrases=1,rewind=0.5,reached=0.5 --seeds 0,1,2 [--train-mix recommended]

An arm is ``name`` or ``FIELD=VALUE,...`` joined by ``+`` (fields of ``TrainConfig.outcome``: ``paraphrases``,
``rewind``, ``reached``, ``consistency``, ``swap_weight``, ``negatives``...; ``base``: the recipe as it is). Each arm
and seed trains one outcome head of the ``general-parts`` preset alone (``training/stages/outcome.py``:
``fit_outcome_head``, the one loop; the head drawn from the seed, the data order from the seed: arms differ only in
their option) on the quality benchmark's training suite (``--train-mix``: and its relatives), its judged swaps beside
it, and rates every held-out set through the product's rating of cached clips with the event stream's gate at 0:
P(success) is the head's.
Predictions land in ``<root>/predictions/heads-<arm>-seed<k>/`` (and ``heads-<arm>-mean/``: the mean probability of the
seeds' heads), so ``python -m benchmarks.paired heads-base-seed0 heads-rewind_0.5-seed0 --root ROOT`` compares two arms
on the same videos (BA and AUROC, intervals over scenarios). Writes ``<root>/head-ablations.json``: BA and AUROC per
arm, seed and held-out set, the unseen tasks split by relatives.

Why heads alone: the options act on the outcome path; the event stream (every frame, the marker) does not change with
them and costs most of a full run (docs/results/2026-11-27-parts-apart.md). A whole run of the product with an option
that pays is ``python -m benchmarks.quality --config general-parts --train-set outcome.<option>=<value>``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np


def parse_arm(arm: str) -> tuple[str, dict]:
    """``"rewind=0.5+reached=1"`` -> (``"rewind_0.5+reached_1"``, ``{"rewind": 0.5, "reached": 1.0}``); ``base``: no
    change. Fields are ``OutcomeRecipe``'s, checked."""
    from autorater.training.stages.outcome import OutcomeRecipe

    if arm == "base":
        return "base", {}
    names = {f.name: f for f in dataclasses.fields(OutcomeRecipe)}
    changes = {}
    for item in arm.split("+"):
        key, _, value = item.partition("=")
        if key not in names:
            raise SystemExit(f"arm {arm!r}: {key!r} is not an outcome recipe field; known: {', '.join(names)}")
        default = getattr(OutcomeRecipe(), key)
        changes[key] = type(default)(json.loads(value))
    return arm.replace("=", "_"), changes


def train_data(root: Path, train_mix: str, config, tc):
    """The model of ``config`` and its training data from the benchmark's training suites (the cache encoded once)."""
    from autorater.data.suite import Suite
    from autorater.training.inputs.batches import prepare

    suites = root / "suites"
    train_suites = [Suite.load(suites / "train")]  # the one-camera and views plans train on the whole suite
    if (suites / "train_swaps" / "suite.json").is_file():
        train_suites.append(Suite.load(suites / "train_swaps"))
    if train_mix == "recommended":
        train_suites.append(Suite.load(suites / "train_relatives"))
    return (*prepare(train_suites, config, tc, progress=True), train_suites)


def held_out(root: Path) -> dict:
    """The quality benchmark's held-out sets under ``root/suites`` (not its training suites)."""
    from autorater.data.suite import Suite

    skip = {"train", "train_swaps", "train_relatives"}
    return {p.name: Suite.load(p) for p in sorted((root / "suites").iterdir())
            if p.name not in skip and (p / "suite.json").is_file()}


def rate(model, head, sets: dict, cache_dir: str) -> dict:
    """Every held-out set rated by ``model`` with ``head`` as its one outcome head and the gate at 0."""
    import torch

    from autorater.training import baselines as B

    model.outcome.set_heads([head])
    with torch.no_grad():
        model.gate.zero_()
    model.eval()
    return {name: B.predict_cached(model, suite, cache_dir, name="heads") for name, suite in sets.items()}


def save_head(head, path: Path) -> None:
    """A trained head's weights (safetensors; ``benchmarks.camera_adaptation`` reads them back)."""
    from safetensors.torch import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().contiguous() for k, v in head.state_dict().items()}, str(path))


def write_rows(folder: Path, rated: dict) -> None:
    """Each held-out set's prediction rows as ``folder/<set>.jsonl`` (the quality benchmark's layout)."""
    from autorater.data.suite import write_jsonl

    folder.mkdir(parents=True, exist_ok=True)
    for set_name, rows in rated.items():
        write_jsonl(folder / f"{set_name}.jsonl", rows)


def mean_rows(per_seed: list[dict]) -> dict:
    """The seeds' heads averaged: each set's rows with the mean probability (and its log-odds as the logit)."""
    out = {}
    for name in per_seed[0]:
        rows = []
        for group in zip(*(rated[name] for rated in per_seed)):
            if any("error" in r for r in group):
                rows.append(group[0])
                continue
            p = float(np.mean([r["p_success"] for r in group]))
            q = min(max(p, 1e-6), 1 - 1e-6)
            rows.append({**group[0], "p_success": round(p, 6), "logit": round(float(np.log(q / (1 - q))), 6),
                         "outcome": "success" if round(p, 6) >= 0.5 else "failure"})
        out[name] = rows
    return out


def score(rated: dict, sets: dict, train_suites: list) -> dict:
    """BA and AUROC of each set against the simulator truth (pooled unseen scenarios; unseen tasks by relatives)."""
    from benchmarks.quality_scores import by_relatives, pooled_outcome

    out = {name: {k: pooled_outcome([(rows, sets[name])])[k] for k in ("balanced_accuracy", "auroc", "n")}
           for name, rows in rated.items()}
    draws = [n for n in ("unseen_scenarios", "unseen_scenarios_2") if n in rated]
    if draws:
        out["unseen_scenarios_pooled"] = pooled_outcome([(rated[n], sets[n]) for n in draws])
    tasks = [n for n in ("unseen_tasks", "unseen_tasks_norel") if n in rated]
    if tasks:
        split = by_relatives([(rated[n], sets[n]) for n in tasks], train_suites)
        out.update({f"unseen_tasks_{g}": split[g] for g in ("with_relatives", "without_relatives") if g in split})
    return out


def main(argv: list[str] | None = None) -> int:
    import torch

    from autorater.data.splits import split_groups
    from autorater.models import PRESETS
    from autorater.training.recipe import recipe_for
    from autorater.training.stages.outcome import fit_outcome_head, outcome_inputs

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="the quality benchmark's folder (suites/, cache/)")
    parser.add_argument("--arms", default="base,paraphrases=1,rewind=0.5,reached=0.5")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--train-mix", choices=("mt10", "recommended"), default="mt10")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    root = Path(args.root)
    base = PRESETS["general-parts"]
    config = base.replace(outcome=dataclasses.replace(base.outcome, members=1))
    tc = recipe_for(config, cache_dir=str(root / "cache"))
    model, data, train_suites = train_data(root, args.train_mix, config, tc)
    sets = held_out(root)
    train_rows, val_rows = split_groups(data.groups or data.ex.scenario_keys, tc.val_share, tc.seed)
    mix = "" if args.train_mix == "mt10" else "mix-"
    report = {"train_mix": args.train_mix, "rows": {"train": len(train_rows), "val": len(val_rows)}, "arms": {}}
    out_path = root / f"head-ablations{'-' + args.train_mix if mix else ''}.json"
    for arm in args.arms.split(","):
        name, changes = parse_arm(arm)
        recipe = dataclasses.replace(tc.outcome, **changes)
        inputs = outcome_inputs(model.outcome, data, recipe)
        schedule = recipe.schedule(tc.schedule(), len(train_rows), tc.min_steps)
        per_seed, scores = [], {}
        for seed in [int(s) for s in args.seeds.split(",")]:
            start = time.time()
            with torch.random.fork_rng():
                torch.manual_seed(seed)
                head = model.outcome.make_head()
            curve = fit_outcome_head(head, inputs, np.asarray(train_rows), np.asarray(val_rows), recipe, schedule, seed)
            save_head(head, root / "heads" / f"{mix}{name}-seed{seed}.safetensors")
            rated = rate(model, head, sets, tc.cache_dir)
            write_rows(root / "predictions" / f"heads-{mix}{name}-seed{seed}", rated)
            per_seed.append(rated)
            best = max(curve, key=lambda h: h["val_balanced_accuracy"])
            scores[seed] = {"held_out": score(rated, sets, train_suites), "best_epoch": best["epoch"],
                            "val_balanced_accuracy": best["val_balanced_accuracy"], "epochs": len(curve),
                            "wall_s": round(time.time() - start, 1)}
            print(f"{name} seed {seed}: " + ", ".join(
                f"{k} {v['balanced_accuracy']:.3f}/{v['auroc']:.3f}" for k, v in scores[seed]["held_out"].items()
                if isinstance(v, dict) and "auroc" in v), flush=True)
        mean = mean_rows(per_seed)
        write_rows(root / "predictions" / f"heads-{mix}{name}-mean", mean)
        report["arms"][name] = {"changes": changes, "per_seed": scores, "mean_of_heads": score(mean, sets,
                                                                                               train_suites)}
        out_path.write_text(json.dumps(report, indent=1, default=float) + "\n")
    print(f"written to {out_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


# The benchmark built small, run by tests/test_benchmark_modules.py (a benchmark that drifts from the product fails
# there, not on the day someone runs it).


def tiny(tmp_path=None):
    """An arm's recipe read and checked, and the seeds' heads averaged into one probability (its logit beside it)."""
    import torch

    assert parse_arm("rewind=0.5+reached=1") == ("rewind_0.5+reached_1", {"rewind": 0.5, "reached": 1.0})
    try:
        parse_arm("rewound=1")
        raise AssertionError("an unknown option was taken")
    except SystemExit as refused:
        assert "not an outcome recipe field" in str(refused)
    rows = mean_rows([{"s": [{"continuation_id": "c", "p_success": p, "outcome": "x"}]} for p in (0.2, 0.9)])["s"]
    assert abs(rows[0]["p_success"] - 0.55) < 1e-9 and rows[0]["outcome"] == "success"
    return torch.tensor([rows[0]["logit"]])
