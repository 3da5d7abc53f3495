"""The main job, measured: labelling throughput, human work saved, and the leaderboard against the truth.

    python -m benchmarks.labelling [--model demo-out/model] [--scenarios 40] [--per-scenario 10]
                                   [--repeats 50] [--audit-share 0.2] [--out bench-out/labelling]

1. Throughput: ``autorater label`` end to end (decode + model + routing + Label Studio files, 2
   decoding threads) in continuations/s, beside decoding alone on the same videos at the model's
   input size.
2. Human work saved: the share auto-labelled by the calibrated model (``--model``, a folder with
   ``calibration.json``; ``make demo`` writes one to ``demo-out/model``) on a fresh in-distribution
   suite version, and the agreement of the auto-labelled part with the simulator truth.
3. The leaderboard against the truth over ``--repeats`` repeated audit draws (a new audit slice and new
   simulated annotators each time, the model's predictions fixed): Spearman and MMRV of the per-agent
   rates (and of the item-response abilities) with the true rates, and the empirical coverage of the 95%
   intervals, for the leaderboard's rate (references pooled across agents when they allow it), for each
   agent corrected by its own references, for the plain share of successes among the final labels (no
   correction) and with the human labels taken as the truth.

Prints a table and writes ``labelling.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import time
from pathlib import Path

import numpy as np


def bench_throughput(model_dir: Path, suite, out: Path, workers: int) -> dict:
    from autorater.rater import Rater
    from autorater.serving.labelling.label import label_suite

    if out.exists():
        shutil.rmtree(out)
    start = time.perf_counter()
    # the reference policy's routing, unchecked: this benchmark measures throughput and the leaderboard's rates;
    # certification on the version's own audit is benchmarks.certify's
    summary = label_suite(model_dir, suite, out, workers=workers, progress=True, certify="references")
    label_wall = time.perf_counter() - start
    rater = Rater.load(model_dir)
    start = time.perf_counter()
    ids = suite.continuation_ids()
    for k in range(0, len(ids), 16):
        rater.decode(suite, ids[k:k + 16])  # as the model reads them (size, fit, frames from the takeover)
    decode_wall = time.perf_counter() - start
    n = len(suite.continuations)
    return {"continuations": n, "workers": workers, "label_wall_s": round(label_wall, 1),
            "label_per_s": round(n / label_wall, 2), "decode_only_per_s": round(n / decode_wall, 1),
            "summary": summary}


def bench_routing(labels_dir: Path, suite) -> dict:
    from autorater.data.suite import load_truth
    from autorater.serving.labelling.folder import LabelsFolder

    truth = {t["continuation_id"]: t["outcome"] for t in load_truth(suite.root)}
    rows = LabelsFolder(labels_dir).read_labels()
    auto = [r for r in rows if r["decision"] == "auto"]
    agree = [r["model_outcome"] == truth[r["continuation_id"]] for r in auto]
    return {"coverage": len(auto) / len(rows), "auto": len(auto),
            "auto_agreement_with_truth": float(np.mean(agree)) if agree else None}


def bench_leaderboard(labels_dir: Path, suite, repeats: int, audit_share: float, annotators: int = 3) -> dict:
    """Repeated audit draws and annotator answers over the same model predictions, with and without the gold
    references correcting the labels."""
    from autorater.data.suite import load_truth
    from autorater.serving.labelling.folder import LabelsFolder

    truths = {t["continuation_id"]: t for t in load_truth(suite.root)}
    agent_of = {c.continuation_id: c.agent_id for c in suite.continuations}
    scenario_of = {c.continuation_id: c.scenario_id for c in suite.continuations}
    true_rate = {a: float(np.mean([truths[c]["outcome"] == "success" for c in agent_of if agent_of[c] == a]))
                 for a in sorted(set(agent_of.values()))}
    base = LabelsFolder(labels_dir).read_labels()
    gold = {r.continuation_id: r.outcome for r in suite.references}
    out = {}
    for name, use_gold in (("vs_references", True), ("vs_humans", False)):
        out[name] = _repeat(base, truths, agent_of, scenario_of, true_rate, gold if use_gold else None, repeats,
                            audit_share, annotators)
    return {"repeats": repeats, "audit_share": audit_share, "true_rates": true_rate, "references": len(gold), **out}


def _repeat(base, truths, agent_of, scenario_of, true_rate, gold, repeats, audit_share, annotators) -> dict:
    from autorater.calibration.agents.rates import group_estimates
    from autorater.calibration.metrics import rank_metrics
    from autorater.data.annotators import simulate_annotations
    from autorater.data.labels import label_table, majority_vote
    from autorater.serving.analysis.leaderboard import ability_and_difficulty
    from autorater.serving.labelling.label import audit_draw

    keys = ("rate", "labelled", "per_group")
    spearman, mmrv, covered, width = ({k: [] for k in keys} for _ in range(4))
    pooled, ability_spearman, every_interval = [], [], []
    for seed in range(repeats):
        rows = [dict(r, audit=r["decision"] == "auto" and audit_draw(r["continuation_id"], 1000 + seed) < audit_share,
                     agent_id=agent_of[r["continuation_id"]], scenario_id=scenario_of[r["continuation_id"]])
                for r in base]
        asked = [truths[r["continuation_id"]] for r in rows if r["decision"] == "human" or r["audit"]]
        human = majority_vote(label_table(simulate_annotations(asked, n_per_item=annotators, seed=1000 + seed)))
        for r in rows:
            r["human_outcome"] = human.loc[r["continuation_id"], "outcome"] if r["continuation_id"] in human.index \
                else None
            r["outcome"] = r["human_outcome"] or (r["model_outcome"] if r["decision"] == "auto" else None)
        est, pooling = group_estimates(rows, gold, "agent_id", seed=seed)
        abilities, difficulties, _ = ability_and_difficulty(rows, gold)  # the leaderboard's item-response fit
        ability_spearman.append(rank_metrics({a: e["ability"] for a, e in abilities.items()}, true_rate)["spearman"])
        labelled = {r["scenario_id"] for r in rows if r["outcome"] is not None}
        every_interval.append(set(abilities) == set(true_rate) and set(difficulties) == labelled and all(
            e["ability_ci"][0] <= e["ability"] <= e["ability_ci"][1] for e in abilities.values()) and all(
            e["difficulty_ci"][0] <= e["difficulty"] <= e["difficulty_ci"][1] for e in difficulties.values()))
        pooled.append(pooling["pooled"])
        views = {"rate": est, "labelled": {a: {"rate": e["labelled_rate"]} for a, e in est.items()}}
        if gold:  # each agent corrected by its own references (the pooled correction's alternative)
            views["per_group"] = {a: e.get("per_group") or e for a, e in est.items()}
        for key, rates in views.items():
            m = rank_metrics({a: e["rate"] for a, e in rates.items()}, true_rate)
            spearman[key].append(m["spearman"])
            mmrv[key].append(m["mmrv"])
            if key != "labelled":
                covered[key] += [e["ci"][0] <= true_rate[a] <= e["ci"][1] for a, e in rates.items()]
                width[key] += [e["ci"][1] - e["ci"][0] for e in rates.values()]
    out = {"pooled_share": float(np.mean(pooled)),
           "ability": {"spearman_mean": float(np.mean(ability_spearman)),
                       "spearman_min": float(np.min(ability_spearman)),
                       "every_agent_and_scenario_with_an_interval": float(np.mean(every_interval))}}
    for key in keys:
        if spearman[key]:
            out[key] = {"spearman_mean": float(np.mean(spearman[key])), "spearman_min": float(np.min(spearman[key])),
                        "mmrv_mean": float(np.mean(mmrv[key]))}
        if covered[key]:
            out[key].update(coverage_95=float(np.mean(covered[key])), mean_interval_width=float(np.mean(width[key])))
    return out


def main(argv: list[str] | None = None) -> int:
    from autorater.data.generate import generate_suite
    from autorater.data.suite import Suite
    from autorater.rater import Rater

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="demo-out/model", help="a calibrated model folder (make demo writes one)")
    parser.add_argument("--suite", help="an in-distribution suite version with simulator truth (default: generate)")
    parser.add_argument("--scenarios", type=int, default=40)
    parser.add_argument("--per-scenario", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--audit-share", type=float, default=0.2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default="bench-out/labelling")
    args = parser.parse_args(argv)
    model_dir, out = Path(args.model), Path(args.out)
    if not Rater.load(model_dir).calibration:
        raise SystemExit(f"{model_dir} is not a calibrated model folder: run `make demo` (it writes demo-out/model) "
                         f"or pass --model")
    out.mkdir(parents=True, exist_ok=True)
    suite_dir = Path(args.suite) if args.suite else out / "suite"
    if not (suite_dir / "suite.json").exists():
        generate_suite(suite_dir, scenarios=args.scenarios, continuations_per_scenario=args.per_scenario, seed=21,
                       version="bench", progress=True)
    suite = Suite.load(suite_dir)
    import torch

    torch.set_num_threads(2)
    through = bench_throughput(model_dir, suite, out / "labels", args.workers)
    routing = bench_routing(out / "labels", suite)
    board = bench_leaderboard(out / "labels", suite, args.repeats, args.audit_share)
    g, h = board["vs_references"], board["vs_humans"]
    result = {"machine": {"cpu_count": os.cpu_count(), "platform": platform.platform()}, "model": str(model_dir),
              "throughput": {k: v for k, v in through.items() if k != "summary"}, "routing": routing,
              "leaderboard": board}
    (out / "labelling.json").write_text(json.dumps(result, indent=1) + "\n")
    agree = routing["auto_agreement_with_truth"]
    rows = [(f"label end to end ({through['workers']} decoding threads)", f"{through['label_per_s']} cont./s"),
            ("decode only, same videos, model input size", f"{through['decode_only_per_s']} cont./s"),
            (f"auto-labelled (human work saved), {through['continuations']} continuations",
             f"{routing['coverage']:.1%}"),
            ("auto-labelled part agreeing with the truth", "-" if agree is None else f"{agree:.3f}")]
    print(f"\n{'what':<58}{'value':>22}")
    for what, value in rows:
        print(f"{what:<58}{value:>22}")
    print(f"\nleaderboard against the truth over {args.repeats} audit draws ({board['references']} gold references; "
          f"pooled in {g['pooled_share']:.0%} of the draws)")
    print(f"{'estimate':<46}{'Spearman mean / min':>20}{'MMRV':>7}{'coverage':>10}{'width':>7}")
    for name, res, key in (("the leaderboard's rate", g, "rate"),
                           ("  each agent by its own references", g, "per_group"),
                           ("  plain share of the final labels", g, "labelled"),
                           ("  humans taken as the truth", h, "rate")):
        r = res[key]
        cover = f"{r['coverage_95']:.1%}" if "coverage_95" in r else "-"
        wide = f"{r['mean_interval_width']:.3f}" if "mean_interval_width" in r else "-"
        print(f"{name:<46}{r['spearman_mean']:>11.3f} / {r['spearman_min']:.3f}{r['mmrv_mean']:>7.3f}{cover:>10}"
              f"{wide:>7}")
    a = g["ability"]
    print(f"{'the ability (1PL item response, by source error)':<46}{a['spearman_mean']:>11.3f} / "
          f"{a['spearman_min']:.3f}     -  every agent and scenario with an interval in "
          f"{a['every_agent_and_scenario_with_an_interval']:.0%} of the draws")
    print(f"\nwritten: {out / 'labelling.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


tiny = None  # it trains or builds nothing of its own (its command line is checked: tests/test_benchmark_modules.py)
