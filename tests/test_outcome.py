"""The general model at two rates: the outcome from a few chosen frames through an encoder whose top learns, the
marker from every frame; the cache holds what each path needs; references never seen in training."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from autorater.model import read_safetensors_header
from autorater.models import PRESETS, AutoConfig, AutoModel, processor_for
from autorater.models.parts.outcome import (
    OUTCOME_INPUT,
    OutcomeHead,
    augment_frames,
    outcome_frame_index,
    outcome_loss,
    outcome_times,
)
from autorater.predict import calibrate_outputs

TINY = PRESETS["tiny-general"]


def test_the_outcome_frames_are_the_takeover_the_last_and_evenly_between():
    times = torch.tensor([[0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.75, 0.75],  # padded: the last repeats
                          [0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0]])
    index = outcome_frame_index(times, torch.tensor([0.3, 0.0]), 4)
    assert index[0].tolist() == [2, 3, 5, 6]  # 0.25 is the last frame at or before the takeover; 0.75 the last real
    assert index[1].tolist() == [0, 3, 5, 8]
    assert outcome_frame_index(times[:, :1], torch.zeros(2), 4).tolist() == [[0] * 4] * 2  # one frame: repeated


def test_the_outcome_head_reads_the_words_and_any_number_of_frames():
    head = OutcomeHead(channels=8, dim=16, queries=2, layers=1, heads=2, dropout=0.0)
    maps = torch.randn(3, 4, 8, 5, 5)
    share, since = torch.linspace(0, 1, 4).repeat(3, 1), torch.rand(3, 4)
    text = torch.randn(3, head.text_dim)
    assert head(maps, share, since, text).shape == (3,)
    assert head(maps[:, :2], share[:, :2], since[:, :2], text).shape == (3,)
    assert not torch.allclose(head(maps, share, since, text), head(maps, share, since, torch.randn(3, head.text_dim)))


def test_the_outcome_loss_weighs_both_classes_alike_and_skips_unweighted_rows():
    logit, y = torch.tensor([2.0, 2.0, 2.0, -1.0]), torch.tensor([1.0, 1.0, 1.0, 0.0])
    one_each = outcome_loss(logit[2:], y[2:], torch.ones(2))
    assert outcome_loss(logit, y, torch.ones(4)) == pytest.approx(float(one_each))  # three successes weigh as one
    assert outcome_loss(logit, y, torch.tensor([1.0, 1.0, 1.0, 0.0])) == pytest.approx(
        0.5 * float(torch.nn.functional.softplus(torch.tensor(-2.0))))
    assert float(outcome_loss(logit, torch.full((4,), float("nan")), torch.ones(4))) == 0.0


def test_pixel_augmentation_is_seeded_and_keeps_the_clip_shape():
    frames = torch.randint(0, 256, (2, 4, 32, 32, 3), dtype=torch.uint8)
    a = augment_frames(frames, torch.Generator().manual_seed(0))
    b = augment_frames(frames, torch.Generator().manual_seed(0))
    assert a.shape == frames.shape and a.dtype == torch.uint8 and torch.equal(a, b)
    assert not torch.equal(a, frames)


def test_the_marker_of_a_called_success_is_a_success_frame_and_of_a_failure_a_failure_frame():
    marker, failure_marker = np.array([1.0, 1.0]), np.array([3.0, 3.0])
    p, chosen = calibrate_outputs(np.array([2.0, -2.0]), marker, [4.0, 4.0], {}, failure_marker)
    assert (p >= 0.5).tolist() == [True, False] and chosen.tolist() == [1.0, 3.0]


def test_an_event_model_gives_its_success_and_failure_markers_consistent_with_its_outcome():
    model = AutoModel.from_config(TINY.replace(outcome_frames=0, failure_modes=["timeout", "knocked_off"])).eval()
    frames = torch.randint(0, 256, (2, 8, 64, 64, 3), dtype=torch.uint8)
    times = torch.arange(8.0).repeat(2, 1) / 8
    with torch.no_grad():
        out = model(times_s=times, takeover_s=torch.zeros(2), instructions=["open it", "close it"], frames=frames)
    p = torch.sigmoid(out.success_logit)
    assert torch.allclose(out.success_marker_logits.exp().sum(1), p, atol=1e-4)  # P(success) over its frames
    assert torch.allclose(out.failure_marker_logits.exp().sum(1), 1 - p, atol=1e-4)  # failure at t, or none


@pytest.fixture(scope="module")
def two_rate():
    torch.manual_seed(0)
    return AutoModel.from_config(TINY.replace(failure_modes=["timeout"], outcome_blocks=1)).eval()  # block 4 learns


def test_a_two_rate_model_rates_frames_and_its_cached_inputs_alike(two_rate):
    frames = torch.randint(0, 256, (2, 8, 64, 64, 3), dtype=torch.uint8)
    times, takeover = torch.arange(8.0).repeat(2, 1) / 8, torch.tensor([0.2, 0.0])
    words = ["pick up the red block", "pick up the blue block"]
    with torch.no_grad():
        direct = two_rate(times_s=times, takeover_s=takeover, instructions=words, frames=frames)
        cached = two_rate.encode(frames, times, takeover)
        again = two_rate(times_s=times, takeover_s=takeover, instructions=words, features=cached.pop("x").half(),
                         encoded={k: v.half() for k, v in cached.items()})
    assert cached[OUTCOME_INPUT].shape[:2] == (2, TINY.outcome.frames)
    assert torch.allclose(direct.success_logit, again.success_logit, atol=0.05)  # float16 in the cache


def test_a_two_rate_folder_keeps_the_top_blocks_and_the_head_not_the_bottom(two_rate, tmp_path):
    from autorater.model import read_safetensors_header

    two_rate.save_pretrained(tmp_path / "m")
    shapes, _ = read_safetensors_header(tmp_path / "m" / "model.safetensors")
    assert any(k.startswith("outcome.encoder.top.") for k in shapes)
    assert any(k.startswith("outcome.heads.") for k in shapes)
    assert not any(k.startswith(("outcome.encoder.bottom.", "frame_encoder.")) for k in shapes)
    loaded = AutoModel.from_pretrained(tmp_path / "m")
    frames = torch.randint(0, 256, (1, 8, 64, 64, 3), dtype=torch.uint8)
    x = dict(times_s=torch.arange(8.0)[None] / 8, takeover_s=torch.zeros(1), instructions=["open it"], frames=frames)
    with torch.no_grad():
        assert torch.allclose(two_rate(**x).success_logit, loaded(**x).success_logit, atol=1e-5)


def flat(config) -> dict:
    """A general config dict as folders saved it before the outcome path had its own config: ``outcome_*``."""
    d = config.to_dict()
    return {**{k: v for k, v in d.items() if k != "outcome"}, **{f"outcome_{k}": v for k, v in d["outcome"].items()}}


def test_a_general_folder_from_before_the_outcome_path_loads_without_one(tmp_path):
    old = {k: v for k, v in flat(TINY).items() if not k.startswith("outcome_")}
    config = AutoConfig.from_dict(old)
    assert config.outcome.frames == 0 and processor_for(config).decode_args()["size"] == config.image_size
    assert not hasattr(AutoModel.from_config(config), "outcome")


def test_the_cache_holds_real_frames_only_and_one_entry_per_video(tmp_path):
    from autorater.training.inputs.cache import FeatureCache
    from model_suites import N_FRAMES, camera_suite

    suite = camera_suite(tmp_path / "suite", n_scenarios=2, per_scenario=1)
    paths = [str(suite.video_path(c)) for c in suite.continuation_ids()]
    cache = FeatureCache(tmp_path / "cache")
    model = AutoModel.from_config(TINY.replace(clip_frames=N_FRAMES + 4, failure_modes=["timeout"]))
    clips = cache.load(model, paths + paths[:1], takeovers_s=[0.0, 0.0, 0.0])  # the first video twice
    assert cache.misses == 2 and len(list((tmp_path / "cache").rglob("*.safetensors"))) == 2
    maps = clips.encoded[OUTCOME_INPUT]
    assert maps.shape[:2] == (3, TINY.outcome.frames) and torch.equal(maps[0], maps[2])
    assert clips.features.shape[1] == N_FRAMES  # not padded to clip_frames


def test_the_whole_encoder_trains_from_augmented_pixels_when_asked(tmp_path):
    """``outcome_blocks`` = the stage's block groups + 1: the stem trains too, the cache holds the outcome frames
    (uint8) and each batch sees them cropped and recoloured (the GPU recipe; here on the CPU, tiny)."""
    from autorater.training.recipe import TrainConfig
    from autorater.training.train import train
    from model_suites import camera_suite, one_thread

    suite = camera_suite(tmp_path / "suite", n_scenarios=4, per_scenario=2)
    config = TINY.replace(outcome_blocks=6)
    before = one_thread()
    try:
        tc = TrainConfig(epochs=1, val_share=0.25, cache_dir=str(tmp_path / "cache"))
        result = train([suite], config, tc.replace(stream={"match_warmup_epochs": 0}))
    finally:
        torch.set_num_threads(before)
    model = result.model
    assert model.outcome.encoder.caches_frames and model.outcome.encoder.bottom is None
    fresh = AutoModel.from_config(model.config)
    stem = "outcome.encoder.top.0.0.weight"
    assert not torch.equal(model.state_dict()[stem], fresh.state_dict()[stem])  # the stem learned
    from safetensors.torch import load_file

    (entry,) = [p for p in (tmp_path / "cache").rglob("*.safetensors")][:1]
    assert load_file(str(entry))[OUTCOME_INPUT].dtype == torch.uint8


def test_an_ensemble_rates_the_mean_probability_of_its_heads():
    torch.manual_seed(0)
    model = AutoModel.from_config(TINY.replace(failure_modes=["timeout"], outcome_members=3)).eval()
    assert len(model.outcome.heads) == 3
    maps = torch.randn(2, 4, model.outcome.encoder.out_channels, 4, 4)
    times, takeover = torch.arange(8.0).repeat(2, 1) / 8, torch.zeros(2)
    words = ["open it", "close it"]
    where = outcome_times(times, takeover, outcome_frame_index(times, takeover, 4))
    with torch.no_grad():
        heads = [AutoModel.from_config(TINY.replace(failure_modes=["timeout"], outcome_members=1)) for _ in range(3)]
        for one, head in zip(heads, model.outcome.heads):
            one.outcome.set_heads([head])
        p = torch.stack([torch.sigmoid(one.outcome.logit(maps, *where, one.outcome.text(words))) for one in heads])
        assert torch.allclose(torch.sigmoid(model.outcome.logit(maps, *where, model.outcome.text(words))), p.mean(0),
                              atol=1e-5)


def test_a_folder_from_before_the_ensemble_loads_with_its_one_attention_head(tmp_path):
    one = AutoModel.from_config(TINY.replace(failure_modes=["timeout"], outcome_members=1))
    one.save_pretrained(tmp_path / "m")
    config = flat(AutoConfig.from_dict(json.loads((tmp_path / "m" / "config.json").read_text())))
    del config["outcome_members"], config["outcome_pooling"]  # written before the fields existed
    old = AutoConfig.from_dict(config)
    assert old.outcome.members == 1 and old.outcome.pooling == "attention"
    shapes, _ = read_safetensors_header(tmp_path / "m" / "model.safetensors")
    assert "gate" in shapes and not any(k.startswith("outcome.heads.1.") for k in shapes)


def test_the_gate_is_kept_where_the_stream_adds_and_dropped_where_it_does_not():
    from autorater.training.stages.gate import fit_gate

    rng = np.random.default_rng(0)
    y = rng.random(400) < 0.5
    groups = [f"s{i // 4}" for i in range(400)]
    outcome = np.where(rng.random(400) < 0.7, 1.0, -1.0) * np.where(y, 1, -1)  # right 70% of the time
    event = 3.0 * np.where(y, 1, -1) + rng.normal(0, 0.5, 400)  # the stream knows
    gate, gain = fit_gate(outcome, event, y.astype(float), groups)
    assert gate > 0 and gain > 0.1
    gate, gain = fit_gate(outcome, rng.normal(0, 3, 400), y.astype(float), groups)  # the stream is noise
    assert gate == 0.0 and gain <= 0


def test_the_verdict_says_converged_or_still_rising():
    from autorater.training.loop import convergence_verdict

    curve = [{"val_balanced_accuracy": v} for v in (0.6, 0.7, 0.8, 0.79, 0.78)]
    assert convergence_verdict(curve, 10).startswith("converged at epoch 3")
    assert convergence_verdict(curve[:3], 3).startswith("still rising at epoch 3 of 3")
    assert "raise the budget" in convergence_verdict(curve[:3], 3)


def test_the_parts_train_apart_each_to_its_best_epoch_and_the_folder_holds_the_ensemble(tmp_path):
    """The outcome heads alone on the cached maps (each stopped early at its best validation epoch), then the stream
    alone, then the gate; the saved folder holds every head in safetensors, loads, and rates as the trained model."""
    from autorater.training.recipe import recipe_for
    from autorater.training.train import train
    from model_suites import camera_suite, one_thread

    suite = camera_suite(tmp_path / "suite", n_scenarios=8, per_scenario=2)
    config = TINY.replace(outcome_members=2)
    tc = recipe_for(config, epochs=2, val_share=0.25, cache_dir=str(tmp_path / "cache"),
                    stream={"match_warmup_epochs": 1}, outcome={"steps": 40})
    assert tc.parts_apart
    before = one_thread()
    try:
        result = train([suite], config, tc, out=tmp_path / "m")
    finally:
        torch.set_num_threads(before)
    assert result.verdict.startswith("outcome heads: ") and "| stream: " in result.verdict
    heads = [[h for h in result.history if h.get("part") == f"outcome{i}"] for i in range(2)]
    for curve in heads:
        best = max(h["val_balanced_accuracy"] for h in curve)
        assert 1 <= len(curve) <= 20 and result.best["outcome_val_balanced_accuracy"].count(best) >= 1
    shapes, _ = read_safetensors_header(tmp_path / "m" / "model.safetensors")
    assert {k.split(".")[2] for k in shapes if k.startswith("outcome.heads.")} == {"0", "1"}
    assert json.loads((tmp_path / "m" / "metadata.json").read_text())["verdict"] == result.verdict
    loaded = AutoModel.from_pretrained(tmp_path / "m")
    assert float(loaded.gate.detach()) == pytest.approx(result.best["gate"])
    frames = torch.randint(0, 256, (1, 8, 64, 64, 3), dtype=torch.uint8)
    x = dict(times_s=torch.arange(8.0)[None] / 8, takeover_s=torch.zeros(1), instructions=["open it"], frames=frames)
    with torch.no_grad():
        assert torch.allclose(result.model(**x).success_logit, loaded(**x).success_logit, atol=1e-5)


def test_the_default_trains_jointly_and_the_parts_preset_apart():
    from autorater.training.recipe import recipe_for

    assert not recipe_for(PRESETS["general"]).parts_apart  # block group 4 learns: one joint step
    parts = PRESETS["general-parts"]
    assert recipe_for(parts).parts_apart and parts.outcome.members == 5 and parts.outcome.blocks == 0
    assert not recipe_for(parts, parts_apart=False).parts_apart  # an explicit change wins


def test_the_cache_keys_frame_rule_is_pinned_to_the_function_that_picks_the_frames():
    """The cache key names the rule that picks the outcome frames (``FRAME_RULE``); the rule is
    ``outcome_frame_index``'s code (its body, less the docstring: comments and layout aside), pinned here. Changing it
    fails this test: give the new rule a new ``FRAME_RULE`` (a new rule is a new cache, never old frames under it) and
    pin its hash."""
    import ast
    import hashlib
    import inspect

    from autorater.models.parts import outcome

    body = ast.parse(inspect.getsource(outcome.outcome_frame_index)).body[0].body[1:]
    rule = hashlib.sha256("\n".join(ast.dump(node) for node in body).encode()).hexdigest()[:16]
    assert (outcome.FRAME_RULE, rule) == ("takeover-last-even", "eb2512842555d07c")
    assert outcome.FRAME_RULE in processor_for(TINY).cache_key(frozen=True)
