"""MLflow tracking: training runs, evaluations and runs side by side (``autorater compare``; the store and the registry:
``autorater.mlflow_registry``).

This module is an edge (docs/style.md 9): it starts MLflow runs and writes to the store, and every
function takes ``tracking_uri`` explicitly. It never touches MLflow's global state (no
``mlflow.set_tracking_uri``, no active run): everything goes through an ``MlflowClient`` bound to
the URI, so two stores can be used side by side (tests do).

Offline by construction: telemetry is disabled before MLflow is imported, models are logged as
plain artifacts (the folder ``autorater train`` writes: ``config.json``, ``model.safetensors``,
``metadata.json``; no pickling, no signature inference), and a SQLite store keeps its artifacts in
``mlartifacts/`` next to the database, so nothing lands in the current directory.

Layout in the store::

    experiment "autorater"          training runs (kind=train) and stand-alone evaluations (kind=evaluation)
      run: params model.* train.* data.*; metrics per epoch (step = epoch), best_*, eval.*;
           artifacts model/ (the model folder), configs.json, evaluation/*.json
    experiment "autorater-tune"     one parent run per Optuna study (kind=study), a child run per trial
    registered model "autorater"    one version per tracked training; alias "champion" = the promoted one

Example:
    >>> uri = default_tracking_uri("runs")                                      # doctest: +SKIP
    >>> result, run_id, version = track_training(uri, "autorater", "base", PRESETS["babyai-grid"], TrainConfig(),
    ...                                          suites, out="model")           # doctest: +SKIP
    >>> version                                                                 # doctest: +SKIP
    3
    >>> promote(uri)["version"]          # autorater.mlflow_registry             # doctest: +SKIP
    3
"""

from __future__ import annotations

import dataclasses
import datetime
import fnmatch
import json
import math
import numbers
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from autorater.mlflow_registry import (
    DEFAULT_MODEL_NAME,
    ensure_experiment,
    mlflow_client,
    mlflow_key,
    redact_uri,
)
from autorater.model import CONFIG_FILE
from autorater.rater import METADATA_FILE, update_metadata

DEFAULT_EXPERIMENT = "autorater"
MODEL_ARTIFACT_PATH = "model"
KIND_TAG = "autorater.kind"  # train | trial | study | evaluation

_PARAM_SKIP = {"vocab", "failure_modes"}  # learned from the data at training time, not choices
_MAX_PARAM_CHARS = 6000  # MLflow 3's limit for a param value
_BATCH = 500  # metrics per log_batch call (MLflow accepts up to 1000)


# ----------------------------------------------------------------------------------------------
# Small helpers


def _now_ms() -> int:
    return int(time.time() * 1000)


def _finite(value: Any) -> float | None:
    """``value`` as a float when it is a finite real number (numpy scalars too; bools are not numbers), else None."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    f = float(value)
    return f if math.isfinite(f) else None



def _param_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text[:_MAX_PARAM_CHARS]


def suite_names(suites) -> list[str]:
    """``name@version`` of each training suite: of a list of suites, or of a pack's (its ``suite_names``)."""
    if not isinstance(suites, Sequence):  # a pack (autorater.training.inputs.pack.Pack)
        return suites.suite_names
    return [s if isinstance(s, str) else f"{s.info.name}@{s.info.version}" for s in suites]


def flatten_params(model_config=None, train_config=None, suites: Sequence = ()) -> dict[str, str]:
    """``model.architecture``, ``model.<field>``, ``train.<field>``, ``data.suites`` / ``data.n_suites`` as MLflow
    param strings; a part's fields as ``model.<part>.<field>`` (``model.outcome.blocks``).

    The vocabulary and failure modes are left out: they are learned from the data, and the saved
    ``config.json`` (logged with the model) holds them.
    """
    out: dict[str, str] = {}
    for prefix, cfg in (("model", model_config), ("train", train_config)):
        if cfg is None:
            continue
        d = cfg if isinstance(cfg, Mapping) else cfg.to_dict()  # a model config's names its architecture
        for k, v in d.items():
            if k in _PARAM_SKIP:
                continue
            for name, value in (v.items() if isinstance(v, Mapping) else [(None, v)]):
                out[f"{prefix}.{k}" + (f".{name}" if name else "")] = _param_value(value)
    if suites:
        names = suite_names(suites)
        out["data.suites"] = _param_value(",".join(names))
        out["data.n_suites"] = str(len(names))
    return out


def _log_params(client, run_id: str, params: Mapping[str, Any]) -> None:
    from mlflow.entities import Param

    items = [Param(mlflow_key(k), _param_value(v)) for k, v in params.items()]
    for i in range(0, len(items), 100):
        client.log_batch(run_id, params=items[i:i + 100], synchronous=True)


def log_run_metrics(client, run_id: str, metrics: Mapping[str, Any], step: int = 0) -> dict[str, float]:
    """Log the finite numbers of ``metrics`` to run ``run_id`` at ``step``, in batches; return what was logged.

    Keys are made MLflow-safe; NaN, infinities and non-numbers are left out.
    """
    from mlflow.entities import Metric

    kept = {mlflow_key(k): f for k, v in metrics.items() if (f := _finite(v)) is not None}
    ts = _now_ms()
    items = [Metric(k, v, ts, step) for k, v in kept.items()]
    for i in range(0, len(items), _BATCH):
        client.log_batch(run_id, metrics=items[i:i + _BATCH], synchronous=True)
    return kept


def _context_tags() -> dict[str, str]:
    """MLflow's own source tags (user, entry point, git commit): local look-ups only."""
    try:
        from mlflow.tracking.context.registry import resolve_tags

        return {k: str(v) for k, v in resolve_tags().items()}
    except Exception:  # best effort: a broken context provider must not stop training
        return {}


# ----------------------------------------------------------------------------------------------
# Training runs


@dataclass
class TrackedModel:
    """Where a tracked training went: its run and, when registered, its model version.

    Example:
        >>> TrackedModel("3f2a", "1", "autorater", 3).model_uri
        'models:/autorater/3'
    """

    run_id: str
    experiment_id: str
    name: str | None = None  # registered model name
    version: int | None = None  # registered model version

    @property
    def model_uri(self) -> str | None:
        """``models:/NAME/VERSION`` (what ``resolve_model_arg`` accepts), None when not registered."""
        return f"models:/{self.name}/{self.version}" if self.version is not None else None


class TrainingRun:
    """An MLflow run around one training: params at the start, ``log`` per epoch, ``finish`` at the end.

    On leaving the ``with`` block the run ends FINISHED, FAILED (an exception) or KILLED (Ctrl-C).

    Args:
        tracking_uri: the store, e.g. ``sqlite:///runs/mlflow.db``.
        model_config, train_config: logged flattened as ``model.*`` / ``train.*`` params (and whole
            as ``configs.json``).
        suites: the training suites, logged as ``data.suites`` (``name@version,...``).
        experiment: experiment name (created with its artifacts next to a SQLite db).
        run_name: MLflow's random name when None.
        parent_run_id: nest this run under another (Optuna trials under their study).
        tags: extra run tags.
        params: log these params instead of the flattened configs (Optuna trials: the sampled values).
        kind: the ``autorater.kind`` tag.

    Example:
        >>> with TrainingRun(uri, cfg, tc, suites, run_name="base") as run:        # doctest: +SKIP
        ...     result = train(suites, cfg, tc, out="model", log=run.log)
        ...     tracked = run.finish(result, model_dir="model")
    """

    def __init__(self, tracking_uri: str, model_config=None, train_config=None, suites: Sequence = (), *,
                 experiment: str = DEFAULT_EXPERIMENT, run_name: str | None = None,
                 parent_run_id: str | None = None, tags: Mapping[str, Any] | None = None,
                 params: Mapping[str, Any] | None = None, kind: str = "train"):
        self.tracking_uri = tracking_uri
        self.model_config = model_config
        self.train_config = train_config
        self.suites = suite_names(suites)  # name@version: of suites, or of a pack's
        self.experiment = experiment
        self.run_name = run_name
        self.parent_run_id = parent_run_id
        self.tags = dict(tags or {})
        self.params = params
        self.kind = kind
        self.client = None
        self.run_id: str | None = None
        self.experiment_id: str | None = None

    def __enter__(self) -> "TrainingRun":
        from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

        self.client = mlflow_client(self.tracking_uri)
        self.experiment_id = ensure_experiment(self.client, self.experiment, self.tracking_uri)
        tags = {**_context_tags(), KIND_TAG: self.kind, **{k: str(v) for k, v in self.tags.items()}}
        if self.parent_run_id:
            tags[MLFLOW_PARENT_RUN_ID] = self.parent_run_id
        run = self.client.create_run(self.experiment_id, tags=tags, run_name=self.run_name)
        self.run_id = run.info.run_id
        self.run_name = run.info.run_name
        try:
            params = self.params if self.params is not None else flatten_params(
                self.model_config, self.train_config, self.suites)
            if self.params is not None and self.suites:
                params = {**params, **flatten_params(suites=self.suites)}
            _log_params(self.client, self.run_id, params)
            configs = {k: dataclasses.asdict(v) for k, v in (("model", self.model_config),
                                                              ("train", self.train_config)) if v is not None}
            if configs:
                self.client.log_text(self.run_id, json.dumps(configs, indent=1, default=str), "configs.json")
        except BaseException as err:  # the with-block never starts: end the run here
            self.__exit__(type(err), err, err.__traceback__)
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if self.client is None or self.run_id is None:
            return False
        if exc_type is None:
            status = "FINISHED"
        else:
            status = "KILLED" if issubclass(exc_type, KeyboardInterrupt) else "FAILED"
            self.client.set_tag(self.run_id, "error", f"{exc_type.__name__}: {exc}"[:5000])
        self.client.set_terminated(self.run_id, status=status)
        return False

    def log(self, epoch: int, metrics: Mapping[str, Any]) -> None:
        """The ``log`` callback of ``train``: every finite metric at ``step=epoch`` (NaNs dropped)."""
        self.log_metrics({k: v for k, v in metrics.items() if k != "epoch"}, step=epoch)

    def log_metrics(self, metrics: Mapping[str, Any], step: int = 0) -> dict[str, float]:
        return log_run_metrics(self.client, self.run_id, metrics, step=step)

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        for k, v in tags.items():
            self.client.set_tag(self.run_id, k, str(v))

    def finish(self, result, model_dir: str | os.PathLike | None = None,
               register_as: str | None = DEFAULT_MODEL_NAME) -> TrackedModel:
        """After ``train``: best metrics, sizes, the model folder as ``model/`` and a registry version.

        Args:
            result: the ``TrainResult``.
            model_dir: the folder ``train(out=...)`` wrote; None logs no model (Optuna trials).
            register_as: registered model name; None skips the registry.

        Returns:
            The run and, when registered, the version; the folder's ``metadata.json`` then holds
            ``registered_name``, ``registered_version`` and ``mlflow_run_id`` (so predictions can say
            ``autorater@3``), in the local folder and in the logged artifact alike.
        """
        client, run_id = self.client, self.run_id
        best = getattr(result, "best", {}) or {}
        self.log_metrics({f"best_{k}": v for k, v in best.items()})
        self.log_metrics({"wall_s": getattr(result, "wall_s", float("nan")),
                          "epochs_run": len(getattr(result, "history", []) or [])})
        if getattr(result, "verdict", ""):  # "converged at epoch k" or "still rising: raise the budget"
            client.set_tag(run_id, "verdict", result.verdict[:5000])
        sizes = {"data.n_train": getattr(result, "n_train", None), "data.n_val": getattr(result, "n_val", None)}
        model = getattr(result, "model", None)
        if model is not None:
            sizes["model.n_parameters"] = sum(p.numel() for p in model.parameters())
        _log_params(client, run_id, {k: v for k, v in sizes.items() if v is not None})
        tracked = TrackedModel(run_id, self.experiment_id)
        if model_dir is None:
            return tracked
        model_dir = Path(model_dir)
        if not (model_dir / CONFIG_FILE).is_file():
            raise FileNotFoundError(f"{model_dir} is not a model folder (no config.json): pass the folder "
                                    f"train(out=...) wrote")
        update_metadata(model_dir, mlflow_run_id=run_id, mlflow_experiment=self.experiment)
        client.log_artifacts(run_id, str(model_dir), MODEL_ARTIFACT_PATH)
        if register_as is None:
            return tracked
        tracked.name = register_as
        tracked.version = _register(client, register_as, run_id, self.run_name, best, self.suites)
        update_metadata(model_dir, registered_name=register_as, registered_version=tracked.version)
        client.log_artifact(run_id, str(model_dir / METADATA_FILE), MODEL_ARTIFACT_PATH)  # same, in the store
        client.set_tag(run_id, "registered_model", f"{register_as}@{tracked.version}")
        return tracked


def _register(client, name: str, run_id: str, run_name: str | None, best: Mapping, suites: Sequence) -> int:
    """A new version of registered model ``name`` whose source is the run's ``model/`` artifacts."""
    from mlflow.exceptions import MlflowException

    try:
        client.get_registered_model(name)
    except MlflowException as err:
        if err.error_code != "RESOURCE_DOES_NOT_EXIST":
            raise
        try:
            client.create_registered_model(name, description="Autorater models (autorater train --tracking-uri)")
        except MlflowException as err2:
            if err2.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
    source = f"{client.get_run(run_id).info.artifact_uri.rstrip('/')}/{MODEL_ARTIFACT_PATH}"
    ba = _finite(best.get("val_balanced_accuracy"))
    tags = {"run_name": run_name or "", "suites": ",".join(suite_names(suites))}
    if ba is not None:
        tags["best_val_balanced_accuracy"] = f"{ba:.4f}"
    desc = f"run {run_name or run_id}" + (f"; best validation balanced accuracy {ba:.3f}" if ba is not None else "")
    mv = client.create_model_version(name, source=source, run_id=run_id, tags=tags, description=desc)
    return int(mv.version)


def track_training(tracking_uri: str, experiment: str | None, run_name: str | None, model_config, train_config,
                   suites: Sequence, fn: Callable[[Callable[[int, dict], None]], Any] | None = None, *,
                   out: str | os.PathLike | None = None, register_as: str | None = DEFAULT_MODEL_NAME,
                   progress: bool = False):
    """Train inside a ``TrainingRun``: log params and epochs, then the model folder and a registry version.

    Args:
        tracking_uri: the store.
        experiment: experiment name (None: ``autorater``).
        run_name: None lets MLflow pick one.
        model_config, train_config, suites: what ``autorater.training.train.train`` gets (``suites``: a list of
            suites, or a pack).
        fn: ``fn(log) -> TrainResult`` instead of ``train(suites, model_config, train_config, out=out,
            log=log, progress=progress)``; it must write the model folder to ``out``.
        out: the model folder; None logs no model and registers nothing.
        register_as: registered model name; None skips the registry.
        progress: training progress bar.

    Returns:
        ``(TrainResult, run_id, version)``; ``version`` is None when nothing was registered.
    """
    from autorater.training.train import train

    with TrainingRun(tracking_uri, model_config, train_config, suites, experiment=experiment or DEFAULT_EXPERIMENT,
                     run_name=run_name) as run:
        if fn is None:
            result = train(suites, model_config, train_config, out=out, log=run.log, progress=progress)
        else:
            result = fn(run.log)
        tracked = run.finish(result, model_dir=out, register_as=register_as)
    return result, tracked.run_id, tracked.version


# ----------------------------------------------------------------------------------------------
# Evaluations


def flatten_metrics(report: Mapping, prefix: str = "") -> dict[str, float]:
    """Finite numbers of a nested report as ``prefix.key.subkey`` (lists, strings, bools, NaN dropped).

    Example:
        >>> flatten_metrics({"outcome": {"balanced_accuracy": 0.8, "kappa": float("nan")}, "bins": [1, 2]}, "eval")
        {'eval.outcome.balanced_accuracy': 0.8}
    """
    out: dict[str, float] = {}

    def walk(node, path):
        if isinstance(node, Mapping):
            for k, v in node.items():
                walk(v, f"{path}.{k}" if path else str(k))
        elif (f := _finite(node)) is not None:
            out[mlflow_key(path)] = f

    walk(report, prefix)
    return out


def _existing_run(client, run_id: str, tracking_uri: str):
    from mlflow.exceptions import MlflowException

    try:
        return client.get_run(run_id)
    except MlflowException:
        raise ValueError(f"run {run_id} is not in {redact_uri(tracking_uri)} (fix: pass the --tracking-uri the "
                         f"model was trained with, or log to a new run)") from None


def log_evaluation(tracking_uri: str, run_id: str | None, report: Mapping, prefix: str = "eval", *,
                   experiment: str = DEFAULT_EXPERIMENT, run_name: str | None = None,
                   tags: Mapping[str, Any] | None = None) -> str:
    """Log an evaluation report: its finite numbers as metrics ``<prefix>.<key>...``, the JSON as an artifact.

    Args:
        tracking_uri: the store.
        run_id: the run to add to (the model's training run: ``metadata.json["mlflow_run_id"]``);
            None starts a new run (kind=evaluation) in ``experiment``.
        report: the nested evaluation report (dicts of numbers; lists and strings go to the JSON only).
        prefix: metric name prefix, e.g. ``eval.unseen_agents``; also names the artifact
            ``evaluation/<prefix>.json``.

    Returns:
        The run id.
    """
    client = mlflow_client(tracking_uri)
    metrics = flatten_metrics(report, prefix)
    text = json.dumps(report, indent=1, default=str)
    if run_id is None:
        with TrainingRun(tracking_uri, experiment=experiment, run_name=run_name or prefix, tags=tags,
                         params={}, kind="evaluation") as run:
            run.log_metrics(metrics)
            run.client.log_text(run.run_id, text, f"evaluation/{mlflow_key(prefix)}.json")
        return run.run_id
    _existing_run(client, run_id, tracking_uri)
    log_run_metrics(client, run_id, metrics)
    client.log_text(run_id, text, f"evaluation/{mlflow_key(prefix)}.json")
    for k, v in (tags or {}).items():
        client.set_tag(run_id, k, str(v))
    return run_id


# ----------------------------------------------------------------------------------------------
# Runs side by side (``autorater compare``)


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


__all__ = [
    "DEFAULT_COMPARE_METRICS", "DEFAULT_COMPARE_PARAMS", "DEFAULT_EXPERIMENT", "KIND_TAG", "TrackedModel",
    "TrainingRun", "compare_runs", "flatten_metrics", "flatten_params", "format_runs_table", "log_evaluation",
    "log_run_metrics", "suite_names", "track_training",
]
