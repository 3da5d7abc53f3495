"""The event model: per frame, did the instructed outcome (or a failure) happen here? (``architecture="events"``)

A continuation succeeds when the first decisive *event* in it is a success: the agent reaches, picks
up, opens or places what the instruction names. The model scores every frame and chains the frames
into a discrete-time competing-risks likelihood::

    cells of frame t and their change since t-1 --per-cell MLP--> generic cell features (what moved, appeared...)
    instruction words (multi-hot, per half of the sentence) --linear--> one query per *place*
    place k = a learned softmax over the grid positions; match(t) = sum_k <place_k(cells of t), query_k>
    (pose) match(t) += < side of the first pose the cell in front lies on at t, words -> side >
    [generic cell features, match(t-1..t+1), the instruction's verb] --MLP--> P(none / success / failure mode) at t
    P(first event is class c at t) = P(c at t) * prod_{s < t} P(none at s)      (frames after the takeover only)

P(success) is the sum over frames of the first-event probability of "success"; the marker is the
most likely first event (or the end, for a timeout); the failure mode is the likeliest failure class
(timeout: no event at all). Training maximises the probability of the annotators' outcome with the
event inside a window around their marker (they mark ~0.4 s after it), so every success and every
early failure is a per-frame lesson, not one bit per clip.

The instruction is read where the outcome is decided: the match is a bilinear form between the words
and a few learned places of the frame (in first-person video the acted-on object sits in front of,
or under, the agent). Places start where the frames change most around the annotators' markers
(``place_prior``, computed from the training data): from a uniform start they take hundreds of steps to
find that spot (README, "Model quality"). The match is also trained directly: the frames around a
success marker must fit the clip's own instruction better than another instruction of its category.

The chain over frames and its losses are the event stream's, a part both architectures share
(``autorater/models/parts/``: ``risks.py``, ``stream.py``); this module holds the grid recipe's per-frame head.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from autorater.encoders import tokenize_words
from autorater.models.events.pose import front_side
from autorater.models.parts.text import SentenceText


class HalvesBagOfWords(nn.Module):
    """Instruction -> multi-hot over the vocabulary, for the whole sentence and for each of its halves.

    The halves keep the binding of a two-object instruction ("put the *red ball* next to the *blue
    key*") that a plain bag of words loses. Unknown words share one slot. No parameters: the
    model's linear maps read it.
    """

    def __init__(self, vocab: list[str]):
        super().__init__()
        self.index = {w: i + 1 for i, w in enumerate(vocab)}  # 0: unknown
        self.size = len(vocab) + 1
        self.out_dim = 3 * self.size

    def forward(self, texts: list[str]) -> torch.Tensor:
        out = torch.zeros(len(texts), self.out_dim)
        for row, text in enumerate(texts):
            words = tokenize_words(text)
            for i, word in enumerate(words):
                k = self.index.get(word, 0)
                out[row, k] = 1.0
                out[row, self.size * (1 + int(2 * i >= len(words))) + k] = 1.0
        return out


class PlaceMatch(nn.Module):
    """One match score per frame: the instruction's queries against a few learned places of the grid and,
    with ``sides``, the words against the side of the first pose the cell in front lies on (``pose.py``)."""

    def __init__(self, channels: int, text_dim: int, cells: int, places: int = 4, dim: int = 32,
                 sides: bool = False, front: tuple[int, tuple[int, ...]] | None = None):
        super().__init__()
        self.cell = nn.Sequential(nn.Linear(2 * channels, 64), nn.GELU(), nn.Linear(64, dim))
        self.where = nn.Parameter(torch.randn(places, cells))  # re-set from the data by ``place_prior``
        self.query = nn.Linear(text_dim, places * dim)
        self.bias = nn.Linear(text_dim, 1)
        self.side = nn.Linear(text_dim, 4) if sides else None  # "left" -> the left side of the first pose...
        # Two fixed places (first person): the cell in front of the agent, and the best of its neighbours
        # (where "put X next to Y" wants Y once X is dropped in front): each with its own query.
        self.front = front  # (the front cell, its neighbours) as flat grid indices, or None
        self.front_query = nn.Linear(text_dim, 2 * dim) if front else None
        self.places, self.dim = places, dim

    @property
    def columns(self) -> int:
        """Columns of ``per_place``: the learned places, then the two fixed ones."""
        return self.places + (2 if self.front else 0)

    def forward(self, cells: torch.Tensor, text: torch.Tensor, side: torch.Tensor | None = None) -> torch.Tensor:
        # cells (b, t, p, 2c): each cell and its change; text (b, text_dim); side (b, t, 4) -> (b, t)
        return self.total(self.per_place(cells, text), text, side)

    def total(self, per_place: torch.Tensor, text: torch.Tensor, side: torch.Tensor | None) -> torch.Tensor:
        """(b, t): the places' sum, the words' bias and (with sides) the words' agreement with the side."""
        out = per_place.sum(-1) + self.bias(text)
        if self.side is not None:
            out = out + torch.einsum("btk,bk->bt", side, self.side(text))
        return out

    def per_place(self, cells: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        """(b, t, columns): each place's agreement with its query."""
        emb = self.cell(cells)
        at = torch.einsum("kp,btpd->btkd", self.where.softmax(-1), emb)
        q = self.query(text).view(-1, self.places, self.dim)
        out = torch.einsum("btkd,bkd->btk", at, q)
        if not self.front:
            return out
        ahead, beside = self.front
        qa, qb = self.front_query(text).view(-1, 2, self.dim).unbind(1)
        in_front = torch.einsum("btd,bd->bt", emb[:, :, ahead], qa)
        best_beside = torch.einsum("btnd,bd->btn", emb[:, :, list(beside)], qb).logsumexp(-1)  # a soft "any of"
        return torch.cat([out, in_front[..., None], best_beside[..., None]], -1)


def front_cells(grid: int) -> tuple[int, tuple[int, ...]]:
    """First-person grid (the agent at the bottom centre, facing up): the flat index of the cell in front
    of the agent and of that cell's three other neighbours (ahead of it, left, right)."""
    row, col = grid - 2, grid // 2
    return row * grid + col, ((row - 1) * grid + col, row * grid + col - 1, row * grid + col + 1)


class EventHead(nn.Module):
    """Per-frame event log-probabilities (b, t, 1 + 1 + early failure modes) from cell features and words."""

    def __init__(self, channels: int, cells: int, vocab: list[str], classes: int, places: int = 4,
                 generic: int = 4, hidden: int = 128, use_instruction: bool = True, raw_colours: bool = True,
                 place_inputs: bool = False, pose_cells: int = 0, front_places: bool = False, grid: int = 7,
                 text: str = "bow"):
        super().__init__()
        self.pose_cells = pose_cells  # > 0: first-person "pixels" cells on this sub-grid: the match also reads
        #                              which side of the first pose the cell in front lies on (pose.py)
        self.place_inputs = place_inputs  # the classifier reads each place's match, not only their sum
        self.raw_colours = raw_colours  # "pixels" features in [0, 1]; other encoders' come at any scale
        # "minilm": pretrained sentence vectors, no vocabulary; else the training set's words ("bow")
        self.words = SentenceText() if text == "minilm" else HalvesBagOfWords(vocab)
        self.use_instruction = use_instruction
        self.match = PlaceMatch(channels, self.words.out_dim, cells, places, sides=pose_cells > 0,
                                front=front_cells(grid) if front_places else None)
        self.generic = nn.Sequential(nn.Linear(2 * channels, 64), nn.GELU(), nn.Linear(64, generic))
        self.verb = nn.Linear(self.words.out_dim, 16)
        n_match = 3 * (self.match.columns + 1 if place_inputs else 1)
        self.mlp = nn.Sequential(nn.Linear(cells * generic + n_match + 16, hidden), nn.GELU(),
                                 nn.Linear(hidden, classes))

    def cells(self, features: torch.Tensor) -> torch.Tensor:
        """(b, t, c, h, w) -> (b, t, cells, 2c): each cell and its change since the previous frame, about unit scale."""
        x = features.float().flatten(3).transpose(2, 3)  # (b, t, cells, c)
        x = (x - 0.5) * 4.0 if self.raw_colours else F.layer_norm(x, x.shape[-1:])  # raw colours are in [0, 1]
        return torch.cat([x, x - torch.cat([x[:, :1], x[:, :-1]], 1)], -1)

    def text(self, instructions: list[str]) -> torch.Tensor:
        words = self.words(instructions).to(self.verb.weight.device)
        return words if self.use_instruction else torch.zeros_like(words)  # the blind twin reads nothing

    def side(self, features: torch.Tensor) -> torch.Tensor | None:
        """(b, t, 4) the side of the first pose the cell in front lies on (None without ``pose_cells``)."""
        return front_side(features, self.pose_cells) if self.pose_cells else None

    def match_score(self, features: torch.Tensor, instructions: list[str],
                    active: torch.Tensor | None = None) -> torch.Tensor:
        """(b, t) the instruction match alone (the warm-up's task); ``active`` is not read (the cells say it all)."""
        return self.match(self.cells(features), self.text(instructions), self.side(features))

    def forward(self, features: torch.Tensor, instructions: list[str],
                active: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """features (b, t, c, h, w) -> (per-frame class log-probabilities (b, t, classes), match (b, t)); ``active``
        is not read."""
        cells = self.cells(features)
        text = self.text(instructions)
        per_place = self.match.per_place(cells, text)  # (b, t, learned places + fixed ones)
        match = self.match.total(per_place, text, self.side(features))  # (b, t)
        m = torch.cat([match[..., None], per_place], -1) if self.place_inputs else match[..., None]
        near = torch.cat([torch.cat([m[:, :1], m[:, :-1]], 1), m, torch.cat([m[:, 1:], m[:, -1:]], 1)], -1)
        verb = self.verb(text)[:, None].expand(-1, cells.shape[1], -1)
        logits = self.mlp(torch.cat([self.generic(cells).flatten(2), near, verb], -1))
        return logits.log_softmax(-1), match


__all__ = ["EventHead", "HalvesBagOfWords", "PlaceMatch", "front_cells"]
