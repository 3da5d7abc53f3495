"""The first design (``architecture="transformer"``): one clip-level transformer over frame tokens.

::

    frames --frame encoder--> (b, t, c, h, w) --[f_t, f_t - f_t-1]--> 1x1 conv --FiLM(instruction)--> 3x3 conv
           --> instruction-queried attention pool + mean pool --> one token per frame
    frame tokens + time embedding (seconds) + before/after-takeover embedding, and a [CLS] token
           --> transformer decoder layers (self-attention over frames, cross-attention to instruction tokens)
    [CLS] -> success logit, match logit (auxiliary: does this instruction belong to this video?), failure mode
    frame tokens -> marker logits over frames (+ one "end of video" bin from [CLS])

Kept for the folders trained with it and as the comparison in the README's history; the events models
(``general``, ``events``) replaced it as the recipe.

Example (inputs and outputs as in ``autorater.model``):
    >>> from autorater.models import PRESETS, AutoModel
    >>> config = PRESETS["tiny_transformer"].replace(vocab=["go", "to", "the", "red", "ball"])
    >>> type(AutoModel.from_config(config)).__name__
    'TransformerModel'
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from autorater.config import FrameEncoderConfig
from autorater.encoders import BagOfWords, create_text_encoder
from autorater.model import Autorater, AutoraterOutput, Targets


@dataclass
class TransformerConfig(FrameEncoderConfig):
    """The transformer's fields (``PRESETS["transformer"]``)."""

    architecture = "transformer"
    ranges = {**FrameEncoderConfig.ranges, "grid_size": (1, 64), "patch_size": (0, 256), "max_text_tokens": (1, 512),
              "hidden_size": (1, 4096), "spatial_size": (1, 4096), "num_layers": (1, 64), "num_heads": (1, 64),
              "text_slots": (1, 64), "verify_window": (0, 1024), "verify_places": (0, 256), "dropout": (0.0, 1.0)}
    encoder: str = "pixels"
    encoder_stage: int = 3
    pixel_cells: int = 4  # raw colours of each cell on a k x k sub-grid, beside (lite0) or as (pixels) the features
    grid_size: int = 7  # "pixels" encoder: cells per side
    patch_size: int = 0  # "patch" encoder: pixels per patch (0: image_size // 8, an 8 x 8 grid)
    frame_diff: bool = True  # feed the change from the previous frame beside each frame's features
    text_encoder: str = "bow"  # name in autorater.encoders.TEXT_ENCODERS
    max_text_tokens: int = 24
    vocab: list[str] = field(default_factory=list)  # for the learned "bow" text encoder, set at training
    token_norm: bool = False  # LayerNorm the frame tokens before adding time/phase embeddings
    grounding: str = "film"  # per-frame block: "film" (FiLM + attention pool) or "cells" (per-cell text scores)
    text_slots: int = 4  # "cells": learned queries reading the instruction (the object, the place, ...)
    spatial_size: int = 64
    hidden_size: int = 128
    num_layers: int = 2
    num_heads: int = 4
    dropout: float = 0.1
    event_pooling: bool = False  # success head also reads the frame tokens weighted by the predicted marker
    mlp_heads: bool = False  # success and match heads: an MLP over [their inputs, the pooled instruction]
    frame_pool: bool = False  # success and match heads also read the max over frames of the fused tokens
    direct_pool: bool = False  # success and match heads also read the mean text-conditioned frame token
    cell_verify: bool = False  # locate, then verify: the instruction scores the cells before the predicted marker
    verify_window: int = 6  # frames before the predicted marker that "verify" reads (markers lag the event)
    verify_words: bool = False  # the verifier reads the instruction through its own learned word embeddings
    verify_places: int = 0  # > 0: the verifier reads each frame at this many learned places (PlacePool)
    marker_head: str = "distribution"  # "distribution": softmax over frames + end; "crossing": per-frame reached

    lr_range: ClassVar[tuple[float, float]] = (3e-4, 3e-3)

    def search_space(self, trial) -> tuple[dict, dict]:
        """==============  ========================  ===============================================
        hidden_size     64, 128, 192 (ordinal)    fusion transformer width
        num_layers      1, 2, 3                   fusion transformer depth
        spatial_size    32, 64, 96 (ordinal)      channels of the per-frame FiLM block
        dropout         0.0 .. 0.3                fusion dropout
        marker_weight   0.1 .. 1.0, log           loss weight of the marker head
        match_weight    0.1 .. 1.0, log           loss weight of the instruction-match head
        mismatch_share  0.1 .. 1.0                mismatch negatives per batch row
        ==============  ========================  ==============================================="""
        model = {"hidden_size": trial.suggest_int("hidden_size", 64, 192, step=64),
                 "num_layers": trial.suggest_int("num_layers", 1, 3),
                 "spatial_size": trial.suggest_int("spatial_size", 32, 96, step=32),
                 "dropout": trial.suggest_float("dropout", 0.0, 0.3)}
        if model["hidden_size"] % self.num_heads:
            raise ValueError(f"hidden_size {model['hidden_size']} is not a multiple of num_heads {self.num_heads} "
                             f"(fix: set model.num_heads to 1, 2, 4, 8 or 16 in the base config)")
        return model, {"marker_weight": trial.suggest_float("marker_weight", 0.1, 1.0, log=True),
                       "match_weight": trial.suggest_float("match_weight", 0.1, 1.0, log=True),
                       "mismatch_share": trial.suggest_float("mismatch_share", 0.1, 1.0)}


def time_embedding(times_s: torch.Tensor, dim: int) -> torch.Tensor:
    """Sinusoidal embedding of times in seconds: (b, t) -> (b, t, dim); periods from 0.25 s to 60 s."""
    half = dim // 2
    periods = torch.logspace(math.log10(0.25), math.log10(60.0), half, device=times_s.device)
    angles = 2 * math.pi * times_s[..., None] / periods
    return torch.cat([angles.sin(), angles.cos()], dim=-1)


def _change(x: torch.Tensor) -> torch.Tensor:
    """Change from the previous frame along dim 1 (frames); zero for the first frame."""
    return x - torch.cat([x[:, :1], x[:, :-1]], dim=1)


class SpatialFiLM(nn.Module):
    """Per-frame spatial block conditioned on the instruction; returns one token per frame."""

    def __init__(self, in_channels: int, dim: int, out_dim: int, text_dim: int, grid: tuple[int, int]):
        super().__init__()
        self.norm_in = nn.GroupNorm(1, in_channels)  # encoder features come at any scale (std ~7 for lite0)
        self.proj = nn.Conv2d(in_channels, dim, 1)
        self.norm = nn.GroupNorm(8 if dim % 8 == 0 else 1, dim)  # FiLM modulates normalised features
        self.pos = nn.Parameter(torch.zeros(1, dim, *grid))
        self.film = nn.Linear(text_dim, 2 * dim)
        self.conv = nn.Sequential(nn.GELU(), nn.Conv2d(dim, dim, 3, padding=1), nn.GELU())
        self.query = nn.Linear(text_dim, dim)
        self.out = nn.Linear(2 * dim, out_dim)

    def forward(self, x: torch.Tensor, tokens: torch.Tensor, mask: torch.Tensor, pooled: torch.Tensor,
                t: int) -> torch.Tensor:
        # x (n, c, h, w) with n = b * t; pooled (b, text_dim) instruction (tokens unused) -> (n, out_dim)
        text = pooled.repeat_interleave(t, 0)
        h = self.proj(self.norm_in(x))
        if h.shape[-2:] == self.pos.shape[-2:]:
            h = h + self.pos
        h = self.norm(h)
        gamma, beta = self.film(text).chunk(2, dim=-1)
        h = h * (1 + gamma[..., None, None]) + beta[..., None, None]
        h = self.conv(h).flatten(2)  # (n, dim, h*w)
        attn = torch.einsum("nd,ndp->np", self.query(text), h) / math.sqrt(h.shape[1])
        pooled = torch.einsum("np,ndp->nd", attn.softmax(-1), h)
        return self.out(torch.cat([pooled, h.mean(-1)], dim=-1))


class SlotQueries(nn.Module):
    """``k`` learned queries read the instruction tokens: one vector per slot (the object, the place...)."""

    def __init__(self, dim: int, slots: int):
        super().__init__()
        self.queries = nn.Parameter(torch.randn(slots, dim) / math.sqrt(dim))
        self.key = nn.Linear(dim, dim)
        self.value = nn.Linear(dim, dim)

    def forward(self, text: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        # text (b, l, d), mask (b, l) -> (b, k, d)
        scores = torch.einsum("kd,bld->bkl", self.queries, self.key(text)) / math.sqrt(text.shape[-1])
        scores = scores.masked_fill(~mask[:, None], float("-inf"))
        return torch.einsum("bkl,bld->bkd", scores.softmax(-1), self.value(text))


class CellGrounding(nn.Module):
    """Per-frame grid of cells grounded in the instruction; returns one token per frame.

    Every cell (a patch of the frame) and its change since the previous frame get an embedding; the
    instruction's slots score every cell (``relevance``: "is this what the instruction names?") and
    modulate the embedding (FiLM); two depthwise-separable 3x3 convolutions over [relevance, its
    change, the modulated embedding] see neighbouring cells (the agent in front of the target, X next
    to Y); max and mean pooling over the cells give the frame's token. The text-cell interaction is a
    dot product per cell, so the gradient reaches the grounding directly instead of through a pooled
    frame summary. Runs channels-last: 2-3x faster convolutions on a CPU.
    """

    def __init__(self, in_channels: int, dim: int, out_dim: int, text_dim: int, slots: int, grid: tuple[int, int]):
        super().__init__()
        self.cell = nn.Sequential(nn.Conv2d(in_channels, dim, 1), nn.GELU(), nn.Conv2d(dim, dim, 1))
        self.pos = nn.Parameter(torch.zeros(1, dim, *grid))
        self.slots = SlotQueries(text_dim, slots)
        # Both sides normalised before their dot product: every relevance map starts at unit scale, so
        # the instruction is as loud as the picture from the first step (unnormalised, it was ~1% of it).
        self.slot_proj = nn.Sequential(nn.Linear(text_dim, dim), nn.LayerNorm(dim))
        self.key = nn.Conv2d(dim, dim, 1)
        self.key_norm = nn.LayerNorm(dim)
        self.film = nn.Linear(text_dim, 2 * dim)
        small = 8
        self.reduce = nn.Conv2d(dim, small, 1)
        maps = 2 * slots + small
        self.relate = nn.Sequential(nn.Conv2d(maps, dim, 1), nn.Conv2d(dim, dim, 3, padding=1, groups=dim), nn.GELU(),
                                    nn.Conv2d(dim, dim, 1), nn.Conv2d(dim, dim, 3, padding=1, groups=dim), nn.GELU(),
                                    nn.Conv2d(dim, dim, 1))
        self.out = nn.Sequential(nn.Linear(2 * dim, out_dim), nn.LayerNorm(out_dim))

    def forward(self, x: torch.Tensor, tokens: torch.Tensor, mask: torch.Tensor, pooled: torch.Tensor,
                t: int) -> torch.Tensor:
        # x (n, c, h, w) with n = b * t; tokens (b, l, text_dim), mask (b, l); pooled (b, text_dim) -> (n, out_dim)
        slots = self.slots(tokens, mask)  # (b, k, text_dim)
        x = F.group_norm(x, 1).contiguous(memory_format=torch.channels_last)  # features come at any scale
        h = self.cell(x)
        if h.shape[-2:] == self.pos.shape[-2:]:
            h = h + self.pos
        b, (n, d, gh, gw) = slots.shape[0], h.shape
        keys = self.key_norm(self.key(h).permute(0, 2, 3, 1).reshape(b, t, gh * gw, d))  # (b, t, cells, d)
        rel = torch.einsum("bkd,btpd->btpk", self.slot_proj(slots), keys) / math.sqrt(d)
        # Relevance and its change (what appeared or vanished), as a channels-last (n, 2k, h, w) view.
        maps = torch.cat([rel, _change(rel)], dim=-1).reshape(n, gh, gw, -1).permute(0, 3, 1, 2)
        gamma, beta = self.film(pooled).repeat_interleave(t, 0).chunk(2, dim=-1)
        h = F.gelu(h * (1 + gamma[..., None, None]) + beta[..., None, None])
        y = self.relate(torch.cat([maps, self.reduce(h)], dim=1)).permute(0, 2, 3, 1).reshape(n, gh * gw, d)
        return self.out(torch.cat([y.amax(1), y.mean(1)], dim=-1))


class PlacePool(nn.Module):
    """One frame embedding from its cells: a few learned places, each a softmax over the grid positions.

    ``flat`` (the first position-aware design) reads the whole grid with one linear map: a weight per
    cell and feature, which ~300 clips per category cannot pin down (a logistic regression on a whole
    frame decodes the target's colour at 0.33-0.77; on the one right tile at 1.00: README, "Model
    quality"). A place is shared-feature, position-specific: it learns *where* to look (the tile in
    front of the agent, the agent's own tile carrying an object) with one number per cell, and *what*
    it sees comes from the per-cell features shared across positions.
    """

    def __init__(self, per_cell: int, grid: tuple[int, int], places: int, dim: int):
        super().__init__()
        self.where = nn.Parameter(torch.randn(places, grid[0] * grid[1]))  # distinct starts: places differ
        self.out = nn.Sequential(nn.Linear(places * per_cell, dim), nn.LayerNorm(dim))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        # h (n, per_cell, gh, gw) -> (n, dim)
        at = torch.einsum("pk,nck->npc", self.where.softmax(-1), h.flatten(2))  # (n, places, per_cell)
        return self.out(at.flatten(1))


class CellVerifier(nn.Module):
    """Locate, then verify: does what the frames show where the marker points match the instruction?

    The transformer locates the outcome (the marker distribution; detached here: verifying must not move
    it). Each frame becomes one position-aware embedding: its cells and their change, reduced per cell,
    then a single linear read-out of the whole grid (in first-person video the target is in the cell in
    front of the agent, so *where* a colour is matters; a max over per-cell text scores threw that away
    and did not learn). The instruction's slots give one query; per frame, the cosine of the two; the
    frames from ``window`` before each possible marker to one after it are averaged under the marker
    distribution, beside the best frame of the whole clip. Out: additive success and match logits. The
    read-out starts at a fixed positive weight, not zero: from zero, the similarity gets no gradient
    until the read-out has grown, and it never did (README, "Model quality"). The human marker lags the
    event by ~0.4 s, hence the window looks back. Probe behind it: ``benchmarks.grounding_probe``.
    """

    def __init__(self, in_channels: int, dim: int, text_dim: int, slots: int, grid: tuple[int, int], window: int,
                 words: nn.Module | None = None, per_cell: int = 16, places: int = 0):
        super().__init__()
        self.words = words  # its own instruction encoder (learned words), or None: the model's text tokens
        self.grid = grid
        self.cell = nn.Sequential(nn.Conv2d(in_channels, dim, 1), nn.GELU(), nn.Conv2d(dim, per_cell, 1))
        self.places = PlacePool(per_cell, grid, places, dim) if places else None  # else: the whole grid, linearly
        self.frame = None if places else nn.Sequential(nn.Linear(per_cell * grid[0] * grid[1], dim), nn.LayerNorm(dim))
        self.slots = SlotQueries(text_dim, slots)
        self.query = nn.Sequential(nn.Linear(slots * text_dim, dim), nn.LayerNorm(dim))
        self.out = nn.Linear(2, 2)
        nn.init.constant_(self.out.weight, 2.0)
        nn.init.zeros_(self.out.bias)
        self.window = window

    def forward(self, x: torch.Tensor, tokens: torch.Tensor, mask: torch.Tensor,
                marker_logits: torch.Tensor, instructions: list[str] | None = None) -> torch.Tensor:
        # x (b, t, c, h, w); tokens (b, l, d), mask (b, l); marker_logits (b, t + 1) -> (b, 2) success, match
        if self.words is not None:
            tokens, mask = self.words(instructions)
        b, t = x.shape[:2]
        h = self.cell(F.group_norm(x.flatten(0, 1), 1))
        if h.shape[-2:] != self.grid:
            h = F.adaptive_avg_pool2d(h, self.grid)
        v = self.places(h) if self.places is not None else self.frame(h.flatten(1))
        v = F.normalize(v.view(b, t, -1), dim=-1)  # (b, t, d)
        q = F.normalize(self.query(self.slots(tokens, mask).flatten(1)), dim=-1)  # (b, d)
        sim = torch.einsum("btd,bd->bt", v, q)  # (b, t)
        marker = marker_logits.detach().softmax(-1)[:, :-1]  # (b, t): where the outcome is seen
        # Frame i is read when the marker falls from one frame before it to ``window`` frames after it.
        near = F.conv1d(F.pad(marker[:, None], (1, self.window)), marker.new_ones(1, 1, self.window + 2))[:, 0]
        weights = near / near.sum(-1, keepdim=True).clamp(min=1e-6)
        return self.out(torch.stack([(weights * sim).sum(-1), sim.amax(-1)], dim=-1))




class TransformerModel(Autorater):
    """The transformer model (see the module docstring)."""

    config_class = TransformerConfig

    def __init__(self, config: TransformerConfig):
        super().__init__(config)
        d = config.hidden_size
        self.text_encoder = create_text_encoder(config)
        self.text_proj = nn.Linear(self.text_encoder.out_dim, d)
        self.blank_text = nn.Parameter(torch.zeros(1, 1, d))  # the instruction-blind model's only "token"
        c = self.frame_encoder.out_channels * (2 if config.frame_diff else 1)
        grid = self.grid_size()
        if config.grounding == "cells":
            self.spatial = CellGrounding(c, config.spatial_size, d, d, config.text_slots, grid)
        elif config.grounding == "film":
            self.spatial = SpatialFiLM(c, config.spatial_size, d, d, grid)
        else:
            raise ValueError(f"unknown grounding {config.grounding!r}; known: 'film', 'cells'")
        self.time_proj = nn.Linear(d, d)
        self.phase = nn.Embedding(2, d)  # 0 = replayed context (before takeover), 1 = the agent alone
        nn.init.normal_(self.phase.weight, std=0.02)  # small beside the content, as position embeddings are
        self.token_norm = nn.LayerNorm(d) if config.token_norm else nn.Identity()
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        layer = nn.TransformerDecoderLayer(d, config.num_heads, 2 * d, config.dropout, batch_first=True,
                                           norm_first=True, activation="gelu")
        self.fusion = nn.TransformerDecoder(layer, config.num_layers, norm=nn.LayerNorm(d))
        extra = (d if config.direct_pool else 0) + (d if config.frame_pool else 0)
        self.success_head = self._head((2 * d if config.event_pooling else d) + extra)
        self.match_head = self._head(d + extra)
        self.failure_head = nn.Linear(d, max(1, len(config.failure_modes)))
        self.marker_head = nn.Linear(d, 1)
        self.end_head = nn.Linear(d, 1)
        if config.verify_words and not config.cell_verify:
            raise ValueError("verify_words is the verifier's own instruction encoder: it needs cell_verify=True")
        # The instruction-blind twin reads no instruction anywhere: its verifier sees the blank token.
        words = BagOfWords(config.vocab, d, config.max_text_tokens) \
            if config.verify_words and config.use_instruction else None
        if config.verify_places and not config.cell_verify:
            raise ValueError("verify_places is the verifier's frame read-out: it needs cell_verify=True")
        self.verifier = CellVerifier(c, config.spatial_size, d, config.text_slots, grid, config.verify_window,
                                     words, places=config.verify_places) if config.cell_verify else None

    def _head(self, n_in: int) -> nn.Module:
        d = self.config.hidden_size
        if self.config.mlp_heads:  # reads the instruction again: an explicit text-video interaction
            return nn.Sequential(nn.Linear(n_in + d, d), nn.GELU(), nn.Linear(d, 1))
        return nn.Linear(n_in, 1)


    # -- forward ------------------------------------------------------------------------------
    def encode_text(self, instructions: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """(tokens (b, l, d), mask (b, l)); a single learned blank token when the instruction is not used."""
        if not self.config.use_instruction:
            b = len(instructions)
            return self.blank_text.expand(b, 1, -1), torch.ones(b, 1, dtype=torch.bool)
        tokens, mask = self.text_encoder(instructions)
        return self.text_proj(tokens), mask

    def forward_head(self, features: torch.Tensor, times_s: torch.Tensor, takeover_s: torch.Tensor,
                     instructions: list[str],
             targets: Targets | None = None) -> AutoraterOutput:
        features = features.float()
        b, t = features.shape[:2]
        if self.config.frame_diff:
            features = torch.cat([features, _change(features)], dim=2)
        text, mask = self.encode_text(instructions)  # (b, l, d)
        pooled = (text * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
        frame_tokens = self.token_norm(self.spatial(features.flatten(0, 1), text, mask, pooled, t).view(b, t, -1))
        after = (times_s >= takeover_s[:, None]).long()
        x = frame_tokens + self.time_proj(time_embedding(times_s, frame_tokens.shape[-1])) + self.phase(after)
        x = torch.cat([self.cls + pooled[:, None], x], dim=1)  # [CLS] starts from the instruction
        x = self.fusion(x, text, memory_key_padding_mask=~mask)
        cls, frames_out = x[:, 0], x[:, 1:]
        marker_logits = torch.cat([self.marker_head(frames_out).squeeze(-1), self.end_head(cls)], dim=-1)
        head_in, match_in = cls, cls
        if self.config.event_pooling:  # look where the event is predicted: locate, then verify
            weights = marker_logits[:, :-1].softmax(-1)  # (b, t)
            head_in = torch.cat([cls, torch.einsum("bt,btd->bd", weights, frames_out)], dim=-1)
        if self.config.frame_pool:  # "did it happen in any frame?": the strongest frame speaks directly
            strongest = frames_out.amax(1)
            head_in, match_in = torch.cat([head_in, strongest], -1), torch.cat([match_in, strongest], -1)
        if self.config.direct_pool:
            direct = frame_tokens.mean(1)
            head_in, match_in = torch.cat([head_in, direct], -1), torch.cat([match_in, direct], -1)
        if self.config.mlp_heads:
            head_in, match_in = torch.cat([head_in, pooled], -1), torch.cat([match_in, pooled], -1)
        out = AutoraterOutput(
            success_logit=self.success_head(head_in).squeeze(-1),
            marker_logits=marker_logits,
            failure_logits=self.failure_head(cls),
            match_logit=self.match_head(match_in).squeeze(-1))
        if self.verifier is not None:  # locate (the marker), then verify on the cells there
            verify = self.verifier(features, text, mask, marker_logits, instructions)
            out.success_logit = out.success_logit + verify[:, 0]
            out.match_logit = out.match_logit + verify[:, 1]
        if targets is not None:
            out.losses = self.losses(out, targets)
            w = targets.weights
            out.loss = sum(wi * out.losses[k] for wi, k in zip(w, ("success", "marker", "failure", "match")))
        return out

    def losses(self, out: AutoraterOutput, tg: Targets) -> dict[str, torch.Tensor]:
        own = ~(tg.match < 0.5)  # the video with its own instruction (a NaN match target: not told, still own)
        zero = out.success_logit.sum() * 0
        told = torch.isfinite(tg.match)
        losses = {"match": F.binary_cross_entropy_with_logits(out.match_logit[told], tg.match[told].float())
                  if told.any() else zero}
        known = torch.isfinite(tg.success)
        losses["success"] = F.binary_cross_entropy_with_logits(out.success_logit[known], tg.success[known].float()) \
            if known.any() else zero
        has_marker = own & (tg.marker_index >= 0)
        losses["marker"] = self.marker_loss(out.marker_logits[has_marker], tg.marker_index[has_marker]) \
            if has_marker.any() else zero
        has_mode = own & (tg.failure_mode >= 0)
        losses["failure"] = F.cross_entropy(out.failure_logits[has_mode], tg.failure_mode[has_mode]) \
            if has_mode.any() else zero
        return losses

    def marker_loss(self, logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """Cross-entropy against a soft target (a 1-frame Gaussian), or per-frame BCE for "crossing"."""
        n = logits.shape[-1]
        pos = torch.arange(n, dtype=torch.float32)
        if self.config.marker_head == "crossing":
            reached = (pos[None, :-1] >= index[:, None]).float()  # 1 from the marker frame on
            return F.binary_cross_entropy_with_logits(logits[:, :-1], reached)
        target = torch.exp(-0.5 * (pos[None] - index[:, None].float()) ** 2)
        end = index == n - 1
        target[end] = F.one_hot(index[end], n).float()  # "end of video" is its own bin
        target[~end, -1] = 0
        target = target / target.sum(-1, keepdim=True)
        return -(target * logits.log_softmax(-1)).sum(-1).mean()

    # -- decoding -----------------------------------------------------------------------------
    def decode_marker(self, marker_logits: torch.Tensor, times_s: torch.Tensor, duration_s: torch.Tensor):
        """As :meth:`Autorater.decode_marker`; with ``marker_head="crossing"``, the first frame reached."""
        if self.config.marker_head != "crossing":
            return super().decode_marker(marker_logits, times_s, duration_s)
        bins = torch.cat([times_s, duration_s[:, None]], dim=1)  # (b, t + 1)
        reached = torch.sigmoid(marker_logits[:, :-1]) >= 0.5
        first = torch.where(reached.any(1), reached.float().argmax(1), torch.full_like(duration_s, -1).long())
        idx = torch.where(first >= 0, first, torch.full_like(first, times_s.shape[1]))
        p = torch.sigmoid(marker_logits[:, :-1])
        spread = (p * (1 - p)).sum(1) / times_s.shape[1] * (duration_s)  # rough: width of the ramp
        return bins.gather(1, idx[:, None]).squeeze(1), spread


__all__ = ["TransformerConfig", "TransformerModel"]
