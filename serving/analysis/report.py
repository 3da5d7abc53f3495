"""The leaderboard's report: a terminal table, the figures (rates with intervals, abilities, difficulty by
category, time to completion) and the HTML page with the board's JSON beside it.

Example:
    >>> board = leaderboard("labels-v3", with_truth=True)        # doctest: +SKIP
    >>> print(format_leaderboard(board))                          # doctest: +SKIP
    >>> write_report(board, "labels-v3/leaderboard.html")         # doctest: +SKIP
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
from pathlib import Path

import numpy as np

from autorater.data.files import write_text_atomic


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
    lines += certificate_lines(board.get("certificates") or {})
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


def png_base64(figure) -> str:
    buf = io.BytesIO()
    figure.savefig(buf, format="png", dpi=90)
    return base64.b64encode(buf.getvalue()).decode()


def leaderboard_figures(board: dict) -> dict[str, str]:
    """Base64 PNGs: the ranking with intervals, time-to-success CDFs, consistency, ability and difficulty."""
    return {name: png_base64(draw(board)) for name, draw in FIGURES.items()}


def _ranking_figure(board: dict):
    from autorater.calibration.plots import new_figure

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
    return f


def _time_figure(board: dict):
    from autorater.calibration.plots import new_figure

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
    return f


def _consistency_figure(board: dict):
    from autorater.calibration.plots import new_figure

    f = new_figure(6, 4)
    ax = f.subplots()
    shares = [board["agents"][a]["scenario_success_shares"] for a in board["ranking"]]
    if any(shares):
        ax.hist([s for s in shares], bins=np.linspace(0, 1, 6), label=board["ranking"], stacked=False)
        ax.legend(fontsize=8)
    ax.set(xlabel="share of an agent's continuations of one scenario that succeed", ylabel="scenarios",
           title="Consistency across continuations")
    return f


def _ability_figure(board: dict):
    from autorater.calibration.plots import new_figure

    agents = board["ranking"][::-1]
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
    return f


def _difficulty_by_category_figure(board: dict):
    from autorater.calibration.plots import new_figure

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
    return f


def _difficulty_figure(board: dict):
    from autorater.calibration.plots import new_figure

    f = new_figure(6, 4)
    ax = f.subplots()
    rates = [s["success_rate"] for s in board["scenarios"].values() if s["success_rate"] is not None]
    ax.hist(rates, bins=np.linspace(0, 1, 11), color="C2")
    ax.set(xlabel="scenario success rate over all agents", ylabel="scenarios", title="Scenario difficulty")
    return f


# The report's figures, in its order: each drawn from the board by one function
FIGURES = {"leaderboard": _ranking_figure, "time_to_completion": _time_figure, "consistency": _consistency_figure,
           "ability": _ability_figure, "difficulty_by_category": _difficulty_by_category_figure,
           "difficulty": _difficulty_figure}


def certificate_lines(certs: dict) -> list[str]:
    """What the counted auto-labels stand on: each standing certificate (corrections could still withdraw it) and
    each withdrawn one with its date."""
    lines = [f"certificate: {s['stratum']} ({s['model']}, {s['auto']} auto-labels) stands; "
             + (f"{s['withdrawable_by']} corrected audit answers would withdraw it" if s.get("withdrawable_by")
                else "corrections to its audit answers could withdraw it")
             for s in certs.get("standing") or []]
    lines += [f"certificate WITHDRAWN: {r['stratum']} (model {r.get('model')}) at certify run {r.get('run')}, "
              f"{r.get('at')}: its labels went to humans" for r in certs.get("withdrawn") or []]
    return lines


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
    lines = certificate_lines(board.get("certificates") or {})
    certs = "<p>" + "<br>".join(html.escape(line) for line in lines) + "</p>" if lines else ""
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>Leaderboard {html.escape(board['suite'])}</title>
<style>body{{font-family:sans-serif;max-width:1000px;margin:2em auto}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}</style></head><body>
<h1>Agent leaderboard: {html.escape(board['suite'])}</h1>
<p>Labels from {html.escape(board['model'])} (auto-labelled) and human annotators (the uncertain continuations
and a random audit slice), corrected by the suite's gold references (pooled across agents, or each agent's own),
else by the audit slice.{why}
Every rate comes with its 95% interval; {board['waiting']} continuations still waiting for a human label are left
out.</p>{truth}{certs}
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


__all__ = ["format_leaderboard", "leaderboard_figures", "png_base64", "write_report"]
