"""The Autorater: frames + instruction -> P(success), the marker time, the failure mode.

Architecture (DESIGN.md section 3)::

    frames --frame encoder--> (b, t, c, h, w) --[f_t, f_t - f_t-1]--> 1x1 conv --FiLM(instruction)--> 3x3 conv
           --> instruction-queried attention pool + mean pool --> one token per frame
    frame tokens + time embedding (seconds) + before/after-takeover embedding, and a [CLS] token
           --> transformer decoder layers (self-attention over frames, cross-attention to instruction tokens)
    [CLS] -> success logit, match logit (auxiliary: does this instruction belong to this video?), failure mode
    frame tokens -> marker logits over frames (+ one "end of video" bin from [CLS])

Example:
    >>> model = Autorater(PRESETS["tiny"].replace(vocab=["go", "to", "the", "red", "ball"]))
    >>> frames = torch.zeros(2, 8, 32, 32, 3, dtype=torch.uint8)
    >>> times = torch.arange(8).float().repeat(2, 1) / 8
    >>> out = model(frames=frames, times_s=times, takeover_s=torch.zeros(2),
    ...             instructions=["go to the red ball"] * 2)
    >>> out.success_logit.shape, out.marker_logits.shape
    (torch.Size([2]), torch.Size([2, 9]))
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from autorater.config import ARCHITECTURES, PRESETS, AutoraterConfig
from autorater.encoders import BagOfWords, create_frame_encoder, create_text_encoder
from autorater.events import EventHead, active_frames, event_losses, first_events, log1mexp
from autorater.mirror import mirror_all, mirror_words


@dataclass
class AutoraterOutput:
    success_logit: torch.Tensor  # (batch,)
    marker_logits: torch.Tensor  # (batch, frames + 1): per sampled frame, then "end of video"
    failure_logits: torch.Tensor  # (batch, failure modes)
    match_logit: torch.Tensor  # (batch,)
    loss: torch.Tensor | None = None
    losses: dict = field(default_factory=dict)


@dataclass
class Targets:
    """Training targets; every field (batch,). Use NaN / -1 where unknown."""

    success: torch.Tensor  # soft label in [0, 1]; NaN = unknown (no success loss)
    marker_index: torch.Tensor  # long: the sampled frame nearest the marker, ``frames`` for "end"; -1 unknown
    failure_mode: torch.Tensor  # long: index into config.failure_modes; -1 unknown / not a failure
    match: torch.Tensor  # 1 = the video's own instruction, 0 = another's (no marker or failure-mode loss);
    #                      NaN = its own, but no match loss (``match_on_successes``: a failed video)
    # success, marker, failure, match, counterfactual (events: "success" weighs the event likelihood, which holds
    # the outcome, the marker and the failure mode; "counterfactual" P(success) under another instruction)
    weights: tuple[float, ...] = (1.0, 1.0, 0.2, 0.5, 0.3)


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


class Autorater(nn.Module):
    """A video-language autorater. ``save_pretrained`` / ``from_pretrained`` round-trip a model folder."""

    def __init__(self, config: AutoraterConfig):
        super().__init__()
        self.config = config
        if config.architecture not in ARCHITECTURES:
            raise ValueError(f"unknown architecture {config.architecture!r}; known: {', '.join(ARCHITECTURES)}")
        d = config.hidden_size
        self.frame_encoder = create_frame_encoder(config)
        if config.architecture == "events":
            grid = self._grid_size()
            def head():
                return EventHead(self.frame_encoder.out_channels, grid[0] * grid[1], config.vocab,
                                 1 + len(self.event_classes), config.places, use_instruction=config.use_instruction,
                                 raw_colours=config.encoder == "pixels", place_inputs=config.place_inputs,
                                 pose_cells=config.pixel_cells if config.pose else 0,
                                 front_places=config.front_places, grid=grid[0], text=config.text_encoder)
            for option in ("pose", "front_places", "mirror_tta"):
                if getattr(config, option) and config.encoder != "pixels":
                    raise ValueError(f"{option} reads first-person 'pixels' cells; encoder {config.encoder!r} has "
                                     f"none (fix: set {option} to false, or use the pixels encoder)")
            if config.members < 1:
                raise ValueError(f"members must be >= 1, got {config.members}")
            # One head keeps the first folders' weight names ("events.*"); an ensemble is "events.<k>.*".
            self.events = head() if config.members == 1 else nn.ModuleList([head() for _ in range(config.members)])
            return
        self.text_encoder = create_text_encoder(config)
        self.text_proj = nn.Linear(self.text_encoder.out_dim, d)
        self.blank_text = nn.Parameter(torch.zeros(1, 1, d))  # the instruction-blind model's only "token"
        c = self.frame_encoder.out_channels * (2 if config.frame_diff else 1)
        grid = self._grid_size()
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

    @property
    def event_heads(self) -> list[EventHead]:
        """The events model's heads (one, or the members of an ensemble)."""
        return list(self.events) if isinstance(self.events, nn.ModuleList) else [self.events]

    @property
    def event_classes(self) -> list[str]:
        """The events model's event classes after "none": success, then each failure mode that is an event."""
        return ["success"] + ([m for m in self.config.failure_modes if m != "timeout"] or ["failure"])

    def _head(self, n_in: int) -> nn.Module:
        d = self.config.hidden_size
        if self.config.mlp_heads:  # reads the instruction again: an explicit text-video interaction
            return nn.Sequential(nn.Linear(n_in + d, d), nn.GELU(), nn.Linear(d, 1))
        return nn.Linear(n_in, 1)

    def _grid_size(self) -> tuple[int, int]:
        with torch.no_grad():
            probe = torch.zeros(1, 1, self.config.image_size, self.config.image_size, 3, dtype=torch.uint8)
            return tuple(self.frame_encoder(probe).shape[-2:])

    # -- forward ------------------------------------------------------------------------------
    def encode_text(self, instructions: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """(tokens (b, l, d), mask (b, l)); a single learned blank token when the instruction is not used."""
        if not self.config.use_instruction:
            b = len(instructions)
            return self.blank_text.expand(b, 1, -1), torch.ones(b, 1, dtype=torch.bool)
        tokens, mask = self.text_encoder(instructions)
        return self.text_proj(tokens), mask

    def forward(self, times_s: torch.Tensor, takeover_s: torch.Tensor, instructions: list[str],
                frames: torch.Tensor | None = None, features: torch.Tensor | None = None,
                targets: Targets | None = None) -> AutoraterOutput:
        """Rate a batch of clips.

        Args:
            times_s: (b, t) time of each sampled frame, seconds from the first frame.
            takeover_s: (b,) when the agent takes over, seconds.
            instructions: b instructions.
            frames: (b, t, H, W, 3) uint8; or pass ``features`` from the frame encoder (b, t, c, h, w).
            targets: when given, the output carries the loss.
        """
        if features is None:
            features = self.frame_encoder(frames)
        if self.config.architecture == "events":
            return self._forward_events(features, times_s, takeover_s, instructions, targets)
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

    def _forward_events(self, features: torch.Tensor, times_s: torch.Tensor, takeover_s: torch.Tensor,
                        instructions: list[str], targets: Targets | None) -> AutoraterOutput:
        """The events model (autorater/events.py): per-frame events chained into the clip's outcome.

        An ensemble's clip-level distributions (outcome, marker, failure mode) are the mixture of its members';
        each member is trained on its own losses, as if alone. With ``mirror_tta``, prediction also mixes in
        each member's rating of the mirrored clips."""
        active = active_frames(times_s, takeover_s)
        modes = self.config.failure_modes
        if targets is not None:
            # Each failure mode's event class (-1: "timeout", no event); the appended -1 serves unknown modes (-1).
            class_of = torch.tensor([-1 if m == "timeout" else self.event_classes.index(m) for m in modes] + [-1])
            failure_class = class_of[targets.failure_mode]
            timeout = (targets.marker_index == times_s.shape[1]) | ((targets.failure_mode >= 0) & (failure_class < 0))
        log_ps, marker, failure, matches, losses = [], [], [], [], []
        views = [(features, instructions)]
        if self.config.mirror_tta and targets is None:  # the same clips in a mirrored world: one more member
            views.append((mirror_all(features, self.config.pixel_cells), [mirror_words(t) for t in instructions]))
        for head, (feats, words) in itertools.product(self.event_heads, views):
            logp, match = head(feats, words)  # (b, t, classes), (b, t)
            first, none = first_events(logp, active)  # (b, t, events), (b,)
            log_ps.append(torch.logsumexp(first[..., 0], 1))
            marker.append(torch.cat([torch.logsumexp(first, -1), none[:, None]], 1))  # log P(first event at t / none)
            failure.append(torch.stack([none if m == "timeout" else torch.logsumexp(
                first[..., self.event_classes.index(m)], 1) for m in modes], -1)
                           if modes else none.new_zeros(len(none), 1))
            matches.append(torch.logsumexp(2 * match.masked_fill(~active, -1e4), 1) / 2)
            if targets is not None:
                losses.append(event_losses(first, none, match, active, times_s, targets.success, targets.marker_index,
                                           failure_class, own=~(targets.match < 0.5), timeout=timeout))

        def mixture(xs):  # log of the members' mean probability
            return torch.logsumexp(torch.stack(xs), 0) - math.log(len(xs))

        log_p = mixture(log_ps)
        out = AutoraterOutput(success_logit=log_p - log1mexp(log_p), marker_logits=mixture(marker),
                              failure_logits=mixture(failure), match_logit=torch.stack(matches).mean(0))
        if targets is not None:
            out.losses = {k: torch.stack([m[k] for m in losses]).mean() for k in losses[0]}
            w = dict(zip(("event", "marker", "failure", "match", "counterfactual"), targets.weights))
            out.loss = w["event"] * out.losses["event"] + w["match"] * out.losses["match"] + \
                w.get("counterfactual", 0.3) * out.losses["counterfactual"]
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
        """Marker time (s) and its uncertainty (s, the spread of the distribution) per clip.

        Args:
            marker_logits: (b, t + 1).
            times_s: (b, t) sampled frame times.
            duration_s: (b,) video durations ("end" bin time).
        """
        bins = torch.cat([times_s, duration_s[:, None]], dim=1)  # (b, t + 1)
        if self.config.marker_head == "crossing":
            reached = torch.sigmoid(marker_logits[:, :-1]) >= 0.5
            first = torch.where(reached.any(1), reached.float().argmax(1), torch.full_like(duration_s, -1).long())
            idx = torch.where(first >= 0, first, torch.full_like(first, times_s.shape[1]))
            p = torch.sigmoid(marker_logits[:, :-1])
            spread = (p * (1 - p)).sum(1) / times_s.shape[1] * (duration_s)  # rough: width of the ramp
            return bins.gather(1, idx[:, None]).squeeze(1), spread
        probs = marker_logits.softmax(-1)
        idx = probs.argmax(-1)
        marker = bins.gather(1, idx[:, None]).squeeze(1)
        mean = (probs * bins).sum(-1)
        spread = ((probs * (bins - mean[:, None]) ** 2).sum(-1)).sqrt()
        return marker, spread

    # -- folders ------------------------------------------------------------------------------
    def trainable_state_dict(self) -> dict[str, torch.Tensor]:
        """Everything but the frozen pretrained encoders (they are rebuilt from their packages)."""
        skip = [name + "." for name in ("frame_encoder", "text_encoder")
                if getattr(getattr(self, name, None), "frozen", False)]
        return {k: v.detach().contiguous() for k, v in self.state_dict().items()
                if not any(k.startswith(s) for s in skip)}

    def save_pretrained(self, path: str | Path, metadata: dict | None = None) -> Path:
        """Write ``config.json`` + ``model.safetensors`` (+ ``metadata.json``). No pickle.

        Every file is written to a temp file, fsynced and renamed; the weights carry a SHA-256 of their tensors
        in the safetensors header (``weights_sha256``), checked by ``from_pretrained``. Non-finite weights are
        refused here, not discovered by the first request.
        """
        from safetensors.torch import save_file

        from data.files import commit, json_text, temp_path, write_text_atomic

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        state = self.trainable_state_dict()
        bad = non_finite_tensors(state)
        if bad:
            raise ValueError(f"refusing to save a model with non-finite weights in {bad[:3]} (fix: the training "
                             f"diverged; lower the learning rate or resume from an earlier checkpoint)")
        write_text_atomic(path / "config.json", json_text(self.config.to_dict()))
        tmp = temp_path(path / "model.safetensors")
        save_file(state, str(tmp), metadata={"format": "autorater", "encoder": self.config.encoder,
                                             "weights_sha256": weights_sha256(state)})
        commit(tmp, path / "model.safetensors")
        if metadata is not None:
            write_text_atomic(path / "metadata.json", json.dumps(metadata, indent=1, default=str) + "\n")
        return path

    @staticmethod
    def check_folder(path: str | Path) -> Path:
        """``path`` if it holds a saved model (config.json and model.safetensors); FileNotFoundError otherwise."""
        path = Path(path)
        if not (path / "config.json").is_file() or not (path / "model.safetensors").is_file():
            raise FileNotFoundError(f"{path} is not a model folder: it needs config.json and model.safetensors "
                                    f"(written by `autorater train` or Autorater.save_pretrained)")
        return path

    @classmethod
    def from_pretrained(cls, path: str | Path) -> "Autorater":
        """Load a model folder. Reads JSON and safetensors only: loading can never run code.

        Checked before anything large is allocated: the config, and the tensor shapes of the safetensors header
        against a model built on the meta device (no memory). Then the weights' checksum (when the folder has one:
        folders saved before it existed still load), that every weight is finite, and ``calibration.json``
        (:func:`check_calibration_file`). Every failure is a ValueError that names the file and the fix.
        """
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        path = cls.check_folder(path)
        weights = path / "model.safetensors"
        restore = "(fix: the file is damaged; restore it from the MLflow artifact or retrain)"
        try:
            config = AutoraterConfig.load(path / "config.json")
        except ValueError as err:  # an unknown field, a wrong type or an unknown encoder: name the file
            msg = str(err)
            raise ValueError(msg if str(path / "config.json") in msg else f"{path / 'config.json'}: {msg} (fix: "
                             f"restore the config.json saved with this model)") from None
        try:
            header, meta = read_safetensors_header(weights)
        except (SafetensorError, OSError, ValueError) as err:
            raise ValueError(f"cannot read {weights}: {err} {restore}") from None
        planned = _planned_shapes(config, path)
        if planned is not None:
            _compare_shapes(planned, header, weights)
        model = cls(config)
        try:
            state = load_file(str(weights))
        except (SafetensorError, OSError, ValueError) as err:
            raise ValueError(f"cannot read {weights}: {err} {restore}") from None
        expected = model.trainable_state_dict()
        _compare_shapes({k: tuple(v.shape) for k, v in expected.items()},
                        {k: tuple(v.shape) for k, v in state.items()}, weights)
        stored = meta.get("weights_sha256")
        if stored is not None and stored != weights_sha256(state):
            raise ValueError(f"{weights}: the weights do not match the checksum saved with them (bytes changed "
                             f"since `save_pretrained`) {restore}")
        bad = non_finite_tensors(state)
        if bad:
            raise ValueError(f"{weights}: non-finite weights (NaN or infinity) in {bad[:3]}; every prediction would "
                             f"fail {restore}")
        if (path / "calibration.json").is_file():
            check_calibration_file(path / "calibration.json")
        model.load_state_dict(state, strict=False)
        return model.eval()


def weights_sha256(state: dict[str, torch.Tensor]) -> str:
    """SHA-256 over the tensors (by name: name, dtype, shape, bytes): what ``save_pretrained`` stores."""
    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().contiguous().cpu()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def non_finite_tensors(state: dict[str, torch.Tensor]) -> list[str]:
    """Names of the floating-point tensors holding a NaN or an infinity."""
    return sorted(k for k, t in state.items() if t.is_floating_point() and not bool(torch.isfinite(t).all()))


def read_safetensors_header(path: str | Path) -> tuple[dict[str, tuple], dict[str, str]]:
    """({tensor name: shape}, metadata) of a safetensors file, from its header alone (no tensor is read)."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
        return shapes, dict(f.metadata() or {})


def _planned_shapes(config: AutoraterConfig, path: Path) -> dict[str, tuple] | None:
    """The trainable tensors' shapes of a model built from ``config`` on the meta device (no memory); None where a
    part cannot be built there (pretrained encoders load their weights; then the shapes are compared after the
    model is built)."""
    import warnings

    try:
        with warnings.catch_warnings(), torch.device("meta"):
            warnings.simplefilter("ignore")
            planned = Autorater(config)
    except ValueError as err:
        raise ValueError(f"{path / 'config.json'}: {err} "
                         "(fix: restore the config.json saved with this model)") from None
    except Exception:  # noqa: BLE001 - e.g. transformers' from_pretrained refuses the meta device
        return None
    return {k: tuple(v.shape) for k, v in planned.trainable_state_dict().items()}


def _compare_shapes(expected: dict[str, tuple], stored: dict[str, tuple], weights: Path) -> None:
    missing, extra = set(expected) - set(stored), set(stored) - set(expected)
    bad = [k for k in set(expected) & set(stored) if tuple(stored[k]) != tuple(expected[k])]
    if missing or extra or bad:
        raise ValueError(f"{weights} does not match config.json: missing "
                         f"{sorted(missing)[:3]}, unexpected {sorted(extra)[:3]}, wrong shape {sorted(bad)[:3]} "
                         f"(fix: keep the config.json saved with these weights, and load with the autorater version "
                         f"that trained them; a folder from an older architecture must be retrained)")


_PROBABILITIES = ("target_agreement", "confidence", "t_success", "t_fail", "bound", "expected_coverage",
                  "empirical_agreement", "scaling_share")


def check_calibration_file(path: str | Path) -> dict:
    """A model folder's ``calibration.json``, checked: JSON without NaN or infinities anywhere, a positive
    temperature, probabilities in [0, 1]. ValueError naming the field otherwise."""
    path = Path(path)
    fix = "(fix: rerun `autorater calibrate`, or delete calibration.json to route every continuation to humans)"

    try:
        d = json.loads(path.read_text(encoding="utf-8"))  # NaN / Infinity parse, and are named by field below
    except RecursionError:
        raise ValueError(f"{path}: nested too deeply to be a calibration record {fix}") from None
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise ValueError(f"cannot read {path}: {err} {fix}") from None
    if not isinstance(d, dict):
        raise ValueError(f"{path} must be a JSON object {fix}")

    def numbers(x, where):
        if isinstance(x, dict):
            for k, v in x.items():
                yield from numbers(v, f"{where}.{k}" if where else str(k))
        elif isinstance(x, list):
            for i, v in enumerate(x):
                yield from numbers(v, f"{where}[{i}]")
        elif isinstance(x, (int, float)) and not isinstance(x, bool):
            yield where, x

    for where, x in numbers(d, ""):
        if not math.isfinite(x):
            raise ValueError(f"{path}: field '{where}' is {x}, not a finite number {fix}")
    for name in _PROBABILITIES:
        v = d.get(name)
        if v is not None and not (isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1):
            raise ValueError(f"{path}: field '{name}' must be a probability in [0, 1] or null, got {v!r} {fix}")
    t = d.get("temperature", 1.0)
    if not (isinstance(t, (int, float)) and not isinstance(t, bool) and t > 0):
        raise ValueError(f"{path}: field 'temperature' must be a positive number, got {t!r} {fix}")
    return d


__all__ = ["Autorater", "AutoraterOutput", "Targets", "PRESETS", "check_calibration_file", "non_finite_tensors",
           "read_safetensors_header", "weights_sha256"]
