"""Optuna tuning: the search space, the objective, a resumable study whose trials are MLflow runs.

Offline and small: the hand-built tiny suite of test_tracking, the ``tiny`` preset, 2 epochs a trial.
"""

import os

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")  # before anything imports mlflow

import json
import math

import optuna
import pytest

import autorater.training.tune
from autorater import mlflow_registry as registry
from autorater.models import PRESETS
from autorater.training.recipe import TrainConfig, load_config_file
from autorater.training.tune import (
    MARKER_PENALTY_CAP_S,
    MARKER_PENALTY_PER_S,
    best_configs,
    default_storage,
    objective_value,
    suggest,
    trials_table,
    tune,
    write_best_config,
)
from model_suites import fresh_tracking_uri, make_tiny_suite


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """Tiny models train 10-30x faster on one intra-op thread when the 2 cores are shared (OpenMP waits)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_suggest_samples_inside_the_documented_events_space_and_replays():
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    base_m, base_t = PRESETS["tiny"], TrainConfig(epochs=2)
    for _ in range(20):
        trial = study.ask()
        m, t = suggest(trial, base_m, base_t)
        assert 5e-4 <= t.lr <= 5e-3 and 1e-3 <= t.weight_decay <= 1e-1 and 2 <= m.places <= 8
        assert 0.3 <= t.stream.match_weight <= 3.0 and 0.1 <= t.stream.counterfactual_weight <= 1.0
        assert t.stream.match_warmup_epochs in (0, 5, 10, 15, 20)
        assert (m.encoder, m.image_size, m.clip_frames, t.epochs) == ("pixels", 32, 8, 2)  # cache inputs untouched
        study.tell(trial, 0.0)
        assert suggest(optuna.trial.FixedTrial(trial.params), base_m, base_t) == (m, t)


def test_objective_is_balanced_accuracy_minus_a_capped_marker_penalty():
    assert objective_value({"val_balanced_accuracy": 0.8, "val_marker_median_abs_error_s": 1.0}) == \
        pytest.approx(0.8 - MARKER_PENALTY_PER_S)
    nan_marker = objective_value({"val_balanced_accuracy": 0.8, "val_marker_median_abs_error_s": float("nan")})
    assert nan_marker == pytest.approx(0.8 - MARKER_PENALTY_PER_S * MARKER_PENALTY_CAP_S)
    assert objective_value({"val_balanced_accuracy": 0.8, "val_marker_median_abs_error_s": 99.0}) == nan_marker
    # Balanced accuracy dominates: a point of it outweighs any marker error.
    assert objective_value({"val_balanced_accuracy": 0.81, "val_marker_median_abs_error_s": 99.0}) > \
        objective_value({"val_balanced_accuracy": 0.75, "val_marker_median_abs_error_s": 0.0})
    assert math.isnan(objective_value({"val_balanced_accuracy": float("nan")}))


def test_a_study_logs_each_trial_as_a_nested_mlflow_run_and_resumes(tmp_path, tmp_path_factory, monkeypatch):
    suite = make_tiny_suite(tmp_path / "suite")
    uri = fresh_tracking_uri(tmp_path_factory, tmp_path / "runs")
    storage = default_storage(tmp_path / "runs")
    base_m, base_t = PRESETS["tiny"], TrainConfig(epochs=2, batch_size=16, aggregation="majority",
                                                  cache_dir=str(tmp_path / "cache"))
    study = tune([suite], base_m, base_t, n_trials=2, study_name="s1", storage=storage, tracking_uri=uri, seed=0)
    assert len(study.trials) == 2
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)

    client = registry.mlflow_client(uri)
    exp = client.get_experiment_by_name("autorater-tune")
    parents = client.search_runs([exp.experiment_id], "tags.`autorater.kind` = 'study'")
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    parent_id = parents[0].info.run_id

    def trial_runs():
        return client.search_runs([exp.experiment_id], "tags.`autorater.kind` = 'trial'")

    runs = trial_runs()
    assert len(runs) == 2
    assert {r.data.tags["mlflow.parentRunId"] for r in runs} == {parent_id}
    assert {r.data.tags["optuna.trial_number"] for r in runs} == {"0", "1"}
    for r in runs:  # params = the sampled hyperparameters (+ the suites); metrics per epoch and the objective
        trial = study.trials[int(r.data.tags["optuna.trial_number"])]
        assert {k: r.data.params[k] for k in trial.params} == {k: str(v) for k, v in trial.params.items()}
        assert [m.step for m in client.get_metric_history(r.info.run_id, "train_loss")] == [1, 2]
        assert r.data.metrics["objective"] == pytest.approx(trial.value)
        assert trial.user_attrs["mlflow_run_id"] == r.info.run_id
        assert sorted(trial.intermediate_values) == [1, 2]  # val balanced accuracy reported per epoch

    # Resume: one more trial in the same storage, under the same parent run, with new sampled values.
    again = tune([suite], base_m, base_t, n_trials=1, study_name="s1", storage=storage, tracking_uri=uri, seed=0)
    assert len(again.trials) == 3 and len(trial_runs()) == 3
    assert {r.data.tags["mlflow.parentRunId"] for r in trial_runs()} == {parent_id}
    assert again.trials[2].params != again.trials[0].params  # not a replay of the first random point
    assert len(optuna.load_study(study_name="s1", storage=storage).trials) == 3

    # The best configs: the best trial's values on the stored base configs, as a config file `train` reads.
    model_cfg, train_cfg = best_configs(again)
    assert train_cfg.lr == again.best_params["lr"] and model_cfg.places == again.best_params["places"]
    assert model_cfg.encoder == "pixels" and train_cfg.epochs == 2
    path = write_best_config(again, tmp_path / "best.json")
    loaded_m, loaded_t = load_config_file(path)
    assert loaded_t == train_cfg and loaded_m.places == model_cfg.places
    assert "vocab" not in json.loads(path.read_text())["model"]
    assert [row["number"] for row in trials_table(again)] == [0, 1, 2]

    # A trial the pruner stops: marked PRUNED in Optuna and in MLflow, after its first epoch.
    monkeypatch.setattr(autorater.training.tune, "make_pruner", lambda: optuna.pruners.ThresholdPruner(lower=1.5))
    pruned = tune([suite], base_m, base_t, n_trials=1, study_name="s2", storage=storage, tracking_uri=uri)
    assert pruned.trials[0].state == optuna.trial.TrialState.PRUNED
    run_id = pruned.trials[0].user_attrs["mlflow_run_id"]
    assert client.get_run(run_id).data.tags["optuna.state"] == "PRUNED"
    assert [m.step for m in client.get_metric_history(run_id, "train_loss")] == [1]
    with pytest.raises(ValueError, match="no completed trial"):
        best_configs(pruned)

    # Resuming with other base configs is refused: the trials would not be comparable.
    with pytest.raises(ValueError, match="train.epochs"):
        tune([suite], base_m, TrainConfig(epochs=3, cache_dir=str(tmp_path / "cache"), aggregation="majority",
                                          batch_size=16),
             n_trials=1, study_name="s1", storage=storage, tracking_uri=uri)
