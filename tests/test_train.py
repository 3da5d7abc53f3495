"""Training: the model overfits a handful of episodes, reads the instruction, re-uses cached features,
never trains on reference episodes, and validates on whole held-out scenarios.

The ``tiny`` preset (from-scratch CNN, learned bag of words) on 32x32 videos of 8 frames, one torch thread.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

import autorater.training.inputs.batches
import autorater.training.stages.joint
import autorater.training.train
from autorater.data.splits import split_groups
from autorater.data.suite import Suite
from autorater.data.video import read_video
from autorater.models import PRESETS, AutoModel
from autorater.predict import predict_batch
from autorater.training.inputs.batches import predict_rows, prepare
from autorater.training.inputs.cache import FeatureCache
from autorater.training.inputs.dataset import build_examples
from autorater.training.loop import WeightAverage
from autorater.training.recipe import TrainConfig
from autorater.training.train import joint_batch, run_epoch, train
from model_suites import (
    GROUNDINGS,
    bright_square_video,
    colour_suite,
    colour_video,
    grounding_id,
    learnable_suite,
    one_thread,
    tiny_preset,
)


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    before = one_thread()
    yield
    torch.set_num_threads(before)


def fit(suites, tc: TrainConfig, epochs: int, **changes):
    """``prepare`` then ``epochs`` of ``run_epoch`` on every row at a constant learning rate (no validation)."""
    model, data = prepare(suites, tiny_preset(changes), tc)
    rows = np.arange(len(data.ex))
    opt = torch.optim.AdamW(model.parameters(), lr=tc.lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0)
    rng = np.random.default_rng(tc.seed)
    history = [run_epoch(model, data, rows, tc, opt, sched, rng) for _ in range(epochs)]
    return model, data, history


def test_a_few_dozen_steps_overfit_eight_episodes(tmp_path):
    suite = learnable_suite(tmp_path / "suite", n_scenarios=4, per_scenario=2)
    tc = TrainConfig(batch_size=8, lr=3e-3, aggregation="majority", cache_dir=str(tmp_path / "cache")).replace(
        stream={"mismatch_share": 0.0})
    model, data, history = fit([suite], tc, epochs=40)  # one step per epoch
    assert len(data.ex) == 8
    rows = np.arange(8)
    p = predict_rows(model, data, rows)["p_success"]
    y = np.array(data.ex.p_success) > 0.5
    assert y.any() and not y.all()
    assert ((p >= 0.5) == y).all()  # train accuracy 1.0
    assert history[-1]["train_event"] < 0.1 < history[0]["train_event"]  # the outcome and marker likelihood
    assert history[-1]["train_loss"] < 0.5 * history[0]["train_loss"]


@pytest.mark.parametrize("grounding", GROUNDINGS, ids=grounding_id)
def test_the_instruction_matters_on_held_out_videos(tmp_path, grounding):
    """Same videos, swapped instruction: P(success) follows whether the *named* colour appeared."""
    suite = colour_suite(tmp_path / "suite", n_scenarios=8, per_scenario=2)  # 16 episodes
    tc = TrainConfig(batch_size=8, lr=2e-3, aggregation="majority", cache_dir=str(tmp_path / "cache"))
    model, data, _ = fit([suite], tc, epochs=80, **grounding)
    p = predict_rows(model, data, np.arange(len(data.ex)))["p_success"]
    assert ((p >= 0.5) == (np.array(data.ex.p_success) > 0.5)).all()

    rng = np.random.default_rng(123)  # videos the model has never seen
    shown = ["red", "blue"] * 4
    clips = [read_video(colour_video(tmp_path / "held_out" / f"{i}.mp4", c, rng), num_frames=8, size=32)
             for i, c in enumerate(shown)]
    frames = torch.from_numpy(np.stack([c.frames for c in clips]))
    times = torch.from_numpy(np.stack([c.times_s for c in clips]).astype(np.float32))

    def p_success(instruction: str) -> np.ndarray:
        return predict_batch(model, frames=frames, times_s=times, durations_s=[1.0] * 8, takeovers_s=[0.0] * 8,
                             instructions=[instruction] * 8)["p_success"]

    red, blue = p_success("red"), p_success("blue")
    named_shown = np.array([c == "red" for c in shown])
    # Swapping the instruction moves P(success) the right way on every video, and across 0.5.
    assert (red[named_shown] - blue[named_shown] > 0.5).all()
    assert (blue[~named_shown] - red[~named_shown] > 0.5).all()


def test_the_feature_cache_is_hit_on_a_second_prepare(tmp_path, monkeypatch):
    caches = []

    class SpyCache(FeatureCache):
        def __init__(self, root):
            super().__init__(root)
            caches.append(self)

    monkeypatch.setattr(autorater.training.inputs.batches, "FeatureCache", SpyCache)
    suite = learnable_suite(tmp_path / "suite", n_scenarios=2, per_scenario=2)
    tc = TrainConfig(aggregation="majority", cache_dir=str(tmp_path / "cache"))
    _, first = prepare([suite], PRESETS["tiny"], tc)
    _, second = prepare([suite], PRESETS["tiny"], tc)
    assert (caches[0].hits, caches[0].misses) == (0, 4)
    assert (caches[1].hits, caches[1].misses) == (4, 0)
    assert torch.equal(first.clips.features, second.clips.features)
    assert torch.equal(first.clips.times_s, second.clips.times_s)


def test_a_changed_video_is_a_cache_miss_and_a_copied_one_a_hit(tmp_path):
    suite = learnable_suite(tmp_path / "suite", n_scenarios=2, per_scenario=2)
    paths = [str(suite.video_path(c)) for c in suite.continuation_ids()]
    model = AutoModel.from_config(PRESETS["tiny"])
    before = FeatureCache(tmp_path / "cache").load(model, paths)

    bright_square_video(paths[0], success=True, rng=np.random.default_rng(99))  # new bytes, same path
    cache = FeatureCache(tmp_path / "cache")
    after = cache.load(model, paths)
    assert (cache.hits, cache.misses) == (3, 1)
    assert not torch.equal(after.features[0], before.features[0])
    assert torch.equal(after.features[1:], before.features[1:])

    copy = tmp_path / "elsewhere" / "same.mp4"
    copy.parent.mkdir()
    copy.write_bytes(open(paths[1], "rb").read())  # same bytes, another path: keyed by content
    cache = FeatureCache(tmp_path / "cache")
    assert torch.equal(cache.load(model, [str(copy)]).features[0], before.features[1])
    assert (cache.hits, cache.misses) == (1, 0)

    cache = FeatureCache(tmp_path / "cache")  # other frames sampled: other features, so a miss
    cache.load(AutoModel.from_config(PRESETS["tiny"].replace(clip_frames=4)), paths[:1])
    assert (cache.hits, cache.misses) == (0, 1)


def test_a_missing_video_is_reported_and_left_out_of_training(tmp_path):
    suite = learnable_suite(tmp_path / "suite", n_scenarios=2, per_scenario=2)
    paths = [str(suite.video_path(c)) for c in suite.continuation_ids()]
    (suite.root / suite.get("c011").video).unlink()
    clips = FeatureCache(tmp_path / "cache").load(AutoModel.from_config(PRESETS["tiny"]), paths)
    assert list(clips.errors) == [3] and "c011" in clips.errors[3]
    assert clips.features.shape[0] == 4  # rows stay aligned with the paths
    _, data = prepare([suite], PRESETS["tiny"], TrainConfig(aggregation="majority", cache_dir=str(tmp_path / "c")))
    assert data.ex.continuation_ids == ["c000", "c001", "c010"]  # training goes on without it
    assert len(data.clips.features) == len(data.marker_index) == len(data.failure_index) == 3


def test_reference_episodes_and_their_scenarios_are_never_trained_on(tmp_path, monkeypatch):
    """The references measure the model on unseen scenarios: training leaves out every scenario that holds one."""
    suite = learnable_suite(tmp_path / "suite", n_scenarios=4, per_scenario=2, n_references=3)
    refs = {r.continuation_id for r in suite.references}
    assert len(refs) == 3 and refs <= {a.continuation_id for a in suite.annotations}  # annotated too
    held = {suite.get(c).scenario_id for c in refs}
    unseen = {c.continuation_id for c in suite.continuations if c.scenario_id in held}
    assert unseen > refs  # a reference's scenario mates are held out with it
    ex = build_examples([suite])
    assert set(ex.continuation_ids) == set(suite.continuation_ids()) - unseen
    assert refs <= set(build_examples([suite], exclude_references=False).continuation_ids)

    # What train() learns from: those videos are not even decoded.
    requested = []
    load = FeatureCache.load

    def spy(self, model, paths, *args, **kwargs):
        requested.extend(str(p) for p in paths)
        return load(self, model, paths, *args, **kwargs)

    monkeypatch.setattr(FeatureCache, "load", spy)
    result = train([suite], PRESETS["tiny"], TrainConfig(epochs=1, aggregation="majority",
                                                          cache_dir=str(tmp_path / "cache")))
    assert result.n_train + result.n_val == len(suite.continuations) - len(unseen)
    assert not {str(suite.video_path(c)) for c in unseen} & set(requested)


def test_the_validation_split_never_shares_a_scenario(tmp_path, monkeypatch):
    suites = [learnable_suite(tmp_path / "a", n_scenarios=6, per_scenario=2, seed=0),
              learnable_suite(tmp_path / "b", n_scenarios=2, per_scenario=3, seed=1)]  # same scenario ids as "a"
    splits = []

    def spy(groups, share, seed=0):
        out = split_groups(groups, share, seed)
        splits.append((list(groups), *out))
        return out

    monkeypatch.setattr(autorater.training.train, "split_groups", spy)
    tc = TrainConfig(epochs=1, val_share=0.3, aggregation="majority", cache_dir=str(tmp_path / "cache"))
    result = train(suites, PRESETS["tiny"], tc)
    (groups, train_rows, val_rows), = splits
    n = sum(len(s.continuations) for s in suites)
    assert len(groups) == n and result.n_train == len(train_rows) and result.n_val == len(val_rows)
    assert sorted([*train_rows, *val_rows]) == list(range(n))  # every row once
    assert len(val_rows) > 0 and len(train_rows) > 0
    assert not {groups[i] for i in train_rows} & {groups[i] for i in val_rows}
    assert len(set(groups)) == 8  # scenario "s00" of suite a and of suite b are different groups

    # The same holds whatever the seed and share.
    for seed in range(20):
        for share in (0.1, 0.3, 0.5, 0.9):
            tr, va = split_groups(groups, share, seed)
            assert not {groups[i] for i in tr} & {groups[i] for i in va}
            assert len(tr) + len(va) == n and len(va) > 0 and len(tr) > 0


def test_train_writes_a_loadable_model_folder_with_its_metadata(tmp_path):
    suite = learnable_suite(tmp_path / "suite", n_scenarios=4, per_scenario=2)
    tc = TrainConfig(epochs=2, aggregation="majority", cache_dir=str(tmp_path / "cache"))
    logged = []
    torch.manual_seed(123)
    caller_state = torch.random.get_rng_state()
    result = train([suite], PRESETS["tiny"], tc, out=tmp_path / "m", log=lambda epoch, m: logged.append(epoch))
    assert torch.equal(torch.random.get_rng_state(), caller_state)  # seeded inside, the caller's state untouched
    assert logged == [1, 2] and [h["epoch"] for h in result.history] == [1, 2]
    assert result.best["epoch"] in (1, 2)
    loaded = AutoModel.from_pretrained(tmp_path / "m")
    assert loaded.config.vocab and loaded.config.failure_modes == ["timeout"]
    _, data = prepare([Suite.load(tmp_path / "suite")], loaded.config, tc)
    rows = np.arange(len(data.ex))
    assert np.array_equal(predict_rows(result.model, data, rows)["logit"], predict_rows(loaded, data, rows)["logit"])
    torch.manual_seed(7)  # another caller state: the same seed still gives the same model
    again = train([suite], PRESETS["tiny"], tc)
    assert np.array_equal(predict_rows(again.model, data, rows)["logit"], predict_rows(loaded, data, rows)["logit"])


def test_a_bad_second_stage_says_what_does_not_fit(tmp_path):
    suite = learnable_suite(tmp_path / "suite", n_scenarios=4, per_scenario=2)
    cache = str(tmp_path / "cache")
    train([suite], PRESETS["tiny"], TrainConfig(epochs=1, aggregation="majority", cache_dir=cache),
          out=tmp_path / "stage1")
    with pytest.raises(ValueError, match="missing .*front|places .* differs"):  # new places: not the same model
        train([suite], PRESETS["tiny"].replace(front_places=True, pose=True),
              TrainConfig(epochs=1, aggregation="majority", cache_dir=cache, init_from=str(tmp_path / "stage1")))
    with pytest.raises(ValueError, match="train_only prefix 'verfier.' matches no trainable parameter"):
        train([suite], PRESETS["tiny"], TrainConfig(epochs=1, aggregation="majority", cache_dir=cache,
                                                    init_from=str(tmp_path / "stage1"), train_only=["verfier."]))
    with pytest.raises(ValueError, match="places .* differs"):  # a field the start must share (its spec's)
        train([suite], PRESETS["tiny"].replace(places=3),
              TrainConfig(epochs=1, aggregation="majority", cache_dir=cache, init_from=str(tmp_path / "stage1")))
    with pytest.raises(FileNotFoundError, match="not a model folder"):
        train([suite], PRESETS["tiny"], TrainConfig(epochs=1, aggregation="majority", cache_dir=cache,
                                                    init_from=str(tmp_path / "nowhere")))


def test_a_start_whose_weights_changed_since_saving_is_refused(tmp_path):
    """``init_from`` reads through the checked loader: a byte changed in model.safetensors fails its checksum."""
    from safetensors.torch import load_file, save_file

    from autorater.training.stages.joint import load_init_state

    suite = learnable_suite(tmp_path / "suite", n_scenarios=4, per_scenario=2)
    first = train([suite], PRESETS["tiny"], TrainConfig(epochs=1, aggregation="majority",
                                                        cache_dir=str(tmp_path / "cache")),
                  out=tmp_path / "stage1")
    assert set(load_init_state(tmp_path / "stage1", first.model.config)) == set(first.model.trainable_state_dict())
    weights = tmp_path / "stage1" / "model.safetensors"
    from safetensors import safe_open

    with safe_open(str(weights), framework="pt") as f:
        meta = f.metadata()
    state = load_file(str(weights))
    name = sorted(state)[0]
    state[name] = state[name] + 1.0
    save_file(state, str(weights), metadata=meta)  # the old checksum kept beside changed tensors
    with pytest.raises(ValueError, match="do not match the checksum"):
        load_init_state(tmp_path / "stage1", first.model.config)


def test_rotations_only_for_suites_that_declare_the_top_down_view(tmp_path):
    import dataclasses
    import json

    from autorater.training.recipe import top_down

    suite = learnable_suite(tmp_path / "suite", n_scenarios=4, per_scenario=2)
    declared = {view: dataclasses.replace(suite, info=dataclasses.replace(suite.info, source={"world": "babyai",
                                                                                              "view": view}))
                for view in ("full", "ego")}  # the world says what its view allows
    assert top_down([declared["full"]]) and not top_down([declared["ego"]])
    assert not top_down([suite]) and not top_down([declared["full"], suite])  # unsaid: first-person, as STS video
    train([suite], PRESETS["tiny"], TrainConfig(epochs=1, aggregation="majority", cache_dir=str(tmp_path / "c")),
          out=tmp_path / "model")
    saved = json.loads((tmp_path / "model" / "metadata.json").read_text())["train_config"]
    assert saved["augment"]["rotate"] is False  # the saved recipe says what was done


def test_match_on_successes_asks_own_vs_same_category_only_of_success_videos(tmp_path):
    suite = colour_suite(tmp_path / "suite", n_scenarios=6, per_scenario=2)
    tc = TrainConfig(aggregation="majority", cache_dir=str(tmp_path / "c")).replace(stream={"match_on_successes": True})
    model, data = prepare([suite], PRESETS["tiny"], tc)
    rows = np.arange(len(data.ex))
    inputs, tg = joint_batch(model, data, rows, tc, np.random.default_rng(0))
    n, success = len(rows), np.array(data.ex.p_success) > 0.5
    assert 0 < success.sum() < n
    assert torch.isnan(tg.match[:n][~success]).all() and (tg.match[:n][success] == 1).all()  # failures: not told
    negatives = torch.arange(len(tg.match))[n:]
    assert len(negatives) == success.sum() and (tg.match[negatives] == 0).all()  # every success, once
    own = {i: data.ex.instructions[i] for i in rows}
    shown = [own[int(r)] for r in np.flatnonzero(success)]
    assert sorted(inputs["instructions"][n:]) == sorted({"red": "blue", "blue": "red"}[s] for s in shown)
    out = model(**inputs, targets=tg)
    assert torch.isfinite(out.loss) and torch.isfinite(out.losses["match"])
    assert torch.isfinite(out.losses["event"])  # failure videos keep their event loss (still "own")


def test_an_ensemble_trains_every_member_from_the_place_prior(tmp_path):
    suite = learnable_suite(tmp_path / "suite", n_scenarios=4, per_scenario=2)
    tc = TrainConfig(epochs=2, aggregation="majority", cache_dir=str(tmp_path / "cache")).replace(
        stream={"match_warmup_epochs": 1})
    model, data = prepare([suite], PRESETS["tiny"].replace(members=2), tc)
    start = [{k: v.clone() for k, v in head.state_dict().items()} for head in model.stream.heads]
    result = train([suite], PRESETS["tiny"].replace(members=2), tc, prepared=(model, data), out=tmp_path / "m")
    heads = result.model.stream.heads
    assert len(heads) == 2
    places = [head.match.where.softmax(-1) for head in heads]
    # the same prior (its sharpest place on the same cell), not the same numbers
    assert places[0][0].argmax() == places[1][0].argmax() and not torch.allclose(places[0], places[1])
    for head, before in zip(heads, start):  # every member learned
        assert not torch.allclose(head.mlp[-1].weight, before["mlp.2.weight"])
    assert AutoModel.from_pretrained(tmp_path / "m").config.members == 2


def test_a_mirrored_batch_swaps_its_words_and_its_partners_with_it(tmp_path):
    from autorater.training.inputs.batches import mirrorable

    suite = colour_suite(tmp_path / "suite", n_scenarios=6, per_scenario=2)
    tc = TrainConfig(aggregation="majority", cache_dir=str(tmp_path / "c")).replace(augment={"rotate": False})
    model, data = prepare([suite], PRESETS["tiny"], tc)
    assert mirrorable(data) and data.pixel_cells == PRESETS["tiny"].pixel_cells
    # the colour videos are symmetric; break it so that a mirrored clip can be told from its original
    data.clips.features[..., 0] += torch.arange(1, len(data.ex) + 1, dtype=data.clips.features.dtype)[:, None, None,
                                                                                                          None]
    data.ex.instructions = [f"{t} on your {'left' if i % 2 else 'right'}" for i, t in enumerate(data.ex.instructions)]
    rows = np.arange(len(data.ex))
    inputs, tg = joint_batch(model, data, rows, tc, np.random.default_rng(3))
    n = len(rows)
    feats = inputs["features"][inputs["clip_index"]]  # one row per clip rated
    t = feats.shape[1]
    flipped = [not torch.equal(feats[i], data.clips.features[r, :t]) for i, r in enumerate(rows)]
    assert 0 < sum(flipped) < n
    for i, r in enumerate(rows):
        own = data.ex.instructions[r]
        side = own.split()[-1]
        assert inputs["instructions"][i] == (own.replace(side, {"left": "right", "right": "left"}[side])
                                             if flipped[i] else own)
    for j in range(n, len(feats)):  # a negative: a video with another scenario's words, mirrored with the video
        i = next(i for i in range(n) if torch.equal(feats[i], feats[j]))
        assert inputs["instructions"][j] != inputs["instructions"][i] and tg.match[j] == 0
        assert inputs["instructions"][j].endswith(("left", "right"))


def test_a_recoloured_batch_renames_its_colours_in_its_words_and_its_partners(tmp_path):
    suite = colour_suite(tmp_path / "suite", n_scenarios=8, per_scenario=2)
    tc = TrainConfig(aggregation="majority", cache_dir=str(tmp_path / "c")).replace(
        augment={"rotate": False, "mirror": False, "recolour": True})
    model, data = prepare([suite], PRESETS["tiny"], tc)
    data.sources = [{"world": "babyai"}]  # the palette recoloured is the suites' world's: BabyAI's (red: the agent's)
    rows = np.arange(len(data.ex))
    inputs, tg = joint_batch(model, data, rows, tc, np.random.default_rng(0))
    n, feats = len(rows), inputs["features"][inputs["clip_index"]]
    renamed = [i for i in range(n) if inputs["instructions"][i] != data.ex.instructions[i]]
    assert renamed and all(data.ex.instructions[i] == "blue" for i in renamed)  # red is the agent's: it stays
    shows_blue = [i for i in renamed if data.ex.p_success[i] > 0.5]  # success: it shows the named colour
    assert shows_blue and all(not torch.equal(feats[i], data.clips.features[i, :feats.shape[1]]) for i in shows_blue)
    assert all(torch.equal(feats[i], data.clips.features[i, :feats.shape[1]])  # a red one: nothing to recolour
               for i in set(renamed) - set(shows_blue))
    for j in range(n, len(feats)):
        i = next(i for i in range(n) if torch.equal(feats[i], feats[j]))
        assert inputs["instructions"][j] != inputs["instructions"][i] and tg.match[j] == 0


def test_encoders_whose_features_a_mirror_does_not_map_skip_it(tmp_path):
    import json

    suite = learnable_suite(tmp_path / "suite", n_scenarios=4, per_scenario=2)
    saved = {}
    for name, config in {"frames": PRESETS["tiny"],
                         "lite0": PRESETS["tiny"].replace(encoder="efficientnet_lite0")}.items():
        train([suite], config, TrainConfig(epochs=1, aggregation="majority", cache_dir=str(tmp_path / "c")),
              out=tmp_path / name)
        saved[name] = json.loads((tmp_path / name / "metadata.json").read_text())["train_config"]["augment"]["mirror"]
    assert saved == {"frames": True, "lite0": False}  # ImageNet features of a mirrored frame are not mirrored


def test_relaxed_rows_keep_a_success_and_add_negatives_of_another_object_or_colour(tmp_path):
    from autorater.data.worlds.babyai import PALETTE
    from autorater.training.inputs.augment import contradicts
    suite = colour_suite(tmp_path / "suite", n_scenarios=8, per_scenario=2)
    tc = TrainConfig(aggregation="majority", cache_dir=str(tmp_path / "c")).replace(
        augment={"rotate": False, "mirror": False, "relax": 1.0})
    model, data = prepare([suite], PRESETS["tiny"], tc)
    data.sources = [{"world": "babyai"}]  # its colour and object words: BabyAI's palette
    objects = ("ball", "key", "box")
    data.ex.instructions = [f"pick up the {t} {objects[i % 3]}" for i, t in enumerate(data.ex.instructions)]
    rows = np.arange(len(data.ex))
    # its failures are timeouts only: a wrong object is no decisive failure here (go_to)
    assert joint_batch(model, data, rows, tc, np.random.default_rng(0))[0]["instructions"][len(rows):] == \
        joint_batch(model, data, rows, tc.replace(augment={"relax": 0.0}), np.random.default_rng(0))[0][
            "instructions"][len(rows):]
    data.decisive = frozenset({"goto"})
    inputs, tg = joint_batch(model, data, rows, tc, np.random.default_rng(0))
    n, feats, words = len(rows), inputs["features"][inputs["clip_index"]], inputs["instructions"]
    start = next(j for j in range(n, len(words)) if len(words[j].split()) == 4)  # "pick up the ball": no colour
    assert (len(words) - start) % 3 == 0 and len(words) - start >= 6
    for pos, neg, changed in zip(*(range(start + k, len(words), 3) for k in range(3))):
        i = next(i for i in range(n) if torch.equal(feats[i], feats[pos]))
        k = next(k for k in range(n) if torch.equal(feats[k], feats[neg]))
        own, colour = data.ex.instructions[i], data.ex.instructions[i].split()[3]
        assert words[pos] == words[neg] == own.replace(colour + " ", "")
        assert tg.match[pos] == 1 and data.ex.p_success[i] > 0.5 and tg.success[pos] > 0.5  # asks for less: a success
        assert tg.match[neg] == 0 and data.ex.p_success[k] > 0.5 and tg.success[neg] == tc.stream.negative_label
        assert contradicts(words[neg], data.ex.instructions[k], PALETTE)  # the other video shows another object
        assert torch.equal(feats[changed], feats[i]) and tg.match[changed] == 0
        assert tg.success[changed] == tc.stream.negative_label
        new = words[changed].split()[3]
        assert new != colour and new in PALETTE.colours and words[changed] == own.replace(colour, new)
    out = model(**inputs, targets=tg)
    assert torch.isfinite(out.loss)


def test_the_weight_average_weighs_the_steps_taken_and_puts_the_live_weights_back():
    torch.manual_seed(0)
    net = torch.nn.Linear(3, 2)
    net.register_parameter("frozen", torch.nn.Parameter(torch.ones(2), requires_grad=False))
    average = WeightAverage(net, decay=0.9)
    start = net.weight.detach().clone()
    with average.swapped_in():  # no step yet: the live weights, not the zero sum
        assert torch.equal(net.weight, start)
    iterates = []
    for step in range(5):
        with torch.no_grad():
            net.weight.add_(step + 1.0)
        average.update()
        iterates.append(net.weight.detach().clone())
    weights = torch.tensor([0.1 * 0.9 ** (4 - i) for i in range(5)])
    expected = sum(w * x for w, x in zip(weights, iterates)) / weights.sum()  # the start has no weight
    live = net.weight.detach().clone()
    with average.swapped_in():
        assert torch.allclose(net.weight, expected)
        assert not torch.allclose(net.weight, live)
    assert torch.equal(net.weight, live) and torch.equal(net.frozen, torch.ones(2))
    assert len(average.params) == 2  # weight and bias; the frozen parameter is not averaged
    with pytest.raises(ValueError, match="decay"):
        WeightAverage(net, decay=1.0)


def test_with_ema_the_kept_model_is_the_average_not_the_last_step(tmp_path):
    suite = learnable_suite(tmp_path / "suite", n_scenarios=4, per_scenario=2)
    tc = TrainConfig(epochs=2, aggregation="majority", cache_dir=str(tmp_path / "cache"), ema=0.5, patience=5)
    real = autorater.training.stages.joint.validate

    def run(tc, out=None):
        seen = {}

        def spy(model, data, rows):  # the weights each epoch is validated with
            seen[len(seen) + 1] = {k: v.detach().clone() for k, v in model.trainable_state_dict().items()}
            return real(model, data, rows)

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(autorater.training.stages.joint, "validate", spy)
            return train([suite], PRESETS["tiny"], tc, out=out), seen

    result, averaged = run(tc, out=tmp_path / "m")
    loaded = AutoModel.from_pretrained(tmp_path / "m").trainable_state_dict()
    assert all(torch.equal(loaded[k], v) for k, v in averaged[result.best["epoch"]].items())  # validated = saved
    _, live = run(dataclasses.replace(tc, ema=0.0))  # the same steps (same seed), validated on the live weights
    assert any(not torch.equal(live[2][k], v) for k, v in averaged[2].items())


def test_min_steps_scales_epochs_patience_and_warm_up_by_one_factor_and_leaves_big_sets_alone():
    tc = TrainConfig(epochs=12, patience=6, batch_size=16, min_steps=1500).replace(stream={"match_warmup_epochs": 15})
    for n_train in (1, 17, 425, 850):
        scaled = tc.with_min_steps(n_train)
        per_epoch = int(np.ceil(n_train / 16))
        assert scaled.epochs * per_epoch >= 1500 > (scaled.epochs - 1) * per_epoch  # just enough, not more
        factor = scaled.epochs / tc.epochs
        assert scaled.patience >= tc.patience * factor - 1 and scaled.stream.match_warmup_epochs >= 15 * factor - 1
    assert tc.with_min_steps(2000) == tc  # 12 x 125 steps already >= 1500
    off = dataclasses.replace(tc, min_steps=0)
    assert off.with_min_steps(10) == off


def test_a_small_set_with_min_steps_trains_more_epochs_and_records_them(tmp_path):
    suite = learnable_suite(tmp_path / "suite", n_scenarios=4, per_scenario=2)
    tc = TrainConfig(epochs=1, patience=1, aggregation="majority", cache_dir=str(tmp_path / "cache"), min_steps=3)
    result = train([suite], PRESETS["tiny"], tc, out=tmp_path / "m")
    steps_per_epoch = int(np.ceil(result.n_train / tc.batch_size))
    assert len(result.history) * steps_per_epoch >= 3 and len(result.history) > 1
    saved = json.loads((tmp_path / "m" / "metadata.json").read_text())["train_config"]  # the recipe that ran
    assert saved["epochs"] == len(result.history) and saved["min_steps"] == 3


def test_config_takes_a_preset_name_or_a_json_file(tmp_path):
    from autorater.models import PRESETS
    from autorater.training.recipe import load_config

    model, tc = load_config("babyai-grid")
    assert model == PRESETS["babyai-grid"] and tc == TrainConfig()
    path = tmp_path / "recipe.json"
    path.write_text('{"preset": "tiny-general", "train": {"epochs": 3}}')
    model, tc = load_config(path)
    assert model == PRESETS["tiny-general"] and tc.epochs == 3
    with pytest.raises(ValueError, match="neither a preset.*babyai-grid.*nor a file"):
        load_config("babyai-gird")


def test_a_recipe_file_keeps_the_recipe_its_preset_asks_for(tmp_path):
    """A file naming general-parts trains its parts apart as --config general-parts does, with the file's changes."""
    import dataclasses

    from autorater.training.recipe import load_config

    path = tmp_path / "recipe.json"
    path.write_text('{"preset": "general-parts", "train": {"outcome_reached": 0.5}}')  # a file of before: flat
    _, by_name = load_config("general-parts")
    _, by_file = load_config(path)
    assert by_file.parts_apart and by_file.outcome.reached == 0.5
    assert by_file == dataclasses.replace(by_name, outcome=dataclasses.replace(by_name.outcome, reached=0.5))


def test_a_video_listed_twice_is_encoded_once_and_both_rows_get_it(tmp_path):
    """A suite and its instruction swaps list the same videos: the cache encodes each once."""
    from autorater.data.suite import Suite
    from autorater.models import PRESETS, AutoModel
    from autorater.training.inputs.cache import FeatureCache
    from tiny_suites import tiny_suite

    suite = tiny_suite(tmp_path / "s")
    paths = [str(suite.video_path(c)) for c in suite.continuation_ids()[:3]]
    cache = FeatureCache(tmp_path / "cache")
    clips = cache.load(AutoModel.from_config(PRESETS["tiny"]), paths + paths)
    assert cache.misses == 3 and cache.hits == 3
    assert torch.equal(clips.features[:3], clips.features[3:]) and isinstance(suite, Suite)


def test_one_name_per_field_the_flat_names_of_before_are_read_on_loading_only():
    """A stage's field has one name (``tc.stream.match_weight``); the flat names recipe files and saved folders used
    before (``match_weight``, ``outcome_steps``, ``augment_pixels``, ``fit_gate``, a nested ``events``) still load
    (``from_dict``), and nothing writes them."""
    from autorater.training.recipe import LEGACY_NAMES

    defaults = TrainConfig()
    flat = {name: getattr(getattr(defaults, stage), key) for name, (stage, key) in LEGACY_NAMES.items()}
    old = {**{k: v for k, v in defaults.to_dict().items() if k not in TrainConfig.stages()}, **flat}
    assert TrainConfig.from_dict(old) == defaults  # a metadata.json of before
    assert TrainConfig.from_dict({"events": {"match_weight": 2.0}, "outcome": {"fit_gate": False}}) == \
        defaults.replace(stream={"match_weight": 2.0}, gate={"fit": False})  # the nesting of issue 57
    written = defaults.to_dict()
    assert not set(written) & set(LEGACY_NAMES)  # every stage's field under its stage, none at the top
    assert set(written["augment"]) == {"rotate", "mirror", "recolour", "relax", "crop", "pixels"}
    with pytest.raises(ValueError, match="match_weight is now stream.match_weight"):
        defaults.replace(match_weight=2.0)
    with pytest.raises(TypeError):
        TrainConfig(outcome_steps=5)
