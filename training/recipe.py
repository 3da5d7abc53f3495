"""The training recipe: ``TrainConfig`` (its defaults are the real recipe), the recipe file ``autorater train --config``
reads (a preset name or a JSON file), and the recipe's decisions about the suites it is given.

Example:
    >>> model_config, tc = load_config("general")
    >>> tc.epochs == spec_of(model_config).recipe["epochs"], type(model_config).__name__
    (True, 'GeneralConfig')
    >>> tc.stream.match_warmup_epochs, tc.parts_apart
    (10, False)
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Sequence

import numpy as np

from autorater.config import AutoraterConfig, check_value, with_changes
from autorater.data.suite import Suite
from autorater.data.worlds import world_allows
from autorater.device import DEFAULT_DEVICE
from autorater.models import AutoConfig, spec_of
from autorater.training.inputs.augment import Augmentations
from autorater.training.loop import Schedule
from autorater.training.stages.gate import GateRecipe
from autorater.training.stages.outcome import OutcomeRecipe
from autorater.training.stages.stream import StreamRecipe

# The names recipe files, saved folders' metadata.json and MLflow runs gave a stage's fields before TrainConfig was
# nested by stage (issue 64): read on loading (``TrainConfig.from_dict``), written nowhere. Flat name -> (stage, field).
LEGACY_NAMES: dict[str, tuple[str, str]] = {
    **{name: ("stream", name) for name in (
        "mismatch_share", "success_negatives", "match_on_successes", "negative_label", "success_weight",
        "match_weight", "counterfactual_weight", "balance_classes", "match_warmup_epochs")},
    **{f"outcome_{name}": ("outcome", name) for name in (
        "weight", "negatives", "steps", "patience", "lr", "paraphrases", "rewind", "reached", "consistency")},
    "swap_weight": ("outcome", "swap_weight"), "fit_gate": ("gate", "fit"),
    **{name: ("augment", name) for name in ("rotate", "mirror", "recolour", "relax", "crop")},
    "augment_pixels": ("augment", "pixels"),
}
LEGACY_STAGES = {"events": "stream"}  # a nested stage's former name (recipe files of issue 57)
RETIRED = frozenset({"marker_weight", "failure_weight"})  # the first design's; ignored


@dataclass
class TrainConfig:
    """The training recipe. Defaults are the real recipe. The top level is what the whole run reads (the joint
    step's schedule, the seed, the device, the cache); each stage's own fields are in its recipe, under the stage's
    name (``training/stages/``): ``stream``, ``outcome``, ``gate``, and the batches' ``augment``. One name per field:
    ``tc.stream.match_weight``, ``tc.replace(stream={"match_weight": 2.0})``; the flat names of older recipe files and
    folders (``match_weight``, ``outcome_steps``) are read by :meth:`from_dict` only (:data:`LEGACY_NAMES`).

    Example:
        >>> tc = TrainConfig(epochs=3).replace(outcome={"steps": 500}, augment={"crop": 0.5})
        >>> tc.outcome.steps, tc.augment.crop, TrainConfig.from_dict(tc.to_dict()) == tc
        (500, 0.5, True)
        >>> TrainConfig.from_dict({"outcome_steps": 500, "match_weight": 2.0}).stream.match_weight
        2.0
    """

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
    ema: float = 0.995  # decay per step of an exponential moving average of the trainable weights (Polyak
    #                     averaging, ~2 epochs of 2,000 clips); validation, early stopping and the saved model use
    #                     the average. 0: off
    parts_apart: bool = False  # a model with a part that trains alone (the general model's outcome path on a frozen
    #                            cache): that part first, then the rest of the model, then the join on the held-out
    #                            rows (training/plan.py); False: one joint step for every part
    init_from: str = ""  # a model folder whose weights start training (a second stage; fine-tuning)
    train_only: list[str] = field(default_factory=list)  # parameter-name prefixes to train ("outcome."); the
    #                       rest stays as initialised; empty: train everything
    seed: int = 0
    cache_dir: str = "runs/cache"
    device: str = DEFAULT_DEVICE  # where training runs (autorater.device): "auto" (a GPU when present), "cpu", "cuda"
    stream: StreamRecipe = field(default_factory=StreamRecipe)
    outcome: OutcomeRecipe = field(default_factory=OutcomeRecipe)
    gate: GateRecipe = field(default_factory=GateRecipe)
    augment: Augmentations = field(default_factory=Augmentations)

    # The range of every number of the top level (any other number 0..1e6; a stage's in its recipe's ``ranges``),
    # checked where a recipe file is read (``check``): ``epochs`` 0 trained nothing and wrote an untrained model; 1e9
    # never ends.
    ranges: ClassVar[dict[str, tuple[float, float]]] = {
        "epochs": (1, 10_000), "batch_size": (1, 4096), "lr": (1e-9, 10), "encoder_lr": (0, 10),
        "weight_decay": (0, 10), "patience": (0, 10_000), "val_share": (0, 0.9), "ema": (0, 0.999999),
        "seed": (0, 2 ** 32 - 1)}

    @classmethod
    def stages(cls) -> dict[str, type]:
        """The fields that hold a stage's recipe (and the batches' augmentations), by name."""
        return {f.name: type(f.default_factory()) for f in dataclasses.fields(cls)
                if f.default_factory is not dataclasses.MISSING and dataclasses.is_dataclass(f.default_factory())}

    def to_dict(self) -> dict:
        """The recipe as JSON: the top level's fields, each stage's as an object under its name."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        """A recipe from its JSON: a stage's fields under its name (``{"outcome": {"steps": 500}}``), or by the flat
        names older files and folders wrote (:data:`LEGACY_NAMES`); the retired design's fields are ignored; an
        unknown field is an error naming the known ones."""
        return cls().replace(**cls.changes_of(d))

    @classmethod
    def changes_of(cls, d: dict) -> dict:
        """A recipe's JSON (today's or an older file's, :meth:`from_dict`) as the changes :meth:`replace` takes: the
        top level's fields, and each stage's given fields as a dict under its name."""
        if not isinstance(d, dict):
            raise ValueError(f"a training recipe must be a JSON object, got {str(d)[:60]!r}")
        d = {LEGACY_STAGES.get(k, k): v for k, v in d.items() if k not in RETIRED}
        nested: dict[str, dict] = {}
        for stage in cls.stages():
            given = d.pop(stage, {})
            if not isinstance(given, dict):
                raise ValueError(f"TrainConfig field {stage!r} must be an object of its fields, got "
                                 f"{str(given)[:60]!r}")
            nested[stage] = dict(given)
        if "fit_gate" in nested["outcome"]:  # the gate's switch, once the outcome recipe's
            nested["gate"].setdefault("fit", nested["outcome"].pop("fit_gate"))
        for name in [k for k in d if k in LEGACY_NAMES]:
            stage, key = LEGACY_NAMES[name]
            nested[stage].setdefault(key, d.pop(name))
        return {**d, **{stage: fields for stage, fields in nested.items() if fields}}

    def replace(self, **changes) -> "TrainConfig":
        """A copy with ``changes``: a top-level field by its name, a stage's fields as a dict merged into its recipe
        (``replace(epochs=2, stream={"match_warmup_epochs": 1})``) or a whole recipe. An unknown field is an error
        naming the known ones."""
        stages, names = self.stages(), {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            moved = [f"{k} is now {'.'.join(LEGACY_NAMES[k])}" for k in unknown if k in LEGACY_NAMES]
            raise ValueError(f"unknown TrainConfig field(s) {unknown}{' (' + '; '.join(moved) + ')' if moved else ''}; "
                             f"known: {sorted(names)}")
        for stage, value in list(changes.items()):
            if stage in stages and isinstance(value, dict):
                known = {f.name for f in dataclasses.fields(stages[stage])}
                if set(value) - known:
                    raise ValueError(f"unknown TrainConfig field(s) {sorted(set(value) - known)} of {stage!r}; "
                                     f"known: {sorted(known)}")
                changes[stage] = dataclasses.replace(getattr(self, stage), **value)
        return dataclasses.replace(self, **changes)

    def check(self, where: str = "the recipe") -> "TrainConfig":
        """``self``, each field (a stage's too) of its default's type and in its range (``ranges``, and each stage's
        recipe's); else a ValueError naming ``where`` and the field. Returns self."""
        if not isinstance(self.train_only, list):  # to_dict lists it: "abc" would read as three prefixes
            raise ValueError(f"{where} field 'train_only' must be a list of strings, got {str(self.train_only)[:60]!r}")
        check_recipe(self, where)
        for stage in self.stages():
            check_recipe(getattr(self, stage), f"{where} field {stage!r}:")
        if self.aggregation not in ("dawid_skene", "majority"):
            raise ValueError(f"{where} field 'aggregation' must be dawid_skene or majority, got "
                             f"{str(self.aggregation)[:60]!r}")
        return self

    def schedule(self) -> Schedule:
        """How the whole model trains in one step (``training/loop.py``): this recipe's epochs, step, patience and
        average."""
        return Schedule(epochs=self.epochs, batch_size=self.batch_size, lr=self.lr, weight_decay=self.weight_decay,
                        warmup_steps=self.warmup_steps, patience=self.patience, ema=self.ema)

    def with_min_steps(self, n_train: int) -> "TrainConfig":
        """This recipe with its epochs, patience and match warm-up epochs scaled up by one factor so that training
        takes at least ``min_steps`` optimiser steps on ``n_train`` rows; unchanged when it already does (or
        ``min_steps`` is 0)."""
        planned = self.epochs * int(np.ceil(n_train / self.batch_size))
        if not self.min_steps or planned >= self.min_steps:
            return self
        scale = self.min_steps / max(1, planned)
        return self.replace(epochs=int(np.ceil(self.epochs * scale)), patience=int(np.ceil(self.patience * scale)),
                            stream={"match_warmup_epochs": int(np.ceil(self.stream.match_warmup_epochs * scale))})


def check_recipe(recipe, where: str) -> None:
    """Each field of the dataclass ``recipe`` (a recipe) of its default's type and in its range (its class's
    ``ranges``, else 0..1e6), a nested recipe left to its own check; else a ValueError naming ``where`` and the
    field."""
    defaults = type(recipe)()
    for f in dataclasses.fields(recipe):
        value, default = getattr(recipe, f.name), getattr(defaults, f.name)
        if dataclasses.is_dataclass(default) or isinstance(default, list):
            continue
        want = type(default)
        ok = isinstance(value, want) and (want is bool or not isinstance(value, bool))
        ok = ok or (want is float and isinstance(value, int) and not isinstance(value, bool))
        if not ok:
            raise ValueError(f"{where} field {f.name!r} must be {want.__name__}, got {str(value)[:60]!r}")
        check_value(type(recipe), where, f.name, value)


def recipe_for(model_config: AutoraterConfig, **changes) -> TrainConfig:
    """The training recipe of ``model_config``'s architecture (its spec's ``recipe``) and of its config (the spec's
    ``recipe_changes``: the ``general-parts`` preset trains its parts apart), with ``changes`` (as
    :meth:`TrainConfig.replace` takes them)."""
    spec = spec_of(model_config)
    return TrainConfig.from_dict(spec.recipe).replace(**spec.recipe_changes(model_config)).replace(**changes)


def top_down(suites: Sequence[Suite]) -> bool:
    """Whether every suite's world allows rotations (its ``augmentations(source)``: BabyAI's top-down view).

    Rotating a top-down frame gives another valid scene; rotating a first-person one (the agent at the
    bottom, facing up) gives a view the model never meets. A suite that does not say (another tool's,
    real STS video) is taken as first-person.
    """
    return world_allows_all(suites, "rotate")


def world_allows_all(suites: Sequence[Suite], augmentation: str) -> bool:
    """Whether the worlds that made every suite allow ``augmentation`` (their ``augmentations``: BabyAI's recolour
    and relax need MiniGrid's palette and colour words); a suite from elsewhere allows none."""
    return world_allows([s.info.source for s in suites], augmentation)


def load_config(spec: str | Path | None) -> tuple[AutoraterConfig, TrainConfig]:
    """What ``--config`` names: a preset (``general``, ``babyai-grid``, ...: its model config and the default recipe),
    a JSON recipe file (:func:`load_config_file`), or None (the default preset)."""
    from autorater.models import PRESETS

    if spec is not None and str(spec) in PRESETS and not Path(spec).is_file():
        return PRESETS[str(spec)], recipe_for(PRESETS[str(spec)])
    if spec is not None and not Path(spec).is_file():
        raise ValueError(f"--config {spec}: neither a preset ({', '.join(sorted(PRESETS))}) nor a file (fix: name a "
                         f"preset, or the path of a JSON recipe file with keys preset, model, train)")
    return load_config_file(spec)


def load_config_file(path: str | Path | None) -> tuple[AutoraterConfig, TrainConfig]:
    """``{"preset": "general", "model": {...}, "train": {...}}`` -> the two configs (all keys optional; the preset
    defaults to ``DEFAULT_PRESET``, the general model)."""
    from autorater.models import DEFAULT_PRESET, PRESETS

    if path is None:
        return PRESETS[DEFAULT_PRESET], recipe_for(PRESETS[DEFAULT_PRESET])
    try:
        d = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"cannot read config file {path}: {err}") from None
    if not isinstance(d, dict):
        raise ValueError(f"{path}: a recipe file is a JSON object with keys preset, model, train; got "
                         f"{type(d).__name__}")
    unknown = set(d) - {"preset", "model", "train"}
    if unknown:
        raise ValueError(f"{path}: unknown top-level key(s) {sorted(unknown)}; use preset, model, train")
    preset = d.get("preset", DEFAULT_PRESET)
    if not isinstance(preset, str) or preset not in PRESETS:
        raise ValueError(f"{path}: unknown preset {str(preset)[:60]!r}; known: {sorted(PRESETS)}")
    changes, start = d.get("model", {}), PRESETS[preset]
    if not isinstance(changes, dict):
        raise ValueError(f"{path}: \"model\" must be a JSON object of config fields, got {str(changes)[:60]!r}")
    if changes.get("architecture", start.architecture) != start.architecture:
        model = AutoConfig.from_dict(changes)  # another architecture than the preset's: its own defaults
    else:
        model = AutoConfig.from_dict(with_changes(start.to_dict(), changes, type(start)))
    train = d.get("train", {})
    if not isinstance(train, dict):
        raise ValueError(f"{path}: \"train\" must be a JSON object of recipe fields, got {str(train)[:60]!r}")
    return model, recipe_for(model).replace(**TrainConfig.changes_of(train)).check(f"{path}: train")


__all__ = ["LEGACY_NAMES", "Augmentations", "GateRecipe", "OutcomeRecipe", "StreamRecipe", "TrainConfig", "load_config",
           "load_config_file", "recipe_for", "top_down", "world_allows_all"]
