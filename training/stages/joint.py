"""The joint step: every part a model trains together, in one loss (:class:`JointPart` through the one loop), after
each part's warm-up; or, when some parts trained alone first, the rest of the model on a model without them.

What a run reads here is the recipe's top level (``TrainConfig``: its schedule, the frame encoders' step, what trains,
the starting weights) and the augmentations; each part's stage (``stages/stream.py``, ``stages/outcome.py``) gives the
step its warm-up, its batch pairs, its targets and the notes of its options that apply alone only.

Example:
    >>> stage = JointStage(TrainConfig(), stages=[], without=("outcome",))
    >>> stage.name, stage.without
    ('joint', ('outcome',))
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from autorater.architecture import AUGMENTATIONS, ArchitectureSpec
from autorater.calibration import marker_metrics, outcome_metrics
from autorater.config import AutoraterConfig
from autorater.data.worlds import world_allows
from autorater.device import resolve_device
from autorater.model import Autorater, Targets
from autorater.models import AutoModel, spec_of
from autorater.training.inputs.batches import (
    TrainingData,
    labels,
    make_batch,
    mirrorable,
    predict_rows,
    seeded,
    without_inputs,
)
from autorater.training.loop import fit
from autorater.training.recipe import TrainConfig
from autorater.training.stages.base import PartStage, Run, StageResult, prefixed


class JointPart:
    """Every trainable part of a model in one step, for :func:`autorater.training.loop.fit`: a batch of rows
    (``make_batch``: the parts' instruction pairs and the augmentations), the model's loss on the parts' targets, its
    live outcome on each row's own clip as it was trained (``train_balanced_accuracy``: beside validation's, it tells
    memorisation from a shortcut that holds out of sample too), validation on the held-out rows. The frame encoders'
    trainable blocks step at ``encoder_lr``; with ``train_only``, only the parameters under those prefixes train."""

    def __init__(self, model: Autorater, data: TrainingData, val_rows: np.ndarray, tc: TrainConfig,
                 stages: Sequence[PartStage]):
        self.module, self.data, self.val_rows, self.tc, self.stages = model, data, val_rows, tc, list(stages)
        params = trainable_parameters(model, tc.train_only)
        encoder = {id(p) for child in model.frame_encoders().values() for p in child.parameters()}
        groups = [{"params": [p for p in params if id(p) not in encoder]},
                  {"params": [p for p in params if id(p) in encoder], "lr": tc.encoder_lr}]  # pretrained: smaller
        self.groups = [g for g in groups if g["params"]]
        self.pairs = {k: v for stage in self.stages for k, v in stage.pairs().items()}
        self.said: list[bool] = []
        self.truth: list[bool] = []

    def param_groups(self) -> list[dict]:
        return self.groups

    def batch(self, rows: np.ndarray, rng: np.random.Generator | None) -> tuple[dict, Targets]:
        """A batch of ``rows``: its inputs (``make_batch``: the parts' pairs, the augmentations) and every part's
        targets."""
        inputs, batch = make_batch(self.data, rows, rng, augment=self.tc.augment, **self.pairs)
        parts = {k: v for stage in self.stages for k, v in stage.targets(self.data, batch).items()}
        return inputs, Targets(**{**labels(self.data, batch), **parts})

    def loss(self, rows: np.ndarray, rng: np.random.Generator) -> tuple[torch.Tensor, dict]:
        inputs, targets = self.batch(rows, rng)
        out = self.module(**inputs, targets=targets)
        self.said += (out.success_logit[:len(rows)].detach().cpu() >= 0).tolist()  # own rows come first
        self.truth += [self.data.ex.p_success[r] > 0.5 for r in rows]
        return out.loss, out.losses

    def epoch_metrics(self) -> dict:
        said, truth, self.said, self.truth = self.said, self.truth, [], []
        return {"train_balanced_accuracy": outcome_metrics(np.array(truth, int), np.array(said, int))[
            "balanced_accuracy"]}

    def validate(self) -> dict:
        return validate(self.module, self.data, self.val_rows) if len(self.val_rows) else {}


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


@dataclass
class JointStage:
    """The joint step (module docstring) of a run's recipe ``tc``, with the stages of the parts it trains (each
    holding its recipe), from ``init_state`` (a starting model's trainable weights) if given; with ``without``, on a
    fresh model less those parts (they trained alone before), its weights put into the run's model after."""

    tc: TrainConfig
    stages: list[PartStage] = field(default_factory=list)
    init_state: dict | None = None
    without: tuple[str, ...] = ()
    name = "joint"

    def run(self, run: Run) -> StageResult:
        return self.rest_of(run) if self.without else self.train(run)

    def train(self, run: Run) -> StageResult:
        """The step on ``run.model``: the augmentations the architecture and the data allow, a starting model's
        weights, the model's own start from the data (the grid's places), each part's warm-up, then the recipe's
        schedule."""
        model, data = run.model, run.data
        tc, notes = supported_augmentations(self.tc, spec_of(model.config), data.sources, data)
        notes += [note for stage in self.stages for note in stage.joint_notes()]
        init_state = self.init_state
        if init_state is None and tc.init_from:
            init_state = load_init_state(tc.init_from, model.config)
        if init_state is not None:
            start_from(model, init_state, tc.train_only)
        model.to(resolve_device(tc.device))  # features are cached on the CPU; each batch moves with the forward pass
        tc = tc.with_min_steps(len(run.train_rows))
        if init_state is None:  # an architecture may start parts of itself where the data say (the grid's places)
            rows = torch.as_tensor(run.train_rows)
            model.init_from_data(features=data.clips.features[rows], times_s=data.clips.times_s[rows],
                                 takeover_s=torch.tensor([data.ex.takeover_s[r] for r in run.train_rows]),
                                 marker_index=data.marker_index[rows],
                                 success=torch.tensor([data.ex.p_success[r] > 0.5 for r in run.train_rows]),
                                 seed=tc.seed)
        stages = [dataclasses.replace(stage, recipe=getattr(tc, stage.name)) for stage in self.stages]
        part = JointPart(model, data, run.val_rows, tc, stages)  # before the warm-ups: train_only freezes the rest
        run = dataclasses.replace(run, augment=tc.augment, fresh=init_state is None,
                                  rng=np.random.default_rng(tc.seed))
        for stage in stages:
            stage.warm_up(run)
        fitted = fit(part, run.train_rows, tc.schedule(), run.rng, log=run.log,
                     progress="training" if run.progress else "", should_stop=run.should_stop)
        return StageResult(history=fitted.history, best=dict(fitted.best), verdict=fitted.verdict, notes=notes,
                           recipe=tc, model=model, data=data)

    def rest_of(self, run: Run) -> StageResult:
        """The step on a fresh model less the parts trained alone (built from the run's seed, as a run builds its
        model) and on the data less their inputs; its weights put into the run's model."""
        started = time.time()
        with seeded(run.seed):
            torch.manual_seed(run.seed)
            model = run.model.without(*self.without)
            data = without_inputs(run.data, [key for name in self.without for key in run.part(name).inputs])
            rest = "+".join(model.parts())
            result = dataclasses.replace(self, without=()).train(
                dataclasses.replace(run, model=model, data=data, log=prefixed(run.log, f"{rest}_")))
        run.model.load_state_dict(model.state_dict(), strict=False)  # the rest's weights; the encoders are the same
        best = {"epoch": result.best.get("epoch"), f"{rest}_epoch": result.best.get("epoch"),
                f"{rest}_val_balanced_accuracy": result.best.get("val_balanced_accuracy"),
                "val_marker_median_abs_error_s": result.best.get("val_marker_median_abs_error_s"),
                f"{rest}_wall_s": round(time.time() - started, 1)}
        return dataclasses.replace(result, history=[{"part": rest, **m} for m in result.history],
                                   best=best).title(rest)


def start_from(model: Autorater, init_state: dict, train_only: Sequence[str]) -> None:
    """Load a starting model's trainable weights into ``model``; a weight the start lacks is allowed only where this
    run trains it from scratch (a new module, under a ``train_only`` prefix)."""
    missing = {k for k in set(model.trainable_state_dict()) - set(init_state)
               if not any(k.startswith(p) for p in train_only)}
    if missing:
        raise ValueError(f"the starting weights do not fit this architecture (missing {sorted(missing)[:3]}); "
                         f"fine-tune with the starting model's own config, train the new parts with "
                         f"train_only, or retrain")
    model.load_state_dict(init_state, strict=False)


def supported_augmentations(tc: TrainConfig, spec: ArchitectureSpec, sources: Sequence[dict | None],
                            data: TrainingData) -> tuple[TrainConfig, list[str]]:
    """``tc`` with the augmentations this architecture (its spec's ``augmentations``) and these data (the suites'
    ``sources``: their worlds say what they allow) do not allow switched off, and a note for each (saved in the
    model's metadata: the recipe says what was done)."""
    allows = world_allows
    reasons = {"rotate": None if allows(sources, "rotate") else "the suites are not top-down (a first-person frame has "
                                                                 "one orientation)",
               "mirror": None if mirrorable(data) else "the cached inputs have no exact mirror",
               "recolour": None if mirrorable(data) and allows(sources, "recolour") else
               "the suites' world has no palette to permute, or the inputs no exact mirror",
               "relax": None if allows(sources, "relax") else "the suites' world has no colour words to drop",
               "crop": None, "pixels": None}
    changes, notes = {}, []
    for name in AUGMENTATIONS:
        value = getattr(tc.augment, name)
        why = reasons[name] if name in spec.augmentations else f"the {spec.name} architecture does not support it"
        if value and why:
            changes[name] = type(value)(0)
            notes.append(f"augment.{name} off: {why}")
    return dataclasses.replace(tc, augment=dataclasses.replace(tc.augment, **changes)), notes


def trainable_parameters(model: Autorater, train_only: Sequence[str]) -> list[torch.nn.Parameter]:
    """The parameters to optimise: all trainable ones, or those whose name starts with a ``train_only`` prefix
    (the others are frozen: ``requires_grad`` off). An unmatched prefix is an error, not a silent no-op."""
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    encoder = [prefix for prefix in train_only if prefix.startswith("frame_encoder")]
    if encoder:
        raise ValueError(f"train_only {encoder[0]!r}: which of the frame encoder's blocks train is one setting, the "
                         f"model config's trainable_blocks (fix: leave frame_encoder out of train_only)")
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
    """The trainable weights of a saved model folder, read through the checked loader (``AutoModel.from_pretrained``:
    config ranges, tensor shapes, the weights' checksum, finite values) and checked against ``config`` (same
    encoders, words and failure modes; other fields may differ, e.g. a new module to train)."""
    start_model = AutoModel.from_pretrained(folder)
    start, want = start_model.config.to_dict(), config.to_dict()
    for key in ("architecture", *spec_of(config).init_keys):
        if key == "vocab" and not start.get("vocab"):  # the start reads no learned words
            continue
        if start.get(key) != want.get(key):
            raise ValueError(f"init_from {folder}: its {key} ({start.get(key)!r:.60}) differs from this run's "
                             f"({want.get(key)!r:.60}); start from a model trained on the same data with "
                             f"the same encoders, or train from scratch")
    return start_model.trainable_state_dict()


__all__ = ["JointPart", "JointStage", "load_init_state", "start_from", "supported_augmentations",
           "trainable_parameters", "validate"]
