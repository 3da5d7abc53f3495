"""The model registry: one module per architecture, each with its own config dataclass and model class.

==============  ================================  ===================================================
architecture    module                            what
==============  ================================  ===================================================
``general``     ``autorater/models/general.py``   the default, for any camera: pretrained image
                                                  features (timm) and MiniLM sentence vectors into the
                                                  event head; nothing in it knows the world
``events``      ``autorater/models/events/model.py``    the BabyAI grid recipe (preset ``babyai-grid``):
                                                  tile colours, dead reckoning, the training words
``transformer`` ``autorater/models/transformer.py``  the first design: one clip-level transformer
==============  ================================  ===================================================

``AutoModel.from_config(config)`` builds the class its config names; ``AutoModel.from_pretrained(folder)`` reads
``config.json``'s ``architecture`` (``AutoConfig``): the dispatch lives here, above the base classes, which know none
of their subclasses. To add an architecture: a module with a config subclass and a model subclass (``config_class``
set), and one line in :data:`ARCHITECTURES`.

Example:
    >>> PRESETS["general"].architecture, PRESETS["babyai-grid"].architecture
    ('general', 'events')
    >>> type(AutoConfig.from_dict({"architecture": "events", "places": 3})).__name__
    'EventsConfig'
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from autorater.config import AutoraterConfig, read_config_json, rename_fields
from autorater.model import CONFIG_FILE, Autorater
from autorater.models.events import EventsConfig, EventsModel
from autorater.models.general import GeneralConfig, GeneralModel
from autorater.models.transformer import TransformerConfig, TransformerModel

ARCHITECTURES: dict[str, tuple[type[AutoraterConfig], type]] = {
    "general": (GeneralConfig, GeneralModel),
    "events": (EventsConfig, EventsModel),
    "transformer": (TransformerConfig, TransformerModel),
}

DEFAULT_PRESET = "general"

_TRANSFORMER = TransformerConfig(encoder="efficientnet_lite0", pixel_cells=0, image_size=128, clip_frames=32,
                                 text_encoder="minilm")

PRESETS: dict[str, AutoraterConfig] = {
    "general": GeneralConfig(),  # the default recipe, every world (README, "The model")
    # The parts trained apart on a frozen cache, five outcome heads (issue 49): better on unseen scenarios and agents
    # from one camera, worse on unseen tasks, unmeasured on BabyAI (docs/results/2026-11-27-parts-apart.md)
    "general-parts": GeneralConfig(outcome_blocks=0, outcome_dim=128, outcome_pooling="max", outcome_members=5),
    "babyai-grid": EventsConfig(pose=True, front_places=True),  # BabyAI only: its grid, its words
    "base": EventsConfig(pose=True, front_places=True),  # the grid preset's name before the general model
    "transformer": _TRANSFORMER,
    # Tiny models for tests and quick checks.
    "tiny": EventsConfig(image_size=32, grid_size=4, pixel_cells=2, clip_frames=8, places=2),
    "tiny-general": GeneralConfig(image_size=64, clip_frames=8, queries=2, hidden=32, outcome_size=64, outcome_dim=32,
                                  outcome_members=2, outcome_blocks=0, outcome_pooling="max",
                                  outcome_queries=2, outcome_layers=1),
    "tiny_transformer": _TRANSFORMER.replace(encoder="tiny_cnn", image_size=32, clip_frames=8, text_encoder="bow",
                                             spatial_size=16, hidden_size=32, num_layers=1, num_heads=2, dropout=0.0),
}


# Every field of the one config all architectures shared before the registry: a saved ``config.json`` of that time
# holds all of them, whatever its architecture; on loading, those that the architecture does not have are dropped
# (it never read them). Any other unknown key is an error.
LEGACY_SHARED_FIELDS = frozenset((
    "architecture encoder encoder_stage pixel_cells grid_size patch_size image_size num_frames frame_diff "
    "text_encoder max_text_tokens use_instruction vocab places place_inputs pose front_places members mirror_tta "
    "token_norm grounding text_slots spatial_size hidden_size num_layers num_heads dropout event_pooling mlp_heads "
    "frame_pool direct_pool cell_verify verify_window verify_words verify_places marker_head failure_modes").split())


def config_class(architecture: str) -> type[AutoraterConfig]:
    if architecture not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {architecture!r}; known: {', '.join(ARCHITECTURES)}")
    return ARCHITECTURES[architecture][0]


def model_class(config: AutoraterConfig) -> type:
    """The model class of ``config``'s architecture."""
    for config_type, model_type in ARCHITECTURES.values():
        if type(config) is config_type:
            return model_type
    raise ValueError(f"no architecture is registered for {type(config).__name__} (fix: build the config with "
                     f"AutoConfig.from_dict or a preset of autorater.models.PRESETS)")


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
            raise ValueError(msg if str(path / CONFIG_FILE) in msg else f"{path / CONFIG_FILE}: {msg} (fix: "
                             f"restore the config.json saved with this model)") from None
        return model_class(config).from_pretrained(path, allow_unverified=allow_unverified, config=config)


__all__ = ["ARCHITECTURES", "DEFAULT_PRESET", "PRESETS", "AutoConfig", "AutoModel", "EventsConfig", "EventsModel",
           "GeneralConfig", "GeneralModel", "TransformerConfig", "TransformerModel", "config_class", "model_class"]
