"""The one training loop: ``fit(part, rows, schedule)``, which every part, recipe, baseline and benchmark trains by.

Read top to bottom (nanoGPT's ``train.py`` in small): AdamW over the part's parameter groups, a linear warm-up and a
cosine decay over the budget (:func:`lr_factor`), gradients clipped, an exponential average of the weights
(:class:`WeightAverage`) that validation and the kept model use, one validation per epoch, the best epoch kept (of a
tie, the later) and early stopping after ``patience`` epochs without a better validation balanced accuracy. What trains
is a :class:`Part`: its module, its loss on a batch of rows, its validation. Randomness comes in as ``rng`` (the data
order; the part draws its batches' augmentations from it too); metrics go to ``log``; the progress bar is the only
output.

What a training run returns is here too (:class:`TrainResult`, written to a model folder by :func:`write_model`), with
its one-line verdict on convergence (:func:`convergence_verdict`).

Example:
    >>> fitted = fit(part, train_rows, Schedule(epochs=10), rng=np.random.default_rng(0))   # doctest: +SKIP
    >>> fitted.best["val_balanced_accuracy"], fitted.verdict                               # doctest: +SKIP
    >>> convergence_verdict([{"val_balanced_accuracy": v} for v in (0.6, 0.8, 0.7)], budget_epochs=10)
    'converged at epoch 2 (val_balanced_accuracy 0.800; no better for 1 epochs)'
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol, Sequence

import numpy as np
import torch

from autorater.model import Autorater

SCORE = "val_balanced_accuracy"  # what the best epoch and early stopping go by (higher is better)


@dataclass(frozen=True)
class Schedule:
    """How a part trains: its budget, its optimiser's step and what stops it.

    Attributes:
        epochs: the budget, whole passes over the rows.
        batch_size, lr, weight_decay: AdamW's (a part's groups may set their own ``lr``).
        warmup_steps: the learning rate rises linearly over these first steps (0: none).
        cosine: then decays to 0 along a cosine over the budget (False: constant).
        patience: epochs without a better validation score before stopping (None: the budget runs out).
        min_steps: never stop early before this many steps.
        ema: decay per step of the weights' moving average (0: none).
        clip: the gradients' norm is clipped to this (None: not clipped).
    """

    epochs: int
    batch_size: int = 16
    lr: float = 2e-3
    weight_decay: float = 0.02
    warmup_steps: int = 50
    cosine: bool = True
    patience: int | None = 8
    min_steps: int = 0
    ema: float = 0.0
    clip: float | None = 1.0

    def steps(self, n_rows: int) -> int:
        """Optimiser steps in the budget on ``n_rows`` rows."""
        return self.epochs * int(np.ceil(n_rows / self.batch_size))


class Part(Protocol):
    """What :func:`fit` trains: a module (its state at the best epoch is kept), the parameter groups to optimise, the
    loss of a batch of rows (and the named losses beside it, each logged as ``train_<name>``), the metrics the part
    gathered over an epoch (``train_balanced_accuracy``), and its validation (``val_balanced_accuracy`` and more; an
    empty dict: a part with no validation runs its whole budget and keeps its last weights)."""

    module: torch.nn.Module

    def param_groups(self) -> list[dict]: ...

    def loss(self, rows: np.ndarray, rng: np.random.Generator) -> tuple[torch.Tensor, dict]: ...

    def epoch_metrics(self) -> dict: ...

    def validate(self) -> dict: ...


@dataclass
class Fitted:
    """What :func:`fit` returns: the curve (one dict per epoch), the best epoch's metrics (empty without validation),
    the one-line verdict on convergence and, when asked, each step's wall time (s)."""

    history: list[dict] = field(default_factory=list)
    best: dict = field(default_factory=dict)
    verdict: str = ""
    step_s: list[float] = field(default_factory=list)


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


@dataclass
class TrainResult:
    """A trained model, its curve (one dict per epoch), its best metrics and what training took."""

    model: Autorater
    history: list[dict] = field(default_factory=list)
    best: dict = field(default_factory=dict)
    wall_s: float = 0.0
    n_train: int = 0
    n_val: int = 0
    verdict: str = ""  # whether training converged (``convergence_verdict``), for the log and the run
    notes: list[str] = field(default_factory=list)  # what the recipe asked and this run did not do, and why
    recipe: object = None  # the recipe as it ran (``TrainConfig``: the augmentations it could not apply off), if not
    #                        the one asked


def write_model(result: TrainResult, out: str | Path, tc, suite_names: Sequence[str]) -> Path:
    """The trained model's folder (``config.json``, ``model.safetensors``) and its ``metadata.json``: the recipe as
    it ran (``result.recipe``, else ``tc``), the best epoch's metrics, the verdict, the recipe's notes, the sizes, the
    training suites and the wall time. Every way of training writes its folder here."""
    recipe = result.recipe if result.recipe is not None else tc
    return result.model.save_pretrained(out, metadata={
        "train_config": recipe.to_dict(), "best": result.best, "verdict": result.verdict, "recipe_notes": result.notes,
        "n_train": result.n_train, "n_val": result.n_val, "train_suites": list(suite_names),
        "wall_s": round(result.wall_s, 1)})


def convergence_verdict(history: Sequence[dict], budget_epochs: int, key: str = "val_balanced_accuracy") -> str:
    """One line on a curve (one dict per epoch, ``key`` higher is better): "converged at epoch k" when its best epoch
    came before the last one (early stopping, or the budget ended after it), "still rising: raise the budget" when
    the best is the budget's last epoch."""
    if not history:
        return "no epoch trained"
    scores = [h[key] for h in history]
    best, last = int(np.argmax(scores)) + 1, len(scores)
    if best == last and last >= budget_epochs:
        return f"still rising at epoch {last} of {budget_epochs} ({key} {scores[-1]:.3f}): raise the budget"
    if last >= budget_epochs:
        return f"converged at epoch {best} ({key} {scores[best - 1]:.3f}; the budget of {budget_epochs} ended after it)"
    return f"converged at epoch {best} ({key} {scores[best - 1]:.3f}; no better for {last - best} epochs)"


def lr_factor(step: int, schedule: Schedule, steps: int) -> float:
    """The learning rate's factor at ``step`` of ``steps``: the warm-up, then the cosine (module docstring)."""
    warm = min(1.0, (step + 1) / schedule.warmup_steps) if schedule.warmup_steps else 1.0
    if not schedule.cosine:
        return warm
    return warm * 0.5 * (1 + np.cos(np.pi * min(1.0, step / max(1, steps))))


def fit(part: Part, rows: np.ndarray, schedule: Schedule, rng: np.random.Generator, *,
        log: Callable[[int, dict], None] | None = None, progress: str = "",
        should_stop: Callable[[int, dict], bool] | None = None, timed: bool = False) -> Fitted:
    """Train ``part`` on ``rows`` along ``schedule`` (module docstring); its module is left at the best epoch's
    weights (the average's, with ``ema``), in eval mode.

    Args:
        rows: the training rows (the part knows what they index).
        rng: the data order's generator (and the part's augmentations').
        log: called as ``log(epoch, metrics)`` after every epoch (MLflow, Optuna...).
        progress: a progress bar over the epochs, with this title ("": none).
        should_stop: called after every epoch (unless patience stopped it first); True stops (Optuna pruning).
        timed: record each step's wall time (the device synchronised: a benchmark's).
    """
    module, fitted = part.module, Fitted()
    opt = torch.optim.AdamW(part.param_groups(), lr=schedule.lr, weight_decay=schedule.weight_decay)
    steps = schedule.steps(len(rows))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: lr_factor(step, schedule, steps))
    average = WeightAverage(module, schedule.ema) if schedule.ema else None
    per_epoch = int(np.ceil(len(rows) / schedule.batch_size))
    best_state, bad_epochs = None, 0
    epochs = range(1, schedule.epochs + 1)
    if progress:
        from tqdm import tqdm
        epochs = tqdm(epochs, desc=progress, unit="epoch")
    for epoch in epochs:
        metrics = run_epoch(part, rows, schedule, opt, sched, rng, average, fitted.step_s if timed else None)
        with average.swapped_in() if average else contextlib.nullcontext():  # the average is what is kept
            metrics.update(part.validate(), epoch=epoch)
            if SCORE in metrics:
                score, best = metrics[SCORE], fitted.best.get(SCORE)
                bad_epochs = 0 if best is None or score > best else bad_epochs + 1
                if best is None or score >= best:  # a tie: the later (averaged) weights
                    fitted.best = metrics
                    best_state = {k: v.detach().clone() for k, v in module.state_dict().items()}
        fitted.history.append(metrics)
        if log is not None:
            log(epoch, metrics)
        if progress:
            epochs.set_postfix(loss=f"{metrics['train_loss']:.3f}",
                               **({"val_ba": f"{metrics[SCORE]:.3f}"} if SCORE in metrics else {}))
        patient = schedule.patience is None or bad_epochs < schedule.patience or epoch * per_epoch < schedule.min_steps
        if not patient or (should_stop is not None and should_stop(epoch, metrics)):
            break
    opt.zero_grad(set_to_none=True)
    if best_state is not None:
        module.load_state_dict(best_state)
    module.eval()
    fitted.verdict = convergence_verdict(fitted.history, schedule.epochs) if fitted.best else ""
    return fitted


def run_epoch(part: Part, rows: np.ndarray, schedule: Schedule, opt, sched, rng: np.random.Generator,
              average: WeightAverage | None = None, step_s: list[float] | None = None) -> dict:
    """One pass over ``rows`` in a random order: per batch the part's loss, backward, the gradients clipped, the step,
    the schedule, the average; the mean of each loss (``train_loss``, ``train_<name>``) and the part's epoch
    metrics."""
    part.module.train()
    totals: dict[str, float] = {}
    n_batches = 0
    order = rng.permutation(rows)
    for start in range(0, len(order), schedule.batch_size):
        began = time.perf_counter() if step_s is not None else 0.0
        loss, losses = part.loss(order[start:start + schedule.batch_size], rng)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if schedule.clip is not None:
            torch.nn.utils.clip_grad_norm_(part.module.parameters(), schedule.clip)
        opt.step()
        sched.step()
        if average is not None:
            average.update()
        if step_s is not None:
            if loss.device.type == "cuda":
                torch.cuda.synchronize()
            step_s.append(time.perf_counter() - began)
        n_batches += 1
        for k, v in {"loss": loss, **losses}.items():
            totals[k] = totals.get(k, 0.0) + float(v.detach())
    return {**{f"train_{k}": v / max(1, n_batches) for k, v in totals.items()}, **part.epoch_metrics()}


__all__ = ["SCORE", "Fitted", "Part", "Schedule", "TrainResult", "WeightAverage", "convergence_verdict", "fit",
           "lr_factor", "run_epoch", "write_model"]
