"""Two recipes, the same held-out videos: is the difference real? A paired comparison per held-out set.

    python -m benchmarks.paired A B [--root bench-out/quality-metaworld] [--out paired-A-vs-B.json]

``A`` and ``B`` are prediction folders (``<root>/predictions/<name>/<held-out set>.jsonl``, as the quality
benchmark and its variants write them). On every held-out set both scored, against the simulator truth, it
prints balanced accuracy of each, the difference B - A with a 95% bootstrap interval that resamples whole
scenarios (``autorater.calibration.compare.paired_comparison``: what the two share cancels), McNemar's
p on the videos only one got right, and beside it the AUROC of each (of its logit, else P(success)) and their
difference B - A with a 95% interval from the same kind of resampling (``paired_auroc``); writes the table as JSON.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from autorater.calibration import auroc, bootstrap_ci
from autorater.calibration.compare import paired_comparison
from autorater.data.suite import load_truth
from autorater.serving.labelling.folder import read_jsonl_rows


def _rows(path: Path) -> dict[str, dict]:
    return {r["continuation_id"]: r for r in read_jsonl_rows(path)}


def compare(root: Path, a: str, b: str, seed: int = 0) -> dict[str, dict]:
    """Per held-out set both folders hold: ``paired_comparison`` of B against A on the videos both rated."""
    out = {}
    for path_a in sorted((root / "predictions" / a).glob("*.jsonl")):
        path_b = root / "predictions" / b / path_a.name
        suite = root / "suites" / path_a.stem
        if not path_b.is_file() or not (suite / "suite.json").is_file():
            continue
        pa, pb = _rows(path_a), _rows(path_b)
        truth = [t for t in load_truth(suite) if t["continuation_id"] in pa and t["continuation_id"] in pb]
        if not truth:
            continue
        y = np.array([t["outcome"] == "success" for t in truth], dtype=int)
        pred = {name: np.array([p[t["continuation_id"]]["outcome"] == "success" for t in truth], dtype=int)
                for name, p in (("a", pa), ("b", pb))}
        groups = np.array([t["scenario_id"] for t in truth])
        score = {name: np.array([_score(p[t["continuation_id"]]) for t in truth]) for name, p in (("a", pa), ("b", pb))}
        out[path_a.stem] = {**paired_comparison(y, pred["a"], pred["b"], groups=groups, seed=seed),
                            **paired_auroc(y, score["a"], score["b"], groups, seed=seed)}
    return out


def _score(row: dict) -> float:
    """What AUROC ranks a prediction by: its logit (no ties where P(success) rounds to 0 or 1), else P(success)."""
    return float(row.get("logit", row.get("p_success", float("nan"))))


def paired_auroc(y, score_a, score_b, groups, n_boot: int = 1000, seed: int = 0) -> dict:
    """AUROC of A and of B on the same videos and B - A with a 95% percentile interval that resamples whole
    scenarios (``groups``; ``autorater.calibration.bootstrap_ci``): ``auroc_a``, ``auroc_b``, ``auroc_difference``,
    ``auroc_ci`` (None where every resample lacks a class or a score)."""
    def diff(y, a, b):
        return auroc(y, b) - auroc(y, a)

    estimate, lo, hi = bootstrap_ci(diff, y, score_a, score_b, groups=groups, n_boot=n_boot, seed=seed)
    return {"auroc_a": auroc(y, score_a), "auroc_b": auroc(y, score_b), "auroc_difference": estimate,
            "auroc_ci": None if np.isnan(lo) else [lo, hi]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", help="the prediction folder of the reference recipe (a name under <root>/predictions)")
    parser.add_argument("b", help="the prediction folder of the challenger")
    parser.add_argument("--root", default="bench-out/quality-metaworld", help="the quality benchmark's output folder")
    parser.add_argument("--out", help="JSON file (default <root>/results/paired-A-vs-B.json)")
    args = parser.parse_args(argv)
    root = Path(args.root)
    for name in (args.a, args.b):
        if not (root / "predictions" / name).is_dir():
            raise SystemExit(f"{root / 'predictions' / name} is not a prediction folder (fix: pick one of "
                             f"{sorted(p.name for p in (root / 'predictions').glob('*'))})")
    table = compare(root, args.a, args.b)
    if not table:
        raise SystemExit(f"{args.a} and {args.b} share no held-out set with a simulator truth under {root}")
    print(f"{'held-out set':<20} {'n':>5} {'BA: ' + args.a[:10]:>14} {args.b[:14]:>14} {'B - A':>7} "
          f"{'95% interval':>16} {'McNemar p':>9} {'AUROC: A':>9} {'B':>6} {'B - A':>7} {'95% interval':>16}")
    for name, r in table.items():
        ci = "n/a" if r["ci"] is None else f"{r['ci'][0]:+.3f} .. {r['ci'][1]:+.3f}"
        auc_ci = "n/a" if r["auroc_ci"] is None else f"{r['auroc_ci'][0]:+.3f} .. {r['auroc_ci'][1]:+.3f}"
        print(f"{name:<20} {r['n']:>5} {r['ba_a']:>14.3f} {r['ba_b']:>14.3f} {r['difference']:>+7.3f} {ci:>16} "
              f"{r['mcnemar_p']:>9.3f} {r['auroc_a']:>9.3f} {r['auroc_b']:>6.3f} {r['auroc_difference']:>+7.3f} "
              f"{auc_ci:>16}")
    out = Path(args.out or root / "results" / f"paired-{args.a}-vs-{args.b}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"a": args.a, "b": args.b, "held_out": table}, indent=1, default=float) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


tiny = None  # it trains or builds nothing of its own (its command line is checked: tests/test_benchmark_modules.py)
