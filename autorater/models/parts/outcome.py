"""The outcome path of the general model: P(success) from a few frames through an encoder whose top blocks learn.

Two rates (README, "The model"): the marker needs every frame, the outcome does not. Four frames judged the
outcome as well as eleven in the probe on correct Meta-World video (docs/results/2026-11-27-two-rates.md): the
takeover frame, the last frame and two evenly between (:func:`outcome_frame_index`). They are read at 224 px
through EfficientNet-Lite0 to stage 3 (stride 16, 112 channels), its block groups 3-4 trainable from a cached
stride-8 map (on a CPU), or the whole encoder from pixels (on a GPU), then::

    per frame, pooling "max" (the default since issue 49): each position scaled and shifted by the instruction
               (FiLM), then the mean and the max over the positions --MLP--> a frame vector
    per frame, pooling "attention" (folders before it): instruction --linear--> q queries; each attends over the
               positions by content (no learned place, so a new camera needs none) and pools them --> one vector
               per query, and how well it fits what the instruction wants there (a bilinear score) --MLP--> a frame
               vector
    each frame vector minus half the takeover frame's (what changed since the agent took over)
    + where the frame lies in the continuation (its share of it, and seconds since the takeover)
    [the instruction token, the frame vectors] --transformer (2 layers)--> the instruction token --> one logit

:class:`OutcomePath` is the part: its encoder (cut at ``stage``, its top ``blocks`` learning) and its heads (one, or
``members`` of them, P(success) their mean probability); the general model adds the event stream's logit to it
through a gate (``GeneralModel``: the stream of every frame sees an event the chosen frames miss). The instruction is
the frozen MiniLM sentence vectors the event head reads (``SentenceText``): words, not task ids. Which frames it reads
is decided once, when a clip is encoded (:func:`pick_frames`): the frames and their index travel together in what the
model encodes (``OUTCOME_INPUT``, ``OUTCOME_INDEX``), and the cache key names the rule (:data:`FRAME_RULE`).

Example:
    >>> head = OutcomeHead(channels=112, dim=32, queries=2, layers=1, heads=2)
    >>> maps = torch.zeros(2, 4, 112, 7, 7)                                    # (clips, frames, c, h, w)
    >>> text = torch.zeros(2, head.text_dim)
    >>> head(maps, torch.zeros(2, 4), torch.zeros(2, 4), text).shape
    torch.Size([2])
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from autorater.config import PartConfig
from autorater.encoders import FrameEncoder
from autorater.model import ModelPart
from autorater.models.parts.text import SentenceText

POOLINGS = ("attention", "max")  # how a frame's positions become one vector (OutcomeHead)
OUTCOME_INPUT = "outcome"  # the key of the outcome path's inputs in what the general model encodes (the cache's)
OUTCOME_INDEX = "outcome_index"  # beside it: which sampled frames they are (outcome_frame_index, chosen once)
# The rule that picks the outcome frames (outcome_frame_index), named in the feature cache's key: a new rule is a new
# cache, never old frames under it
FRAME_RULE = "takeover-last-even"


@dataclass
class OutcomeConfig(PartConfig):
    """The outcome path's fields (``GeneralConfig.outcome``; the flat ``outcome_*`` fields of folders saved before
    it are mapped here on loading): P(success) from a few larger frames through the stream's encoder cut deeper, its
    top blocks learning."""

    ranges = {"frames": (0, 64), "size": (16, 1024), "stage": (0, 16), "blocks": (0, 64), "dim": (1, 4096),
              "queries": (1, 64), "layers": (1, 16), "members": (1, 16)}
    frames: int = 4  # the takeover frame, the last and evenly between; 0: no outcome path (the event head's
    #                  P(success), as folders before it)
    size: int = 224  # px, letterboxed; clips are decoded at this size, the stream resized to image_size
    stage: int = 3  # the encoder stage it reads (lite0 3: stride 16, 112 channels)
    blocks: int = 1  # block groups below that stage that learn: 0 frozen (the stage-3 maps cached; the heads then
    #                  train alone on them, TrainConfig.parts_apart: the ``general-parts`` preset); 1 = block 4 from a
    #                  cached 14 x 14 x 80 map; 2 = blocks 3-4 from 28 x 28 x 40; 6 = the whole encoder, the stem
    #                  too, from pixels (a GPU's). Those train jointly with the stream (parts_apart off)
    dim: int = 256  # 128 in ``general-parts`` (256 cost 3x the step of 128 on the CPU)
    queries: int = 4  # instruction queries attending over each frame's positions
    layers: int = 2  # transformer layers over the frames
    pooling: str = "attention"  # a frame's positions: attended by the words' queries ("attention"); or modulated
    #                             by the words, mean and max ("max", ``general-parts``: attention plateaued on frozen
    #                             maps, docs/results/2026-11-27-parts-apart.md)
    members: int = 1  # outcome heads, each trained alone from its own seed; P(success) is their mean probability,
    #                   before calibration (5 in ``general-parts``)


def outcome_frame_index(times_s: torch.Tensor, takeover_s: torch.Tensor, k: int) -> torch.Tensor:
    """(b, k) long: which sampled frames the outcome path reads (the rule :data:`FRAME_RULE`, applied once, when the
    clip is encoded): the takeover frame (the last one at or before the takeover), the last real frame (padding
    repeats it; the first index of the latest time), and ``k - 2`` evenly between. A clip with fewer frames after the
    takeover repeats some.

    Args:
        times_s: (b, t) sampled frame times; takeover_s: (b,).
    """
    last = times_s.argmax(1)
    after = times_s > takeover_s[:, None].to(times_s) + 1e-6
    first_after = torch.where(after.any(1), after.float().argmax(1), last)
    start = torch.minimum((first_after - 1).clamp(min=0), last)
    share = torch.linspace(0.0, 1.0, k, device=times_s.device) if k > 1 else torch.ones(1, device=times_s.device)
    return (start[:, None] + (last - start)[:, None].float() * share).round().long()


def outcome_times(times_s: torch.Tensor, takeover_s: torch.Tensor, index: torch.Tensor) -> tuple[torch.Tensor,
                                                                                                   torch.Tensor]:
    """Where the chosen frames lie: (b, k) share of the continuation (0 at the takeover, 1 at the last frame) and
    (b, k) seconds since the takeover."""
    t = times_s.gather(1, index)
    since = (t - takeover_s[:, None].to(t)).clamp(min=0.0)
    span = since[:, -1:].clamp(min=1e-3)
    return (since / span).clamp(max=1.0), since


class OutcomeHead(nn.Module):
    """P(success) logit from the chosen frames' feature maps and the instruction's sentence vectors (module
    docstring). Any number of frames and any map size; no learned position."""

    def __init__(self, channels: int, dim: int = 256, queries: int = 4, layers: int = 2, heads: int = 4,
                 dropout: float = 0.1, pooling: str = "attention"):
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"outcome pooling {pooling!r}: one of {', '.join(POOLINGS)}")
        self.text_dim = SentenceText.out_dim
        self.pooling = pooling
        self.cell = nn.Sequential(nn.LayerNorm(channels), nn.Linear(channels, dim))
        if pooling == "attention":
            self.key, self.value = nn.Linear(dim, dim), nn.Linear(dim, dim)
            self.look = nn.Linear(self.text_dim, queries * dim)  # what to look for
            self.want = nn.Linear(self.text_dim, queries * dim)  # what the instruction wants there
            self.frame = nn.Sequential(nn.Linear(queries * (dim + 1), dim), nn.GELU(), nn.Linear(dim, dim))
        else:  # "max": every position modulated by the words (FiLM), then its mean and max over the positions
            self.film = nn.Linear(self.text_dim, 2 * dim)
            self.frame = nn.Sequential(nn.Linear(2 * dim, dim), nn.GELU(), nn.Linear(dim, dim))
        self.when = nn.Linear(2, dim)
        self.text = nn.Linear(self.text_dim, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.mix = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.out = nn.Linear(dim, 1)
        self.queries, self.dim = queries, dim

    def forward(self, maps: torch.Tensor, share: torch.Tensor, since_s: torch.Tensor,
                text: torch.Tensor, per_frame: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """maps (b, k, c, h, w) (frame 0 the takeover frame), share and since_s (b, k), text (b, text_dim) ->
        logit (b,); with ``per_frame``, also (b, k): each frame's token read by the same output layer (whether the
        outcome is reached by that frame: ``TrainConfig.outcome.reached`` trains it; no weights of its own)."""
        cells = self.cell(maps.float().flatten(3).transpose(2, 3))  # (b, k, p, d)
        frames = self.frame(self.attend(cells, text) if self.pooling == "attention" else self.modulate(cells, text))
        frames = frames - 0.5 * frames[:, :1]  # what changed since the takeover frame
        frames = frames + self.when(torch.stack([share, since_s / 10.0], -1).to(frames))
        tokens = self.mix(torch.cat([self.text(text)[:, None], frames], 1))
        logit = self.out(self.norm(tokens[:, 0])).squeeze(-1)
        return (logit, self.out(self.norm(tokens[:, 1:])).squeeze(-1)) if per_frame else logit

    def attend(self, cells: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        """cells (b, k, p, d) -> (b, k, q (d + 1)): each query's attended vector and how well it fits the words."""
        b, k = cells.shape[:2]
        look = self.look(text).view(b, 1, self.queries, self.dim)
        where = torch.einsum("bkpd,bkqd->bkqp", self.key(cells), look.expand(-1, k, -1, -1)) / math.sqrt(self.dim)
        pooled = torch.einsum("bkqp,bkpd->bkqd", where.softmax(-1), self.value(cells))  # (b, k, q, d)
        fit = torch.einsum("bkqd,bqd->bkq", pooled, self.want(text).view(b, self.queries, self.dim))
        return torch.cat([pooled.flatten(2), fit / math.sqrt(self.dim)], -1)

    def modulate(self, cells: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        """cells (b, k, p, d) -> (b, k, 2d): each position scaled and shifted by the words, then the mean and the max
        over the positions (no attention to learn first: it trains in a few epochs where attention plateaus)."""
        scale, shift = self.film(text)[:, None, None].chunk(2, -1)
        h = F.gelu(cells * (1 + scale) + shift)
        return torch.cat([h.mean(2), h.amax(2)], -1)


class OutcomePath(ModelPart):
    """The outcome path as a part (module docstring): ``encoder`` (a frame encoder cut at ``config.stage``, its top
    ``config.blocks`` learning) and ``heads`` (``config.members`` of :class:`OutcomeHead`). Weights
    ``outcome.encoder.*`` and ``outcome.heads.<k>.*``; folders saved before the parts were modules named them
    ``outcome_encoder.*`` and ``outcome.*`` / ``outcome.<k>.*`` (:func:`legacy_name` maps them). Trained by the
    ``outcome`` stage: its heads alone on the cached maps of a frozen encoder, or in the joint step."""

    stage = "outcome"
    inputs = (OUTCOME_INPUT, OUTCOME_INDEX)

    def __init__(self, config: OutcomeConfig, encoder: FrameEncoder, max_tokens: int = 32,
                 use_instruction: bool = True):
        super().__init__()
        self.config, self.use_instruction = config, use_instruction
        self.encoder = encoder
        self.words = SentenceText(max_tokens)
        self.heads = nn.ModuleList([self.make_head() for _ in range(config.members)])

    def make_head(self) -> OutcomeHead:
        """A fresh head of this path (drawn from torch's default generator)."""
        c = self.config
        return OutcomeHead(self.encoder.out_channels, c.dim, c.queries, c.layers, pooling=c.pooling)

    def set_heads(self, heads: list[OutcomeHead]) -> None:
        """Put ``heads`` in (as many as ``config.members``: each trained apart)."""
        if len(heads) != self.config.members:
            raise ValueError(f"{len(heads)} outcome heads for outcome.members={self.config.members}")
        self.heads = nn.ModuleList(heads)

    def text(self, instructions: list[str]) -> torch.Tensor:
        """(b, text_dim) the instructions' sentence vectors on the heads' device (zeros: the blind twin)."""
        words = self.words(instructions).to(self.heads[0].out.weight.device)
        return words if self.use_instruction else torch.zeros_like(words)

    def logit(self, maps: torch.Tensor, share: torch.Tensor, since_s: torch.Tensor, text: torch.Tensor
              ) -> torch.Tensor:
        """(b,) from finished maps (b, k, c, h, w), where the frames lie (:func:`outcome_times`) and the sentence
        vectors: the log-odds of the heads' mean probability (one head: its logit)."""
        logits = [head(maps, share, since_s, text) for head in self.heads]
        if len(logits) == 1:
            return logits[0]
        log_p = torch.stack([F.logsigmoid(z) for z in logits]).logsumexp(0) - math.log(len(logits))
        log_q = torch.stack([F.logsigmoid(-z) for z in logits]).logsumexp(0) - math.log(len(logits))
        return log_p - log_q

    def forward(self, encoded: dict, times_s: torch.Tensor, takeover_s: torch.Tensor,
                instructions: list[str]) -> torch.Tensor:
        """(b,) the path's logit from what the model encoded (its finished maps and their frames' index)."""
        maps, index = inputs_of(encoded)
        share, since = outcome_times(times_s, takeover_s, index.long())
        return self.logit(maps, share, since, self.text(instructions))


def pick_frames(frames: torch.Tensor, times_s: torch.Tensor, takeover_s: torch.Tensor, config: OutcomeConfig,
                resize) -> dict:
    """What the path reads of decoded clips (b, t, H, W, 3) uint8: its frames (:func:`outcome_frame_index`, the
    one place the rule is applied), resized by ``resize(frames, size)``, and their index."""
    index = outcome_frame_index(times_s.to(frames.device), takeover_s.to(frames.device), config.frames)
    picked = frames[torch.arange(len(frames), device=frames.device)[:, None], index]
    return {OUTCOME_INPUT: resize(picked, config.size), OUTCOME_INDEX: index}


def inputs_of(encoded: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """The path's cached inputs among what a model encodes: its maps (or frames) and their frames' index."""
    if OUTCOME_INPUT not in encoded:
        raise ValueError(f"this model judges the outcome from its outcome path: pass its encoded inputs (what encode "
                         f"returns as {OUTCOME_INPUT!r}) beside the features, or pass the frames")
    return encoded[OUTCOME_INPUT], encoded[OUTCOME_INDEX]


def without_inputs(encoded: dict) -> dict:
    """What a model encodes, less the path's (what the event stream alone reads)."""
    return {k: v for k, v in encoded.items() if k not in (OUTCOME_INPUT, OUTCOME_INDEX)}


def legacy_name(name: str) -> str | None:
    """A weight's name in a folder saved before the parts were modules, in today's (None: no longer a weight):
    ``outcome_encoder.*`` -> ``outcome.encoder.*``; ``outcome.*`` (one head) and ``outcome.<k>.*`` ->
    ``outcome.heads.<k>.*``; the gate the first head held (``outcome.gate``, ``outcome.0.gate``) -> ``gate``, the
    other heads' (never read) dropped."""
    if name.startswith("outcome_encoder."):
        return "outcome." + name[len("outcome_"):]
    if not name.startswith("outcome.") or name.startswith(("outcome.heads.", "outcome.encoder.")):
        return name
    rest = name[len("outcome."):]
    k, _, inner = rest.partition(".") if re.match(r"\d+\.", rest) else ("0", "", rest)
    if inner == "gate":
        return "gate" if k == "0" else None
    return f"outcome.heads.{k}.{inner}"


def outcome_loss(logit: torch.Tensor, target: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy of soft targets (b,), each row weighted (``weight`` 0: no loss), the two classes
    weighing half each (the primary metric is balanced accuracy; calibration fixes the prior after)."""
    ok = torch.isfinite(target) & (weight > 0)
    if not ok.any():
        return logit.sum() * 0.0
    y, w, z = target[ok].clamp(0.0, 1.0), weight[ok], logit[ok]
    pos, neg = (w * y).sum().clamp(min=1e-6), (w * (1 - y)).sum().clamp(min=1e-6)
    loss_pos = (w * y * F.softplus(-z)).sum() / pos
    loss_neg = (w * (1 - y) * F.softplus(z)).sum() / neg
    return 0.5 * (loss_pos + loss_neg)


def augment_frames(frames: torch.Tensor, generator: torch.Generator, smallest: float = 0.8,
                   jitter: float = 0.2) -> torch.Tensor:
    """Pixel augmentation of uint8 clips (n, k, H, W, 3) for an encoder that trains from pixels: per clip (every
    frame alike) a random crop of ``smallest``..1 of each side resized back, and brightness, contrast and
    saturation each scaled by 1 +- ``jitter``."""
    n, k, h, w, _ = frames.shape
    x = frames.permute(0, 1, 4, 2, 3).float().div(255.0)  # (n, k, 3, H, W)
    out = torch.empty_like(x)
    for i in range(n):
        r = torch.rand(6, generator=generator).tolist()
        s = smallest + (1 - smallest) * r[0]
        hh, ww = max(1, round(h * s)), max(1, round(w * s))
        y0, x0 = int(r[1] * (h - hh + 1)), int(r[2] * (w - ww + 1))
        clip = F.interpolate(x[i, :, :, y0:y0 + hh, x0:x0 + ww], size=(h, w), mode="bilinear", align_corners=False)
        bright, contrast, sat = (1 + jitter * (2 * v - 1) for v in r[3:])
        grey = clip.mean(1, keepdim=True)
        clip = grey + (clip - grey) * sat
        clip = (clip - clip.mean((1, 2, 3), keepdim=True)) * contrast + clip.mean((1, 2, 3), keepdim=True)
        out[i] = clip * bright
    return out.clamp(0, 1).mul(255.0).round().to(torch.uint8).permute(0, 1, 3, 4, 2).contiguous()


__all__ = ["FRAME_RULE", "OUTCOME_INDEX", "OUTCOME_INPUT", "POOLINGS", "OutcomeConfig", "OutcomeHead", "OutcomePath",
           "augment_frames", "inputs_of", "legacy_name", "outcome_frame_index", "outcome_loss", "outcome_times",
           "pick_frames", "without_inputs"]
