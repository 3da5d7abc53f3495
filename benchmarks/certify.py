"""Does the promise hold on the version it is made for? Certification on each version's own audit, measured.

    python -m benchmarks.certify --model demo-out/model --references demo-out/suite-references \
        --version alike=demo-out/suite-v2 --version new-levels=bench-out/certify/suite-new-levels \
        [--targets 0.9,0.95] [--seeds 20] [--audit-share 0.2] [--out bench-out/certify]

For each target agreement the model (a copy) is calibrated on ``--references`` as a user would
(``autorater calibrate``); then, for every ``--version`` (a suite with simulator truth) and every seed of the audit
draw, the real procedure runs: ``label`` (rated once per version and target; each further seed re-decides from the
same part files, as ``--resume`` does), the simulated annotators answer the queue (a Label Studio export), ``ingest``
(without touching the suite), ``certify``. Per version it reports the share auto-labelled and certified, the
auto-labels' agreement with the simulator truth, the human labels spent (audit included), and in how many audit draws
the promise held (agreement >= target, and >= target - 0.02). Prints a table and writes ``certify.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import numpy as np


def _calibrated_copy(model: Path, references, out: Path, target: float) -> Path:
    from autorater.rater import CALIBRATION_FILE
    from autorater.serving.labelling.model_calibration import calibrate_model

    copy = out / f"model-{target:.2f}"
    if not (copy / CALIBRATION_FILE).is_file():
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(model, copy)
        calibrate_model(copy, references, out / f"calibration-{target:.2f}", target_agreement=target,
                        confidence=0.9, progress=True)
    return copy


def _labelled(model: Path, suite, folder: Path, seed: int, base: Path | None, audit_share: float) -> dict:
    """``autorater label`` for one audit seed; from seed 1 on the ratings are the seed-0 folder's (resume)."""
    from autorater.serving.labelling.label import label_suite

    if folder.exists():
        shutil.rmtree(folder)
    if base is not None:
        (folder / "parts").mkdir(parents=True)
        for part in (base / "parts").glob("part-*.jsonl"):
            shutil.copy2(part, folder / "parts" / part.name)
        job = json.loads((base / "job.json").read_text())
        (folder / "job.json").write_text(json.dumps({**job, "seed": seed}, indent=1) + "\n")
    return label_suite(model, suite, folder, seed=seed, audit_share=audit_share, resume=base is not None,
                       workers=2, progress=base is None)


def _one_draw(model: Path, suite, folder: Path, seed: int, base: Path | None, audit_share: float,
              truth: dict, target: float) -> dict:
    from autorater.serving.labelling.certify import certify
    from autorater.serving.labelling.ingest import ingest
    from autorater.serving.labelling.simulate import simulate_queue_export

    _labelled(model, suite, folder, seed, base, audit_share)
    export = folder.parent / f"export-{seed:03d}.json"
    simulate_queue_export(folder, export, annotators=3, seed=1000 + seed)
    ingest(folder, export, append_to_suite=False)
    cert = certify(folder)
    rows = [json.loads(line) for line in (folder / "labels.jsonl").read_text().splitlines() if line.strip()]
    auto = [r for r in rows if r["decision"] == "auto"]
    right = [r["model_outcome"] == truth[r["continuation_id"]] for r in auto]
    humans = sum(r["decision"] != "auto" or bool(r.get("audit")) for r in rows)
    agreement = float(np.mean(right)) if right else None
    return {"seed": seed, "coverage": len(auto) / len(rows), "auto": len(auto), "agreement": agreement,
            "human_labels": humans, "audit": cert.get("human_labels_audit", 0),
            "strata": len(cert.get("strata") or {}), "certified_strata": sum(bool(s.get("certified"))
                                                                   for s in cert["strata"].values()),
            "held": agreement is None or agreement >= target,
            "held_within_0.02": agreement is None or agreement >= target - 0.02}


def run(model: Path, references: Path, versions: dict[str, Path], targets: list[float], seeds: int,
        audit_share: float, out: Path) -> dict:
    from autorater.data.suite import Suite, load_truth

    out.mkdir(parents=True, exist_ok=True)
    refs = Suite.load(references)
    results = {"model": str(model), "references": str(references), "seeds": seeds, "audit_share": audit_share,
               "versions": {}}
    for target in targets:
        calibrated = _calibrated_copy(model, refs, out, target)
        for name, path in versions.items():
            suite = Suite.load(path)
            truth = {t["continuation_id"]: t["outcome"] for t in load_truth(path)}
            started, base, draws = time.time(), None, []
            for seed in range(seeds):
                folder = out / f"{target:.2f}" / name / f"seed-{seed:03d}"
                draws.append(_one_draw(calibrated, suite, folder, seed, base, audit_share, truth, target))
                base = base or folder
            results["versions"][f"{name}@{target:.2f}"] = _summarise(name, target, len(suite.continuations), draws,
                                                                     time.time() - started)
            print(format_row(results["versions"][f"{name}@{target:.2f}"]), flush=True)
    (out / "certify.json").write_text(json.dumps(results, indent=1) + "\n")
    return results


def _summarise(name: str, target: float, n: int, draws: list[dict], wall_s: float) -> dict:
    agreements = [d["agreement"] for d in draws if d["agreement"] is not None]
    pooled_right = sum(d["agreement"] * d["auto"] for d in draws if d["agreement"] is not None)
    pooled_auto = sum(d["auto"] for d in draws)
    return {"version": name, "target": target, "continuations": n, "draws": len(draws),
            "coverage_mean": float(np.mean([d["coverage"] for d in draws])),
            "coverage_range": [min(d["coverage"] for d in draws), max(d["coverage"] for d in draws)],
            "agreement_pooled": pooled_right / pooled_auto if pooled_auto else None,
            "agreement_min": min(agreements) if agreements else None,
            "nothing_auto_share": float(np.mean([d["auto"] == 0 for d in draws])),
            "human_labels_mean": float(np.mean([d["human_labels"] for d in draws])),
            "audit_mean": float(np.mean([d["audit"] for d in draws])),
            "held_share": float(np.mean([d["held"] for d in draws])),
            "held_within_0.02_share": float(np.mean([d["held_within_0.02"] for d in draws])),
            "certified_strata_mean": float(np.mean([d["certified_strata"] for d in draws])),
            "strata": draws[0]["strata"], "wall_s": round(wall_s, 1), "per_draw": draws}


HEADER = (f"{'version':<18}{'target':>7}{'n':>6}{'coverage':>10}{'agree':>8}{'min':>8}{'none':>6}{'humans':>8}"
          f"{'audit':>7}{'held':>7}{'held-.02':>9}{'strata':>9}")


def format_row(s: dict) -> str:
    def f(v):
        return "-" if v is None else f"{v:.3f}"

    return (f"{s['version']:<18}{s['target']:>7.2f}{s['continuations']:>6}{f(s['coverage_mean']):>10}"
            f"{f(s['agreement_pooled']):>8}{f(s['agreement_min']):>8}{s['nothing_auto_share']:>6.2f}"
            f"{s['human_labels_mean']:>8.1f}{s['audit_mean']:>7.1f}{s['held_share']:>7.2f}"
            f"{s['held_within_0.02_share']:>9.2f}{s['certified_strata_mean']:>5.1f}/{s['strata']:<3}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="a trained model folder (copied and calibrated per target)")
    p.add_argument("--references", required=True, help="the suite whose gold references calibrate the model")
    p.add_argument("--version", action="append", required=True, metavar="NAME=SUITE",
                   help="a suite version with simulator truth (repeatable)")
    p.add_argument("--targets", default="0.9,0.95")
    p.add_argument("--seeds", type=int, default=20, help="audit draws per version and target")
    p.add_argument("--audit-share", type=float, default=0.2)
    p.add_argument("--out", default="bench-out/certify")
    args = p.parse_args(argv)
    versions = dict(v.split("=", 1) for v in args.version)
    results = run(Path(args.model), Path(args.references), {k: Path(v) for k, v in versions.items()},
                  [float(t) for t in args.targets.split(",")], args.seeds, args.audit_share, Path(args.out))
    print(HEADER)
    for s in results["versions"].values():
        print(format_row(s))
    print(f"written: {Path(args.out) / 'certify.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
