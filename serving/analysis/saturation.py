"""Saturation and sensitivity of a suite version: does it still tell today's agents apart?

Per version, from its final labels:

- the difficulty of every scenario and the ability of every agent, with 95% intervals, from the leaderboard's
  item-response fit (``serving.analysis.leaderboard.ability_and_difficulty``: labels weighed by their source's error
  on the gold references);
- the share of scenarios that *separate* the agents: labelled for at least two agents, and neither all passed nor
  all failed (with its Wilson interval);
- the scenarios of *middle* difficulty for today's agents: the fitted chance of success of at least one agent lies
  in ``MIDDLE`` (0.2 to 0.8), so the scenario says something about that agent's ability (its information about
  the abilities, ``sum_a p_a (1 - p_a)``, is kept beside it);
- plain warnings: the top agents' intervals reach the ceiling (the version cannot say how much better they are),
  too few scenarios separate the agents, too few middle-difficulty scenarios remain.

Example:
    >>> board = version_board(["labels-v1", "labels-v2"])          # doctest: +SKIP
    >>> board["saturation"]["v2"]["warnings"]                       # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np
from scipy import special

from autorater.calibration.agents.rates import wilson_interval

MIDDLE = (0.2, 0.8)  # a fitted chance of success of some agent in this range: a scenario of middle difficulty
CEILING = 0.99  # an interval whose top reaches this touches the ceiling
TOP_AGENTS = 2  # how many of the best agents the ceiling check looks at
MIN_MIDDLE_SHARE = 0.25  # fewer middle-difficulty scenarios than this share: warn
MIN_SEPARATING_SHARE = 0.5  # fewer separating scenarios than this share: warn


def separating(rows: list[dict]) -> dict[str, bool]:
    """Per scenario labelled for at least two agents: True when its labels are neither all success nor all failure."""
    outcomes: dict[str, list[bool]] = {}
    agents: dict[str, set] = {}
    for r in rows:
        if r.get("outcome") is not None:
            outcomes.setdefault(r["scenario_id"], []).append(r["outcome"] == "success")
            agents.setdefault(r["scenario_id"], set()).add(r["agent_id"])
    return {sid: 0 < sum(v) < len(v) for sid, v in outcomes.items() if len(agents[sid]) >= 2}


def saturation(rows: list[dict], gold: dict[str, str] | None, cells: dict[str, dict | None]) -> dict:
    """One version's saturation (see the module docstring).

    Args:
        rows: the version's label rows (``agent_id``, ``scenario_id``, ``decision``, ``outcome``...).
        gold: continuation id -> gold outcome (the references), or None.
        cells: per agent, its leaderboard cell on this version (``rate``, ``ci``), or None.
    """
    from autorater.serving.analysis.leaderboard import ability_and_difficulty

    per_agent, per_scenario, _ = ability_and_difficulty(rows, gold)
    split = separating(rows)
    abilities = np.array([v["ability"] for v in per_agent.values()])
    scenarios = {}
    for sid, d in sorted(per_scenario.items(), key=lambda kv: kv[1]["difficulty"]):
        chances = special.expit(abilities - d["difficulty"])
        scenarios[sid] = {**d, "mean_chance": float(chances.mean()) if chances.size else None,
                          "information": float(np.sum(chances * (1 - chances))), "separates": split.get(sid),
                          "middle": bool(np.any((chances >= MIDDLE[0]) & (chances <= MIDDLE[1])))}
    n_split, k_split = len(split), sum(split.values())
    n, middle = len(scenarios), sum(s["middle"] for s in scenarios.values())
    difficulties = np.array([s["difficulty"] for s in scenarios.values()])
    out = {"scenarios": n, "separating": k_split, "separating_of": n_split,
           "separating_share": k_split / n_split if n_split else None,
           "separating_ci": list(wilson_interval(k_split, n_split)),
           "all_pass": sum(1 for sid, s in split.items() if not s and _all_pass(rows, sid)),
           "middle": middle, "middle_share": middle / n if n else None, "middle_range": list(MIDDLE),
           "difficulty_quantiles": {str(q): float(np.quantile(difficulties, q)) for q in (0.1, 0.25, 0.5, 0.75, 0.9)}
           if n else {}, "abilities": per_agent, "scenario_difficulty": scenarios}
    out["all_fail"] = n_split - k_split - out["all_pass"]
    out["warnings"] = _warnings(out, cells)
    return out


def _all_pass(rows: list[dict], sid: str) -> bool:
    return all(r["outcome"] == "success" for r in rows if r["scenario_id"] == sid and r.get("outcome") is not None)


def _warnings(sat: dict, cells: dict[str, dict | None]) -> list[str]:
    out = []
    ranked = sorted((a for a, c in cells.items() if c and c.get("rate") is not None), key=lambda a: -cells[a]["rate"])
    touching = [a for a in ranked[:TOP_AGENTS] if cells[a]["ci"][1] >= CEILING]
    if touching:
        shown = ", ".join(f"{a} {cells[a]['rate']:.2f} [{cells[a]['ci'][0]:.2f}, {cells[a]['ci'][1]:.2f}]"
                          for a in touching)
        out.append(f"the top agents' intervals reach the ceiling ({shown}): this version cannot say how much better "
                   f"they are; the next one needs harder scenarios")
    if sat["separating_share"] is not None and sat["separating_share"] < MIN_SEPARATING_SHARE:
        out.append(f"only {sat['separating']} of {sat['separating_of']} scenarios ({sat['separating_share']:.0%}) "
                   f"separate the agents: on the others every agent passed ({sat['all_pass']}) or every agent "
                   f"failed ({sat['all_fail']})")
    if sat["middle_share"] is not None and sat["middle_share"] < MIN_MIDDLE_SHARE:
        out.append(f"only {sat['middle']} of {sat['scenarios']} scenarios ({sat['middle_share']:.0%}) are of middle "
                   f"difficulty for today's agents (a fitted chance of success between {MIDDLE[0]:.1f} and "
                   f"{MIDDLE[1]:.1f} for at least one agent): the next version needs more (`autorater suite propose`)")
    return out


def saturation_figure(board: dict, path=None):
    """One panel per version: every scenario's difficulty with its 95% interval, easiest first, and each agent's
    ability as a line; scenarios between the lines tell agents apart. Written to ``path`` (PNG) if given."""
    from autorater.calibration.plots import new_figure

    versions = [v for v in board["versions"] if v in board.get("saturation", {})]
    figure = new_figure(4.2 * max(1, len(versions)), 4.2)
    axes = np.atleast_1d(figure.subplots(1, max(1, len(versions)), sharey=True))
    colours = sorted({a for v in versions for a in board["saturation"][v]["abilities"]})
    for ax, v in zip(axes, versions):
        sat = board["saturation"][v]
        items = list(sat["scenario_difficulty"].values())
        x = np.arange(len(items))
        d = np.array([s["difficulty"] for s in items])
        lo, hi = np.array([s["difficulty_ci"][0] for s in items]), np.array([s["difficulty_ci"][1] for s in items])
        colour = ["k" if s["middle"] else "0.6" for s in items]
        ax.vlines(x, lo, hi, colors=colour, lw=0.8)
        ax.scatter(x, d, c=colour, s=8, zorder=3)
        for i, (agent, a) in enumerate(sorted(sat["abilities"].items(), key=lambda kv: -kv[1]["ability"])):
            colour = f"C{colours.index(agent) % 10}"  # one colour per agent in every panel
            ax.axhline(a["ability"], color=colour, ls="--", lw=0.8)
            left = i % 2 == 1  # alternate sides, so that agents of one ability stay readable
            ax.text(-0.5 if left else len(items) - 0.5, a["ability"], agent, fontsize=7, color=colour,
                    ha="left" if left else "right", va="bottom")
        share = "-" if sat["separating_share"] is None else f"{sat['separating_share']:.0%}"
        ax.set(title=f"{v}: {share} separate, {sat['middle']}/{sat['scenarios']} middle", xlabel="scenarios, easiest "
               "first")
    axes[0].set_ylabel("difficulty / ability (log-odds, 95% interval)")
    if path is not None:
        figure.savefig(path, dpi=110)
    return figure


__all__ = ["CEILING", "MIDDLE", "MIN_MIDDLE_SHARE", "MIN_SEPARATING_SHARE", "TOP_AGENTS", "saturation",
           "saturation_figure", "separating"]
