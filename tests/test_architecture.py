"""One registration per architecture: the spec is what training, tuning and loading read (no test of an
architecture's name anywhere), a part's config nests and old flat folders map onto it, and the encoded inputs
travel as one bundle whose keys only their architecture names."""

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

from autorater.architecture import ArchitectureSpec, FrameProcessor
from autorater.config import FrameEncoderConfig
from autorater.model import Autorater, AutoraterOutput
from autorater.models import ARCHITECTURES, PRESETS, AutoConfig, AutoModel, processor_for, spec_of
from autorater.training.recipe import load_config, recipe_for
from autorater.training.stages.joint import supported_augmentations

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class MeanConfig(FrameEncoderConfig):
    """A toy architecture for this test: a logistic read of the mean of each clip's cells."""

    architecture = "mean"
    encoder: str = "pixels"
    grid_size: int = 2
    pixel_cells: int = 1
    image_size: int = 32
    clip_frames: int = 8

    def encoder_options(self) -> dict:
        return {**super().encoder_options(), "grid_size": self.grid_size}


class MeanModel(Autorater):
    config_class = MeanConfig
    processor_class = FrameProcessor

    def __init__(self, config: MeanConfig):
        super().__init__(config)
        self.out = torch.nn.Linear(self.frame_encoder.out_channels, 1)

    def forward_head(self, features, times_s, takeover_s, instructions, targets=None, encoded=None):
        logit = self.out(features.float().mean((1, 3, 4))).squeeze(-1)
        b, t = times_s.shape
        out = AutoraterOutput(logit, torch.zeros(b, t + 1), torch.zeros(b, 1), torch.zeros(b))
        if targets is not None:  # the clip's own rows with a label
            known = torch.isfinite(targets.success) & (targets.match != 0)
            out.loss = torch.nn.functional.binary_cross_entropy_with_logits(logit[known], targets.success[known])
        return out


MEAN = ArchitectureSpec(name="mean", config_class=MeanConfig, model_class=MeanModel,
                        presets={"tiny-mean": MeanConfig()}, recipe={"epochs": 3}, augmentations=frozenset({"mirror"}))


@pytest.fixture()
def registered(monkeypatch):
    """The toy architecture registered with its one line (and its preset), for one test."""
    monkeypatch.setitem(ARCHITECTURES, MEAN.name, MEAN)
    monkeypatch.setitem(PRESETS, "tiny-mean", MeanConfig())
    return MEAN


def test_a_registered_architecture_is_built_loaded_and_trained_by_its_spec(registered, tmp_path):
    from autorater.training.train import train
    from model_suites import learnable_suite

    config = AutoConfig.from_dict({"architecture": "mean", "grid_size": 3})
    assert type(config) is MeanConfig and spec_of(config) is registered
    model = AutoModel.from_config(config)
    model.save_pretrained(tmp_path / "m")
    loaded = AutoModel.from_pretrained(tmp_path / "m")
    x = {"frames": torch.randint(0, 256, (2, 8, 32, 32, 3), dtype=torch.uint8), "times_s": torch.rand(2, 8).sort(1)[0],
         "takeover_s": torch.zeros(2), "instructions": ["a", "b"]}
    with torch.no_grad():
        assert torch.equal(model(**x).success_logit, loaded(**x).success_logit)
    assert recipe_for(config).epochs == 3 and load_config("tiny-mean")[1].epochs == 3  # its recipe, by its spec
    assert processor_for(config).cache_key(frozen=True).startswith("pixels-3g")
    suite = learnable_suite(tmp_path / "suite", n_scenarios=4, per_scenario=2)
    tc = recipe_for(config, aggregation="majority", cache_dir=str(tmp_path / "cache"))
    result = train([suite], config, tc, out=tmp_path / "trained")
    assert len(result.history) == 3 and all(np.isfinite(h["train_loss"]) for h in result.history)
    trained = AutoModel.from_pretrained(tmp_path / "trained")
    assert type(trained) is MeanModel and not torch.equal(trained.out.weight, model.out.weight)  # it learned


def test_a_spec_refuses_a_config_of_another_name_and_unknown_augmentations():
    with pytest.raises(ValueError, match="must name it"):
        ArchitectureSpec(name="other", config_class=MeanConfig, model_class=MeanModel)
    with pytest.raises(ValueError, match="unknown augmentations"):
        ArchitectureSpec(name="mean", config_class=MeanConfig, model_class=MeanModel, augmentations={"warp"})


def test_augmentations_the_architecture_does_not_support_are_switched_off_with_a_note(registered):
    from autorater.training.recipe import TrainConfig

    data = type("Data", (), {"clips": type("Clips", (), {"is_frames": False})(), "pixel_cells": 1})()
    tc, notes = supported_augmentations(TrainConfig().replace(augment={"crop": 0.5}), registered, [], data)
    assert tc.augment.crop == 0.0 and tc.augment.mirror and any(
        "augment.crop off: the mean architecture does not support it" in n for n in notes)


def test_the_outcome_path_is_a_nested_part_and_old_flat_folders_map_onto_it():
    general = PRESETS["general"]
    flat = {k: v for k, v in general.to_dict().items() if k != "outcome"}
    flat.update({f"outcome_{k}": v for k, v in dataclasses.asdict(general.outcome).items()})
    flat["outcome_blocks"] = 0
    old = AutoConfig.from_dict(flat)
    assert old.outcome == dataclasses.replace(general.outcome, blocks=0)
    assert general.replace(outcome_blocks=2).outcome.blocks == 2  # the flat name still sets the part's field
    with pytest.raises(ValueError, match="field 'outcome'.*field 'blocks' must be in 0..64"):
        AutoConfig.from_dict({**general.to_dict(), "outcome": {"blocks": 99}})
    with pytest.raises(ValueError, match="both 'outcome' and flat fields"):
        AutoConfig.from_dict({**general.to_dict(), "outcome_dim": 64})


def test_no_product_module_tests_an_architectures_name_or_reads_config_fields_by_getattr():
    pattern = re.compile(r"architecture ==|architecture !=|getattr\((cfg|config|c),")
    found = [f"{p.relative_to(ROOT)}:{i}" for folder in ("autorater", "training") for p in (ROOT / folder).rglob("*.py")
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert not found, f"read the architecture's spec instead: {found}"


def test_the_outcome_paths_key_is_named_in_its_own_module_and_the_general_models_only():
    users = sorted(str(p.relative_to(ROOT)) for folder in ("autorater", "training", "serving", "app", "data")
                   for p in (ROOT / folder).rglob("*.py") if "OUTCOME_INPUT" in p.read_text(encoding="utf-8"))
    assert users == ["autorater/models/general.py", "autorater/models/parts/outcome.py"]


def test_a_recipe_of_the_retired_design_loads_without_its_loss_weights():
    from autorater.training.recipe import TrainConfig

    assert TrainConfig.from_dict({"epochs": 3, "marker_weight": 0.5, "failure_weight": 0.2}) == TrainConfig(epochs=3)
    with pytest.raises(ValueError, match="unknown TrainConfig field"):
        TrainConfig.from_dict({"marker_wieght": 0.5})


def test_a_general_folder_saved_with_the_flat_outcome_fields_loads_and_rates_alike(tmp_path):
    """A folder as saved before the outcome path had its own config: flat ``outcome_*`` fields in config.json, its
    checksum over them in the weights' header."""
    import json

    from safetensors.torch import load_file, save_file

    from autorater.model import config_sha256, read_safetensors_header

    torch.manual_seed(0)
    model = AutoModel.from_config(PRESETS["tiny-general"].replace(failure_modes=["timeout"])).eval()
    folder = model.save_pretrained(tmp_path / "m")
    d = json.loads((folder / "config.json").read_text())
    flat = {**{k: v for k, v in d.items() if k != "outcome"}, **{f"outcome_{k}": v for k, v in d["outcome"].items()}}
    (folder / "config.json").write_text(json.dumps(flat))
    meta = {**read_safetensors_header(folder / "model.safetensors")[1], "config_sha256": config_sha256(flat)}
    save_file(load_file(str(folder / "model.safetensors")), str(folder / "model.safetensors"), metadata=meta)
    loaded = AutoModel.from_pretrained(folder)
    assert loaded.config == model.config
    x = {"frames": torch.randint(0, 256, (2, 8, 64, 64, 3), dtype=torch.uint8), "times_s": torch.rand(2, 8).sort(1)[0],
         "takeover_s": torch.zeros(2), "instructions": ["open the drawer", "press the button"]}
    with torch.no_grad():
        assert torch.equal(model(**x).success_logit, loaded(**x).success_logit)


def test_mlflow_params_name_a_parts_fields_one_by_one():
    from autorater.training.tracking import flatten_params

    params = flatten_params(PRESETS["general-parts"])
    assert params["model.outcome.blocks"] == "0" and params["model.outcome.members"] == "5"
    assert "model.outcome" not in params and params["model.queries"] == "4"


def test_a_run_says_which_augmentations_it_switched_off_and_why(tmp_path):
    import json

    from autorater.training.recipe import TrainConfig
    from autorater.training.train import train
    from model_suites import learnable_suite

    suite = learnable_suite(tmp_path / "suite", n_scenarios=4, per_scenario=2)
    tc = TrainConfig(epochs=1, aggregation="majority", cache_dir=str(tmp_path / "c")).replace(augment={"crop": 0.5})
    result = train([suite], PRESETS["tiny"], tc, out=tmp_path / "m")
    notes = json.loads((tmp_path / "m" / "metadata.json").read_text())["recipe_notes"]
    assert notes == result.notes and any(n.startswith("augment.crop off: the events architecture") for n in notes)
    assert any(n.startswith("augment.rotate off: the suites are not top-down") for n in notes)  # BabyAI's, not these
