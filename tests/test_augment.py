"""Augmentations: a mirror or a recolouring of the pictures equals the same change of the decoded frames,
changes the instruction's words with them, and leaves everything else as it was. The colours are BabyAI's palette
(MiniGrid's, as its view shows them: the world's ``PALETTE``)."""

from __future__ import annotations

import numpy as np
import torch

from autorater.data.worlds.babyai import PALETTE
from autorater.encoders import PixelCells
from autorater.training.inputs.augment import (
    contradicts,
    mirror,
    mirror_words,
    random_permutation,
    recolour,
    recolour_rgb,
    recolour_words,
    relax_words,
)


def on_screen(name: str) -> torch.Tensor:
    rgb = torch.tensor(PALETTE.colours[name], dtype=torch.float32)
    return (rgb + 0.3 * (255 - rgb)) / 255


def scene(objects: dict[tuple[int, int], str], grid: int = 7, tile: int = 8) -> torch.Tensor:
    """A (1, 1, H, W, 3) uint8 frame: the lit floor, with a filled disc of each named colour on its tile."""
    frame = torch.full((grid * tile, grid * tile, 3), 0.3)
    yy, xx = torch.meshgrid(torch.arange(tile), torch.arange(tile), indexing="ij")
    disc = ((yy - tile / 2 + 0.5) ** 2 + (xx - tile / 2 + 0.5) ** 2) < (tile / 2.5) ** 2
    for (r, c), name in objects.items():
        block = frame[r * tile:(r + 1) * tile, c * tile:(c + 1) * tile]
        block[disc] = on_screen(name)
    return (frame * 255).round().to(torch.uint8)[None, None]


def test_a_mirrored_cell_grid_is_the_cells_of_the_mirrored_frames():
    frames = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (3, 2, 28, 28, 3), dtype=np.uint8))
    cells = PixelCells(grid=7, k=2)
    flip = torch.tensor([True, False, True])
    got = mirror(cells(frames), flip, pixel_cells=2)
    want = cells(torch.where(flip[:, None, None, None, None], frames.flip(3), frames))
    torch.testing.assert_close(got, want)
    assert not torch.allclose(got[0], cells(frames)[0])  # a real change, not the identity
    torch.testing.assert_close(mirror(frames, flip, pixel_cells=0)[0], frames[0].flip(2))


def test_mirror_words_swaps_left_and_right_only():
    assert mirror_words("open the door on your left") == "open the door on your right"
    assert mirror_words("Right of the key, left of the ball") == "Left of the key, right of the ball"
    assert mirror_words("pick up the leftover ball behind you") == "pick up the leftover ball behind you"


def test_recolouring_moves_each_permuted_object_to_its_new_colour_and_nothing_else():
    objects = {(1, 1): "blue", (2, 4): "green", (4, 2): "red", (5, 5): "grey", (3, 3): "yellow"}
    permutation = {"blue": "yellow", "yellow": "green", "green": "blue", "purple": "purple"}
    frame = scene(objects)
    want = scene({at: permutation.get(name, name) for at, name in objects.items()})
    got = recolour(frame, [permutation], pixel_cells=0, palette=PALETTE)
    assert (got.int() - want.int()).abs().max() <= 1  # red (the agent) and grey (the walls) stay
    cells = PixelCells(grid=7, k=4)
    torch.testing.assert_close(recolour(cells(frame), [permutation], pixel_cells=4, palette=PALETTE), cells(want),
                               atol=2e-3, rtol=0)


def test_a_partial_cell_keeps_its_share_of_floor_and_black_stays_black():
    blue, green, floor = on_screen("blue"), on_screen("green"), torch.full((3,), 0.3)
    mixed = torch.stack([floor + 0.4 * (blue - floor), torch.zeros(3), floor, on_screen("grey")])
    got = recolour_rgb(mixed[None], [{"blue": "green"}], PALETTE)[0]
    torch.testing.assert_close(got[0], floor + 0.4 * (green - floor))
    torch.testing.assert_close(got[1:], mixed[1:])


def test_recolour_words_follow_the_permutation_and_a_round_trip_is_the_identity():
    rng = np.random.default_rng(0)
    text = "put the Blue key next to the purple ball, not the red one"
    for _ in range(10):
        p = random_permutation(rng, PALETTE)
        assert sorted(p) == sorted(p.values()) == sorted(PALETTE.permuted)
        back = {new: old for old, new in p.items()}
        assert recolour_words(recolour_words(text, p), back) == text
        assert "red" in recolour_words(text, p)
    assert recolour_words(text, {"blue": "grey"}) == "put the Grey key next to the purple ball, not the red one"
    frame = scene({(2, 2): "purple", (4, 4): "yellow"})
    p = {"purple": "yellow", "yellow": "purple"}
    twice = recolour(recolour(frame, [p], 0, PALETTE), [p], 0, PALETTE)
    assert (twice.int() - frame.int()).abs().max() <= 1
    assert torch.equal(recolour(frame, [None], 0, PALETTE), frame)
    other = scene({(1, 5): "green", (5, 1): "blue"})
    q = {"green": "purple", "blue": "yellow"}
    both = recolour(torch.cat([frame, other, frame]), [p, q, None], 0, PALETTE)  # each clip by its own permutation
    assert torch.equal(both, torch.cat([recolour(frame, [p], 0, PALETTE), recolour(other, [q], 0, PALETTE), frame]))


def test_relax_words_drops_exactly_one_colour_word_and_nothing_else():
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(20):
        weaker = relax_words("put the red ball next to the Blue key", rng, PALETTE)
        seen.add(weaker)
        assert weaker in {"put the ball next to the Blue key", "put the red ball next to the key"}
    assert len(seen) == 2  # either colour may go
    assert relax_words("pick up the grey box behind you", rng, PALETTE) == "pick up the box behind you"
    assert relax_words("pick up a key", rng, PALETTE) is None  # nothing to drop
    assert relax_words("go to the redwood door", rng, PALETTE) is None  # whole words only


def test_a_weaker_instruction_contradicts_a_video_only_when_it_names_what_the_video_lacks():
    assert contradicts("pick up the ball", "pick up the blue key", PALETTE)  # the video picked up a key
    assert not contradicts("pick up the ball", "pick up the green ball", PALETTE)  # any ball will do
    assert contradicts("put the red ball next to the key", "put the red ball next to the blue box", PALETTE)
    assert not contradicts("open the door on your left", "open the purple door", PALETTE)  # sides are not checked
