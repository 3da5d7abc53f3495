"""Training a model: cached encoder features in, a trained Autorater folder out.

Read top to bottom: what trains in one step (:class:`JointPart`) and the match warm-up (:class:`MatchWarmUp`), both
trained by the one loop (``training/loop.py``: ``fit``); ``validate``; ``train`` (the entry point: suites or a pack,
the parts apart when the recipe says so, the folder written) and ``train_joint``. The recipe is
``training/recipe.py``; the batches (labels, cached clips, instruction negatives, augmentations)
``training/batches.py``. Randomness comes from ``TrainConfig.seed``; library code never prints or starts MLflow runs:
metrics go to the ``log`` callback.

Example:
    >>> result = train([Suite.load("suite")], PRESETS["babyai-grid"], TrainConfig(), out="model")  # doctest: +SKIP
    >>> result.best["val_balanced_accuracy"]                                                # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np
import torch

from autorater.architecture import AUGMENTATIONS, ArchitectureSpec
from autorater.calibration import marker_metrics, outcome_metrics
from autorater.config import AutoraterConfig
from autorater.data.splits import split_groups
from autorater.data.suite import Suite
from autorater.data.worlds import world_allows
from autorater.device import resolve_device
from autorater.model import Autorater
from autorater.models import AutoModel, spec_of
from autorater.training import loop
from autorater.training.batches import (
    TrainingData,
    finished_features,
    make_batch,
    mirrorable,
    predict_rows,
    prepare,
    seeded,
    subset_data,
)
from autorater.training.loop import Schedule, TrainResult, WeightAverage, convergence_verdict, fit, write_model
from autorater.training.recipe import TrainConfig, load_config_file, with_min_steps

if TYPE_CHECKING:
    from autorater.training.pack import Pack

class JointPart:
    """Every trainable part of a model in one step, for :func:`autorater.training.loop.fit`: a batch of rows
    (``make_batch``: instruction negatives and augmentations), the model's loss, its live outcome on each row's own clip
    as it was trained (``train_balanced_accuracy``: beside validation's, it tells memorisation from a shortcut that
    holds out of sample too), validation on the held-out rows. The frame encoders' trainable blocks step at
    ``encoder_lr``; with ``train_only``, only the parameters under those prefixes train."""

    def __init__(self, model: Autorater, data: TrainingData, val_rows: np.ndarray, tc: TrainConfig):
        self.module, self.data, self.val_rows, self.tc = model, data, val_rows, tc
        params = trainable_parameters(model, tc.train_only)
        encoder = {id(p) for child in model.frame_encoders().values() for p in child.parameters()}
        groups = [{"params": [p for p in params if id(p) not in encoder]},
                  {"params": [p for p in params if id(p) in encoder], "lr": tc.encoder_lr}]  # pretrained: smaller
        self.groups = [g for g in groups if g["params"]]
        self.said: list[bool] = []
        self.truth: list[bool] = []

    def param_groups(self) -> list[dict]:
        return self.groups

    def loss(self, rows: np.ndarray, rng: np.random.Generator) -> tuple[torch.Tensor, dict]:
        inputs, targets = make_batch(self.data, rows, self.tc, rng)
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


class MatchWarmUp:
    """The event stream's instruction match alone (each head's ``match``), for :func:`fit`: on the success videos,
    own instruction against another of its category around the annotators' marker; no validation. The frame
    encoder does not train here: its output on those videos is computed once."""

    def __init__(self, model: Autorater, data: TrainingData, tc: TrainConfig):
        self.module, self.data = model, data
        self.pairs = dataclasses.replace(tc, match_on_successes=True)

    def param_groups(self) -> list[dict]:
        return [{"params": self.module.stream.match_parameters()}]

    def loss(self, rows: np.ndarray, rng: np.random.Generator) -> tuple[torch.Tensor, dict]:
        from autorater.models.parts.risks import active_frames, marker_window, match_loss

        model = self.module
        inputs, targets = make_batch(self.data, rows, self.pairs, rng)
        device = model.device
        features = inputs["features"].to(device)[inputs["clip_index"].to(device)].float()
        times_s, match = inputs["times_s"].to(device), targets.match.to(device)
        active = active_frames(times_s, inputs["takeover_s"].to(device))
        win = marker_window(times_s, targets.marker_index.to(device), active)
        scores = model.stream.match_scores(features, inputs["instructions"], active)
        return sum(match_loss(score, win, own=match == 1, other=match == 0) for score in scores) / len(scores), {}

    def epoch_metrics(self) -> dict:
        return {}

    def validate(self) -> dict:
        return {}


def warm_up_match(model: Autorater, data: TrainingData, rows: np.ndarray, tc: TrainConfig, rng: np.random.Generator,
                  progress: bool = False, batch_size: int = 48, lr: float = 3e-3) -> list[float]:
    """The instruction match trained alone first (:class:`MatchWarmUp`, ``events.match_warmup_epochs`` epochs, Adam at
    a constant ``lr``) on the success videos among ``rows``; the mean match loss per epoch."""
    successes = np.array([r for r in rows if data.ex.p_success[r] > 0.5], dtype=np.int64)
    if not model.frame_encoder.frozen:
        data = subset_data(data, successes, finished_features(model, data, successes))
        successes = np.arange(len(successes))
    schedule = Schedule(epochs=tc.events.match_warmup_epochs, batch_size=batch_size, lr=lr, weight_decay=0.0,
                        warmup_steps=0, cosine=False, patience=None, clip=None)
    fitted = fit(MatchWarmUp(model, data, tc), successes, schedule, rng,
                 progress="instruction match warm-up" if progress else "")
    return [h.get("train_loss", 0.0) for h in fitted.history]


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


def run_epoch(model: Autorater, data: TrainingData, rows: np.ndarray, tc: TrainConfig, opt, sched,
              rng: np.random.Generator, average: WeightAverage | None = None) -> dict:
    """One pass of the joint step over ``rows`` with a given optimiser and schedule (:func:`loop.run_epoch` on a
    :class:`JointPart` validated on no rows): the mean losses and ``train_balanced_accuracy``."""
    return loop.run_epoch(JointPart(model, data, np.arange(0), tc), rows, tc.schedule(), opt, sched, rng, average)


def train(source: Sequence[Suite] | "Pack", model_config: AutoraterConfig, tc: TrainConfig | None = None,
          out: str | Path | None = None, log: Callable[[int, dict], None] | None = None,
          progress: bool = False, prepared: tuple[Autorater, TrainingData] | None = None,
          should_stop: Callable[[int, dict], bool] | None = None,
          init_state: dict | None = None) -> TrainResult:
    """Train an Autorater on the annotations of ``source``; keep the epoch with the best validation BA.

    Args:
        source: training suites (their reference episodes are left out), or a pack of them
            (``autorater.training.pack.Pack``: the same inputs, encoded elsewhere).
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
    if tc.parts_apart and spec_of(model_config).has_parts(model_config) and init_state is None and not tc.init_from:
        from autorater.training.parts import train_parts  # a fine-tuning start trains its parts jointly

        result = train_parts(source, model_config, tc, joint=train, out=out, log=log, progress=progress,
                             prepared=prepared, should_stop=should_stop)
        _record_suites(out, source)
        return result
    start = time.time()
    with seeded(tc.seed):
        model, data = prepared if prepared is not None else prepare(source, model_config, tc, progress)
        if init_state is not None and model.config != model_config:
            changed = sorted(k for k, v in model_config.to_dict().items() if model.config.to_dict().get(k) != v)
            raise ValueError(f"fine-tuning keeps the starting model's architecture, but these data would change its "
                             f"{', '.join(changed)} (a model saved before it learned them); fix: start from a model "
                             f"trained on suites, or retrain")
        if prepared is not None:  # a fresh model with this trial's architecture, same cached inputs
            torch.manual_seed(tc.seed)
            names = {f.name for f in dataclasses.fields(model_config)} & {"vocab", "failure_modes"}  # from the data
            learned = {k: v for k, v in model.config.to_dict().items() if k in names}
            model = AutoModel.from_config(model_config.replace(**learned))
        result = train_joint(model, data, tc, init_state, log, progress, should_stop)
    result.wall_s = time.time() - start
    if out is not None:
        write_model(result, out, tc, data.suite_names)
        _record_suites(out, source)
    return result


def _record_suites(out: str | Path | None, source) -> None:
    """Where the training suites are, in the folder's ``metadata.json`` (a version challenger replays them)."""
    from autorater.rater import METADATA_FILE, update_metadata

    if out is not None and isinstance(source, Sequence) and (Path(out) / METADATA_FILE).is_file():
        update_metadata(out, train_suite_paths=sorted({str(Path(s.root).resolve()) for s in source}))


def train_joint(model: Autorater, data: TrainingData, tc: TrainConfig, init_state: dict | None = None,
                log: Callable[[int, dict], None] | None = None, progress: bool = False,
                should_stop: Callable[[int, dict], bool] | None = None) -> TrainResult:
    """Every part of ``model`` in one step on ``data`` (:class:`JointPart` through :func:`fit`): the augmentations
    the architecture and the data allow, a starting model's weights, the model's own start from the data (the grid's
    places), the match warm-up of a fresh event stream, then the recipe's schedule."""
    spec = spec_of(model.config)
    tc, notes = supported_augmentations(tc, spec, data.sources, data)
    apart_only = [f"outcome_{k}" for k in ("paraphrases", "rewind", "reached", "consistency") if getattr(tc.outcome, k)]
    if apart_only and getattr(getattr(model.config, "outcome", None), "frames", 0):
        notes.append(f"{', '.join(apart_only)} off: the outcome heads' options train them apart (parts_apart, the "
                     f"general-parts preset); this run trains its parts jointly")
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
    if init_state is None:  # an architecture may start parts of itself where the training data says (the grid's places)
        rows = torch.as_tensor(train_rows)
        model.init_from_data(features=data.clips.features[rows], times_s=data.clips.times_s[rows],
                             takeover_s=torch.tensor([data.ex.takeover_s[r] for r in train_rows]),
                             marker_index=data.marker_index[rows],
                             success=torch.tensor([data.ex.p_success[r] > 0.5 for r in train_rows]), seed=tc.seed)
    part = JointPart(model, data, val_rows, tc)  # before the warm-up: train_only freezes what it leaves out
    rng = np.random.default_rng(tc.seed)
    if init_state is None and spec.match_warmup and model.config.use_instruction and tc.events.match_warmup_epochs \
            and tc.events.match_weight > 0:  # the event heads' match, alone first
        warm_up_match(model, data, train_rows, tc, rng, progress)
    fitted = fit(part, train_rows, tc.schedule(), rng, log=log, progress="training" if progress else "",
                 should_stop=should_stop)
    return TrainResult(model=model, history=fitted.history, best=dict(fitted.best), n_train=len(train_rows),
                       n_val=len(val_rows), verdict=fitted.verdict, notes=notes, recipe=tc)


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
               "crop": None, "augment_pixels": None}
    changes, notes = {}, []
    for name in AUGMENTATIONS:
        value = getattr(tc, name)
        why = reasons[name] if name in spec.augmentations else f"the {spec.name} architecture does not support it"
        if value and why:
            changes[name] = type(value)(0)
            notes.append(f"{name} off: {why}")
    return dataclasses.replace(tc, **changes), notes


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


__all__ = ["JointPart", "MatchWarmUp", "TrainConfig", "TrainResult", "WeightAverage", "convergence_verdict",
           "load_config_file", "load_init_state", "predict_rows", "run_epoch", "seeded", "supported_augmentations",
           "train", "train_joint", "trainable_parameters", "validate", "warm_up_match"]
