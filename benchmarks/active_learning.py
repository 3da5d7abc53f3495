"""Active learning, simulated: balanced accuracy against the number of human labels, for each strategy.

    python -m benchmarks.active_learning [--pool-scenarios 1000] [--test-scenarios 200] [--start 250] [--budget 250]
                                [--rounds 3] [--epochs 12] [--min-steps 1500] [--strategies random,uncertainty]
                                [--no-diversity] [--random-rounds 0]
                                [--pool DIR --test DIR] [--cache DIR] [--config babyai-grid]
                                [--out bench-out/active]

A pool suite and a test suite are generated (the four training levels, the five standard agents,
simulated annotators), or given (``--pool``/``--test``: e.g. the quality benchmark's training suite
and its unseen-scenarios suite, whose features ``--cache`` already holds). Every strategy starts
from the same random labelled set; each round the model is retrained from scratch on the labelled
continuations (frozen-encoder features cached once), scored against the simulator truth of the test
suite, and then picks the next ``--budget`` continuations of the pool, whose simulated annotations
are revealed (the annotators answering the queue). Prints a table, writes ``active.json`` and
``active.png`` (balanced accuracy against human labels, one line per strategy), and reports the label
saving: the share of random's final labels that each strategy needed to reach random's final balanced
accuracy. ``--random-rounds K``: the other strategies pick at random for their first K rounds (the same
picks as random's, so those rounds are trained once) and by their own scores after: a warm start for a model
that cannot yet rank the pool.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np


def _subset(pool, ids: set[str]):
    from autorater.data.suite import Suite

    return Suite(pool.root, pool.info, pool.scenarios, pool.continuations,
                 [a for a in pool.annotations if a.continuation_id in ids], pool.references)


def _score(model, test, cache_dir: str) -> float:
    from autorater.calibration.metrics import outcome_metrics
    from autorater.data.suite import load_truth
    from autorater.training.baselines import predict_cached

    truth = {t["continuation_id"]: t["outcome"] == "success" for t in load_truth(test.root)}
    rows = [r for r in predict_cached(model, test, cache_dir) if "outcome" in r]
    return outcome_metrics([truth[r["continuation_id"]] for r in rows],
                           [r["outcome"] == "success" for r in rows])["balanced_accuracy"]


def run_strategy(strategy: str, pool, test, start: set[str], budget: int, rounds: int, tc, model_config,
                 durations: dict, seed: int, diversity: bool = True, trained: dict | None = None,
                 done: list[dict] | None = None, on_round: Callable[[list[dict]], None] | None = None,
                 random_rounds: int = 0) -> list[dict]:
    """One strategy's curve: a point per round (labels, balanced accuracy, training seconds, the labelled ids).

    ``trained`` (labelled ids -> (model or None, BA, seconds)) is shared between strategies: the same labelled
    set trains the same model (seeded), so round 0 is trained once. ``done``: the points of an interrupted run
    (resume); their rounds are not trained again, except the last one's model when it must pick the next batch.
    ``on_round(curve)`` is called after every round (the benchmark writes its progress there). The picks of the
    first ``random_rounds`` rounds are random's (the same rows and seed, so the same ids), then ``strategy``'s.
    """
    from autorater.serving.labelling.active import select
    from autorater.training.baselines import predict_cached
    from autorater.training.train import train

    def fit(labelled: set[str]):
        key = frozenset(labelled)
        if key not in trained or trained[key][0] is None:
            t = time.time()
            model = train([_subset(pool, labelled)], model_config, tc).model
            ba = _score(model, test, tc.cache_dir)
            trained[key] = (model, ba, trained[key][2] if key in trained else round(time.time() - t))
        return trained[key]

    from autorater.data.suite import load_truth

    trained = {} if trained is None else trained
    done = done or []
    votes: dict[str, list[bool]] = {}
    for a in pool.annotations:  # what the labelled set tells the picker: the annotators' majority
        votes.setdefault(a.continuation_id, []).append(a.outcome == "success")
    says_success = {c: np.mean(v) >= 0.5 for c, v in votes.items()}
    try:  # a generated pool's simulator truth: how balanced the picked batches really are
        truth = {t["continuation_id"]: t["outcome"] == "success" for t in load_truth(pool.root)}
    except FileNotFoundError:
        truth = {}
    labelled, curve = set(start), []
    candidates = [c for c in pool.continuation_ids() if c not in {r.continuation_id for r in pool.references}]
    for r in range(rounds + 1):
        if r < len(done):  # resumed: measured before the interruption
            point, labelled = done[r], set(done[r]["labelled"])
            trained.setdefault(frozenset(labelled), (None, point["balanced_accuracy"], point["train_s"]))
        else:
            _, ba, train_s = fit(labelled)
            point = {"round": r, "labels": len(labelled), "balanced_accuracy": ba, "train_s": train_s,
                     "labelled": sorted(labelled)}
        curve.append(point)
        print(f"  {strategy:<12} round {r}: {len(labelled):>4} labelled continuations, test BA "
              f"{point['balanced_accuracy']:.3f}{' (resumed)' if r < len(done) else ''}", flush=True)
        if on_round is not None and r >= len(done):
            on_round(curve)
        if r == rounds or r + 1 < len(done):
            continue
        model = fit(labelled)[0]
        rest = {c for c in candidates if c not in labelled}
        preds = [p for p in predict_cached(model, pool, tc.cache_dir) if p["continuation_id"] in rest
                 and "outcome" in p]
        for p in preds:
            c = pool.get(p["continuation_id"])
            p["scenario_id"], p["category"] = c.scenario_id, pool.scenario_by_id[c.scenario_id].category
            p["duration_s"] = durations[p["continuation_id"]]
        picker = "random" if r < random_rounds else strategy
        successes = sum(says_success.get(c, False) for c in labelled)
        picked = set(select(preds, budget, picker, diversity=diversity, seed=seed + r,
                            labelled=(successes, len(labelled) - successes)))
        point["next_batch_success_share"] = float(np.mean([truth[c] for c in picked])) if picked and truth else None
        labelled = labelled | picked
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


def headline(runs: dict[str, dict], fixed: float = 0.85, of_full: float = 0.95) -> dict:
    """The issue's headline over runs of one setup (seeds): for each strategy, the labels each run needed to reach
    ``fixed`` balanced accuracy and ``of_full`` of its own full-pool model's (``full_pool_ba``), and their mean
    when every run reached it; and per budget, each strategy's mean lead over random with a 95% t interval over
    the runs (None with one run)."""
    from scipy import stats

    strategies = [s for s in next(iter(runs.values()))["curves"] if all(s in r["curves"] for r in runs.values())]
    targets = {"fixed": [fixed] * len(runs),  # per run; None: the run has no full-pool model (an interrupted one)
               "of_full": [of_full * r["full_pool_ba"] if r.get("full_pool_ba") else None for r in runs.values()]}
    needed = {}
    for s in strategies:
        needed[s] = {}
        for name, per_run in targets.items():
            got = [None if t is None else labels_to_reach(r["curves"][s], t) for r, t in zip(runs.values(), per_run)]
            needed[s][name] = {"per_run": got, "reached": sum(g is not None for g in got),
                               "mean": float(np.mean(got)) if all(g is not None for g in got) else None}
    lead = {}
    for s in strategies:
        if s == "random" or "random" not in strategies:
            continue
        by_run = [({p["labels"]: p["balanced_accuracy"] for p in run["curves"][s]},
                   {p["labels"]: p["balanced_accuracy"] for p in run["curves"]["random"]}) for run in runs.values()]
        budgets = sorted(set.intersection(*(set(a) & set(b) for a, b in by_run)))
        lead[s] = []
        for b in budgets[1:]:  # the first budget is the shared random start
            diffs = np.array([a[b] - r[b] for a, r in by_run])
            half = (float(stats.t.ppf(0.975, len(diffs) - 1) * diffs.std(ddof=1) / np.sqrt(len(diffs)))
                    if len(diffs) > 1 else None)
            mean = float(diffs.mean())
            ci = None if half is None else [mean - half, mean + half]
            lead[s].append({"labels": b, "mean_lead": mean, "ci95": ci, "per_run": diffs.tolist()})
    full = [run.get("full_pool_ba") for run in runs.values()]
    return {"fixed_target": fixed, "share_of_full_pool": of_full, "full_pool_ba": full, "labels_needed": needed,
            "lead_over_random": lead, "runs": len(runs)}


def _print_headline(h: dict) -> None:
    def cell(t):
        return f"{t['mean']:.0f}" if t["mean"] is not None else f"reached in {t['reached']}/{h['runs']}"

    full = [f"{x:.3f}" for x in h["full_pool_ba"] if x is not None]
    print(f"\nlabels needed (mean over {h['runs']} run(s); full-pool model BA: {', '.join(full) or '-'})")
    print(f"{'strategy':<14}{'to ' + format(h['fixed_target'], '.2f') + ' BA':>18}"
          f"{format(h['share_of_full_pool'], '.0%') + ' of the full pool':>24}")
    for s, t in h["labels_needed"].items():
        print(f"{s:<14}{cell(t['fixed']):>18}{cell(t['of_full']):>24}")
    for s, points in h["lead_over_random"].items():
        print(f"{s} minus random, BA: " + ", ".join(
            f"{p['labels']}: {p['mean_lead']:+.3f}" + ("" if p["ci95"] is None else
                                                      f" [{p['ci95'][0]:+.3f}, {p['ci95'][1]:+.3f}]")
            for p in points))


SAME_SETUP = ("start", "budget", "rounds", "epochs", "min_steps", "no_diversity", "random_rounds", "pool", "test",
              "config")
# settings added since runs were first saved, as those runs had them
OLDER = {"random_rounds": 0, "config": "babyai-grid"}


def _setup(folder: str, run: dict) -> dict:
    """What must match between seeds: the schedule and recipe, and the pool and test suites (resolved folders)."""
    args = {**OLDER, **(run.get("args") or run.get("settings") or {})}
    setup = {k: args.get(k) for k in SAME_SETUP}
    for name in ("pool", "test"):  # a generated suite lives in the run's folder
        setup[name] = str(Path(args.get(name) or Path(folder) / name).resolve())
    return setup


def at_final(shares: dict) -> dict:
    """The shares at random's last budget (the issue's criterion) from ``shares_by_budget``; {} without rounds."""
    return shares[max(shares)] if shares else {}


def _pct(share: float | None) -> str:
    return "not reached" if share is None else f"{share:.0%}"


def combine(runs: dict[str, dict]) -> dict:
    """Runs of one setup with different seeds (``active.json`` or ``progress.json`` contents by folder), pooled:
    each strategy's mean balanced accuracy at every budget all runs reached, and the label shares read off
    those mean curves (the issue's criterion at random's final budget) beside each run's own."""
    first = next(iter(runs))
    setup = _setup(first, runs[first])
    for folder, run in runs.items():
        other = _setup(folder, run)
        differ = sorted(k for k in SAME_SETUP if other[k] != setup[k])
        if differ:
            raise ValueError(f"{folder}: not the same setup as {first} ({', '.join(differ)} differ); combine "
                             f"seeds of one setup only")
    strategies = [s for s in runs[first]["curves"] if all(s in run["curves"] for run in runs.values())]
    mean = {}
    for s in strategies:
        by_run = [{p["labels"]: p["balanced_accuracy"] for p in run["curves"][s]} for run in runs.values()]
        budgets = sorted(set.intersection(*(set(b) for b in by_run)))
        mean[s] = [{"labels": b, "balanced_accuracy": float(np.mean([r[b] for r in by_run])),
                    "per_run": [r[b] for r in by_run]} for b in budgets]
    per_run = {name: shares_by_budget({s: run["curves"][s] for s in strategies}) for name, run in runs.items()}
    shares = shares_by_budget(mean)
    return {"runs": list(runs), "setup": setup, "mean_curves": mean, "share_by_budget": shares,
            "headline": headline(runs),
            "labels_needed_share": at_final(shares),
            "labels_needed_share_per_run": {name: at_final(by_budget) or None for name, by_budget in per_run.items()}}


def plot(curves: dict, path: Path, runs: dict | None = None, random_rounds: int = 0) -> None:
    """BA against human labels, a line per strategy; with ``runs`` (combine), each run's curve faintly behind."""
    from autorater.calibration.plots import new_figure

    f = new_figure(6, 4)
    ax = f.subplots()
    for i, (name, curve) in enumerate(curves.items()):
        colour = f"C{i}"
        for run in (runs or {}).values():
            ax.plot([c["labels"] for c in run["curves"][name]], [c["balanced_accuracy"] for c in run["curves"][name]],
                    color=colour, alpha=0.25, lw=1)
        label = name if name == "random" or not random_rounds else f"{name}, random first {random_rounds} round(s)"
        ax.plot([c["labels"] for c in curve], [c["balanced_accuracy"] for c in curve], marker="o", color=colour,
                label=label if runs is None else f"{label} (mean of {len(runs)} seed{'s' * (len(runs) > 1)})")
    if "random" in curves:  # the bar: random's final accuracy
        ax.axhline(curves["random"][-1]["balanced_accuracy"], color="grey", ls=":", lw=1, label="random's final BA")
    ax.set(xlabel="human-labelled continuations", ylabel="balanced accuracy vs truth (test suite)",
           title="Active learning: accuracy per human label")
    ax.legend()
    f.savefig(path, format="png")


def _resume(progress: Path, settings: dict, start: set[str]) -> dict:
    """The curves an interrupted run of the same settings measured (``{}`` when there is none)."""
    if not progress.exists():
        return {}
    try:
        saved = json.loads(progress.read_text(encoding="utf-8"))
        curves = saved["curves"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise SystemExit(f"{progress}: unreadable ({err}); delete it to start the run again") from None
    now, before = ({**OLDER, **x} for x in (settings, saved.get("settings", {})))
    changed = sorted(k for k in set(now) | set(before) if now.get(k) != before.get(k))
    if changed:
        raise SystemExit(f"{progress}: an interrupted run with other settings ({', '.join(changed)}); resume it with "
                         f"the same options, or pass another --out")
    if any(curve and set(curve[0]["labelled"]) != start for curve in curves.values()):
        raise SystemExit(f"{progress}: its start set is not this run's; delete it to start the run again")
    print(f"resuming {progress}: " + ", ".join(f"{name} {len(c)} round(s)" for name, c in curves.items()), flush=True)
    return curves


def _print_table(curves: dict, shares: dict) -> None:
    final, longest = at_final(shares), max(curves.values(), key=len)
    print(f"\n{'strategy':<14}" + "".join(f"{c['labels']:>8}" for c in longest) +
          f"{'share of random labels to reach its final BA':>48}")
    for name, curve in curves.items():
        share = final.get(name)
        print(f"{name:<14}" + "".join(f"{c['balanced_accuracy']:>8.3f}" for c in curve) +
              " " * 8 * (len(longest) - len(curve)) + f"{'-' if share is None else f'{share:.0%}':>48}")
    for budget, by_name in shares.items():
        print(f"to reach random's BA at {budget} labels: " + ", ".join(
            f"{name} {_pct(v)}" for name, v in by_name.items()))


def _combine_main(folders: list[str], out: Path) -> int:
    runs = {}
    for folder in folders:
        path = next((Path(folder) / n for n in ("active.json", "progress.json") if (Path(folder) / n).is_file()), None)
        if path is None:
            raise SystemExit(f"--combine {folder}: no active.json or progress.json there; pass the --out folder of a "
                             f"benchmark run")
        try:
            runs[folder] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise SystemExit(f"--combine {path}: unreadable ({err})") from None
    try:
        result = combine(runs)
    except ValueError as err:
        raise SystemExit(f"--combine: {err}") from None
    (out / "combined.json").write_text(json.dumps(result, indent=1) + "\n")
    plot(result["mean_curves"], out / "combined.png", runs, result["setup"]["random_rounds"])
    print(f"{len(runs)} runs: " + ", ".join(runs))
    _print_table(result["mean_curves"], result["share_by_budget"])
    for name, shares in result["labels_needed_share_per_run"].items():
        print(f"  {name}: " + ("-" if not shares else ", ".join(
            f"{s} {_pct(v)}" for s, v in shares.items())))
    _print_headline(result["headline"])
    print(f"\nwritten: {out / 'combined.json'}, {out / 'combined.png'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    import torch

    from autorater.data.files import write_text_atomic
    from autorater.data.generate import generate_suite
    from autorater.data.suite import Suite
    from autorater.data.video import video_info
    from autorater.models import PRESETS
    from autorater.training.recipe import TrainConfig
    from autorater.training.train import train

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
    parser.add_argument("--config", default="babyai-grid", choices=sorted(PRESETS),
                        help="the model preset (general: Meta-World pools, with --pool/--test)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-diversity", action="store_true",
                        help="pick by score alone (as `active select --no-diversity`), not spread over scenarios and "
                             "categories")
    parser.add_argument("--random-rounds", type=int, default=0,
                        help="the other strategies pick at random for their first K rounds (random's picks), then "
                             "by their own scores")
    parser.add_argument("--pool", help="an annotated pool suite to use instead of generating one")
    parser.add_argument("--test", help="a test suite with simulator truth to use instead of generating one")
    parser.add_argument("--cache", help="feature cache folder (default: OUT/cache)")
    parser.add_argument("--out", default="bench-out/active")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads")
    parser.add_argument("--combine", nargs="+", metavar="DIR",
                        help="pool finished (or interrupted) runs of one setup with different seeds: mean curves and "
                             "label shares, written to OUT/combined.json and combined.png; nothing is trained")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.combine:
        return _combine_main(args.combine, out)
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
    progress = out / "progress.json"
    settings = {k: v for k, v in vars(args).items() if k not in ("out", "threads", "combine")}
    done = _resume(progress, settings, start)
    curves: dict = {}

    def save(name: str, curve: list[dict]) -> None:
        curves[name] = curve
        write_text_atomic(progress, json.dumps({"settings": settings, "curves": curves}) + "\n")

    trained: dict = {}
    for s in args.strategies.split(","):
        save(s, run_strategy(s, pool, test, start, args.budget, args.rounds, tc, PRESETS[args.config], durations,
                             args.seed, diversity=not args.no_diversity, trained=trained, done=done.get(s),
                             on_round=lambda curve, s=s: save(s, curve), random_rounds=args.random_rounds))
    full_path = out / "full_pool.json"  # the model trained on every pool label: what the curves climb toward
    full = json.loads(full_path.read_text()) if full_path.is_file() else {}
    if full.get("settings") != settings:
        t = time.time()
        model = train([_subset(pool, set(candidates))], PRESETS[args.config], tc).model
        full = {"settings": settings, "labels": len(candidates), "balanced_accuracy": _score(model, test, tc.cache_dir),
                "train_s": round(time.time() - t)}
        write_text_atomic(full_path, json.dumps(full) + "\n")
    print(f"  full pool: {full['labels']} labelled continuations, test BA {full['balanced_accuracy']:.3f}", flush=True)
    curves = {name: [{k: v for k, v in p.items() if k != "labelled"} for p in curve] for name, curve in curves.items()}
    final = curves["random"][-1] if "random" in curves else None
    shares = shares_by_budget(curves)
    saving = at_final(shares)  # the criterion: random's final budget
    result = {"args": vars(args), "curves": curves, "random_final": final, "labels_needed_share": saving,
              "share_by_budget": shares, "full_pool_ba": full["balanced_accuracy"],
              "full_pool_labels": full["labels"], "wall_s": round(time.time() - began)}
    result["headline"] = headline({str(out): result})
    (out / "active.json").write_text(json.dumps(result, indent=1) + "\n")
    plot(curves, out / "active.png", random_rounds=args.random_rounds)
    _print_table(curves, shares)
    _print_headline(result["headline"])
    print(f"\nwritten: {out / 'active.json'}, {out / 'active.png'} ({result['wall_s']} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


# The benchmark built small, run by tests/test_benchmark_modules.py (a benchmark that drifts from the product fails
# there, not on the day someone runs it).


def tiny(tmp_path=None):
    """The grid recipe it retrains each round, built and run on two clips."""
    from autorater.models import PRESETS
    from benchmarks import rate_tiny

    return rate_tiny(PRESETS["tiny"].replace(vocab=["open", "the", "drawer"]))
