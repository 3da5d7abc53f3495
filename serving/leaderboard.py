"""``autorater leaderboard``: per-agent success rates with honest 95% intervals, and the figures around them.

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
the item-response model's ``ability`` per agent and ``difficulty`` per scenario (``calibration.irt``).
The report is JSON plus an HTML page with the figures.

Example:
    >>> board = leaderboard("labels-v3")                  # doctest: +SKIP
    >>> board["agents"]["expert"]["rate"], board["agents"]["expert"]["ci"]  # doctest: +SKIP
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
from pathlib import Path

import numpy as np

from calibration.metrics import rank_metrics
from calibration.rates import (
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
from data.files import write_text_atomic
from data.suite import Suite
from serving.folder import LabelsFolder


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
    job, rows = LabelsFolder(labels_dir).read_finished()
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
        mine = [r for r in rows if r["agent_id"] == agent]
        est = by_agent[agent]
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
        board["agents"][agent] = {
            **est, "continuations": len(mine), "waiting": waiting,
            "per_category": {cat: estimate([r for r in mine if r["category"] == cat], gold, both)
                             for cat in categories if any(r["category"] == cat for r in mine)},
            "time_to_success_s": timing["times_s"],
            "median_time_to_success_s": timing["median_s"], "median_time_ci": timing["ci"],
            "median_time_labelled_s": timing["labelled_median_s"], "marker_offsets_s": timing["offsets_s"],
            "consistency": consistency["consistency"], "consistency_ci": consistency["ci"],
            "consistency_labelled": consistency["labelled"], "consistency_method": consistency["method"],
            "scenario_success_shares": [float(np.mean(g)) for g in outcomes.values() if len(g) >= 2]}
    board["categories"] = by_category
    for sid in sorted({r["scenario_id"] for r in rows}):
        mine = [r for r in rows if r["scenario_id"] == sid and r["outcome"] is not None]
        k, n = sum(r["outcome"] == "success" for r in mine), len(mine)
        board["scenarios"][sid] = {"category": suite.scenario_by_id[sid].category, "success_rate": k / n if n else None,
                                   "ci": list(wilson_interval(k, n)), "n": n}
    by_cat: dict[str, dict[str, list[int]]] = {}
    for sid, s in board["scenarios"].items():
        if s["success_rate"] is not None:
            by_cat.setdefault(s["category"], {})[sid] = [s["success_rate"]]
    board["difficulty_by_category"] = {
        cat: {"mean_scenario_success_rate": float(np.mean([v[0] for v in d.values()])),
              "ci": bootstrap_interval(d, lambda g: float(np.mean([x[0] for x in g])), rng), "scenarios": len(d)}
        for cat, d in sorted(by_cat.items())}
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
    if with_truth:
        board["truth"] = _truth_comparison(suite, board)
    return board


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
    from calibration.irt import ItemResponseModel

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
    from data.suite import load_truth

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


# ----------------------------------------------------------------------------------------------
# Text, figures, HTML


def format_leaderboard(board: dict) -> str:
    lines = [f"leaderboard of {board['suite']} (labels: {board['model']} + humans)",
             f"{'rank':>4}  {'agent':<14}{'success rate':>13}  {'95% interval':<16}{'labels':>7}{'human':>6}"
             f"{'auto':>6}{'audit':>6}"
             f"{'gold':>6}{'wait':>6}  {'median t (s)':>12}  {'consistency':>11}  method"]
    for i, agent in enumerate(board["ranking"], start=1):
        a = board["agents"][agent]
        rate = "-" if a["rate"] is None else f"{a['rate']:.3f}"
        t = "-" if a["median_time_to_success_s"] is None else f"{a['median_time_to_success_s']:.2f}"
        cons = "-" if a["consistency"] is None else f"{a['consistency']:.2f}"
        plain = "-" if a["labelled_rate"] is None else f"{a['labelled_rate']:.3f}"
        lines.append(f"{i:>4}  {agent:<14}{rate:>13}  [{a['ci'][0]:.3f}, {a['ci'][1]:.3f}]  {plain:>7}{a['n_human']:>6}"
                     f"{a['n_auto']:>6}{a['n_audit']:>6}{a['n_gold']:>6}{a['waiting']:>6}  {t:>12}  {cons:>11}  "
                     f"{a['method']}")
    with_ability = [a for a in board["ranking"] if board["agents"][a].get("ability") is not None]
    if with_ability:
        by_ability = sorted(with_ability, key=lambda a: -board["agents"][a]["ability"])
        lines.append(f"ability ({board['irt']['model'].upper()} item-response model, log-odds on an average scenario, "
                     f"95% interval): " + ", ".join(f"{a} {board['agents'][a]['ability']:+.2f} "
                                                   f"[{board['agents'][a]['ability_ci'][0]:+.2f}, "
                                                   f"{board['agents'][a]['ability_ci'][1]:+.2f}]" for a in by_ability))
    lines.append("per category: " + ", ".join(f"{c} {v['rate']:.2f} [{v['ci'][0]:.2f}, {v['ci'][1]:.2f}]"
                                               for c, v in board["categories"].items() if v["rate"] is not None))
    if board["waiting"]:
        lines.append(f"note: {board['waiting']} continuations still wait for a human label and are left out")
    pooling = board.get("pooling", {}).get("agents", {})
    if pooling.get("why"):
        lines.append(f"references: {pooling['why']}")
    if "truth" in board:
        t = board["truth"]
        lines.append(f"against the simulator truth: Spearman {t['spearman']:.3f}, MMRV {t['mmrv']:.3f}, "
                     f"intervals cover the true rate for {t['coverage']:.0%} of agents; the plain label shares: "
                     f"Spearman {t['labelled']['spearman']:.3f}, MMRV {t['labelled']['mmrv']:.3f}")
        if t.get("ability", {}).get("n_agents"):
            lines.append(f"  abilities against the true rates: Spearman {t['ability']['spearman']:.3f}")
        if "per_group" in t:
            lines.append(f"  each agent corrected by its own references instead: "
                         f"Spearman {t['per_group']['spearman']:.3f}, intervals cover {t['per_group']['coverage']:.0%}")
    lines.append("labels: the plain share of successes among the final labels (no correction, no interval)")
    return "\n".join(lines)


def _png(figure) -> str:
    buf = io.BytesIO()
    figure.savefig(buf, format="png", dpi=90)
    return base64.b64encode(buf.getvalue()).decode()


def leaderboard_figures(board: dict) -> dict[str, str]:
    """Base64 PNGs: the ranking with intervals, time-to-success CDFs, consistency and difficulty."""
    from calibration.plots import new_figure

    figs = {}
    agents = board["ranking"][::-1]
    f = new_figure(6, 0.5 * len(agents) + 1.5)
    ax = f.subplots()
    for i, a in enumerate(agents):
        v = board["agents"][a]
        if v["rate"] is not None:
            ax.errorbar(v["rate"], i, xerr=[[max(0.0, v["rate"] - v["ci"][0])], [max(0.0, v["ci"][1] - v["rate"])]],
                        fmt="o", capsize=4, color="C0")
        if "truth" in board:
            ax.plot(board["truth"]["true_rates"][a], i, "x", color="C3", label="truth" if i == 0 else None)
    ax.set(yticks=range(len(agents)), yticklabels=agents, xlim=(0, 1), xlabel="success rate (95% interval)",
           title="Agent leaderboard")
    if "truth" in board:
        ax.legend(loc="lower right")
    figs["leaderboard"] = _png(f)

    f = new_figure(6, 4)
    ax = f.subplots()
    for a in board["ranking"]:
        t = board["agents"][a]["time_to_success_s"]
        if t:
            n = board["agents"][a]["continuations"] - board["agents"][a]["waiting"]
            ax.step(t, np.arange(1, len(t) + 1) / max(n, 1), where="post", label=a)
    ax.set(xlabel="seconds after takeover", ylabel="share of continuations succeeded",
           title="Time to completion (CDF of success markers)", ylim=(0, 1))
    ax.legend(fontsize=8)
    figs["time_to_completion"] = _png(f)

    f = new_figure(6, 4)
    ax = f.subplots()
    shares = [board["agents"][a]["scenario_success_shares"] for a in board["ranking"]]
    if any(shares):
        ax.hist([s for s in shares], bins=np.linspace(0, 1, 6), label=board["ranking"], stacked=False)
        ax.legend(fontsize=8)
    ax.set(xlabel="share of an agent's continuations of one scenario that succeed", ylabel="scenarios",
           title="Consistency across continuations")
    figs["consistency"] = _png(f)

    f = new_figure(6, 0.5 * len(agents) + 1.5)
    ax = f.subplots()
    for i, a in enumerate(agents):
        v = board["agents"][a]
        if v.get("ability") is not None:
            xerr = [[v["ability"] - v["ability_ci"][0]], [v["ability_ci"][1] - v["ability"]]]
            ax.errorbar(v["ability"], i, xerr=xerr, fmt="o", capsize=4, color="C1")
    ax.axvline(0, color="grey", lw=0.5)
    ax.set(yticks=range(len(agents)), yticklabels=agents, xlabel="ability (log-odds of success on an average "
           "scenario, 95% interval)", title="Agent ability (item-response model)")
    figs["ability"] = _png(f)

    f = new_figure(6, 4)
    ax = f.subplots()
    cats = sorted({s["category"] for s in board["scenarios"].values() if s.get("difficulty") is not None})
    for i, cat in enumerate(cats):
        mine = [s for s in board["scenarios"].values() if s["category"] == cat and s.get("difficulty") is not None]
        jitter = np.linspace(-0.25, 0.25, len(mine)) if len(mine) > 1 else [0.0]
        for x, s in zip(jitter, mine):
            ax.errorbar(i + x, s["difficulty"], yerr=[[s["difficulty"] - s["difficulty_ci"][0]],
                                                      [s["difficulty_ci"][1] - s["difficulty"]]],
                        fmt=".", color="C2", alpha=0.4, lw=0.5)
        summary = board.get("irt", {}).get("difficulty_by_category", {}).get(cat)
        if summary:
            ax.errorbar(i, summary["mean_difficulty"], yerr=[[summary["mean_difficulty"] - summary["ci"][0]],
                                                             [summary["ci"][1] - summary["mean_difficulty"]]],
                        fmt="s", color="k", capsize=6)
    ax.set(xticks=range(len(cats)), xlabel="category", ylabel="difficulty (log-odds, 95% interval)",
           title="Scenario difficulty by category (black: category mean)")
    ax.set_xticklabels(cats, rotation=30, ha="right", fontsize=8)
    figs["difficulty_by_category"] = _png(f)

    f = new_figure(6, 4)
    ax = f.subplots()
    rates = [s["success_rate"] for s in board["scenarios"].values() if s["success_rate"] is not None]
    ax.hist(rates, bins=np.linspace(0, 1, 11), color="C2")
    ax.set(xlabel="scenario success rate over all agents", ylabel="scenarios", title="Scenario difficulty")
    figs["difficulty"] = _png(f)
    return figs


def write_report(board: dict, out_html: str | os.PathLike) -> Path:
    """The HTML page (figures inline) and the JSON next to it (same name, .json)."""
    out_html = Path(out_html)
    out_html.parent.mkdir(parents=True, exist_ok=True)
    figs = leaderboard_figures(board)
    rows = "".join(
        f"<tr><td>{i}</td><td>{html.escape(a)}</td><td>{_fmt(board['agents'][a]['rate'])}</td>"
        f"<td>[{board['agents'][a]['ci'][0]:.3f}, {board['agents'][a]['ci'][1]:.3f}]</td>"
        f"<td>{_fmt(board['agents'][a]['labelled_rate'])}</td>"
        f"<td>{board['agents'][a]['n_human']}</td><td>{board['agents'][a]['n_auto']}</td>"
        f"<td>{board['agents'][a]['n_audit']}</td><td>{board['agents'][a]['n_gold']}</td>"
        f"<td>{board['agents'][a]['waiting']}</td>"
        f"<td>{_fmt(board['agents'][a]['median_time_to_success_s'])} {_ci(board['agents'][a]['median_time_ci'])}</td>"
        f"<td>{_fmt(board['agents'][a]['consistency'])} {_ci(board['agents'][a]['consistency_ci'])}</td>"
        f"<td>{html.escape(board['agents'][a]['method'])}</td>"
        f"<td>{_fmt(board['agents'][a].get('ability'))} {_ci(board['agents'][a].get('ability_ci'))}</td></tr>"
        for i, a in enumerate(board["ranking"], start=1))
    cats = "".join(f"<tr><td>{html.escape(c)}</td><td>{_fmt(v['rate'])}</td><td>{_ci(v['ci'])}</td>"
                   f"<td>{_fmt(board['difficulty_by_category'].get(c, {}).get('mean_scenario_success_rate'))} "
                   f"{_ci(board['difficulty_by_category'].get(c, {}).get('ci', [None, None]))}</td></tr>"
                   for c, v in board["categories"].items())
    why = board.get("pooling", {}).get("agents", {}).get("why")
    why = f" References: {html.escape(why)}." if why else ""
    truth = ""
    if "truth" in board:
        t = board["truth"]
        truth = (f"<p>Against the simulator truth: Spearman {t['spearman']:.3f}, MMRV {t['mmrv']:.3f}; the 95% "
                 f"intervals contain the true rate for {t['coverage']:.0%} of agents.</p>")
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>Leaderboard {html.escape(board['suite'])}</title>
<style>body{{font-family:sans-serif;max-width:1000px;margin:2em auto}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}</style></head><body>
<h1>Agent leaderboard: {html.escape(board['suite'])}</h1>
<p>Labels from {html.escape(board['model'])} (auto-labelled) and human annotators (the uncertain continuations
and a random audit slice), corrected by the suite's gold references (pooled across agents, or each agent's own),
else by the audit slice.{why}
Every rate comes with its 95% interval; {board['waiting']} continuations still waiting for a human label are left
out.</p>{truth}
<table><tr><th>rank</th><th>agent</th><th>success rate</th><th>95% interval</th><th>plain share of the labels</th>
<th>human</th><th>auto</th>
<th>audit</th><th>gold</th><th>waiting</th><th>median time to success (s)</th><th>consistency</th><th>method</th>
<th>ability (log-odds)</th></tr>{rows}</table>
<img src="data:image/png;base64,{figs['leaderboard']}">
<h2>Ability and difficulty</h2><p>A {html.escape(board.get('irt', {}).get('model', '1pl').upper())} item-response model
fitted to every label at once: an agent's ability is its log-odds of success on an average scenario, a scenario's
difficulty how much harder it is; labels count by their source's error on the gold references. Median times and
consistency are corrected the same way (marker lag per source; label noise).</p>
<img src="data:image/png;base64,{figs['ability']}"><img src="data:image/png;base64,{figs['difficulty_by_category']}">
<h2>Per category</h2><table><tr><th>category</th><th>success rate</th><th>95% interval</th>
<th>mean scenario success rate</th></tr>{cats}</table>
<h2>Time to completion</h2><img src="data:image/png;base64,{figs['time_to_completion']}">
<h2>Consistency and scenario difficulty</h2><img src="data:image/png;base64,{figs['consistency']}">
<img src="data:image/png;base64,{figs['difficulty']}">
</body></html>
"""
    write_text_atomic(out_html, page)
    write_text_atomic(out_html.with_suffix(".json"), json.dumps(board, indent=1) + "\n")
    return out_html


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.3f}"


def _ci(ci) -> str:
    return "" if ci is None or ci[0] is None else f"[{ci[0]:.2f}, {ci[1]:.2f}]"


__all__ = ["ability_and_difficulty", "corrected_consistency", "corrected_time_to_success", "error_counts",
           "error_heterogeneity", "estimate", "format_leaderboard", "group_estimates", "leaderboard",
           "leaderboard_figures", "marker_offsets", "rate_estimate", "rate_pooled", "rate_vs_gold", "wilson_interval",
           "write_report"]
