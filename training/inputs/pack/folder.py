"""Writing a pack (``autorater pack``): what ``prepare`` makes of suites, in a folder any machine with torch trains
from.

The folder (the package's docstring says what each file holds): ``pack.json`` last, so that a pack whose writing
stopped half way has none and is refused as no pack; every other file's SHA-256 and size recorded in it (``files``),
and ``pack.json``'s own content checksummed (``checksum``: :func:`meta_sha256`), as a model folder's weights and
config are.

Example:
    >>> write_pack([Suite.load("suite")], PRESETS["general"].replace(outcome_blocks=6), TrainConfig(), "pack")
    ...                                                                                      # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Sequence

import torch

from autorater.config import AutoraterConfig
from autorater.data.suite import Suite
from autorater.model import Autorater
from autorater.models.parts.text import sentence_vectors
from autorater.training.inputs.batches import TrainingData, mirrorable, prepare
from autorater.training.inputs.cache import CachedClips, cache_key
from autorater.training.inputs.dataset import Examples
from autorater.training.inputs.pack.files import COMPRESSED, file_record, write_tensors
from autorater.training.recipe import TrainConfig

PACK_FILE, CLIPS_FILE, SENTENCES_FILE = "pack.json", "clips.safetensors", "sentences.safetensors"
ENCODERS, HELD_OUT = "encoders", "held_out"
FORMAT = "autorater-pack-2"  # the files' checksums, the clips compressed (xz)
FORMATS = ("autorater-pack-1", FORMAT)  # read: -1 (issue 57: clips as they are, no checksum) with allow_unverified
# What a machine needs to train from a pack (``autorater train --from-pack PACK --no-tracking``) beside the product:
# torch; what the product imports on the way (numpy, scipy and pandas at module level, safetensors, tqdm's progress
# bars); the general model's encoder network, timm's, and the torchvision timm imports. No decoder, weight package,
# MiniLM, MLflow or krippendorff. Checked by a test that refuses every other package (tests/test_pack_imports.py)
NEEDS = ("torch", "numpy", "scipy", "pandas", "safetensors", "tqdm", "timm", "torchvision")


def meta_sha256(meta: dict) -> str:
    """SHA-256 of pack.json's object without its ``checksum`` (its content: key order and spacing aside)."""
    body = {k: v for k, v in meta.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def clips_name(compress: bool) -> str:
    return CLIPS_FILE + (COMPRESSED if compress else "")


def write_pack(suites: Sequence[Suite], model_config: AutoraterConfig, tc: TrainConfig, out: str | Path,
               progress: bool = False, held_out: dict[str, Suite] | None = None, compress: bool = True) -> Path:
    """Prepare ``suites`` for ``model_config`` (``prepare``: labels, the feature cache under ``tc.cache_dir``) and
    write the pack to ``out`` (the package's docstring); with ``held_out``, every continuation of those suites too,
    to be rated where the pack trains (``Pack.rate_held_out``: a benchmark's held-out sets). ``compress``: the clips
    as xz streams (False: as they are). Returns the folder."""
    from autorater.data.files import write_text_atomic
    from autorater.encoders import export_weights

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model, data = prepare(suites, model_config, tc, progress)
    clips, files = data.clips, {}
    tensors = {**_clip_tensors(clips), "marker_index": data.marker_index, "failure_index": data.failure_index}
    files[clips_name(compress)] = write_tensors(out / clips_name(compress), tensors)
    held_texts = {t for suite in (held_out or {}).values() for t in map(suite.instruction_of, suite.continuation_ids())}
    vectors = sentence_vectors(model, sorted(set(training_texts(data, tc)) | held_texts))
    if vectors:
        files[SENTENCES_FILE] = write_tensors(out / SENTENCES_FILE, vectors)
    encoders = sorted({enc.spec.name for enc in model.frame_encoders().values()
                       if enc.spec is not None and enc.spec.network is not None and enc.spec.network.load_weights})
    for name in encoders:
        files[f"{ENCODERS}/{name}.safetensors"] = file_record(export_weights(name, out / ENCODERS /
                                                                             f"{name}.safetensors"))
    held = {}
    for name, suite in (held_out or {}).items():
        held[name], files[f"{HELD_OUT}/{name}/{clips_name(compress)}"] = _write_held_out(
            model, suite, tc, out / HELD_OUT / name / clips_name(compress))
    key = cache_key(model, not model.frame_encoder.caches_frames)
    meta = {"format": FORMAT, "model_config": model.config.to_dict(), "held_out": held, "cache_key": key,
            "is_frames": clips.is_frames, "pixel_cells": data.pixel_cells,
            "decisive": sorted(data.decisive), "groups": data.groups, "sources": data.sources,
            "suite_names": data.suite_names, "encoders": encoders,
            "examples": {k: getattr(data.ex, k) for k in Examples.__dataclass_fields__}, "files": files}
    meta["checksum"] = meta_sha256(meta)
    write_text_atomic(out / PACK_FILE, json.dumps(meta) + "\n")
    return out


def _write_held_out(model: Autorater, suite: Suite, tc: TrainConfig, path: Path) -> tuple[dict, dict]:
    """Every continuation of ``suite`` as the model encodes it (written to ``path``) and what rating and scoring them
    need: ids, instructions, takeovers, scenarios, the truth (the simulator's, else the suite's references); and the
    file's record."""
    from autorater.data.suite import load_truth
    from autorater.training.inputs.cache import FeatureCache

    ids = suite.continuation_ids()
    takeovers = [suite.takeover_of(c) for c in ids]
    clips = FeatureCache(tc.cache_dir).load(model, [str(suite.video_path(c)) for c in ids], takeovers_s=takeovers)
    record = write_tensors(path, _clip_tensors(clips))
    try:
        truth = {t["continuation_id"]: t["outcome"] for t in load_truth(suite.root)}
    except FileNotFoundError:
        truth = {r.continuation_id: r.outcome for r in suite.references}
    return {"ids": ids, "instructions": [suite.instruction_of(c) for c in ids], "takeovers_s": takeovers,
            "scenarios": [suite.get(c).scenario_id for c in ids], "truth": [truth.get(c) for c in ids],
            "errors": {str(i): e for i, e in clips.errors.items()}, "is_frames": clips.is_frames}, record


def _clip_tensors(clips: CachedClips) -> dict[str, torch.Tensor]:
    return {"features": clips.features, "times_s": clips.times_s, "durations_s": clips.durations_s,
            **{f"encoded.{k}": v for k, v in clips.encoded.items()}}


def training_texts(data: TrainingData, tc: TrainConfig) -> list[str]:
    """Every instruction the training can ask the sentence vectors of: the rows' own, their mirror (inputs that a
    mirror maps), and the weaker and changed wordings the relaxed rows add (worlds whose colour words allow it)."""
    from autorater.data.worlds import palette_of, world_allows
    from autorater.training.inputs.augment import mirror_words, weaker_variants

    texts = set(data.ex.instructions)
    if tc.augment.mirror and mirrorable(data):
        texts |= {mirror_words(t) for t in texts}
    if tc.augment.relax and world_allows(data.sources, "relax"):
        texts |= {v for t in texts for v in weaker_variants(t, palette_of(data.sources))}
    return sorted(texts)


__all__ = ["CLIPS_FILE", "ENCODERS", "FORMAT", "FORMATS", "HELD_OUT", "NEEDS", "PACK_FILE", "SENTENCES_FILE",
           "clips_name", "meta_sha256", "sentence_vectors", "training_texts", "write_pack"]
