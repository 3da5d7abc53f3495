"""Training a model: cached encoder features in, a trained Autorater folder out.

``train`` is the entry point (the default recipe, tuning's trials, active learning's challengers, the baselines and the
benchmarks call it): the inputs (``prepare``: labels and the feature cache, from suites or a pack), the plan of stages
the model's parts call for (``training/plan.py``: one joint step, or the parts apart), run once and in order, and the
model folder with its metadata (``write_model``). The recipe is ``training/recipe.py``; the stages
``training/stages/``; the batches ``training/inputs/batches.py``. Randomness comes from ``TrainConfig.seed``; library
code never prints or starts MLflow runs: metrics go to the ``log`` callback.

Example:
    >>> result = train([Suite.load("suite")], PRESETS["babyai-grid"], TrainConfig(), out="model")  # doctest: +SKIP
    >>> result.best["val_balanced_accuracy"]                                                # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np
import torch

from autorater.config import AutoraterConfig
from autorater.data.splits import split_groups
from autorater.data.suite import Suite
from autorater.device import resolve_device
from autorater.model import Autorater, Targets
from autorater.models import AutoModel
from autorater.training import loop
from autorater.training.inputs.batches import TrainingData, prepare, seeded
from autorater.training.loop import TrainResult, WeightAverage, write_model
from autorater.training.plan import part_stages, plan, run_plan
from autorater.training.recipe import TrainConfig
from autorater.training.stages.base import Run
from autorater.training.stages.joint import JointPart

if TYPE_CHECKING:
    from autorater.training.inputs.pack import Pack


def train(source: Sequence[Suite] | "Pack", model_config: AutoraterConfig, tc: TrainConfig | None = None,
          out: str | Path | None = None, log: Callable[[int, dict], None] | None = None,
          progress: bool = False, prepared: tuple[Autorater, TrainingData] | None = None,
          should_stop: Callable[[int, dict], bool] | None = None,
          init_state: dict | None = None) -> TrainResult:
    """Train an Autorater on the annotations of ``source``; keep the epoch with the best validation BA.

    Args:
        source: training suites (their reference episodes are left out), or a pack of them
            (``autorater.training.inputs.pack.Pack``: the same inputs, encoded elsewhere).
        model_config: the architecture.
        tc: the recipe.
        out: write the best model folder here.
        log: called as ``log(epoch, metrics)`` after every epoch (MLflow, Optuna...).
        progress: show progress bars.
        prepared: re-use ``prepare``'s output (tuning trials share one feature cache in memory).
        should_stop: called after every epoch; True stops (Optuna pruning).
        init_state: start from these trainable weights (``Autorater.trainable_state_dict()`` of a model
            with the same ``model_config``): fine-tuning a champion on new labels (its parts train jointly).
    """
    tc = tc or TrainConfig()
    start = time.time()
    with seeded(tc.seed):
        model, data = inputs(source, model_config, tc, prepared, progress)
        if init_state is not None:
            check_fine_tuning((prepared[0] if prepared is not None else model).config, model_config)
        model.to(resolve_device(tc.device))  # every part trains there; the cached inputs stay on the CPU
        encoded = time.time()
        stages = plan(model, tc, init_state)
        train_rows, val_rows = split_groups(data.groups or data.ex.scenario_keys, tc.val_share, tc.seed)
        installed = getattr(source, "installed", contextlib.nullcontext)  # a pack's weights and vectors: for the
        with installed():  # models this run builds (a part's rest trained apart), and for none after
            done = run_plan(stages, Run(model, data, train_rows, val_rows, tc.seed, tc.schedule(), tc.min_steps,
                                        tc.augment, fresh=init_state is None, log=log, progress=progress,
                                        should_stop=should_stop))
    result = TrainResult(model=model, history=done.history, best=dict(done.best), n_train=len(train_rows),
                         n_val=len(val_rows), verdict=done.verdict, notes=done.notes, recipe=done.recipe)
    if len(stages) > 1:
        result.best["encode_wall_s"] = round(encoded - start, 1)
    result.wall_s = time.time() - start
    if out is not None:
        write_model(result, out, tc, data.suite_names)
        record_suites(out, source)
    return result


def record_suites(out: str | Path, source: Sequence[Suite] | "Pack") -> None:
    """Where the training suites are, in the folder's ``metadata.json`` (a version challenger replays them)."""
    from autorater.rater import METADATA_FILE, update_metadata

    if isinstance(source, Sequence) and (Path(out) / METADATA_FILE).is_file():
        update_metadata(out, train_suite_paths=sorted({str(Path(s.root).resolve()) for s in source}))


def check_fine_tuning(learned: AutoraterConfig, model_config: AutoraterConfig) -> None:
    """A fine-tuning start keeps its architecture: ValueError when the data would change ``model_config`` (the
    config the prepared model ``learned`` differs: a model saved before it learned its words or failure modes)."""
    if learned != model_config:
        changed = sorted(k for k, v in model_config.to_dict().items() if learned.to_dict().get(k) != v)
        raise ValueError(f"fine-tuning keeps the starting model's architecture, but these data would change its "
                         f"{', '.join(changed)} (a model saved before it learned them); fix: start from a model "
                         f"trained on suites, or retrain")


def inputs(source: Sequence[Suite] | "Pack", model_config: AutoraterConfig, tc: TrainConfig,
           prepared: tuple[Autorater, TrainingData] | None, progress: bool) -> tuple[Autorater, TrainingData]:
    """The model and its training data: ``prepare``'s, or with ``prepared`` a fresh model of ``model_config`` (built
    from ``tc.seed``, with the words and failure modes the prepared model learned from the data) on the same cached
    inputs (Optuna's trials)."""
    if prepared is None:
        return prepare(source, model_config, tc, progress)
    model, data = prepared
    torch.manual_seed(tc.seed)
    names = {f.name for f in dataclasses.fields(model_config)} & {"vocab", "failure_modes"}  # from the data
    learned = {k: v for k, v in model.config.to_dict().items() if k in names}
    return AutoModel.from_config(model_config.replace(**learned)), data


def joint_batch(model: Autorater, data: TrainingData, rows: np.ndarray, tc: TrainConfig,
                rng: np.random.Generator | None) -> tuple[dict, Targets]:
    """A batch of the joint step of ``model``'s parts under ``tc`` (:meth:`JointPart.batch`): its inputs and its
    targets."""
    return JointPart(model, data, np.arange(0), tc, part_stages(model, tc)).batch(rows, rng)


def run_epoch(model: Autorater, data: TrainingData, rows: np.ndarray, tc: TrainConfig, opt, sched,
              rng: np.random.Generator, average: WeightAverage | None = None) -> dict:
    """One pass of the joint step over ``rows`` with a given optimiser and schedule (:func:`loop.run_epoch` on a
    :class:`JointPart` of the model's parts, validated on no rows): the mean losses and ``train_balanced_accuracy``."""
    part = JointPart(model, data, np.arange(0), tc, part_stages(model, tc))
    return loop.run_epoch(part, rows, tc.schedule(), opt, sched, rng, average)


__all__ = ["TrainConfig", "TrainResult", "check_fine_tuning", "inputs", "joint_batch", "record_suites", "run_epoch",
           "train"]
