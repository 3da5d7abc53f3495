"""Every preset device-clean (issue 63): every registered preset, and the options a preset leaves off, trains on
another device than the CPU through every stage of its training (the grid's start from the data, the match warm-up,
the joint step; parts apart: each outcome head, the stream, the gate) with no tensor made on the CPU meeting one on the
model's device. No GPU needed: ``other_device.on_another_device`` makes ``meta`` the model's device, its numbers kept
on the CPU, and fails any operation a GPU would refuse (``StrayDevice``)."""

from __future__ import annotations

import pytest
import torch

from autorater.models import PRESETS, spec_of
from model_suites import camera_suite, learnable_suite, one_thread
from other_device import OTHER, Elsewhere, StrayDevice, on_another_device


def variants() -> dict:
    """Every registered preset as it is, and beside them what a preset leaves off: the whole encoder from pixels on
    the small general preset (the GPU recipe, ``outcome.blocks`` 6), the grid recipe's ensemble with mirrored
    prediction and sentence vectors."""
    out = dict(PRESETS)
    out["tiny-general+whole-encoder"] = PRESETS["tiny-general"].replace(outcome_blocks=6)
    out["tiny-general+reference-frame"] = PRESETS["tiny-general"].replace(reference_frame=True, members=2)
    out["babyai-grid+ensemble-mirror-minilm"] = PRESETS["babyai-grid"].replace(members=2, mirror_tta=True,
                                                                               text_encoder="minilm")
    return out


VARIANTS = variants()


@pytest.fixture(scope="module")
def suites(tmp_path_factory):
    root = tmp_path_factory.mktemp("device")
    return {"general": camera_suite(root / "camera", n_scenarios=4, per_scenario=2),
            "events": learnable_suite(root / "grid", n_scenarios=4, per_scenario=2), "cache": str(root / "cache")}


@pytest.fixture()
def threads():
    before = one_thread()
    yield
    torch.set_num_threads(before)


def spy_on_stages(monkeypatch, model_class) -> list[str]:
    """Record every stage as it starts (the training loop's ``fit`` of each part; the model's start from the data),
    failing any that starts with a weight on the CPU."""
    import autorater.training.stages.joint as joint
    import autorater.training.stages.outcome as outcome
    import autorater.training.stages.stream as stream

    stages: list[str] = []

    def on_the_device(what: str, module) -> None:
        here = [n for n, p in module.named_parameters() if not isinstance(p, Elsewhere)]
        assert not here, f"{what} starts with weights on the CPU: {here[:3]}"
        stages.append(what)

    for module in (joint, stream, outcome):
        def fit(part, *args, _fit=module.fit, **kwargs):
            on_the_device(type(part).__name__, part.module)
            return _fit(part, *args, **kwargs)

        monkeypatch.setattr(module, "fit", fit)
    start = model_class.init_from_data

    def init_from_data(self, *args, **kwargs):
        on_the_device("init_from_data", self)
        return start(self, *args, **kwargs)

    monkeypatch.setattr(model_class, "init_from_data", init_from_data)
    return stages


# torch's batch norm, loading a state without ``num_batches_tracked`` into a module on ``meta``, warns that the copy
# is a no-op on that device: here the other device holds numbers, and the copy is made
@pytest.mark.filterwarnings("ignore:for .*num_batches_tracked:UserWarning")
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_preset_trains_through_every_stage_on_another_device(name, suites, threads, monkeypatch):
    from autorater.models import AutoModel
    from autorater.training.inputs.batches import prepare
    from autorater.training.recipe import recipe_for
    from autorater.training.train import train

    config = VARIANTS[name]
    spec = spec_of(config)
    suite = suites[config.architecture]
    tc = recipe_for(config, epochs=1, val_share=0.25, batch_size=4, cache_dir=suites["cache"], device=str(OTHER),
                    stream={"match_warmup_epochs": 1}, outcome={"steps": 2})
    prepared = prepare([suite], config, tc)  # decoding and the frozen encoder's cache: the CPU's, as on a GPU machine
    stages = spy_on_stages(monkeypatch, spec.model_class)
    with on_another_device():
        result = train([suite], config, tc, prepared=prepared)
    parts = {part.stage for part in AutoModel.from_config(prepared[0].config).parts().values()}
    expected = {"init_from_data", "JointPart"} | ({"MatchWarmUp"} if "stream" in parts else set())
    if tc.parts_apart and "outcome" in parts:
        expected |= {"OutcomeHeadPart"}
        assert stages.count("OutcomeHeadPart") == config.outcome.members
        assert "gate" in result.best  # fitted on the held-out rows' ratings, made on the device
    assert expected <= set(stages), f"stages never reached: {expected - set(stages)}"
    assert all(isinstance(p, Elsewhere) for p in result.model.parameters())  # the trained model is where it trained
    assert 0.0 <= result.best["val_balanced_accuracy"] <= 1.0 and result.history


def test_the_other_device_refuses_what_a_gpu_refuses_and_allows_what_it_allows():
    """The check itself: a tensor made without a device meets the model's (pose.py's old ``moves``), CPU features
    indexed by rows on the device, a CPU generator for the device, numpy of a device tensor; and what CUDA allows:
    CPU indices into a device tensor, a CPU scalar tensor, copies both ways."""
    with on_another_device():
        best = torch.tensor([[1, 2], [3, 0]], device=OTHER)
        with pytest.raises(StrayDevice, match="aten.cat"):
            torch.cat([torch.zeros(2, 1, dtype=torch.long), best], 1)
        with pytest.raises(StrayDevice, match="indexed by indices on the other device"):
            torch.arange(10.0)[best[:, 0]]
        with pytest.raises(StrayDevice, match="generator"):
            torch.randn(3, generator=torch.Generator().manual_seed(0), device=OTHER)
        with pytest.raises(TypeError, match="cpu"):
            best.numpy()
        layer = torch.nn.Linear(2, 1).to(OTHER)
        with pytest.raises(StrayDevice, match="addmm|mm|linear"):
            layer(torch.ones(3, 2))
        x = torch.arange(6.0).view(3, 2).to(OTHER)
        picked = x[torch.tensor([2, 0])] * torch.tensor(2.0)  # CPU indices and a CPU scalar: allowed, as on CUDA
        x[:, 0] = torch.ones(3)  # a copy across devices
        assert isinstance(picked, Elsewhere) and picked.cpu().tolist() == [[8.0, 10.0], [0.0, 2.0]]
        assert x.cpu()[:, 0].tolist() == [1.0, 1.0, 1.0] and type(x.cpu()) is torch.Tensor
        loss = layer(x).sum()
        loss.backward()
        assert isinstance(layer.weight.grad, Elsewhere) and torch.isfinite(loss).item()
