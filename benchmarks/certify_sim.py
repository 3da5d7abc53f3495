"""Does every certified stratum keep its word? The decision simulated through the product's own functions.

    python -m benchmarks.certify_sim [--draws 1000] [--out bench-out/certify-sim]

A simulated version: strata of provisional auto-labels whose confidences ``max(p, 1 - p)`` are uniform above the
reference threshold and whose errors follow a profile (``flat``; ``calibrated``: among the least confident;
``confident``: among the most confident) at a stated overall agreement rate. The references (a record of 435
auto-labelled, as Learn-then-Test leaves them, with their confidences) design the audits. Then exactly what
``autorater label`` and ``certify`` run: ``calibration.plan_strata`` (levels, error budgets, first batches), and
round after round ``calibration.certify_strata`` on the answers of the audit asked so far, until every stratum is
certified or routed. The judge is the target itself: a failure is a certified stratum whose agreement *rate* at its
certified level (from the generating model, not the realised sample) is below the target. Also reported: the
agreement realised by the delivered auto-labels, and the cost, human labels per provisional label (audit labels plus
routed provisional labels, over provisional labels).

Prints a table and writes ``certify-sim.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np

PROFILES = ("flat", "calibrated", "confident")
LOW = 0.8  # provisional confidences are uniform on [LOW, 1]


def error_chance(profile: str, rate: float, conf: np.ndarray, low: float = LOW) -> np.ndarray:
    """(n,) the chance that the model is wrong at each confidence, for an overall agreement ``rate`` over U(low, 1)."""
    u = (np.asarray(conf, dtype=float) - low) / (1 - low)  # 0 at the least confident, 1 at the most
    shape = {"flat": np.ones_like(u), "calibrated": 2 * (1 - u), "confident": 2 * u}[profile]
    return np.clip((1 - rate) * shape, 0.0, 1.0)


def rate_at(profile: str, rate: float, level: float, low: float = LOW) -> float:
    """The agreement rate of the auto-labels at confidence >= ``level`` under the generating model."""
    grid = np.linspace(max(level, low), 1.0, 2001)
    return float(1 - error_chance(profile, rate, grid, low).mean())


@dataclasses.dataclass
class Stratum:
    """One simulated stratum: its provisional labels, their overall agreement rate and error profile."""

    size: int
    rate: float
    profile: str = "flat"


def references(rate: float, rng, n: int = 435, profile: str = "flat") -> tuple[np.ndarray, np.ndarray]:
    """The references' (confidence, correct): ``n`` auto-labelled at agreement ``rate`` (435 with 32 wrong is the
    BabyAI benchmark's record at a 0.90 target: 0.926)."""
    conf = rng.uniform(LOW, 1.0, n)
    return conf, rng.random(n) >= error_chance(profile, rate, conf)


def simulate_version(strata: dict[str, Stratum], target: float, delta: float, claim: str, reference, rng,
                     prior_weight: float = 100.0, max_rounds: int = 50) -> dict[str, dict]:
    """One draw of a version through ``plan_strata`` and rounds of ``certify_strata``; per stratum: ``certified``,
    ``level``, ``rate`` (at the level), ``realised`` (agreement of its delivered auto-labels), ``audit``, ``auto``,
    ``humans`` (audit plus routed provisional labels) and ``rounds``."""
    from autorater.calibration import StratumAudit, certify_strata, plan_strata

    conf = {k: rng.uniform(LOW, 1.0, s.size) for k, s in strata.items()}
    right = {k: rng.random(s.size) >= error_chance(s.profile, s.rate, conf[k]) for k, s in strata.items()}
    agreement = float(np.mean(reference[1][reference[0] >= LOW])) if reference is not None else target
    priors = {k: (agreement, prior_weight) for k in strata}
    designs = plan_strata(conf, target, delta, claim, priors, reference)
    order = {k: rng.permutation(np.flatnonzero(conf[k] >= d.level)) for k, d in designs.items() if d is not None}
    asked = {k: d.first_batch for k, d in designs.items() if d is not None}
    verdicts, rounds = {}, 0
    while asked and rounds < max_rounds:
        rounds += 1
        audits = {k: StratumAudit(designs[k], asked[k], tuple(right[k][order[k][:asked[k]]])) for k in asked}
        verdicts = certify_strata(audits, target, delta, claim)
        if all(v.state in ("certified", "routed") for v in verdicts.values()):
            break
        asked = {k: v.requested for k, v in verdicts.items()}
    out = {}
    for k, s in strata.items():
        d, v = designs.get(k), verdicts.get(k)
        certified = v is not None and v.state == "certified"
        audit = 0 if d is None else min(asked.get(k, 0), d.size)
        auto_ids = order[k][audit:] if certified else np.array([], dtype=int)
        out[k] = {"certified": certified, "level": None if d is None else d.level,
                  "rate": rate_at(s.profile, s.rate, d.level) if d is not None else None,
                  "realised": float(right[k][auto_ids].mean()) if auto_ids.size else None,
                  "audit": audit, "auto": int(auto_ids.size), "humans": s.size - int(auto_ids.size),
                  "rounds": rounds, "reason": None if v is None else v.reason}
    return out


def fixed_audit_humans(size: int, rate: float, profile: str, target: float, delta: float, rng) -> int:
    """The fixed audit this replaced, on the same kind of stratum: the smallest audit that can certify alone
    (``certifying_size``: 22 labels at 0.90 / 90%), certified when its exact binomial bound reaches the target (every
    audited label right), else the whole stratum to humans. Returns the human labels it costs."""
    from autorater.calibration import agreement_lower_bound, certifying_size

    n = min(size, certifying_size(target, 1 - delta))
    conf = rng.uniform(LOW, 1.0, n)
    errors = int(np.sum(rng.random(n) < error_chance(profile, rate, conf)))
    return n if n < size and agreement_lower_bound(errors, n, 1 - delta) >= target else size


def run_cell(strata: dict[str, Stratum], target: float, delta: float, claim: str, reference_rate: float,
             draws: int, seed: int, reference_profile: str = "flat") -> dict:
    """``draws`` versions of one cell; the failure rates against the target and the cost."""
    rng, other = np.random.default_rng(seed), np.random.default_rng(seed + 10_000)  # the fixed arm draws apart
    any_false, false_share, per = 0, [], {k: {"certified": 0, "failed": 0, "realised_below": 0} for k in strata}
    humans, provisional, rounds, fixed = 0, 0, [], 0
    for _ in range(draws):
        fixed += sum(fixed_audit_humans(st.size, st.rate, st.profile, target, delta, other) for st in strata.values())
        reference = references(reference_rate, rng, profile=reference_profile)
        out = simulate_version(strata, target, delta, claim, reference, rng)
        certified = [k for k, o in out.items() if o["certified"]]
        false = [k for k in certified if out[k]["rate"] < target]
        any_false += bool(false)
        false_share.append(len(false) / max(len(certified), 1))
        for k, o in out.items():
            per[k]["certified"] += o["certified"]
            per[k]["failed"] += k in false
            per[k]["realised_below"] += o["certified"] and o["realised"] is not None and o["realised"] < target
        humans += sum(o["humans"] for o in out.values())
        provisional += sum(s.size for s in strata.values())
        rounds.append(max(o["rounds"] for o in out.values()))
    return {"draws": draws, "family_failure": any_false / draws,
            "false_certification_rate": float(np.mean(false_share)), "humans_per_provisional": humans / provisional,
            "fixed_audit_humans_per_provisional": fixed / provisional,
            "rounds_mean": float(np.mean(rounds)),
            "strata": {k: {key: val / draws for key, val in c.items()} for k, c in per.items()}}


def cells(target: float) -> dict[str, tuple[dict[str, Stratum], float]]:
    """The issue's cells at one target: (strata, the references' agreement)."""
    margin = target + 0.026 if target < 0.95 else target + 0.02  # as Learn-then-Test leaves the references
    out = {}
    for profile in PROFILES:
        for size in (100, 400, 2000):
            out[f"margin {profile} n={size}"] = ({"s": Stratum(size, target - 0.005, profile)}, margin)
    out["hidden shift 0.03 (refs optimistic)"] = ({"s": Stratum(1000, target - 0.01)}, target + 0.04)
    out["alike +0.04, n=1000"] = ({"s": Stratum(1000, min(target + 0.04, 0.995))}, min(target + 0.04, 0.995))
    spread = np.linspace(-0.05, 0.05, 10)
    out["ten strata around target"] = ({f"s{i}": Stratum(300, float(target + d)) for i, d in enumerate(spread)},
                                       margin)
    good = {f"good{i}": Stratum(200, min(target + 0.08, 0.995)) for i in range(4)}
    out["bad among good"] = ({**good, "bad": Stratum(400, target - 0.03)}, margin)
    out["bad alone"] = ({"bad": Stratum(400, target - 0.03)}, margin)
    return out


def run(targets: list[float], claims: list[str], draws: int, out: Path, seed: int = 0) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    results = {"draws": draws, "cells": []}
    print(f"{'target':>6} {'claim':<7} {'cell':<38}{'family fail':>12}{'FCR':>7}{'humans/prov':>12}{'fixed':>7}"
          f"{'rounds':>7}")
    for target in targets:
        for claim in claims:
            for i, (name, (strata, ref_rate)) in enumerate(cells(target).items()):
                started = time.time()
                r = run_cell(strata, target, 1 - 0.9, claim, ref_rate, draws, seed + i)
                r.update(target=target, claim=claim, cell=name, reference_rate=ref_rate,
                         wall_s=round(time.time() - started, 1))
                results["cells"].append(r)
                print(f"{target:>6.2f} {claim:<7} {name:<38}{r['family_failure']:>12.3f}"
                      f"{r['false_certification_rate']:>7.3f}{r['humans_per_provisional']:>12.3f}"
                      f"{r['fixed_audit_humans_per_provisional']:>7.3f}"
                      f"{r['rounds_mean']:>7.1f}", flush=True)
    (out / "certify-sim.json").write_text(json.dumps(results, indent=1) + "\n")
    return results


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--targets", default="0.9,0.95")
    p.add_argument("--claims", default="family,fcr")
    p.add_argument("--draws", type=int, default=1000)
    p.add_argument("--out", default="bench-out/certify-sim")
    args = p.parse_args(argv)
    run([float(t) for t in args.targets.split(",")], args.claims.split(","), args.draws, Path(args.out))
    print(f"written: {Path(args.out) / 'certify-sim.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
