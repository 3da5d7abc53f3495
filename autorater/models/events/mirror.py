"""Left-right mirror of first-person clips and their instructions: the same episode in a mirrored world.

Training mirrors half the clips (``training/inputs/augment.py``); a model with ``mirror_tta`` also rates every clip
mirrored and averages the two (test-time augmentation). The mirror is exact on decoded frames
(b, t, H, W, 3) and on "pixels" cells (b, t, 3 k^2, G, G: each cell's mean colours on a k x k sub-grid,
channel ``c k^2 + i k + j``).

Example:
    >>> mirror_words("open the door on your left")
    'open the door on your right'
"""

from __future__ import annotations

import re

import torch

_SIDES = re.compile(r"\b(left|right)\b", re.IGNORECASE)


def same_case(word: str, like: str) -> str:
    return word.capitalize() if like[:1].isupper() else word


def mirror_words(text: str) -> str:
    """The instruction of the mirrored episode: "left" and "right" swapped, nothing else."""
    return _SIDES.sub(lambda m: same_case("right" if m.group(1).lower() == "left" else "left", m.group(1)), text)


def mirror(x: torch.Tensor, flip: torch.Tensor, pixel_cells: int) -> torch.Tensor:
    """Mirror left-right the clips of a batch where ``flip`` (b,) is True.

    ``pixel_cells`` 0: decoded frames (b, t, H, W, 3), flipped along W; k > 0: "pixels" cells, flipped along
    the grid's columns and, inside each cell, along the k x k sub-grid.
    """
    rows = flip.to(x.device).nonzero().flatten()
    if not len(rows):
        return x
    out = x.clone()
    if not pixel_cells:
        out[rows] = x[rows].flip(3)
        return out
    k = pixel_cells
    channels = torch.arange(x.shape[2], device=x.device).view(-1, k, k).flip(-1).flatten()
    out[rows] = x[rows][:, :, channels].flip(-1)
    return out


def mirror_all(x: torch.Tensor, pixel_cells: int) -> torch.Tensor:
    """Every clip of the batch mirrored (:func:`mirror` with ``flip`` all True)."""
    return mirror(x, torch.ones(len(x), dtype=torch.bool, device=x.device), pixel_cells)
