"""Label-preserving augmentations of cached clips: the same episode in a mirrored or recoloured world.

A mirror (left <-> right) and a permutation of the objects' colours change the pictures and the
instruction's words together, so the outcome, the marker and the failure mode stay what the
annotators said. Both act on decoded frames (b, t, H, W, 3) or on "pixels" cells (b, t, 3 k^2, G, G:
each cell's mean colours on a k x k sub-grid, channel ``c k^2 + i k + j``); ImageNet features of a
changed frame are not a function of the cached ones, so other encoders skip both (``stages/joint.py``). The
colours are the palette of the world that made the suites (its ``PALETTE``: BabyAI's, MiniGrid's colours as they show
on screen): a world without one allows no recolour.

Words alone: a weaker instruction (one colour word dropped, ``relax_words``) still holds in a success
video, and a changed colour word (``recolour_one_word``) or a weaker instruction that ``contradicts`` another
video's does not: the rows ``make_batch`` adds for ``TrainConfig.augment.relax``.

Example:
    >>> mirror_words("open the door on your left")
    'open the door on your right'
    >>> recolour_words("put the blue key next to the green ball", {"blue": "yellow", "green": "blue"})
    'put the yellow key next to the blue ball'
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from autorater.data.worlds import Palette
from autorater.models.events.mirror import mirror, mirror_words, same_case  # noqa: F401  (mirror: also used at test time)


@dataclass
class Augmentations:
    """The training augmentations (``TrainConfig.augment``), each applied only where the architecture (its spec's
    ``augmentations``) and the suites' worlds allow it (the joint step notes the others, switched off:
    ``training/stages/joint.py``)."""

    ranges: ClassVar[dict[str, tuple[float, float]]] = {"relax": (0, 1), "crop": (0, 1)}  # TrainConfig.check

    rotate: bool = True  # random 90-degree rotations of the top-down view, applied only when every training
    #                      suite's world allows it (``top_down``): a first-person frame has one orientation (the
    #                      agent at the bottom, facing up)
    mirror: bool = True  # mirror half the clips left-right and swap "left"/"right" in their instructions: the same
    #                      episode in a mirrored world, with the same outcome and marker. Needs inputs a mirror
    #                      maps exactly (decoded frames or "pixels" cells); other encoders' features skip it
    recolour: bool = False  # permute the objects' colours (green, blue, purple, yellow) in half the clips and in
    #                        their instructions; the world's palette: only for suites of a world that allows it
    #                        (its ``augmentations``: BabyAI's), and with inputs a mirror may use
    relax: float = 0.5  # share of the success clips of a batch also shown under their instruction with one colour
    #                     word dropped ("pick up the ball": asks for less, still a success), with two negatives
    #                     (that instruction on a video of another object; the clip with a colour word changed);
    #                     categories where a wrong object is a failure only (not go_to); suites of a world that
    #                     allows it only (BabyAI's colour words). Without it a colourless instruction reads as a
    #                     weak match
    crop: float = 0.0  # > 0: each training clip seen through a random window of ``crop``..1 of its feature map's
    #                   sides (one size a batch, a place per clip): a crop of the picture, the viewpoint moved a
    #                   little. Only for heads that find things by content, not by place (their spec's
    #                   ``augmentations``: the general model); skipped for the others
    pixels: bool = True  # an outcome path that trains from pixels: a random crop and colour jitter per clip

    @classmethod
    def none(cls) -> "Augmentations":
        """Every augmentation off (a batch rated as it is)."""
        return cls(rotate=False, mirror=False, recolour=False, relax=0.0, crop=0.0, pixels=False)


@functools.lru_cache(maxsize=8)
def _colours(palette: Palette) -> tuple[list[str], torch.Tensor, torch.Tensor, re.Pattern]:
    """A palette's colour names, its floor (3,), each colour as the renderer shows it less the floor (colours, 3), in
    [0, 1], and a pattern of its colour words with the space before them."""
    names = list(palette.colours)
    floor = torch.full((3,), palette.floor)
    offsets = torch.tensor([[c + palette.tint * (255 - c) for c in rgb] for rgb in palette.colours.values()]) / 255
    return names, floor, offsets - floor, re.compile(r"\s*\b(" + "|".join(names) + r")\b", re.IGNORECASE)


def random_permutation(rng: np.random.Generator, palette: Palette) -> dict[str, str]:
    """A random permutation of the palette's ``permuted`` colours (possibly the identity), as {old: new}."""
    permuted = palette.permuted
    return dict(zip(permuted, (permuted[i] for i in rng.permutation(len(permuted)))))


def recolour_words(text: str, permutation: dict[str, str]) -> str:
    """The instruction of the recoloured episode: every permuted colour word renamed."""
    words = re.compile(r"\b(" + "|".join(permutation) + r")\b", re.IGNORECASE)
    return words.sub(lambda m: same_case(permutation.get(m.group(1).lower(), m.group(1).lower()), m.group(1)), text)


def _targets(permutations: list[dict[str, str]], names: list[str]) -> torch.Tensor:
    """(n, colours): for each permutation, the index of each rendered colour's new colour."""
    table = torch.arange(len(names)).repeat(len(permutations), 1)
    for row, permutation in enumerate(permutations):
        for old, new in permutation.items():
            table[row, names.index(old)] = names.index(new)
    return table


def recolour_rgb(rgb: torch.Tensor, permutations: list[dict[str, str]], palette: Palette) -> torch.Tensor:
    """(n, ..., 3) colours in [0, 1], one permutation per row -> the same with the permuted colours swapped.

    Each colour is read as the floor plus a share ``a`` of one on-screen object colour (the one that
    explains it best: a cell's mean mixes the object with the floor around it); a permuted one moves by
    ``a`` times the difference between its new colour and its old one. Floor, walls, the agent, black
    (unseen) and everything else stay as they are.
    """
    names, floor, offsets, _ = _colours(palette)
    d = rgb.float() - floor
    share = (d @ offsets.T / (offsets ** 2).sum(-1)).clamp(0, 1)  # (n, ..., colours)
    residual = ((d[..., None, :] - share[..., None] * offsets) ** 2).sum(-1)
    best = residual.argmin(-1)
    a = share.gather(-1, best[..., None])
    target = _targets(permutations, names).gather(1, best.flatten(1)).view_as(best)
    return rgb.float() + a * (offsets[target] - offsets[best])


def recolour(x: torch.Tensor, permutations: list[dict[str, str] | None], pixel_cells: int,
             palette: Palette | None) -> torch.Tensor:
    """Recolour each clip of a batch by its own permutation (None: unchanged) of ``palette``'s colours; frames or
    cells as ``mirror``."""
    rows = [i for i, p in enumerate(permutations) if p and any(k != v for k, v in p.items())]
    if not rows:
        return x
    out, clips, chosen = x.clone(), x[rows], [permutations[i] for i in rows]
    if not pixel_cells:  # (r, t, H, W, 3) uint8
        out[rows] = (recolour_rgb(clips.float() / 255, chosen, palette) * 255).round().clamp(0, 255).to(x.dtype)
        return out
    r, t, c, g, _ = clips.shape  # (r, t, 3 k^2, G, G): channel c k^2 + s
    rgb = clips.view(r, t, 3, c // 3, g, g).movedim(2, -1)
    out[rows] = recolour_rgb(rgb, chosen, palette).clamp(0, 1).movedim(-1, 2).reshape(r, t, c, g, g).to(x.dtype)
    return out


# An instruction with one colour word dropped asks for less ("pick up the red ball" -> "pick up the ball"), so a
# success stays a success, at the same moment, where acting on a wrong object is a decisive failure (the first
# decisive event of a success is the success). Object and colour words decide whether a weaker instruction can
# hold in another success video.


def relax_words(text: str, rng: np.random.Generator, palette: Palette) -> str | None:
    """The instruction with one of its colour words (picked at random) dropped; None when it has none."""
    found = list(_colours(palette)[3].finditer(text))
    if not found:
        return None
    m = found[rng.integers(len(found))]
    return text[:m.start()] + text[m.end():]


def recolour_one_word(text: str, rng: np.random.Generator, palette: Palette) -> str | None:
    """The instruction with one of its colour words (picked at random) changed to another colour; None when it
    has none. In a video that succeeded at ``text`` the agent acted on the other colour's object first: a failure
    of the changed instruction wherever a wrong object ends the episode."""
    names, _, _, pattern = _colours(palette)
    found = list(pattern.finditer(text))
    if not found:
        return None
    m = found[rng.integers(len(found))]
    old = m.group(1).lower()
    new = [c for c in names if c != old][rng.integers(len(names) - 1)]
    return text[:m.start(1)] + same_case(new, m.group(1)) + text[m.end(1):]


def weaker_variants(text: str, palette: Palette) -> list[str]:
    """Every instruction ``relax_words`` and ``recolour_one_word`` can make of ``text`` (each colour word dropped, or
    changed to each other colour): the words a relaxed batch may ask of a frozen sentence encoder."""
    names, _, _, pattern = _colours(palette)
    out = []
    for m in pattern.finditer(text):
        out.append(text[:m.start()] + text[m.end():])
        old = m.group(1).lower()
        out += [text[:m.start(1)] + same_case(new, m.group(1)) + text[m.end(1):] for new in names if new != old]
    return out


def contradicts(weaker: str, done: str, palette: Palette) -> bool:
    """Whether the ``weaker`` instruction names an object or colour word of the palette's that the instruction
    ``done`` (which the video succeeded at) lacks: the video then shows the wrong object for it (a failure), not a
    success."""
    have, named = set(done.lower().split()), set(palette.colours) | set(palette.objects)
    return any(w in named and w not in have for w in weaker.lower().split())


__all__ = ["Augmentations", "contradicts", "mirror", "mirror_words", "random_permutation", "recolour",
           "recolour_one_word", "recolour_rgb", "recolour_words", "relax_words", "weaker_variants"]
