"""Active learning, simulated: balanced accuracy against the number of human labels, for each strategy.

    python -m benchmarks.active [--pool-scenarios 1000] [--test-scenarios 200] [--start 250] [--budget 250]
                                [--rounds 3] [--epochs 12] [--min-steps 1500] [--strategies random,uncertainty]
                                [--no-diversity]
                                [--pool DIR --test DIR] [--cache DIR] [--out bench-out/active]

A pool suite and a test suite are generated (the four training levels, the five standard agents,
simulated annotators), or given (``--pool``/``--test``: e.g. the quality benchmark's training suite
and its unseen-scenarios suite, whose features ``--cache`` already holds). Every strategy starts
from the same random labelled set; each round the model is retrained from scratch on the labelled
continuations (frozen-encoder features cached once), scored against the simulator truth of the test
suite, and then picks the next ``--budget`` continuations of the pool, whose simulated annotations
are revealed (the annotators answering the queue). Prints a table, writes ``active.json`` and
``active.png`` (balanced accuracy against human labels, one line per strategy), and reports the label
saving: the share of random's final labels that each strategy needed to reach random's final balanced
accuracy.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np


def _subset(pool, ids: set[str]):
    from data.suite import Suite

    return Suite(pool.root, pool.info, pool.scenarios, pool.continuations,
                 [a for a in pool.annotations if a.continuation_id in ids], pool.references)


def _score(model, test, cache_dir: str) -> float:
    from calibration.metrics import outcome_metrics
    from data.suite import load_truth
    from training.baselines import predict_cached

    truth = {t["continuation_id"]: t["outcome"] == "success" for t in load_truth(test.root)}
    rows = [r for r in predict_cached(model, test, cache_dir) if "outcome" in r]
    return outcome_metrics([truth[r["continuation_id"]] for r in rows],
                           [r["outcome"] == "success" for r in rows])["balanced_accuracy"]


def run_strategy(strategy: str, pool, test, start: set[str], budget: int, rounds: int, tc, model_config,
                 durations: dict, seed: int, diversity: bool = True, trained: dict | None = None) -> list[dict]:
    """One strategy's curve. ``trained`` (labelled ids -> (model, BA, seconds)) is shared between strategies: the
    same labelled set trains the same model (seeded), so round 0 is trained once."""
    from serving.active import select
    from training.baselines import predict_cached
    from training.train import train

    labelled, curve = set(start), []
    trained = {} if trained is None else trained
    candidates = [c for c in pool.continuation_ids() if c not in {r.continuation_id for r in pool.references}]
    for r in range(rounds + 1):
        key = frozenset(labelled)
        if key not in trained:
            t = time.time()
            model = train([_subset(pool, labelled)], model_config, tc).model
            trained[key] = (model, _score(model, test, tc.cache_dir), round(time.time() - t))
        model, ba, train_s = trained[key]
        curve.append({"round": r, "labels": len(labelled), "balanced_accuracy": ba, "train_s": train_s})
        print(f"  {strategy:<12} round {r}: {len(labelled):>4} labelled continuations, test BA {ba:.3f}", flush=True)
        if r == rounds:
            break
        rest = {c for c in candidates if c not in labelled}
        preds = [p for p in predict_cached(model, pool, tc.cache_dir) if p["continuation_id"] in rest
                 and "outcome" in p]
        for p in preds:
            c = pool.get(p["continuation_id"])
            p["scenario_id"], p["category"] = c.scenario_id, pool.scenario_by_id[c.scenario_id].category
            p["duration_s"] = durations[p["continuation_id"]]
        labelled |= set(select(preds, budget, strategy, diversity=diversity, seed=seed + r))
    return curve


def labels_to_reach(curve: list[dict], target: float) -> float | None:
    """Labels at which the curve first reaches ``target`` (linear between rounds); None if never."""
    for a, b in zip(curve, curve[1:]):
        if a["balanced_accuracy"] >= target:
            return a["labels"]
        if b["balanced_accuracy"] >= target:
            frac = (target - a["balanced_accuracy"]) / (b["balanced_accuracy"] - a["balanced_accuracy"])
            return a["labels"] + frac * (b["labels"] - a["labels"])
    return curve[0]["labels"] if curve and curve[0]["balanced_accuracy"] >= target else None


def shares_by_budget(curves: dict) -> dict:
    """For every budget random reached after its start: the share of that budget each strategy needed to reach
    random's balanced accuracy there (the issue's criterion is the last budget; the others show whether a saving
    holds along the curve or only at one point). None: never reached."""
    if "random" not in curves:
        return {}
    out = {}
    for point in curves["random"][1:]:
        needs = {name: labels_to_reach(curve, point["balanced_accuracy"]) for name, curve in curves.items()}
        out[point["labels"]] = {name: None if n is None else n / point["labels"] for name, n in needs.items()}
    return out


def plot(curves: dict, path: Path) -> None:
    from calibration.plots import _figure

    f = _figure(6, 4)
    ax = f.subplots()
    for name, curve in curves.items():
        ax.plot([c["labels"] for c in curve], [c["balanced_accuracy"] for c in curve], marker="o", label=name)
    ax.set(xlabel="human-labelled continuations", ylabel="balanced accuracy vs truth (test suite)",
           title="Active learning: accuracy per human label")
    ax.legend()
    f.savefig(path, format="png")


def main(argv: list[str] | None = None) -> int:
    import torch

    from autorater.config import PRESETS
    from data.generate import generate_suite
    from data.suite import Suite
    from data.video import video_info
    from training.train import TrainConfig

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool-scenarios", type=int, default=1000)
    parser.add_argument("--test-scenarios", type=int, default=200)
    parser.add_argument("--start", type=int, default=250, help="random labelled continuations to start from")
    parser.add_argument("--budget", type=int, default=250, help="continuations labelled per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--min-steps", type=int, default=1500,
                        help="optimiser steps at least, whatever the labelled set's size (TrainConfig.min_steps): "
                             "a small set gets more epochs, so the curve measures labels, not training length; "
                             "0: --epochs as given")
    parser.add_argument("--strategies", default="random,uncertainty")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-diversity", action="store_true",
                        help="pick by score alone (as `active select --no-diversity`), not spread over scenarios and "
                             "categories")
    parser.add_argument("--pool", help="an annotated pool suite to use instead of generating one")
    parser.add_argument("--test", help="a test suite with simulator truth to use instead of generating one")
    parser.add_argument("--cache", help="feature cache folder (default: OUT/cache)")
    parser.add_argument("--out", default="bench-out/active")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(args.threads)
    suites = {}
    for name, n, seed in (("pool", args.pool_scenarios, 31), ("test", args.test_scenarios, 32)):
        path = Path(getattr(args, name) or out / name)
        if getattr(args, name) and not (path / "suite.json").is_file():
            raise SystemExit(f"--{name} {path}: no suite.json there; pass a suite folder, or leave --{name} out "
                             f"to generate one")
        if not (path / "suite.json").exists():
            generate_suite(path, scenarios=n, continuations_per_scenario=2, seed=seed, version=name, progress=True)
        suites[name] = Suite.load(path)
    pool, test = suites["pool"], suites["test"]
    refs = {r.continuation_id for r in pool.references}
    candidates = [c for c in pool.continuation_ids() if c not in refs]
    rng = np.random.default_rng(args.seed)
    start = set(rng.choice(candidates, size=min(args.start, len(candidates)), replace=False).tolist())
    durations = {c: video_info(pool.video_path(c)).duration_s for c in pool.continuation_ids()}
    tc = TrainConfig(epochs=args.epochs, patience=args.epochs, min_steps=args.min_steps,
                     cache_dir=args.cache or str(out / "cache"), seed=args.seed)
    began = time.time()
    trained: dict = {}
    curves = {s: run_strategy(s, pool, test, start, args.budget, args.rounds, tc, PRESETS["base"], durations,
                              args.seed, diversity=not args.no_diversity, trained=trained)
              for s in args.strategies.split(",")}
    final = curves["random"][-1] if "random" in curves else None
    saving = {}
    if final is not None:
        for name, curve in curves.items():
            need = labels_to_reach(curve, final["balanced_accuracy"])
            saving[name] = None if need is None else need / final["labels"]
    result = {"args": vars(args), "curves": curves, "random_final": final, "labels_needed_share": saving,
              "share_by_budget": shares_by_budget(curves), "wall_s": round(time.time() - began)}
    (out / "active.json").write_text(json.dumps(result, indent=1) + "\n")
    plot(curves, out / "active.png")
    print(f"\n{'strategy':<14}" + "".join(f"{c['labels']:>8}" for c in next(iter(curves.values()))) +
          f"{'share of random labels to reach its final BA':>48}")
    for name, curve in curves.items():
        share = saving.get(name)
        print(f"{name:<14}" + "".join(f"{c['balanced_accuracy']:>8.3f}" for c in curve) +
              f"{'-' if share is None else f'{share:.0%}':>48}")
    for budget, shares in result["share_by_budget"].items():
        print(f"to reach random's BA at {budget} labels: " + ", ".join(
            f"{name} {'not reached' if v is None else f'{v:.0%}'}" for name, v in shares.items()))
    print(f"\nwritten: {out / 'active.json'}, {out / 'active.png'} ({result['wall_s']} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
