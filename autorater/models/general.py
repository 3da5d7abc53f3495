"""The general model (``architecture="general"``, the default recipe for every world): any camera, any wording.

Inputs that know nothing of the world that made the video:

- frames of any size and aspect, letterboxed to ``image_size`` x ``image_size`` (``frame_fit = "pad"``),
  through a pretrained timm image encoder cut at one stage (EfficientNet-Lite0 from its package today),
  frozen and cached: spatial feature maps (stride 8 at stage 2: 16 x 16 positions at 128 px), beside each
  position's mean colour (``pixel_cells``: ImageNet features are built to ignore colour, instructions are not);
- the instruction as frozen MiniLM sentence vectors of the whole sentence and of each half of its words
  (``autorater.models.parts.text.SentenceText``): no vocabulary, unseen wordings land near their meaning.

Its event stream is the grid recipe's (``autorater/models/parts/stream.py``: per-frame events chained by competing
risks over frames, ``parts/risks.py``, supervised in a window around the annotators' markers) with a head of its own
(:class:`GeneralHead`), every grid assumption taken out::

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

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from autorater.architecture import AUGMENTATIONS, ArchitectureSpec, FrameProcessor
from autorater.config import FrameEncoderConfig
from autorater.encoders import create_frame_encoder
from autorater.model import Autorater
from autorater.models.events import event_loss_space
from autorater.models.parts import outcome, stream
from autorater.models.parts.outcome import (
    FRAME_RULE,
    OUTCOME_INDEX,
    OUTCOME_INPUT,
    OutcomeConfig,
    OutcomePath,
    augment_frames,
    outcome_loss,
    pick_frames,
)
from autorater.models.parts.stream import EventStream, event_classes
from autorater.models.parts.text import SentenceText


@dataclass
class GeneralConfig(FrameEncoderConfig):
    """The general model's fields."""

    architecture = "general"
    ranges = {**FrameEncoderConfig.ranges, "queries": (1, 64), "hidden": (1, 4096), "members": (1, 16),
              "max_text_tokens": (1, 512), "context_frames": (-1, 1024)}
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
    # The outcome path, a part with its own config (autorater/models/parts/outcome.py): P(success) from a few larger
    # frames through the same encoder cut deeper, its top blocks learning; the stream above (every frame, small,
    # frozen) places the marker.
    outcome: OutcomeConfig = field(default_factory=OutcomeConfig)

    @classmethod
    def upgrade(cls, d: dict) -> dict:
        """Folders from before the encoder could fine-tune: frozen, no reference frame, the whole video decoded; from
        before the outcome path: none (the event head judged the outcome); from before the ensemble: one outcome
        head, its positions attended by queries; from before the outcome path had its own config: its flat
        ``outcome_*`` fields, nested."""
        d = {"trainable_blocks": 0, "reference_frame": False, "context_frames": -1, **d}
        flat = {k[len("outcome_"):]: d.pop(k) for k in list(d) if k.startswith("outcome_")}
        if "outcome" not in d:
            d["outcome"] = {"frames": 0, "members": 1, "pooling": "attention", **flat}
        elif flat:
            raise ValueError(f"a general model config holds both 'outcome' and flat fields {sorted(flat)} (fix: move "
                             f"them into 'outcome')")
        return d

    def decoded_size(self) -> int:
        """With an outcome path, clips are decoded once at the larger size; the stream is resized from it."""
        return max(self.image_size, self.outcome.size) if self.outcome.frames else self.image_size

    def without(self, part: str) -> "GeneralConfig":
        """Less the outcome path (``outcome``: its frames 0, the event stream alone)."""
        if part != "outcome":
            return super().without(part)
        return self.replace(outcome=dataclasses.replace(self.outcome, frames=0))


class GeneralProcessor(FrameProcessor):
    """The general model's inputs: the clip decoded once (letterboxed at the larger size, from ``context_frames``
    before the takeover), the stream of every frame resized to ``image_size`` (``"x"``), and the outcome path's
    frames (``pick_frames``: the rule applied once, named in the cache key) at ``outcome.size``, augmented in training
    when its encoder learns from pixels."""

    def decode_args(self, takeover_s: float | None = None) -> dict:
        args, config = super().decode_args(takeover_s), self.config
        if config.context_frames >= 0 and takeover_s is not None:
            args.update(start_s=float(takeover_s), before=config.context_frames)
        return args

    def prepare(self, frames: torch.Tensor, times_s: torch.Tensor, takeover_s: torch.Tensor) -> dict:
        config = self.config
        out = {"x": resize_frames(frames, config.image_size)}
        if config.outcome.frames:  # its frames and their index: the head reads their times, never picks again
            out.update(pick_frames(frames, times_s, takeover_s, config.outcome, resize_frames))
        return out

    def cache_key(self, frozen: bool) -> str:
        config, path = self.config, self.config.outcome
        pixels = f"-pix{config.pixel_cells}" if config.pixel_cells else ""
        top = f"-top{config.trainable_blocks}" if config.trainable_blocks else ""  # the cache holds the blocks below
        context = f"-ctx{config.context_frames}" if config.context_frames >= 0 else ""
        outcome = f"-out{path.frames}f{path.size}px-s{path.stage}t{path.blocks}-{FRAME_RULE}" if path.frames else ""
        return (f"{config.encoder}-stage{config.encoder_stage}{top}-{config.image_size}px-{config.clip_frames}f"
                f"{context}{pixels}{outcome}-pad")

    def augment(self, encoded: dict, rng: np.random.Generator) -> dict:
        """An outcome encoder that trains from pixels (its cache holds frames): a random crop and colour jitter per
        clip (:func:`augment_frames`)."""
        frames = encoded.get(OUTCOME_INPUT)
        if frames is None or frames.dtype != torch.uint8:
            return encoded
        generator = torch.Generator().manual_seed(int(rng.integers(2 ** 31)))
        return {**encoded, OUTCOME_INPUT: augment_frames(frames, generator)}


def general_search_space(trial) -> tuple[dict, dict]:
    """``queries`` 2 .. 8 (instruction queries over the positions), and the event models' loss weights and match
    warm-up (``event_loss_space``)."""
    return {"queries": trial.suggest_int("queries", 2, 8)}, event_loss_space(trial)


def general_recipe_changes(config: GeneralConfig) -> dict:
    """A frozen outcome path (``outcome.blocks`` 0) is cached whole: its heads train apart, in minutes
    (training/stages/outcome.py); a learning top trains jointly with the stream."""
    return {"parts_apart": bool(config.outcome.frames) and config.outcome.blocks == 0}


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
            first = active.float().argmax(1) if active is not None else x.new_zeros(len(x), dtype=torch.long)
            parts.append(x - x[torch.arange(len(x), device=x.device), first.to(x.device)][:, None])
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


class GeneralModel(Autorater):
    """The composition of two parts (``autorater/models/parts/``): the event stream (:class:`EventStream`, competing
    risks over frames) with :class:`GeneralHead` on every frame, which places the marker; and with
    ``outcome.frames`` the outcome path (:class:`OutcomePath`: a few larger frames, its own config), whose logit plus
    ``gate`` x the stream's is the model's P(success) (the marker then lies in a success frame for a called
    success)."""

    config_class = GeneralConfig
    processor_class = GeneralProcessor
    weight_names = (stream.legacy_name, outcome.legacy_name)

    def __init__(self, config: GeneralConfig):
        super().__init__(config)
        if self.frame_encoder.caches_frames or self.frame_encoder.raw_colours:
            raise ValueError(f"the general model reads a pretrained image encoder's feature maps; "
                             f"{config.encoder!r} is not one (fix: a timm encoder, e.g. efficientnet_lite0)")
        self.stream = EventStream([GeneralHead(
            self.frame_encoder.out_channels, 1 + len(event_classes(config.failure_modes)), config.queries,
            config.hidden, use_instruction=config.use_instruction, max_tokens=config.max_text_tokens,
            reference=config.reference_frame) for _ in range(config.members)], config.failure_modes)
        if config.outcome.frames:
            encoder = create_frame_encoder(config, stage=config.outcome.stage, trainable_blocks=config.outcome.blocks)
            self.outcome = OutcomePath(config.outcome, encoder, config.max_text_tokens, config.use_instruction)
            # how much the stream's logit adds to the path's: learned from 0 when trained jointly; fitted on held-out
            # rows, or left at 0, when the parts train apart
            self.gate = nn.Parameter(torch.zeros(()))

    def join(self) -> nn.Parameter | None:
        """The gate (with an outcome path): P(success) logit = the path's + gate x the stream's."""
        return self.gate if self.config.outcome.frames else None

    def encode(self, frames: torch.Tensor, times_s: torch.Tensor, takeover_s: torch.Tensor) -> dict:
        """The stream's cached features of every frame (``"x"``, resized to ``image_size``) and the outcome path's of
        the frames it reads (at ``outcome.size``, with their index): the processor picks and resizes, each encoder's
        fixed part runs."""
        prepared = self.processor.prepare(frames, times_s, takeover_s)
        out = {"x": self.frame_encoder.cacheable(prepared.pop("x"))}
        if OUTCOME_INPUT in prepared:
            out.update(prepared, **{OUTCOME_INPUT: self.outcome.encoder.cacheable(prepared[OUTCOME_INPUT])})
        return out

    def cached_shapes(self) -> dict[str, tuple[torch.dtype, tuple[int, ...]]]:
        """The stream's frame and, with an outcome path, its ``outcome.frames`` frames (at ``outcome.size``) and their
        index (int64)."""
        out = super().cached_shapes()
        if self.config.outcome.frames:
            k = self.config.outcome.frames
            dtype, frame = self.outcome.encoder.cached_frame(self.config.outcome.size)
            out.update({OUTCOME_INPUT: (dtype, (k, *frame)), OUTCOME_INDEX: (torch.int64, (k,))})
        return out

    def finish_encoded(self, encoded: dict) -> dict:
        """The outcome path's trainable part on its cached input, once per clip."""
        return {k: self.outcome.encoder.finish(v) if k == OUTCOME_INPUT else v for k, v in encoded.items()}

    def forward_head(self, features, times_s, takeover_s, instructions, targets=None, encoded=None):
        out = self.stream([(features, instructions)], times_s, takeover_s, targets)
        if not self.config.outcome.frames:
            return out
        # the stream's evidence beside the few frames: an event the chosen frames miss (a success undone before
        # the last frame) is still in the event head's P(success), weighed by the gate
        out.success_logit = (self.outcome(encoded or {}, times_s, takeover_s, instructions)
                             + self.gate * out.success_logit.detach())
        if targets is not None:
            own, others = targets.outcome_weights
            weight = torch.where(targets.match == 0, torch.full_like(targets.success, others),
                                 torch.ones_like(targets.success))
            if targets.row_weight is not None:
                weight = weight * targets.row_weight
            out.losses["outcome"] = outcome_loss(out.success_logit, targets.success, weight)
            out.loss = out.loss + own * out.losses["outcome"]
        return out


SPEC = ArchitectureSpec(
    name="general", config_class=GeneralConfig, model_class=GeneralModel,
    presets={
        "general": GeneralConfig(),  # the default recipe, every world (README, "The model")
        # The parts trained apart on a frozen cache, five outcome heads (issue 49): better on unseen scenarios and
        # agents from one camera, worse on unseen tasks, unmeasured on BabyAI (docs/results/2026-11-27-parts-apart.md)
        "general-parts": GeneralConfig(outcome=OutcomeConfig(blocks=0, dim=128, pooling="max", members=5)),
        "tiny-general": GeneralConfig(image_size=64, clip_frames=8, queries=2, hidden=32, outcome=OutcomeConfig(
            size=64, dim=32, members=2, blocks=0, pooling="max", queries=2, layers=1)),  # tests
    },
    # 10 epochs and 10 of match warm-up are what fitted the CPU budget when every part trains in one step
    recipe={"epochs": 10, "patience": 4, "stream": {"match_warmup_epochs": 10}}, recipe_changes=general_recipe_changes,
    search_space=general_search_space,
    init_keys=("encoder", "encoder_stage", "pixel_cells", "image_size", "clip_frames", "members", "queries", "hidden",
               "failure_modes"),
    augmentations=frozenset(AUGMENTATIONS))  # it finds things by content, not by place: a crop too


__all__ = ["SPEC", "GeneralConfig", "GeneralHead", "GeneralModel", "GeneralProcessor", "QueryMatch"]
