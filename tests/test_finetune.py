"""The general model's trainable encoder (its top blocks fine-tune from a cached bottom) and honest instruction pairs.

Tiny and on the CPU: EfficientNet-Lite0 at 64 px on the camera suite of ``model_suites``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from autorater.encoders import create_frame_encoder
from autorater.model import read_frames, read_safetensors_header
from autorater.models import PRESETS, AutoModel
from autorater.training.inputs.augment import Augmentations
from autorater.training.inputs.batches import TrainingData, make_batch, shared_video_groups
from autorater.training.inputs.cache import CachedClips
from autorater.training.inputs.dataset import Examples, task_key
from autorater.training.recipe import TrainConfig
from autorater.training.train import train
from model_suites import camera_suite, one_thread, saved_before_the_config_checksum

FINE = PRESETS["tiny-general"].replace(encoder_stage=3, trainable_blocks=1, pixel_cells=0, reference_frame=True)


@pytest.fixture(scope="module")
def fine_tuned(tmp_path_factory):
    root = tmp_path_factory.mktemp("finetune")
    suite = camera_suite(root / "suite", n_scenarios=8)
    before = one_thread()
    try:
        tc = TrainConfig(epochs=3, val_share=0.25, cache_dir=str(root / "cache"), encoder_lr=3e-3).replace(
            stream={"match_warmup_epochs": 1})
        result = train([suite], FINE, tc, out=root / "model")
    finally:
        torch.set_num_threads(before)
    return {"root": root, "suite": suite, "result": result}


def test_the_cache_holds_the_frozen_bottom_and_training_moves_only_the_top(fine_tuned):
    model, fresh = fine_tuned["result"].model, create_frame_encoder(FINE)
    (folder,) = (fine_tuned["root"] / "cache").iterdir()
    assert "-top1-" in folder.name  # the key names the cut: another cut, another cache
    from safetensors.torch import load_file

    cached = load_file(str(next(folder.glob("*.safetensors"))))["x"]
    assert cached.shape[1:] == (80, 4, 4)  # lite0's blocks below the last stride-16 group, at 64 px
    trained, start = model.frame_encoder.state_dict(), fresh.state_dict()
    moved = {k for k in start if k.startswith("top.") and not torch.equal(trained[k].cpu(), start[k])}
    assert moved and all(torch.equal(trained[k].cpu(), start[k]) for k in start if k.startswith("bottom."))
    assert not any(p.requires_grad for p in model.frame_encoder.bottom.parameters())


def test_a_fine_tuned_folder_keeps_the_top_and_rebuilds_the_bottom_from_its_package(fine_tuned):
    folder = fine_tuned["root"] / "model"
    shapes, _ = read_safetensors_header(folder / "model.safetensors")
    assert any(k.startswith("frame_encoder.top.") for k in shapes)
    assert not any(k.startswith("frame_encoder.bottom.") for k in shapes)
    loaded, model = AutoModel.from_pretrained(folder), fine_tuned["result"].model.eval()
    frames = torch.randint(0, 255, (2, 8, 64, 64, 3), dtype=torch.uint8)
    x = {"times_s": torch.arange(8.0).repeat(2, 1) / 8, "takeover_s": torch.tensor([0.0, 0.25]),
         "instructions": ["a red block should appear", "a blue block should appear"]}
    with torch.no_grad():
        a, b = loaded(frames=frames, **x), model(frames=frames, **x)
    assert torch.allclose(a.success_logit, b.success_logit, atol=1e-4)


def test_training_logs_its_own_balanced_accuracy_beside_validation(fine_tuned):
    history = fine_tuned["result"].history
    assert history and all(0 <= h["train_balanced_accuracy"] <= 1 and "val_balanced_accuracy" in h for h in history)


def test_the_top_reads_only_the_frames_from_the_takeover_on():
    times = torch.tensor([[0.0, 0.125, 0.25, 0.375, 0.5, 0.5, 0.5]])
    keep = read_frames(times, torch.tensor([0.3]))
    assert keep.tolist() == [[False, False, True, True, True, False, False]]  # the frame before, then real ones
    encoder = create_frame_encoder(FINE)
    low = encoder.cacheable(torch.randint(0, 255, (1, 7, 64, 64, 3), dtype=torch.uint8))
    with torch.no_grad():
        out = encoder.finish(low, keep)
    assert out[0, :2].abs().sum() == 0 and out[0, 2:5].abs().sum() > 0
    with torch.no_grad():
        assert torch.allclose(out[0, 2:5], encoder.finish(low[:, 2:5])[0], atol=1e-3)


def test_an_old_general_folder_loads_frozen_and_without_the_reference_frame(tmp_path):
    model = AutoModel.from_config(PRESETS["tiny-general"].replace(failure_modes=["timeout"]))
    model.save_pretrained(tmp_path / "m")
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    for key in ("trainable_blocks", "reference_frame"):  # written before these fields existed
        del config[key]
    (tmp_path / "m" / "config.json").write_text(json.dumps(config))
    saved_before_the_config_checksum(tmp_path / "m")
    loaded = AutoModel.from_pretrained(tmp_path / "m")
    assert loaded.config.trainable_blocks == 0 and loaded.config.reference_frame is False


# -- honest instruction pairs ---------------------------------------------------------------------

TASKS = {"drawer-open": ["open the drawer", "pull the drawer open", "slide the drawer out"],
         "drawer-close": ["close the drawer", "push the drawer shut"],
         "window-open": ["open the window", "slide the window open"]}


def _pairs_data(n_per: int = 4) -> TrainingData:
    """Rows of three tasks, each worded several ways across scenarios (the category is the verb, as Meta-World's)."""
    ex = Examples()
    for s, (task, wordings) in enumerate((t, w) for t, ws in TASKS.items() for w in ws):
        for k in range(n_per):
            ex.continuation_ids.append(f"c{s}{k}")
            ex.scenario_keys.append(f"0/s{s}")
            ex.task_keys.append(f"task:{task}")
            ex.instructions.append(wordings)
            ex.categories.append(task.split("-")[1])
            ex.takeover_s.append(0.0)
            ex.p_success.append(1.0 if k % 2 == 0 else 0.0)
            ex.marker_s.append(0.5)
            ex.failure_mode.append(None)
    n = len(ex.continuation_ids)
    clips = CachedClips(torch.zeros(n, 4, 2, 2, 2), torch.arange(4.0).repeat(n, 1) / 8, torch.full((n,), 0.5), False,
                        {})
    return TrainingData(ex, clips, torch.full((n,), 2), torch.full((n,), -1))


@pytest.mark.parametrize("successes_only", [True, False])
def test_no_instruction_negative_is_a_wording_of_the_clips_own_task(successes_only):
    data = _pairs_data()
    task_of = {w: t for t, ws in TASKS.items() for w in ws}
    augment = Augmentations(mirror=False, rotate=False, relax=0.0)
    rng, negatives = np.random.default_rng(0), 0
    for _ in range(50):
        rows = rng.choice(len(data.ex.instructions), 12, replace=False)
        inputs, _ = make_batch(data, rows, rng, augment=augment, mismatch_share=0.5, successes_only=successes_only)
        own = [data.ex.task_keys[r][len("task:"):] for r in rows]
        for i in range(len(rows), len(inputs["instructions"])):
            clip = int(inputs["clip_index"][i])
            assert task_of[inputs["instructions"][i]] != own[clip]  # another task, never a paraphrase
            negatives += 1
    assert negatives > 100  # and there are negatives: open vs close of the same drawer among them


def test_the_task_key_is_the_suites_task_id_else_the_wording():
    from autorater.data.suite import Scenario

    named = Scenario("s1", "Pull the drawer open!", "open", metadata={"task": "drawer-open-v3"})
    assert task_key(named) == task_key(Scenario("s2", "open the drawer", "open", metadata={"task": "drawer-open-v3"}))
    assert task_key(Scenario("s3", "Pull the drawer open!", "open")) == task_key(Scenario("s4", "pull the drawer open",
                                                                                          "open"))
    assert task_key(Scenario("s5", "open the drawer", "open")) != task_key(Scenario("s6", "close the drawer", "close"))


def test_scenarios_that_share_a_video_fall_in_one_split_group():
    keys = ["0/s1", "0/s1", "0/s2", "1/s1", "1/s9", "0/s3"]
    hashes = ["a", "b", "c", "b", "c", "d"]  # suite 1 re-uses suite 0's videos under other instructions
    groups = shared_video_groups(keys, hashes)
    assert groups[0] == groups[1] == groups[3]
    assert groups[2] == groups[4] != groups[0]
    assert groups[5] not in (groups[0], groups[2])
