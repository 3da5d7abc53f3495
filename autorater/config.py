"""The model's configuration: one typed dataclass per architecture (``autorater/models/``) on a small common base.

``AutoraterConfig`` holds what every architecture has (which frames it reads, the failure modes it
names); each architecture's module subclasses it with its own fields and nothing of another's.
``AutoraterConfig.from_dict`` picks the class from the ``architecture`` key, so every saved
``config.json`` (including folders written before the registry, by one shared config) loads.

Example:
    >>> from autorater.models import PRESETS
    >>> cfg = PRESETS["tiny"]
    >>> AutoraterConfig.from_dict(cfg.to_dict()) == cfg
    True
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

# Every field of the one config all architectures shared before the registry (autorater/models/): a saved
# ``config.json`` of that time holds all of them, whatever its architecture; on loading, those that the
# architecture does not have are dropped (it never read them). Any other unknown key is an error.
SHARED_CONFIG_FIELDS = frozenset((
    "architecture encoder encoder_stage pixel_cells grid_size patch_size image_size num_frames frame_diff "
    "text_encoder max_text_tokens use_instruction vocab places place_inputs pose front_places members mirror_tta "
    "token_norm grounding text_slots spatial_size hidden_size num_layers num_heads dropout event_pooling mlp_heads "
    "frame_pool direct_pool cell_verify verify_window verify_words verify_places marker_head failure_modes").split())


# The range of every number a config may hold (by field name, across the architectures): a config.json whose value is
# outside it is refused on loading, naming the field, before a model is built from it (``image_size`` 1e9 would
# otherwise allocate; 0 would crash deep inside). A number field not listed here must lie in 0..1e6.
FIELD_RANGES: dict[str, tuple[float, float]] = {
    "image_size": (16, 1024), "num_frames": (1, 1024), "encoder_stage": (0, 6), "pixel_cells": (0, 16),
    "grid_size": (1, 64), "patch_size": (0, 256), "max_text_tokens": (1, 512), "places": (0, 256),
    "members": (1, 16), "queries": (1, 64), "hidden": (1, 4096), "hidden_size": (1, 4096), "spatial_size": (1, 4096),
    "num_layers": (1, 64), "num_heads": (1, 64), "text_slots": (1, 64), "verify_window": (0, 1024),
    "verify_places": (0, 256), "dropout": (0.0, 1.0), "trainable_blocks": (0, 16), "context_frames": (-1, 1024)}
MAX_CONFIG_LIST, MAX_CONFIG_TEXT = 200_000, 200  # entries of a list field (the vocabulary); characters of a string


def _check_ranges(name: str, d: dict) -> None:
    """ValueError naming the field of ``d`` (a config of class ``name``) whose value is out of its range."""
    for key, value in d.items():
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            low, high = FIELD_RANGES.get(key, (0, 1_000_000))
            if not low <= value <= high:  # int vs float compares exactly, without overflow; NaN fails it too
                raise ValueError(f"{name} field {key!r} must be in {low:g}..{high:g}, got {str(value)[:40]}")
        elif isinstance(value, str) and len(value) > MAX_CONFIG_TEXT:
            raise ValueError(f"{name} field {key!r} is {len(value)} characters long, over {MAX_CONFIG_TEXT}")
        elif isinstance(value, list):
            if len(value) > MAX_CONFIG_LIST:
                raise ValueError(f"{name} field {key!r} has {len(value)} entries, over {MAX_CONFIG_LIST}")
            bad = next((v for v in value if not isinstance(v, str) or len(v) > MAX_CONFIG_TEXT), None)
            if bad is not None:
                raise ValueError(f"{name} field {key!r} must hold strings of up to {MAX_CONFIG_TEXT} characters, got "
                                 f"{str(bad)[:40]!r}")


@dataclass
class AutoraterConfig:
    """What every architecture has. Saved as ``config.json`` in a model folder, with ``architecture``."""

    architecture: ClassVar[str] = ""  # the registry's name (autorater/models/__init__.py)
    image_size: int = 112  # frames are decoded at image_size x image_size
    num_frames: int = 72  # sampled uniformly over the video; a shorter clip pads (the events models skip repeats)
    use_instruction: bool = True  # False = the instruction-blind baseline
    failure_modes: list[str] = field(default_factory=list)  # set at training from the labels
    # How a frame of another shape becomes image_size x image_size: "stretch" (resize, the grid recipes: their
    # videos are square) or "pad" (resize the longer side, centre it on black: the aspect is kept).
    frame_fit: ClassVar[str] = "stretch"

    def to_dict(self) -> dict:
        return {"architecture": self.architecture, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, d: dict) -> "AutoraterConfig":
        """Build from a dict; the class comes from ``architecture`` (on ``AutoraterConfig`` itself; a subclass
        insists on its own). Unknown keys, wrong types and values out of their range (``FIELD_RANGES``) are errors
        naming the field; missing keys take today's default."""
        from autorater.models import config_class, upgrade

        d = upgrade(d)
        target = config_class(d["architecture"])
        if cls is not AutoraterConfig and target is not cls:
            raise ValueError(f"a {cls.__name__} cannot hold architecture {d['architecture']!r}")
        names = {f.name for f in dataclasses.fields(target)}
        unknown = set(d) - names - {"architecture"}
        if unknown - SHARED_CONFIG_FIELDS:
            raise ValueError(f"unknown {target.__name__} field(s) {sorted(unknown - SHARED_CONFIG_FIELDS)}; "
                             f"known: {sorted(names)}")
        d = {k: v for k, v in d.items() if k in names}  # the shared config's other fields: never read here
        defaults = target()
        for key, value in d.items():
            want = type(getattr(defaults, key))
            ok = isinstance(value, want) and not (want is not bool and isinstance(value, bool))
            if want is float and isinstance(value, int) and not isinstance(value, bool):
                ok = True
            if not ok:
                raise ValueError(f"{target.__name__} field {key!r} must be {want.__name__}, got {str(value)[:60]!r}")
        _check_ranges(target.__name__, d)
        return target(**d)

    def save(self, path: str | Path) -> None:
        from data.files import write_text_atomic

        write_text_atomic(path, json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> "AutoraterConfig":
        try:
            d = json.loads(Path(path).read_text(encoding="utf-8"))
        except RecursionError:
            raise ValueError(f"model config {path} is nested too deeply to be a config (fix: restore config.json "
                             f"from the model folder you saved)") from None
        except (OSError, UnicodeDecodeError, ValueError) as err:  # JSONDecodeError, and 4,300+ digit integers
            raise ValueError(f"cannot read model config {path}: {str(err)[:200]} (fix: restore config.json from the "
                             f"model folder you saved)") from None
        if not isinstance(d, dict):
            raise ValueError(f"model config {path} must be a JSON object")
        return cls.from_dict(d)

    def replace(self, **changes) -> "AutoraterConfig":
        return dataclasses.replace(self, **changes)

    def decode_args(self, takeover_s: float | None = None) -> dict:
        """Keyword arguments of ``data.video.read_video`` that give this model its frames (of a clip taken over at
        ``takeover_s``: a model that reads nothing of the replayed context is decoded from the takeover on)."""
        return {"num_frames": self.num_frames, "size": self.image_size, "fit": self.frame_fit}

    lr_range: ClassVar[tuple[float, float]] = (5e-4, 5e-3)  # the peak learning rates ``autorater tune`` tries

    def search_space(self, trial) -> tuple[dict, dict]:
        """What ``autorater tune`` draws for this architecture beside the optimiser (an Optuna trial's
        ``suggest_*``): (model config changes, training recipe changes). Nothing by default."""
        return {}, {}

    def feature_key(self, frozen: bool) -> str:
        """A name for the inputs this config caches (training/cache.py): the same key, the same features."""
        return f"frames-{self.image_size}px-{self.num_frames}f{'-pad' if self.frame_fit == 'pad' else ''}"


def encoder_feature_key(config, frozen: bool) -> str | None:
    """The cache key of a frozen frame encoder's features for the configs that name one (``encoder``,
    ``encoder_stage``, ``pixel_cells``, ``grid_size``: the events and transformer architectures); None otherwise."""
    if frozen and config.encoder == "pixels":
        return f"pixels-{config.grid_size}g-{config.pixel_cells}k-{config.image_size}px-{config.num_frames}f"
    if frozen:
        pixels = f"-pix{config.pixel_cells}" if config.pixel_cells else ""
        return f"{config.encoder}-stage{config.encoder_stage}-{config.image_size}px-{config.num_frames}f{pixels}"
    return None


__all__ = ["FIELD_RANGES", "AutoraterConfig", "SHARED_CONFIG_FIELDS", "encoder_feature_key"]
