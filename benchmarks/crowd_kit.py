"""Our Dawid-Skene (``autorater.data.labels``) beside crowd-kit's, on the same simulated labels: how far the posteriors
lie apart and how many outcomes flip (docs/results/2026-11-28-parts-one-loop.md: measured, not adopted).

    pip install "torch==2.13.0" "crowd-kit==1.4.2"      # for this benchmark only, not a dependency of the product
    python -m benchmarks.crowd_kit [--continuations 600] [--labels 3] [--worlds babyai,toy] [--seed 0]
                                   [--out bench-out/crowd_kit.json]

Per world: the simulator's truth of ``--continuations`` continuations (``simulate_truths``: no video), ``--labels``
labels each from the simulated annotators (``autorater.data.annotators``), aggregated by both; the max and mean
|difference| of P(success), the share of outcomes that flip at 0.5, and each aggregate's accuracy against the truth.
Ours adds one Beta pseudo-count to every confusion cell (``prior``), crowd-kit's none: perfect annotators get certain
posteriors there. The posteriors are the training targets, so adopting it would move every trained model.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def simulated_labels(world: str, continuations: int, labels: int, seed: int):
    """(the long label table, the true outcome of each continuation: 1 success) of one world."""
    from autorater.data.annotators import simulate_annotations
    from autorater.data.generate import simulate_truths
    from autorater.data.labels import label_table

    truths = simulate_truths(world=world, scenarios=max(1, continuations // 2), continuations_per_scenario=2,
                             seed=seed)
    table = label_table(simulate_annotations(truths, n_per_item=labels, seed=seed))
    return table, {t["continuation_id"]: int(t["outcome"] == "success") for t in truths}


def crowd_kit_posteriors(table) -> dict[str, float] | None:
    """crowd-kit's Dawid-Skene P(success) per continuation; None when crowd-kit is not installed."""
    try:
        from crowdkit.aggregation import DawidSkene
    except ImportError:
        return None
    frame = table.rename(columns={"continuation_id": "task", "annotator_id": "worker", "outcome": "label"})
    probas = DawidSkene(n_iter=100).fit(frame[["task", "worker", "label"]]).probas_
    success = probas["success"] if "success" in probas else probas.iloc[:, 0] * 0.0  # no success label at all
    return {task: float(p) for task, p in success.items()}


def compare(table, truth: dict[str, int]) -> dict:
    """Ours against crowd-kit's on one label table (``crowd_kit`` None when it is not installed)."""
    from autorater.data.labels import dawid_skene

    ours = dawid_skene(table)["p_success"].to_dict()
    theirs = crowd_kit_posteriors(table)
    ids = sorted(ours)
    row = {"continuations": len(ids), "ours_accuracy": _accuracy(ours, truth, ids)}
    if theirs is None:
        return {**row, "crowd_kit": None}
    diff = np.abs(np.array([ours[i] - theirs[i] for i in ids]))
    flips = [i for i in ids if (ours[i] >= 0.5) != (theirs[i] >= 0.5)]
    return {**row, "crowd_kit": "1.4.2", "crowd_kit_accuracy": _accuracy(theirs, truth, ids),
            "max_abs_difference": round(float(diff.max()), 4), "mean_abs_difference": round(float(diff.mean()), 4),
            "flipped_share": round(len(flips) / len(ids), 4)}


def _accuracy(posteriors: dict[str, float], truth: dict[str, int], ids: list[str]) -> float:
    return round(float(np.mean([(posteriors[i] >= 0.5) == bool(truth[i]) for i in ids])), 4)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--continuations", type=int, default=600)
    parser.add_argument("--labels", type=int, default=3, help="labels a continuation")
    parser.add_argument("--worlds", default="babyai,toy")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="bench-out/crowd_kit.json")
    args = parser.parse_args(argv)
    rows = {}
    for world in [w.strip() for w in args.worlds.split(",") if w.strip()]:
        rows[world] = compare(*simulated_labels(world, args.continuations, args.labels, args.seed))
        print(world, json.dumps(rows[world]), flush=True)
    if any(row["crowd_kit"] is None for row in rows.values()):
        print('crowd-kit is not installed: pip install "torch==2.13.0" "crowd-kit==1.4.2" (ours alone above)')
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"settings": vars(args), "worlds": rows}, indent=1) + "\n")
    return 0


# The benchmark built small, run by tests/test_benchmark_modules.py (a benchmark that drifts from the product fails
# there, not on the day someone runs it).


def tiny(tmp_path=None):
    """Forty continuations of the toy world, compared (ours alone where crowd-kit is not installed)."""
    row = compare(*simulated_labels("toy", 40, 3, seed=0))
    assert row["continuations"] == 40 and 0.5 <= row["ours_accuracy"] <= 1.0
    return row


if __name__ == "__main__":
    raise SystemExit(main())
