"""Does ``autorater suite propose`` choose a version that tells agents apart better than a random draw of its size?

    python -m benchmarks.propose [--seeds 12] [--current 20] [--pool 60] [--n 16] [--eval-runs 3] [--boot 1000]
                                 [--agents expert,noisy-0.5,quitter,random] [--out bench-out/propose]

A synthetic BabyAI world, simulated without rendering (``simulate_truths``), paired over seeds. For each seed:

1. the *current version*: ``--current`` scenarios of the default levels, each agent once, labelled by three simulated
   annotators (their majority): what today's leaderboard knows;
2. a *pool* of ``--pool`` candidate scenarios over more levels; each agent plays each candidate ``1 + --eval-runs``
   times (independent runs of one scenario): the first run is the *pilot* the current model sees, the others are kept
   back to score whichever version is chosen;
3. *the current model*: no trained network here (CPU-cheap), but its stand-in: on each pilot run, the share of three
   simulated annotators (about 0.90 balanced accuracy, as the autorater's default model on BabyAI) who said
   success, as ``autorater suite propose`` reads a pool's annotations when no ``--predictions`` are given;
4. three versions of ``--n`` scenarios: *proposed* (``serving.analysis.propose``: one item-response fit, the most
   informative candidates balanced over categories), *random* (a uniform draw), *random, balanced* (a uniform draw
   within the same category quotas as the proposal) and, for comparison, *proposed, unbalanced* (``--no-balance``);
5. each version scored on its held-back runs with the simulator's truth (the true order of the agents: their
   success rate over every held-back run of the pool):

   - *rank-interval width*: the scenarios are resampled (``--boot``), the agents ranked by success rate in each
     resample, ties broken at random (a tie is not a separation); the width of each agent's 95% rank interval,
     averaged over agents;
   - *ability-gap width*: the item-response model fitted to the version's runs; the width of the 95% interval of
     the ability gap between agents adjacent in the true order (their standard errors combined as independent),
     averaged over the adjacent pairs;
   - *pairs separated*: adjacent pairs whose rate difference has a bootstrap 95% interval above 0; *gaps
     separated*: whose ability-gap interval lies above 0.

The table gives each version's mean over seeds and the proposal's paired gain over each random draw (positive: the
proposal is better: narrower, or more pairs separated) with a 95% t interval over seeds. JSON: ``propose.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from scipy import stats

CURRENT_TASKS = ("GoToLocal", "PickupLoc", "PutNextLocal", "OpenDoor")
POOL_TASKS = ("GoToRedBallGrey", "GoToLocal", "PickupDist", "PickupLoc", "PutNextLocal", "PutNextLocalS6N4",
              "OpenDoor", "OpenDoorLoc")
AGENTS = ("expert", "noisy-0.5", "quitter", "random")
PROPOSALS = ("proposed", "proposed_oracle", "proposed_unbalanced")
RANDOM = ("random", "random_balanced")
VERSIONS = PROPOSALS + RANDOM
METRICS = {"rank_interval_width": "lower", "ability_gap_width": "lower", "separated_pairs": "higher",
           "ability_gaps_separated": "higher"}


def _majority(truths: list[dict], seed: int, annotators: int = 3) -> dict[str, float]:
    """continuation id -> share of ``annotators`` simulated annotators who said success."""
    from autorater.data.annotators import simulate_annotations

    votes: dict[str, list[int]] = {}
    for a in simulate_annotations(truths, annotators, seed):
        votes.setdefault(a.continuation_id, []).append(a.outcome == "success")
    return {cid: float(np.mean(v)) for cid, v in votes.items()}


def world(seed: int, current: int, pool: int, eval_runs: int, agents: tuple[str, ...]) -> dict:
    """The current version's labelled rows, the pool's pilot predictions and held-back truth, for one seed."""
    from autorater.data.generate import simulate_truths

    now = simulate_truths(levels=list(CURRENT_TASKS), agents=list(agents), scenarios=current,
                          continuations_per_scenario=len(agents), seed=seed)
    share = _majority(now, seed)
    current_rows = [{"agent_id": t["agent"], "scenario_id": t["scenario_id"],
                     "outcome": "success" if share[t["continuation_id"]] > 0.5 else "failure"} for t in now]
    runs = simulate_truths(levels=list(POOL_TASKS), agents=list(agents), scenarios=pool,
                           continuations_per_scenario=len(agents) * (1 + eval_runs), seed=seed + 10_000)
    seen: set[tuple[str, str]] = set()
    pilot, held = [], []
    for t in runs:  # the first run of each agent on each scenario is the pilot
        key = (t["scenario_id"], t["agent"])
        (held if key in seen else pilot).append(t)
        seen.add(key)
    share = _majority(pilot, seed + 1)
    pilot_rows = [{"agent_id": t["agent"], "scenario_id": t["scenario_id"], "category": t["category"],
                   "p_success": share[t["continuation_id"]]} for t in pilot]
    oracle_rows = [{**r, "p_success": float(t["outcome"] == "success")} for r, t in zip(pilot_rows, pilot)]
    return {"current": current_rows, "pilot": pilot_rows, "pilot_oracle": oracle_rows, "held": held,
            "category": {t["scenario_id"]: t["category"] for t in runs}}


def draws(w: dict, n: int, seed: int) -> dict[str, list[str]]:
    """The scenarios of each version: proposed (from the annotators' pilot labels; from the pilot's truth: oracle;
    without the balance over categories: unbalanced), random, random within the proposal's category quotas."""
    from autorater.serving.analysis.propose import choose, fit_candidates, pair_weights

    candidates, abilities = fit_candidates(w["current"], w["pilot"])
    weights = pair_weights(abilities)
    proposed = [c.scenario_id for c in choose(candidates, n, weights=weights)]
    unbalanced = [c.scenario_id for c in choose(candidates, n, balance=False, weights=weights)]
    oracle, abilities = fit_candidates(w["current"], w["pilot_oracle"])
    oracle = [c.scenario_id for c in choose(oracle, n, weights=pair_weights(abilities))]
    rng = np.random.default_rng([seed, 0xD1CE])
    ids = sorted(w["category"])
    out = {"proposed": proposed, "random": [ids[i] for i in rng.permutation(len(ids))[:n]]}
    balanced = []
    for cat in sorted({w["category"][s] for s in proposed}):
        quota = sum(w["category"][s] == cat for s in proposed)
        pool = [s for s in ids if w["category"][s] == cat]
        balanced += [pool[i] for i in rng.permutation(len(pool))[:quota]]
    out.update(random_balanced=balanced, proposed_unbalanced=unbalanced, proposed_oracle=oracle)
    return out


def separation(held: list[dict], scenarios: list[str], agents: tuple[str, ...], order: list[str], n_boot: int,
               rng: np.random.Generator) -> dict:
    """A version's rank-interval width (mean over agents) and separated adjacent pairs, on its held-back runs."""
    index = {s: j for j, s in enumerate(scenarios)}
    wins, counts = np.zeros((len(agents), len(scenarios))), np.zeros((len(agents), len(scenarios)))
    for t in held:
        if t["scenario_id"] in index:
            i, j = agents.index(t["agent"]), index[t["scenario_id"]]
            counts[i, j] += 1
            wins[i, j] += t["outcome"] == "success"
    weights = rng.multinomial(len(scenarios), np.full(len(scenarios), 1 / len(scenarios)), size=n_boot)
    rates = (weights @ wins.T) / np.maximum(weights @ counts.T, 1)  # (n_boot, agents)
    jitter = rng.random(rates.shape) * 1e-9  # ties broken at random
    ranks = stats.rankdata(-(rates + jitter), axis=1)
    lo, hi = np.percentile(ranks, [2.5, 97.5], axis=0)
    pairs = [(agents.index(a), agents.index(b)) for a, b in zip(order, order[1:])]
    separated = sum(np.percentile(rates[:, i] - rates[:, j], 2.5) > 0 for i, j in pairs)
    ability = _ability_gaps(held, index, agents, order)
    return {"rank_interval_width": float(np.mean(hi - lo)), "separated_pairs": int(separated), "pairs": len(pairs),
            **ability}


def _ability_gaps(held: list[dict], index: dict[str, int], agents: tuple[str, ...], order: list[str]) -> dict:
    """The item-response fit of the version's held-back runs: the mean width of the 95% intervals of the ability gaps
    between agents adjacent in the true order (standard errors combined as independent), and how many exclude 0."""
    from autorater.calibration.agents.irt import ItemResponseModel

    mine = [t for t in held if t["scenario_id"] in index]
    fit = ItemResponseModel().fit([t["agent"] for t in mine], [t["scenario_id"] for t in mine],
                                  [int(t["outcome"] == "success") for t in mine])
    theta = dict(zip(map(str, fit.agents_), fit.ability_))
    se = dict(zip(map(str, fit.agents_), fit.ability_se_))
    gaps = [(theta[a] - theta[b], np.hypot(se[a], se[b])) for a, b in zip(order, order[1:])]
    return {"ability_gap_width": float(np.mean([2 * 1.96 * s for _, s in gaps])),
            "ability_gaps_separated": int(sum(g - 1.96 * s > 0 for g, s in gaps))}


def paired(a: list[float], b: list[float]) -> dict:
    """Mean of ``a - b`` over seeds with a 95% t interval."""
    d = np.asarray(a) - np.asarray(b)
    if len(d) < 2:
        return {"mean": float(d.mean()), "ci": [None, None], "n": len(d)}
    half = stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d))
    return {"mean": float(d.mean()), "ci": [float(d.mean() - half), float(d.mean() + half)], "n": len(d)}


def run(seeds: int, current: int, pool: int, n: int, eval_runs: int, n_boot: int, agents: tuple[str, ...],
        progress: bool = True) -> dict:
    per_seed = []
    for seed in range(seeds):
        start = time.monotonic()
        w = world(seed, current, pool, eval_runs, agents)
        truth = {a: np.mean([t["outcome"] == "success" for t in w["held"] if t["agent"] == a]) for a in agents}
        order = sorted(agents, key=lambda a: -truth[a])
        rng = np.random.default_rng([seed, 0x5E9])
        versions = draws(w, n, seed)
        scores = {name: separation(w["held"], ids, agents, order, n_boot, rng) for name, ids in versions.items()}
        per_seed.append({"seed": seed, "scores": scores, "true_order": order,
                         "proposed_categories": {c: sum(w["category"][s] == c for s in versions["proposed"])
                                                 for c in sorted(set(w["category"].values()))}})
        if progress:
            print(f"seed {seed}: " + ", ".join(f"{k} {v['rank_interval_width']:.2f}" for k, v in scores.items()) +
                  f" ({time.monotonic() - start:.0f} s)", flush=True)
    summary = {name: {m: float(np.mean([s["scores"][name][m] for s in per_seed])) for m in METRICS}
               for name in VERSIONS}
    gains = {}  # a proposal's gain over a random draw: positive when the proposal is better
    for p in PROPOSALS:
        for r in RANDOM:
            gains[f"{p} vs {r}"] = {m: paired(*[[s["scores"][v][m] for s in per_seed]
                                                for v in ((r, p) if better == "lower" else (p, r))])
                                    for m, better in METRICS.items()}
    return {"settings": {"seeds": seeds, "current": current, "pool": pool, "n": n, "eval_runs": eval_runs,
                         "boot": n_boot, "agents": list(agents), "current_tasks": list(CURRENT_TASKS),
                         "pool_tasks": list(POOL_TASKS),
                         "model": "stand-in: 3 simulated annotators' share of success votes on one pilot run per "
                                  "agent and candidate (no trained network); proposed_oracle: the pilot run's truth"},
            "summary": summary, "gains": gains, "per_seed": per_seed}


def format_table(result: dict) -> str:
    s, cfg = result["summary"], result["settings"]
    names = {"rank_interval_width": "rank-interval width", "ability_gap_width": "ability-gap width",
             "separated_pairs": "pairs separated", "ability_gaps_separated": "gaps separated"}
    lines = [f"{cfg['seeds']} seeds; versions of {cfg['n']} scenarios from a pool of {cfg['pool']}; agents "
             f"{', '.join(cfg['agents'])}; scored on {cfg['eval_runs']} held-back runs per agent and scenario",
             f"{'version':<20}" + "".join(f"{names[m]:>26}" for m in METRICS),
             *(f"{name:<20}" + "".join(f"{s[name][m]:>26.3f}" for m in METRICS) for name in VERSIONS),
             "a proposal's gain over a random draw, mean over seeds [95% t interval] (positive: the proposal is "
             "better)",
             f"{'':<38}" + "".join(f"{names[m]:>26}" for m in METRICS)]
    for name, gain in result["gains"].items():
        cells = [f"{g['mean']:+.3f} [{g['ci'][0]:+.3f}, {g['ci'][1]:+.3f}]" if g["ci"][0] is not None
                 else f"{g['mean']:+.3f}" for g in gain.values()]
        lines.append(f"{name:<38}" + "".join(f"{c:>26}" for c in cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=12)
    parser.add_argument("--current", type=int, default=20, help="scenarios of the current version")
    parser.add_argument("--pool", type=int, default=60, help="candidate scenarios")
    parser.add_argument("--n", type=int, default=16, help="scenarios per proposed version")
    parser.add_argument("--eval-runs", type=int, default=3, help="held-back runs per agent and candidate")
    parser.add_argument("--boot", type=int, default=1000, help="bootstrap resamples per version")
    parser.add_argument("--agents", default=",".join(AGENTS))
    parser.add_argument("--out", default="bench-out/propose")
    args = parser.parse_args(argv)
    result = run(args.seeds, args.current, args.pool, args.n, args.eval_runs, args.boot,
                 tuple(a.strip() for a in args.agents.split(",") if a.strip()))
    print(format_table(result))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "propose.json").write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out / 'propose.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


tiny = None  # it trains or builds nothing of its own (its command line is checked: tests/test_benchmark_modules.py)
