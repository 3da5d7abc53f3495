"""The Autorater model: outputs and losses, the model folder (round trip, no pickle, tampering), marker decoding.

Everything uses the ``tiny`` preset (no pretrained weights) except one test that builds the real ``base``
encoders from their installed packages, offline.
"""

from __future__ import annotations

import doctest
import json
import pickle
import socket

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from autorater.model import Autorater, AutoraterOutput, Targets
from autorater.models import PRESETS, AutoConfig, AutoModel
from autorater.rater import Predictions
from model_suites import GROUNDINGS, grounding_id, one_thread, saved_before_the_config_checksum, tiny_preset

VOCAB = ["go", "to", "the", "red", "blue", "ball"]
MODES = ["timeout", "wrong_object"]
B, T = 3, 8  # clips, sampled frames


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    before = one_thread()
    yield
    torch.set_num_threads(before)


def tiny_model(seed: int = 0, **changes) -> Autorater:
    """A tiny model whose every parameter (zeros at init included) is moved off its initial value."""
    torch.manual_seed(seed)
    model = AutoModel.from_config(tiny_preset(changes).replace(vocab=VOCAB, failure_modes=MODES))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g))
    return model.eval()


def inputs(seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    return {"frames": torch.randint(0, 256, (B, T, 32, 32, 3), dtype=torch.uint8, generator=g),
            "times_s": (torch.arange(T).float() / T).repeat(B, 1),  # 1-s videos
            "takeover_s": torch.tensor([0.0, 0.25, 0.5]),
            "instructions": ["go to the red ball", "go to the blue ball", "pick up a key"]}  # unknown words too


def targets(success=(1.0, 0.0, 0.7)) -> Targets:
    return Targets(success=torch.tensor(success), marker_index=torch.tensor([4, -1, T]),
                   failure_mode=torch.tensor([-1, 1, -1]), match=torch.tensor([1.0, 1.0, 0.0]))


def outputs_equal(a: AutoraterOutput, b: AutoraterOutput) -> bool:
    return all(torch.equal(getattr(a, k), getattr(b, k))
               for k in ("success_logit", "marker_logits", "failure_logits", "match_logit"))


# ----------------------------------------------------------------------------------------------
# Outputs and losses


@pytest.mark.parametrize("grounding", GROUNDINGS, ids=grounding_id)
def test_outputs_have_the_documented_shapes_and_are_finite(grounding):
    model = tiny_model(**grounding)
    with torch.no_grad():
        out = model(**inputs())
    assert out.success_logit.shape == (B,) and out.match_logit.shape == (B,)
    assert out.marker_logits.shape == (B, T + 1)  # every sampled frame, then "end of video"
    assert out.failure_logits.shape == (B, len(MODES))
    for k in ("success_logit", "marker_logits", "failure_logits", "match_logit"):
        assert torch.isfinite(getattr(out, k)).all(), k


@pytest.mark.parametrize("grounding", GROUNDINGS, ids=grounding_id)
def test_cached_features_give_the_same_outputs_as_frames(grounding):
    model, x = tiny_model(**grounding), inputs()
    with torch.no_grad():
        from_frames = model(**x)
        features = model.frame_encoder.cacheable(x.pop("frames"))  # what the feature cache stores
        from_features = model(**x, features=features)
    assert features.shape[:2] == (B, T)
    assert outputs_equal(from_frames, from_features)


@pytest.mark.parametrize("grounding", GROUNDINGS, ids=grounding_id)
def test_the_loss_comes_only_when_targets_are_passed(grounding):
    model = tiny_model(**grounding).train()
    out = model(**inputs())
    assert out.loss is None and out.losses == {}
    out = model(**inputs(), targets=targets())
    assert set(out.losses) == {"event", "counterfactual", "match"}
    assert out.loss.shape == () and torch.isfinite(out.loss) and out.loss.requires_grad
    assert all(torch.isfinite(v) for v in out.losses.values())
    out.loss.backward()
    assert all(head.mlp[-1].weight.grad.abs().sum() > 0 for head in model.stream.heads)
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


@pytest.mark.parametrize("grounding", GROUNDINGS, ids=grounding_id)
def test_the_instruction_changes_the_outputs_and_the_blind_model_ignores_it(grounding):
    x = inputs()
    swapped = {**x, "instructions": x["instructions"][::-1]}
    model = tiny_model(**grounding)
    with torch.no_grad():
        assert not torch.equal(model(**x).success_logit, model(**swapped).success_logit)
    blind = tiny_model(use_instruction=False, **grounding)
    with torch.no_grad():
        assert outputs_equal(blind(**x), blind(**swapped))


def _free_outputs(seed: int = 0) -> AutoraterOutput:
    """Outputs as leaf tensors, to look at the gradient each row receives."""
    g = torch.Generator().manual_seed(seed)
    return AutoraterOutput(success_logit=torch.randn(B, generator=g).requires_grad_(),
                           marker_logits=torch.randn(B, T + 1, generator=g).requires_grad_(),
                           failure_logits=torch.randn(B, len(MODES), generator=g).requires_grad_(),
                           match_logit=torch.randn(B, generator=g).requires_grad_())


@pytest.mark.parametrize("architecture, key", [("events", "event")])
def test_all_nan_success_targets_give_a_zero_success_loss_and_a_finite_total(architecture, key):
    model = tiny_model(architecture=architecture).train()
    out = model(**inputs(), targets=targets(success=(float("nan"),) * B))
    assert out.losses[key] == 0
    assert torch.isfinite(out.loss)
    out.loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


# ----------------------------------------------------------------------------------------------
# The model folder


@pytest.mark.parametrize("grounding", GROUNDINGS, ids=grounding_id)
def test_save_then_load_gives_identical_predictions(tmp_path, grounding):
    model = tiny_model(seed=1, **grounding)
    model.save_pretrained(tmp_path / "plain")
    assert sorted(p.name for p in (tmp_path / "plain").iterdir()) == ["config.json", "model.safetensors"]
    meta = {"train_suites": ["tiny@v1"], "n_train": 8}
    model.save_pretrained(tmp_path / "m", metadata=meta)
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["config.json", "metadata.json",
                                                                   "model.safetensors"]
    assert json.loads((tmp_path / "m" / "metadata.json").read_text()) == meta
    loaded = AutoModel.from_pretrained(tmp_path / "m")
    assert not loaded.training and loaded.config == model.config
    x = inputs()
    with torch.no_grad():
        assert outputs_equal(model(**x), loaded(**x))
        assert not torch.equal(model(**x).success_logit, tiny_model(seed=2, **grounding)(**x).success_logit)


def test_loading_never_unpickles(tmp_path, monkeypatch):
    tiny_model().save_pretrained(tmp_path / "m")
    calls = []

    def forbidden(name):
        def fn(*args, **kwargs):
            calls.append(name)
            raise AssertionError(f"{name} called while loading a model folder")
        return fn

    for owner, name in ((pickle, "load"), (pickle, "loads"), (torch, "load"), (torch.serialization, "load")):
        monkeypatch.setattr(owner, name, forbidden(f"{owner.__name__}.{name}"))
    AutoModel.from_pretrained(tmp_path / "m")
    assert calls == []


@pytest.mark.parametrize("keep", [0, 7, 0.5, -1], ids=["empty", "8-bytes", "half", "last-byte-cut"])
def test_a_truncated_safetensors_file_is_a_clear_error(tmp_path, keep):
    tiny_model().save_pretrained(tmp_path / "m")
    path = tmp_path / "m" / "model.safetensors"
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep) if isinstance(keep, float) else keep])
    with pytest.raises(ValueError, match="model.safetensors") as err:
        AutoModel.from_pretrained(tmp_path / "m")
    assert str(path) in str(err.value)


@pytest.mark.parametrize("change", ["wrong_shape", "missing", "extra"])
def test_a_tensor_that_does_not_fit_the_config_is_a_clear_error(tmp_path, change):
    tiny_model().save_pretrained(tmp_path / "m")
    path = tmp_path / "m" / "model.safetensors"
    state = load_file(str(path))
    key = "stream.heads.0.mlp.2.weight"  # the event classifier's last layer
    if change == "wrong_shape":
        state[key] = torch.zeros(1, 7)
    elif change == "missing":
        del state[key]
    else:
        state["surprise.weight"] = torch.zeros(2)
    save_file(state, str(path))
    with pytest.raises(ValueError, match=f"{key}|surprise.weight") as err:
        AutoModel.from_pretrained(tmp_path / "m")
    assert str(path) in str(err.value)


def _edit_config(folder, fn=None, text=None):
    path = folder / "config.json"
    if text is None:
        d = json.loads(path.read_text())
        fn(d)
        text = json.dumps(d)
    path.write_text(text)
    return path


@pytest.mark.parametrize("edit", [
    lambda d: d.update(colour="red"),  # an unknown field
    lambda d: d.update(places="3"),  # a wrong type
    lambda d: d.update(members=True),  # bool is not an int here
    lambda d: d.update(vocab="go to"),  # a string is not a list
    lambda d: d.update(encoder="resnet9000"),  # not in the registry
], ids=["unknown-field", "wrong-type", "bool-for-int", "str-for-list", "unknown-encoder"])
def test_a_tampered_config_is_a_clear_error_naming_the_file(tmp_path, edit):
    tiny_model().save_pretrained(tmp_path / "m")
    path = _edit_config(tmp_path / "m", edit)
    with pytest.raises(ValueError) as err:
        AutoModel.from_pretrained(tmp_path / "m")
    assert str(path) in str(err.value)


@pytest.mark.parametrize("text", ['{"encoder": "tiny_cnn",', "[]", "\xff\xfe"], ids=["invalid-json", "not-an-object",
                                                                                 "not-utf8"])
def test_an_unreadable_config_is_a_clear_error_naming_the_file(tmp_path, text):
    tiny_model().save_pretrained(tmp_path / "m")
    path = tmp_path / "m" / "config.json"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(ValueError) as err:
        AutoModel.from_pretrained(tmp_path / "m")
    assert str(path) in str(err.value)


@pytest.mark.parametrize("missing", ["config.json", "model.safetensors"])
def test_a_folder_without_its_files_is_not_a_model_folder(tmp_path, missing):
    tiny_model().save_pretrained(tmp_path / "m")
    (tmp_path / "m" / missing).unlink()
    with pytest.raises(FileNotFoundError, match="config.json and model.safetensors") as err:
        AutoModel.from_pretrained(tmp_path / "m")
    assert str(tmp_path / "m") in str(err.value)


def test_from_dict_fills_defaults_for_missing_keys():
    from autorater.models import EventsConfig

    defaults, tiny = EventsConfig(), PRESETS["tiny"]
    old = tiny.to_dict()
    dropped = ["mirror_tta", "members", "failure_modes", "use_instruction", "encoder_stage", "max_text_tokens"]
    for key in dropped:
        del old[key]
    cfg = AutoConfig.from_dict(old)
    for key in dropped:
        assert getattr(cfg, key) == getattr(defaults, key), key
    assert all(getattr(cfg, k) == v for k, v in old.items())
    with pytest.raises(ValueError, match="retired.*0.1.0"):  # no architecture: the first design's folders
        AutoConfig.from_dict({})
    assert AutoConfig.from_dict(tiny.to_dict()) == tiny
    for preset in PRESETS.values():
        assert AutoConfig.from_dict(preset.to_dict()) == preset


def test_each_architecture_has_only_its_own_fields():
    from dataclasses import fields

    from autorater.models import ARCHITECTURES

    own = {name: {f.name for f in fields(spec.config_class)} for name, spec in ARCHITECTURES.items()}
    assert "places" not in own["general"] and "outcome" not in own["events"]
    assert not {"vocab", "grid_size", "pose", "front_places", "mirror_tta"} & own["general"]  # nothing of a grid


def test_a_folder_of_the_shared_config_loads_as_its_architecture(tmp_path):
    """Folders written before the registry hold every field of every architecture: they load as their own."""
    model = tiny_model()
    model.save_pretrained(tmp_path / "m")
    _edit_config(tmp_path / "m", lambda d: d.update(hidden_size=128, num_layers=2, marker_head="distribution"))
    saved_before_the_config_checksum(tmp_path / "m")
    loaded = AutoModel.from_pretrained(tmp_path / "m")
    assert type(loaded).__name__ == "EventsModel" and not hasattr(loaded.config, "hidden_size")
    with torch.no_grad():
        assert outputs_equal(model(**inputs()), loaded(**inputs()))


def test_an_old_folder_without_newer_config_fields_still_loads(tmp_path):
    model = tiny_model()
    model.save_pretrained(tmp_path / "m")
    # Fields added after this folder was written, whose defaults are what the model was trained with.
    _edit_config(tmp_path / "m", lambda d: [d.pop(k) for k in ("mirror_tta", "encoder_stage", "use_instruction")])
    saved_before_the_config_checksum(tmp_path / "m")
    loaded = AutoModel.from_pretrained(tmp_path / "m")
    with torch.no_grad():
        assert outputs_equal(model(**inputs()), loaded(**inputs()))


# ----------------------------------------------------------------------------------------------
# Marker decoding


def test_decoded_markers_lie_inside_the_video():
    model = tiny_model()
    g = torch.Generator().manual_seed(0)
    n = 96
    durations = 0.5 + 10 * torch.rand(n, generator=g)  # seconds
    times = (torch.arange(T) + 0.5) / T * durations[:, None]  # centre of each segment, as read_video samples
    scale = torch.tensor([0.1, 3.0, 1e3])[torch.arange(n) % 3]  # flat, ordinary and saturated logits
    logits = torch.randn(n, T + 1, generator=g) * scale[:, None]
    marker, spread = model.decode_marker(logits, times, durations)
    assert marker.shape == spread.shape == (n,)
    assert torch.isfinite(marker).all() and torch.isfinite(spread).all() and (spread >= 0).all()
    assert (marker >= 0).all() and (marker <= durations).all()


def test_a_peaked_marker_distribution_decodes_to_its_frame_time_or_the_end():
    model = tiny_model()
    times = (torch.arange(T) + 0.5).repeat(T + 1, 1) / T * 2.0  # 2-s videos
    durations = torch.full((T + 1,), 2.0)
    logits = torch.full((T + 1, T + 1), -10.0)
    logits[torch.arange(T + 1), torch.arange(T + 1)] = 10.0  # row k peaks at bin k; the last at "end"
    marker, spread = model.decode_marker(logits, times, durations)
    assert torch.allclose(marker[:T], times[0]) and marker[T] == 2.0
    assert (spread < 0.01).all()


def test_docstring_examples_run():
    import autorater.architecture
    import autorater.models

    for module in (autorater.model, autorater.config, autorater.models, autorater.architecture):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0 and result.attempted > 0, module.__name__


def test_records_say_success_exactly_when_the_written_p_success_is_at_least_one_half():
    p = np.array([0.4999994, 0.4999996, 0.5, 0.9, 0.1, 0.0, 1.0])
    n, modes = len(p), [MODES[1]] * 3 + [MODES[0]] * 2 + [None, MODES[0]]
    rows = Predictions([f"c{i}" for i in range(n)], np.log(p / (1 - p + 1e-12) + 1e-12), p, np.full(n, 0.5),
                       np.zeros(n), modes, np.zeros(n), np.ones(n)).records("autorater:m")
    for r in rows:
        assert 0 <= r["p_success"] <= 1
        assert r["outcome"] == ("success" if r["p_success"] >= 0.5 else "failure"), r
        assert r["failure_mode"] is None or (r["outcome"] == "failure" and r["failure_mode"] in MODES)
    assert [r["failure_mode"] for r in rows[4:6]] == ["timeout", None]


# ----------------------------------------------------------------------------------------------
# The real encoders (the one test that is not tiny: about 6 s, most of it importing timm and transformers)


def test_the_default_preset_encoders_load_offline_and_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")

    def no_network(*args, **kwargs):
        raise AssertionError(f"network access while building the default encoders: {args}")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    torch.manual_seed(0)
    model = AutoModel.from_config(PRESETS["general"].replace(failure_modes=MODES)).eval()
    frames = torch.randint(0, 256, (1, 2, 128, 128, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    x = {"frames": frames, "times_s": torch.tensor([[0.0, 0.5]]), "takeover_s": torch.zeros(1),
         "instructions": ["go to the red ball"]}
    with torch.no_grad():
        features = model.frame_encoder(frames)  # (b, t, c, h, w): lite0 stage 2 is stride 8
        out = model(**x)
    assert features.shape[:2] == (1, 2) and features.shape[-2:] == (16, 16) and torch.isfinite(features).all()
    assert features.std() > 0 and not torch.equal(features[0, 0], features[0, 1])  # real weights, not constants
    assert out.success_logit.shape == (1,) and out.marker_logits.shape == (1, 3)
    assert all(torch.isfinite(getattr(out, k)).all() for k in ("success_logit", "marker_logits", "match_logit"))
    assert not any(p.requires_grad for p in model.frame_encoder.parameters())

    model.save_pretrained(tmp_path / "m")
    stored = load_file(str(tmp_path / "m" / "model.safetensors"))
    assert not any(k.startswith(("frame_encoder.", "outcome.encoder.bottom.")) for k in stored)  # from packages
    assert not any(".words." in k for k in stored)  # MiniLM too
    assert (tmp_path / "m" / "model.safetensors").stat().st_size < 20 * 2 ** 20
    loaded = AutoModel.from_pretrained(tmp_path / "m")
    with torch.no_grad():
        assert outputs_equal(out, loaded(**x))


def test_patch_encoder_gives_one_trainable_token_per_tile():
    from autorater.encoders import create_frame_encoder

    encoder = create_frame_encoder(PRESETS["tiny"].replace(image_size=32), encoder="patch", width=16)
    frames = torch.zeros(2, 3, 32, 32, 3, dtype=torch.uint8)
    frames[0, :, :4, :4] = 255  # one bright tile changes exactly one token
    out = encoder(frames)
    assert out.shape == (2, 3, 16, 8, 8) and not getattr(encoder, "frozen", False)
    changed = (out[0] - out[1]).abs().sum(dim=(0, 1)) > 1e-6  # (8, 8) grid
    assert changed.sum() == 1 and changed[0, 0]


@pytest.mark.parametrize("members", [1, 2])
def test_a_mirror_averaged_model_rates_a_clip_and_its_mirror_alike(members):
    from autorater.models.events.mirror import mirror_all, mirror_words

    x = inputs(1)  # 28-pixel frames: a 7 x 7 first-person grid, as the pose reads it
    x["frames"] = x["frames"][:, :, :28, :28]
    x["instructions"] = ["go to the red ball on your left", "go to the blue ball", "pick up the key on your right"]
    mirrored = {**x, "frames": mirror_all(x["frames"], 0), "instructions": [mirror_words(t) for t in x["instructions"]]}
    torch.manual_seed(0)
    config = PRESETS["tiny"].replace(vocab=VOCAB + ["on", "your", "left", "right"], failure_modes=MODES,
                                     members=members, pose=True, front_places=True, grid_size=7, image_size=28)
    model = AutoModel.from_config(config).eval()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g))
    with torch.no_grad():
        one, one_m = model(**x), model(**mirrored)
        model.config = model.config.replace(mirror_tta=True)
        both, both_m = model(**x), model(**mirrored)
    assert not torch.allclose(one.success_logit, one_m.success_logit, atol=1e-4)  # one view: not symmetric
    torch.testing.assert_close(both.success_logit, both_m.success_logit)  # both views: exactly symmetric
    torch.testing.assert_close(both.marker_logits, both_m.marker_logits)
    p = torch.sigmoid(both.success_logit)  # the mixture: the mean of the two views' probabilities
    torch.testing.assert_close(p, (torch.sigmoid(one.success_logit) + torch.sigmoid(one_m.success_logit)) / 2)


def test_mirror_averaging_needs_the_pixels_encoder():
    with pytest.raises(ValueError, match="mirror_tta reads first-person"):
        AutoModel.from_config(PRESETS["tiny"].replace(encoder="tiny_cnn", mirror_tta=True, vocab=["a"]))
