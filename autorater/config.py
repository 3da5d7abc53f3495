"""The model's configuration: a typed dataclass whose defaults are the real recipe; presets are instances."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class AutoraterConfig:
    """Architecture of an Autorater. Saved as ``config.json`` in a model folder.

    Example:
        >>> cfg = PRESETS["tiny"]
        >>> AutoraterConfig.from_dict(cfg.to_dict()) == cfg
        True
    """

    # The model: "events" (per-frame events chained into a competing-risks likelihood, autorater/events.py:
    # the recipe) or "transformer" (the first design: one clip-level transformer, the ``PRESETS["transformer"]``).
    architecture: str = "events"
    # Frames: decoded at ``image_size`` x ``image_size``, ``num_frames`` sampled uniformly over the video (a clip
    # shorter than that repeats frames; the events model skips the repeats, so every frame is seen once).
    encoder: str = "pixels"  # name in autorater.encoders.FRAME_ENCODERS
    encoder_stage: int = 3  # timm feature stage of lite0: 2 -> stride 8 (40 ch, 16x16), 3 -> stride 16 (112 ch, 8x8)
    pixel_cells: int = 4  # raw colours of each cell on a k x k sub-grid (3 k^2 channels): the "pixels" encoder's
    #                       output, or (lite0) beside its features: ImageNet features ignore colour, instructions do not
    grid_size: int = 7  # "pixels" encoder: cells per side (7 at 112 px: one cell per tile of a 7 x 7 first-person view)
    patch_size: int = 0  # "patch" encoder: pixels per patch (0: image_size // 8, an 8 x 8 grid)
    image_size: int = 112
    num_frames: int = 72  # 9 s at 8 fps: every frame of the generated suites' continuations
    frame_diff: bool = True  # feed the change from the previous frame beside each frame's features
    # Instruction.
    text_encoder: str = "bow"  # name in autorater.encoders.TEXT_ENCODERS
    max_text_tokens: int = 24
    use_instruction: bool = True  # False = the instruction-blind baseline
    vocab: list[str] = field(default_factory=list)  # for the learned "bow" text encoder, set at training
    # Events: the instruction is matched at this many learned places of the grid (autorater/events.py).
    places: int = 8
    place_inputs: bool = True  # the event classifier also reads each place's match, not only their sum
    pose: bool = False  # events, "pixels" cells of first-person video: dead reckoning from the first frame
    #                     (autorater/pose.py) tells the instruction match which side of the first pose ("on your
    #                     left") the cell in front of the agent lies on
    front_places: bool = False  # events, first-person cells: two more places at fixed spots, the cell in front
    #                             of the agent and the best of its three neighbours ("put X next to Y")
    members: int = 1  # events: independently initialised event heads trained side by side, their outcome
    #                   distributions averaged (a deep ensemble in one model folder)
    mirror_tta: bool = False  # events, "pixels" cells: at prediction, also rate every clip mirrored left-right
    #                           (with "left" and "right" swapped in its instruction) and average the two
    #                           outcome distributions, like two members of an ensemble (autorater/mirror.py)
    # Transformer. Fusion: a spatial FiLM block per frame, then a transformer over frame tokens attending to the text.
    token_norm: bool = False  # LayerNorm the frame tokens before adding time/phase embeddings (without it the
    #                          video content is ~2% of a token); an experiment: no measured gain yet (README)
    grounding: str = "film"  # per-frame block: "film" (FiLM + attention pool) or "cells" (per-cell text scores)
    text_slots: int = 4  # "cells": learned queries reading the instruction (the object, the place, ...)
    spatial_size: int = 64
    hidden_size: int = 128
    num_layers: int = 2
    num_heads: int = 4
    dropout: float = 0.1
    # Heads.
    event_pooling: bool = False  # success head also reads the frame tokens weighted by the predicted marker
    mlp_heads: bool = False  # success and match heads: an MLP over [their inputs, the pooled instruction]
    frame_pool: bool = False  # success and match heads also read the max over frames of the fused tokens
    direct_pool: bool = False  # success and match heads also read the mean text-conditioned frame token from
    #                           before the transformer (a short path for the instruction-video interaction)
    cell_verify: bool = False  # locate, then verify: the instruction scores every cell of the frames just before
    #                           the predicted marker; the score is added to the success and match logits
    verify_window: int = 6  # frames before the predicted marker that "verify" reads (markers lag the event)
    verify_words: bool = False  # the verifier reads the instruction through its own learned word embeddings
    #                            (over ``vocab``) instead of the model's text tokens (README: the probe behind it)
    verify_places: int = 0  # > 0: the verifier reads each frame at this many learned places (a softmax over the
    #                        grid each: PlacePool) instead of one linear map of the whole grid (README: the probe)
    marker_head: str = "distribution"  # "distribution": softmax over frames + end; "crossing": per-frame reached
    failure_modes: list[str] = field(default_factory=list)  # set at training from the labels

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "AutoraterConfig":
        """Build from a dict; unknown keys are an error, missing keys take today's default (old folders load)."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown AutoraterConfig field(s) {sorted(unknown)}; known: {sorted(names)}")
        if "architecture" not in d and d:  # a folder written before the field existed: the first design
            d = {**d, "architecture": "transformer"}
        if d.get("architecture") == "events" and "place_inputs" not in d:  # the first events folders
            d = {**d, "place_inputs": False}
        defaults = cls()
        for key, value in d.items():
            want = type(getattr(defaults, key))
            ok = isinstance(value, want) and not (want is not bool and isinstance(value, bool))
            if want is float and isinstance(value, int) and not isinstance(value, bool):
                ok = True
            if not ok:
                raise ValueError(f"AutoraterConfig field {key!r} must be {want.__name__}, got {value!r}")
        return cls(**d)

    def save(self, path: str | Path) -> None:
        from data.files import write_text_atomic

        write_text_atomic(path, json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> "AutoraterConfig":
        try:
            d = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ValueError(f"cannot read model config {path}: {err} (fix: restore config.json from the "
                             f"model folder you saved)") from None
        if not isinstance(d, dict):
            raise ValueError(f"model config {path} must be a JSON object")
        return cls.from_dict(d)

    def replace(self, **changes) -> "AutoraterConfig":
        return dataclasses.replace(self, **changes)


ARCHITECTURES = ("events", "transformer")

_TRANSFORMER = AutoraterConfig(architecture="transformer", encoder="efficientnet_lite0", pixel_cells=0, image_size=128,
                               num_frames=32, text_encoder="minilm")

PRESETS: dict[str, AutoraterConfig] = {
    "tiny": AutoraterConfig(image_size=32, grid_size=4, pixel_cells=2, num_frames=8, places=2),
    "tiny_transformer": _TRANSFORMER.replace(encoder="tiny_cnn", image_size=32, num_frames=8, text_encoder="bow",
                                             spatial_size=16, hidden_size=32, num_layers=1, num_heads=2, dropout=0.0),
    "base": AutoraterConfig(pose=True, front_places=True),  # the recipe (README, "The model")
    "transformer": _TRANSFORMER,
}
