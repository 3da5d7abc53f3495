"""Does the promise hold on the version it is made for, and what does it cost? The real procedure, measured.

    python -m benchmarks.certify --model demo-out/model --references demo-out/suite-references \
        --version alike=demo-out/suite-v2 --version new-levels=bench-out/certify/suite-new-levels \
        [--targets 0.9,0.95] [--seeds 20] [--strata none] [--claim family] [--out bench-out/certify]

For each target agreement the model (a copy) is calibrated on ``--references`` as a user would
(``autorater calibrate``); then, for every ``--version`` (a suite with simulator truth) and every seed of the audit
order, the real procedure runs: ``label`` (rated once per version and target; each further seed re-decides from the
same part files, as ``--resume`` does), then rounds of: the simulated annotators answer the queue (a Label Studio
export), ``ingest`` (without touching the suite), ``certify``, until every stratum is certified or routed. Per version
it reports the share auto-labelled, the auto-labels' agreement with the simulator truth, the human labels per
provisional label (audit labels and routed provisional labels, over the provisional labels; the uncertain
continuations go to humans whatever happens and are not counted), the rounds, and in how many audit draws the
auto-labels' realised agreement reached the target. Prints a table and writes ``certify.json``. The decision alone,
over thousands of simulated draws: ``benchmarks/certify_sim.py``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import numpy as np


def calibrated_copy(model: Path, references, out: Path, target: float) -> Path:
    from autorater.rater import CALIBRATION_FILE
    from autorater.serving.labelling.model_calibration import calibrate_model

    copy = out / f"model-{target:.2f}"
    if not (copy / CALIBRATION_FILE).is_file():
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(model, copy)
        calibrate_model(copy, references, out / f"calibration-{target:.2f}", target_agreement=target,
                        confidence=0.9, progress=True)
    return copy


def label_order(model: Path, suite, folder: Path, seed: int, base: Path | None, options: dict) -> dict:
    """``autorater label`` for one audit order; from the second on the ratings are the first folder's (resume). Each
    order is an independent team: the version's labelling-job ledger is reset before it (a team labelling its own
    version again would be refused: ``serving.labelling.ledger``)."""
    from autorater.serving.labelling.label import label_suite
    from autorater.serving.labelling.ledger import LEDGER_FILE

    (Path(suite.root) / LEDGER_FILE).unlink(missing_ok=True)
    shutil.rmtree(folder, ignore_errors=True)
    if base is not None:
        (folder / "parts").mkdir(parents=True)
        for part in (base / "parts").glob("part-*.jsonl"):
            shutil.copy2(part, folder / "parts" / part.name)
        job = json.loads((base / "job.json").read_text())
        job.update(seed=seed, job_id=f"order-{seed}-{job['job_id']}"[:64],
                   **{k: options[k] for k in ("adapt", "adapt_after", "adapt_epochs") if k in options})
        (folder / "job.json").write_text(json.dumps(job, indent=1) + "\n")
    return label_suite(model, suite, folder, seed=seed, resume=base is not None, workers=2, progress=base is None,
                       **options)


def _one_draw(model: Path, suite, folder: Path, seed: int, base: Path | None, strata: str, claim: str,
              truth: dict, target: float, answers: dict, max_rounds: int = 12) -> dict:
    from autorater.serving.labelling.certify import certify
    from autorater.serving.labelling.ingest import ingest
    from autorater.serving.labelling.simulate import simulate_queue_export

    summary = label_order(model, suite, folder, seed, base, {"strata": strata, "claim": claim, "adapt": 0})
    provisional = summary["provisional"]
    cert, rounds = summary["certification"], 0
    while rounds < max_rounds and cert.get("state") not in ("final", "none", "carried"):
        rounds += 1
        export = folder.parent / f"export-{seed:03d}-{rounds}.json"
        if simulate_queue_export(folder, export, annotators=3, seed=1000 * rounds + seed) == 0:
            break
        ingest(folder, export, append_to_suite=False)
        cert = certify(folder)
    rows = [json.loads(line) for line in (folder / "labels.jsonl").read_text().splitlines() if line.strip()]
    auto = [r for r in rows if r["decision"] == "auto" and r.get("label_source") != "human"]
    right = [r["model_outcome"] == truth[r["continuation_id"]] for r in auto]
    at_level = [r for r in rows if r.get("audit_rank") is not None or r.get("reason") in
                ("below_stratum_level", "too_few_to_certify")]  # every label that started provisional
    agreement = float(np.mean(right)) if right else None
    return {"seed": seed, "coverage": len(auto) / len(rows), "auto": len(auto), "agreement": agreement,
            "fixed_humans_per_provisional": _fixed_audit(at_level, answers, target, seed),
            "provisional": provisional, "humans_per_provisional": (provisional - len(auto)) / max(provisional, 1),
            "audit": sum(bool(r.get("audit")) and r.get("label_source") == "human" for r in at_level),
            "rounds": rounds, "strata": len(cert.get("strata") or {}),
            "certified_strata": sum(s.get("state") == "certified" for s in (cert.get("strata") or {}).values()),
            "held": agreement is None or agreement >= target}


def _fixed_audit(provisional: list[dict], truth: dict, target: float, seed: int, confidence: float = 0.9) -> float:
    """What the fixed audit this replaced would have cost on the same provisional labels: the smallest audit that can
    certify alone, drawn at random (``truth``: what the annotators answer), certified when its exact binomial bound
    reaches the target, else every provisional label to humans. Human labels per provisional label."""
    from autorater.calibration import agreement_lower_bound, certifying_size

    if not provisional:
        return 0.0
    n = min(len(provisional), certifying_size(target, confidence))
    drawn = np.random.default_rng(seed).choice(len(provisional), n, replace=False)
    errors = sum(provisional[i]["model_outcome"] != truth[provisional[i]["continuation_id"]] for i in drawn)
    certified = n < len(provisional) and agreement_lower_bound(errors, n, confidence) >= target
    return (n if certified else len(provisional)) / len(provisional)


def _majority(suite) -> dict[str, str]:
    """Each continuation's annotators' majority outcome (ties left out)."""
    votes: dict[str, list[str]] = {}
    for a in suite.annotations:
        votes.setdefault(a.continuation_id, []).append(a.outcome)
    return {cid: "success" if 2 * v.count("success") > len(v) else "failure" for cid, v in votes.items()
            if 2 * v.count("success") != len(v)}


def run(model: Path, references: Path, versions: dict[str, Path], targets: list[float], seeds: int, strata: str,
        claim: str, out: Path) -> dict:
    from autorater.data.suite import Suite, load_truth

    out.mkdir(parents=True, exist_ok=True)
    refs = Suite.load(references)
    results = {"model": str(model), "references": str(references), "seeds": seeds, "strata": strata, "claim": claim,
               "versions": {}}
    for target in targets:
        calibrated = calibrated_copy(model, refs, out, target)
        for name, path in versions.items():
            suite = Suite.load(path)
            truth = {t["continuation_id"]: t["outcome"] for t in load_truth(path)}
            answers = {**truth, **_majority(suite)}  # the fixed audit's answers: the suite's own annotators
            started, base, draws = time.time(), None, []
            for seed in range(seeds):
                folder = out / f"{target:.2f}" / name / f"seed-{seed:03d}"
                draws.append(_one_draw(calibrated, suite, folder, seed, base, strata, claim, truth, target, answers))
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
            "provisional_mean": float(np.mean([d["provisional"] for d in draws])),
            "humans_per_provisional": float(np.mean([d["humans_per_provisional"] for d in draws])),
            "fixed_humans_per_provisional": float(np.mean([d["fixed_humans_per_provisional"] for d in draws])),
            "audit_mean": float(np.mean([d["audit"] for d in draws])),
            "rounds_mean": float(np.mean([d["rounds"] for d in draws])),
            "held_share": float(np.mean([d["held"] for d in draws])),
            "certified_strata_mean": float(np.mean([d["certified_strata"] for d in draws])),
            "strata": draws[0]["strata"], "wall_s": round(wall_s, 1), "per_draw": draws}


HEADER = (f"{'version':<18}{'target':>7}{'n':>6}{'prov':>6}{'coverage':>10}{'agree':>8}{'min':>8}{'none':>6}"
          f"{'h/prov':>8}{'fixed':>7}{'audit':>7}{'rounds':>7}{'held':>7}{'strata':>9}")


def format_row(s: dict) -> str:
    def f(v):
        return "-" if v is None else f"{v:.3f}"

    return (f"{s['version']:<18}{s['target']:>7.2f}{s['continuations']:>6}{s['provisional_mean']:>6.0f}"
            f"{f(s['coverage_mean']):>10}{f(s['agreement_pooled']):>8}{f(s['agreement_min']):>8}"
            f"{s['nothing_auto_share']:>6.2f}{s['humans_per_provisional']:>8.3f}"
            f"{s['fixed_humans_per_provisional']:>7.3f}{s['audit_mean']:>7.1f}"
            f"{s['rounds_mean']:>7.1f}{s['held_share']:>7.2f}{s['certified_strata_mean']:>5.1f}/{s['strata']:<3}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="a trained model folder (copied and calibrated per target)")
    p.add_argument("--references", required=True, help="the suite whose gold references calibrate the model")
    p.add_argument("--version", action="append", required=True, metavar="NAME=SUITE",
                   help="a suite version with simulator truth (repeatable)")
    p.add_argument("--targets", default="0.9,0.95")
    p.add_argument("--seeds", type=int, default=20, help="audit draws per version and target")
    p.add_argument("--strata", default="none", help="as `autorater label --strata` (none: one stratum a version)")
    p.add_argument("--claim", default="family", choices=["family", "fcr"])
    p.add_argument("--out", default="bench-out/certify")
    args = p.parse_args(argv)
    versions = dict(v.split("=", 1) for v in args.version)
    results = run(Path(args.model), Path(args.references), {k: Path(v) for k, v in versions.items()},
                  [float(t) for t in args.targets.split(",")], args.seeds, args.strata, args.claim, Path(args.out))
    print(HEADER)
    for s in results["versions"].values():
        print(format_row(s))
    print(f"written: {Path(args.out) / 'certify.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


tiny = None  # it trains or builds nothing of its own (its command line is checked: tests/test_benchmark_modules.py)
