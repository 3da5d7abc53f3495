"""The model's configuration: one typed dataclass per architecture (``autorater/models/``) on a small common base.

``AutoraterConfig`` holds what every architecture has (which frames it reads, the failure modes it names); each
architecture's module subclasses it with its own fields, ranges and upgrades of old folders, and nothing of
another's. The base knows none of its subclasses: ``autorater.models.AutoConfig`` picks the class a saved
``config.json`` names (its ``architecture``).

Example:
    >>> from autorater.models import PRESETS
    >>> cfg = PRESETS["tiny"]
    >>> type(cfg).from_dict(cfg.to_dict()) == cfg
    True
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

MAX_CONFIG_LIST, MAX_CONFIG_TEXT = 200_000, 200  # entries of a list field (the vocabulary); characters of a string
# Pixels one rating decodes and holds: clip_frames x image_size^2 (each field in its range, the product bounded too:
# 1024 frames of 1024 x 1024 would take one rating past 5 GB). 2^25: 32 frames at 1024 px, 668 at 224 px.
MAX_CLIP_PIXELS = 1 << 25
_FIX = "(fix: restore config.json from the model folder you saved)"


def read_config_json(path: str | Path) -> dict:
    """A config.json's object; ValueError naming the file and the fix when it cannot be one."""
    try:
        d = json.loads(Path(path).read_text(encoding="utf-8"))
    except RecursionError:
        raise ValueError(f"model config {path} is nested too deeply to be a config {_FIX}") from None
    except (OSError, UnicodeDecodeError, ValueError) as err:  # JSONDecodeError, and 4,300+ digit integers
        raise ValueError(f"cannot read model config {path}: {str(err)[:200]} {_FIX}") from None
    if not isinstance(d, dict):
        raise ValueError(f"model config {path} must be a JSON object")
    return d


@dataclass
class PartConfig:
    """The config of one part of an architecture, nested under one field of its config (as transformers' composite
    configs nest a vision and a text config): ``GeneralConfig.outcome`` is an ``OutcomeConfig``. Saved as a JSON
    object inside config.json; its fields are checked like the config's (``ranges``)."""

    ranges: ClassVar[dict[str, tuple[float, float]]] = {}

    @classmethod
    def from_dict(cls, d: dict, where: str = "") -> "PartConfig":
        if not isinstance(d, dict):
            raise ValueError(f"{where or cls.__name__} must be a JSON object, got {str(d)[:60]!r}")
        return cls(**check_fields(cls, d, where or cls.__name__))


def check_fields(cls: type, d: dict, where: str) -> dict:
    """``d``'s values for the dataclass ``cls``, checked: no unknown key, each of its default's type, numbers in
    ``cls.ranges`` (else 0..1e6), strings and lists bounded; a part (a :class:`PartConfig` field) from its dict.
    ValueError naming ``where`` and the field."""
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(d) - names
    if unknown:
        raise ValueError(f"unknown {where} field(s) {sorted(unknown)}; known: {sorted(names)}")
    defaults, out = cls(), {}
    for key, value in d.items():
        default = getattr(defaults, key)
        if isinstance(default, PartConfig):
            out[key] = type(default).from_dict(value, f"{where} field {key!r}:")
            continue
        want = type(default)
        ok = isinstance(value, want) and not (want is not bool and isinstance(value, bool))
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            ok = True
        if not ok:
            raise ValueError(f"{where} field {key!r} must be {want.__name__}, got {str(value)[:60]!r}")
        check_value(cls, where, key, value)
        out[key] = value
    return out


def check_value(cls: type, where: str, key: str, value) -> None:
    """ValueError naming the field when ``value`` is out of its range (``cls.ranges``) or too long."""
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        low, high = cls.ranges.get(key, (0, 1_000_000))
        if not low <= value <= high:  # int vs float compares exactly, without overflow; NaN fails it too
            raise ValueError(f"{where} field {key!r} must be in {low:g}..{high:g}, got {str(value)[:40]}")
    elif isinstance(value, str) and len(value) > MAX_CONFIG_TEXT:
        raise ValueError(f"{where} field {key!r} is {len(value)} characters long, over {MAX_CONFIG_TEXT}")
    elif isinstance(value, list):
        if len(value) > MAX_CONFIG_LIST:
            raise ValueError(f"{where} field {key!r} has {len(value)} entries, over {MAX_CONFIG_LIST}")
        bad = next((v for v in value if not isinstance(v, str) or len(v) > MAX_CONFIG_TEXT), None)
        if bad is not None:
            raise ValueError(f"{where} field {key!r} must hold strings of up to {MAX_CONFIG_TEXT} "
                             f"characters, got {str(bad)[:40]!r}")


@dataclass
class AutoraterConfig:
    """What every architecture has. Saved as ``config.json`` in a model folder, with ``architecture``."""

    architecture: ClassVar[str] = ""  # the registry's name (autorater/models/__init__.py)
    # The range of every number field: a config.json whose value is outside it is refused on loading, naming the
    # field, before a model is built from it (``image_size`` 1e9 would otherwise allocate; 0 would crash deep
    # inside). A number field not listed must lie in 0..1e6. Subclasses add their own fields' ranges.
    ranges: ClassVar[dict[str, tuple[float, float]]] = {"image_size": (16, 1024), "clip_frames": (1, 1024)}
    renamed: ClassVar[dict[str, str]] = {"num_frames": "clip_frames"}  # a saved config's old names -> today's
    image_size: int = 112  # frames are decoded at image_size x image_size
    clip_frames: int = 72  # frames a clip is sampled at, uniformly over the video (not a file's frame count,
    #                        ``VideoInfo.num_frames``); a shorter video pads (the events models skip repeats)
    use_instruction: bool = True  # False = the instruction-blind baseline
    failure_modes: list[str] = field(default_factory=list)  # set at training from the labels
    # How a frame of another shape becomes image_size x image_size: "stretch" (resize, the grid recipes: their
    # videos are square) or "pad" (resize the longer side, centre it on black: the aspect is kept).
    frame_fit: ClassVar[str] = "stretch"

    def to_dict(self) -> dict:
        return {"architecture": self.architecture, **dataclasses.asdict(self)}

    @classmethod
    def upgrade(cls, d: dict) -> dict:
        """A saved dict of this architecture in today's terms (the fields added since, at the values that reproduce
        the folders of before). Nothing by default."""
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "AutoraterConfig":
        """Build this class from a dict (``architecture``, when present, must be this class's). Unknown keys, wrong
        types and values out of their range (``ranges``) are errors naming the field (a part's: ``field 'outcome'
        ... field 'blocks'``); missing keys take today's default (after ``upgrade``)."""
        if not cls.architecture:
            raise TypeError("AutoraterConfig is the base of the architectures' configs: build one with "
                            "autorater.models.AutoConfig.from_dict (it reads 'architecture')")
        if d.get("architecture", cls.architecture) != cls.architecture:
            raise ValueError(f"a {cls.__name__} cannot hold architecture {d['architecture']!r}")
        d = {k: v for k, v in cls.upgrade(rename_fields(d)).items() if k != "architecture"}
        config = cls(**check_fields(cls, d, cls.__name__))
        size = config.decoded_size()
        pixels = config.clip_frames * size ** 2
        if pixels > MAX_CLIP_PIXELS:
            raise ValueError(f"{cls.__name__} fields 'clip_frames' x the decoded size^2 ({config.clip_frames} x "
                             f"{size}^2 = {pixels} pixels a rating) are over {MAX_CLIP_PIXELS} (fix: "
                             f"fewer frames or a smaller image_size / outcome.size)")
        return config

    @classmethod
    def parts(cls) -> dict[str, type["PartConfig"]]:
        """The fields that hold a part's own config (``GeneralConfig.outcome``), by name."""
        defaults = cls()
        return {f.name: type(getattr(defaults, f.name)) for f in dataclasses.fields(cls)
                if isinstance(getattr(defaults, f.name), PartConfig)}

    @classmethod
    def part_key(cls, key: str) -> tuple[str, str] | None:
        """``"outcome.blocks"`` (or the flat name older folders and flags use, ``"outcome_blocks"``) -> ``("outcome",
        "blocks")``; None for a field of the config itself."""
        for name, part in cls.parts().items():
            for prefix in (f"{name}.", f"{name}_"):
                if key.startswith(prefix) and key[len(prefix):] in {f.name for f in dataclasses.fields(part)}:
                    return name, key[len(prefix):]
        return None

    def save(self, path: str | Path) -> None:
        from autorater.data.files import write_text_atomic

        write_text_atomic(path, json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> "AutoraterConfig":
        """This class from a config.json (``AutoConfig.load``: the class the file names)."""
        return cls.from_dict(read_config_json(path))

    def replace(self, **changes) -> "AutoraterConfig":
        """A copy with ``changes``; a part's field by its dotted or flat name (``outcome_blocks=0``)."""
        nested: dict[str, dict] = {}
        for key in list(changes):
            at = self.part_key(key)
            if at is not None:
                nested.setdefault(at[0], {})[at[1]] = changes.pop(key)
        for name, sub in nested.items():
            changes[name] = dataclasses.replace(changes.get(name, getattr(self, name)), **sub)
        return dataclasses.replace(self, **changes)

    def decoded_size(self) -> int:
        """The size (px) a clip is decoded at for this model (the processor's ``decode_args``; a model may decode
        larger than ``image_size``)."""
        return self.image_size

    def without(self, part: str) -> "AutoraterConfig":
        """This config less the model part ``part`` (a model of it has no such part): none can be left out by
        default."""
        raise ValueError(f"a {type(self).__name__} model cannot be built without its {part!r} part")


def with_changes(d: dict, changes: dict, cls: type[AutoraterConfig]) -> dict:
    """A config dict of ``cls`` with ``changes`` applied: a part's field by its dotted or flat name
    (``outcome.blocks``, ``outcome_blocks``), a part's dict merged into the part's (checked by ``from_dict`` after)."""
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in d.items()}
    for key, value in changes.items():
        at = cls.part_key(key)
        if at is not None and isinstance(out.get(at[0]), dict):
            out[at[0]][at[1]] = value
        elif key in cls.parts() and isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def rename_fields(d: dict) -> dict:
    """A saved config dict with its fields' old names replaced by today's (``AutoraterConfig.renamed``)."""
    out = dict(d)
    for old, new in AutoraterConfig.renamed.items():
        if old in out:
            if new in out:
                raise ValueError(f"a model config holds both {old!r} and its new name {new!r} (fix: keep {new!r})")
            out[new] = out.pop(old)
    return out


@dataclass
class FrameEncoderConfig(AutoraterConfig):
    """The fields of an architecture that reads frames through a registered frame encoder: which one, which of its
    stages, how many of its block groups below that stage train, and the mean colours beside its features. What the
    encoder is (weights, input size, mean and std, stage map, what may train) lives in its spec
    (``autorater.encoders.FRAME_ENCODERS``), which checks these fields when the model is built."""

    ranges = {**AutoraterConfig.ranges, "encoder_stage": (0, 16), "trainable_blocks": (0, 64), "pixel_cells": (0, 16)}
    encoder: str = "efficientnet_lite0"  # a name in autorater.encoders.FRAME_ENCODERS
    encoder_stage: int = 2  # its feature stage (the spec's stage map: lite0 2 -> stride 8, 3 -> stride 16)
    trainable_blocks: int = 0  # the block groups below the stage that fine-tune (0: frozen, its features cached;
    #                            the blocks below them are frozen and their output cached)
    pixel_cells: int = 0  # mean colours of each position on a k x k sub-grid beside the features ("pixels": its cells)

    def encoder_options(self) -> dict:
        """What this config says about its frame encoder (``autorater.encoders.create_frame_encoder``): the stage it
        reads, the block groups that train, the mean colours beside the features."""
        return {"stage": self.encoder_stage, "trainable_blocks": self.trainable_blocks, "pixel_cells": self.pixel_cells,
                "patch_size": max(1, self.image_size // 8)}


__all__ = ["MAX_CLIP_PIXELS", "AutoraterConfig", "FrameEncoderConfig", "PartConfig", "check_fields", "read_config_json",
           "rename_fields", "with_changes"]
