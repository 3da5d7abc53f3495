"""Training batches: labels and cached clips (``prepare``), then one batch's inputs (``make_batch``): the instruction
negatives (another task's instruction on a success video; never a paraphrase of its own task), the augmentations a
cached input allows (rotations, mirrors, recolours) and the weaker-instruction rows, and which example and which
pairing each row of the batch is (:class:`Batch`). A batch's targets are its stages' (``training/stages/``: each part's
stage says what its loss reads of the rows).
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np
import torch

from autorater.architecture import Processor
from autorater.config import AutoraterConfig
from autorater.data.suite import Suite
from autorater.data.worlds import Palette, palette_of
from autorater.encoders import tokenize_words
from autorater.model import Autorater
from autorater.models import AutoModel, spec_of
from autorater.predict import real_length
from autorater.training.inputs.augment import (
    Augmentations,
    contradicts,
    mirror,
    mirror_words,
    random_permutation,
    recolour,
    recolour_one_word,
    recolour_words,
    relax_words,
)
from autorater.training.inputs.cache import CachedClips, FeatureCache
from autorater.training.inputs.dataset import Examples, build_examples, marker_indices


@contextlib.contextmanager
def seeded(seed: int):
    """Torch's default generators seeded with ``seed`` for the block, then put back as they were: parameter init
    and dropout draw from them, so a run is reproducible and leaves the caller's random state untouched."""
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


@dataclass
class TrainingData:
    """What the training loop reads: the examples, their cached clips and the label indices.

    ``prepare`` builds it from suites; the baselines build their own from a suite or a cache.
    """

    ex: Examples
    clips: CachedClips
    marker_index: torch.Tensor  # (n,) long
    failure_index: torch.Tensor  # (n,) long
    pixel_cells: int = 0  # > 0: ``clips.features`` are "pixels" cells on a k x k sub-grid (training/inputs/augment.py)
    decisive: frozenset = frozenset()  # categories whose labelled failures include an early mistake (not only
    #                                    timeouts): acting on a wrong object ends the episode there
    groups: list[str] | None = None  # split groups: scenarios that share a video (a suite and its instruction
    #                                  swaps), never split between training and validation
    processor: Processor | None = None  # the model's: it may augment the clips' other encoded inputs
    sources: list[dict | None] = dataclasses.field(default_factory=list)  # the suites' suite.json ``source``: their
    #                                worlds say which augmentations they allow
    suite_names: list[str] = dataclasses.field(default_factory=list)  # "name@version" of each training suite


class InputSettings(Protocol):
    """What preparing the inputs reads of a recipe (``TrainConfig``): how the labels are aggregated, the seed the
    model is built from, and the feature cache's folder."""

    aggregation: str
    seed: int
    cache_dir: str


def prepare(suites: Sequence[Suite], model_config: AutoraterConfig, tc: InputSettings,
            progress: bool = False) -> tuple[Autorater, TrainingData]:
    """Labels from the annotations, the vocabulary and failure modes, the model, and cached features; from a pack of
    them (``autorater.training.inputs.pack.Pack``, not a list of suites), the pack's."""
    if not isinstance(suites, Sequence):  # a pack: the same inputs, prepared elsewhere
        return suites.prepare(model_config, tc, progress)
    ex = build_examples(suites, aggregation=tc.aggregation)
    cfg = model_config
    if spec_of(cfg).learns_words(cfg) and not cfg.vocab:
        cfg = cfg.replace(vocab=sorted({w for t in ex.instructions for w in tokenize_words(t)}))
    if not cfg.failure_modes:
        cfg = cfg.replace(failure_modes=sorted({m for m in ex.failure_mode if m}))
    with seeded(tc.seed):  # parameter init; the data order has its own generator (train)
        model = AutoModel.from_config(cfg)
    clips = FeatureCache(tc.cache_dir).load(model, ex.video_paths, progress=progress, takeovers_s=ex.takeover_s)
    if clips.errors:
        keep = [i for i in range(len(ex)) if i not in clips.errors]
        ex = ex.subset(keep)
        clips = clips.take(keep)
    marker = marker_indices(np.array(ex.marker_s, dtype=float), clips.times_s.numpy(), clips.durations_s.numpy())
    index = {m: i for i, m in enumerate(cfg.failure_modes)}
    failure = [index.get(m, -1) if p < 0.5 else -1 for m, p in zip(ex.failure_mode, ex.p_success)]
    decisive = frozenset(c for c, m, p in zip(ex.categories, ex.failure_mode, ex.p_success)
                         if p < 0.5 and m and m != "timeout")
    return model, TrainingData(ex, clips, torch.from_numpy(marker), torch.tensor(failure, dtype=torch.long),
                               pixel_cells=cfg.pixel_cells if model.frame_encoder.raw_colours else 0, decisive=decisive,
                               groups=shared_video_groups(ex.scenario_keys, clips.hashes), processor=model.processor,
                               sources=[s.info.source for s in suites],
                               suite_names=[f"{s.info.name}@{s.info.version}" for s in suites])


def shared_video_groups(scenario_keys: Sequence[str], hashes: Sequence[str | None] | None) -> list[str]:
    """Each row's split group: its scenario, merged with every scenario that shows one of the same videos (a suite
    and its instruction swaps hold the same videos under other scenario keys)."""
    parent = {k: k for k in scenario_keys}

    def root(k):
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    first: dict[str, str] = {}
    for key, h in zip(scenario_keys, hashes or [None] * len(scenario_keys)):
        if h is not None:
            a, b = root(key), root(first.setdefault(h, key))
            if a != b:
                parent[max(a, b)] = min(a, b)
    return [root(k) for k in scenario_keys]


def mirrorable(data: TrainingData) -> bool:
    """Whether a left-right mirror of the cached inputs is the input of the mirrored video."""
    return data.clips.is_frames or data.pixel_cells > 0


def _rotate(x: torch.Tensor, k: torch.Tensor, spatial_dims: tuple[int, int]) -> torch.Tensor:
    """Rotate each clip of a batch by its own multiple of 90 degrees over the two spatial dims."""
    out = x.clone()
    for r in range(1, 4):
        rows = (k == r).nonzero().flatten()
        if len(rows):
            out[rows] = torch.rot90(x[rows], r, dims=spatial_dims)
    return out


def crop_maps(x: torch.Tensor, smallest: float, rng: np.random.Generator) -> torch.Tensor:
    """(n, t, c, h, w) feature maps -> (n, t, c, h', w'): one window of a random ``smallest``..1 of each side for the
    batch, at a random place in each clip (every frame of a clip through the same window)."""
    h, w = x.shape[-2:]
    scale = rng.uniform(smallest, 1.0)
    hh, ww = max(1, round(h * scale)), max(1, round(w * scale))
    ys, xs = rng.integers(0, h - hh + 1, len(x)), rng.integers(0, w - ww + 1, len(x))
    return torch.stack([clip[..., y:y + hh, x0:x0 + ww] for clip, y, x0 in zip(x, ys, xs)])


def _mismatch_partners(rows: np.ndarray, data: TrainingData, share: float, rng: np.random.Generator,
                       successes_only: bool = False):
    """For a share of the batch, another row of the batch whose instruction asks another task (``task_keys``: a
    paraphrase of the row's own task is never a negative), same category preferred; ``successes_only``: every
    success video of the batch, paired within its category only."""
    chosen, partners = [], []
    tasks = [data.ex.task_keys[r] for r in rows]
    cats = [data.ex.categories[r] for r in rows]
    if successes_only:
        picked = [i for i in rng.permutation(len(rows)) if data.ex.p_success[rows[i]] > 0.5]
    else:
        picked = rng.permutation(len(rows))[: int(round(share * len(rows)))]
    for i in picked:
        other = [j for j in range(len(rows)) if tasks[j] != tasks[i]]
        same = [j for j in other if cats[j] == cats[i]]
        pool = same if successes_only else (same or other)
        if pool:
            chosen.append(i)
            partners.append(pool[rng.integers(len(pool))])
    return chosen, partners


def _relaxed_rows(data: TrainingData, clip, instructions: list[str], match, idx, n_own: int, share: float,
                  rng: np.random.Generator):
    """For a share of the batch's own success rows in a category where a wrong object is a decisive failure,
    add three rows: the same video under its instruction with one colour word dropped (still a success,
    ``relax_words``); that weaker instruction on another success video of the batch that it ``contradicts``
    (a negative: a weaker instruction is never a sign of success); and the same video with one colour word
    changed (a negative: the agent acted on the other colour's object, ``recolour_one_word``)."""
    ex = data.ex
    add_rows, add_words, add_match = [], [], []
    for i in rng.permutation(n_own):
        row = int(idx[i])
        if ex.p_success[row] <= 0.5 or ex.categories[row] not in data.decisive or rng.random() >= share:
            continue
        palette = suites_palette(data)  # its colour and object words (asked only of a row it relaxes)
        weaker, changed = relax_words(instructions[i], rng, palette), recolour_one_word(instructions[i], rng, palette)
        if weaker is None:
            continue
        others = [j for j in range(n_own) if ex.p_success[int(idx[j])] > 0.5 and
                  ex.categories[int(idx[j])] == ex.categories[row] and contradicts(weaker, instructions[j], palette)]
        if not others:
            continue
        add_rows += [i, others[rng.integers(len(others))], i]
        add_words += [weaker, weaker, changed]
        add_match += [1.0, 0.0, 0.0]
    if not add_rows:
        return clip, instructions, match, idx
    return (torch.cat([clip, clip[add_rows]]), instructions + add_words,
            torch.cat([match, torch.tensor(add_match)]), torch.cat([idx, idx[add_rows]]))


@dataclass
class Batch:
    """What each row of a batch is, beside its inputs: its example (a row of the data: an added row re-uses its
    example's video), whether it pairs the video with its own instruction, and the batch's real length."""

    rows: torch.Tensor  # (n,) long: each batch row's example
    match: torch.Tensor  # (n,) 1: the video's own instruction (or a weaker one it still satisfies); 0: another's
    frames: int  # frames of the batch once its padding is cut: "end of video" is bin ``frames``


def suites_palette(data: TrainingData) -> Palette:
    """The palette of the world that made the training suites (``palette_of``: what a recolour permutes and a relaxed
    instruction names); ValueError when they have none."""
    palette = palette_of(data.sources)
    if palette is None:
        raise ValueError("recolour and relax need the palette of the suites' world (BabyAI's); these suites' worlds "
                         "have none (fix: switch augment.recolour and augment.relax off, or train on suites of a world "
                         "with a palette)")
    return palette


def make_batch(data: TrainingData, rows: np.ndarray, rng: np.random.Generator | None = None, *,
               augment: Augmentations | None = None, mismatch_share: float = 0.0,
               successes_only: bool = False) -> tuple[dict, Batch]:
    """Model inputs for ``rows`` and what each batch row is; with ``rng``, the ``augment`` augmentations (rotations,
    mirrors, recolours, crops, the weaker-instruction rows of ``relax``) and the instruction negatives: a
    ``mismatch_share`` of the rows paired with another task's instruction (``successes_only``: every success video,
    within its category). Added rows re-use their video: the inputs hold each clip once and ``clip_index`` says which
    clip each row rates (with ``rng`` only)."""
    ex, clips = data.ex, data.clips
    aug = augment if augment is not None and rng is not None else Augmentations.none()
    palette = suites_palette(data) if aug.recolour else None
    feats = clips.features[rows]
    instructions = [ex.instructions[r] for r in rows]
    match = torch.ones(len(rows))
    idx = torch.as_tensor(rows)
    clip = torch.arange(len(rows))  # row -> clip of ``feats``
    if rng is not None:
        if aug.rotate:
            dims = (2, 3) if clips.is_frames else (3, 4)
            feats = _rotate(feats, torch.from_numpy(rng.integers(0, 4, len(rows))), dims)
        flip = rng.random(len(rows)) < 0.5 if aug.mirror else np.zeros(len(rows), dtype=bool)
        feats = mirror(feats, torch.from_numpy(flip), data.pixel_cells)
        colours = [random_permutation(rng, palette) if aug.recolour and rng.random() < 0.5 else None for _ in rows]
        feats = recolour(feats, colours, data.pixel_cells, palette)
        if aug.crop and not clips.is_frames:
            feats = crop_maps(feats, aug.crop, rng)
        chosen, partners = _mismatch_partners(rows, data, mismatch_share, rng, successes_only)
        if chosen:
            clip = torch.cat([clip, clip[chosen]])
            instructions += [instructions[j] for j in partners]
            match = torch.cat([match, torch.zeros(len(chosen))])
            idx = torch.cat([idx, idx[chosen]])
            flip = np.concatenate([flip, flip[chosen]])  # a partner's words change with the video they pair
            colours += [colours[i] for i in chosen]
        instructions = [mirror_words(t) if f else t for t, f in zip(instructions, flip)]
        instructions = [recolour_words(t, c) if c else t for t, c in zip(instructions, colours)]
        if aug.relax:
            clip, instructions, match, idx = _relaxed_rows(data, clip, instructions, match, idx, len(rows),
                                                           aug.relax, rng)
    times = clips.times_s[idx]
    t = real_length(times)  # cut the padding every clip of the batch has
    feats, times = feats[:, :t], times[:, :t]
    inputs = {"times_s": times, "takeover_s": torch.tensor([ex.takeover_s[i] for i in idx.tolist()]),
              "instructions": instructions, ("frames" if clips.is_frames else "features"): feats}
    if clips.encoded:  # what else the model encodes, per clip, as it is (the processor may augment it)
        encoded = {k: v[rows] for k, v in clips.encoded.items()}
        if aug.pixels and data.processor is not None:
            encoded = data.processor.augment(encoded, rng)
        inputs["encoded"] = encoded
    if rng is not None:
        inputs["clip_index"] = clip
    return inputs, Batch(idx, match, t)


def labels(data: TrainingData, batch: Batch) -> dict:
    """What every model's loss reads of a batch's rows (``Targets``' fields): the annotators' soft P(success) (unknown
    for a video under another task's instruction), the marker's frame (bin ``frames``: the end), the failure mode and
    whether the row pairs the video with its own instruction. A part's stage may say more (its negatives, its
    weights)."""
    success = torch.tensor([data.ex.p_success[i] for i in batch.rows.tolist()], dtype=torch.float32)
    success[batch.match == 0] = float("nan")
    return {"success": success, "marker_index": data.marker_index[batch.rows].clamp(max=batch.frames),
            "failure_mode": data.failure_index[batch.rows], "match": batch.match}


def without_inputs(data: TrainingData, keys: Sequence[str]) -> TrainingData:
    """``data`` without the cached inputs under ``keys`` (a part's, when the rest of a model trains without it)."""
    encoded = {k: v for k, v in data.clips.encoded.items() if k not in keys}
    return dataclasses.replace(data, clips=dataclasses.replace(data.clips, encoded=encoded))


def subset_data(data: TrainingData, rows: np.ndarray, features: torch.Tensor | None = None) -> TrainingData:
    """``data``'s ``rows`` only (re-indexed from 0), with other ``features`` for them if given."""
    clips = dataclasses.replace(data.clips.take(rows), errors={}, hashes=None)
    if features is not None:
        clips = dataclasses.replace(clips, features=features, is_frames=False)
    return dataclasses.replace(
        data, ex=data.ex.subset(rows), marker_index=data.marker_index[rows], failure_index=data.failure_index[rows],
        groups=[data.groups[r] for r in rows] if data.groups else None, clips=clips)


@torch.no_grad()
def finished_features(model: Autorater, data: TrainingData, rows: np.ndarray, batch_size: int = 32) -> torch.Tensor:
    """(rows, t, c, h, w) float16: the frame encoder's output on cached clips (its trainable part run once, as it
    is now), for a stage that trains the head alone."""
    from autorater.model import read_frames

    encoder, clips = model.frame_encoder, data.clips
    parts = []
    for start in range(0, len(rows), batch_size):
        r = rows[start:start + batch_size]
        x = clips.features[r]
        if clips.is_frames:
            x = encoder.cacheable(x.to(model.device))
        takeover = torch.tensor([data.ex.takeover_s[i] for i in r])
        parts.append(encoder.finish(x.to(model.device), read_frames(clips.times_s[r], takeover)).to(torch.float16)
                     .cpu())
    return torch.cat(parts)


@torch.no_grad()
def predict_rows(model: Autorater, data: TrainingData, rows: np.ndarray, batch_size: int = 64) -> dict[str, np.ndarray]:
    """Model outputs for cached rows (no augmentation, each video with its own instruction)."""
    from autorater.predict import predict_batch

    parts = []
    for start in range(0, len(rows), batch_size):
        r = rows[start:start + batch_size]
        inputs, _ = make_batch(data, r)
        parts.append(predict_batch(model, durations_s=data.clips.durations_s[r].tolist(),
                                   takeovers_s=inputs.pop("takeover_s").tolist(), **inputs))
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


__all__ = ["Batch", "InputSettings", "TrainingData", "crop_maps", "finished_features", "labels", "make_batch",
           "mirrorable", "predict_rows", "prepare", "seeded", "shared_video_groups", "subset_data", "without_inputs"]
