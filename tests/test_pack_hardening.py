"""Packs someone hands you (issue 65, item 12): every crafted or damaged pack is refused with one line that names the
file and the field, before anything is written, or trains correctly; none ends in a traceback, none blocks.

Two packs are written once (the grid recipe's ``tiny``; ``tiny-general``, with its sentence vectors, encoder weights,
outcome frames and a held-out set); each case copies one (hard links: a damage rewrites its file), damages it and runs
``autorater train --from-pack`` through the CLI. Most damages are resealed (the file's record and pack.json's checksum
recomputed, as someone who edits a pack on purpose would), so that the check behind the checksum is the one tested;
the checksum itself is tested by damages left unsealed (a copy damaged on the way, its values still finite)."""

from __future__ import annotations

import json
import lzma
import os
import shutil
import signal
from pathlib import Path

import pytest
import torch

from autorater.models import PRESETS
from model_suites import camera_suite, learnable_suite, one_thread

CLIPS = "clips.safetensors.xz"


@pytest.fixture(scope="module")
def packs(tmp_path_factory):
    from autorater.training.inputs.pack import write_pack
    from autorater.training.recipe import recipe_for

    before = one_thread()
    root = tmp_path_factory.mktemp("packs")
    grid, camera = PRESETS["tiny"], PRESETS["tiny-general"]
    write_pack([learnable_suite(root / "grid", n_scenarios=4, per_scenario=2)], grid,
               recipe_for(grid, cache_dir=str(root / "cache")), root / "tiny")
    held = camera_suite(root / "held", n_scenarios=2, per_scenario=2, seed=1)
    write_pack([camera_suite(root / "camera", n_scenarios=4, per_scenario=2)], camera,
               recipe_for(camera, cache_dir=str(root / "cache")), root / "tiny-general", held_out={"unseen": held})
    torch.set_num_threads(before)
    return root


# -- damaging a pack -------------------------------------------------------------------------------------------


def read_meta(pack: Path) -> dict:
    return json.loads((pack / "pack.json").read_text())


def write_meta(pack: Path, meta: dict, reseal: bool = True) -> None:
    from autorater.training.inputs.pack.folder import meta_sha256

    if reseal:
        meta["checksum"] = meta_sha256(meta)
    (pack / "pack.json").unlink()
    (pack / "pack.json").write_text(json.dumps(meta))


def edit_meta(pack: Path, change, reseal: bool = True) -> None:
    meta = read_meta(pack)
    change(meta)
    write_meta(pack, meta, reseal)


def rewrite(pack: Path, relative: str, data: bytes, reseal: bool = True) -> None:
    """``relative``'s bytes replaced (a new file: the copy's hard link to the original is broken), its record and
    pack.json's checksum recomputed when ``reseal``."""
    import hashlib

    path = pack / relative
    path.unlink()
    path.write_bytes(data)
    if reseal:
        edit_meta(pack, lambda m: m["files"].__setitem__(relative, {"sha256": hashlib.sha256(data).hexdigest(),
                                                                      "bytes": len(data)}))


def edit_tensors(pack: Path, relative: str, change, reseal: bool = True) -> None:
    from safetensors.torch import load, save

    raw = (pack / relative).read_bytes()
    tensors = dict(load(lzma.decompress(raw) if relative.endswith(".xz") else raw))
    change(tensors)
    data = save({k: v.contiguous() for k, v in tensors.items()})
    rewrite(pack, relative, lzma.compress(data, preset=1) if relative.endswith(".xz") else data, reseal)


def put(tensors: dict, name: str, value) -> None:
    tensors[name] = value(tensors[name]) if callable(value) else value


def symlink_to_copy(pack: Path, relative: str) -> None:
    outside = pack.parent / f"outside-{pack.name}"
    shutil.copytree(pack / relative, outside) if (pack / relative).is_dir() else shutil.copy(pack / relative, outside)
    (shutil.rmtree if (pack / relative).is_dir() else os.unlink)(pack / relative)
    os.symlink(outside, pack / relative)


def fifo(pack: Path, relative: str) -> None:
    os.unlink(pack / relative)
    os.mkfifo(pack / relative)


def first_vector(tensors: dict) -> str:
    return sorted(tensors)[0]


# case -> (pack, damage, what the one-line error must name; None: trains)
CASES = {
    "no pack.json": ("tiny", lambda p: os.unlink(p / "pack.json"), "is not a pack"),
    "pack.json not JSON": ("tiny", lambda p: rewrite(p, "pack.json", b"\x00{not json", reseal=False),
                           "pack.json: not UTF-8 JSON"),
    "pack.json a list": ("tiny", lambda p: rewrite(p, "pack.json", b"[1, 2]", reseal=False), "pack.json: format"),
    "unknown format": ("tiny", lambda p: edit_meta(p, lambda m: m.update(format="autorater-pack-9")), "format"),
    "edited, not resealed": ("tiny", lambda p: edit_meta(
        p, lambda m: m["examples"]["p_success"].__setitem__(0, 1 - m["examples"]["p_success"][0]), reseal=False),
        "pack.json: its content does not match the checksum"),
    "checksum removed": ("tiny", lambda p: edit_meta(p, lambda m: m.pop("checksum"), reseal=False),
                         "does not match the checksum"),
    "files not an object": ("tiny", lambda p: edit_meta(p, lambda m: m.update(files=[])), "field 'files'"),
    "a file record outside the pack": ("tiny", lambda p: edit_meta(p, lambda m: m["files"].__setitem__(
        "../../etc/passwd", {"sha256": "0" * 64, "bytes": 1})), "field 'files'"),
    "NaN label": ("tiny", lambda p: edit_meta(p, lambda m: m["examples"]["p_success"].__setitem__(1, float("nan"))),
                  "examples.p_success"),
    "label out of range": ("tiny", lambda p: edit_meta(p, lambda m: m["examples"]["p_success"].__setitem__(0, 1.7)),
                           "examples.p_success"),
    "negative marker": ("tiny", lambda p: edit_meta(p, lambda m: m["examples"]["marker_s"].__setitem__(0, -3.0)),
                        "examples.marker_s"),
    "takeover a string": ("tiny", lambda p: edit_meta(p, lambda m: m["examples"]["takeover_s"].__setitem__(0, "0")),
                          "examples.takeover_s"),
    "lists of two lengths": ("tiny", lambda p: edit_meta(p, lambda m: m["examples"]["instructions"].pop()),
                             "examples.instructions"),
    "a terminal escape in an instruction": ("tiny", lambda p: edit_meta(
        p, lambda m: m["examples"]["instructions"].__setitem__(0, "go \x1b[31mred")), "examples.instructions"),
    "an instruction of 5,000 characters": ("tiny", lambda p: edit_meta(
        p, lambda m: m["examples"]["instructions"].__setitem__(0, "red " * 1250)), "examples.instructions"),
    "an unknown failure mode": ("tiny", lambda p: edit_meta(
        p, lambda m: m["examples"]["failure_mode"].__setitem__(0, "exploded")), "examples.failure_mode"),
    "a suite index out of range": ("tiny", lambda p: edit_meta(
        p, lambda m: m["examples"]["suite_index"].__setitem__(0, 7)), "examples.suite_index"),
    "a required field missing": ("tiny", lambda p: edit_meta(p, lambda m: m["examples"].pop("categories")),
                                 "field 'examples'"),
    "300,000 words": ("tiny", lambda p: edit_meta(p, lambda m: m["model_config"].update(
        vocab=["w" + "".join(chr(97 + int(d)) for d in f"{i:06d}") for i in range(300_000)])), "model_config"),
    "a word that is a path": ("tiny", lambda p: edit_meta(p, lambda m: m["model_config"]["vocab"].__setitem__(
        0, "../etc")), "model_config.vocab"),
    "model config a string": ("tiny", lambda p: edit_meta(p, lambda m: m.update(model_config="tiny")),
                              "model_config"),
    "model config with an unknown field": ("tiny", lambda p: edit_meta(p, lambda m: m["model_config"].update(
        evil=1)), "model_config"),
    "an encoder name that is a path": ("tiny-general", lambda p: edit_meta(p, lambda m: m.update(
        encoders=["../../../tmp/evil"])), "field 'encoders'"),
    "the config's encoder a path": ("tiny-general", lambda p: edit_meta(p, lambda m: m["model_config"].update(
        encoder="/tmp/evil")), "model_config"),
    "a held-out set named by a path": ("tiny-general", lambda p: edit_meta(p, lambda m: m.update(
        held_out={"../../x": m["held_out"]["unseen"]})), "field 'held_out'"),
    "a source whose world is a list": ("tiny", lambda p: edit_meta(p, lambda m: m.update(
        sources=[{"world": ["babyai"]}])), "field 'sources'"),
    "groups of another length": ("tiny", lambda p: edit_meta(p, lambda m: m.update(groups=m["groups"][:-1])),
                                 "field 'groups'"),
    "is_frames not a bool": ("tiny", lambda p: edit_meta(p, lambda m: m.update(is_frames="no")), "is_frames"),
    # the clips
    "clips truncated": ("tiny", lambda p: rewrite(p, CLIPS, (p / CLIPS).read_bytes()[:-500]), CLIPS),
    "clips damaged on the way": ("tiny", lambda p: rewrite(p, CLIPS, (lambda b: b[:300] + bytes([b[300] ^ 1]) +
                                                                      b[301:])((p / CLIPS).read_bytes()),
                                                           reseal=False), CLIPS),
    "a damaged copy with finite values": ("tiny", lambda p: edit_tensors(p, CLIPS, lambda t: put(
        t, "features", lambda x: x.index_fill(0, torch.tensor([0]), 0.5)), reseal=False),
        "do not match the checksum"),
    "int8 features": ("tiny", lambda p: edit_tensors(p, CLIPS, lambda t: put(t, "features", lambda x: x.to(
        torch.int8))), "'features'"),
    "NaN features": ("tiny", lambda p: edit_tensors(p, CLIPS, lambda t: put(t, "features", lambda x: x.index_fill(
        0, torch.tensor([1]), float("nan")))), "NaN"),
    "NaN times": ("tiny", lambda p: edit_tensors(p, CLIPS, lambda t: put(t, "times_s", lambda x: x.index_fill(
        1, torch.tensor([2]), float("nan")))), "NaN"),
    "times going back": ("tiny", lambda p: edit_tensors(p, CLIPS, lambda t: put(t, "times_s", lambda x: x.flip(1))),
                         "'times_s'"),
    "a zero duration": ("tiny", lambda p: edit_tensors(p, CLIPS, lambda t: put(
        t, "durations_s", lambda x: x.index_fill(0, torch.tensor([0]), 0.0))), "'durations_s'"),
    "marker index -1": ("tiny", lambda p: edit_tensors(p, CLIPS, lambda t: put(
        t, "marker_index", lambda x: torch.full_like(x, -1))), "'marker_index'"),
    "a failure index changed": ("tiny", lambda p: edit_tensors(p, CLIPS, lambda t: put(
        t, "failure_index", lambda x: x + 1)), "'failure_index'"),
    "outcome frame index -1": ("tiny-general", lambda p: edit_tensors(p, CLIPS, lambda t: put(
        t, "encoded.outcome_index", lambda x: x - x.max() - 1)), "encoded.outcome_index"),
    "a tensor the model does not read": ("tiny", lambda p: edit_tensors(p, CLIPS, lambda t: put(
        t, "evil", torch.zeros(3))), "'evil'"),
    "one row too many": ("tiny", lambda p: edit_tensors(p, CLIPS, lambda t: put(
        t, "features", lambda x: torch.cat([x, x[:1]]))), "'features'"),
    "the clips a symlink": ("tiny", lambda p: symlink_to_copy(p, CLIPS), CLIPS),
    "the clips a FIFO": ("tiny", lambda p: fifo(p, CLIPS), "not a regular file"),
    "the clips missing": ("tiny", lambda p: os.unlink(p / CLIPS), "missing"),
    "pack.json a symlink": ("tiny", lambda p: symlink_to_copy(p, "pack.json"), "pack.json"),
    # sentence vectors and encoder weights
    "an all-zero sentence vector": ("tiny-general", lambda p: edit_tensors(p, "sentences.safetensors", lambda t: put(
        t, first_vector(t), lambda x: torch.zeros_like(x))), "unit length"),
    "an instruction with no vector": ("tiny-general", lambda p: edit_tensors(
        p, "sentences.safetensors", lambda t: t.pop(first_vector(t))), "no vector"),
    "a vector of a budget nothing reads": ("tiny-general", lambda p: edit_tensors(
        p, "sentences.safetensors", lambda t: put(t, "7|go", torch.ones(1152) / 384 ** 0.5)), "budget"),
    "a sentence vector of another size": ("tiny-general", lambda p: edit_tensors(
        p, "sentences.safetensors", lambda t: put(t, first_vector(t), torch.ones(384))), "float32"),
    "encoder weights of another shape": ("tiny-general", lambda p: edit_tensors(
        p, "encoders/efficientnet_lite0.safetensors", lambda t: put(t, sorted(t)[0], lambda x: x[:1])),
        "efficientnet_lite0.safetensors"),
    "NaN encoder weights": ("tiny-general", lambda p: edit_tensors(
        p, "encoders/efficientnet_lite0.safetensors", lambda t: put(t, "conv_stem.weight", lambda x: x * float("nan"))),
        "not finite"),
    "the encoders folder a symlink": ("tiny-general", lambda p: symlink_to_copy(p, "encoders"), "encoders"),
    # what a pack may be and still train
    "pack.json rewritten with its keys reordered and indented": ("tiny", lambda p: write_meta(
        p, dict(reversed(list(read_meta(p).items()))), reseal=False), None),
    "a stray file beside the pack's": ("tiny", lambda p: (p / "clips.safetensors").write_bytes(b"junk"), None),
}


def copy_of(packs: Path, name: str, tmp_path: Path) -> Path:
    out = tmp_path / name
    shutil.copytree(packs / name, out, copy_function=os.link)
    return out


def train_from(pack: Path, out: Path, config: str, *extra: str) -> int:
    from autorater.app.cli import main

    signal.alarm(120)  # a read that blocks (a FIFO) fails the test instead of hanging it
    try:
        return main(["train", "--from-pack", str(pack), "--config", config, "--out", str(out), "--epochs", "1",
                     "--no-tracking", "--quiet", "--device", "cpu", "--cache-dir", str(out.parent / "cache"), *extra])
    finally:
        signal.alarm(0)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_crafted_or_damaged_pack_is_refused_in_one_line_or_trains(case, packs, tmp_path, capsys):
    name, damage, named = CASES[case]
    pack = copy_of(packs, name, tmp_path)
    damage(pack)
    before = one_thread()
    try:
        code = train_from(pack, tmp_path / "model", name)
    finally:
        torch.set_num_threads(before)
    err = capsys.readouterr().err.strip()
    if named is None:
        assert code == 0, err
        assert (tmp_path / "model" / "model.safetensors").is_file()
        return
    assert code == 2 and "\n" not in err and err.startswith("error: "), err
    assert named in err and "fix:" in err or "is not a pack" in err, err
    assert not (tmp_path / "model").exists()  # refused before anything was written


def test_a_pack_of_the_first_format_trains_only_when_allowed_and_to_the_same_weights(packs, tmp_path, capsys):
    """A pack written before checksums (``autorater-pack-1``: the clips as they are, no records) is refused without
    ``--allow-unverified`` (as a model folder without a checksum is) and trains with it to the weights the pack
    trains to."""
    pack = copy_of(packs, "tiny", tmp_path)
    (pack / "clips.safetensors").write_bytes(lzma.decompress((pack / CLIPS).read_bytes()))
    os.unlink(pack / CLIPS)
    edit_meta(pack, lambda m: [m.pop("files"), m.pop("checksum"), m.update(format="autorater-pack-1")],
              reseal=False)
    assert train_from(pack, tmp_path / "refused", "tiny") == 2
    assert "--allow-unverified" in capsys.readouterr().err
    before = one_thread()
    try:
        assert train_from(pack, tmp_path / "old", "tiny", "--allow-unverified") == 0
        assert train_from(packs / "tiny", tmp_path / "new", "tiny") == 0
    finally:
        torch.set_num_threads(before)
    from safetensors.torch import load_file

    old, new = (load_file(str(tmp_path / m / "model.safetensors")) for m in ("old", "new"))
    assert old.keys() == new.keys() and all(torch.equal(old[k], new[k]) for k in old)


def test_a_damaged_held_out_set_is_refused_when_it_is_rated(packs, tmp_path):
    """Training never reads the held-out sets; rating one (a benchmark's) checks it as the training clips are."""
    from autorater.training.inputs.pack import Pack, PackError
    from autorater.training.recipe import recipe_for

    pack = copy_of(packs, "tiny-general", tmp_path)
    edit_tensors(pack, f"held_out/unseen/{CLIPS}", lambda t: put(t, "times_s", lambda x: x * float("nan")))
    config = PRESETS["tiny-general"]
    source = Pack(pack)
    model, _ = source.prepare(config, recipe_for(config))
    assert len(Pack(packs / "tiny-general").rate_held_out(model, "unseen")) == 4
    with pytest.raises(PackError, match=r"held_out/unseen/clips.safetensors.xz: tensor 'times_s' holds NaN"):
        source.rate_held_out(model, "unseen")
