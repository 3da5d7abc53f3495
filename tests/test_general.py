"""The general model, the default recipe: camera video of any aspect, free-form instructions, no world known.

``autorater train`` with no config trains it on a tiny suite of 96 x 160 videos (a coloured block slides in;
the instruction, worded freely, names the colour that should appear); ``predict`` rates every continuation.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from autorater.app import cli
from autorater.data.video import read_video
from autorater.models import DEFAULT_PRESET, PRESETS, AutoModel, GeneralConfig, processor_for
from model_suites import CAMERA_SHAPE, camera_suite, one_thread, trained_by_cli
from tiny_suites import read_lines


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("general")
    with trained_by_cli(root, camera_suite(root / "suite")) as env:  # no --config: the default recipe
        yield env


def test_the_default_recipe_is_the_general_model():
    assert DEFAULT_PRESET == "general" and isinstance(PRESETS[DEFAULT_PRESET], GeneralConfig)


def test_a_wide_frame_is_letterboxed_not_stretched(tmp_path):
    suite = camera_suite(tmp_path / "s", n_scenarios=2, per_scenario=1)
    video = suite.video_path(suite.continuation_ids()[0])
    config = GeneralConfig(image_size=128, clip_frames=8).replace(outcome_frames=0)
    clip = read_video(video, **processor_for(config).decode_args())
    assert clip.frames.shape[1:] == (128, 128, 3)
    rows = clip.frames.reshape(len(clip.frames), 128, -1).max(-1).max(0)  # the brightest value of each row
    content = round(128 * CAMERA_SHAPE[0] / CAMERA_SHAPE[1])  # 160 wide -> 128: 96 high -> ~77 rows
    assert (rows[:20] < 16).all() and (rows[-20:] < 16).all()  # black bars above and below
    assert (rows[(128 - content) // 2 + 2:(128 + content) // 2 - 2] > 40).all()  # the picture, whole, between
    stretched = read_video(video, num_frames=8, size=128)
    assert (stretched.frames.reshape(8, 128, -1).max(-1).max(0) > 40).all()  # the stretch fills every row


def test_train_with_no_config_trains_the_general_model_and_predict_rates_every_video(trained, tmp_path):
    config = json.loads((trained["model"] / "config.json").read_text())
    assert config["architecture"] == "general"
    recipe = json.loads((trained["model"] / "metadata.json").read_text())["recipe"]  # chosen, with its reason
    assert recipe["preset"] == "general" and recipe["chosen_by"] == "world" and "no registered world" in recipe["why"]
    assert not {"vocab", "grid_size", "pose", "places"} & set(config)  # no training words, no grid
    out = tmp_path / "pred.jsonl"
    assert cli.main(["predict", "--model", str(trained["model"]), "--suite", str(trained["suite"].root),
                     "--out", str(out), "--quiet"]) == 0
    rows = read_lines(out)
    assert {r["continuation_id"] for r in rows} == set(trained["suite"].continuation_ids())
    assert all(0 <= r["p_success"] <= 1 and 0 <= r["marker_s"] <= 1.0 + 1e-6 for r in rows)


def test_the_general_model_reads_the_instruction_in_words_it_never_saw(trained):
    model = AutoModel.from_pretrained(trained["model"])
    suite = trained["suite"]
    cid = suite.continuation_ids()[0]
    clip = read_video(suite.video_path(cid), **model.processor.decode_args())
    frames = torch.from_numpy(clip.frames)[None].expand(2, -1, -1, -1, -1)
    times = torch.from_numpy(clip.times_s).float()[None].expand(2, -1)
    with torch.no_grad():
        out = model(frames=frames, times_s=times, takeover_s=torch.zeros(2),
                    instructions=["please make a crimson brick appear", "please make a navy brick appear"])
    p = torch.sigmoid(out.success_logit).numpy()
    assert np.isfinite(p).all() and p[0] != p[1]  # another meaning, another rating
    assert not hasattr(model.config, "vocab")  # nothing was learned per word: MiniLM reads them


def test_the_general_model_folder_round_trips_without_the_pretrained_encoders(trained):
    from autorater.model import read_safetensors_header

    shapes, _ = read_safetensors_header(trained["model"] / "model.safetensors")
    assert not any(k.startswith("frame_encoder.") for k in shapes)  # lite0 comes from its package
    assert not any("words" in k for k in shapes)  # so does MiniLM
    model = AutoModel.from_pretrained(trained["model"])
    assert type(model).__name__ == "GeneralModel" and model.grid_size() == (16, 16)


def test_the_general_model_learns_which_colour_the_words_name(tmp_path):
    """Each kind of video is a success under one instruction and a failure under the other: only reading the
    free-form words can rate them (the instruction-blind twin cannot beat chance)."""
    before = one_thread()
    try:
        # 12 scenarios and 250 steps scored 0.75-0.875 from run to run (float noise on a tiny set); this is 1.0.
        # The general-parts model (its parts trained apart) with its outcome frames at 96 px, two outcome heads, a short
        # match warm-up: the words are what is tested (400 steps through block 4 at 224 px, after as many warm-up
        # steps, took 6 minutes of CI). 16 scenarios score 1.0 at 150, 250 and 400 steps; 250 keeps a margin
        suite = camera_suite(tmp_path / "suite", n_scenarios=16)
        config = tmp_path / "config.json"
        config.write_text(json.dumps({"model": {"outcome_size": 96, "outcome_members": 2, "outcome_blocks": 0,
                                                "outcome_pooling": "max"},
                                      "train": {"min_steps": 250, "val_share": 0.01, "outcome": {"steps": 250},
                                                "stream": {"match_warmup_epochs": 2}}}))
        assert cli.main(["train", "--suite", str(suite.root), "--out", str(tmp_path / "m"), "--config", str(config),
                         "--no-tracking", "--cache-dir", str(tmp_path / "cache"), "--quiet"]) == 0
        out = tmp_path / "pred.jsonl"
        assert cli.main(["predict", "--model", str(tmp_path / "m"), "--suite", str(suite.root), "--out", str(out),
                         "--quiet"]) == 0
    finally:
        torch.set_num_threads(before)
    label = {a.continuation_id: a.outcome == "success" for a in suite.annotations}
    rows = read_lines(out)
    right = [(r["p_success"] >= 0.5) == label[r["continuation_id"]] for r in rows]
    assert np.mean(right) >= 0.8, rows


def test_device_auto_is_the_gpu_when_there_is_one_else_the_cpu():
    from autorater.device import resolve_device

    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match="unknown device 'tpu9'.*fix"):
        resolve_device("tpu9")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no GPU"):
            resolve_device("cuda")


def test_a_model_rates_on_the_device_it_is_on_and_answers_on_the_cpu():
    """Inputs follow the model (features are cached on the CPU); outputs come back to the CPU for numpy."""
    from autorater.device import resolve_device
    from autorater.predict import predict_batch

    config = PRESETS["tiny"].replace(vocab=["red"], failure_modes=["timeout"])
    model = AutoModel.from_config(config).to(resolve_device("auto"))
    frames = torch.zeros(2, 8, 32, 32, 3, dtype=torch.uint8)
    out = predict_batch(model, frames=frames, times_s=torch.arange(8.0).repeat(2, 1) / 8, durations_s=[1.0, 1.0],
                        takeovers_s=[0.0, 0.0], instructions=["red", "blue"])
    assert out["p_success"].shape == (2,) and np.isfinite(out["p_success"]).all()


def test_calibrate_label_active_and_serve_take_the_general_model_unchanged(trained, tmp_path):
    import shutil

    from fastapi.testclient import TestClient

    from autorater.data.suite import Reference, Suite
    from autorater.serving.service.app import create_app

    model = tmp_path / "model"
    shutil.copytree(trained["model"], model)
    pool = camera_suite(tmp_path / "pool", n_scenarios=12, seed=1)  # new videos, the same kind
    truth = {a.continuation_id: a for a in pool.annotations}
    refs = [Reference(c, truth[c].outcome, truth[c].marker_s) for c in pool.continuation_ids()[:16]]
    Suite(pool.root, pool.info, pool.scenarios, pool.continuations, [], refs).write(pool.root)
    assert cli.main(["calibrate", "--model", str(model), "--suite", str(pool.root), "--quiet"]) == 0
    assert (model / "calibration.json").is_file()  # 16 references: too few to certify, so every label goes to humans

    assert cli.main(["label", "--model", str(model), "--suite", str(pool.root), "--out", str(tmp_path / "labels"),
                     "--quiet"]) == 0
    labels = read_lines(tmp_path / "labels" / "labels.jsonl")
    assert [r["continuation_id"] for r in labels] == pool.continuation_ids()
    assert all(0 <= r["p_success"] <= 1 and r["decision"] in ("auto", "human") for r in labels)

    assert cli.main(["active", "select", "--model", str(model), "--pool", str(pool.root), "--budget", "4",
                     "--out", str(tmp_path / "queue"), "--quiet"]) == 0
    picked = read_lines(tmp_path / "queue" / "selection.jsonl")
    assert len(picked) == 4 and {r["continuation_id"] for r in picked} <= set(pool.continuation_ids()[16:])

    client = TestClient(create_app(model, tmp_path))
    cid = pool.continuation_ids()[-1]
    r = client.post("/v1/rate", json={"video": f"pool/videos/{cid}.mp4", "instruction": pool.instruction_of(cid)})
    assert r.status_code == 200, r.text
    assert r.json()["p_success"] == pytest.approx(next(x["p_success"] for x in labels if x["continuation_id"] == cid),
                                                  abs=1e-5)


def test_a_cropped_map_is_one_window_of_each_clip_the_same_for_every_frame():
    from autorater.training.inputs.batches import crop_maps

    x = torch.arange(3 * 4 * 2 * 10 * 12, dtype=torch.float32).reshape(3, 4, 2, 10, 12)
    for seed in range(20):
        out = crop_maps(x, 0.6, np.random.default_rng(seed))
        n, t, c, h, w = out.shape
        assert (n, t, c) == (3, 4, 2) and 6 <= h <= 10 and 7 <= w <= 12 and abs(h / 10 - w / 12) < 0.1
        for i in range(n):  # the window's top-left value says where it was cut; every frame and channel agree
            y, x0 = divmod(int(out[i, 0, 0, 0, 0] - x[i, 0, 0, 0, 0]), 12)
            assert torch.equal(out[i], x[i, ..., y:y + h, x0:x0 + w])
    assert crop_maps(x, 1.0, np.random.default_rng(0)).shape == x.shape


def test_crop_trains_the_general_model_and_is_skipped_for_heads_that_learn_places(tmp_path):
    """The general model finds things by content, so a cropped map is the same scene; the grid model's learned
    places would move: its recipe drops the crop and says so."""
    from autorater.training.recipe import TrainConfig
    from autorater.training.train import train
    from model_suites import learnable_suite

    saved = {}
    small = GeneralConfig(image_size=64, clip_frames=8, encoder_stage=2, context_frames=-1)
    for name, config, suite in [("general", small, camera_suite(tmp_path / "cam", n_scenarios=4)),
                                ("grid", PRESETS["tiny"], learnable_suite(tmp_path / "grid", n_scenarios=4))]:
        tc = TrainConfig(epochs=1, aggregation="majority", cache_dir=str(tmp_path / "c")).replace(
            stream={"match_warmup_epochs": 0}, augment={"crop": 0.7})
        result = train([suite], config, tc, out=tmp_path / name)
        assert np.isfinite(result.history[-1]["train_loss"])
        saved[name] = json.loads((tmp_path / name / "metadata.json").read_text())["train_config"]["augment"]["crop"]
    assert saved == {"general": 0.7, "grid": 0.0}
