"""What a training run returns (``TrainResult``) and its one-line verdict on convergence (``convergence_verdict``):
shared by the joint loop (``training/train.py``) and the parts trained apart (``training/parts.py``).

Example:
    >>> convergence_verdict([{"val_balanced_accuracy": v} for v in (0.6, 0.8, 0.7)], budget_epochs=10)
    'converged at epoch 2 (val_balanced_accuracy 0.800; no better for 1 epochs)'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from autorater.model import Autorater


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


__all__ = ["TrainResult", "convergence_verdict", "write_model"]
