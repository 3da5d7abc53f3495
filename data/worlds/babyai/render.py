"""BabyAI frames: one video frame of the current state (the agent's first-person view or the whole grid)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RenderConfig:
    view: str = "full"  # "full": the whole grid from above; "ego": the agent's partial view
    image_size: int = 128  # square frames, even
    tile_size: int | None = None  # pixels per cell; None fits the grid into image_size

    def __post_init__(self):
        if self.view not in ("full", "ego"):
            raise ValueError(f"view must be 'full' or 'ego', got {self.view!r}")
        if self.image_size < 16 or self.image_size % 2:
            raise ValueError(f"image_size must be an even number >= 16 (H.264), got {self.image_size}")
        if self.tile_size is not None and self.tile_size < 1:
            raise ValueError(f"tile_size must be >= 1 pixel, got {self.tile_size}")


def _render_grid(env, tile: int) -> np.ndarray:
    """The whole grid from above, no highlighting (minigrid's Grid.render, without its slow mask)."""
    from minigrid.core.grid import Grid

    grid = env.grid
    w, h = grid.width, grid.height
    img = np.zeros((h * tile, w * tile, 3), dtype=np.uint8)
    ax, ay = int(env.agent_pos[0]), int(env.agent_pos[1])
    cells = grid.grid
    for j in range(h):
        for i in range(w):
            agent_here = i == ax and j == ay
            img[j * tile:(j + 1) * tile, i * tile:(i + 1) * tile] = Grid.render_tile(
                cells[j * w + i], agent_dir=env.agent_dir if agent_here else None, highlight=False,
                tile_size=tile)
    return img


def _fit(img: np.ndarray, size: int) -> np.ndarray:
    """Shrink (area average) if larger than ``size``, then pad to ``size`` x ``size``, centred, black."""
    h, w = img.shape[:2]
    if h > size or w > size:
        from PIL import Image

        scale = size / max(h, w)
        nh, nw = max(1, int(round(h * scale))), max(1, int(round(w * scale)))
        img = np.asarray(Image.fromarray(img).resize((nw, nh), Image.Resampling.BOX))
        h, w = img.shape[:2]
    if (h, w) == (size, size):
        return img
    out = np.zeros((size, size, 3), dtype=np.uint8)
    top, left = (size - h) // 2, (size - w) // 2
    out[top:top + h, left:left + w] = img
    return out


def render_frame(env, config: RenderConfig) -> np.ndarray:
    """One RGB frame (image_size, image_size, 3) uint8 of the current state. The instruction is never
    drawn. The full view shows the whole grid; ``ego`` the agent's 7x7 view, agent at the bottom."""
    if config.view == "ego":
        cells = env.agent_view_size
        tile = config.tile_size or max(1, config.image_size // cells)
        return _fit(env.get_pov_render(tile), config.image_size)
    cells = max(env.grid.width, env.grid.height)
    tile = config.tile_size or max(1, config.image_size // cells)
    return _fit(_render_grid(env, tile), config.image_size)
