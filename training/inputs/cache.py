"""A feature cache: each video is decoded (and, for a frozen encoder, encoded) once, then re-used.

An encoder whose top blocks fine-tune caches the output of its frozen bottom (``cacheable``): the training
loop runs only the top.

Entries are keyed by the video's content (SHA-1 of its bytes) and by everything that changes the
features (encoder, stage, image size, frames sampled), and stored as safetensors files under
``root/<key>/<sha1>.safetensors``: what ``Autorater.encode`` returns (the stream's features of every frame, ``x``,
and whatever else the architecture encodes, per clip, carried without knowing its keys), the real frames only (a clip
shorter than ``clip_frames`` is padded when loaded, to the longest clip asked for). A video listed under several
instructions (a suite and its swaps) is one entry. For a trainable encoder the cache holds the decoded frames.

Example:
    >>> cache = FeatureCache("runs/cache")                              # doctest: +SKIP
    >>> batch = cache.load(model, paths)   # second call reads from disk  # doctest: +SKIP
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from autorater.data.files import content_sha1
from autorater.data.paths import encodable, printable
from autorater.data.video import VideoError, read_video
from autorater.model import Autorater


@dataclass
class CachedClips:
    """Inputs of the model after the frame encoder, for n clips (rows aligned with the paths asked for)."""

    features: torch.Tensor  # (n, t, c, h, w) float16 features, or (n, t, H, W, 3) uint8 frames
    times_s: torch.Tensor  # (n, t) float32
    durations_s: torch.Tensor  # (n,) float32
    is_frames: bool  # True when ``features`` holds decoded frames (trainable encoder)
    errors: dict[int, str]  # row -> message for videos that could not be decoded (their rows are zeros)
    hashes: list[str | None] | None = None  # each row's video content (SHA-1): one video under two instructions
    encoded: dict[str, torch.Tensor] = field(default_factory=dict)  # what else the model encodes, per clip (n, ...),
    #                                 carried as it is (``Autorater.encode``'s keys beside "x")

    def take(self, rows) -> "CachedClips":
        """These rows only (errors and hashes re-indexed)."""
        rows = [int(r) for r in rows]
        at = {r: i for i, r in enumerate(rows)}
        return CachedClips(self.features[rows], self.times_s[rows], self.durations_s[rows], self.is_frames,
                           {at[r]: e for r, e in self.errors.items() if r in at},
                           [self.hashes[r] for r in rows] if self.hashes else None,
                           {k: v[rows] for k, v in self.encoded.items()})


def cache_key(model: Autorater, frozen: bool) -> str:
    """A folder name per input setting (the model's processor's); ``-s3``: entries hold a clip's real frames only
    (``-s2``: padded at the end to ``clip_frames``, the sampling since the events model)."""
    return model.processor.cache_key(frozen) + "-s3"


class FeatureCache:
    """Disk cache of encoder outputs (or decoded frames), keyed by video content and encoder."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        if not encodable(str(self.root)):  # safetensors takes UTF-8 paths only
            raise ValueError(f"cache folder {printable(str(self.root))} is not a UTF-8 path (fix: pass --cache-dir a "
                             f"folder whose name is UTF-8 text)")
        self.hits = 0
        self.misses = 0

    def load(self, model: Autorater, paths: Sequence[str | Path], batch_size: int = 32,
             progress: bool = False, takeovers_s: Sequence[float] | None = None) -> CachedClips:
        """Features for every path (taken over at ``takeovers_s``: a model that reads nothing of the replayed context
        caches the frames from the takeover on), computing and storing the missing ones."""
        from safetensors.torch import load_file

        processor, encoder = model.processor, model.frame_encoder
        frozen = not encoder.caches_frames  # the cache holds the encoder's fixed part's output, else the frames
        folder = self.root / cache_key(model, frozen)
        folder.mkdir(parents=True, exist_ok=True)
        hashes, errors = [], {}
        takeovers = list(takeovers_s) if takeovers_s is not None else [None] * len(paths)
        decode = [processor.decode_args(t) for t in takeovers]
        for i, p in enumerate(paths):
            try:
                hashes.append(content_sha1(p))
            except OSError as err:
                hashes.append(None)
                errors[i] = f"video not found or unreadable: {p} ({err.strerror})"
        # an entry is the video's content, decoded from where the model starts reading it
        names = [None if h is None else h + (f"-from{d['start_s']:.4f}" if "start_s" in d else "")
                 for h, d in zip(hashes, decode)]
        first = {}  # each entry once: a video under several instructions (a suite and its swaps) is one clip
        for i, h in enumerate(names):
            if h is not None:
                first.setdefault(h, i)
        todo = [i for h, i in first.items() if not (folder / f"{h}.safetensors").exists()]
        self.misses += len(todo)
        self.hits += sum(h is not None for h in names) - len(todo)
        bar = None
        if progress and todo:
            from tqdm import tqdm
            bar = tqdm(total=len(todo), desc=f"encoding ({cache_key(model, frozen)})", unit="video")
        for start in range(0, len(todo), batch_size):
            chunk = todo[start:start + batch_size]
            clips = {}
            for i in chunk:
                try:
                    clips[i] = read_video(paths[i], **decode[i])
                except VideoError as err:
                    errors[i] = str(err)
            if clips:
                self._store(model, folder, {names[i]: clip for i, clip in clips.items()},
                            [takeovers[i] or 0.0 for i in clips])
            if bar is not None:
                bar.update(len(chunk))
        if bar is not None:
            bar.close()
        for i, h in enumerate(names):  # a row shares its entry's decoding error
            if h is not None and first[h] in errors:
                errors[i] = errors[first[h]]
        loaded = {h: load_file(str(folder / f"{h}.safetensors")) for h, i in first.items() if i not in errors}
        rows = [None if i in errors else loaded[h] for i, h in enumerate(names)]
        template = next((r for r in rows if r is not None), None)
        if template is None:
            raise VideoError(f"none of the {len(paths)} videos could be decoded; first error: "
                             f"{next(iter(errors.values()), '')}")
        fill = {k: torch.zeros_like(v) for k, v in template.items()}
        rows = [r if r is not None else fill for r in rows]
        t = max(len(r["times_s"]) for r in rows)
        return CachedClips(features=torch.stack([_pad(r["x"], t) for r in rows]),
                           times_s=torch.stack([_pad(r["times_s"], t) for r in rows]),
                           durations_s=torch.cat([r["duration_s"] for r in rows]),
                           is_frames=not frozen, errors=errors, hashes=hashes,
                           encoded={k: torch.stack([r[k] for r in rows]) for k in template
                                    if k not in ("x", "times_s", "duration_s")})

    @staticmethod
    @torch.no_grad()
    def _store(model: Autorater, folder: Path, clips: dict, takeovers_s: list[float]) -> None:
        """Encode decoded clips (name -> Clip) once and write each entry: ``model.encode``'s tensors (floats as
        float16), cut to the clip's real frames, with their times and the video's duration."""
        from safetensors.torch import save_file

        from autorater.predict import real_length

        frames = torch.from_numpy(np.stack([c.frames for c in clips.values()]))
        times = torch.from_numpy(np.stack([c.times_s for c in clips.values()]).astype(np.float32))
        encoded = model.encode(frames.to(model.device), times, torch.tensor(takeovers_s, dtype=torch.float32))
        encoded = {k: (v.to(torch.float16) if v.is_floating_point() else v).cpu() for k, v in encoded.items()}
        for row, (name, clip) in enumerate(clips.items()):
            t = real_length(times[row:row + 1])
            entry = {k: v[row] for k, v in encoded.items()}
            entry["x"] = entry["x"][:t]
            tmp = folder / f"{name}.{os.getpid()}.tmp"
            save_file({**{k: v.contiguous() for k, v in entry.items()}, "times_s": times[row, :t].contiguous(),
                       "duration_s": torch.tensor([clip.info.duration_s], dtype=torch.float32)}, str(tmp))
            os.replace(tmp, folder / f"{name}.safetensors")


def rate_clips(model: Autorater, clips: CachedClips, ids: list[str], instructions: list[str], takeovers_s: list[float],
               name: str = "autorater", calibration: dict | None = None, batch_size: int = 64) -> list[dict]:
    """Prediction rows of cached clips (one per id; a clip that could not be decoded: its error) through the Rater."""
    from autorater.rater import Rater

    rater, key = Rater(model, calibration, name), "frames" if clips.is_frames else "features"
    rows = []
    for start in range(0, len(ids), batch_size):
        part = slice(start, start + batch_size)
        rows += rater.rate(ids[part], times_s=clips.times_s[part], durations_s=clips.durations_s[part].tolist(),
                           takeovers_s=takeovers_s[part], instructions=instructions[part],
                           encoded={k: v[part] for k, v in clips.encoded.items()},
                           **{key: clips.features[part]}).records(name)
    return [r if i not in clips.errors else {"continuation_id": r["continuation_id"], "error": clips.errors[i]}
            for i, r in enumerate(rows)]


def _pad(x: torch.Tensor, t: int) -> torch.Tensor:
    """(t', ...) -> (t, ...): the last entry repeated (as ``sample_indices`` pads a short clip)."""
    return x if len(x) >= t else torch.cat([x, x[-1:].expand(t - len(x), *x.shape[1:])])
