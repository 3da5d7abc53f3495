"""PNG figures for calibration reports. matplotlib is imported inside each function and draws with
the Agg canvas directly (no pyplot, no global backend switch), so importing this module is cheap."""

from __future__ import annotations

import os
from pathlib import Path

from .metrics import expected_calibration_error, reliability_curve


def new_figure(width: float, height: float):
    """A matplotlib ``Figure`` attached to an Agg canvas, laid out "constrained": draw without pyplot.

    Args:
        width: inches.
        height: inches.

    Example:
        >>> figure = new_figure(6, 4)
        >>> ax = figure.subplots()
        >>> figure.savefig("plot.png", dpi=120)  # doctest: +SKIP
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def plot_reliability(p_before, p_after, y, path, n_bins: int = 10) -> None:
    """Reliability diagram before and after calibration, ECE in the legend.

    Args:
        p_before: (n,) uncalibrated P(success), e.g. ``sigmoid(logits)``.
        p_after: (n,) calibrated P(success).
        y: (n,) outcomes, 1 = success.
        path: PNG file to write.
        n_bins: number of equal-width bins.
    """
    figure = new_figure(5, 5)
    ax = figure.subplots()
    ax.plot([0, 1], [0, 1], color="grey", linestyle="--", label="perfectly calibrated")
    for name, p in (("before", p_before), ("after", p_after)):
        mean_p, frac_pos, _ = reliability_curve(p, y, n_bins)
        ece = expected_calibration_error(p, y, n_bins)
        ax.plot(mean_p, frac_pos, marker="o", label=f"{name} (ECE {ece:.3f})")
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="mean predicted P(success)", ylabel="observed success rate")
    ax.set_title("Reliability diagram")
    ax.legend(loc="upper left")
    save_png(figure, path)


def plot_risk_coverage(curve: dict, operating_point, path) -> None:
    """Error of the auto-labelled part against coverage along the selective path.

    Args:
        curve: ``SelectivePolicy.risk_coverage_curve(p, y)``.
        operating_point: ``(coverage, error)`` chosen by the policy, e.g.
            ``(policy.expected_coverage_, 1 - policy.empirical_agreement_)``, or None.
        path: PNG file to write.
    """
    figure = new_figure(6, 4.5)
    ax = figure.subplots()
    ax.plot(curve["coverage"], curve["error"], label="error on references")
    ax.plot(curve["coverage"], curve["error_upper_bound"], linestyle=":", label="upper confidence bound")
    ax.axhline(curve["target_error"], color="grey", linestyle="--", label="1 - target agreement")
    if operating_point is not None:
        ax.plot(*operating_point, marker="*", markersize=14, linestyle="none", color="black", label="chosen")
    ax.set(xlim=(0, 1), ylim=(0, max(0.5, 2 * curve["target_error"])))
    ax.set(xlabel="coverage (share auto-labelled)", ylabel="error rate of the auto-labelled part")
    ax.set_title("Risk-coverage curve")
    ax.legend(loc="upper left")
    save_png(figure, path)


def plot_agreement_table(report: dict, path) -> None:
    """Forest plot of each rater's overall balanced accuracy and kappa with their intervals.

    Args:
        report: ``agreement_report(...)``.
        path: PNG file to write.
    """
    rows = report["rows"]
    labels = [row["name"] for row in rows]
    figure = new_figure(10, 1 + 0.4 * len(rows))
    axes = figure.subplots(1, 2, sharey=True)
    for ax, metric in zip(axes, ("balanced_accuracy", "cohen_kappa")):
        for i, row in enumerate(rows):
            value, (lo, hi) = row["overall"][metric], row["overall"]["ci"][metric]
            if value is not None:
                ax.plot(value, i, marker="o", color="C0" if row["kind"] == "autorater" else "C1")
            if lo is not None and hi is not None:
                ax.hlines(i, lo, hi, color="grey")
        ax.set(xlabel=metric.replace("_", " "), yticks=range(len(rows)), yticklabels=labels)
        ax.set_title(metric.replace("_", " "))
    axes[0].set_ylabel("rater")
    axes[0].invert_yaxis()  # first row on top; the axes share y
    figure.suptitle(f"Agreement on {report['n_references']} reference episodes ({100 * report['level']:g}% intervals)")
    save_png(figure, path)


def save_png(figure, path) -> None:
    """Write ``figure`` as PNG to ``path`` atomically (a temp file, fsynced, renamed over it)."""
    tmp = Path(str(path) + ".tmp")
    with open(tmp, "wb") as f:
        figure.savefig(f, format="png")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
