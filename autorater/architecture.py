"""One registration per architecture (:class:`ArchitectureSpec`), and the processor that prepares its inputs.

Everything the rest of the product asks of an architecture is in its spec, registered once
(``autorater/models/__init__.py``): training, tuning, the CLI and loading read the spec and never test an
architecture's name. A :class:`Processor` is what a model reads of a video before any weight: the decoding
arguments, the resizing and picking of frames, and the cache key; ``Autorater.encode`` runs the frozen encoders over
what it prepares and returns a mapping that the feature cache and the batches carry without knowing its keys.

Example:
    >>> from autorater.models import ARCHITECTURES
    >>> spec = ARCHITECTURES["events"]
    >>> spec.config_class.__name__, sorted(spec.augmentations)
    ('EventsConfig', ['mirror', 'recolour', 'relax', 'rotate'])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from autorater.config import AutoraterConfig
from autorater.encoders import frame_encoder_spec

# The training augmentations (``TrainConfig.augment`` fields) an architecture may support; the data decides the rest
# (``training/stages/joint.py``: a rotation needs top-down suites, a recolour the world's palette, ...).
AUGMENTATIONS = ("rotate", "mirror", "recolour", "relax", "crop", "pixels")


def no_search_space(trial) -> tuple[dict, dict]:
    return {}, {}


def no_recipe_changes(config: AutoraterConfig) -> dict:
    return {}


def never(config: AutoraterConfig) -> bool:
    """False, whatever the config (the default of a spec's yes/no questions)."""
    return False


@dataclass(frozen=True)
class ArchitectureSpec:
    """What an architecture is, in one place.

    Attributes:
        name: ``config.json``'s ``architecture``.
        config_class, model_class: its config dataclass and its ``Autorater`` subclass.
        presets: named configs (``--config NAME``).
        recipe: the ``TrainConfig`` fields where its training recipe differs from the defaults (as a recipe file's
            ``train``: a stage's fields under its name).
        recipe_changes: how a config's recipe differs from the architecture's, by what the config says.
        search_space: what ``autorater tune`` draws beside the optimiser: (model config changes, recipe changes).
        lr_range: the peak learning rates ``autorater tune`` tries.
        learns_words: whether a config of it reads the training set's words (``vocab`` filled at training).
        init_keys: the config fields a starting model (``init_from``) must share with the run it starts.
        augmentations: which of :data:`AUGMENTATIONS` its inputs allow (the data may rule more out).

    How a model of it trains is not here: its parts say (``Autorater.parts``, each naming its stage:
    ``training/plan.py``).
    """

    name: str
    config_class: type
    model_class: type
    presets: dict[str, AutoraterConfig] = field(default_factory=dict)
    recipe: dict = field(default_factory=dict)
    recipe_changes: Callable[[AutoraterConfig], dict] = no_recipe_changes
    search_space: Callable = no_search_space
    lr_range: tuple[float, float] = (5e-4, 5e-3)
    learns_words: Callable[[AutoraterConfig], bool] = never
    init_keys: tuple[str, ...] = ()
    augmentations: frozenset = frozenset()

    def processor(self, config: AutoraterConfig) -> "Processor":
        """The processor of a config of this architecture (its model class's ``processor_class``)."""
        return self.model_class.processor_class(config)

    def __post_init__(self):
        unknown = set(self.augmentations) - set(AUGMENTATIONS)
        if unknown:
            raise ValueError(f"{self.name}: unknown augmentations {sorted(unknown)}; known: {AUGMENTATIONS}")
        names = (self.config_class.architecture, self.name)
        if len(set(names)) > 1 or self.model_class.config_class is not self.config_class:
            raise ValueError(f"{self.name}: its config class must name it and its model class take that config")


class Processor:
    """What a model of ``config`` reads of a video, before any weight: decoding, frames picked and resized, and the
    name of what its cache holds. The base decodes ``clip_frames`` frames of ``image_size`` and hands them on."""

    def __init__(self, config: AutoraterConfig):
        self.config = config

    def decode_args(self, takeover_s: float | None = None) -> dict:
        """Keyword arguments of ``autorater.data.video.read_video`` that give the model its frames (of a clip taken
        over at ``takeover_s``: a model that reads nothing of the replayed context is decoded from the takeover on)."""
        config = self.config
        return {"num_frames": config.clip_frames, "size": config.decoded_size(), "fit": config.frame_fit}

    def prepare(self, frames: torch.Tensor, times_s: torch.Tensor, takeover_s: torch.Tensor) -> dict:
        """Decoded clips (b, t, H, W, 3) uint8 -> what each of the model's encoders reads: ``"x"`` the stream of every
        frame, and whatever else the architecture reads (its own keys)."""
        return {"x": frames}

    def cache_key(self, frozen: bool) -> str:
        """A name for the inputs this config caches (training/inputs/cache.py): the same key, the same inputs."""
        config = self.config
        return f"frames-{config.image_size}px-{config.clip_frames}f{'-pad' if config.frame_fit == 'pad' else ''}"

    def augment(self, encoded: dict, rng) -> dict:
        """Training-time augmentation of a batch's cached per-clip inputs (what ``encode`` returned beside ``"x"``),
        drawing from ``rng`` (numpy) only when it changes them. Nothing by default."""
        return encoded


class FrameProcessor(Processor):
    """A model that reads frames through a registered frame encoder (``FrameEncoderConfig``): its cache holds the
    encoder's frozen part's output (all of it when nothing trains), or the frames."""

    def cache_key(self, frozen: bool) -> str:
        config = self.config
        if frozen and frame_encoder_spec(config.encoder).raw_colours:  # its cells: the grid, not a stage
            return f"pixels-{config.grid_size}g-{config.pixel_cells}k-{config.image_size}px-{config.clip_frames}f"
        if frozen:
            pixels = f"-pix{config.pixel_cells}" if config.pixel_cells else ""
            top = f"-top{config.trainable_blocks}" if config.trainable_blocks else ""  # the cache: the blocks below
            return f"{config.encoder}-stage{config.encoder_stage}{top}-{config.image_size}px-{config.clip_frames}f" \
                   f"{pixels}"
        return super().cache_key(frozen)


__all__ = ["AUGMENTATIONS", "ArchitectureSpec", "FrameProcessor", "Processor"]
