"""A portable pack of training inputs: what ``prepare`` makes of suites, written once where the videos, decord and the
weight packages are, and trained from anywhere torch runs (a lent GPU machine has none of them).

    autorater pack --suite S [--suite S2 ...] [--config C] --out PACK          # decode, label, encode, write
    autorater train --from-pack PACK [--config C] --out MODEL --device cuda      # the same training, from the pack

A pack is a folder: ``pack.json`` (the model config it was encoded for, its learned words and failure modes, the
examples with their labels, the split groups, the suites' names and sources), ``clips.safetensors`` (the feature
cache's entries of every row, as ``FeatureCache.load`` returns them, and the label indices), ``sentences.safetensors``
(the frozen sentence vectors of every instruction the training can ask for) and ``encoders/<name>.safetensors`` (each
pretrained frame encoder's weights, from its package). Safetensors and JSON only: reading a pack runs no code.
Training from it is ``train`` itself on the same inputs: a model trained from a pack is the model trained from the
suites (a test says so), and ``outcome.blocks`` 6 trains the whole encoder from the frames the pack holds.

Example:
    >>> write_pack([Suite.load("suite")], PRESETS["general"].replace(outcome_blocks=6), TrainConfig(), "pack")
    ...                                                                                      # doctest: +SKIP
    >>> result = train(Pack("pack"), PRESETS["general"].replace(outcome_blocks=6), TrainConfig(device="cuda"))
    ...                                                                                      # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Sequence

import torch

from autorater.config import AutoraterConfig
from autorater.data.suite import Suite
from autorater.model import Autorater
from autorater.models import AutoModel, spec_of
from autorater.training.inputs.batches import TrainingData, mirrorable, prepare, seeded
from autorater.training.inputs.cache import CachedClips, cache_key, rate_clips
from autorater.training.inputs.dataset import Examples
from autorater.training.recipe import TrainConfig

PACK_FILE, CLIPS_FILE, SENTENCES_FILE = "pack.json", "clips.safetensors", "sentences.safetensors"
ENCODERS, HELD_OUT = "encoders", "held_out"
FORMAT = "autorater-pack-1"


def write_pack(suites: Sequence[Suite], model_config: AutoraterConfig, tc: TrainConfig, out: str | Path,
               progress: bool = False, held_out: dict[str, Suite] | None = None) -> Path:
    """Prepare ``suites`` for ``model_config`` (``prepare``: labels, the feature cache under ``tc.cache_dir``) and
    write the pack to ``out`` (module docstring); with ``held_out``, every continuation of those suites too, to be
    rated where the pack trains (``Pack.rate_held_out``: a benchmark's held-out sets). Returns the folder."""
    from safetensors.torch import save_file

    from autorater.data.files import write_text_atomic
    from autorater.encoders import export_weights
    from autorater.models.parts.text import sentence_vectors

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model, data = prepare(suites, model_config, tc, progress)
    clips = data.clips
    tensors = {**_clip_tensors(clips), "marker_index": data.marker_index, "failure_index": data.failure_index}
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(out / CLIPS_FILE))
    held_texts = {t for suite in (held_out or {}).values() for t in map(suite.instruction_of, suite.continuation_ids())}
    vectors = sentence_vectors(model, sorted(set(training_texts(data, tc)) | held_texts))
    if vectors:
        save_file(vectors, str(out / SENTENCES_FILE))
    encoders = sorted({enc.spec.name for enc in model.frame_encoders().values()
                       if enc.spec is not None and enc.spec.network is not None and enc.spec.network.load_weights})
    for name in encoders:
        export_weights(name, out / ENCODERS / f"{name}.safetensors")
    held = {name: _write_held_out(model, suite, tc, out / HELD_OUT / name) for name, suite in (held_out or {}).items()}
    key = cache_key(model, not model.frame_encoder.caches_frames)
    meta = {"format": FORMAT, "model_config": model.config.to_dict(), "held_out": held, "cache_key": key,
            "is_frames": clips.is_frames, "pixel_cells": data.pixel_cells,
            "decisive": sorted(data.decisive), "groups": data.groups, "sources": data.sources,
            "suite_names": data.suite_names, "encoders": encoders,
            "examples": {k: getattr(data.ex, k) for k in Examples.__dataclass_fields__}}
    write_text_atomic(out / PACK_FILE, json.dumps(meta) + "\n")
    return out


def _write_held_out(model: Autorater, suite: Suite, tc: TrainConfig, folder: Path) -> dict:
    """Every continuation of ``suite`` as the model encodes it (``clips.safetensors`` in ``folder``) and what rating
    and scoring them need: ids, instructions, takeovers, scenarios, the truth (the simulator's, else the suite's
    references)."""
    from safetensors.torch import save_file

    from autorater.data.suite import load_truth
    from autorater.training.inputs.cache import FeatureCache

    ids = suite.continuation_ids()
    takeovers = [suite.takeover_of(c) for c in ids]
    clips = FeatureCache(tc.cache_dir).load(model, [str(suite.video_path(c)) for c in ids], takeovers_s=takeovers)
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in _clip_tensors(clips).items()}, str(folder / CLIPS_FILE))
    try:
        truth = {t["continuation_id"]: t["outcome"] for t in load_truth(suite.root)}
    except FileNotFoundError:
        truth = {r.continuation_id: r.outcome for r in suite.references}
    return {"ids": ids, "instructions": [suite.instruction_of(c) for c in ids], "takeovers_s": takeovers,
            "scenarios": [suite.get(c).scenario_id for c in ids], "truth": [truth.get(c) for c in ids],
            "errors": {str(i): e for i, e in clips.errors.items()}, "is_frames": clips.is_frames}


def _clip_tensors(clips: CachedClips) -> dict[str, torch.Tensor]:
    return {"features": clips.features, "times_s": clips.times_s, "durations_s": clips.durations_s,
            **{f"encoded.{k}": v for k, v in clips.encoded.items()}}


def _read_clips(path: Path, is_frames: bool, errors: dict | None = None) -> tuple[CachedClips, dict]:
    from safetensors.torch import load_file

    t = load_file(str(path))
    clips = CachedClips(t["features"], t["times_s"], t["durations_s"], is_frames,
                        {int(i): e for i, e in (errors or {}).items()},
                        encoded={k[len("encoded."):]: v for k, v in t.items() if k.startswith("encoded.")})
    return clips, t


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


class Pack:
    """A pack folder (module docstring), read: what training needs of it (``prepare``) and what the model folder
    says of its data (``suite_names``). Its encoder weights and sentence vectors go to the model built from it
    (``weights_from``, ``give_vectors``), which builds and reads words without their packages; nothing else in the
    process sees them."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        path = self.folder / PACK_FILE
        if not path.is_file():
            raise FileNotFoundError(f"{self.folder} is not a pack: it has no {PACK_FILE} (fix: write one with "
                                    f"`autorater pack --suite S --out {self.folder}`)")
        self.meta = json.loads(path.read_text(encoding="utf-8"))
        if self.meta.get("format") != FORMAT:
            raise ValueError(f"{path}: format {self.meta.get('format')!r}, not {FORMAT!r} (fix: pack the suites again "
                             f"with this autorater)")

    @property
    def suite_names(self) -> list[str]:
        return list(self.meta["suite_names"])

    def vectors(self) -> dict[int, dict[str, torch.Tensor]]:
        """The pack's sentence vectors: token budget -> instruction -> its vector."""
        from safetensors.torch import load_file

        by_budget: dict[int, dict[str, torch.Tensor]] = {}
        if (self.folder / SENTENCES_FILE).is_file():
            for key, vector in load_file(str(self.folder / SENTENCES_FILE)).items():
                budget, _, text = key.partition("|")
                by_budget.setdefault(int(budget), {})[text] = vector
        return by_budget

    @contextlib.contextmanager
    def installed(self):
        """For the block (a training run from this pack): the models built read the pack's encoder weights and
        sentence vectors in place of the weights' and MiniLM's packages; after it, nothing does."""
        from autorater.encoders import weights_from
        from autorater.models.parts.text import vectors_from

        files = {name: self.folder / ENCODERS / f"{name}.safetensors" for name in self.meta["encoders"]}
        with weights_from(files), vectors_from(self.vectors()):
            yield

    def build(self, config: AutoraterConfig, seed: int) -> Autorater:
        """The model of ``config`` (built from ``seed``) with the pack's encoder weights, and its sentence vectors
        given to it (``give_vectors``: it rates the pack's instructions after the run too); nothing else keeps them."""
        from autorater.models.parts.text import give_vectors

        with seeded(seed), self.installed():
            model = AutoModel.from_config(config)
        give_vectors(model, self.vectors())
        return model

    def prepare(self, model_config: AutoraterConfig, tc: TrainConfig,
                progress: bool = False) -> tuple[Autorater, TrainingData]:
        """``prepare``'s output from the pack: the model of ``model_config`` (its learned words and failure modes the
        pack's, built from ``tc.seed`` as ``prepare`` builds it) and the training data, checked to be what this model
        reads (the same cache key)."""
        meta, cfg = self.meta, model_config
        learned = meta["model_config"]
        if spec_of(cfg).learns_words(cfg) and not cfg.vocab:
            cfg = cfg.replace(vocab=learned.get("vocab", []))
        if not cfg.failure_modes:
            cfg = cfg.replace(failure_modes=learned["failure_modes"])
        model = self.build(cfg, tc.seed)
        key = cache_key(model, not model.frame_encoder.caches_frames)
        if key != meta["cache_key"]:
            raise ValueError(f"{self.folder} holds the inputs of {meta['cache_key']!r}; this config reads {key!r} "
                             f"(fix: train with the --config the pack was written with, or pack the suites with it)")
        clips, t = _read_clips(self.folder / CLIPS_FILE, meta["is_frames"])
        data = TrainingData(Examples(**meta["examples"]), clips, t["marker_index"], t["failure_index"],
                            pixel_cells=meta["pixel_cells"], decisive=frozenset(meta["decisive"]),
                            groups=meta["groups"], processor=model.processor, sources=meta["sources"],
                            suite_names=meta["suite_names"])
        return model, data


    @property
    def held_out_names(self) -> list[str]:
        """The held-out sets the pack holds (``write_pack(held_out=...)``)."""
        return list(self.meta.get("held_out", {}))

    def rate_held_out(self, model: Autorater, name: str, batch_size: int = 64) -> list[dict]:
        """Prediction rows of every continuation of held-out set ``name`` by ``model`` (of the config the pack was
        written for), from its cached inputs."""
        held = self.meta["held_out"][name]
        clips, _ = _read_clips(self.folder / HELD_OUT / name / CLIPS_FILE, held["is_frames"], held["errors"])
        return rate_clips(model, clips, held["ids"], held["instructions"], held["takeovers_s"], batch_size=batch_size)

    def truth(self, name: str) -> dict[str, int]:
        """Held-out set ``name``'s true outcomes, 1 = success (continuations with none left out)."""
        held = self.meta["held_out"][name]
        return {c: int(t == "success") for c, t in zip(held["ids"], held["truth"]) if t is not None}

    def scenarios(self, name: str) -> dict[str, str]:
        """Held-out set ``name``'s scenario of each continuation (what paired comparisons resample)."""
        held = self.meta["held_out"][name]
        return dict(zip(held["ids"], held["scenarios"]))


__all__ = ["FORMAT", "PACK_FILE", "Pack", "training_texts", "write_pack"]
