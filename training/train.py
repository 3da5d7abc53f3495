"""The training loop: cached encoder features in, a trained Autorater folder out.

Read top to bottom: ``run_epoch``, ``warm_up_match``, ``validate``, ``train`` (early stopping on validation balanced
accuracy). The recipe is ``training/recipe.py``; the batches (labels, cached clips, instruction negatives,
augmentations) ``training/batches.py``. Randomness comes from ``TrainConfig.seed``; library code never prints or
starts MLflow runs: metrics go to the ``log`` callback.

Example:
    >>> result = train([Suite.load("suite")], PRESETS["babyai-grid"], TrainConfig(), out="model")  # doctest: +SKIP
    >>> result.best["val_balanced_accuracy"]                                                # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from autorater.architecture import AUGMENTATIONS, ArchitectureSpec
from autorater.calibration import marker_metrics, outcome_metrics
from autorater.config import AutoraterConfig
from autorater.data.splits import split_groups
from autorater.data.suite import Suite
from autorater.device import resolve_device
from autorater.model import Autorater
from autorater.models import AutoModel, spec_of
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
from autorater.training.recipe import TrainConfig, load_config_file, top_down, with_min_steps, world_allows_all
from autorater.training.result import TrainResult, convergence_verdict


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


def train_step(model: Autorater, data: TrainingData, rows: np.ndarray, tc: TrainConfig, opt,
               rng: np.random.Generator):
    """One optimiser step on ``rows``: the batch, forward, backward, gradients clipped to norm 1, the step; the
    model's output."""
    inputs, targets = make_batch(data, rows, tc, rng)
    out = model(**inputs, targets=targets)
    opt.zero_grad(set_to_none=True)
    out.loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return out


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
        out = train_step(model, data, batch, tc, opt, rng)
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


def warm_up_match(model: Autorater, data: TrainingData, rows: np.ndarray, tc: TrainConfig, rng: np.random.Generator,
                  progress: bool = False, batch_size: int = 48, lr: float = 3e-3) -> list[float]:
    """Events: train the instruction match (each head's ``match``) alone on the success videos, own instruction
    against another of its category around the annotators' marker; returns the mean match loss per epoch. The
    frame encoder does not train here: its output on those videos is computed once."""
    from autorater.models.parts.risks import active_frames, marker_window, match_loss

    stream = model.stream
    opt = torch.optim.Adam(stream.match_parameters(), lr=lr)
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
            loss = sum(match_loss(score, win, own=match == 1, other=match == 0)
                       for score in stream.match_scores(features, inputs["instructions"], active)) / len(stream.heads)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total, n = total + float(loss.detach()), n + 1
        history.append(total / max(1, n))
        if progress:
            epochs.set_postfix(match_loss=f"{history[-1]:.3f}")
    model.zero_grad(set_to_none=True)
    return history


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
    if tc.parts_apart and spec_of(model_config).has_parts(model_config) and init_state is None and not tc.init_from:
        from autorater.training.parts import train_parts  # a fine-tuning start trains its parts jointly

        return train_parts(suites, model_config, tc, joint=train, out=out, log=log, progress=progress,
                           prepared=prepared, should_stop=should_stop)
    with seeded(tc.seed):
        return _train(suites, model_config, tc, out, log, progress, prepared, should_stop, init_state)


def _train(suites: Sequence[Suite], model_config: AutoraterConfig, tc: TrainConfig, out: str | Path | None,
           log: Callable[[int, dict], None] | None, progress: bool, prepared: tuple[Autorater, TrainingData] | None,
           should_stop: Callable[[int, dict], bool] | None, init_state: dict | None) -> TrainResult:
    start = time.time()
    model, data = prepared if prepared is not None else prepare(suites, model_config, tc, progress)
    tc, notes = supported_augmentations(tc, spec_of(model_config), suites, data)
    if prepared is not None:  # a fresh model with this trial's architecture, same cached inputs
        torch.manual_seed(tc.seed)
        names = {f.name for f in dataclasses.fields(model_config)} & {"vocab", "failure_modes"}  # learned from data
        learned = {k: v for k, v in model.config.to_dict().items() if k in names}
        model = AutoModel.from_config(model_config.replace(**learned))
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
    fresh = init_state is None
    if fresh:  # an architecture may start parts of itself where the training data says (the grid's places)
        rows = torch.as_tensor(train_rows)
        model.init_from_data(features=data.clips.features[rows], times_s=data.clips.times_s[rows],
                             takeover_s=torch.tensor([data.ex.takeover_s[r] for r in train_rows]),
                             marker_index=data.marker_index[rows],
                             success=torch.tensor([data.ex.p_success[r] > 0.5 for r in train_rows]), seed=tc.seed)
    params = trainable_parameters(model, tc.train_only)
    encoder = {id(p) for child in model.frame_encoders().values() for p in child.parameters()}
    groups = [{"params": [p for p in params if id(p) not in encoder]},
              {"params": [p for p in params if id(p) in encoder], "lr": tc.encoder_lr}]  # a pretrained part: smaller
    opt = torch.optim.AdamW([g for g in groups if g["params"]], lr=tc.lr, weight_decay=tc.weight_decay)
    steps = tc.epochs * int(np.ceil(len(train_rows) / tc.batch_size))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / tc.warmup_steps) * 0.5 * (1 + np.cos(np.pi * min(1.0, s / max(1, steps)))))
    rng = np.random.default_rng(tc.seed)
    warm_up = fresh and spec_of(model_config).match_warmup and model.config.use_instruction  # event heads' match
    if warm_up and tc.match_warmup_epochs and tc.match_weight > 0:
        warm_up_match(model, data, train_rows, tc, rng, progress)
    result = TrainResult(model=model, n_train=len(train_rows), n_val=len(val_rows), notes=notes)
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
            score = metrics["val_balanced_accuracy"]
            bad_epochs = 0 if best is None or score > best["val_balanced_accuracy"] else bad_epochs + 1
            if best is None or score >= best["val_balanced_accuracy"]:  # a tie: the later (averaged) weights
                best, best_state = metrics, copy.deepcopy(model.state_dict())
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
    result.verdict = convergence_verdict(result.history, tc.epochs)
    if out is not None:
        model.save_pretrained(out, metadata={"train_config": tc.to_dict(), "best": result.best,
                                             "verdict": result.verdict, "recipe_notes": notes,
                                             "n_train": result.n_train, "n_val": result.n_val,
                                             "train_suites": [f"{s.info.name}@{s.info.version}" for s in suites],
                                             "wall_s": round(result.wall_s, 1)})
    return result


def supported_augmentations(tc: TrainConfig, spec: ArchitectureSpec, suites: Sequence[Suite],
                            data: TrainingData) -> tuple[TrainConfig, list[str]]:
    """``tc`` with the augmentations this architecture (its spec's ``augmentations``) and these data do not allow
    switched off, and a note for each (saved in the model's metadata: the recipe says what was done)."""
    reasons = {"rotate": None if top_down(suites) else "the suites are not top-down (a first-person frame has one "
                                                        "orientation)",
               "mirror": None if mirrorable(data) else "the cached inputs have no exact mirror",
               "recolour": None if mirrorable(data) and world_allows_all(suites, "recolour") else
               "the suites' world has no palette to permute, or the inputs no exact mirror",
               "relax": None if world_allows_all(suites, "relax") else "the suites' world has no colour words to drop",
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


__all__ = ["TrainConfig", "TrainResult", "WeightAverage", "convergence_verdict", "load_config_file", "load_init_state",
           "predict_rows",
           "run_epoch", "seeded", "train", "train_step", "trainable_parameters", "validate", "warm_up_match"]
