"""The training loop: cached encoder features in, a trained Autorater folder out.

Read top to bottom: ``prepare`` (labels, vocabulary, features), ``make_batch`` (targets, instruction
mismatch negatives, rotations), ``run_epoch``, ``validate``, ``train`` (early stopping on validation
balanced accuracy). Randomness comes from ``TrainConfig.seed``; library code never prints or starts
MLflow runs: metrics go to the ``log`` callback.

Example:
    >>> result = train([Suite.load("suite")], PRESETS["babyai-grid"], TrainConfig(), out="model")  # doctest: +SKIP
    >>> result.best["val_balanced_accuracy"]                                                # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from autorater.config import AutoraterConfig
from autorater.encoders import tokenize_words
from autorater.model import Autorater, Targets, resolve_device
from autorater.models import EventsRater
from autorater.predict import real_length
from calibration import marker_metrics, outcome_metrics
from data.splits import split_groups
from data.suite import Suite
from data.worlds import world_of
from training.augment import (
    contradicts,
    mirror,
    mirror_words,
    random_permutation,
    recolour,
    recolour_one_word,
    recolour_words,
    relax_words,
)
from training.cache import CachedClips, FeatureCache
from training.dataset import Examples, build_examples, marker_indices


@dataclass
class TrainConfig:
    """The training recipe. Defaults are the real recipe."""

    epochs: int = 22
    batch_size: int = 16
    lr: float = 2e-3
    encoder_lr: float = 3e-4  # the frame encoder's trainable blocks (pretrained: a smaller step than the head's)
    weight_decay: float = 0.02
    warmup_steps: int = 50
    patience: int = 8  # epochs without a better validation balanced accuracy before stopping
    min_steps: int = 0  # at least this many optimiser steps: a small training set gets proportionally more epochs
    #                     (and patience and match warm-up epochs), so that a model trained on 500 labels is not
    #                     also trained for a quarter of the steps (active learning; README). 0: epochs as given
    val_share: float = 0.15  # share of scenarios held out for early stopping
    aggregation: str = "dawid_skene"  # or "majority"
    mismatch_share: float = 0.5  # extra rows per batch pairing a video with another scenario's instruction
    success_negatives: bool = True  # also train P(success) on the mismatch rows (see make_batch): the events
    # model's "counterfactual" loss. (On the transformer, measured on 2,000 continuations, it stalled training at
    # chance: its success loss could not drop before it grounded the instruction, which it never did.)
    match_on_successes: bool = True  # the instruction-match task on success videos only, every one paired with
    #                                  another instruction of its category (the grounding probe's task): a failed
    #                                  video shows nothing that tells its own instruction from another
    negative_label: float = 0.05  # success target of a success video under another scenario's instruction
    success_weight: float = 1.0  # events: the event likelihood (outcome, marker and failure mode in one)
    marker_weight: float = 0.5  # transformer only
    failure_weight: float = 0.2  # transformer only
    match_weight: float = 1.0
    counterfactual_weight: float = 0.3  # events: P(success) of a success video under another instruction
    match_warmup_epochs: int = 15  # events: epochs training the instruction match alone first (on success videos,
    #                                own instruction vs another of its category); without it the match is still near
    #                                chance after 12 epochs of joint training (README, "The model")
    rotate: bool = True  # random 90-degree rotations of the top-down view, applied only when every training
    #                      suite declares it (``top_down``): a first-person frame has one orientation (the agent at
    #                      the bottom, facing up)
    mirror: bool = True  # mirror half the clips left-right and swap "left"/"right" in their instructions: the same
    #                      episode in a mirrored world, with the same outcome and marker. Needs inputs a mirror
    #                      maps exactly (decoded frames or "pixels" cells); other encoders' features skip it
    recolour: bool = False  # permute the objects' colours (green, blue, purple, yellow) in half the clips and in
    #                        their instructions; MiniGrid's palette (training/augment.py): only for suites from the
    #                        generator (``generated``), and with inputs a mirror may use
    relax: float = 0.5  # share of the success clips of a batch also shown under their instruction with one colour
    #                     word dropped ("pick up the ball": asks for less, still a success), with two negatives
    #                     (that instruction on a video of another object; the clip with a colour word changed);
    #                     categories where a wrong object is a failure only (not go_to); generated suites only
    #                     (MiniGrid's colour words). Without it a colourless instruction reads as a weak match
    ema: float = 0.995  # decay per step of an exponential moving average of the trainable weights (Polyak
    #                     averaging, ~2 epochs of 2,000 clips); validation, early stopping and the saved model use
    #                     the average. 0: off
    init_from: str = ""  # a model folder whose weights start training (a second stage; fine-tuning)
    train_only: list[str] = field(default_factory=list)  # parameter-name prefixes to train ("verifier."); the
    #                       rest stays as initialised; empty: train everything. Two stages: train the default
    #                       model, then --init-from it with cell_verify on and train_only ["verifier."]
    seed: int = 0
    cache_dir: str = "runs/cache"
    device: str = "auto"  # where training runs: "auto" (CUDA when a GPU is present, else the CPU), "cpu", "cuda"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        if set(d) - names:
            raise ValueError(f"unknown TrainConfig field(s) {sorted(set(d) - names)}; known: {sorted(names)}")
        return cls(**d)


@dataclass
class TrainResult:
    model: Autorater
    history: list[dict] = field(default_factory=list)
    best: dict = field(default_factory=dict)
    wall_s: float = 0.0
    n_train: int = 0
    n_val: int = 0


@dataclass
class TrainingData:
    """What the training loop reads: the examples, their cached clips and the label indices.

    ``prepare`` builds it from suites; the baselines build their own from a suite or a cache.
    """

    ex: Examples
    clips: CachedClips
    marker_index: torch.Tensor  # (n,) long
    failure_index: torch.Tensor  # (n,) long
    pixel_cells: int = 0  # > 0: ``clips.features`` are "pixels" cells on a k x k sub-grid (training/augment.py)
    decisive: frozenset = frozenset()  # categories whose labelled failures include an early mistake (not only
    #                                    timeouts): acting on a wrong object ends the episode there
    groups: list[str] | None = None  # split groups: scenarios that share a video (a suite and its instruction
    #                                  swaps) are one group, so validation never sees a training video


# ----------------------------------------------------------------------------------------------


@contextlib.contextmanager
def seeded(seed: int):
    """Torch's default generators seeded with ``seed`` for the block, then put back as they were: parameter init
    and dropout draw from them, so a run is reproducible and leaves the caller's random state untouched."""
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


def prepare(suites: Sequence[Suite], model_config: AutoraterConfig, tc: TrainConfig,
            progress: bool = False) -> tuple[Autorater, TrainingData]:
    """Labels from the annotations, the vocabulary and failure modes, the model, and cached features."""
    ex = build_examples(suites, aggregation=tc.aggregation)
    cfg = model_config
    if hasattr(cfg, "vocab") and not cfg.vocab and (cfg.text_encoder == "bow" or getattr(cfg, "verify_words", False)
                                                    or cfg.architecture == "events"):
        cfg = cfg.replace(vocab=sorted({w for t in ex.instructions for w in tokenize_words(t)}))
    if not cfg.failure_modes:
        cfg = cfg.replace(failure_modes=sorted({m for m in ex.failure_mode if m}))
    with seeded(tc.seed):  # parameter init; the data order has its own generator (train)
        model = Autorater(cfg)
    clips = FeatureCache(tc.cache_dir).load(model, ex.video_paths, progress=progress, takeovers_s=ex.takeover_s)
    if clips.errors:
        keep = [i for i in range(len(ex)) if i not in clips.errors]
        ex = ex.subset(keep)
        clips = CachedClips(clips.features[keep], clips.times_s[keep], clips.durations_s[keep], clips.is_frames, {},
                            [clips.hashes[i] for i in keep] if clips.hashes else None)
    marker = marker_indices(np.array(ex.marker_s, dtype=float), clips.times_s.numpy(), clips.durations_s.numpy())
    index = {m: i for i, m in enumerate(cfg.failure_modes)}
    failure = [index.get(m, -1) if p < 0.5 else -1 for m, p in zip(ex.failure_mode, ex.p_success)]
    decisive = frozenset(c for c, m, p in zip(ex.categories, ex.failure_mode, ex.p_success)
                         if p < 0.5 and m and m != "timeout")
    return model, TrainingData(ex, clips, torch.from_numpy(marker), torch.tensor(failure, dtype=torch.long),
                        pixel_cells=cfg.pixel_cells if cfg.encoder == "pixels" else 0, decisive=decisive,
                        groups=shared_video_groups(ex.scenario_keys, clips.hashes))


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
        weaker, changed = relax_words(instructions[i], rng), recolour_one_word(instructions[i], rng)
        if weaker is None:
            continue
        others = [j for j in range(n_own) if ex.p_success[int(idx[j])] > 0.5 and
                  ex.categories[int(idx[j])] == ex.categories[row] and contradicts(weaker, instructions[j])]
        if not others:
            continue
        add_rows += [i, others[rng.integers(len(others))], i]
        add_words += [weaker, weaker, changed]
        add_match += [1.0, 0.0, 0.0]
    if not add_rows:
        return clip, instructions, match, idx
    return (torch.cat([clip, clip[add_rows]]), instructions + add_words,
            torch.cat([match, torch.tensor(add_match)]), torch.cat([idx, idx[add_rows]]))


def make_batch(data: TrainingData, rows: np.ndarray, tc: TrainConfig, rng: np.random.Generator | None):
    """Model inputs and targets for ``rows``; with ``rng``, add mismatch negatives, rotations, mirrors, recolours
    and the weaker-instruction rows (``TrainConfig.relax``). Added rows re-use their video: the inputs hold each
    clip once and ``clip_index`` says which clip each row rates (with ``rng`` only)."""
    ex, clips = data.ex, data.clips
    feats = clips.features[rows]
    instructions = [ex.instructions[r] for r in rows]
    match = torch.ones(len(rows))
    idx = torch.as_tensor(rows)
    clip = torch.arange(len(rows))  # row -> clip of ``feats``
    if rng is not None:
        if tc.rotate:
            dims = (2, 3) if clips.is_frames else (3, 4)
            feats = _rotate(feats, torch.from_numpy(rng.integers(0, 4, len(rows))), dims)
        flip = rng.random(len(rows)) < 0.5 if tc.mirror else np.zeros(len(rows), dtype=bool)
        feats = mirror(feats, torch.from_numpy(flip), data.pixel_cells)
        colours = [random_permutation(rng) if tc.recolour and rng.random() < 0.5 else None for _ in rows]
        feats = recolour(feats, colours, data.pixel_cells)
        chosen, partners = _mismatch_partners(rows, data, tc.mismatch_share, rng, tc.match_on_successes)
        if chosen:
            clip = torch.cat([clip, clip[chosen]])
            instructions += [instructions[j] for j in partners]
            match = torch.cat([match, torch.zeros(len(chosen))])
            idx = torch.cat([idx, idx[chosen]])
            flip = np.concatenate([flip, flip[chosen]])  # a partner's words change with the video they pair
            colours += [colours[i] for i in chosen]
        instructions = [mirror_words(t) if f else t for t, f in zip(instructions, flip)]
        instructions = [recolour_words(t, c) if c else t for t, c in zip(instructions, colours)]
        if tc.relax:
            clip, instructions, match, idx = _relaxed_rows(data, clip, instructions, match, idx, len(rows),
                                                           tc.relax, rng)
    success = torch.tensor([ex.p_success[i] for i in idx.tolist()], dtype=torch.float32)
    # A success video paired with another task's instruction is (almost surely) a failure of that
    # instruction: the agent succeeded at *its* task, not this one. These free counterfactuals teach the
    # success head to read the instruction. A failure video's label under another instruction is unknown.
    swapped = match == 0
    negative = torch.full_like(success[swapped], tc.negative_label if tc.success_negatives else float("nan"))
    success[swapped] = torch.where(success[swapped] > 0.5, negative, torch.full_like(negative, float("nan")))
    if tc.match_on_successes:  # own vs other is only told on a video that shows the instructed outcome
        shown = torch.tensor([ex.p_success[i] > 0.5 for i in idx.tolist()])
        match = torch.where(shown, match, torch.full_like(match, float("nan")))
    times = clips.times_s[idx]
    t = real_length(times)  # cut the padding every clip of the batch has
    marker_index = data.marker_index[idx].clamp(max=t)  # "end of video" is bin t
    feats, times = feats[:, :t], times[:, :t]
    targets = Targets(success=success,
                      marker_index=marker_index, failure_mode=data.failure_index[idx], match=match,
                      weights=(tc.success_weight, tc.marker_weight, tc.failure_weight, tc.match_weight,
                               tc.counterfactual_weight))
    inputs = {"times_s": times, "takeover_s": torch.tensor([ex.takeover_s[i] for i in idx.tolist()]),
              "instructions": instructions, ("frames" if clips.is_frames else "features"): feats}
    if rng is not None:
        inputs["clip_index"] = clip
    return inputs, targets


class WeightAverage:
    """An exponential moving average of a model's trainable weights, updated after every optimiser step.

    Debiased like Adam's moments: the sum starts at zero and is divided by ``1 - decay ** steps``, so the
    average weighs the steps taken only, never the starting weights (a short fine-tuning run is not
    pulled back to where it began). ``swapped_in()`` puts the average into the model for a while
    (validation, saving) and the live weights back after. Parameters only: the models here keep no
    running statistics (no batch norm in the trained parts).
    """

    def __init__(self, model: torch.nn.Module, decay: float):
        if not 0.0 < decay < 1.0:
            raise ValueError(f"ema decay must be in (0, 1), got {decay}")
        self.decay, self.steps = decay, 0
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.total = [torch.zeros_like(p) for p in self.params]

    @torch.no_grad()
    def update(self) -> None:
        self.steps += 1
        for t, p in zip(self.total, self.params):
            t.lerp_(p.detach(), 1.0 - self.decay)

    @contextlib.contextmanager
    def swapped_in(self):
        if not self.steps:  # nothing averaged yet: the live weights are the average
            yield
            return
        live = [p.detach().clone() for p in self.params]
        with torch.no_grad():
            for p, t in zip(self.params, self.total):
                p.copy_(t / (1.0 - self.decay ** self.steps))
        try:
            yield
        finally:
            with torch.no_grad():
                for p, v in zip(self.params, live):
                    p.copy_(v)


def run_epoch(model: Autorater, data: TrainingData, rows: np.ndarray, tc: TrainConfig, opt, sched,
              rng: np.random.Generator, average: WeightAverage | None = None) -> dict:
    """One pass over ``rows``; the mean losses and ``train_balanced_accuracy``: the live model's outcome on each
    row's own clip and instruction as it was trained (augmented, dropout on), beside validation's to tell
    memorisation from a shortcut that holds out of sample too."""
    model.train()
    totals: dict[str, float] = {}
    order = rng.permutation(rows)
    n_batches = 0
    said, truth = [], []
    for start in range(0, len(order), tc.batch_size):
        batch = order[start:start + tc.batch_size]
        inputs, targets = make_batch(data, batch, tc, rng)
        out = model(**inputs, targets=targets)
        opt.zero_grad(set_to_none=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if average is not None:
            average.update()
        n_batches += 1
        for k, v in {"loss": out.loss, **out.losses}.items():
            totals[k] = totals.get(k, 0.0) + float(v.detach())
        said += (out.success_logit[:len(batch)].detach().cpu() >= 0).tolist()  # own rows come first
        truth += [data.ex.p_success[r] > 0.5 for r in batch]
    metrics = {f"train_{k}": v / max(1, n_batches) for k, v in totals.items()}
    metrics["train_balanced_accuracy"] = outcome_metrics(np.array(truth, int), np.array(said, int))[
        "balanced_accuracy"]
    return metrics


def subset_data(data: TrainingData, rows: np.ndarray, features: torch.Tensor | None = None) -> TrainingData:
    """``data``'s ``rows`` only (re-indexed from 0), with other ``features`` for them if given."""
    clips = data.clips
    return dataclasses.replace(
        data, ex=data.ex.subset(rows), marker_index=data.marker_index[rows], failure_index=data.failure_index[rows],
        groups=[data.groups[r] for r in rows] if data.groups else None,
        clips=CachedClips(clips.features[rows] if features is None else features, clips.times_s[rows],
                          clips.durations_s[rows], clips.is_frames and features is None, {}))


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


def warm_up_match(model: Autorater, data: TrainingData, rows: np.ndarray, tc: TrainConfig, rng: np.random.Generator,
                  progress: bool = False, batch_size: int = 48, lr: float = 3e-3) -> list[float]:
    """Events: train the instruction match (each head's ``match``) alone on the success videos, own instruction
    against another of its category around the annotators' marker; returns the mean match loss per epoch. The
    frame encoder does not train here: its output on those videos is computed once."""
    from autorater.events import active_frames, marker_window, match_loss

    heads = model.event_heads
    opt = torch.optim.Adam([p for head in heads for p in head.match.parameters()], lr=lr)
    successes = np.array([r for r in rows if data.ex.p_success[r] > 0.5], dtype=np.int64)
    if not model.frame_encoder.frozen:
        data = subset_data(data, successes, finished_features(model, data, successes))
        successes = np.arange(len(successes))
    pairs = dataclasses.replace(tc, match_on_successes=True)
    epochs = range(tc.match_warmup_epochs)
    if progress:
        from tqdm import tqdm
        epochs = tqdm(epochs, desc="instruction match warm-up", unit="epoch")
    history = []
    model.train()
    for _ in epochs:
        total, n = 0.0, 0
        order = rng.permutation(successes)
        for start in range(0, len(order), batch_size):
            inputs, targets = make_batch(data, order[start:start + batch_size], pairs, rng)
            device = model.device
            features = inputs["features"].to(device)[inputs["clip_index"].to(device)].float()
            times_s, match = inputs["times_s"].to(device), targets.match.to(device)
            active = active_frames(times_s, inputs["takeover_s"].to(device))
            win = marker_window(times_s, targets.marker_index.to(device), active)
            loss = sum(match_loss(model.match_score(head, features, inputs["instructions"], active), win,
                                  own=match == 1, other=match == 0) for head in heads) / len(heads)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total, n = total + float(loss.detach()), n + 1
        history.append(total / max(1, n))
        if progress:
            epochs.set_postfix(match_loss=f"{history[-1]:.3f}")
    model.zero_grad(set_to_none=True)
    return history


@torch.no_grad()
def predict_rows(model: Autorater, data: TrainingData, rows: np.ndarray, batch_size: int = 64) -> dict[str, np.ndarray]:
    """Model outputs for cached rows (no augmentation, each video with its own instruction)."""
    from autorater.predict import predict_batch

    parts = []
    for start in range(0, len(rows), batch_size):
        r = rows[start:start + batch_size]
        inputs, _ = make_batch(data, r, TrainConfig(), None)
        parts.append(predict_batch(model, durations_s=data.clips.durations_s[r].tolist(),
                                   takeovers_s=inputs.pop("takeover_s").tolist(), **inputs))
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def validate(model: Autorater, data: TrainingData, rows: np.ndarray) -> dict:
    """Validation metrics against the aggregated labels of held-out scenarios."""
    pred = predict_rows(model, data, rows)
    y = np.array([data.ex.p_success[r] for r in rows]) > 0.5
    yhat = pred["p_success"] >= 0.5
    m = outcome_metrics(y.astype(int), yhat.astype(int))
    truth_marker = np.array([data.ex.marker_s[r] for r in rows])
    both = y & yhat
    mk = marker_metrics(truth_marker[both], pred["marker_s"][both])
    return {"val_balanced_accuracy": m["balanced_accuracy"], "val_accuracy": m["accuracy"],
            "val_marker_median_abs_error_s": mk["median_abs_error_s"]}


def train(suites: Sequence[Suite], model_config: AutoraterConfig, tc: TrainConfig | None = None,
          out: str | Path | None = None, log: Callable[[int, dict], None] | None = None,
          progress: bool = False, prepared: tuple[Autorater, TrainingData] | None = None,
          should_stop: Callable[[int, dict], bool] | None = None,
          init_state: dict | None = None) -> TrainResult:
    """Train an Autorater on the annotations of ``suites``; keep the epoch with the best validation BA.

    Args:
        suites: training suites (their reference episodes are left out).
        model_config: the architecture.
        tc: the recipe.
        out: write the best model folder here.
        log: called as ``log(epoch, metrics)`` after every epoch (MLflow, Optuna...).
        progress: show progress bars.
        prepared: re-use ``prepare``'s output (tuning trials share one feature cache in memory).
        should_stop: called after every epoch; True stops (Optuna pruning).
        init_state: start from these trainable weights (``Autorater.trainable_state_dict()`` of a model
            with the same ``model_config``): fine-tuning a champion on new labels.
    """
    tc = tc or TrainConfig()
    with seeded(tc.seed):
        return _train(suites, model_config, tc, out, log, progress, prepared, should_stop, init_state)


def _train(suites: Sequence[Suite], model_config: AutoraterConfig, tc: TrainConfig, out: str | Path | None,
           log: Callable[[int, dict], None] | None, progress: bool, prepared: tuple[Autorater, TrainingData] | None,
           should_stop: Callable[[int, dict], bool] | None, init_state: dict | None) -> TrainResult:
    if tc.rotate and not top_down(suites):  # the saved recipe says what was done
        tc = dataclasses.replace(tc, rotate=False)
    start = time.time()
    model, data = prepared if prepared is not None else prepare(suites, model_config, tc, progress)
    if tc.mirror and not mirrorable(data):
        tc = dataclasses.replace(tc, mirror=False)
    if tc.recolour and not (mirrorable(data) and generated(suites)):
        tc = dataclasses.replace(tc, recolour=False)
    if tc.relax and not generated(suites):
        tc = dataclasses.replace(tc, relax=0.0)
    if prepared is not None:  # a fresh model with this trial's architecture, same cached inputs
        torch.manual_seed(tc.seed)
        learned = {k: getattr(model.config, k) for k in ("vocab", "failure_modes") if hasattr(model_config, k)}
        model = Autorater(model_config.replace(**learned))
    if init_state is None and tc.init_from:
        init_state = load_init_state(tc.init_from, model.config)
    if init_state is not None:
        # Weights the start lacks are allowed only where this run trains them from scratch (a new module).
        missing = {k for k in set(model.trainable_state_dict()) - set(init_state)
                   if not any(k.startswith(p) for p in tc.train_only)}
        if missing:
            raise ValueError(f"the starting weights do not fit this architecture (missing {sorted(missing)[:3]}); "
                             f"fine-tune with the starting model's own config, train the new parts with "
                             f"train_only, or retrain")
        model.load_state_dict(init_state, strict=False)
    model.to(resolve_device(tc.device))  # features are cached on the CPU; each batch moves with the forward pass
    train_rows, val_rows = split_groups(data.groups or data.ex.scenario_keys, tc.val_share, tc.seed)
    tc = with_min_steps(tc, len(train_rows))
    fresh_events = isinstance(model, EventsRater) and init_state is None
    if fresh_events and model.config.architecture == "events":  # the grid's learned places start from the data
        with torch.no_grad():
            heads = model.event_heads  # the members differ by the prior's noise and their init
            priors = place_priors(data, train_rows, model.config.places, [tc.seed + k for k in range(len(heads))])
            for head, prior in zip(heads, priors):
                head.match.where.copy_(prior)
    params = trainable_parameters(model, tc.train_only)
    encoder = {id(p) for p in model.frame_encoder.parameters()}
    groups = [{"params": [p for p in params if id(p) not in encoder]},
              {"params": [p for p in params if id(p) in encoder], "lr": tc.encoder_lr}]  # a pretrained part: smaller
    opt = torch.optim.AdamW([g for g in groups if g["params"]], lr=tc.lr, weight_decay=tc.weight_decay)
    steps = tc.epochs * int(np.ceil(len(train_rows) / tc.batch_size))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / tc.warmup_steps) * 0.5 * (1 + np.cos(np.pi * min(1.0, s / max(1, steps)))))
    rng = np.random.default_rng(tc.seed)
    if fresh_events and model.config.use_instruction and tc.match_warmup_epochs and tc.match_weight > 0:
        warm_up_match(model, data, train_rows, tc, rng, progress)
    result = TrainResult(model=model, n_train=len(train_rows), n_val=len(val_rows))
    average = WeightAverage(model, tc.ema) if tc.ema else None
    best, best_state, bad_epochs = None, None, 0
    epochs = range(1, tc.epochs + 1)
    if progress:
        from tqdm import tqdm
        epochs = tqdm(epochs, desc="training", unit="epoch")
    for epoch in epochs:
        metrics = run_epoch(model, data, train_rows, tc, opt, sched, rng, average)
        with average.swapped_in() if average else contextlib.nullcontext():  # the average is what is kept
            metrics.update(validate(model, data, val_rows), epoch=epoch)
            if best is None or metrics["val_balanced_accuracy"] > best["val_balanced_accuracy"]:
                best, best_state, bad_epochs = metrics, copy.deepcopy(model.state_dict()), 0
            else:
                bad_epochs += 1
        result.history.append(metrics)
        if log is not None:
            log(epoch, metrics)
        if progress:
            epochs.set_postfix(loss=f"{metrics['train_loss']:.3f}", val_ba=f"{metrics['val_balanced_accuracy']:.3f}")
        if bad_epochs >= tc.patience or (should_stop is not None and should_stop(epoch, metrics)):
            break
    model.load_state_dict(best_state)
    model.eval()
    result.best = dict(best)
    result.wall_s = time.time() - start
    if out is not None:
        model.save_pretrained(out, metadata={"train_config": tc.to_dict(), "best": result.best,
                                             "n_train": result.n_train, "n_val": result.n_val,
                                             "train_suites": [f"{s.info.name}@{s.info.version}" for s in suites],
                                             "wall_s": round(result.wall_s, 1)})
    return result


def with_min_steps(tc: TrainConfig, n_train: int) -> TrainConfig:
    """``tc`` with its epochs, patience and match warm-up epochs scaled up by one factor so that training takes at
    least ``tc.min_steps`` optimiser steps on ``n_train`` rows; unchanged when it already does (or min_steps is 0)."""
    planned = tc.epochs * int(np.ceil(n_train / tc.batch_size))
    if not tc.min_steps or planned >= tc.min_steps:
        return tc
    scale = tc.min_steps / max(1, planned)
    return dataclasses.replace(tc, epochs=int(np.ceil(tc.epochs * scale)), patience=int(np.ceil(tc.patience * scale)),
                               match_warmup_epochs=int(np.ceil(tc.match_warmup_epochs * scale)))


def place_prior(data: TrainingData, rows: np.ndarray, places: int, seed: int = 0) -> torch.Tensor:
    """:func:`place_priors` for one head."""
    return place_priors(data, rows, places, [seed])[0]


def place_priors(data: TrainingData, rows: np.ndarray, places: int, seeds: Sequence[int]) -> list[torch.Tensor]:
    """Starting logits of the events model's places (places, cells): Gaussians of widths 0.75-2 cells around the
    cell whose content changes most, relative to the rest of the clip, around the annotators' success markers;
    one tensor per seed (the heads of an ensemble differ by the noise; the change is measured once).

    In first-person video that is where the agent acts (the object picked up appears under it). From a uniform
    or random start the places took hundreds of steps to find it, the instruction match staying at chance
    meanwhile (README, "The model"); started here, the match learns from the first epochs.
    """
    from autorater.events import WINDOW_S

    feats, times = data.clips.features, data.clips.times_s
    h, w = feats.shape[-2:]
    hit, rest = torch.zeros(h * w), torch.zeros(h * w)
    n_hit = n_rest = 0
    for r in rows:
        k = int(data.marker_index[r])
        if data.ex.p_success[r] <= 0.5 or not 0 <= k < times.shape[1]:
            continue
        change = (feats[r, 1:].float() - feats[r, :-1].float()).abs().mean(1).flatten(1)  # (t - 1, cells)
        t = times[r, 1:]
        fresh = (t > times[r, :-1]) & (t >= data.ex.takeover_s[r])  # not a repeated frame, after the takeover
        near = fresh & (t >= times[r, k] - WINDOW_S[0]) & (t <= times[r, k] + WINDOW_S[1])
        hit += change[near].sum(0)
        rest += change[fresh & ~near].sum(0)
        n_hit, n_rest = n_hit + int(near.sum()), n_rest + int((fresh & ~near).sum())
    noise = [0.1 * torch.randn(places, h * w, generator=torch.Generator().manual_seed(s)) for s in seeds]
    if not n_hit or not n_rest:
        return noise
    ratio = (hit / n_hit) / (rest / n_rest).clamp(min=1e-6)
    cy, cx = divmod(int(ratio.argmax()), w)
    yy, xx = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    d2 = ((yy - cy) ** 2 + (xx - cx) ** 2).flatten().float()
    widths = torch.linspace(0.75, 2.0, places)[:, None]
    return [-d2[None] / (2 * widths ** 2) + n for n in noise]


def top_down(suites: Sequence[Suite]) -> bool:
    """Whether every suite declares the generator's top-down view (``source.view == "full"`` in suite.json).

    Rotating a top-down frame gives another valid scene; rotating a first-person one (the agent at the
    bottom, facing up) gives a view the model never meets. A suite that does not say (another tool's,
    real STS video) is taken as first-person.
    """
    return bool(suites) and all((s.info.source or {}).get("view") == "full" for s in suites)


def generated(suites: Sequence[Suite]) -> bool:
    """Whether every suite declares the generator's BabyAI world (MiniGrid's renderer and palette), which the
    BabyAI-only augmentations (recolour, relax) assume."""
    return bool(suites) and all(world_of(s.info.source) == "babyai" for s in suites)


def trainable_parameters(model: Autorater, train_only: Sequence[str]) -> list[torch.nn.Parameter]:
    """The parameters to optimise: all trainable ones, or those whose name starts with a ``train_only`` prefix
    (the others are frozen: ``requires_grad`` off). An unmatched prefix is an error, not a silent no-op."""
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if not train_only:
        return [p for _, p in named]
    for prefix in train_only:
        if not any(n.startswith(prefix) for n, _ in named):
            heads = sorted({n.split(".")[0] + "." for n, _ in named})
            raise ValueError(f"train_only prefix {prefix!r} matches no trainable parameter; top-level modules: "
                             f"{', '.join(heads)}")
    keep = []
    for name, p in named:
        p.requires_grad_(any(name.startswith(prefix) for prefix in train_only))
        if p.requires_grad:
            keep.append(p)
    return keep


def load_init_state(folder: str | Path, config: AutoraterConfig) -> dict[str, torch.Tensor]:
    """The trainable weights of a saved model folder, checked against ``config`` (same encoders, words and
    failure modes; other fields may differ, e.g. a new module to train)."""
    from safetensors.torch import load_file

    folder = Autorater.check_folder(folder)
    start = AutoraterConfig.load(folder / "config.json")
    for key in ("architecture", "encoder", "encoder_stage", "pixel_cells", "grid_size", "image_size", "num_frames",
                "text_encoder", "vocab", "places", "place_inputs", "members", "queries", "hidden",
                "failure_modes", "hidden_size", "spatial_size", "grounding"):
        if key == "vocab" and not getattr(start, "vocab", None):  # the start reads no learned words
            continue
        if getattr(start, key, None) != getattr(config, key, None):
            raise ValueError(f"init_from {folder}: its {key} ({getattr(start, key)!r:.60}) differs from this run's "
                             f"({getattr(config, key)!r:.60}); start from a model trained on the same data with "
                             f"the same encoders, or train from scratch")
    return load_file(str(folder / "model.safetensors"))


def load_config_file(path: str | Path | None) -> tuple[AutoraterConfig, TrainConfig]:
    """``{"preset": "general", "model": {...}, "train": {...}}`` -> the two configs (all keys optional; the preset
    defaults to ``DEFAULT_PRESET``, the general model)."""
    from autorater.models import DEFAULT_PRESET, PRESETS

    if path is None:
        return PRESETS[DEFAULT_PRESET], TrainConfig()
    try:
        d = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"cannot read config file {path}: {err}") from None
    unknown = set(d) - {"preset", "model", "train"}
    if unknown:
        raise ValueError(f"{path}: unknown top-level key(s) {sorted(unknown)}; use preset, model, train")
    preset = d.get("preset", DEFAULT_PRESET)
    if preset not in PRESETS:
        raise ValueError(f"{path}: unknown preset {preset!r}; known: {sorted(PRESETS)}")
    start = PRESETS[preset].to_dict()
    if d.get("model", {}).get("architecture", start["architecture"]) != start["architecture"]:
        start = {}  # another architecture than the preset's: its own defaults
    model = AutoraterConfig.from_dict({**start, **d.get("model", {})})
    return model, TrainConfig.from_dict(d.get("train", {}))
