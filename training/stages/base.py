"""What every stage reads and returns: the run as the stages see it (:class:`Run`), a stage's outcome
(:class:`StageResult`) and the base of a part's stage (:class:`PartStage`).

A run (``autorater.training.plan``) is a list of stages. A *part's stage* trains one part of the model (the part's
class names it: ``ModelPart.stage``), alone when it can (:meth:`PartStage.run`: the outcome path's heads on their
cached maps) and otherwise inside the joint step, to which it gives its warm-up, its batch pairs, its targets and the
notes of its options that apply alone only. Each holds its recipe (its field of ``TrainConfig``: ``tc.stream``,
``tc.outcome``); the joint step (``stages/joint.py``) holds the run's whole recipe.

Example:
    >>> StageResult(verdict="converged at epoch 3 (...)").title("stream").verdict
    'stream: converged at epoch 3 (...)'
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable, ClassVar

import numpy as np
import torch

from autorater.calibration import outcome_metrics
from autorater.model import Autorater, ModelPart
from autorater.training.inputs.augment import Augmentations
from autorater.training.inputs.batches import Batch, TrainingData
from autorater.training.loop import Schedule

Log = Callable[[int, dict], None]


@dataclass
class Run:
    """One training run as its stages see it.

    Attributes:
        model, data: what trains, on what (``prepare``'s output, or a stage's share of it).
        train_rows, val_rows: the split of ``data``'s rows (whole scenarios; ``TrainConfig.val_share``).
        seed: the run's (``TrainConfig.seed``): each stage draws from it.
        schedule: the joint step's (the recipe's top level): a part's own schedule starts from it.
        min_steps: no stage stops early before this many steps (``TrainConfig.min_steps``).
        augment: the augmentations a batch may apply (those the architecture and the data allow, in a joint step).
        fresh: no starting weights (a fine-tuning start skips the warm-ups).
        rng: the data order's generator of a joint step, which its warm-ups share.
        results: what the stages before returned, by stage name.
    """

    model: Autorater
    data: TrainingData
    train_rows: np.ndarray
    val_rows: np.ndarray
    seed: int
    schedule: Schedule
    min_steps: int = 0
    augment: Augmentations = field(default_factory=Augmentations)
    fresh: bool = True
    log: Log | None = None
    progress: bool = False
    should_stop: Callable[[int, dict], bool] | None = None
    rng: np.random.Generator | None = None
    results: dict[str, "StageResult"] = field(default_factory=dict)

    def part(self, name: str) -> ModelPart:
        """The model's part called ``name`` (``Autorater.parts``)."""
        return self.model.parts()[name]


@dataclass
class StageResult:
    """What a stage did: its curve (one dict per epoch), its best metrics, its verdict, its notes (what the recipe
    asked and it did not do, and why), the recipe as it ran and, for a stage that trains a model of its own, that
    model and its data."""

    history: list[dict] = field(default_factory=list)
    best: dict = field(default_factory=dict)
    verdict: str = ""
    notes: list[str] = field(default_factory=list)
    recipe: object = None
    model: Autorater | None = None
    data: TrainingData | None = None

    def title(self, name: str) -> "StageResult":
        """The same result, its verdict headed by ``name`` (a run of several stages joins their verdicts)."""
        return dataclasses.replace(self, verdict=f"{name}: {self.verdict}")


def balanced_accuracy(logits: torch.Tensor, target: torch.Tensor) -> float:
    """Balanced accuracy of ``logits >= 0`` against ``target > 0.5``."""
    return outcome_metrics((target > 0.5).int().numpy(), (logits >= 0).int().numpy())["balanced_accuracy"]


def prefixed(log: Log | None, prefix: str) -> Log | None:
    """``log`` with each metric's name headed by ``prefix`` (the epoch left out): a stage's curve among others."""
    if log is None:
        return None
    return lambda epoch, metrics: log(epoch, {f"{prefix}{k}": v for k, v in metrics.items() if k != "epoch"})


@dataclass
class PartStage:
    """The stage of one part of a model (its class's ``stage`` names it), holding its recipe and the part's name in
    the model. By default a part trains only inside the joint step and adds nothing to it."""

    name: ClassVar[str] = ""  # the stage's name: the parts' ``stage`` and its recipe's field of ``TrainConfig``
    recipe: object
    part: str

    def alone(self) -> bool:
        """Whether it can train its part alone (before the joint step trains the rest)."""
        return False

    def run(self, run: Run) -> StageResult:
        """Train the part alone."""
        raise NotImplementedError(f"the {self.name} stage trains its part inside the joint step only")

    def warm_up(self, run: Run) -> None:
        """Before a joint step of a fresh model: train what must start before the rest (nothing by default)."""

    def pairs(self) -> dict:
        """What a joint batch pairs for this part (``make_batch``'s ``mismatch_share`` and ``successes_only``)."""
        return {}

    def targets(self, data: TrainingData, batch: Batch) -> dict:
        """This part's fields of a joint batch's ``Targets``."""
        return {}

    def joint_notes(self) -> list[str]:
        """What the recipe asks of this part that only training it alone does (a joint step says so)."""
        return []


__all__ = ["Log", "PartStage", "Run", "StageResult", "balanced_accuracy", "prefixed"]
