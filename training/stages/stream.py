"""The event stream's stage (its part: ``EventStream``, every frame, the marker): the instruction match warmed up
alone, then the stream trained in the joint step (``stages/joint.py``), where this stage pairs the batch's videos with
other instructions and says the stream's targets.

Its recipe (``TrainConfig.stream``, :class:`StreamRecipe`): the instruction pairs of a batch, the stream's losses and
the match warm-up. Without the warm-up the match is still near chance after 12 epochs of joint training (README, "The
model"): on the success videos, each with its own instruction and another of its category, the heads' match alone
(:class:`MatchWarmUp`) for ``match_warmup_epochs`` at a constant step.

Example:
    >>> StreamRecipe().warm_up_schedule().lr, StreamStage(StreamRecipe(), "stream").pairs()["successes_only"]
    (0.003, True)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from autorater.model import Autorater
from autorater.models.parts.risks import active_frames, marker_window, match_loss
from autorater.training.inputs.augment import Augmentations
from autorater.training.inputs.batches import Batch, TrainingData, finished_features, labels, make_batch, subset_data
from autorater.training.loop import Schedule, fit
from autorater.training.stages.base import PartStage, Run


@dataclass
class StreamRecipe:
    """The event stream's recipe (``TrainConfig.stream``): its batches' instruction pairs, its losses and its match
    warm-up."""

    ranges: ClassVar[dict[str, tuple[float, float]]] = {  # a recipe file's numbers are checked (TrainConfig.check)
        "negative_label": (0, 1), "match_warmup_epochs": (0, 10_000), "match_warmup_lr": (1e-9, 10),
        "match_warmup_batch_size": (1, 4096)}

    mismatch_share: float = 0.5  # extra rows per batch pairing a video with another scenario's instruction
    success_negatives: bool = True  # also train P(success) on the mismatch rows (``stream_targets``: a success video
    #                                 under another task's instruction is labelled ``negative_label``): the stream's
    #                                 counterfactual loss, weighed by ``counterfactual_weight``
    match_on_successes: bool = True  # the instruction-match task on success videos only, every one paired with
    #                                  another instruction of its category (the grounding probe's task): a failed
    #                                  video shows nothing that tells its own instruction from another
    negative_label: float = 0.05  # success target of a success video under another scenario's instruction
    success_weight: float = 1.0  # the event likelihood (outcome, marker and failure mode in one)
    match_weight: float = 1.0
    counterfactual_weight: float = 0.3  # P(success) of a success video under another instruction
    balance_classes: bool = False  # successes and failures weigh the same in each batch's event loss
    match_warmup_epochs: int = 15  # epochs training the instruction match alone first (on success videos, own
    #                                instruction vs another of its category); without it the match is still near
    #                                chance after 12 epochs of joint training (README, "The model")
    match_warmup_lr: float = 3e-3  # the warm-up's step (Adam-like, constant, no weight decay)
    match_warmup_batch_size: int = 48

    def warm_up_schedule(self) -> Schedule:
        """The match warm-up's: ``match_warmup_epochs`` at a constant step, no decay, no clipping, no validation."""
        return Schedule(epochs=self.match_warmup_epochs, batch_size=self.match_warmup_batch_size,
                        lr=self.match_warmup_lr, weight_decay=0.0, warmup_steps=0, cosine=False, patience=None,
                        clip=None)


def stream_targets(data: TrainingData, batch: Batch, recipe: StreamRecipe) -> dict:
    """The stream's ``Targets`` fields of a batch: the rows' labels (``labels``), a success video under another
    task's instruction labelled ``negative_label`` (almost surely a failure of that instruction; a failure video's
    label under another instruction stays unknown), the match unknown on a failure video (``match_on_successes``),
    and the loss weights."""
    out = labels(data, batch)
    p_success = torch.tensor([data.ex.p_success[i] for i in batch.rows.tolist()], dtype=torch.float32)
    # These free counterfactuals teach the success head to read the instruction: the agent succeeded at *its* task.
    swapped = batch.match == 0
    negative = torch.full_like(p_success[swapped], recipe.negative_label if recipe.success_negatives else float("nan"))
    out["success"][swapped] = torch.where(p_success[swapped] > 0.5, negative, torch.full_like(negative, float("nan")))
    if recipe.match_on_successes:  # own vs other is only told on a video that shows the instructed outcome
        shown = torch.tensor([data.ex.p_success[i] > 0.5 for i in batch.rows.tolist()])
        out["match"] = torch.where(shown, batch.match, torch.full_like(batch.match, float("nan")))
    return {**out, "weights": (recipe.success_weight, recipe.match_weight, recipe.counterfactual_weight),
            "balanced": recipe.balance_classes}


class MatchWarmUp:
    """The event stream's instruction match alone (each head's ``match``), for :func:`fit`: on the success videos,
    own instruction against another of its category around the annotators' marker; no validation. The frame
    encoder does not train here: its output on those videos is computed once."""

    def __init__(self, model: Autorater, stream: torch.nn.Module, data: TrainingData, recipe: StreamRecipe,
                 augment: Augmentations):
        self.module, self.stream, self.data, self.augment = model, stream, data, augment
        self.recipe = dataclasses.replace(recipe, match_on_successes=True)

    def param_groups(self) -> list[dict]:
        return [{"params": self.stream.match_parameters()}]

    def loss(self, rows: np.ndarray, rng: np.random.Generator) -> tuple[torch.Tensor, dict]:
        device = self.module.device
        inputs, batch = make_batch(self.data, rows, rng, augment=self.augment,
                                   mismatch_share=self.recipe.mismatch_share, successes_only=True)
        targets = stream_targets(self.data, batch, self.recipe)
        features = inputs["features"].to(device)[inputs["clip_index"].to(device)].float()
        times_s, match = inputs["times_s"].to(device), targets["match"].to(device)
        active = active_frames(times_s, inputs["takeover_s"].to(device))
        win = marker_window(times_s, targets["marker_index"].to(device), active)
        scores = self.stream.match_scores(features, inputs["instructions"], active)
        return sum(match_loss(score, win, own=match == 1, other=match == 0) for score in scores) / len(scores), {}

    def epoch_metrics(self) -> dict:
        return {}

    def validate(self) -> dict:
        return {}


@dataclass
class StreamStage(PartStage):
    """The event stream's stage: its match warm-up before the joint step, its pairs and targets in it."""

    name = "stream"
    recipe: StreamRecipe

    def warm_up(self, run: Run) -> None:
        """The instruction match alone first (:class:`MatchWarmUp`, along :meth:`StreamRecipe.warm_up_schedule`) on
        the success videos among the training rows, of a fresh model that reads the instruction and weighs the
        match."""
        recipe, model = self.recipe, run.model
        if not (run.fresh and model.config.use_instruction and recipe.match_warmup_epochs and recipe.match_weight > 0):
            return
        data = run.data
        successes = np.array([r for r in run.train_rows if data.ex.p_success[r] > 0.5], dtype=np.int64)
        if not model.frame_encoder.frozen:
            data = subset_data(data, successes, finished_features(model, data, successes))
            successes = np.arange(len(successes))
        fit(MatchWarmUp(model, run.part(self.part), data, recipe, run.augment), successes, recipe.warm_up_schedule(),
            run.rng, progress="instruction match warm-up" if run.progress else "")

    def pairs(self) -> dict:
        return {"mismatch_share": self.recipe.mismatch_share, "successes_only": self.recipe.match_on_successes}

    def targets(self, data: TrainingData, batch: Batch) -> dict:
        return stream_targets(data, batch, self.recipe)


__all__ = ["MatchWarmUp", "StreamRecipe", "StreamStage", "stream_targets"]
