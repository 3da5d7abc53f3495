"""MLflow tracking on a SQLite store: training runs, registry versions, the champion alias, evaluations.

Offline and small: a hand-built suite of 20 tiny videos, the ``tiny`` preset (no pretrained weights),
2 epochs. One MLflow database per test session is initialised (its migrations take seconds) and
copied for each module.
"""

import os

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")  # before anything imports mlflow

import doctest
import json
import math
from pathlib import Path

import numpy as np
import pytest

from autorater import mlflow_registry as registry
from autorater.models import PRESETS
from autorater.rater import Rater
from autorater.training import tracking, tune
from autorater.training import tracking as compare  # autorater compare's functions live in tracking
from autorater.training.recipe import TrainConfig
from model_suites import fresh_tracking_uri, make_tiny_suite


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """Tiny models train 10-30x faster on one intra-op thread when the 2 cores are shared (OpenMP waits)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """One store, one suite, one tracked training; the current directory is a watched empty folder."""
    root = tmp_path_factory.mktemp("tracking")
    suite = make_tiny_suite(root / "suite")
    uri = fresh_tracking_uri(tmp_path_factory, root / "runs")
    tc = TrainConfig(epochs=2, batch_size=16, aggregation="majority", cache_dir=str(root / "cache"))
    cwd = root / "cwd"
    cwd.mkdir()
    old = os.getcwd()
    os.chdir(cwd)
    try:
        result, run_id, version = tracking.track_training(uri, "autorater", "first", PRESETS["tiny"], tc, [suite],
                                                          out=root / "model-1")
        tracked = tracking.TrackedModel(run_id, "", "autorater", version)
        yield {"root": root, "suite": suite, "uri": uri, "tc": tc, "result": result, "tracked": tracked, "cwd": cwd}
    finally:
        os.chdir(old)


def test_default_tracking_uri_is_an_absolute_sqlite_path(tmp_path):
    uri = registry.default_tracking_uri(tmp_path / "w")
    assert uri == f"sqlite:///{(tmp_path / 'w').resolve()}/mlflow.db"
    assert (tmp_path / "w").is_dir()
    assert registry.artifact_root(uri) == str((tmp_path / "w" / "mlartifacts").resolve())


def test_tracked_training_logs_params_epoch_metrics_and_registers_a_version(env):
    client, tracked = registry.mlflow_client(env["uri"]), env["tracked"]
    run = client.get_run(tracked.run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "first"
    params = run.data.params
    assert params["model.encoder"] == "pixels" and params["train.epochs"] == "2"
    assert params["data.suites"] == "tiny@v1"
    assert int(params["data.n_train"]) + int(params["data.n_val"]) == 20
    assert "model.vocab" not in params  # learned from the data, kept in the logged config.json
    history = client.get_metric_history(tracked.run_id, "train_loss")
    assert sorted(m.step for m in history) == [1, 2]
    assert all(math.isfinite(v) for v in run.data.metrics.values())  # NaNs are dropped, never logged
    assert run.data.metrics["best_val_balanced_accuracy"] == env["result"].best["val_balanced_accuracy"]
    # The model folder is the artifact, and the registry version points at it.
    names = {Path(a.path).name for a in client.list_artifacts(tracked.run_id, "model")}
    assert {"config.json", "model.safetensors", "metadata.json"} <= names
    assert isinstance(tracked.version, int) and run.data.tags["registered_model"] == f"autorater@{tracked.version}"
    mv = client.get_model_version("autorater", str(tracked.version))
    assert mv.run_id == tracked.run_id and mv.source.endswith("/model")
    # Artifacts live next to the database, never in the current directory.
    assert mv.source.startswith(registry.artifact_root(env["uri"]))
    assert list(env["cwd"].iterdir()) == []


def test_metadata_names_the_registered_version_and_keeps_its_keys(env):
    meta = json.loads((env["root"] / "model-1" / "metadata.json").read_text())
    assert meta["registered_name"] == "autorater" and meta["registered_version"] == env["tracked"].version
    assert meta["mlflow_run_id"] == env["tracked"].run_id
    assert "train_config" in meta and "best" in meta  # written by train(), kept
    client = registry.mlflow_client(env["uri"])
    logged = Path(client.download_artifacts(env["tracked"].run_id, "model/metadata.json", str(env["root"])))
    assert json.loads(logged.read_text())["registered_version"] == env["tracked"].version


def test_promote_sets_the_alias_and_the_champion_loads_with_identical_predictions(env):
    uri, root = env["uri"], env["root"]
    first = registry.promote(uri, version=env["tracked"].version)
    assert first["version"] == env["tracked"].version and first["uri"] == "models:/autorater@champion"
    _, run_id, version = tracking.track_training(uri, None, "second", PRESETS["tiny"], env["tc"], [env["suite"]],
                                                 out=root / "model-2")
    second = tracking.TrackedModel(run_id, "", "autorater", version)
    assert second.version == env["tracked"].version + 1 and second.model_uri == f"models:/autorater/{version}"
    promoted = registry.promote(uri)  # default: the latest version
    assert promoted["version"] == second.version and promoted["previous_version"] == first["version"]
    client = registry.mlflow_client(uri)
    assert int(client.get_model_version_by_alias("autorater", "champion").version) == second.version

    champion = registry.champion_model_dir(uri, root / "champion")
    ids = env["suite"].continuation_ids()[:6]
    rows_local = list(Rater.load(root / "model-2").rate_suite(env["suite"], ids=ids))
    rows_champion = list(Rater.load(champion).rate_suite(env["suite"], ids=ids))
    assert rows_local == rows_champion
    assert rows_champion[0]["model"] == f"autorater@{second.version}"

    cache = root / "model-cache"
    by_alias = registry.resolve_model_arg("models:/autorater@champion", uri, cache)
    assert by_alias == cache / "autorater" / str(second.version)
    assert registry.resolve_model_arg(f"models:/autorater/{first['version']}", uri, cache) != by_alias
    assert registry.resolve_model_arg("models:/autorater/latest", uri, cache) == by_alias
    assert registry.resolve_model_arg(str(root / "model-2"), uri, cache) == root / "model-2"
    with pytest.raises(ValueError, match="no alias 'staging'"):
        registry.resolve_model_arg("models:/autorater@staging", uri, cache)
    with pytest.raises(ValueError, match="no registered model 'nope'"):
        registry.promote(uri, name="nope")
    with pytest.raises(ValueError, match="--tracking-uri"):
        registry.resolve_model_arg("models:/autorater@champion", None, cache)
    with pytest.raises(FileNotFoundError, match="not a model folder"):
        registry.resolve_model_arg(str(root / "missing"), uri, cache)


def test_log_evaluation_keeps_only_finite_numbers_and_stores_the_report(env):
    uri, run_id = env["uri"], env["tracked"].run_id
    report = {"outcome": {"balanced_accuracy": 0.75, "kappa": float("nan"), "n": 12, "ok": True},
              "per_agent": {"agent 1": {"rate": np.float64(0.5)}}, "curve": [0.1, 0.2], "suite": "tiny@v1"}
    assert tracking.log_evaluation(uri, run_id, report, prefix="eval.tiny") == run_id
    client = registry.mlflow_client(uri)
    metrics = client.get_run(run_id).data.metrics
    assert metrics["eval.tiny.outcome.balanced_accuracy"] == 0.75
    assert metrics["eval.tiny.outcome.n"] == 12 and metrics["eval.tiny.per_agent.agent 1.rate"] == 0.5
    assert not any(k.endswith(("kappa", ".ok", "curve", "suite")) for k in metrics)
    stored = client.download_artifacts(run_id, "evaluation/eval.tiny.json", str(env["root"]))
    assert json.loads(Path(stored).read_text())["curve"] == [0.1, 0.2]
    # Without a run: a stand-alone evaluation run.
    new_id = tracking.log_evaluation(uri, None, {"outcome": {"balanced_accuracy": 0.6}}, prefix="eval.other")
    new = client.get_run(new_id)
    assert new_id != run_id and new.data.tags[tracking.KIND_TAG] == "evaluation"
    assert new.data.metrics == {"eval.other.outcome.balanced_accuracy": 0.6}
    with pytest.raises(ValueError, match="is not in"):
        tracking.log_evaluation(uri, "0" * 32, report, prefix="eval.x")


def test_compare_runs_lists_runs_with_params_and_metrics(env):
    rows = compare.compare_runs(env["uri"], experiment="autorater", kind="train")
    by_id = {r["run_id"]: r for r in rows}
    first = by_id[env["tracked"].run_id]
    assert first["run_name"] == "first" and first["registered"] == f"autorater@{env['tracked'].version}"
    assert first["params"]["model.encoder"] == "pixels"
    assert "best_val_balanced_accuracy" in first["metrics"]
    assert [r["start_time"] for r in rows] == sorted((r["start_time"] for r in rows), reverse=True)
    table = compare.format_runs_table(compare.compare_runs(env["uri"]))
    assert "first" in table and env["tracked"].run_id[:8] in table and "best_val_balanced_accuracy" in table
    with pytest.raises(ValueError, match="no experiment 'nope'"):
        compare.compare_runs(env["uri"], experiment="nope")
    assert "no runs" in compare.format_runs_table([])


def test_a_failed_training_ends_its_run_failed(env, tmp_path):
    with pytest.raises(RuntimeError, match="boom"):
        with tracking.TrainingRun(env["uri"], PRESETS["tiny"], env["tc"], [env["suite"]], run_name="broken") as run:
            run.log(1, {"train_loss": 1.0, "val_balanced_accuracy": float("nan")})
            raise RuntimeError("boom")
    logged = registry.mlflow_client(env["uri"]).get_run(run.run_id)
    assert logged.info.status == "FAILED" and "boom" in logged.data.tags["error"]
    assert logged.data.metrics == {"train_loss": 1.0}


def test_docstring_examples_run():
    for module in (tracking, tune):
        assert doctest.testmod(module).failed == 0
