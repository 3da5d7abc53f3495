"""What a continuation's inputs look like, in a few numbers: the input side of the drift check.

A new suite version is certified on its own audit (``serving.labelling.certify``); a stratum whose inputs moved away
from the calibration references' (a new camera, new tasks or wordings) gets no help from the references and a larger
audit. The comparison (``calibration.mmd_test``) needs a small, fixed embedding of each continuation that does not
depend on which model rates it, so that a model change does not look like a data change:

- ``frames``: the first decoded frame (the replayed context's start: the scene, before any agent acts) averaged over
  a 4 x 4 grid of cells (48 numbers in [0, 1]): where things sit in the picture and their colours, which a new
  viewpoint or a new task's objects move;
- ``text``: the instruction's words and word pairs hashed into 64 buckets, unit length: new tasks bring new words.

Both describe the *scenario*, not what an agent did in it (a new agent is not a new input distribution), so the drift
check compares scenarios, one signature each.

Example:
    >>> import numpy as np
    >>> sig = input_signature(np.zeros((8, 32, 32, 3), dtype=np.uint8), "open the drawer")
    >>> len(sig["frames"]), len(sig["text"])
    (48, 64)
"""

from __future__ import annotations

import re
import zlib

import numpy as np

GRID, TEXT_BUCKETS = 4, 64
_WORD = re.compile(r"[^\W\d_]+")


def frame_signature(frames: np.ndarray) -> np.ndarray:
    """(48,) the first of ``frames`` (t, H, W, 3) averaged over a 4 x 4 grid of cells, in [0, 1]."""
    _, h, w, _ = frames.shape
    if h < GRID or w < GRID:
        raise ValueError(f"frames of {h} x {w} pixels are too small for a {GRID} x {GRID} signature")
    first = frames[0, : h - h % GRID, : w - w % GRID].astype(np.float32) / 255.0
    return first.reshape(GRID, h // GRID, GRID, w // GRID, 3).mean(axis=(1, 3)).reshape(-1)  # (GRID * GRID * 3,)


def text_signature(instruction: str) -> np.ndarray:
    """(64,) the instruction's lower-cased words and adjacent word pairs, hashed (CRC-32) into buckets; unit norm."""
    words = _WORD.findall(instruction.lower())
    counts = np.zeros(TEXT_BUCKETS, dtype=np.float32)
    for token in [*words, *(f"{a} {b}" for a, b in zip(words, words[1:]))]:
        counts[zlib.crc32(token.encode("utf-8", "surrogatepass")) % TEXT_BUCKETS] += 1
    norm = float(np.linalg.norm(counts))
    return counts / norm if norm else counts


def input_signature(frames: np.ndarray, instruction: str) -> dict[str, list[float]]:
    """``{"frames": 48 numbers, "text": 64 numbers}``, rounded to 4 decimals (it travels in JSON lines)."""
    return {"frames": np.round(frame_signature(frames), 4).tolist(),
            "text": np.round(text_signature(instruction), 4).tolist()}


__all__ = ["GRID", "TEXT_BUCKETS", "frame_signature", "input_signature", "text_signature"]
