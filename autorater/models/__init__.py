"""The model registry: one :class:`ArchitectureSpec` per architecture, registered here, in one place.

==============  ================================  ===================================================
architecture    module                            what
==============  ================================  ===================================================
``general``     ``autorater/models/general.py``   the default, for any camera: pretrained image
                                                  features (timm) and MiniLM sentence vectors; composed
                                                  of the event stream (the marker) and the outcome path
``events``      ``autorater/models/events/``      the BabyAI grid recipe (preset ``babyai-grid``):
                                                  tile colours, dead reckoning, the training words
==============  ================================  ===================================================

``AutoModel.from_config(config)`` builds the class its config names; ``AutoModel.from_pretrained(folder)`` reads
``config.json``'s ``architecture`` (``AutoConfig``): the dispatch lives here, above the base classes, which know none
of their subclasses. To add an architecture: a module with a config class, a model class and its ``SPEC``
(``autorater.architecture.ArchitectureSpec``), and one line in :data:`ARCHITECTURES`. The first design
(``transformer``) is retired: its folders are refused with the release that still reads them
(:data:`RETIRED`).

Example:
    >>> PRESETS["general"].architecture, PRESETS["babyai-grid"].architecture
    ('general', 'events')
    >>> type(AutoConfig.from_dict({"architecture": "events", "places": 3})).__name__
    'EventsConfig'
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from autorater.architecture import ArchitectureSpec, Processor
from autorater.config import AutoraterConfig, read_config_json, rename_fields
from autorater.model import CONFIG_FILE, Autorater
from autorater.models import events, general
from autorater.models.events import EventsConfig, EventsModel
from autorater.models.general import GeneralConfig, GeneralModel

ARCHITECTURES: dict[str, ArchitectureSpec] = {spec.name: spec for spec in (
    general.SPEC,
    events.SPEC,
)}

DEFAULT_PRESET = "general"

PRESETS: dict[str, AutoraterConfig] = {name: config for spec in ARCHITECTURES.values()
                                       for name, config in spec.presets.items()}

# Architectures no longer built, and the last release that reads their folders.
RETIRED = {"transformer": "autorater 0.1.0 (git commit 169eba9, 2026-11-27)"}


# Every field of the one config all architectures shared before the registry: a saved ``config.json`` of that time
# holds all of them, whatever its architecture; on loading, those that the architecture does not have are dropped
# (it never read them). Any other unknown key is an error.
LEGACY_SHARED_FIELDS = frozenset((
    "architecture encoder encoder_stage pixel_cells grid_size patch_size image_size num_frames frame_diff "
    "text_encoder max_text_tokens use_instruction vocab places place_inputs pose front_places members mirror_tta "
    "token_norm grounding text_slots spatial_size hidden_size num_layers num_heads dropout event_pooling mlp_heads "
    "frame_pool direct_pool cell_verify verify_window verify_words verify_places marker_head failure_modes").split())


def spec_of(config: AutoraterConfig | str) -> ArchitectureSpec:
    """The registered spec of a config (or of an architecture's name)."""
    name = config if isinstance(config, str) else config.architecture
    if name in RETIRED:
        raise ValueError(f"architecture {name!r} (the first design) is retired; {RETIRED[name]} is the last release "
                         f"that reads its folders (fix: load it with that release, or retrain: autorater train "
                         f"--config general)")
    if name not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {name!r}; known: {', '.join(ARCHITECTURES)}")
    spec = ARCHITECTURES[name]
    if not isinstance(config, str) and type(config) is not spec.config_class:
        raise ValueError(f"no architecture is registered for {type(config).__name__} (fix: build the config with "
                         f"AutoConfig.from_dict or a preset of autorater.models.PRESETS)")
    return spec


def config_class(architecture: str) -> type[AutoraterConfig]:
    if not isinstance(architecture, str):  # from a file: config.json, a recipe file's "model"
        raise ValueError(f"field 'architecture' must be a string (one of {', '.join(ARCHITECTURES)}), got "
                         f"{str(architecture)[:60]!r}")
    return spec_of(architecture).config_class


def model_class(config: AutoraterConfig) -> type:
    """The model class of ``config``'s architecture."""
    return spec_of(config).model_class


def processor_for(config: AutoraterConfig) -> Processor:
    """What a model of ``config`` reads of a video (its decoding arguments, its cache key), without building it."""
    return spec_of(config).processor(config)


class AutoConfig:
    """The config class a dict or a ``config.json`` names (``architecture``): the dispatch above the base classes.

    Example:
        >>> type(AutoConfig.from_dict({"architecture": "events", "places": 3})).__name__
        'EventsConfig'
    """

    @staticmethod
    def from_dict(d: dict) -> AutoraterConfig:
        if not isinstance(d, dict):
            raise ValueError(f"a model config must be a JSON object, got {type(d).__name__}")
        if "architecture" not in d:  # written before the field existed: the first design
            d = {**d, "architecture": "transformer"}
        d, target = rename_fields(d), config_class(d["architecture"])
        names = {f.name for f in dataclasses.fields(target)}
        return target.from_dict({k: v for k, v in d.items()
                                 if k in names or k == "architecture" or k not in LEGACY_SHARED_FIELDS})

    @staticmethod
    def load(path: str | Path) -> AutoraterConfig:
        return AutoConfig.from_dict(read_config_json(path))


class AutoModel:
    """The model class a config names: ``from_config`` builds it, ``from_pretrained`` loads a model folder.

    Example:
        >>> type(AutoModel.from_config(PRESETS["tiny"])).__name__
        'EventsModel'
    """

    @staticmethod
    def from_config(config: AutoraterConfig) -> Autorater:
        return model_class(config)(config)

    @staticmethod
    def from_pretrained(path: str | Path, allow_unverified: bool = False) -> Autorater:
        """``<the folder's architecture>.from_pretrained(path)``: JSON and safetensors only, checked (see
        ``Autorater.from_pretrained``)."""
        path = Autorater.check_folder(path)
        try:
            config = AutoConfig.load(path / CONFIG_FILE)
        except ValueError as err:  # an unknown field, a wrong type or an unknown architecture: name the file
            msg = str(err)
            fix = "" if "(fix:" in msg else " (fix: restore the config.json saved with this model)"
            raise ValueError(msg if str(path / CONFIG_FILE) in msg else f"{path / CONFIG_FILE}: {msg}{fix}") from None
        return model_class(config).from_pretrained(path, allow_unverified=allow_unverified, config=config)


__all__ = ["ARCHITECTURES", "DEFAULT_PRESET", "PRESETS", "RETIRED", "ArchitectureSpec", "AutoConfig", "AutoModel",
           "EventsConfig", "EventsModel", "GeneralConfig", "GeneralModel", "config_class", "model_class",
           "processor_for", "spec_of"]
