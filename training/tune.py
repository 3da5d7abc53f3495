"""Hyperparameter search with Optuna, every trial an MLflow run.

A study lives in an Optuna SQLite storage and is resumable: calling ``tune`` again with the same
``study_name`` and ``storage`` adds ``n_trials`` more trials to it (``load_if_exists=True``). The
base configs and suite names are stored in the study; resuming with different ones is refused (the
trials would not be comparable).

- Sampler: TPE (multivariate by default in Optuna 5), seeded with ``seed + trials already in the
  study``, so a resumed study does not replay the first call's random start-up points. The first
  10 trials are random (TPE's ``n_startup_trials``).
- Pruner: ``MedianPruner(n_startup_trials=3, n_warmup_steps=3)`` (``make_pruner``): from the 4th
  trial on and from epoch 3 on, a trial whose best validation balanced accuracy so far is below the
  median of earlier trials at the same epoch stops (steps are epochs, counted from 1; epochs with a
  NaN balanced accuracy are not reported, since MedianPruner prunes a trial whose values are all NaN).
- Objective (maximised), see ``objective_value``:
  ``best val_balanced_accuracy - MARKER_PENALTY_PER_S * min(marker median |error| s, MARKER_PENALTY_CAP_S)``.
  Balanced accuracy decides; one second of marker error costs 0.01 (one point of balanced accuracy);
  an unmeasurable marker error (NaN: no validation success predicted as one) costs the cap.
- Features are prepared once (``autorater.training.train.prepare``: labels, vocabulary, feature cache) and
  shared by every trial, so the search space holds only what does not change the cached inputs.
- MLflow: one parent run per study (kind=study) in experiment ``autorater-tune``; each trial a child
  run (kind=trial, tags ``optuna.study_name``, ``optuna.trial_number``, ``optuna.state``) with the
  sampled hyperparameters as params and per-epoch metrics. Trials save no model: retrain the best
  configs with ``autorater train --config best.json --tracking-uri ...`` (``write_best_config``).

Example:
    >>> study = tune([suite], PRESETS["babyai-grid"], TrainConfig(), n_trials=20, study_name="base-v1",
    ...              storage=default_storage("runs"), tracking_uri=default_tracking_uri("runs"))  # doctest: +SKIP
    >>> model_cfg, train_cfg = best_configs(study)                                               # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Sequence

from autorater.config import AutoraterConfig
from autorater.data.files import write_text_atomic
from autorater.mlflow_registry import ensure_experiment, mlflow_client, redact_uri
from autorater.models import AutoConfig, spec_of
from autorater.training.recipe import TrainConfig
from autorater.training.tracking import TrainingRun, flatten_params, log_run_metrics

DEFAULT_TUNE_EXPERIMENT = "autorater-tune"
MARKER_PENALTY_PER_S = 0.01  # objective cost of one second of marker median |error|
MARKER_PENALTY_CAP_S = 5.0  # errors above this count as this; NaN counts as this
PRUNE_STARTUP_TRIALS = 3  # trials that run to the end before pruning starts
PRUNE_WARMUP_EPOCHS = 3  # MedianPruner skips steps < this: no pruning at epochs 1-2 (early numbers are noise)
_IGNORED_ON_RESUME = {"cache_dir"}  # base-config fields that may differ when a study is resumed


def default_storage(workdir: str | os.PathLike = "runs") -> str:
    """``sqlite:///<absolute workdir>/optuna.db`` (its own file: Optuna and MLflow both keep an alembic table)."""
    folder = Path(workdir).expanduser().resolve()
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / 'optuna.db'}"


# ----------------------------------------------------------------------------------------------
# Search space


def suggest(trial, model_cfg: AutoraterConfig, train_cfg: TrainConfig) -> tuple[AutoraterConfig, TrainConfig]:
    """Sample one point of the search space onto copies of the base configs: the optimiser's learning rate (in the
    architecture's ``lr_range``) and weight decay (1e-3 .. 1e-1, log), then what the architecture's own
    ``search_space(trial)`` draws (its spec's; each documents its space: ``autorater/models/``).

    Nothing here changes the encoder, image size or frames sampled: trials share one feature cache.
    Works with a live ``optuna.Trial`` and with ``optuna.trial.FixedTrial(params)`` (replay).
    """
    spec = spec_of(model_cfg)
    low, high = spec.lr_range
    optimiser = {"lr": trial.suggest_float("lr", low, high, log=True),
                 "weight_decay": trial.suggest_float("weight_decay", 1e-3, 1e-1, log=True)}
    model_changes, train_changes = spec.search_space(trial)
    return model_cfg.replace(**model_changes), train_cfg.replace(**optimiser, **train_changes)


def make_pruner():
    """``MedianPruner(n_startup_trials=PRUNE_STARTUP_TRIALS, n_warmup_steps=PRUNE_WARMUP_EPOCHS)`` (steps = epochs)."""
    import optuna

    return optuna.pruners.MedianPruner(n_startup_trials=PRUNE_STARTUP_TRIALS, n_warmup_steps=PRUNE_WARMUP_EPOCHS)


def objective_value(best: dict) -> float:
    """The study's objective from ``TrainResult.best``: balanced accuracy minus a small marker penalty.

    NaN when the balanced accuracy is NaN (an empty validation split: Optuna records the trial as failed).
    """
    ba = best.get("val_balanced_accuracy", float("nan"))
    err = best.get("val_marker_median_abs_error_s", float("nan"))
    err = MARKER_PENALTY_CAP_S if err is None or not math.isfinite(err) else min(float(err), MARKER_PENALTY_CAP_S)
    return float(ba) - MARKER_PENALTY_PER_S * err if ba is not None else float("nan")


# ----------------------------------------------------------------------------------------------
# The study


def _check_or_store_base(study, model_cfg: AutoraterConfig, train_cfg: TrainConfig, suites: Sequence) -> None:
    """Store the base configs and suites in a new study; refuse to resume one with different ones."""
    current = {"base_model_config": model_cfg.to_dict(), "base_train_config": train_cfg.to_dict(),
               "suites": [f"{s.info.name}@{s.info.version}" for s in suites]}
    stored = study.user_attrs
    if "base_model_config" not in stored:
        for k, v in current.items():
            study.set_user_attr(k, v)
        return
    diff = [f"model.{k}" for k, v in current["base_model_config"].items() if stored["base_model_config"].get(k) != v]
    stored_train = TrainConfig.from_dict(stored["base_train_config"]).to_dict()  # a study of before: flat names
    diff += [f"train.{k}" for k, v in current["base_train_config"].items()
             if k not in _IGNORED_ON_RESUME and stored_train.get(k) != v]
    if stored.get("suites") != current["suites"]:
        diff.append(f"suites {stored.get('suites')} -> {current['suites']}")
    if diff:
        raise ValueError(f"study {study.study_name!r} was started with other base configs or suites (differ: "
                         f"{diff}); its trials would not be comparable (fix: use the same --config and --suite, "
                         f"or a new --study-name)")


def _study_run(tracking_uri: str, experiment: str, study, storage: str, seed: int,
               model_cfg: AutoraterConfig, train_cfg: TrainConfig, suites: Sequence) -> str:
    """The study's parent MLflow run: found by study name and storage when resuming, else created."""
    client = mlflow_client(tracking_uri)
    exp_id = ensure_experiment(client, experiment, tracking_uri)
    where = redact_uri(storage)
    found = client.search_runs([exp_id], filter_string=(
        f"tags.`autorater.kind` = 'study' and tags.`optuna.study_name` = '{study.study_name}' "
        f"and tags.`optuna.storage` = '{where}'"), max_results=1)
    if found:
        run_id = found[0].info.run_id
        client.update_run(run_id, status="RUNNING")
        return run_id
    params = {**flatten_params(model_cfg, train_cfg, suites), "optuna.seed": seed, "optuna.sampler": "TPESampler",
              "optuna.pruner": f"MedianPruner(n_startup_trials={PRUNE_STARTUP_TRIALS}, "
                               f"n_warmup_steps={PRUNE_WARMUP_EPOCHS})",
              "optuna.objective": f"best val_balanced_accuracy - {MARKER_PENALTY_PER_S} * "
                                  f"min(val_marker_median_abs_error_s, {MARKER_PENALTY_CAP_S}) (NaN -> cap)"}
    with TrainingRun(tracking_uri, experiment=experiment, run_name=study.study_name, params=params, kind="study",
                     tags={"optuna.study_name": study.study_name, "optuna.storage": where}) as run:
        pass
    client.update_run(run.run_id, status="RUNNING")  # until this call of ``tune`` ends
    return run.run_id


class _Objective:
    """One trial: sample, train on the shared prepared data inside a child MLflow run, report, prune."""

    def __init__(self, suites, base_model, base_train, prepared, tracking_uri, experiment, parent_run_id):
        self.suites, self.base_model, self.base_train = suites, base_model, base_train
        self.prepared = prepared
        self.tracking_uri, self.experiment, self.parent_run_id = tracking_uri, experiment, parent_run_id

    def __call__(self, trial) -> float:
        import optuna

        from autorater.training.train import train

        model_cfg, train_cfg = suggest(trial, self.base_model, self.base_train)
        pruned_at: list[int] = []

        def should_stop(epoch: int, metrics: dict) -> bool:
            ba = metrics.get("val_balanced_accuracy")
            if ba is not None and math.isfinite(ba):
                trial.report(ba, epoch)
            if trial.should_prune():
                pruned_at.append(epoch)
                return True
            return False

        tags = {"optuna.study_name": trial.study.study_name, "optuna.trial_number": trial.number}
        with TrainingRun(self.tracking_uri, model_cfg, train_cfg, self.suites, experiment=self.experiment,
                         run_name=f"{trial.study.study_name}-trial-{trial.number}", parent_run_id=self.parent_run_id,
                         tags=tags, params=dict(trial.params), kind="trial") as run:
            result = train(self.suites, model_cfg, train_cfg, log=run.log, prepared=self.prepared,
                           should_stop=should_stop)
            value = objective_value(result.best)
            run.finish(result, model_dir=None, register_as=None)
            run.log_metrics({"objective": value})
            run.set_tags({"optuna.state": "PRUNED" if pruned_at else "COMPLETE"})
        trial.set_user_attr("mlflow_run_id", run.run_id)
        trial.set_user_attr("epochs_run", len(result.history))
        for k in ("val_balanced_accuracy", "val_marker_median_abs_error_s"):
            v = result.best.get(k)
            trial.set_user_attr(f"best_{k}", v if v is not None and math.isfinite(v) else None)
        if pruned_at:
            raise optuna.TrialPruned(f"pruned at epoch {pruned_at[0]}")
        return value


def _parent_callback(tracking_uri: str, parent_run_id: str):
    """After each trial: the study's value and best value so far on the parent run (step = trial number)."""

    def callback(study, frozen) -> None:
        client = mlflow_client(tracking_uri)
        metrics = {"trial_value": frozen.value}
        try:
            best = study.best_trial
            metrics["best_value"] = best.value
            client.set_tag(parent_run_id, "best_trial", str(best.number))
            client.set_tag(parent_run_id, "best_params", json.dumps(best.params))
        except ValueError:  # no completed trial yet
            pass
        client.set_tag(parent_run_id, "n_trials", str(len(study.trials)))
        log_run_metrics(client, parent_run_id, metrics, step=frozen.number)

    return callback


def tune(suites: Sequence, base_model_config: AutoraterConfig, base_train_config: TrainConfig, n_trials: int,
         study_name: str, storage: str, tracking_uri: str, seed: int = 0, timeout_s: float | None = None,
         progress: bool = False, *, experiment: str = DEFAULT_TUNE_EXPERIMENT):
    """Run (or resume) an Optuna study: ``n_trials`` more trials, each trained and tracked in MLflow.

    Args:
        suites: training suites (validation is a scenario split of them, ``TrainConfig.val_share``).
        base_model_config, base_train_config: everything ``suggest`` does not sample (epochs,
            patience, encoder, seed...).
        n_trials: trials to add in this call.
        study_name: the study's name in ``storage``.
        storage: Optuna storage URL, e.g. ``default_storage("runs")``.
        tracking_uri: the MLflow store.
        seed: seeds the sampler (offset by the trials already in the study); the trials' own
            training seed is ``base_train_config.seed`` (the same for every trial: paired comparison).
        timeout_s: stop starting trials after this many seconds.
        progress: Optuna's progress bar (and the feature-cache bar).
        experiment: MLflow experiment of the study and its trials.

    Returns:
        The ``optuna.Study``.
    """
    import optuna

    from autorater.training.inputs.batches import prepare

    if n_trials < 1:
        raise ValueError(f"n_trials must be at least 1, got {n_trials}")
    if not study_name or "'" in study_name or "`" in study_name:
        raise ValueError(f"study name {study_name!r} must be non-empty, without quotes or backticks")
    if storage.startswith("sqlite:///"):
        Path(storage[len("sqlite:///"):].split("?", 1)[0]).expanduser().parent.mkdir(parents=True, exist_ok=True)
    study = optuna.create_study(storage=storage, study_name=study_name, direction="maximize", load_if_exists=True,
                                sampler=optuna.samplers.TPESampler(seed=seed), pruner=make_pruner())
    if study.direction != optuna.study.StudyDirection.MAXIMIZE:
        raise ValueError(f"study {study_name!r} in {redact_uri(storage)} minimises; this objective is maximised "
                         f"(fix: use a new --study-name)")
    _check_or_store_base(study, base_model_config, base_train_config, suites)
    if study.trials:  # a resumed study: new random start-up points, not a replay of the first call's
        study.sampler = optuna.samplers.TPESampler(seed=seed + len(study.trials))
    prepared = prepare(suites, base_model_config, base_train_config, progress=progress)
    parent = _study_run(tracking_uri, experiment, study, storage, seed, base_model_config, base_train_config, suites)
    objective = _Objective(suites, base_model_config, base_train_config, prepared, tracking_uri, experiment, parent)
    status = "FAILED"
    try:
        study.optimize(objective, n_trials=n_trials, timeout=timeout_s, show_progress_bar=progress,
                       callbacks=[_parent_callback(tracking_uri, parent)])
        status = "FINISHED"
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    finally:
        mlflow_client(tracking_uri).set_terminated(parent, status=status)
    return study


# ----------------------------------------------------------------------------------------------
# Results


def best_configs(study) -> tuple[AutoraterConfig, TrainConfig]:
    """The best trial's configs: its params replayed through ``suggest`` onto the study's stored base configs."""
    from optuna.trial import FixedTrial

    try:
        best = study.best_trial
    except ValueError:
        raise ValueError(f"study {study.study_name!r} has no completed trial yet (fix: run more trials, or "
                         f"check the failed ones with `optuna` / the MLflow runs)") from None
    base_m, base_t = study.user_attrs.get("base_model_config"), study.user_attrs.get("base_train_config")
    if base_m is None or base_t is None:
        raise ValueError(f"study {study.study_name!r} was not created by autorater's tune (no base configs stored)")
    return suggest(FixedTrial(best.params), AutoConfig.from_dict(base_m), TrainConfig.from_dict(base_t))


def best_config_dict(study) -> dict:
    """``{"model": {...}, "train": {...}}`` of the best trial: the format ``autorater train --config`` reads."""
    model, train = best_configs(study)
    model_d = {k: v for k, v in model.to_dict().items() if k not in ("vocab", "failure_modes")}
    return {"model": model_d, "train": train.to_dict()}


def write_best_config(study, path: str | os.PathLike) -> Path:
    """Write ``best_config_dict(study)`` as JSON to ``path``; return it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(best_config_dict(study), indent=1) + "\n")
    return path


def trials_table(study) -> list[dict]:
    """One row per trial: ``number``, ``state``, ``value``, ``params``, ``epochs_run``, ``mlflow_run_id``."""
    return [{"number": t.number, "state": t.state.name, "value": t.value, "params": dict(t.params),
             "epochs_run": t.user_attrs.get("epochs_run"), "mlflow_run_id": t.user_attrs.get("mlflow_run_id")}
            for t in study.trials]


__all__ = ["DEFAULT_TUNE_EXPERIMENT", "MARKER_PENALTY_CAP_S", "MARKER_PENALTY_PER_S", "best_config_dict",
           "best_configs", "default_storage", "make_pruner", "objective_value", "suggest", "trials_table", "tune",
           "write_best_config"]
