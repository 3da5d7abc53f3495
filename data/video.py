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
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from data.files import commit


class VideoError(ValueError):
    """A video is missing, unreadable or corrupt. The message names the file."""


class VideoTooLarge(VideoError):
    """A video's size, frame count or duration (read from its container, before decoding) is over the limits."""


class DecodeTimeout(VideoError):
    """Decoding passed its deadline; it stopped between frames."""


@dataclass(frozen=True)
class VideoLimits:
    """What a video may be before any frame of it is decoded (read from the container's metadata).

    The defaults admit 4K camera video of up to an hour; a service facing other people may pass tighter ones.
    """

    max_width: int = 4096
    max_height: int = 4096
    max_pixels: int = 4096 * 2304  # width x height of one frame
    max_frames: int = 120_000
    max_duration_s: float = 3600.0
    min_fps: float = 0.1
    max_fps: float = 1000.0


DEFAULT_LIMITS = VideoLimits()


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


def probe(path: str | os.PathLike, limits: VideoLimits | None = DEFAULT_LIMITS) -> tuple[int, int]:
    """(width, height) from the container's metadata, checked against ``limits`` without decoding a frame.

    Raises:
        VideoError: missing, empty or unreadable file; VideoTooLarge: over ``limits`` (None: no limits).
    """
    import av

    path = Path(path)
    if not path.is_file():
        raise VideoError(f"video not found: {path}")
    if path.stat().st_size == 0:
        raise VideoError(f"video is empty (0 bytes): {path}")
    try:
        with av.open(str(path), metadata_errors="ignore") as container:
            if not container.streams.video:
                raise VideoError(f"no video stream in {path}")
            stream = container.streams.video[0]
            width, height = int(stream.codec_context.width or 0), int(stream.codec_context.height or 0)
            rate = stream.average_rate or stream.guessed_rate
            fps = float(rate) if rate else 0.0
            frames = int(stream.frames or 0)
            duration = float(stream.duration * stream.time_base) if stream.duration and stream.time_base else \
                (container.duration / 1e6 if container.duration else 0.0)
    except VideoError:
        raise
    except Exception as err:  # PyAV raises its own error classes for every kind of damage
        reason = str(err).splitlines()[0][:200] if str(err) else type(err).__name__
        raise VideoError(f"cannot decode video {path}: {reason}") from None
    if limits is None:
        return width, height
    fix = "re-encode it smaller (e.g. ffmpeg -vf scale=-2:480), or shorter"
    if width <= 0 or height <= 0:
        raise VideoError(f"video {path} states no frame size in its container (fix: re-encode it, H.264 mp4)")
    if width > limits.max_width or height > limits.max_height or width * height > limits.max_pixels:
        raise VideoTooLarge(f"video {path} is {width} x {height} pixels, over the limit of {limits.max_width} x "
                            f"{limits.max_height} ({limits.max_pixels} pixels a frame) (fix: {fix})")
    if fps and not limits.min_fps <= fps <= limits.max_fps:
        raise VideoTooLarge(f"video {path} states {fps:g} frames per second, outside {limits.min_fps:g}.."
                            f"{limits.max_fps:g} (fix: re-encode it at a normal frame rate)")
    if frames > limits.max_frames or (fps and duration * fps > limits.max_frames * 1.01):
        raise VideoTooLarge(f"video {path} has about {max(frames, int(duration * fps))} frames, over the limit of "
                            f"{limits.max_frames} (fix: {fix})")
    if duration > limits.max_duration_s:
        raise VideoTooLarge(f"video {path} lasts {duration:.0f} s, over the limit of {limits.max_duration_s:.0f} s "
                            f"(fix: {fix})")
    return width, height


def _checked_fps(vr, path, limits: VideoLimits | None) -> float:
    fps = float(vr.get_avg_fps())
    if not np.isfinite(fps) or fps <= 0:
        raise VideoError(f"video has no valid frame rate ({fps}): {path}")
    if limits is not None:
        if not limits.min_fps <= fps <= limits.max_fps:
            raise VideoTooLarge(f"video {path} plays at {fps:g} frames per second, outside {limits.min_fps:g}.."
                                f"{limits.max_fps:g} (fix: re-encode it at a normal frame rate)")
        if len(vr) > limits.max_frames or len(vr) / fps > limits.max_duration_s:
            raise VideoTooLarge(f"video {path} has {len(vr)} frames ({len(vr) / fps:.0f} s), over the limit of "
                                f"{limits.max_frames} frames or {limits.max_duration_s:.0f} s (fix: cut it shorter)")
    return fps


def video_info(path: str | os.PathLike, limits: VideoLimits | None = DEFAULT_LIMITS) -> VideoInfo:
    """Frame count, frame rate (from the container) and size of a video, without decoding a frame.

    The container's metadata is checked against ``limits`` first (VideoTooLarge), so a huge video costs
    no memory here.
    """
    width, height = probe(path, limits)
    vr = _reader(path)
    fps = _checked_fps(vr, path, limits)
    return VideoInfo(num_frames=len(vr), fps=fps, width=width, height=height)


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
               size: int | tuple[int, int] | None = None, *, limits: VideoLimits | None = DEFAULT_LIMITS,
               deadline: float | None = None, fit: str = "stretch") -> Clip:
    """Decode a video.

    Args:
        path: the video file (any container decord reads).
        num_frames: sample this many frames uniformly over the video; None decodes every frame.
        size: resize to ``size`` x ``size`` (or ``(height, width)``) while decoding.
        limits: checked from the container's metadata before any frame is decoded (None: no limits).
        deadline: a ``time.monotonic()`` time; decoding stops between frames once it has passed.
        fit: how a frame of another aspect becomes ``size``: "stretch" (resized to it) or "pad" (the longer
            side resized to it, the frame centred on black: the aspect kept, as a camera's video needs).

    Returns:
        The frames, their times in seconds and the video's info.

    Raises:
        VideoError: missing, empty, corrupt or truncated videos, with the file named; VideoTooLarge over
        ``limits``; DecodeTimeout past ``deadline``.
    """
    if fit not in ("stretch", "pad"):
        raise ValueError(f"fit must be 'stretch' or 'pad', got {fit!r}")
    width, height = probe(path, limits)
    box = None
    if fit == "pad" and size is not None and width > 0 and height > 0:
        if display_rotation(path) in (90, 270):  # decord turns the frames as a player does: fit the turned picture
            width, height = height, width
        box = (size, size) if isinstance(size, int) else tuple(size)
        scale = min(box[0] / height, box[1] / width)
        size = (max(2, min(box[0], 2 * round(height * scale / 2))), max(2, min(box[1], 2 * round(width * scale / 2))))
    vr = _reader(path, size)
    fps = _checked_fps(vr, path, limits)
    idx = sample_indices(len(vr), num_frames)
    try:
        frames = _get_frames(vr, idx, deadline, path)
    except DecodeTimeout:
        raise
    except Exception as err:
        frames, error = None, str(err).splitlines()[0][:200]
    if frames is None or frames.ndim != 4 or frames.shape[-1] != 3:
        # decord 0.6 pads decoded rows to a multiple of 32 pixels and, when the padded row is a
        # multiple of the width (widths 8, 12, 16, 24, 48, 72), misreads it as more channels and
        # fails: decode those with PyAV. A truly truncated or corrupt file fails there too.
        try:
            frames = _decode_pyav(path, idx, size, deadline)
        except DecodeTimeout:
            raise
        except Exception as err:
            reason = error if frames is None else str(err).splitlines()[0][:200]
            raise VideoError(f"cannot decode frames of video {path} (truncated or corrupt?): {reason}") from None
    if box is not None:
        frames = letterbox(frames, box)
    h, w = frames.shape[1:3]
    info = VideoInfo(num_frames=len(vr), fps=fps, width=int(w), height=int(h))
    return Clip(frames=frames, times_s=idx / fps, info=info)


def display_rotation(path: str | os.PathLike) -> int:
    """Degrees a player turns the video's frames (0, 90, 180 or 270): the container's display matrix, as a phone held
    upright writes it. decord decodes the frames turned; the first frame is decoded here to read it."""
    import av

    try:
        with av.open(str(path), metadata_errors="ignore") as container:
            frame = next(container.decode(video=0), None)
    except Exception:  # unreadable files fail with their own error where they are decoded
        return 0
    return int(round(getattr(frame, "rotation", 0) or 0)) % 360 if frame is not None else 0


def letterbox(frames: np.ndarray, box: tuple[int, int]) -> np.ndarray:
    """(n, h, w, 3) frames centred on a black (n, box_h, box_w, 3) canvas (h <= box_h, w <= box_w)."""
    n, h, w, c = frames.shape
    out = np.zeros((n, box[0], box[1], c), dtype=frames.dtype)
    top, left = (box[0] - h) // 2, (box[1] - w) // 2
    out[:, top:top + h, left:left + w] = frames
    return out


def _check_deadline(deadline: float | None, path) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise DecodeTimeout(f"decoding {path} passed its deadline and was stopped (fix: send a shorter or smaller "
                            f"video, or raise the server's --timeout-s)")


def _get_frames(vr, idx: np.ndarray, deadline: float | None, path, chunk: int = 8) -> np.ndarray:
    """Frames ``idx`` from a decord reader, a few at a time, checking the deadline between them."""
    if deadline is None:
        return vr.get_batch(list(idx)).asnumpy()
    parts = []
    for start in range(0, len(idx), chunk):
        _check_deadline(deadline, path)
        parts.append(vr.get_batch(list(idx[start:start + chunk])).asnumpy())
    return np.concatenate(parts)


def _decode_pyav(path: str | os.PathLike, idx: np.ndarray, size: int | tuple[int, int] | None,
                 deadline: float | None = None) -> np.ndarray:
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
            _check_deadline(deadline, path)
            if i in wanted:  # turned as decord and players turn them (the display matrix)
                turns = int(round(getattr(frame, "rotation", 0) or 0)) % 360 // 90
                size_kwargs = {"width": kwargs["height"], "height": kwargs["width"]} if kwargs and turns % 2 else kwargs
                decoded[i] = np.rot90(frame.to_ndarray(format="rgb24", **size_kwargs), turns).copy()
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
    return commit(tmp, path)
