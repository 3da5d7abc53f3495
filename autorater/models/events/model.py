"""The BabyAI grid recipe (``architecture="events"``, preset ``babyai-grid``): the event head on tile cells.

A frame is a ``grid_size`` x ``grid_size`` grid of tile colours (``pixel_cells`` x ``pixel_cells`` averages
inside each tile, the "pixels" encoder); the instruction is a bag of the training set's words; with ``pose``
the agent's pose is dead-reckoned from the first frame and ``front_places`` adds the cell in front of the agent.
It is very good on BabyAI's own renderer (README, "The model") and cannot read a camera's video: the
``general`` architecture is the default. The event head itself, and its competing-risks likelihood, are in
``head.py`` beside this module; :class:`EventsModel` chains a head's per-frame events into the clip's outcome and
is shared with ``general``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Sequence

import torch
from torch import nn

from autorater.config import AutoraterConfig, FrameEncoderConfig
from autorater.model import Autorater, AutoraterOutput, Targets
from autorater.models.events.head import WINDOW_S, EventHead, active_frames, event_losses, first_events, log1mexp
from autorater.models.events.mirror import mirror_all, mirror_words


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

    def search_space(self, trial) -> tuple[dict, dict]:
        """=====================  ===================  =============================================
        places                 2 .. 8               learned places the instruction is matched at
        match_weight           0.3 .. 3.0, log      loss weight of the instruction match
        counterfactual_weight  0.1 .. 1.0, log      loss weight of P(success) under another instruction
        match_warmup_epochs    0, 5, 10, 15, 20     epochs training the match alone first
        =====================  ===================  ============================================="""
        return {"places": trial.suggest_int("places", 2, 8)}, event_loss_space(trial)


def event_loss_space(trial) -> dict:
    """The event models' loss weights and match warm-up, as ``autorater tune`` draws them."""
    return {"match_weight": trial.suggest_float("match_weight", 0.3, 3.0, log=True),
            "counterfactual_weight": trial.suggest_float("counterfactual_weight", 0.1, 1.0, log=True),
            "match_warmup_epochs": trial.suggest_int("match_warmup_epochs", 0, 20, step=5)}


class EventsModel(Autorater):
    """Per-frame events chained into a competing-risks likelihood over the clip (autorater/models/events/head.py).

    An ensemble's clip-level distributions (outcome, marker, failure mode) are the mixture of its members';
    each member is trained on its own losses, as if alone. With ``mirror_tta``, prediction also mixes in
    each member's rating of the mirrored clips. Subclasses change the head (:meth:`make_head`).
    """

    config_class = EventsConfig

    def __init__(self, config: AutoraterConfig):
        super().__init__(config)
        self.check_config()
        if config.members < 1:
            raise ValueError(f"members must be >= 1, got {config.members}")
        # One head keeps the first folders' weight names ("events.*"); an ensemble is "events.<k>.*".
        self.events = self.make_head() if config.members == 1 else \
            nn.ModuleList([self.make_head() for _ in range(config.members)])

    def check_config(self) -> None:
        config = self.config
        for option in ("pose", "front_places", "mirror_tta"):
            if getattr(config, option) and config.encoder != "pixels":
                raise ValueError(f"{option} reads first-person 'pixels' cells; encoder {config.encoder!r} has "
                                 f"none (fix: set {option} to false, or use the pixels encoder)")

    def make_head(self) -> nn.Module:
        config, grid = self.config, self.grid_size()
        return EventHead(self.frame_encoder.out_channels, grid[0] * grid[1], config.vocab, 1 + len(self.event_classes),
                         config.places, use_instruction=config.use_instruction, raw_colours=config.encoder == "pixels",
                         place_inputs=config.place_inputs, pose_cells=config.pixel_cells if config.pose else 0,
                         front_places=config.front_places, grid=grid[0], text=config.text_encoder)

    @property
    def event_heads(self) -> list[nn.Module]:
        """The heads (one, or the members of an ensemble)."""
        return list(self.events) if isinstance(self.events, nn.ModuleList) else [self.events]

    @property
    def event_classes(self) -> list[str]:
        """The event classes after "none": success, then each failure mode that is an event."""
        return ["success"] + ([m for m in self.config.failure_modes if m != "timeout"] or ["failure"])

    def views(self, features: torch.Tensor, instructions: list[str]) -> list[tuple[torch.Tensor, list[str]]]:
        """The inputs each member rates at prediction: the clips, and with ``mirror_tta`` their mirror."""
        views = [(features, instructions)]
        if getattr(self.config, "mirror_tta", False):
            views.append((mirror_all(features, self.config.pixel_cells), [mirror_words(t) for t in instructions]))
        return views

    def init_from_data(self, features: torch.Tensor, times_s: torch.Tensor, takeover_s: torch.Tensor,
                       marker_index: torch.Tensor, success: torch.Tensor, seed: int) -> None:
        """The grid's learned places start where the training clips change most around their success markers
        (:func:`place_priors`); each member of an ensemble from its own noise."""
        if self.config.architecture != "events":
            return
        with torch.no_grad():
            heads = self.event_heads
            priors = place_priors(features, times_s, takeover_s, marker_index, success, self.config.places,
                                  [seed + k for k in range(len(heads))])
            for head, prior in zip(heads, priors):
                head.match.where.copy_(prior)

    def run_head(self, head: nn.Module, features: torch.Tensor, instructions: list[str],
                 active: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One head's per-frame class log-probabilities (b, t, classes) and instruction match (b, t)."""
        return head(features, instructions)

    def match_score(self, head: nn.Module, features: torch.Tensor, instructions: list[str],
                    active: torch.Tensor) -> torch.Tensor:
        """(b, t) one head's instruction match alone (the training's warm-up)."""
        return head.match_score(features, instructions)

    def forward_head(self, features: torch.Tensor, times_s: torch.Tensor, takeover_s: torch.Tensor,
                     instructions: list[str],
             targets: Targets | None = None) -> AutoraterOutput:
        active = active_frames(times_s, takeover_s)
        modes = self.config.failure_modes
        if targets is not None:
            # Each failure mode's event class (-1: "timeout", no event); the appended -1 serves unknown modes (-1).
            class_of = torch.tensor([-1 if m == "timeout" else self.event_classes.index(m) for m in modes] + [-1],
                                    device=features.device)
            failure_class = class_of[targets.failure_mode]
            timeout = (targets.marker_index == times_s.shape[1]) | ((targets.failure_mode >= 0) & (failure_class < 0))
        log_ps, marker, failure, matches, losses, won, lost = [], [], [], [], [], [], []
        views = self.views(features, instructions) if targets is None else [(features, instructions)]
        for head, (feats, words) in itertools.product(self.event_heads, views):
            logp, match = self.run_head(head, feats, words, active)  # (b, t, classes), (b, t)
            first, none = first_events(logp, active)  # (b, t, events), (b,)
            log_ps.append(torch.logsumexp(first[..., 0], 1))
            marker.append(torch.cat([torch.logsumexp(first, -1), none[:, None]], 1))  # log P(first event at t / none)
            won.append(first[..., 0])  # log P(the first event is a success, at t)
            lost.append(torch.cat([torch.logsumexp(first[..., 1:], -1), none[:, None]], 1))  # a failure at t / none
            failure.append(torch.stack([none if m == "timeout" else torch.logsumexp(
                first[..., self.event_classes.index(m)], 1) for m in modes], -1)
                           if modes else none.new_zeros(len(none), 1))
            matches.append(torch.logsumexp(2 * match.masked_fill(~active, -1e4), 1) / 2)
            if targets is not None:
                losses.append(event_losses(first, none, match, active, times_s, targets.success, targets.marker_index,
                                           failure_class, own=~(targets.match < 0.5), timeout=timeout,
                                           balanced=targets.balanced))

        def mixture(xs):  # log of the members' mean probability
            return torch.logsumexp(torch.stack(xs), 0) - math.log(len(xs))

        log_p = mixture(log_ps)
        out = AutoraterOutput(success_logit=log_p - log1mexp(log_p), marker_logits=mixture(marker),
                              failure_logits=mixture(failure), match_logit=torch.stack(matches).mean(0),
                              success_marker_logits=mixture(won), failure_marker_logits=mixture(lost))
        if targets is not None:
            out.losses = {k: torch.stack([m[k] for m in losses]).mean() for k in losses[0]}
            w = dict(zip(("event", "marker", "failure", "match", "counterfactual"), targets.weights))
            out.loss = w["event"] * out.losses["event"] + w["match"] * out.losses["match"] + \
                w.get("counterfactual", 0.3) * out.losses["counterfactual"]
        return out


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


__all__ = ["EventsConfig", "EventsModel", "event_loss_space", "place_priors"]
