"""Where a version is new, what does it cost a team, with and without version challengers? The real rounds, measured.

    python -m benchmarks.new_version --model M --references R --version new-tasks=SUITE --version alike=SUITE \
        [--replay TRAIN_SUITE ...] [--targets 0.85,0.9] [--seeds 20] [--adapt 0,2] [--adapt-after 10] \
        [--strata none] [--device cpu] [--cache-dir runs/cache] [--out bench-out/new-version]

For each target the model (a copy) is calibrated on ``--references`` as a user would (``autorater calibrate``). Each
``--version`` (a suite with simulator truth) arrives unlabelled: the benchmark labels a copy of it without its
annotations (its references keep the annotator pool's labels, as a version's served references would). Then, for
every ``--adapt`` arm (0: no challenger, as before issue 62; N: up to N version challengers a stratum) and every seed of
the audit order, the product's own rounds run: ``label`` (rated once per version and target, each further order
re-decided from the same part files with its own seed), then round after round the simulated annotators answer the
queue (a Label Studio export), ``ingest`` (not into the suite), ``certify`` (which trains a challenger where a
stratum's learning labels are in), until every stratum is certified or routed; the continuations then left to humans
count as human labels. The orders run one at a time across versions and arms, and the results are written after each (a
cut run is balanced). Each order is an independent team: the version's labelling-job ledger is reset between them.

Per version, arm and target: **human labels per continuation** (every continuation not auto-labelled costs one),
coverage (auto-labelled share), the true agreement of what was certified (pooled and worst order), the share of orders
whose delivered auto-labels reached the target, the challengers certified, the rounds, and each adaptation's CPU
seconds (training and rating). A plot draws human labels spent against continuations labelled, round by round.
Prints a table and writes ``new-version.json`` and ``new-version.png``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import numpy as np


def unlabelled_copy(src: Path, dest: Path) -> Path:
    """The version as it arrives: its videos (hard links), scenarios and continuations, its references and their
    labels, no other annotation."""
    from autorater.data.suite import Suite

    if (dest / "suite.json").is_file():
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    suite = Suite.load(src)
    (dest / "videos").mkdir(parents=True)
    for c in suite.continuations:
        target = dest / c.video
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            target.hardlink_to(suite.video_path(c.continuation_id))
        except OSError:
            shutil.copy2(suite.video_path(c.continuation_id), target)
    refs = {r.continuation_id for r in suite.references}
    Suite(dest, suite.info, suite.scenarios, suite.continuations,
          [a for a in suite.annotations if a.continuation_id in refs], suite.references).write(dest)
    from autorater.data.suite import TRUTH_FILE

    if (src / TRUTH_FILE).is_file():  # the simulator's truth travels with it (the simulated annotators read it)
        shutil.copy2(src / TRUTH_FILE, dest / TRUTH_FILE)
    return dest


def one_order(model: Path, suite, folder: Path, seed: int, base: Path | None, options: dict, truth: dict,
              target: float, device: str = "cpu", max_rounds: int = 16) -> dict:
    """One audit order of one arm: the real rounds until final; what it cost and what it certified."""
    from autorater.serving.labelling.certify import certify
    from autorater.serving.labelling.ingest import ingest
    from autorater.serving.labelling.simulate import simulate_queue_export
    from benchmarks.certify import label_order

    summary = label_order(model, suite, folder, seed, base, options)
    cert, rounds, curve = summary["certification"], 0, [_progress(folder)]
    while rounds < max_rounds and cert.get("state") not in ("final", "none", "carried"):
        rounds += 1
        export = folder.parent / f"export-{folder.name}-{rounds}.json"
        if simulate_queue_export(folder, export, annotators=3, seed=1000 * rounds + seed) == 0:
            break
        ingest(folder, export, append_to_suite=False)
        export.unlink()
        cert = certify(folder, device=device)
        curve.append(_progress(folder))
    rows = [json.loads(line) for line in (folder / "labels.jsonl").read_text().splitlines() if line.strip()]
    auto = [r for r in rows if r["decision"] == "auto" and r.get("label_source") != "human"]
    right = [r["model_outcome"] == truth[r["continuation_id"]] for r in auto]
    agreement = float(np.mean(right)) if right else None
    challengers = cert.get("challengers") or []
    if curve[-1] != (len(rows) - len(auto), len(rows)):  # the continuations left in the queue: labelled by hand
        curve.append((len(rows) - len(auto), len(rows)))
    return {"seed": seed, "continuations": len(rows), "auto": len(auto), "coverage": len(auto) / len(rows),
            "humans_per_continuation": 1 - len(auto) / len(rows), "agreement": agreement,
            "held": agreement is None or agreement >= target, "rounds": rounds,
            "challengers": len(challengers), "by_challenger": sum(r["model"].startswith("challenger-") for r in auto),
            "adapt_cpu_s": [round(c.get("train_s", 0) + c.get("rate_s", 0), 1) for c in challengers],
            "strata": {k: s.get("state") for k, s in (cert.get("strata") or {}).items()}, "curve": curve}


def _progress(folder: Path) -> tuple[int, int]:
    """(human labels taken so far, continuations labelled so far: by humans or certified)."""
    rows = [json.loads(line) for line in (folder / "labels.jsonl").read_text().splitlines() if line.strip()]
    humans = sum(r.get("label_source") == "human" for r in rows)
    return humans, humans + sum(r["decision"] == "auto" and r.get("label_source") != "human" for r in rows)


def summarise(name: str, arm: int, target: float, draws: list[dict], wall_s: float) -> dict:
    agreements = [d["agreement"] for d in draws if d["agreement"] is not None]
    auto = sum(d["auto"] for d in draws)
    pooled = sum(d["agreement"] * d["auto"] for d in draws if d["agreement"] is not None) / auto if auto else None
    cpu = [s for d in draws for s in d["adapt_cpu_s"]]
    return {"version": name, "adapt": arm, "target": target, "continuations": draws[0]["continuations"],
            "draws": len(draws), "humans_per_continuation": float(np.mean([d["humans_per_continuation"]
                                                                            for d in draws])),
            "humans_range": [min(d["humans_per_continuation"] for d in draws),
                             max(d["humans_per_continuation"] for d in draws)],
            "coverage": float(np.mean([d["coverage"] for d in draws])), "agreement_pooled": pooled,
            "agreement_min": min(agreements) if agreements else None,
            "held_share": float(np.mean([d["held"] for d in draws])),
            "challenger_certified_share": float(np.mean([d["by_challenger"] > 0 for d in draws])),
            "rounds_mean": float(np.mean([d["rounds"] for d in draws])),
            "adapt_cpu_s_mean": float(np.mean(cpu)) if cpu else None, "adaptations": len(cpu),
            "wall_s": round(wall_s, 1), "per_draw": draws}


HEADER = (f"{'version':<16}{'adapt':>6}{'target':>7}{'n':>6}{'h/cont':>8}{'range':>13}{'coverage':>9}{'agree':>7}"
          f"{'min':>7}{'held':>6}{'by chal':>8}{'rounds':>7}{'cpu s/adapt':>12}")


def format_row(s: dict) -> str:
    def f(v, spec=".3f"):
        return "-" if v is None else format(v, spec)

    low, high = s["humans_range"]
    return (f"{s['version']:<16}{s['adapt']:>6}{s['target']:>7.2f}{s['continuations']:>6}"
            f"{s['humans_per_continuation']:>8.3f}{f'{low:.2f}-{high:.2f}':>13}"
            f"{s['coverage']:>9.3f}{f(s['agreement_pooled']):>7}{f(s['agreement_min']):>7}{s['held_share']:>6.2f}"
            f"{s['challenger_certified_share']:>8.2f}{s['rounds_mean']:>7.1f}{f(s['adapt_cpu_s_mean'], '.0f'):>12}")


def plot(results: dict, path: Path) -> None:
    """Human labels spent against continuations labelled, round by round, the queue's rest by hand at the end (each
    version's first order), an arm a line style."""
    from autorater.calibration import new_figure

    fig = new_figure(7.5, 4.5)
    ax = fig.add_subplot()
    colours = {}
    for s in results["versions"].values():
        curve = np.array(s["per_draw"][0]["curve"], dtype=float)
        colour = colours.setdefault(s["version"], f"C{len(colours)}")
        ax.plot(curve[:, 1], curve[:, 0], color=colour, linestyle="-" if s["adapt"] else ":", marker=".",
                label=f"{s['version']} {'with' if s['adapt'] else 'without'} challengers @ {s['target']:.2f}")
    top = max(s["continuations"] for s in results["versions"].values())
    ax.plot([0, top], [0, top], color="0.7", linewidth=0.8, label="every continuation by hand")
    ax.set_xlabel("continuations labelled (by humans or certified)")
    ax.set_ylabel("human labels spent")
    ax.legend(fontsize=7)
    fig.savefig(path, dpi=120, bbox_inches="tight")


def run(model: Path, references: Path | None, versions: dict[str, Path], targets: list[float], seeds: int,
        arms: list[int], options: dict, out: Path, device: str = "cpu") -> dict:
    """Every version, arm, target and order (the module docstring); ``references`` None: the model's own
    ``calibration.json`` as it is, at its own target (``targets`` unused)."""
    from autorater.data.suite import Suite, load_truth
    from autorater.rater import read_record
    from benchmarks.certify import calibrated_copy

    out.mkdir(parents=True, exist_ok=True)
    refs = Suite.load(references) if references is not None else None
    if refs is None:
        targets = [read_record(model).target_agreement]
    results = {"model": str(model), "references": str(references), "seeds": seeds, "options": options,
               "device": device, "versions": {}}
    print(HEADER, flush=True)
    for target in targets:
        calibrated = calibrated_copy(model, refs, out, target) if refs is not None else model
        suites = {name: Suite.load(unlabelled_copy(path, out / "versions" / name)) for name, path in versions.items()}
        truths = {name: {t["continuation_id"]: t["outcome"] for t in load_truth(path)}
                  for name, path in versions.items()}
        draws, wall, base = {}, {}, {}
        for seed in range(seeds):  # order by order across versions and arms: a cut run is balanced, written as it goes
            for name in versions:
                for arm in arms:
                    key = f"{name}@{target:.2f}/adapt-{arm}"
                    folder = out / f"{target:.2f}" / name / f"adapt-{arm}" / f"order-{seed:03d}"
                    clock = time.time()
                    draws.setdefault(key, []).append(one_order(calibrated, suites[name], folder, seed, base.get(name),
                                                               {**options, "adapt": arm}, truths[name], target, device))
                    wall[key] = wall.get(key, 0.0) + time.time() - clock
                    base.setdefault(name, folder)
                    d = draws[key][-1]
                    print(f"{key} order {seed}: {d['humans_per_continuation']:.3f} human labels a continuation, "
                          f"agreement {d['agreement']}, {d['challengers']} challengers, {d['rounds']} rounds",
                          flush=True)
                    results["versions"][key] = summarise(name, arm, target, draws[key], wall[key])
                    (out / "new-version.json").write_text(json.dumps(results, indent=1) + "\n")
                    if seed == seeds - 1:
                        print(format_row(results["versions"][key]), flush=True)
    plot(results, out / "new-version.png")
    return results


def probe(model: Path, version: Path, replay: list[str], per_category: list[int], seeds: int, cache_dir: str,
          device: str = "cpu", epochs: int | None = None) -> list[dict]:
    """How well a version challenger learns from k human labels per category (the product's fine-tuning, the
    training suites replayed), scored on the version's other continuations against the simulator truth: AUROC, BA
    at its per-stratum threshold (fitted on the held-out design share, as the product does), the share it could
    auto-label at 0.95 agreement (by its confidence), and the CPU seconds. Each k and seed draws its own labels."""
    from autorater.calibration import auroc, outcome_metrics
    from autorater.data.suite import Suite, load_truth
    from autorater.rater import Rater
    from autorater.serving.labelling.adapt import (
        REPLAY_PER_LABEL,
        fine_tune,
        finetune_recipe,
        platt,
        replay_suites,
        version_suite,
    )
    from autorater.serving.labelling.rounds import design_split, learning_batch
    from autorater.training.baselines import predict_cached

    suite, parent = Suite.load(version), Rater.load(model)
    truth = {t["continuation_id"]: t["outcome"] for t in load_truth(version)}
    category = {c.continuation_id: suite.scenario_by_id[c.scenario_id].category for c in suite.continuations}
    scenario = {c.continuation_id: c.scenario_id for c in suite.continuations}
    rows, ids = [], suite.continuation_ids()
    for k in per_category:
        for seed in range(seeds):
            asked = learning_batch(ids, category, set(), k, seed)
            learned, design = design_split(asked, scenario, seed)
            labels = {c: [{"continuation_id": c, "annotator_id": "truth", "outcome": truth[c]}] for c in asked}
            started = time.time()
            tc = finetune_recipe(parent.config, epochs=epochs, cache_dir=cache_dir, seed=seed, device=device)
            training = [version_suite(suite, labels, learned)] + replay_suites(replay, REPLAY_PER_LABEL * len(learned),
                                                                               seed)
            out = Path(cache_dir).parent / "probe-models" / f"k{k}-s{seed}"
            fine_tune(parent, training, out, tc)
            rest = [c for c in ids if c not in set(asked)]
            scored = {}
            sub = Suite(suite.root, suite.info, suite.scenarios, [suite.get(c) for c in [*rest, *design]], [], [])
            for name, rater in (("parent", parent), ("challenger", Rater.load(out))):
                got = {r["continuation_id"]: r["logit"] for r in predict_cached(rater.model, sub, cache_dir)
                       if "error" not in r}
                t, b = platt(np.array([got[c] for c in design]), np.array([truth[c] == "success" for c in design]))
                scored[name] = {c: 1 / (1 + np.exp(-(got[c] / t + b))) for c in rest if c in got}
            wall = time.time() - started
            for name, p in scored.items():
                y = np.array([truth[c] == "success" for c in p])
                q = np.array(list(p.values()))
                rows.append({"k": k, "seed": seed, "model": name, "labels": len(asked), "auroc": auroc(y, q),
                             "ba": outcome_metrics(y.astype(int), (q >= 0.5).astype(int))["balanced_accuracy"],
                             "coverage_at_095": _coverage_at(y, q, 0.95), "wall_s": round(wall, 1)})
                print(f"probe k={k} seed={seed} {name:<10} labels {len(asked):>4} AUROC {rows[-1]['auroc']:.3f} "
                      f"BA {rows[-1]['ba']:.3f} coverage@0.95 {rows[-1]['coverage_at_095']:.2f} ({wall:.0f} s)",
                      flush=True)
    return rows


def _coverage_at(y: np.ndarray, p: np.ndarray, agreement: float) -> float:
    """The largest share of the most confident predictions whose agreement with ``y`` is at least ``agreement``."""
    order = np.argsort(-np.maximum(p, 1 - p))
    right = np.cumsum((p[order] >= 0.5) == y[order]) / np.arange(1, len(order) + 1)
    ok = np.flatnonzero(right >= agreement)
    return float((ok.max() + 1) / len(order)) if ok.size else 0.0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="a trained model folder (copied and calibrated per target)")
    p.add_argument("--references", required=True, help="the suite whose gold references calibrate the model")
    p.add_argument("--version", action="append", required=True, metavar="NAME=SUITE",
                   help="a suite version with simulator truth (repeatable); labelled as it would arrive, unlabelled")
    p.add_argument("--replay", action="append", default=None, metavar="SUITE",
                   help="a training suite the challengers replay (default: the model's own, from its metadata)")
    p.add_argument("--targets", default="0.85,0.9")
    p.add_argument("--seeds", type=int, default=20, help="audit orders per version, arm and target")
    p.add_argument("--adapt", default="0,2", help="the arms: challengers allowed per stratum (0: none)")
    p.add_argument("--adapt-after", type=int, default=10, help="human labels per category before a challenger")
    p.add_argument("--adapt-epochs", type=int, default=None, help="a challenger's epochs (default: the recipe's)")
    p.add_argument("--strata", default="none", help="as `autorater label --strata` (none: one stratum a version)")
    p.add_argument("--claim", default="family", choices=["family", "fcr"])
    p.add_argument("--cache-dir", default="runs/cache", help="the feature cache challengers train and rate from")
    p.add_argument("--device", default="cpu", help="where challengers train: cpu, or cuda (the GPU arm)")
    p.add_argument("--out", default="bench-out/new-version")
    p.add_argument("--probe", default="", metavar="K1,K2",
                   help="instead of the rounds: how well a challenger learns from K labels per category (each "
                        "--version, --seeds draws), scored on the rest")
    args = p.parse_args(argv)
    if args.probe:
        out = {name: probe(Path(args.model), Path(path), args.replay or [], [int(k) for k in args.probe.split(",")],
                           args.seeds, args.cache_dir, args.device, args.adapt_epochs)
               for name, path in (v.split("=", 1) for v in args.version)}
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "probe.json").write_text(json.dumps(out, indent=1) + "\n")
        return 0
    versions = dict(v.split("=", 1) for v in args.version)
    options = {"strata": args.strata, "claim": args.claim, "adapt_after": args.adapt_after,
               "adapt_epochs": args.adapt_epochs, "replay": args.replay, "cache_dir": args.cache_dir}
    results = run(Path(args.model), Path(args.references), {k: Path(v) for k, v in versions.items()},
                  [float(t) for t in args.targets.split(",")], args.seeds, [int(a) for a in args.adapt.split(",")],
                  options, Path(args.out), args.device)
    print(HEADER)
    for s in results["versions"].values():
        print(format_row(s))
    print(f"written: {Path(args.out) / 'new-version.json'}, {Path(args.out) / 'new-version.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


tiny = None  # it trains or builds nothing of its own (its command line is checked: tests/test_benchmark_modules.py)
