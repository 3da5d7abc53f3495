"""The BabyAI grid recipe (``architecture="events"``, preset ``babyai-grid``): the event head on tile cells.

A frame is a ``grid_size`` x ``grid_size`` grid of tile colours (``pixel_cells`` x ``pixel_cells`` averages
inside each tile, the "pixels" encoder); the instruction is a bag of the training set's words; with ``pose``
the agent's pose is dead-reckoned from the first frame and ``front_places`` adds the cell in front of the agent.
It is very good on BabyAI's own renderer (README, "The model") and cannot read a camera's video: the
``general`` architecture is the default. The event head itself, and its competing-risks likelihood, are in
``head.py`` beside this module; ``stream.py`` chains the heads' per-frame events into the clip's outcome, a part the
general model is also built from (``autorater/models/parts/``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import torch

from autorater.architecture import ArchitectureSpec, FrameProcessor
from autorater.config import FrameEncoderConfig
from autorater.model import Autorater, AutoraterOutput, Targets
from autorater.models.events.head import EventHead
from autorater.models.events.mirror import mirror_all, mirror_words
from autorater.models.parts import stream
from autorater.models.parts.risks import WINDOW_S
from autorater.models.parts.stream import EventStream, event_classes


@dataclass
class EventsConfig(FrameEncoderConfig):
    """The grid recipe's fields."""

    architecture = "events"
    ranges = {**FrameEncoderConfig.ranges, "grid_size": (1, 64), "max_text_tokens": (1, 512), "places": (0, 256),
              "members": (1, 16)}
    encoder: str = "pixels"  # "pixels": tile colours (a timm encoder in folders trained before the general model)
    encoder_stage: int = 3
    pixel_cells: int = 4  # raw colours of each cell on a k x k sub-grid (3 k^2 channels)
    grid_size: int = 7  # "pixels" encoder: cells per side (7 at 112 px: one cell per tile of a 7 x 7 view)
    text_encoder: str = "bow"  # "bow": the training set's words; "minilm": frozen sentence vectors
    max_text_tokens: int = 24
    vocab: list[str] = field(default_factory=list)  # set at training
    places: int = 8  # learned places of the grid the instruction is matched at (autorater/models/events/head.py)
    place_inputs: bool = True  # the event classifier also reads each place's match, not only their sum
    pose: bool = False  # dead reckoning from the first frame (pose.py): which side of the first pose ("on your
    #                     left") the cell in front of the agent lies on
    front_places: bool = False  # two more places at fixed spots: the cell in front of the agent and the best of
    #                             its three neighbours ("put X next to Y")
    members: int = 1  # independently initialised event heads, their outcome distributions averaged (an ensemble)
    mirror_tta: bool = False  # at prediction, also rate every clip mirrored left-right ("left" <-> "right")

    @classmethod
    def upgrade(cls, d: dict) -> dict:
        """The first events folders read no place inputs."""
        return d if "place_inputs" in d else {**d, "place_inputs": False}

    def encoder_options(self) -> dict:
        return {**super().encoder_options(), "grid_size": self.grid_size}


def events_search_space(trial) -> tuple[dict, dict]:
    """=====================  ===================  =============================================
    places                 2 .. 8               learned places the instruction is matched at
    match_weight           0.3 .. 3.0, log      loss weight of the instruction match
    counterfactual_weight  0.1 .. 1.0, log      loss weight of P(success) under another instruction
    match_warmup_epochs    0, 5, 10, 15, 20     epochs training the match alone first
    =====================  ===================  ============================================="""
    return {"places": trial.suggest_int("places", 2, 8)}, event_loss_space(trial)


def event_loss_space(trial) -> dict:
    """The event stream's loss weights and match warm-up (its stage's recipe, ``TrainConfig.stream``), as ``autorater
    tune`` draws them."""
    return {"stream": {"match_weight": trial.suggest_float("match_weight", 0.3, 3.0, log=True),
                       "counterfactual_weight": trial.suggest_float("counterfactual_weight", 0.1, 1.0, log=True),
                       "match_warmup_epochs": trial.suggest_int("match_warmup_epochs", 0, 20, step=5)}}


class EventsModel(Autorater):
    """The event stream (:class:`EventStream`: per-frame events chained into a competing-risks likelihood over the
    clip) with :class:`EventHead` on tile cells. With ``mirror_tta``, prediction also mixes in each member's rating of
    the mirrored clips."""

    config_class = EventsConfig
    processor_class = FrameProcessor
    weight_names = (stream.legacy_name,)

    def __init__(self, config: EventsConfig):
        super().__init__(config)
        for option, on in (("pose", config.pose), ("front_places", config.front_places),
                           ("mirror_tta", config.mirror_tta)):
            if on and not self.frame_encoder.raw_colours:
                raise ValueError(f"{option} reads first-person 'pixels' cells; encoder {config.encoder!r} has "
                                 f"none (fix: set {option} to false, or use the pixels encoder)")
        grid = self.grid_size()
        classes = 1 + len(event_classes(config.failure_modes))
        self.stream = EventStream([EventHead(
            self.frame_encoder.out_channels, grid[0] * grid[1], config.vocab, classes,
            config.places, use_instruction=config.use_instruction, raw_colours=self.frame_encoder.raw_colours,
            place_inputs=config.place_inputs, pose_cells=config.pixel_cells if config.pose else 0,
            front_places=config.front_places, grid=grid[0], text=config.text_encoder) for _ in range(config.members)],
            config.failure_modes)

    def views(self, features: torch.Tensor, instructions: list[str]) -> list[tuple[torch.Tensor, list[str]]]:
        """The inputs each member rates at prediction: the clips, and with ``mirror_tta`` their mirror."""
        views = [(features, instructions)]
        if self.config.mirror_tta:
            views.append((mirror_all(features, self.config.pixel_cells), [mirror_words(t) for t in instructions]))
        return views

    def init_from_data(self, features: torch.Tensor, times_s: torch.Tensor, takeover_s: torch.Tensor,
                       marker_index: torch.Tensor, success: torch.Tensor, seed: int) -> None:
        """The grid's learned places start where the training clips change most around their success markers
        (:func:`place_priors`); each member of an ensemble from its own noise."""
        with torch.no_grad():
            heads = self.stream.heads
            priors = place_priors(features, times_s, takeover_s, marker_index, success, self.config.places,
                                  [seed + k for k in range(len(heads))])
            for head, prior in zip(heads, priors):
                head.match.where.copy_(prior)

    def forward_head(self, features: torch.Tensor, times_s: torch.Tensor, takeover_s: torch.Tensor,
                     instructions: list[str], targets: Targets | None = None, encoded: dict | None = None
                     ) -> AutoraterOutput:
        views = self.views(features, instructions) if targets is None else [(features, instructions)]
        return self.stream(views, times_s, takeover_s, targets)


def place_priors(features: torch.Tensor, times_s: torch.Tensor, takeover_s: torch.Tensor, marker_index: torch.Tensor,
                 success: torch.Tensor, places: int, seeds: Sequence[int]) -> list[torch.Tensor]:
    """Starting logits of the events model's places (places, cells): Gaussians of widths 0.75-2 cells around the
    cell whose content changes most, relative to the rest of the clip, around the annotators' success markers;
    one tensor per seed (the heads of an ensemble differ by the noise; the change is measured once).

    In first-person video that is where the agent acts (the object picked up appears under it). From a uniform
    or random start the places took hundreds of steps to find it, the instruction match staying at chance
    meanwhile (README, "The model"); started here, the match learns from the first epochs.

    Args:
        features: (n, t, c, h, w) the training clips' cached cells; times_s (n, t); takeover_s (n,);
        marker_index: (n,) the annotators' marker frame; success: (n,) bool, the clips labelled successes.
    """
    h, w = features.shape[-2:]
    hit, rest = torch.zeros(h * w), torch.zeros(h * w)
    n_hit = n_rest = 0
    for r in range(len(features)):
        k = int(marker_index[r])
        if not bool(success[r]) or not 0 <= k < times_s.shape[1]:
            continue
        change = (features[r, 1:].float() - features[r, :-1].float()).abs().mean(1).flatten(1)  # (t - 1, cells)
        t = times_s[r, 1:]
        fresh = (t > times_s[r, :-1]) & (t >= float(takeover_s[r]))  # not a repeated frame, after the takeover
        near = fresh & (t >= times_s[r, k] - WINDOW_S[0]) & (t <= times_s[r, k] + WINDOW_S[1])
        hit += change[near].sum(0)
        rest += change[fresh & ~near].sum(0)
        n_hit, n_rest = n_hit + int(near.sum()), n_rest + int((fresh & ~near).sum())
    noise = [0.1 * torch.randn(places, h * w, generator=torch.Generator().manual_seed(s)) for s in seeds]
    if not n_hit or not n_rest:
        return noise
    ratio = (hit / n_hit) / (rest / n_rest).clamp(min=1e-6)
    cy, cx = divmod(int(ratio.argmax()), w)
    yy, xx = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    d2 = ((yy - cy) ** 2 + (xx - cx) ** 2).flatten().float()
    widths = torch.linspace(0.75, 2.0, places)[:, None]
    return [-d2[None] / (2 * widths ** 2) + n for n in noise]


def learns_words(config: EventsConfig) -> bool:
    """The grid recipe reads the training set's words (a bag of them, and the tile words)."""
    return True


SPEC = ArchitectureSpec(
    name="events", config_class=EventsConfig, model_class=EventsModel,
    presets={"babyai-grid": EventsConfig(pose=True, front_places=True),  # BabyAI only: its grid, its words
             "base": EventsConfig(pose=True, front_places=True),  # the grid preset's name before the general model
             "tiny": EventsConfig(image_size=32, grid_size=4, pixel_cells=2, clip_frames=8, places=2)},  # tests
    search_space=events_search_space, learns_words=learns_words,
    init_keys=("encoder", "encoder_stage", "pixel_cells", "grid_size", "image_size", "clip_frames", "text_encoder",
               "vocab", "places", "place_inputs", "members", "failure_modes"),
    augmentations=frozenset({"rotate", "mirror", "recolour", "relax"}))

__all__ = ["SPEC", "EventsConfig", "EventsModel", "event_loss_space", "events_search_space", "place_priors"]
