"""Video I/O: decode with PyAV (frames checked one by one against the limits), write H.264 mp4 with PyAV.

Times are seconds from the first frame: frame ``i`` is shown at ``i / fps`` and a video of ``n``
frames lasts ``n / fps`` seconds (docs/suite-format.md).

Limits hold twice: the container's claims (size, frame count, duration, frame rate) are checked before a frame is
decoded (:func:`probe`), and every decoded frame is checked before it is converted: a frame of another size than the
container states, or over the size limits, stops decoding at once, and so does passing the budget of decoded pixels
(``VideoLimits.max_decoded_pixels``) or the deadline. A file that lies in its container (an MJPEG stream that says
64 x 64 and holds 12000 x 12000 frames) is refused at the first such frame, before its picture is allocated. The
frame count and rate are the container's (its sample count and average frame rate: decord's index of the file gives
the same; it is asked where the container states no count); frames are scaled by FFmpeg's bilinear scaler, as decord
scaled them, so the pixels are the ones decord gave. One open of the file serves the checks and the decoding.

Decoding opens only the file it was given: a playlist or a list of files (HLS, M3U, ffconcat, DASH: FFmpeg opens the
files they name, wherever they are) is refused by its first bytes, whatever its name (:func:`refuse_playlist`), and
FFmpeg may use only the demuxers of one video file (:data:`VIDEO_DEMUXERS`) through the ``file`` protocol.

Example:
    >>> clip = read_video("videos/c000913.mp4", num_frames=32, size=96)   # doctest: +SKIP
    >>> clip.frames.shape, clip.times_s[:2]                                # doctest: +SKIP
    ((32, 96, 96, 3), array([0.   , 0.25 ]))
"""

from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from autorater.data.files import commit


class VideoError(ValueError):
    """A video is missing, unreadable or corrupt. The message names the file."""


class VideoTooLarge(VideoError):
    """A video's size, frame count or duration (read from its container, before decoding) is over the limits."""


class FrameTooLarge(VideoTooLarge):
    """A decoded frame is over the limits or not the size its container states; ``frame`` is its index."""

    def __init__(self, message: str, frame: int):
        super().__init__(message)
        self.frame = frame


class DecodeTimeout(VideoError):
    """Decoding passed its deadline; it stopped between frames."""


@dataclass(frozen=True)
class VideoLimits:
    """What a video may be: its container's claims are checked before any frame is decoded, and every decoded
    frame again (its size, and the pixels decoded so far against ``max_decoded_pixels``).

    The defaults open 4K camera video of up to an hour, and decode up to 2^34 pixels of one video (about 8,000
    frames of 1080p, or 6 hours of 256 x 256 at 30 fps: decoding reads every frame up to the last one sampled);
    a service facing other people may pass tighter ones.
    """

    max_width: int = 4096
    max_height: int = 4096
    max_pixels: int = 4096 * 2304  # width x height of one frame
    max_frames: int = 120_000
    max_duration_s: float = 3600.0
    min_fps: float = 0.1
    max_fps: float = 1000.0
    max_decoded_pixels: int = 1 << 34  # the running budget of one decode: every frame decoded, sampled or not


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


# Demuxers of one self-contained video file, the only ones FFmpeg may open (``format_whitelist``), through the
# ``file`` protocol alone (``protocol_whitelist``). Not on the list: playlists and lists of files (``hls``, ``concat``,
# ``dash``, image sequences), which make FFmpeg open the other files they name, wherever those are.
VIDEO_DEMUXERS = ("mov", "matroska", "avi", "mpegts", "mpeg", "mpegvideo", "flv", "asf", "ogg", "nut", "mjpeg", "h264",
                  "hevc", "m4v", "ivf", "obu", "gif", "apng", "yuv4mpegpipe", "mxf", "dv")
FFMPEG_OPEN_OPTIONS = {"format_whitelist": ",".join(VIDEO_DEMUXERS), "protocol_whitelist": "file"}
# What the first bytes of a playlist or file list say it is (checked before FFmpeg sees the file, whatever its name)
PLAYLIST_MARKS = {b"#EXTM3U": "an HLS / M3U playlist", b"#EXTINF": "an M3U playlist", b"#EXT-X-": "an HLS playlist",
                  b"ffconcat version": "an FFmpeg concat list", b"<?xml": "an XML document (a DASH manifest?)",
                  b"<MPD": "a DASH manifest", b"[playlist]": "a PLS playlist"}
_SNIFF_BYTES = 4096


def refuse_playlist(path: Path) -> None:
    """VideoError when ``path`` is a playlist or a list of other files (HLS, M3U, ffconcat, DASH, PLS) or any other
    text, judged by its first bytes, not its name: FFmpeg would open the files it lists, wherever they are. A video
    file is binary; its first 4 KiB always hold bytes that text does not."""
    try:
        with open(path, "rb") as f:
            head = f.read(_SNIFF_BYTES)
    except OSError as err:
        raise VideoError(f"cannot read video {path}: {err.strerror or err.__class__.__name__}") from None
    start = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    kind = next((what for mark, what in PLAYLIST_MARKS.items() if start[:len(mark)].lower() == mark.lower()), None)
    if kind is None and _is_text(head):
        kind = "text, not a video"
    if kind is not None:
        raise VideoError(f"cannot decode video {path}: it is {kind}, and a video must be one self-contained file "
                         f"(a playlist or a file list makes the decoder open other files) (fix: send the video file "
                         f"itself, e.g. an mp4)")


def _is_text(head: bytes) -> bool:
    """Whether ``head`` (a file's first bytes) is UTF-8 text without control characters other than white space."""
    for cut in range(4):  # the read may end inside a multi-byte character
        try:
            text = head[:len(head) - cut].decode("utf-8")
            break
        except UnicodeDecodeError:
            continue
    else:
        return False
    return bool(text) and all(c.isprintable() or c in "\t\n\r\f\v" for c in text)


def _av_open(path: Path):
    """``av.open`` of a local video file only: the demuxers of :data:`VIDEO_DEMUXERS`, the ``file`` protocol."""
    import av

    return av.open(str(path), metadata_errors="ignore", container_options=FFMPEG_OPEN_OPTIONS)


def _open(path: Path):
    """The file opened with PyAV (VideoError: missing, empty, a playlist or unreadable)."""
    if not path.is_file():
        raise VideoError(f"video not found: {path}")
    if path.stat().st_size == 0:
        raise VideoError(f"video is empty (0 bytes): {path}")
    refuse_playlist(path)
    try:
        container = _av_open(path)
    except Exception as err:  # PyAV raises its own error classes for every kind of damage
        why = _reason(err) if getattr(err, "errno", None) != 22 else "not a container of one video file (EINVAL; " \
            f"the containers read: {', '.join(VIDEO_DEMUXERS)})"
        raise VideoError(f"cannot decode video {path}: {why}") from None
    if not container.streams.video:
        container.close()
        raise VideoError(f"no video stream in {path}")
    return container


def _reason(err: Exception) -> str:
    return str(err).splitlines()[0][:200] if str(err) else type(err).__name__


def _stated(container, path: Path, limits: VideoLimits | None) -> tuple[int, int]:
    """(width, height) the container states, with its frame rate, frame count and duration, checked against
    ``limits`` (None: not checked)."""
    stream = container.streams.video[0]
    try:
        width, height = int(stream.codec_context.width or 0), int(stream.codec_context.height or 0)
        rate = stream.average_rate or stream.guessed_rate
        fps = float(rate) if rate else 0.0
        frames = int(stream.frames or 0)
        duration = float(stream.duration * stream.time_base) if stream.duration and stream.time_base else \
            (container.duration / 1e6 if container.duration else 0.0)
    except Exception as err:  # a damaged header leaves PyAV without a codec context, or with odd values
        raise VideoError(f"cannot decode video {path}: {_reason(err)}") from None
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


def probe(path: str | os.PathLike, limits: VideoLimits | None = DEFAULT_LIMITS) -> tuple[int, int]:
    """(width, height) from the container's metadata, checked against ``limits`` without decoding a frame.

    Raises:
        VideoError: missing, empty or unreadable file; VideoTooLarge: over ``limits`` (None: no limits).
    """
    path = Path(path)
    with _open(path) as container:
        return _stated(container, path, limits)


def _count_and_rate(container, path: Path, limits: VideoLimits | None) -> tuple[int, float]:
    """(frames, fps) of the video: the container's sample count and average frame rate, which are decord's index
    of the file (its frame count is the video stream's packets, its rate ``avg_frame_rate``); where the container
    states no count, decord's index itself. No frame is decoded. Checked against ``limits``."""
    stream = container.streams.video[0]
    try:
        n, fps = int(stream.frames or 0), float(stream.average_rate) if stream.average_rate else 0.0
    except Exception:  # noqa: BLE001 - odd values in a damaged header: ask decord's index instead
        n, fps = 0, 0.0
    if n <= 0 or fps <= 0:
        n, fps = _decord_index(path)
    if not np.isfinite(fps) or fps <= 0:
        raise VideoError(f"video has no valid frame rate ({fps}): {path}")
    if n <= 0:
        raise VideoError(f"video has no frames: {path}")
    if limits is not None:
        if not limits.min_fps <= fps <= limits.max_fps:
            raise VideoTooLarge(f"video {path} plays at {fps:g} frames per second, outside {limits.min_fps:g}.."
                                f"{limits.max_fps:g} (fix: re-encode it at a normal frame rate)")
        if n > limits.max_frames or n / fps > limits.max_duration_s:
            raise VideoTooLarge(f"video {path} has {n} frames ({n / fps:.0f} s), over the limit of "
                                f"{limits.max_frames} frames or {limits.max_duration_s:.0f} s (fix: cut it shorter)")
    return n, fps


def _decord_index(path: Path) -> tuple[int, float]:
    """(frames, fps) from decord's index of the file (it reads every packet; it decodes none)."""
    import decord

    try:
        vr = decord.VideoReader(str(path), ctx=decord.cpu(0), num_threads=1)
        return len(vr), float(vr.get_avg_fps())
    except Exception as err:  # decord raises its own DECORDError / RuntimeError subclasses
        raise VideoError(f"cannot decode video {path}: {str(err).splitlines()[0][:200]}") from None


def video_info(path: str | os.PathLike, limits: VideoLimits | None = DEFAULT_LIMITS) -> VideoInfo:
    """Frame count, frame rate (from the container) and size of a video, without decoding a frame.

    The container's metadata is checked against ``limits`` first (VideoTooLarge), so a huge video costs
    no memory here.
    """
    path = Path(path)
    with _open(path) as container:
        width, height = _stated(container, path, limits)
        n, fps = _count_and_rate(container, path, limits)
    return VideoInfo(num_frames=n, fps=fps, width=width, height=height)


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
               deadline: float | None = None, fit: str = "stretch", start_s: float = 0.0, before: int = 0) -> Clip:
    """Decode a video.

    Args:
        path: the video file (any container FFmpeg reads).
        num_frames: sample this many frames uniformly over the video; None decodes every frame.
        size: resize to ``size`` x ``size`` (or ``(height, width)``) while decoding.
        limits: checked from the container's metadata before any frame is decoded, then on every decoded frame
            (None: no limits).
        deadline: a ``time.monotonic()`` time; decoding stops between frames once it has passed.
        fit: how a frame of another aspect becomes ``size``: "stretch" (resized to it) or "pad" (the longer
            side resized to it, the frame centred on black: the aspect kept, as a camera's video needs).
        start_s: sample from the frame shown at ``start_s`` on (a model that reads nothing of the replayed
            context starts at the takeover), ``before`` frames earlier; times stay seconds from the first frame.

    Returns:
        The frames, their times in seconds and the video's info.

    Raises:
        VideoError: missing, empty, corrupt or truncated videos, with the file named; VideoTooLarge over
        ``limits`` (FrameTooLarge: a decoded frame over them); DecodeTimeout past ``deadline``.
    """
    if fit not in ("stretch", "pad"):
        raise ValueError(f"fit must be 'stretch' or 'pad', got {fit!r}")
    path = Path(path)
    with _open(path) as container:
        width, height = stated = _stated(container, path, limits)
        n, fps = _count_and_rate(container, path, limits)
        box = None
        if fit == "pad" and size is not None and width > 0 and height > 0:
            if display_rotation(path) in (90, 270):  # frames are turned as a player turns them: fit the turned one
                width, height = height, width
            box = (size, size) if isinstance(size, int) else tuple(size)
            scale = min(box[0] / height, box[1] / width)
            size = (max(2, min(box[0], 2 * round(height * scale / 2))),
                    max(2, min(box[1], 2 * round(width * scale / 2))))
        first = 0
        if start_s or before:
            if not (math.isfinite(start_s) and start_s >= 0) or before < 0:
                raise ValueError(f"start_s must be a finite number >= 0 and before >= 0, got {start_s}, {before}")
            first = max(0, min(n - 1, int(math.floor(start_s * fps + 1e-6))) - before)
        idx = first + sample_indices(n - first, num_frames)
        try:
            frames = _decode_checked(container, path, idx, size, limits, deadline, stated)
        except VideoError:
            raise
        except Exception as err:  # PyAV raises its own error classes for every kind of damage
            raise VideoError(f"cannot decode frames of video {path} (truncated or corrupt?): {_reason(err)}") from None
    if box is not None:
        frames = letterbox(frames, box)
    h, w = frames.shape[1:3]
    info = VideoInfo(num_frames=n, fps=fps, width=int(w), height=int(h))
    return Clip(frames=frames, times_s=idx / fps, info=info)


def display_rotation(path: str | os.PathLike) -> int:
    """Degrees a player turns the video's frames (0, 90, 180 or 270): the container's display matrix, as a phone held
    upright writes it. decord decodes the frames turned; the first frame is decoded here to read it."""
    try:
        with _av_open(Path(path)) as container:
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


def _check_frame(frame, i: int, claim: tuple[int, int], limits: VideoLimits, decoded: int, path) -> None:
    """A decoded frame against the container's stated size and the limits (before it is converted)."""
    w, h = int(frame.width), int(frame.height)
    fix = "re-encode it at one frame size within the limits (e.g. ffmpeg -vf scale=-2:480)"
    if w > limits.max_width or h > limits.max_height or w * h > limits.max_pixels:
        raise FrameTooLarge(f"frame {i} of video {path} is {w} x {h} pixels, over the limit of {limits.max_width} x "
                            f"{limits.max_height} ({limits.max_pixels} pixels a frame); decoding stopped there "
                            f"(fix: {fix})", i)
    if (w, h) != claim:
        raise FrameTooLarge(f"frame {i} of video {path} is {w} x {h} pixels, but its container says {claim[0]} x "
                            f"{claim[1]}; decoding stopped there (fix: {fix})", i)
    if decoded > limits.max_decoded_pixels:
        raise FrameTooLarge(f"decoding video {path} passed the budget of {limits.max_decoded_pixels} decoded pixels "
                            f"at frame {i}; it was stopped (fix: send a shorter or smaller video)", i)


_SCALERS = threading.local()  # a thread's filter graphs by (width, height, format, size): built once, reused


def _scaler(frame, size: int | tuple[int, int] | None):
    """An FFmpeg filter graph turning frames of ``frame``'s size and format into RGB at ``size``, with the bilinear
    scaler decord uses (the same pixels). One per thread and shape, reused from video to video."""
    import av

    cache = _SCALERS.__dict__.setdefault("graphs", {})
    key = (frame.width, frame.height, frame.format.name, size)
    if key not in cache:
        graph = av.filter.Graph()
        nodes = [graph.add_buffer(width=frame.width, height=frame.height, format=frame.format.name,
                                  time_base=Fraction(1, 1000))]
        if size is not None:
            h, w = (size, size) if isinstance(size, int) else size
            nodes.append(graph.add("scale", f"{int(w)}:{int(h)}:flags=bilinear"))
        nodes += [graph.add("format", "rgb24"), graph.add("buffersink")]
        for a, b in zip(nodes, nodes[1:]):
            a.link_to(b)
        graph.configure()
        cache[key] = graph
    return cache[key]


def _decode_checked(container, path: Path, idx: np.ndarray, size: int | tuple[int, int] | None,
                    limits: VideoLimits | None, deadline: float | None, claim: tuple[int, int]) -> np.ndarray:
    """Frames ``idx`` (sorted, repeats allowed) decoded one by one from an open container, each checked (size,
    budget, deadline) before it is converted; decoding stops after the last wanted frame. (n, h, w, 3) uint8 RGB.

    With limits, FFmpeg's own ``max_pixels`` decoder option is set to four times the container's stated size (with the
    decoders' alignment; at least a megapixel), so a frame much larger than the container says is refused by the
    decoder before its picture is allocated; one a little larger or smaller is refused by :func:`_check_frame` once
    decoded."""
    import av

    wanted = {int(i) for i in idx}
    last = max(wanted)
    decoded: dict[int, np.ndarray] = {}
    pixels, i = 0, -1
    stream = container.streams.video[0]
    stream.thread_type = "SLICE"
    stream.codec_context.thread_count = 1  # one core a video, as decord decoded (the callers run several)
    if limits is not None:  # decoders allocate the coded size aligned up, some (MPEG-4) with wide edges: a margin,
        #                     and a floor of a megapixel (a frame that passes it is still refused by _check_frame)
        stream.codec_context.options = {"max_pixels": str(max(4 * (claim[0] + 64) * (claim[1] + 64), 1 << 20))}
    try:
        for i, frame in enumerate(container.decode(stream)):
            _check_deadline(deadline, path)
            pixels += int(frame.width) * int(frame.height)
            if limits is not None:
                _check_frame(frame, i, claim, limits, pixels, path)
            if i in wanted:  # turned as players turn them (the display matrix)
                turns = int(round(getattr(frame, "rotation", 0) or 0)) % 360 // 90
                turned = size if turns % 2 == 0 or size is None or isinstance(size, int) else (size[1], size[0])
                graph = _scaler(frame, turned)
                graph.push(frame)
                picture = graph.pull().to_ndarray()
                decoded[i] = np.rot90(picture, turns).copy() if turns else picture
            if i >= last:
                break
    except av.error.ArgumentError:  # EINVAL: the picture is larger than max_pixels (or its header is damaged)
        if limits is None:
            raise
        raise FrameTooLarge(f"frame {i + 1} of video {path} was refused by the decoder before it was decoded: "
                            f"it is larger than the {claim[0]} x {claim[1]} pixels its container states, or its "
                            f"header is damaged; decoding stopped there (fix: re-encode it at one frame size "
                            f"within the limits, e.g. ffmpeg -vf scale=-2:480)", i + 1) from None
    except BaseException:
        _SCALERS.__dict__.pop("graphs", None)  # a graph left mid-frame is not reused
        raise
    if len(decoded) < len(wanted):
        raise VideoError(f"only {len(decoded)} of {len(wanted)} wanted frames of video {path} could be decoded "
                         f"(truncated or corrupt?)")
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
