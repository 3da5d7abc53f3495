"""The training recipe: ``TrainConfig`` (its defaults are the real recipe), the recipe file ``autorater train --config``
reads (a preset name or a JSON file), and the recipe's decisions about the suites it is given.

Example:
    >>> model_config, tc = load_config("general")
    >>> tc.epochs == spec_of(model_config).recipe["epochs"], type(model_config).__name__
    (True, 'GeneralConfig')
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
from autorater.training.loop import Schedule


@dataclass
class EventRecipe:
    """The event stream's recipe (``TrainConfig.events``): its losses, the instruction pairs of its batches and its
    match warm-up. Each field also goes by its flat name (``TrainConfig(match_weight=...)``, ``tc.match_weight``)."""

    flat: ClassVar[dict[str, str]] = {}  # field -> its flat name where it differs (none: the same)
    mismatch_share: float = 0.5  # extra rows per batch pairing a video with another scenario's instruction
    success_negatives: bool = True  # also train P(success) on the mismatch rows (see make_batch): the events
    # model's "counterfactual" loss. (On the transformer, measured on 2,000 continuations, it stalled training at
    # chance: its success loss could not drop before it grounded the instruction, which it never did.)
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


@dataclass
class OutcomeRecipe:
    """The outcome path's recipe (``TrainConfig.outcome``): its loss and, when the parts train apart, its heads'
    budget and step. Flat names: ``outcome_<field>`` (``outcome_steps``), ``swap_weight`` and ``fit_gate``."""

    flat: ClassVar[dict[str, str]] = {"swap_weight": "swap_weight", "fit_gate": "fit_gate"}
    weight: float = 1.0  # the outcome path's loss (models with one: autorater/models/parts/outcome.py)
    negatives: float = 0.0  # weight of the rows pairing a success video with another task's words as an assumed
    #                         failure (0: none: across scenes they teach "words that do not fit the scene mean
    #                         failure", which an unseen task's words are)
    swap_weight: float = 0.5  # rows of swapped instructions (scenarios tagged instruction-swap: ``suite swap``, truth
    #                          judged by the simulator) weigh this much in the outcome path's loss
    steps: int = 3000  # parts apart: each head's budget of optimiser steps (whole epochs)
    patience: int = 4  # parts apart: epochs without a better validation BA before a head stops
    lr: float = 1e-3  # parts apart: the heads' learning rate (AdamW, warm-up, cosine over the budget)
    fit_gate: bool = True  # parts apart: fit the gate on held-out rows (kept only where it pays); False: 0
    # Options of the heads trained apart (issue 56; off in the recipe until a paired ablation says they pay):
    paraphrases: float = 0.0  # share of rows worded, each time they are drawn, by another wording of their task (the
    #                           scenario's metadata ``paraphrases``): the same success in other words
    rewind: float = 0.0  # share of a batch's success rows also shown rewound (ReWiND): their outcome frames before the
    #                      marker played forward and back, so the last frame shows the task not done; a failure
    reached: float = 0.0  # weight of a per-frame "outcome reached" loss: each outcome frame's token, read by the head's
    #                       own output layer, against whether the annotators' marker lies at or before that frame
    consistency: float = 0.0  # weight of the agreement of two views of one rollout (continuation metadata ``twin``):
    #                           the squared difference of their P(success)


@dataclass
class Augmentations:
    """The training augmentations (``TrainConfig.augment``), each applied only where the architecture (its spec's
    ``augmentations``) and the suites' worlds allow it (training/train.py notes the others, switched off). Flat names:
    each field's own, ``augment_pixels`` for ``pixels``."""

    flat: ClassVar[dict[str, str]] = {"pixels": "augment_pixels"}
    rotate: bool = True  # random 90-degree rotations of the top-down view, applied only when every training
    #                      suite's world allows it (``top_down``): a first-person frame has one orientation (the
    #                      agent at the bottom, facing up)
    mirror: bool = True  # mirror half the clips left-right and swap "left"/"right" in their instructions: the same
    #                      episode in a mirrored world, with the same outcome and marker. Needs inputs a mirror
    #                      maps exactly (decoded frames or "pixels" cells); other encoders' features skip it
    recolour: bool = False  # permute the objects' colours (green, blue, purple, yellow) in half the clips and in
    #                        their instructions; MiniGrid's palette (training/augment.py): only for suites of a world
    #                        that allows it (its ``augmentations``: BabyAI's), and with inputs a mirror may use
    relax: float = 0.5  # share of the success clips of a batch also shown under their instruction with one colour
    #                     word dropped ("pick up the ball": asks for less, still a success), with two negatives
    #                     (that instruction on a video of another object; the clip with a colour word changed);
    #                     categories where a wrong object is a failure only (not go_to); suites of a world that
    #                     allows it only (BabyAI's colour words). Without it a colourless instruction reads as a
    #                     weak match
    crop: float = 0.0  # > 0: each training clip seen through a random window of ``crop``..1 of its feature map's
    #                   sides (one size a batch, a place per clip): a crop of the picture, the viewpoint moved a
    #                   little. Only for heads that find things by content, not by place (their spec's
    #                   ``augmentations``: the general model); skipped for the others
    pixels: bool = True  # an outcome path that trains from pixels: a random crop and colour jitter per clip


PART_RECIPES = {"events": EventRecipe, "outcome": OutcomeRecipe, "augment": Augmentations}


def _flat_names() -> dict[str, tuple[str, str]]:
    """Every part field's flat name -> (part, field): the events' and augmentations' own names (``augment_pixels``),
    the outcome path's ``outcome_<field>`` (``swap_weight``, ``fit_gate`` as they are)."""
    out = {}
    for part, cls in PART_RECIPES.items():
        for f in dataclasses.fields(cls):
            default = f.name if part != "outcome" else f"outcome_{f.name}"
            out[cls.flat.get(f.name, default)] = (part, f.name)
    return out


FLAT = _flat_names()


@dataclass(init=False)
class TrainConfig:
    """The training recipe. Defaults are the real recipe. What every model's training reads is here; each part's own
    is in its recipe (``events``, ``outcome``, ``augment``), and every field of those also goes by its flat name, as
    recipe files, metadata.json, MLflow and the tests have always named them: ``TrainConfig(outcome_steps=500)``,
    ``tc.crop``, ``dataclasses.replace(tc, match_weight=2.0)``. ``to_dict`` writes the flat names (so do saved
    folders); ``from_dict`` reads flat or nested.

    Example:
        >>> tc = TrainConfig(epochs=3, outcome_steps=500, crop=0.5)
        >>> tc.outcome.steps, tc.augment.crop, tc.crop, TrainConfig.from_dict(tc.to_dict()) == tc
        (500, 0.5, 0.5, True)
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
    parts_apart: bool = False  # a model with an outcome path on a frozen cache (the general model): its outcome heads
    #                            train alone on the cached maps, then the event stream alone, then the gate on the
    #                            held-out rows (training/parts.py); False: one joint step for every part
    init_from: str = ""  # a model folder whose weights start training (a second stage; fine-tuning)
    train_only: list[str] = field(default_factory=list)  # parameter-name prefixes to train ("outcome."); the
    #                       rest stays as initialised; empty: train everything
    seed: int = 0
    cache_dir: str = "runs/cache"
    device: str = DEFAULT_DEVICE  # where training runs (autorater.device): "auto" (a GPU when present), "cpu", "cuda"
    events: EventRecipe = field(default_factory=EventRecipe)
    outcome: OutcomeRecipe = field(default_factory=OutcomeRecipe)
    augment: Augmentations = field(default_factory=Augmentations)

    retired: ClassVar[frozenset] = frozenset({"marker_weight", "failure_weight"})  # the first design's; ignored
    # The range of every number of a recipe (by flat name; any other number 0..1e6), checked where a recipe file is
    # read (``check``): ``epochs`` 0 trained nothing and wrote an untrained model; 1e9 never ends.
    ranges: ClassVar[dict[str, tuple[float, float]]] = {
        "epochs": (1, 10_000), "batch_size": (1, 4096), "lr": (1e-9, 10), "encoder_lr": (0, 10),
        "weight_decay": (0, 10), "patience": (0, 10_000), "val_share": (0, 0.9), "ema": (0, 0.999999),
        "seed": (0, 2 ** 32 - 1), "negative_label": (0, 1), "match_warmup_epochs": (0, 10_000),
        "outcome_steps": (1, 10 ** 7), "outcome_patience": (0, 10_000), "outcome_lr": (1e-9, 10),
        "outcome_paraphrases": (0, 1), "outcome_rewind": (0, 1), "relax": (0, 1), "crop": (0, 1)}

    def __init__(self, **values):
        fields = {f.name: f for f in dataclasses.fields(self)}
        flat = {k: values.pop(k) for k in list(values) if k in FLAT}
        unknown = sorted(set(values) - set(fields))
        if unknown:
            raise TypeError(f"TrainConfig got unknown field(s) {unknown}; known: {sorted([*fields, *FLAT])}")
        for name, f in fields.items():
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            setattr(self, name, values.get(name, default))
        for part in PART_RECIPES:
            changes = {key: flat[name] for name, (p, key) in FLAT.items() if p == part and name in flat}
            if changes:
                setattr(self, part, dataclasses.replace(getattr(self, part), **changes))

    def __getattr__(self, name: str):
        if name in FLAT:  # a part's field by its flat name
            part, key = FLAT[name]
            return getattr(object.__getattribute__(self, part), key)
        raise AttributeError(f"TrainConfig has no field {name!r}")

    def to_dict(self) -> dict:
        """The recipe by flat names (the form recipe files, metadata.json and MLflow have always used)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in PART_RECIPES}
        d["train_only"] = list(self.train_only)
        return {**d, **{name: getattr(getattr(self, part), key) for name, (part, key) in FLAT.items()}}

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        """A recipe from flat names, or with a part's fields nested under its name (``{"outcome": {"steps": 500}}``);
        the retired design's fields are ignored; an unknown field is an error naming the known ones."""
        d = {k: v for k, v in d.items() if k not in cls.retired}
        for part, recipe in PART_RECIPES.items():
            if part in d and not isinstance(d[part], (dict, recipe)):
                raise ValueError(f"TrainConfig field {part!r} must be an object of its recipe's fields, got "
                                 f"{str(d[part])[:60]!r}")
            if isinstance(d.get(part), dict):
                nested = d.pop(part)
                names = {f.name for f in dataclasses.fields(recipe)}
                if set(nested) - names:
                    raise ValueError(f"unknown TrainConfig field(s) {sorted(set(nested) - names)} of {part!r}; "
                                     f"known: {sorted(names)}")
                d[part] = recipe(**nested)
        names = {f.name for f in dataclasses.fields(cls)} | set(FLAT)
        if set(d) - names:
            raise ValueError(f"unknown TrainConfig field(s) {sorted(set(d) - names)}; known: {sorted(names)}")
        return cls(**d)

    def check(self, where: str = "the recipe") -> "TrainConfig":
        """``self``, each field of its default's type and in its range (``ranges``); else a ValueError naming
        ``where`` and the field. Returns self."""
        defaults = TrainConfig().to_dict()
        if not isinstance(self.train_only, list):  # to_dict lists it: "abc" would read as three prefixes
            raise ValueError(f"{where} field 'train_only' must be a list of strings, got {str(self.train_only)[:60]!r}")
        for key, value in self.to_dict().items():
            want = type(defaults[key])
            ok = isinstance(value, want) and (want is bool or not isinstance(value, bool))
            ok = ok or (want is float and isinstance(value, int) and not isinstance(value, bool))
            if not ok:
                raise ValueError(f"{where} field {key!r} must be {want.__name__}, got {str(value)[:60]!r}")
            check_value(TrainConfig, where, key, value)
        if self.aggregation not in ("dawid_skene", "majority"):
            raise ValueError(f"{where} field 'aggregation' must be dawid_skene or majority, got "
                             f"{str(self.aggregation)[:60]!r}")
        return self

    def schedule(self) -> Schedule:
        """How the whole model trains in one step (``training/loop.py``): this recipe's epochs, step, patience and
        average."""
        return Schedule(epochs=self.epochs, batch_size=self.batch_size, lr=self.lr, weight_decay=self.weight_decay,
                        warmup_steps=self.warmup_steps, patience=self.patience, ema=self.ema)

    def outcome_schedule(self, n_train: int) -> Schedule:
        """How each outcome head trains alone (parts apart) on ``n_train`` rows: ``outcome.steps`` in whole epochs,
        its own learning rate and patience, never stopped before ``min_steps``; no average."""
        return Schedule(epochs=outcome_epochs(self, n_train), batch_size=self.batch_size, lr=self.outcome.lr,
                        weight_decay=self.weight_decay, warmup_steps=self.warmup_steps,
                        patience=self.outcome.patience, min_steps=self.min_steps)


def outcome_epochs(tc: TrainConfig, n_train: int) -> int:
    """The outcome heads' budget in whole epochs: ``outcome.steps`` steps on ``n_train`` rows, at least one epoch."""
    return max(1, int(np.ceil(tc.outcome.steps / int(np.ceil(n_train / tc.batch_size)))))


def recipe_for(model_config: AutoraterConfig, **changes) -> TrainConfig:
    """The training recipe of ``model_config``'s architecture (its spec's ``recipe``) and of its config (the spec's
    ``recipe_changes``: the ``general-parts`` preset trains its parts apart), with ``changes``."""
    spec = spec_of(model_config)
    return TrainConfig(**{**spec.recipe, **spec.recipe_changes(model_config), **changes})


def with_min_steps(tc: TrainConfig, n_train: int) -> TrainConfig:
    """``tc`` with its epochs, patience and match warm-up epochs scaled up by one factor so that training takes at
    least ``tc.min_steps`` optimiser steps on ``n_train`` rows; unchanged when it already does (or min_steps is 0)."""
    planned = tc.epochs * int(np.ceil(n_train / tc.batch_size))
    if not tc.min_steps or planned >= tc.min_steps:
        return tc
    scale = tc.min_steps / max(1, planned)
    return dataclasses.replace(tc, epochs=int(np.ceil(tc.epochs * scale)), patience=int(np.ceil(tc.patience * scale)),
                               match_warmup_epochs=int(np.ceil(tc.events.match_warmup_epochs * scale)))


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
    spec = spec_of(model)  # the recipe the config asks for (recipe_changes: general-parts trains its parts apart)
    train = d.get("train", {})
    if not isinstance(train, dict):
        raise ValueError(f"{path}: \"train\" must be a JSON object of recipe fields, got {str(train)[:60]!r}")
    recipe = TrainConfig.from_dict({**spec.recipe, **spec.recipe_changes(model), **train})
    return model, recipe.check(f"{path}: train")


__all__ = ["FLAT", "Augmentations", "EventRecipe", "OutcomeRecipe", "TrainConfig", "load_config", "load_config_file",
           "outcome_epochs", "recipe_for", "top_down", "with_min_steps", "world_allows_all"]
