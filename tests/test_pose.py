"""Dead reckoning from first-person cells: the moves between frames and the side of the first pose."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from autorater.models import PRESETS, AutoModel
from autorater.models.events.pose import MOVES, front_side, moves

AHEAD = {0: (0, 1), 1: (-1, 0), 2: (0, -1), 3: (1, 0)}  # heading (quarter turns left) -> step, first-pose axes


def walk(steps: list[str], grid: int = 7, k: int = 2, seed: int = 0) -> tuple[torch.Tensor, list[tuple]]:
    """First-person cells of a random world along ``steps``, and the true (front cell) after each frame."""
    rng = np.random.default_rng(seed)
    world = rng.uniform(0.2, 1.0, (41, 41, 3)) * (rng.random((41, 41, 1)) < 0.6)  # 40% unseen (black)
    pos, heading, frames, fronts = np.array([20, 20]), 0, [], []
    for step in ["stay"] + steps:
        if step == "forward":
            pos = pos + AHEAD[heading]
        heading = (heading + (step == "left") - (step == "right")) % 4
        ahead, right = np.array(AHEAD[heading]), -np.array(AHEAD[(heading + 1) % 4])
        view = np.zeros((3 * k * k, grid, grid))
        for row in range(grid):
            for col in range(grid):
                dx, dy = col - grid // 2, grid - 1 - row
                x, y = pos + dx * right + dy * ahead
                view[:, row, col] = np.repeat(world[x, y], k * k) if (dx, dy) != (0, 0) else [1.0] * 3 * k * k
        frames.append(view)
        fronts.append(tuple(pos - 20 + ahead))
    return torch.tensor(np.stack(frames), dtype=torch.float32)[None], fronts


def test_the_moves_between_frames_are_recovered():
    steps = ["forward", "left", "forward", "forward", "right", "right", "stay", "forward", "left", "left"]
    cells, _ = walk(steps)
    got = [MOVES[i] for i in moves(cells, k=2)[0].tolist()]
    assert got == ["stay"] + steps


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_front_cell_side_follows_the_first_pose(seed):
    rng = np.random.default_rng(seed)
    steps = list(rng.choice(["forward", "forward", "left", "right", "stay"], 14))
    cells, fronts = walk(steps, seed=seed)
    side = front_side(cells, k=2)[0]
    want = torch.tensor([[dx < 0, dx > 0, dy > 0, dy < 0] for dx, dy in fronts], dtype=torch.float32)
    torch.testing.assert_close(side, want)


def test_a_mirrored_walk_swaps_left_and_right():
    cells, _ = walk(["left", "forward", "forward", "right", "forward"])
    side, mirrored = front_side(cells, k=2), front_side(cells.flip(-1), k=2)  # k=2 cells are uniform: flip is exact
    torch.testing.assert_close(mirrored, side[..., [1, 0, 2, 3]])


def test_the_events_model_reads_the_pose_and_other_encoders_refuse_it():
    config = PRESETS["tiny"].replace(grid_size=7, image_size=28, pose=True, vocab=["go", "left"],
                                     failure_modes=["timeout"])
    model = AutoModel.from_config(config)
    cells, _ = walk(["left", "forward"])
    features = cells.expand(2, -1, -1, -1, -1)
    times = torch.arange(3.0)[None].expand(2, -1)
    out = model(features=features, times_s=times, takeover_s=torch.zeros(2),
                instructions=["go left", "go"])
    assert out.success_logit.shape == (2,) and torch.isfinite(out.success_logit).all()
    side = model.stream.heads[0].match.side
    assert side is not None and side.out_features == 4  # the words' weights on the four sides
    assert AutoModel.from_config(config.replace(pose=False)).stream.heads[0].match.side is None
    with pytest.raises(ValueError, match="pose reads first-person"):
        AutoModel.from_config(PRESETS["tiny"].replace(encoder="tiny_cnn", pose=True, vocab=["a"],
                                                      failure_modes=["timeout"]))


def test_the_front_places_read_the_cell_ahead_and_any_of_its_neighbours():
    from autorater.models.events.head import PlaceMatch, front_cells

    assert front_cells(7) == (38, (31, 37, 39))  # row 5 col 3; row 4 col 3, row 5 cols 2 and 4
    torch.manual_seed(0)
    match = PlaceMatch(channels=3, text_dim=5, cells=49, places=2, front=front_cells(7))
    text = torch.rand(1, 5)
    cells = torch.zeros(1, 1, 49, 6)
    thing = torch.tensor([1.0, -2.0, 0.5, 0.0, 0.0, 0.0])
    scores = []
    for at in (31, 37, 39, 10):  # the thing beside the front cell (three ways), then far away
        moved = cells.clone()
        moved[0, 0, at] = thing
        scores.append(match.per_place(moved, text)[0, 0])
    assert scores[0].shape == (4,) and match.columns == 4
    torch.testing.assert_close(scores[0][3], scores[1][3])  # any of the three neighbours: the same score
    torch.testing.assert_close(scores[1][3], scores[2][3])
    assert not torch.isclose(scores[0][3], scores[3][3])  # far away: another
    torch.testing.assert_close(scores[0][2], scores[3][2])  # the cell in front did not change
