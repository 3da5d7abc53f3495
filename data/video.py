"""Video I/O: decode with decord, write H.264 mp4 with PyAV.

Times are seconds from the first frame: frame ``i`` is shown at ``i / fps`` and a video of ``n``
frames lasts ``n / fps`` seconds (SUITE_FORMAT.md).

Example:
    >>> clip = read_video("videos/c000913.mp4", num_frames=32, size=96)   # doctest: +SKIP
    >>> clip.frames.shape, clip.times_s[:2]                                # doctest: +SKIP
    ((32, 96, 96, 3), array([0.   , 0.25 ]))
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np


class VideoError(ValueError):
    """A video is missing, unreadable or corrupt. The message names the file."""


@dataclass(frozen=True)
class VideoInfo:
    num_frames: int
    fps: float
    width: int
    height: int

    @property
    def duration_s(self) -> float:
        return self.num_frames / self.fps


@dataclass
class Clip:
    frames: np.ndarray  # (frames, height, width, 3) uint8 RGB
    times_s: np.ndarray  # (frames,) float64, seconds from the first frame of the video
    info: VideoInfo


def _reader(path: str | os.PathLike, size: int | tuple[int, int] | None = None):
    import decord

    path = Path(path)
    if not path.is_file():
        raise VideoError(f"video not found: {path}")
    if path.stat().st_size == 0:
        raise VideoError(f"video is empty (0 bytes): {path}")
    kwargs = {}
    if size is not None:
        h, w = (size, size) if isinstance(size, int) else size
        kwargs = {"width": w, "height": h}
    try:
        vr = decord.VideoReader(str(path), ctx=decord.cpu(0), num_threads=1, **kwargs)
    except Exception as err:  # decord raises its own DECORDError / RuntimeError subclasses
        raise VideoError(f"cannot decode video {path}: {str(err).splitlines()[0][:200]}") from None
    if len(vr) == 0:
        raise VideoError(f"video has no frames: {path}")
    return vr


def video_info(path: str | os.PathLike) -> VideoInfo:
    """Frame count, frame rate (from the container) and size of a video, without decoding it all."""
    vr = _reader(path)
    fps = float(vr.get_avg_fps())
    if not np.isfinite(fps) or fps <= 0:
        raise VideoError(f"video has no valid frame rate ({fps}): {path}")
    h, w = vr[0].shape[:2]
    return VideoInfo(num_frames=len(vr), fps=fps, width=int(w), height=int(h))


def sample_indices(num_frames: int, n: int | None) -> np.ndarray:
    """``n`` frame indices spread uniformly over ``num_frames`` (centre of each segment); all if n is None.

    A video with fewer frames than ``n`` gives every frame once, then its last frame repeated up to ``n``
    (padding at the end: a repeat has the time of the frame it repeats, and a batch can cut it off).
    """
    if n is None:
        return np.arange(num_frames)
    if n >= num_frames:
        return np.minimum(np.arange(n), num_frames - 1)
    edges = np.linspace(0, num_frames, n + 1)
    return np.minimum(((edges[:-1] + edges[1:]) / 2).astype(np.int64), num_frames - 1)


def read_video(path: str | os.PathLike, num_frames: int | None = None,
               size: int | tuple[int, int] | None = None) -> Clip:
    """Decode a video.

    Args:
        path: the video file (any container decord reads).
        num_frames: sample this many frames uniformly over the video; None decodes every frame.
        size: resize to ``size`` x ``size`` (or ``(height, width)``) while decoding.

    Returns:
        The frames, their times in seconds and the video's info.

    Raises:
        VideoError: missing, empty, corrupt or truncated videos, with the file named.
    """
    vr = _reader(path, size)
    fps = float(vr.get_avg_fps())
    if not np.isfinite(fps) or fps <= 0:
        raise VideoError(f"video has no valid frame rate ({fps}): {path}")
    idx = sample_indices(len(vr), num_frames)
    try:
        frames = vr.get_batch(list(idx)).asnumpy()
    except Exception as err:
        frames, error = None, str(err).splitlines()[0][:200]
    if frames is None or frames.ndim != 4 or frames.shape[-1] != 3:
        # decord 0.6 pads decoded rows to a multiple of 32 pixels and, when the padded row is a
        # multiple of the width (widths 8, 12, 16, 24, 48, 72), misreads it as more channels and
        # fails: decode those with PyAV. A truly truncated or corrupt file fails there too.
        try:
            frames = _decode_pyav(path, idx, size)
        except Exception as err:
            reason = error if frames is None else str(err).splitlines()[0][:200]
            raise VideoError(f"cannot decode frames of video {path} (truncated or corrupt?): {reason}") from None
    h, w = frames.shape[1:3]
    info = VideoInfo(num_frames=len(vr), fps=fps, width=int(w), height=int(h))
    return Clip(frames=frames, times_s=idx / fps, info=info)


def _decode_pyav(path: str | os.PathLike, idx: np.ndarray, size: int | tuple[int, int] | None) -> np.ndarray:
    """Frames ``idx`` (sorted, repeats allowed) decoded with PyAV, resized to ``size``: (n, h, w, 3) uint8."""
    import av

    kwargs = {}
    if size is not None:
        h, w = (size, size) if isinstance(size, int) else size
        kwargs = {"width": w, "height": h}
    wanted = {int(i) for i in idx}
    decoded = {}
    with av.open(str(path)) as container:
        for i, frame in enumerate(container.decode(video=0)):
            if i in wanted:
                decoded[i] = frame.to_ndarray(format="rgb24", **kwargs)
            if len(decoded) == len(wanted):
                break
    if len(decoded) < len(wanted):
        raise VideoError(f"only {len(decoded)} of {len(wanted)} wanted frames could be decoded")
    return np.stack([decoded[int(i)] for i in idx])


def write_video(path: str | os.PathLike, frames: np.ndarray, fps: float = 8.0, crf: int = 18) -> Path:
    """Write RGB frames as an H.264 mp4 (yuv420p), atomically.

    Args:
        path: output file; its folder is created.
        frames: (frames, height, width, 3) uint8 RGB; height and width must be even.
        fps: frames per second stored in the container.
        crf: x264 quality (lower is better; 18 is visually lossless).
    """
    import av

    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
        raise ValueError(f"frames must be (frames, height, width, 3) uint8, got {frames.shape} {frames.dtype}")
    if frames.shape[1] % 2 or frames.shape[2] % 2:
        raise ValueError(f"H.264 needs even height and width, got {frames.shape[1]}x{frames.shape[2]}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".tmp" + path.suffix)
    from fractions import Fraction

    rate = Fraction(fps).limit_denominator(1000)
    with av.open(str(tmp), mode="w") as container:
        stream = container.add_stream("libx264", rate=rate)
        stream.width, stream.height = frames.shape[2], frames.shape[1]
        stream.pix_fmt = "yuv420p"
        stream.options = {"crf": str(crf), "preset": "veryfast", "tune": "animation"}
        stream.thread_type = "NONE"
        for frame in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    os.replace(tmp, path)
    return path
