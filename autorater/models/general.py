"""The general model (``architecture="general"``, the default recipe for every world): any camera, any wording.

Inputs that know nothing of the world that made the video:

- frames of any size and aspect, letterboxed to ``image_size`` x ``image_size`` (``frame_fit = "pad"``),
  through a pretrained timm image encoder cut at one stage (EfficientNet-Lite0 from its package today),
  frozen and cached: spatial feature maps (stride 8 at stage 2: 16 x 16 positions at 128 px), beside each
  position's mean colour (``pixel_cells``: ImageNet features are built to ignore colour, instructions are not);
- the instruction as frozen MiniLM sentence vectors of the whole sentence and of each half of its words
  (``autorater.models.events.head.SentenceText``): no vocabulary, unseen wordings land near their meaning.

The event head of the grid recipe (``autorater/models/events/head.py``: per-frame events, competing risks over frames,
supervision in a window around the annotators' markers), with every grid assumption taken out::

    positions of frame t and their change since t-1 --per-position MLP--> embeddings e_p
    instruction --linear--> k "look for" vectors and k "should be there" vectors
    query k: attention over the positions by content (softmax_p <key(e_p), look_k>), the attended embedding
             scored against "should be there": match_k(t); match(t) = sum_k match_k(t) + bias(instruction)
    [mean and max over positions of generic per-position features at t-1, t, t+1,
     match_k(t-1..t+1), the instruction's verb] --MLP--> P(none / success / failure mode) at t

Where a query looks is what is there, not a learned spot of one camera's picture (the grid recipe's
places), so a new camera or object position needs no new places; nothing assumes one action per frame,
a tile, a palette or a pose.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from autorater.config import FrameEncoderConfig
from autorater.encoders import create_frame_encoder
from autorater.models.events import EventsModel, event_loss_space
from autorater.models.events.head import SentenceText
from autorater.models.outcome import OutcomeHead, outcome_frame_index, outcome_loss, outcome_times


@dataclass
class GeneralConfig(FrameEncoderConfig):
    """The general model's fields."""

    architecture = "general"
    ranges = {**FrameEncoderConfig.ranges, "queries": (1, 64), "hidden": (1, 4096), "members": (1, 16),
              "max_text_tokens": (1, 512), "context_frames": (-1, 1024), "outcome_frames": (0, 64),
              "outcome_size": (16, 1024), "outcome_stage": (0, 16), "outcome_blocks": (0, 64), "outcome_dim": (1, 4096),
              "outcome_queries": (1, 64), "outcome_layers": (1, 16), "outcome_members": (1, 16)}
    frame_fit = "pad"  # the aspect is kept: black bars, never a stretched picture
    image_size: int = 128
    clip_frames: int = 40  # sampled over the video; 5 s at 8 fps
    reference_frame: bool = False  # each position also reads its change since the takeover frame (the start state)
    context_frames: int = -1  # frames decoded before the takeover frame (the event head reads one: the change into
    #                           the takeover frame); -1: the whole video, the replayed context included
    pixel_cells: int = 1  # mean colours of each position on a k x k sub-grid, beside the features (ImageNet
    #                       features are built to ignore colour, instructions are not)
    queries: int = 4  # instruction queries, each attending over the positions by content
    hidden: int = 128  # the per-frame event classifier's width
    members: int = 1  # independently initialised heads, their outcome distributions averaged
    max_text_tokens: int = 32
    # The outcome path (autorater/models/outcome.py): P(success) from a few larger frames through the same encoder
    # cut deeper, its top blocks learning; the stream above (every frame, small, frozen) places the marker.
    outcome_frames: int = 4  # the takeover frame, the last and evenly between; 0: no outcome path (the event head's
    #                          P(success), as folders before it)
    outcome_size: int = 224  # px, letterboxed; clips are decoded at this size, the stream resized to image_size
    outcome_stage: int = 3  # the encoder stage it reads (lite0 3: stride 16, 112 channels)
    outcome_blocks: int = 1  # block groups below that stage that learn: 0 frozen (the stage-3 maps cached; the
    #                          heads then train alone on them, TrainConfig.parts_apart: the ``general-parts``
    #                          preset); 1 = block 4 from a cached 14 x 14 x 80 map; 2 = blocks 3-4 from 28 x 28 x 40;
    #                          6 = the whole encoder, the stem too, from pixels (a GPU's). Those train jointly with
    #                          the stream (parts_apart off)
    outcome_dim: int = 256  # 128 in ``general-parts`` (256 cost 3x the step of 128 on the CPU)
    outcome_queries: int = 4  # instruction queries attending over each frame's positions
    outcome_layers: int = 2  # transformer layers over the frames
    outcome_pooling: str = "attention"  # a frame's positions: attended by the words' queries ("attention"); or
    #                               modulated by the words, mean and max ("max", ``general-parts``: attention
    #                               plateaued on frozen maps, docs/results/2026-11-27-parts-apart.md)
    outcome_members: int = 1  # outcome heads, each trained alone from its own seed; P(success) is their mean
    #                           probability, before calibration (5 in ``general-parts``)

    @classmethod
    def upgrade(cls, d: dict) -> dict:
        """Folders from before the encoder could fine-tune: frozen, no reference frame, the whole video decoded; from
        before the outcome path: none (the event head judged the outcome); from before the ensemble: one outcome
        head, its positions attended by queries."""
        return {"trainable_blocks": 0, "reference_frame": False, "context_frames": -1, "outcome_frames": 0,
                "outcome_members": 1, "outcome_pooling": "attention", **d}

    def recipe_changes(self) -> dict:
        """A frozen outcome path (``outcome_blocks`` 0) is cached whole: its heads train apart, in minutes
        (training/parts.py); a learning top trains jointly with the stream."""
        return {"parts_apart": self.outcome_blocks == 0}

    def search_space(self, trial) -> tuple[dict, dict]:
        """``queries`` 2 .. 8 (instruction queries over the positions), and the event models' loss weights and match
        warm-up (``event_loss_space``)."""
        return {"queries": trial.suggest_int("queries", 2, 8)}, event_loss_space(trial)

    def decode_args(self, takeover_s: float | None = None) -> dict:
        args = super().decode_args(takeover_s)
        if self.outcome_frames:  # decoded once, at the larger size; the stream is resized from it
            args["size"] = max(self.image_size, self.outcome_size)
        if self.context_frames >= 0 and takeover_s is not None:
            args.update(start_s=float(takeover_s), before=self.context_frames)
        return args

    def feature_key(self, frozen: bool) -> str:
        pixels = f"-pix{self.pixel_cells}" if self.pixel_cells else ""
        top = f"-top{self.trainable_blocks}" if self.trainable_blocks else ""  # the cache holds the blocks below
        context = f"-ctx{self.context_frames}" if self.context_frames >= 0 else ""
        outcome = (f"-out{self.outcome_frames}f{self.outcome_size}px-s{self.outcome_stage}t{self.outcome_blocks}"
                   if self.outcome_frames else "")
        return (f"{self.encoder}-stage{self.encoder_stage}{top}-{self.image_size}px-{self.clip_frames}f{context}"
                f"{pixels}{outcome}-pad")


class QueryMatch(nn.Module):
    """Per frame, how well the positions the instruction looks for fit it: ``queries`` content-addressed looks."""

    def __init__(self, channels: int, text_dim: int, queries: int, dim: int = 32, views: int = 2):
        super().__init__()
        self.cell = nn.Sequential(nn.Linear(views * channels, 64), nn.GELU(), nn.Linear(64, dim))
        self.key = nn.Linear(dim, dim)
        self.look = nn.Linear(text_dim, queries * dim)  # what to look for
        self.query = nn.Linear(text_dim, queries * dim)  # what the instruction wants there
        self.bias = nn.Linear(text_dim, 1)
        self.queries, self.dim = queries, dim

    @property
    def columns(self) -> int:
        return self.queries

    def per_place(self, cells: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        """cells (b, t, p, views c), text (b, text_dim) -> (b, t, queries): each query's agreement."""
        emb = self.cell(cells)  # (b, t, p, d)
        b, k, d = len(text), self.queries, self.dim
        look = self.look(text).view(b, k, d)
        where = (torch.einsum("btpd,bkd->btkp", self.key(emb), look) / math.sqrt(d)).softmax(-1)
        seen = torch.einsum("btkp,btpd->btkd", where, emb)
        return torch.einsum("btkd,bkd->btk", seen, self.query(text).view(b, k, d))

    def total(self, per_place: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        return per_place.sum(-1) + self.bias(text)


def resize_frames(frames: torch.Tensor, size: int) -> torch.Tensor:
    """uint8 clips (b, t, H, W, 3) resized to ``size`` x ``size`` (area-weighted, as a decoder's scaler); unchanged
    when they are that size."""
    b, t, h, w, _ = frames.shape
    if (h, w) == (size, size):
        return frames
    x = frames.reshape(b * t, h, w, 3).permute(0, 3, 1, 2)  # uint8 in and out: 7x faster than through floats
    x = F.interpolate(x, size=(size, size), mode="bilinear", antialias=True, align_corners=False)
    return x.permute(0, 2, 3, 1).reshape(b, t, size, size, 3)


def _near(x: torch.Tensor) -> torch.Tensor:
    """(b, t, n) -> (b, t, 3n): each frame beside the previous and the next (edges repeat)."""
    return torch.cat([torch.cat([x[:, :1], x[:, :-1]], 1), x, torch.cat([x[:, 1:], x[:, -1:]], 1)], -1)


class GeneralHead(nn.Module):
    """Per-frame event log-probabilities (b, t, classes) and the instruction match (b, t) from feature maps
    of any size and the instruction's sentence vectors (the module docstring's diagram)."""

    def __init__(self, channels: int, classes: int, queries: int = 4, hidden: int = 128, generic: int = 16,
                 use_instruction: bool = True, max_tokens: int = 32, reference: bool = False):
        super().__init__()
        self.words = SentenceText(max_tokens)
        self.use_instruction = use_instruction
        self.reference = reference
        views = 3 if reference else 2  # each position, its change since t-1, (its change since the takeover)
        self.match = QueryMatch(channels, self.words.out_dim, queries, views=views)
        self.generic = nn.Sequential(nn.Linear(views * channels, 64), nn.GELU(), nn.Linear(64, generic))
        self.verb = nn.Linear(self.words.out_dim, 16)
        self.mlp = nn.Sequential(nn.Linear(3 * 2 * generic + 3 * (queries + 1) + 16, hidden), nn.GELU(),
                                 nn.Linear(hidden, classes))

    def cells(self, features: torch.Tensor, active: torch.Tensor | None = None) -> torch.Tensor:
        """(b, t, c, h, w) -> (b, t, h w, 2c or 3c): each position, normalised, its change since the previous frame
        and, with ``reference``, since the takeover frame (the first ``active`` one, (b, t) bool)."""
        x = features.float().flatten(3).transpose(2, 3)
        x = F.layer_norm(x, x.shape[-1:])
        parts = [x, x - torch.cat([x[:, :1], x[:, :-1]], 1)]
        if self.reference:
            first = active.float().argmax(1) if active is not None else torch.zeros(len(x), dtype=torch.long)
            parts.append(x - x[torch.arange(len(x)), first.to(x.device)][:, None])
        return torch.cat(parts, -1)

    def text(self, instructions: list[str]) -> torch.Tensor:
        words = self.words(instructions).to(self.verb.weight.device)
        return words if self.use_instruction else torch.zeros_like(words)  # the blind twin reads nothing

    def match_score(self, features: torch.Tensor, instructions: list[str],
                    active: torch.Tensor | None = None) -> torch.Tensor:
        """(b, t) the instruction match alone (the training's warm-up)."""
        text = self.text(instructions)
        return self.match.total(self.match.per_place(self.cells(features, active), text), text)

    def forward(self, features: torch.Tensor, instructions: list[str],
                active: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        cells, text = self.cells(features, active), self.text(instructions)
        per_query = self.match.per_place(cells, text)  # (b, t, queries)
        match = self.match.total(per_query, text)  # (b, t)
        g = self.generic(cells)  # (b, t, p, generic)
        pooled = torch.cat([g.mean(2), g.amax(2)], -1)
        verb = self.verb(text)[:, None].expand(-1, cells.shape[1], -1)
        x = torch.cat([_near(pooled), _near(torch.cat([match[..., None], per_query], -1)), verb], -1)
        return self.mlp(x).log_softmax(-1), match


class GeneralModel(EventsModel):
    """The events model (competing risks over frames, :class:`EventsModel`) with :class:`GeneralHead` on the stream of
    every frame, and with ``outcome_frames`` the outcome path (:class:`OutcomeHead`), whose logit is the model's
    P(success); the event head then places the marker (in a success frame for a called success)."""

    config_class = GeneralConfig
    position_free = True  # queries attend by content; the classifier reads mean and max over positions

    def __init__(self, config: GeneralConfig):
        super().__init__(config)
        if config.outcome_frames:
            self.outcome_encoder = create_frame_encoder(config, stage=config.outcome_stage,
                                                        trainable_blocks=config.outcome_blocks)
            heads = [self.make_outcome_head() for _ in range(config.outcome_members)]
            self.outcome = heads[0] if len(heads) == 1 else nn.ModuleList(heads)  # one head: the weights' old names

    def make_outcome_head(self) -> OutcomeHead:
        """A fresh outcome head of this config (drawn from torch's default generator)."""
        config = self.config
        return OutcomeHead(self.outcome_encoder.out_channels, config.outcome_dim, config.outcome_queries,
                           config.outcome_layers, max_tokens=config.max_text_tokens, pooling=config.outcome_pooling)

    @property
    def outcome_heads(self) -> list[OutcomeHead]:
        """The outcome heads (one, or the members of the ensemble)."""
        return list(self.outcome) if isinstance(self.outcome, nn.ModuleList) else [self.outcome]

    def set_outcome_heads(self, heads: list[OutcomeHead]) -> None:
        """Put ``heads`` in as the outcome heads (as many as ``outcome_members``; the first holds the gate)."""
        if len(heads) != self.config.outcome_members:
            raise ValueError(f"{len(heads)} outcome heads for outcome_members={self.config.outcome_members}")
        self.outcome = heads[0] if len(heads) == 1 else nn.ModuleList(heads)

    def first_outcome_heads(self, k: int) -> "GeneralModel":
        """A copy of this model with its first ``k`` outcome heads only (the same gate): a smaller ensemble, or one
        head, to compare with the whole on the same videos."""
        small = type(self)(self.config.replace(outcome_members=k))
        small.load_state_dict({n: v for n, v in self.state_dict().items() if not n.startswith("outcome.")},
                              strict=False)
        small.set_outcome_heads([copy.deepcopy(head) for head in self.outcome_heads[:k]])
        with torch.no_grad():
            small.outcome_gate.copy_(self.outcome_gate)
        return small.to(self.device).eval()

    @property
    def outcome_gate(self) -> nn.Parameter:
        """How much the event head's logit adds to the outcome heads' (the first head holds it; 0: nothing)."""
        return self.outcome_heads[0].gate

    def outcome_logit(self, maps: torch.Tensor, times_s: torch.Tensor, takeover_s: torch.Tensor,
                      instructions: list[str]) -> torch.Tensor:
        """(b,) the outcome heads' logit from their finished maps (b, k, c, h, w): the log-odds of the members' mean
        probability (one head: its logit)."""
        index = outcome_frame_index(times_s, takeover_s, maps.shape[1])
        share, since = outcome_times(times_s, takeover_s, index)
        heads = self.outcome_heads
        text = heads[0].sentences(instructions, self.config.use_instruction)
        logits = [head(maps, share, since, text) for head in heads]
        if len(logits) == 1:
            return logits[0]
        log_p = torch.stack([F.logsigmoid(z) for z in logits]).logsumexp(0) - math.log(len(logits))
        log_q = torch.stack([F.logsigmoid(-z) for z in logits]).logsumexp(0) - math.log(len(logits))
        return log_p - log_q

    def encode(self, frames: torch.Tensor, times_s: torch.Tensor, takeover_s: torch.Tensor) -> dict:
        """The stream's cached features of every frame (resized to ``image_size``) and the outcome path's of the
        frames it reads (:func:`outcome_frame_index`, at the decoded size)."""
        config = self.config
        if not config.outcome_frames:
            return super().encode(frames, times_s, takeover_s)
        index = outcome_frame_index(times_s.to(frames.device), takeover_s.to(frames.device), config.outcome_frames)
        picked = frames[torch.arange(len(frames), device=frames.device)[:, None], index]
        return {"x": self.frame_encoder.cacheable(resize_frames(frames, config.image_size)),
                "outcome": self.outcome_encoder.cacheable(resize_frames(picked, config.outcome_size))}

    def forward_head(self, features, times_s, takeover_s, instructions, targets=None, outcome=None):
        out = super().forward_head(features, times_s, takeover_s, instructions, targets)
        if not self.config.outcome_frames:
            return out
        if outcome is None:
            raise ValueError("this model judges the outcome from its outcome path: pass `outcome` (what encode "
                             "returns as 'outcome') beside the features, or pass the frames")
        # the stream's evidence beside the few frames: an event the chosen frames miss (a success undone before
        # the last frame) is still in the event head's P(success), weighed by a gate (learned from 0 when trained
        # jointly; fitted on held-out rows, or left at 0, when the parts train apart)
        out.success_logit = (self.outcome_logit(outcome, times_s, takeover_s, instructions)
                             + self.outcome_gate * out.success_logit.detach())
        if targets is not None:
            own, others = targets.outcome_weights
            weight = torch.where(targets.match == 0, torch.full_like(targets.success, others),
                                 torch.ones_like(targets.success))
            if targets.row_weight is not None:
                weight = weight * targets.row_weight
            out.losses["outcome"] = outcome_loss(out.success_logit, targets.success, weight)
            out.loss = out.loss + own * out.losses["outcome"]
        return out

    def check_config(self) -> None:
        if self.frame_encoder.caches_frames or self.config.encoder in ("pixels",):
            raise ValueError(f"the general model reads a pretrained image encoder's feature maps; "
                             f"{self.config.encoder!r} is not one (fix: a timm encoder, e.g. efficientnet_lite0)")

    def make_head(self) -> nn.Module:
        config = self.config
        return GeneralHead(self.frame_encoder.out_channels, 1 + len(self.event_classes), config.queries,
                           config.hidden, use_instruction=config.use_instruction, max_tokens=config.max_text_tokens,
                           reference=config.reference_frame)

    def run_head(self, head, features, instructions, active):
        return head(features, instructions, active)

    def match_score(self, head, features, instructions, active):
        return head.match_score(features, instructions, active)


__all__ = ["GeneralConfig", "GeneralHead", "GeneralModel", "QueryMatch"]
