"""The cross-version leaderboard's report (``versions.version_board``): a terminal table, a plot per agent
across versions, the saturation figure, and an HTML page with the board's JSON beside it.

Example:
    >>> board = version_board(["labels-v1", "labels-v2"])                 # doctest: +SKIP
    >>> print(format_version_board(board))                                 # doctest: +SKIP
    >>> write_version_report(board, "leaderboard-versions.html")            # doctest: +SKIP
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path

import numpy as np

from autorater.data.files import write_text_atomic
from autorater.serving.analysis.report import png_base64


def _cell(c: dict | None) -> str:
    if not c or c.get("rate") is None:
        return "-"
    return f"{c['rate']:.2f} [{c['ci'][0]:.2f}, {c['ci'][1]:.2f}]"


def _columns(board: dict) -> list[str]:
    return list(board["versions"]) + [board["union"]]


def _table(board: dict, cells_of, agents: list[str], indent: str = "") -> list[str]:
    """Rows ``agent  cell(v1)  cell(v2) ... cell(all)``; ``cells_of(column)`` gives a column's cells by agent."""
    width = max(14, *(len(a) + 2 for a in agents))
    lines = [indent + f"{'agent':<{width}}" + "".join(f"{c[:22]:<24}" for c in _columns(board))]
    for agent in agents:
        lines.append(indent + f"{agent:<{width}}" + "".join(f"{_cell(cells_of(c).get(agent)):<24}"
                                                           for c in _columns(board)))
    return lines


def format_version_board(board: dict) -> str:
    """The board as the CLI prints it: scores per version and on the union, per category and tag, rank agreement,
    saturation with its warnings."""
    sources = ", ".join(f"{s['path']} ({s['suite']})" for s in board["sources"])
    agents = board["ranking"]
    lines = [f"success rate [95% interval] per version and on {board['union']}; sources: {sources}"]

    def overall(column):
        return {a: (v["union"] if column == board["union"] else v["versions"].get(column))
                for a, v in board["agents"].items()}

    lines += _table(board, overall, agents)
    counts = board["counts"]
    lines.append(f"{'scenarios':<{max(14, *(len(a) + 2 for a in agents))}}" +
                 "".join(f"{counts[c]['scenarios']:<24}" for c in _columns(board)))
    for title, groups in (("category", board["categories"]), ("tag", board["tags"])):
        for name, by_column in groups.items():
            lines.append(f"{title} {name}:")
            lines += _table(board, lambda column, by=by_column: by.get(column, {}), agents, indent="  ")
    lines += [agreement_text(r) for r in board["rank_agreement"]]
    for version, sat in board.get("saturation", {}).items():
        lines.append(format_saturation(version, sat))
    return "\n".join(lines)


def agreement_text(r: dict) -> str:
    """One pair of versions' rank agreement in a line."""
    value = "-" if r["spearman"] is None else f"{r['spearman']:.2f}"
    ci = "" if r["ci"][0] is None else f" [{r['ci'][0]:.2f}, {r['ci'][1]:.2f}]"
    return (f"rank agreement {r['versions'][0]} vs {r['versions'][1]}: Spearman {value}{ci} over {r['agents']} agents "
            f"(label shares; 95% bootstrap interval over scenarios)")


def format_saturation(version: str, sat: dict) -> str:
    """One version's saturation in two or three lines, its warnings last."""
    share = "-" if sat["separating_share"] is None else \
        f"{sat['separating_share']:.0%} [{sat['separating_ci'][0]:.0%}, {sat['separating_ci'][1]:.0%}]"
    q = sat["difficulty_quantiles"]
    spread = f"; difficulty median {q['0.5']:+.2f} (10%-90%: {q['0.1']:+.2f} to {q['0.9']:+.2f})" if q else ""
    lines = [f"saturation {version}: {sat['separating']} of {sat['separating_of']} scenarios separate the agents "
             f"({share}); {sat['all_pass']} all pass, {sat['all_fail']} all fail; {sat['middle']} of "
             f"{sat['scenarios']} of middle difficulty{spread}"]
    lines += [f"  WARNING {version}: {w}" for w in sat["warnings"]]
    return "\n".join(lines)


def agent_figure(board: dict, path=None):
    """One small panel per agent: its success rate with the 95% interval on each version and on the union."""
    from autorater.calibration.plots import new_figure

    agents, columns = board["ranking"], _columns(board)
    cols = min(4, max(1, len(agents)))
    rows = int(np.ceil(len(agents) / cols))
    figure = new_figure(3.0 * cols, 2.4 * rows + 0.4)
    axes = np.atleast_1d(figure.subplots(rows, cols, sharey=True)).ravel()
    for ax, agent in zip(axes, agents):
        v = board["agents"][agent]
        for x, column in enumerate(columns):
            c = v["union"] if column == board["union"] else v["versions"].get(column)
            if c and c.get("rate") is not None:
                err = [[max(0.0, c["rate"] - c["ci"][0])], [max(0.0, c["ci"][1] - c["rate"])]]
                ax.errorbar(x, c["rate"], yerr=err, fmt="o", capsize=4,
                            color="k" if column == board["union"] else "C0")
        ax.set_xticks(range(len(columns)))
        ax.set_xticklabels(["all" if c == board["union"] else c for c in columns], fontsize=8)
        ax.set(title=agent, ylim=(-0.02, 1.02), xlim=(-0.5, len(columns) - 0.5))
    for ax in axes[len(agents):]:
        ax.set_visible(False)
    axes[0].set_ylabel("success rate (95% interval)")
    if path is not None:
        figure.savefig(path, dpi=110)
    return figure


def _html_table(board: dict, cells_of) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in _columns(board))
    body = "".join(f"<tr><td>{html.escape(a)}</td>" + "".join(f"<td>{_cell(cells_of(c).get(a))}</td>"
                                                             for c in _columns(board)) + "</tr>"
                   for a in board["ranking"])
    return f"<table><tr><th>agent</th>{head}</tr>{body}</table>"


def write_version_report(board: dict, out_html: str | os.PathLike) -> Path:
    """The HTML page (figures inline), the board's JSON next to it (same name, .json), and the two figures as PNGs
    (``-agents.png``, ``-saturation.png``)."""
    from autorater.serving.analysis.saturation import saturation_figure

    out_html = Path(out_html)
    out_html.parent.mkdir(parents=True, exist_ok=True)
    agents_png, saturation_png = (out_html.with_name(out_html.stem + s) for s in ("-agents.png", "-saturation.png"))
    figures = {"agents": agent_figure(board, agents_png)}
    if board.get("saturation"):
        figures["saturation"] = saturation_figure(board, saturation_png)
    images = {k: f'<img src="data:image/png;base64,{png_base64(f)}">' for k, f in figures.items()}

    def overall(column):
        return {a: (v["union"] if column == board["union"] else v["versions"].get(column))
                for a, v in board["agents"].items()}

    parts = [f"<h1>Agents across suite versions</h1><p>{html.escape(', '.join(s['suite'] for s in board['sources']))}. "
             f"Every cell is the leaderboard's estimate with its 95% interval (labels corrected by the gold "
             f"references).</p>", _html_table(board, overall), images["agents"]]
    for title, groups in (("Category", board["categories"]), ("Tag", board["tags"])):
        for name, by_column in groups.items():
            parts += [f"<h2>{title} {html.escape(name)}</h2>",
                      _html_table(board, lambda column, by=by_column: by.get(column, {}))]
    agreement = "".join(f"<li>{html.escape(agreement_text(r))}</li>" for r in board["rank_agreement"])
    parts.append(f"<h2>Rank agreement between versions</h2><ul>{agreement}</ul>")
    if "saturation" in images:
        text = "".join(f"<pre>{html.escape(format_saturation(v, s))}</pre>" for v, s in board["saturation"].items())
        parts += ["<h2>Saturation</h2>", text, images["saturation"]]
    page = ("<!doctype html><html><head><meta charset=\"utf-8\"><title>Agents across versions</title><style>"
            "body{font-family:sans-serif;max-width:1100px;margin:2em auto}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}</style></head><body>"
            + "\n".join(parts) + "</body></html>\n")
    write_text_atomic(out_html, page)
    write_text_atomic(out_html.with_suffix(".json"), json.dumps(board, indent=1) + "\n")
    return out_html


__all__ = ["agent_figure", "agreement_text", "format_saturation", "format_version_board", "write_version_report"]
