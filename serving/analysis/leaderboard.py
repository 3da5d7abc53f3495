"""``autorater leaderboard``: per-agent success rates with honest 95% intervals (the report: ``report.py``).

Against gold (the default when the suite has references): the final labels (the model's where it
labelled alone, the annotators' majority elsewhere) are corrected by their measured error on the
suite's gold references. This is what stays honest when the annotators themselves are biased (they
are: a rigid annotator fails messy successes, a near miss fools a hurried one), which human-as-truth
intervals ignore. Two corrections (``group_estimates`` picks):

- **pooled** (``rate_pooled``, the default when the references allow it): the labels' sensitivity
  and specificity are measured once on all the references and correct every agent's share of success
  labels (the Rogan-Gladen estimator). All the suite's references instead of the agent's own, so the
  rate moves little when one reference is mislabelled, and agents rank as their label shares do. It
  assumes the error rates do not differ between agents; a permutation test on the references checks
  that, and when it rejects (or there are fewer than ``MIN_POOLED`` gold successes or failures) each
  agent is corrected by its own references instead.
- **per agent** (``rate_vs_gold``): the agent's own references, with prediction-powered inference
  (``ppi_py``). No assumption across agents, but with a dozen references one mislabelled one moves the
  rate by a twelfth. Always kept in the JSON as ``per_group``.

Against humans (no references, or ``use_references=False``), the rate of an agent mixes two strata
of its continuations:

- **human** (routed to annotators, human label in): a classical estimate. Alone, the Wilson
  interval; mixed, the Agresti-Coull standard error ``p~ = (k + 2) / (n + 4)``.
- **auto** (the model labelled them): prediction-powered inference (``ppi_py.ppi_mean_ci``, PPI++
  with a tuned lambda) on the audit slice, a uniform random sample of the auto-labelled
  continuations that humans labelled as well: the model's labels on all of them, corrected by its
  measured error on the audit. The standard error is floored by the one of a disagreement rate
  ``(d + 1) / (n_audit + 2)``, so that a small audit that happens to agree everywhere does not claim
  a perfect model. With fewer than 2 audited continuations the stratum is unknown and honestly
  counts anywhere in [0, 1].

The agent's rate is the share-weighted mean of the two, its standard error the weighted root sum
of squares, and the interval the normal one, clipped to [0, 1]. Continuations still waiting for a
human label are left out and counted (``waiting``): the rate is then of the labelled ones only.

Beside the rate, ``labelled_rate`` is the plain share of successes among the final labels: no
correction and no interval.

Also: per-category rates (the same estimator); time to completion (the CDF of success markers after
the takeover, and its median), each marker corrected by its source's lag (model or annotators) measured
on gold successes (``corrected_time_to_success``); consistency (the chance that two continuations of an
agent on one scenario have the same true outcome), corrected for the labels' sensitivity and
specificity on the gold references (``corrected_consistency``): label noise makes agreeing
continuations look split. Both have bootstrap intervals over scenarios that also resample the
references, and keep the uncorrected value beside them (``median_time_labelled_s``,
``consistency_labelled``). Scenario difficulty: the success rate of each scenario over all agents, and
the item-response model's ``ability`` per agent and ``difficulty`` per scenario (``autorater.calibration.agents.irt``).
The report is JSON plus an HTML page with the figures.

Example:
    >>> board = leaderboard("labels-v3")                  # doctest: +SKIP
    >>> board["agents"]["expert"]["rate"], board["agents"]["expert"]["ci"]  # doctest: +SKIP
"""

from __future__ import annotations

import os

import numpy as np

from autorater.calibration.agents.rates import (
    MIN_POOLED,
    Z95,
    bootstrap_interval,
    corrected_consistency,
    corrected_time_to_success,
    error_counts,
    error_heterogeneity,
    estimate,
    group_estimates,
    marker_offsets,
    rate_estimate,
    rate_pooled,
    rate_vs_gold,
    wilson_interval,
)
from autorater.calibration.metrics import rank_metrics
from autorater.data.suite import Suite
from autorater.serving.labelling.folder import LabelsFolder


def _marker_pairs(rows: list[dict], suite: Suite) -> dict[str, list[tuple[float, float]]]:
    """Per label source (``decision``), (label marker, gold marker) of gold successes labelled success."""
    gold = {r.continuation_id: r for r in suite.references}
    pairs: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        g = gold.get(r["continuation_id"])
        if g is not None and g.outcome == "success" and r.get("outcome") == "success" and \
                g.marker_s is not None and r.get("marker_s") is not None:
            pairs.setdefault(r["decision"], []).append((float(r["marker_s"]), float(g.marker_s)))
    return pairs


def _agent_entry(mine: list[dict], est: dict, gold, both, categories: list[str], counts, pairs: dict,
                 rng: np.random.Generator) -> dict:
    """One agent's row of the board: its rate (``est``), per category, its time to success and its consistency,
    each corrected by the references where they allow it."""
    waiting = sum(r["outcome"] is None for r in mine)
    labelled = [r for r in mine if r["outcome"] is not None]
    times: dict[str, list[tuple[float, str]]] = {}
    outcomes: dict[str, list[int]] = {}
    for r in labelled:
        outcomes.setdefault(r["scenario_id"], []).append(int(r["outcome"] == "success"))
        if r["outcome"] == "success" and r["marker_s"] is not None:
            times.setdefault(r["scenario_id"], []).append((max(0.0, r["marker_s"] - r["takeover_s"]),
                                                           r["decision"]))
    timing = corrected_time_to_success(times, pairs, rng)
    consistency = corrected_consistency(list(outcomes.values()), counts, rng)
    return {
        **est, "continuations": len(mine), "waiting": waiting,
        "per_category": {cat: estimate([r for r in mine if r["category"] == cat], gold, both)
                         for cat in categories if any(r["category"] == cat for r in mine)},
        "time_to_success_s": timing["times_s"],
        "median_time_to_success_s": timing["median_s"], "median_time_ci": timing["ci"],
        "median_time_labelled_s": timing["labelled_median_s"], "marker_offsets_s": timing["offsets_s"],
        "consistency": consistency["consistency"], "consistency_ci": consistency["ci"],
        "consistency_labelled": consistency["labelled"], "consistency_method": consistency["method"],
        "scenario_success_shares": [float(np.mean(g)) for g in outcomes.values() if len(g) >= 2]}


def _scenario_tables(rows: list[dict], suite: Suite, rng: np.random.Generator) -> tuple[dict, dict]:
    """Each scenario's success rate (Wilson interval) and each category's mean scenario success rate
    (bootstrapped over its scenarios)."""
    scenarios = {}
    for sid in sorted({r["scenario_id"] for r in rows}):
        mine = [r for r in rows if r["scenario_id"] == sid and r["outcome"] is not None]
        k, n = sum(r["outcome"] == "success" for r in mine), len(mine)
        scenarios[sid] = {"category": suite.scenario_by_id[sid].category, "success_rate": k / n if n else None,
                          "ci": list(wilson_interval(k, n)), "n": n}
    by_cat: dict[str, dict[str, list[int]]] = {}
    for sid, s in scenarios.items():
        if s["success_rate"] is not None:
            by_cat.setdefault(s["category"], {})[sid] = [s["success_rate"]]
    difficulty = {
        cat: {"mean_scenario_success_rate": float(np.mean([v[0] for v in d.values()])),
              "ci": bootstrap_interval(d, lambda g: float(np.mean([x[0] for x in g])), rng), "scenarios": len(d)}
        for cat, d in sorted(by_cat.items())}
    return scenarios, difficulty


def leaderboard(labels_dir: str | os.PathLike, seed: int = 0, with_truth: bool = False,
                use_references: bool = True) -> dict:
    """The leaderboard of a labels folder (after ``ingest``); see the module docstring.

    Args:
        labels_dir: the folder written by ``autorater label``.
        seed: bootstrap seed.
        with_truth: add the simulator truth of a synthetic suite (true rates, Spearman, MMRV, coverage).
        use_references: correct the labels with the suite's gold references (``rate_vs_gold``) where an
            agent has at least 2 labelled ones; otherwise, or when False, treat human labels as the truth.
    """
    job, rows = LabelsFolder(labels_dir).read_certified()  # provisional auto-labels wait for `autorater certify`
    suite = Suite.load(job["suite"])
    rng = np.random.default_rng(seed)
    gold = {r.continuation_id: r.outcome for r in suite.references} if use_references else None
    for r in rows:
        c = suite.get(r["continuation_id"])
        r["agent_id"], r["scenario_id"] = c.agent_id, c.scenario_id
        r["category"] = suite.scenario_by_id[c.scenario_id].category
        r["takeover_s"] = suite.takeover_of(r["continuation_id"])
    agents = sorted({r["agent_id"] for r in rows})
    categories = sorted({r["category"] for r in rows})

    board = {"suite": f"{suite.info.name}@{suite.info.version}", "model": job["model_name"], "agents": {},
             "categories": {}, "scenarios": {}}
    by_agent, pool_agents = group_estimates(rows, gold, "agent_id", seed)
    by_category, pool_categories = group_estimates(rows, gold, "category", seed)
    board["pooling"] = {"agents": pool_agents, "categories": pool_categories}
    both = pool_agents["counts"] if pool_agents["pooled"] and pool_categories["pooled"] else None
    counts = pool_agents.get("counts")
    counts = counts if counts and min(counts["pos"], counts["neg"]) >= MIN_POOLED else None
    pairs = _marker_pairs(rows, suite) if use_references else {}
    for agent in agents:
        board["agents"][agent] = _agent_entry([r for r in rows if r["agent_id"] == agent], by_agent[agent], gold, both,
                                              categories, counts, pairs, rng)
    board["categories"] = by_category
    board["scenarios"], board["difficulty_by_category"] = _scenario_tables(rows, suite, rng)
    per_agent, per_scenario, board["irt"] = ability_and_difficulty(rows, gold if use_references else None)
    none = {"ability": None, "ability_ci": [None, None]}
    for agent in agents:
        board["agents"][agent].update(per_agent.get(agent, none))
    for sid, scenario in board["scenarios"].items():
        scenario.update(per_scenario.get(sid, {"difficulty": None, "difficulty_ci": [None, None]}))
    board["irt"]["difficulty_by_category"] = _difficulty_by_category(board["scenarios"])
    # a rate clipped at 0 or 1 ties agents whose labels still differ: their label shares break the tie
    board["ranking"] = sorted(agents, key=lambda a: (-(board["agents"][a]["rate"] or 0),
                                                     -(board["agents"][a]["labelled_rate"] or 0)))
    board["waiting"] = sum(a["waiting"] for a in board["agents"].values())
    folder = LabelsFolder(labels_dir)
    board["certificates"] = certificates(folder.read_summary() if folder.summary.is_file() else {})
    if with_truth:
        board["truth"] = _truth_comparison(suite, board)
    return board


def certificates(summary: dict) -> dict:
    """The certificates the auto-labels counted here stand on (``autorater certify``): each certified stratum, the
    model that labels it and how many corrected audit answers would withdraw it (any certificate may still be
    withdrawn by corrections), and the withdrawn ones with their dates."""
    cert = summary.get("certification") or {}
    standing = [{"stratum": k, "model": s.get("model"), "auto": s.get("auto"),
                 "withdrawable_by": s.get("withdrawable_by")}
                for k, s in sorted((cert.get("strata") or {}).items()) if s.get("state") == "certified"]
    withdrawn = [r for r in cert.get("revoked") or [] if isinstance(r, dict)]
    return {"promise": cert.get("promise"), "standing": standing, "withdrawn": withdrawn}


MIN_SOURCE_REFERENCES = 5  # gold successes, and gold failures, a label source needs to have its own error rates


def ability_and_difficulty(rows: list[dict], gold: dict[str, str] | None,
                           model: str = "1pl") -> tuple[dict, dict, dict]:
    """Agent ability and scenario difficulty from the final labels by ``calibration.ItemResponseModel``.

    A reference continuation counts with its gold outcome (sensitivity and specificity 1). Every other
    label counts with the error rates of its source (``decision``: ``auto`` for the model, ``human`` for
    the annotators) measured on the references that source labelled, with one pseudo-success and one
    pseudo-failure (``(k + 1) / (n + 2)``); a source with fewer than ``MIN_SOURCE_REFERENCES`` gold successes
    or failures takes the rates of all the references pooled; with no references the labels count as
    they are. The uncertainty of those rates is not carried into the intervals.

    Args:
        rows: labels.jsonl rows with ``agent_id``, ``scenario_id``, ``decision``, ``outcome``.
        gold: continuation id -> gold outcome, or None.
        model: ``"1pl"`` or ``"2pl"``.

    Returns:
        ``({agent: {"ability", "ability_ci"}}, {scenario: {"difficulty", "difficulty_ci"}}, summary)``, the
        summary naming the model, the sources' error rates and the difficulty prior's sd.
    """
    from autorater.calibration.agents.irt import ItemResponseModel

    labelled = [r for r in rows if r.get("outcome") is not None]
    if not labelled:
        return {}, {}, {"model": model, "n_labels": 0}
    gold = gold or {}
    on_gold = [r for r in labelled if r["continuation_id"] in gold]

    def rates(subset) -> dict:
        c = error_counts([gold[r["continuation_id"]] == "success" for r in subset],
                         [r["outcome"] == "success" for r in subset])
        return {"sensitivity": (c["tp"] + 1) / (c["pos"] + 2), "specificity": (c["tn"] + 1) / (c["neg"] + 2), **c}

    pooled = rates(on_gold) if on_gold else None
    sources = {}
    for src in sorted({r["decision"] for r in labelled}):
        own = [r for r in on_gold if r["decision"] == src]
        counts = rates(own) if own else None
        if counts and min(counts["pos"], counts["neg"]) >= MIN_SOURCE_REFERENCES:
            sources[src] = {**counts, "from": "its own references"}
        elif pooled and min(pooled["pos"], pooled["neg"]) >= MIN_SOURCE_REFERENCES:
            sources[src] = {**pooled, "from": "all references pooled"}
        else:
            sources[src] = {"sensitivity": 1.0, "specificity": 1.0, "from": "no references: labels as they are"}
    keep = [r for r in labelled if r["continuation_id"] in gold or
            sources[r["decision"]]["sensitivity"] + sources[r["decision"]]["specificity"] - 1 > 0.2]
    y = [int((gold.get(r["continuation_id"]) or r["outcome"]) == "success") for r in keep]
    se = [1.0 if r["continuation_id"] in gold else sources[r["decision"]]["sensitivity"] for r in keep]
    sp = [1.0 if r["continuation_id"] in gold else sources[r["decision"]]["specificity"] for r in keep]
    fitted = ItemResponseModel(model=model).fit([r["agent_id"] for r in keep], [r["scenario_id"] for r in keep], y,
                                                se, sp)
    ability, difficulty = fitted.ability_interval(), fitted.difficulty_interval()
    per_agent = {str(a): {"ability": float(fitted.ability_[i]), "ability_ci": [float(v) for v in ability[i]]}
                 for i, a in enumerate(fitted.agents_)}
    per_scenario = {str(sid): {"difficulty": float(fitted.difficulty_[i]),
                               "difficulty_ci": [float(v) for v in difficulty[i]]}
                    for i, sid in enumerate(fitted.scenarios_)}
    summary = {"model": model, "n_labels": len(keep), "n_gold_labels": sum(r["continuation_id"] in gold for r in keep),
               "difficulty_sd": fitted.difficulty_sd_, "sources": sources, "level": fitted.level,
               "scale": "log-odds: ability is the log-odds of success on a scenario of difficulty 0 (the average)"}
    return per_agent, per_scenario, summary


def _difficulty_by_category(scenarios: dict) -> dict:
    """Per category: the mean item-response difficulty of its scenarios, with a normal interval from their
    standard errors (independence assumed) and the spread between scenarios."""
    by_cat: dict[str, list[tuple[float, float]]] = {}
    for s in scenarios.values():
        if s.get("difficulty") is not None:
            half = (s["difficulty_ci"][1] - s["difficulty_ci"][0]) / 2
            by_cat.setdefault(s["category"], []).append((s["difficulty"], half / Z95))
    out = {}
    for cat, v in sorted(by_cat.items()):
        d, se = np.array(v).T
        mean, half = float(d.mean()), float(Z95 * np.sqrt(np.sum(se ** 2)) / len(d))
        out[cat] = {"mean_difficulty": mean, "ci": [mean - half, mean + half], "sd_between_scenarios": float(d.std()),
                    "scenarios": len(d)}
    return out


def _truth_comparison(suite: Suite, board: dict) -> dict:
    from autorater.data.suite import load_truth

    truth = {t["continuation_id"]: t["outcome"] == "success" for t in load_truth(suite.root)}
    rates: dict[str, list[bool]] = {}
    for c in suite.continuations:
        rates.setdefault(c.agent_id, []).append(truth[c.continuation_id])
    true_rate = {a: float(np.mean(v)) for a, v in rates.items()}
    est = {a: board["agents"][a]["rate"] for a in true_rate if board["agents"][a]["rate"] is not None}
    plain = {a: board["agents"][a]["labelled_rate"] for a in true_rate
             if board["agents"][a]["labelled_rate"] is not None}
    covered = {a: bool(board["agents"][a]["ci"][0] - 1e-9 <= true_rate[a] <= board["agents"][a]["ci"][1] + 1e-9)
               for a in true_rate}
    out = {"true_rates": true_rate, **rank_metrics(est, true_rate), "labelled": rank_metrics(plain, true_rate),
           "covered": covered, "coverage": float(np.mean(list(covered.values())))}
    ability = {a: board["agents"][a].get("ability") for a in true_rate}
    out["ability"] = rank_metrics(true_rate, {a: v for a, v in ability.items() if v is not None})
    own = {a: board["agents"][a]["per_group"] for a in true_rate if board["agents"][a].get("per_group")}
    if own and all(v["rate"] is not None for v in own.values()):
        out["per_group"] = {**rank_metrics({a: v["rate"] for a, v in own.items()}, true_rate),
                            "coverage": float(np.mean([v["ci"][0] - 1e-9 <= true_rate[a] <= v["ci"][1] + 1e-9
                                                       for a, v in own.items()]))}
    return out


__all__ = ["ability_and_difficulty", "corrected_consistency", "corrected_time_to_success", "error_counts",
           "error_heterogeneity", "estimate", "group_estimates", "leaderboard", "marker_offsets", "rate_estimate",
           "rate_pooled", "rate_vs_gold", "wilson_interval"]
