"""``autorater compare``: the latest MLflow runs side by side (key params and metrics), as dicts or a table.

Example:
    >>> rows = compare_runs("sqlite:///runs/mlflow.db", kind="train")   # doctest: +SKIP
    >>> print(format_runs_table(rows))                                   # doctest: +SKIP
"""

from __future__ import annotations

import datetime
import fnmatch
from typing import Mapping, Sequence

from autorater.mlflow_registry import mlflow_client, redact_uri
from autorater.training.tracking import KIND_TAG

# Columns of ``autorater compare``: params by exact name, metrics by name or fnmatch pattern.
DEFAULT_COMPARE_PARAMS = ("model.architecture", "model.encoder", "model.image_size", "model.outcome.blocks",
                          "train.lr", "train.epochs", "data.suites")
DEFAULT_COMPARE_METRICS = ("best_val_balanced_accuracy", "best_val_marker_median_abs_error_s",
                           "eval*.balanced_accuracy")


def compare_runs(tracking_uri: str, experiment: str | None = None, metrics: Sequence[str] | None = None,
                 max_runs: int = 20, *, params: Sequence[str] | None = None, kind: str | None = None,
                 order_by: str | None = None) -> list[dict]:
    """The latest runs (all experiments when ``experiment`` is None), with key params and metrics.

    Args:
        metrics: metric names or fnmatch patterns (``eval*.balanced_accuracy``); default
            ``DEFAULT_COMPARE_METRICS``.
        params: param names; default ``DEFAULT_COMPARE_PARAMS``.
        kind: only runs of this kind (``train``, ``trial``, ``study``, ``evaluation``).
        order_by: a metric name to sort by, best (highest) first; default: newest first.

    Returns:
        One dict per run: ``run_name``, ``run_id``, ``experiment``, ``start_time`` (ISO, local time),
        ``status``, ``kind``, ``registered`` (``name@version`` or ""), ``params`` and ``metrics``
        (only the matching ones; missing ones absent).
    """
    client = mlflow_client(tracking_uri)
    if experiment is None:
        exps = {e.experiment_id: e.name for e in client.search_experiments()}
    else:
        exp = client.get_experiment_by_name(experiment)
        if exp is None:
            known = sorted(e.name for e in client.search_experiments())
            raise ValueError(f"no experiment {experiment!r} in {redact_uri(tracking_uri)}; known: {known}")
        exps = {exp.experiment_id: exp.name}
    if not exps:
        return []
    filt = f"tags.`{KIND_TAG}` = '{kind}'" if kind else ""
    order = [f"metrics.`{order_by}` DESC"] if order_by else ["attributes.start_time DESC"]
    runs = client.search_runs(list(exps), filter_string=filt, max_results=max_runs, order_by=order)
    patterns = list(metrics) if metrics is not None else list(DEFAULT_COMPARE_METRICS)
    wanted_params = list(params) if params is not None else list(DEFAULT_COMPARE_PARAMS)
    rows = []
    for r in runs:
        keys = [k for k in r.data.metrics if any(fnmatch.fnmatchcase(k, p) for p in patterns)]
        keys.sort(key=lambda k: (min(i for i, p in enumerate(patterns) if fnmatch.fnmatchcase(k, p)), k))
        rows.append({
            "run_name": r.info.run_name or "",
            "run_id": r.info.run_id,
            "experiment": exps.get(r.info.experiment_id, r.info.experiment_id),
            "start_time": datetime.datetime.fromtimestamp(r.info.start_time / 1000).isoformat(timespec="seconds"),
            "status": r.info.status,
            "kind": r.data.tags.get(KIND_TAG, ""),
            "registered": r.data.tags.get("registered_model", ""),
            "params": {k: r.data.params[k] for k in wanted_params if k in r.data.params},
            "metrics": {k: r.data.metrics[k] for k in keys},
        })
    return rows


def _short(key: str) -> str:
    """Column title: params lose their ``model.`` / ``train.`` / ``data.`` prefix."""
    return key.split(".", 1)[1] if key.split(".", 1)[0] in ("model", "train", "data") else key


def format_runs_table(rows: Sequence[Mapping], max_metric_columns: int = 8) -> str:
    """``compare_runs`` rows as an aligned plain-text table (floats to 3 decimals, ``-`` when missing)."""
    if not rows:
        return "no runs (train with --tracking-uri to record some)"
    param_cols = list(dict.fromkeys(k for r in rows for k in r["params"]))
    metric_cols = sorted(dict.fromkeys(k for r in rows for k in r["metrics"]),
                         key=lambda k: (not k.startswith("best_"), k))[:max_metric_columns]
    header = ["run", "id", "started", "kind", "model"] + [_short(k) for k in param_cols] + metric_cols

    def cell(v):
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.3f}"
        text = str(v)
        return text if len(text) <= 32 else text[:29] + "..."

    body = [[cell(r["run_name"]), r["run_id"][:8], r["start_time"].replace("T", " ")[:16], cell(r["kind"] or None),
             cell(r["registered"] or None)]
            + [cell(r["params"].get(k)) for k in param_cols] + [cell(r["metrics"].get(k)) for k in metric_cols]
            for r in rows]
    widths = [max(len(row[i]) for row in [header] + body) for i in range(len(header))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in [header] + body]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


__all__ = ["DEFAULT_COMPARE_METRICS", "DEFAULT_COMPARE_PARAMS", "compare_runs", "format_runs_table"]
