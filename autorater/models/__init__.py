"""The model registry: one module per architecture, each with its own config dataclass and model class.

==============  ================================  ===================================================
architecture    module                            what
==============  ================================  ===================================================
``general``     ``autorater/models/general.py``   the default, for any camera: pretrained image
                                                  features (timm) and MiniLM sentence vectors into the
                                                  event head; nothing in it knows the world
``events``      ``autorater/models/events.py``    the BabyAI grid recipe (preset ``babyai-grid``):
                                                  tile colours, dead reckoning, the training words
``transformer`` ``autorater/models/transformer.py``  the first design: one clip-level transformer
==============  ================================  ===================================================

``Autorater(config)`` builds the class its config names; ``Autorater.from_pretrained(folder)`` reads
``config.json``'s ``architecture``. To add an architecture: a module with a config subclass and a model
subclass, and one line in :data:`ARCHITECTURES`.

Example:
    >>> PRESETS["general"].architecture, PRESETS["babyai-grid"].architecture
    ('general', 'events')
    >>> type(AutoraterConfig.from_dict({"architecture": "events", "places": 3})).__name__
    'EventsConfig'
"""

from __future__ import annotations

from autorater.config import AutoraterConfig
from autorater.models.events import EventsConfig, EventsRater
from autorater.models.general import GeneralConfig, GeneralRater
from autorater.models.transformer import TransformerConfig, TransformerRater

ARCHITECTURES: dict[str, tuple[type[AutoraterConfig], type]] = {
    "general": (GeneralConfig, GeneralRater),
    "events": (EventsConfig, EventsRater),
    "transformer": (TransformerConfig, TransformerRater),
}

DEFAULT_PRESET = "general"

_TRANSFORMER = TransformerConfig(encoder="efficientnet_lite0", pixel_cells=0, image_size=128, num_frames=32,
                                 text_encoder="minilm")

PRESETS: dict[str, AutoraterConfig] = {
    "general": GeneralConfig(),  # the default recipe, every world (README, "The model")
    "babyai-grid": EventsConfig(pose=True, front_places=True),  # BabyAI only: its grid, its words
    "base": EventsConfig(pose=True, front_places=True),  # the grid preset's name before the general model
    "transformer": _TRANSFORMER,
    # Tiny models for tests and quick checks.
    "tiny": EventsConfig(image_size=32, grid_size=4, pixel_cells=2, num_frames=8, places=2),
    "tiny-general": GeneralConfig(image_size=64, num_frames=8, queries=2, hidden=32),
    "tiny_transformer": _TRANSFORMER.replace(encoder="tiny_cnn", image_size=32, num_frames=8, text_encoder="bow",
                                             spatial_size=16, hidden_size=32, num_layers=1, num_heads=2, dropout=0.0),
}


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
                     f"AutoraterConfig.from_dict or a preset of autorater.models.PRESETS)")


def upgrade(d: dict) -> dict:
    """A saved config dict in today's terms: the folders of before each change still load."""
    if not isinstance(d, dict):
        raise ValueError(f"a model config must be a JSON object, got {type(d).__name__}")
    if "architecture" not in d:  # written before the field existed: the first design
        d = {**d, "architecture": "transformer"}
    if d["architecture"] == "events" and "place_inputs" not in d:  # the first events folders
        d = {**d, "place_inputs": False}
    if d["architecture"] == "general":  # folders from before the encoder could fine-tune: frozen, no reference
        d = {"trainable_blocks": 0, "reference_frame": False, "context_frames": -1, **d}
    return d


__all__ = ["ARCHITECTURES", "DEFAULT_PRESET", "PRESETS", "EventsConfig", "EventsRater", "GeneralConfig",
           "GeneralRater", "TransformerConfig", "TransformerRater", "config_class", "model_class", "upgrade"]
