"""A default per world: ``autorater train`` without ``--config`` trains the preset the suites' world asks for (its
``default_preset(source)``), says which and why, and records it in the model folder and MLflow; suites from no
registered world, or from worlds that disagree, get the general model."""

from __future__ import annotations

import json

import torch

from autorater.app import cli
from autorater.app.cli.models import chosen_recipe
from autorater.data.generate import generate_suite
from autorater.data.worlds import WORLDS, load_world, preset_for
from autorater.data.worlds.toy import ToyOptions
from autorater.models import DEFAULT_PRESET, PRESETS
from model_suites import one_thread


def test_every_world_asks_for_a_registered_preset_and_says_why():
    for name in WORLDS:
        preset, why = load_world(name).default_preset({})
        assert preset in PRESETS and why


def test_babyai_asks_for_the_grid_reader_where_it_reads_the_view_and_camera_video_for_the_general_model():
    assert preset_for([{"world": "babyai", "view": "ego"}], DEFAULT_PRESET)[0] == "babyai-grid"
    assert preset_for([{"world": "babyai"}, {"world": "babyai"}], DEFAULT_PRESET)[0] == "babyai-grid"  # ego: default
    assert preset_for([{"world": "babyai", "view": "full"}], DEFAULT_PRESET)[0] == DEFAULT_PRESET
    assert preset_for([{"world": "metaworld"}], DEFAULT_PRESET)[0] == DEFAULT_PRESET


def test_unknown_or_disagreeing_worlds_get_the_fallback_with_the_reason():
    assert preset_for([{"world": "babyai"}, None], "general") == (
        "general", "a suite from no registered world: the default for any camera and any wording")
    preset, why = preset_for([{"world": "babyai"}, {"world": "metaworld"}], "general")
    assert preset == "general" and "babyai-grid" in why and "different presets" in why


def test_the_choice_is_the_worlds_not_a_test_of_its_name(monkeypatch):
    toy = load_world("toy")
    monkeypatch.setattr(toy, "default_preset", lambda source: ("tiny", "the toy's own reason"))
    assert preset_for([{"world": "toy"}], "general") == ("tiny", "toy suite: the toy's own reason")
    assert chosen_recipe("tiny-general", []) == {"preset": "tiny-general", "chosen_by": "--config",
                                                 "why": "named by --config"}


def test_train_without_config_trains_the_worlds_preset_and_records_it_in_the_folder_and_mlflow(
        tmp_path, monkeypatch, capsys):
    toy = load_world("toy")
    monkeypatch.setattr(toy, "default_preset", lambda source: ("tiny", "the toy's own reason"))
    monkeypatch.setattr(cli.common, "threads", lambda: None)
    suite = generate_suite(tmp_path / "s", world="toy", options=ToyOptions(grid_size=4, image_size=32), scenarios=4,
                           continuations_per_scenario=2, seed=3, workers=1, progress=False)
    before = one_thread()
    try:
        assert cli.main(["train", "--suite", str(suite), "--out", str(tmp_path / "m"), "--epochs", "1", "--quiet",
                         "--cache-dir", str(tmp_path / "cache"), "--workdir", str(tmp_path / "w")]) == 0
    finally:
        torch.set_num_threads(before)
    printed = capsys.readouterr().out
    assert "recipe: tiny (no --config: toy suite: the toy's own reason)" in printed
    meta = json.loads((tmp_path / "m" / "metadata.json").read_text())
    assert meta["recipe"] == {"preset": "tiny", "chosen_by": "world", "why": "no --config: toy suite: the toy's own "
                                                                              "reason"}
    assert json.loads((tmp_path / "m" / "config.json").read_text())["architecture"] == PRESETS["tiny"].architecture
    from autorater.mlflow_registry import default_tracking_uri, mlflow_client

    tags = mlflow_client(default_tracking_uri(tmp_path / "w")).get_run(meta["mlflow_run_id"]).data.tags
    assert tags["recipe.preset"] == "tiny" and tags["recipe.chosen_by"] == "world"
