"""A small "your own videos" example: a folder of videos in mixed containers, sizes and frame rates, and CSV tables
that say what each one is, as an evaluation team's recorder and spreadsheet would have them.

The videos come from a generated BabyAI suite (``autorater.data.generate``), re-encoded: H.264 mp4 (one with an audio
track), VP9 webm, MJPEG avi and MPEG-4 mkv; 112 px square, 224 px, 96 px and a 200 x 112 widescreen frame; 8, 12
and 4 frames per second. Nothing about them is committed: the walkthrough (``docs/your-data.md``) and the tests
build them with

    python -m autorater.data.example --out example

which writes ``example/videos/`` and three tables over disjoint scenarios: ``train.csv`` (one row per label: three
simulated annotators per continuation), ``references.csv`` (gold outcomes and markers, from the simulator, beside
the annotators' labels) and ``new.csv`` (no labels: a new version to label).

``encode_video`` writes any of these formats (and a variable frame rate or a rotation), for the tests of foreign
files too.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import tempfile
from fractions import Fraction
from pathlib import Path

import numpy as np

from autorater.data.files import commit

CODECS = {".mp4": ("libx264", "yuv420p"), ".mov": ("libx264", "yuv420p"), ".webm": ("libvpx-vp9", "yuv420p"),
          ".avi": ("mjpeg", "yuvj420p"), ".mkv": ("mpeg4", "yuv420p")}
AUDIO = {".mp4": "aac", ".mov": "aac", ".mkv": "aac", ".webm": "libopus", ".avi": "pcm_s16le"}
# (suffix, (height, width) or None: as generated, fps or None: as generated, with an audio track)
VARIANTS = [(".mp4", None, None, False), (".webm", (224, 224), None, False), (".avi", (96, 96), 12.0, False),
            (".mkv", (112, 200), 4.0, False), (".mp4", (112, 200), 12.0, True), (".webm", None, 4.0, False)]
TABLE_COLUMNS = ["video", "instruction", "scenario", "agent", "category", "takeover_s"]
LABEL_COLUMNS = ["outcome", "marker_s", "annotator", "failure_mode"]


def encode_video(path: str | os.PathLike, frames: np.ndarray, fps: float, *, times_s: np.ndarray | None = None,
                 rotation: int = 0, audio: bool = False) -> Path:
    """Write RGB frames in the container that ``path``'s suffix names (``CODECS``), atomically.

    Args:
        frames: (n, height, width, 3) uint8; height and width even.
        fps: the frame rate the container states.
        times_s: each frame's presentation time in seconds (a variable frame rate); default ``i / fps``.
        rotation: degrees a player turns the picture (the display matrix a phone writes): 0, 90, 180 or 270.
        audio: add a quiet audio track as long as the video.
    """
    import av

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in CODECS:
        raise ValueError(f"{path}: no codec for {suffix!r}; use one of {sorted(CODECS)}")
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8 or frames.shape[1] % 2 or \
            frames.shape[2] % 2:
        raise ValueError(f"frames must be (n, even height, even width, 3) uint8, got {frames.shape} {frames.dtype}")
    codec, pix_fmt = CODECS[suffix]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".tmp" + path.suffix)
    rate = Fraction(fps).limit_denominator(1000)
    with av.open(str(tmp), mode="w") as container:
        stream = container.add_stream(codec, rate=rate)
        stream.width, stream.height, stream.pix_fmt = frames.shape[2], frames.shape[1], pix_fmt
        stream.thread_type = "NONE"
        if codec == "libx264":
            stream.options = {"crf": "18", "preset": "veryfast"}
        time_base = Fraction(1, 1000) if times_s is not None else 1 / rate
        stream.codec_context.time_base = time_base
        if rotation:
            stream.set_display_rotation(rotation)
        sound = container.add_stream(AUDIO[suffix], rate=48000) if audio else None  # every stream before the header
        for i, frame in enumerate(frames):
            video_frame = av.VideoFrame.from_ndarray(frame, format="rgb24")
            video_frame.pts = int(round(times_s[i] * 1000)) if times_s is not None else i
            video_frame.time_base = time_base
            for packet in stream.encode(video_frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
        if sound is not None:
            _add_audio(container, sound, len(frames) / fps)
    return commit(tmp, path)


def _add_audio(container, stream, seconds: float, rate: int = 48000) -> None:
    import av

    layout, fmt = "mono", stream.codec_context.codec.audio_formats[0].name
    samples = int(rate * seconds)
    tone = (0.05 * np.sin(2 * np.pi * 440 * np.arange(samples) / rate)).astype(np.float32)
    size = stream.codec_context.frame_size or 1024
    for start in range(0, samples, size):
        chunk = tone[start:start + size]
        data = (chunk * 32767).astype(np.int16)[None] if fmt.startswith("s16") else chunk[None]
        frame = av.AudioFrame.from_ndarray(data, format=fmt, layout=layout)
        frame.sample_rate, frame.pts = rate, start
        for packet in stream.encode(frame):
            container.mux(packet)
    for packet in stream.encode():
        container.mux(packet)


def resample(frames: np.ndarray, fps: float, new_fps: float) -> np.ndarray:
    """The frames a camera at ``new_fps`` would have taken of the same scene: frame ``j`` is the one shown at
    ``j / new_fps``; the duration is kept."""
    n = max(1, math.ceil(len(frames) * new_fps / fps - 1e-9))  # never shorter: markers stay inside
    return frames[np.minimum((np.arange(n) * fps / new_fps + 1e-9).astype(int), len(frames) - 1)]


def reshape_frames(frames: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Frames scaled to ``size`` (height, width): a square frame in a wider one is scaled to its height and centred
    on grey, as a widescreen recorder frames it."""
    import av

    n, h, w, _ = frames.shape
    height, width = size
    scaled_w = width if abs(width / height - w / h) < 1e-6 else int(round(w * height / h)) // 2 * 2
    out = np.full((n, height, width, 3), 96, np.uint8)
    left = (width - scaled_w) // 2
    for i, frame in enumerate(frames):
        video_frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")
        out[i, :, left:left + scaled_w] = video_frame.to_ndarray(format="rgb24", width=scaled_w, height=height)
    return out


def build_example(out: str | os.PathLike, scenarios: int = 6, seed: int = 0, workers: int = 1) -> Path:
    """Write the example folder (see the module docstring): ``scenarios`` scenarios of two continuations per table.

    Returns:
        ``out``.
    """
    from autorater.data.generate import generate_suite
    from autorater.data.suite import Suite, load_truth
    from autorater.data.video import read_video

    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} is not empty (fix: pass a new folder)")
    with tempfile.TemporaryDirectory() as tmp:
        source = generate_suite(Path(tmp) / "suite", scenarios=3 * scenarios, continuations_per_scenario=2,
                                seed=seed, workers=workers, progress=False)
        suite, truth = Suite.load(source), {t["continuation_id"]: t for t in load_truth(source)}
        order = [s.scenario_id for s in suite.scenarios]
        parts = {"train": order[:scenarios], "references": order[scenarios:2 * scenarios],
                 "new": order[2 * scenarios:]}
        names = {}
        for i, c in enumerate(suite.continuations):
            suffix, size, fps, audio = VARIANTS[i % len(VARIANTS)]
            clip = read_video(suite.video_path(c.continuation_id))
            frames, rate = clip.frames, clip.info.fps
            if fps is not None:
                frames, rate = resample(frames, rate, fps), fps
            if size is not None:
                frames = reshape_frames(frames, size)
            names[c.continuation_id] = f"rec-{i:03d}{suffix}"
            encode_video(out / "videos" / names[c.continuation_id], frames, rate, audio=audio)
        for part, ids in parts.items():
            _write_table(out / f"{part}.csv", suite, truth, set(ids), names, part)
    return out


def _write_table(path: Path, suite, truth: dict, scenario_ids: set[str], names: dict[str, str], part: str) -> None:
    gold = ["gold_outcome", "gold_marker_s"] if part == "references" else []
    columns = TABLE_COLUMNS + (LABEL_COLUMNS + gold if part != "new" else [])
    by_cid: dict[str, list] = {}
    for a in suite.annotations:
        by_cid.setdefault(a.continuation_id, []).append(a)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        for c in suite.continuations:
            if c.scenario_id not in scenario_ids:
                continue
            s = suite.scenario_of(c.continuation_id)
            base = [names[c.continuation_id], s.instruction, s.scenario_id, c.agent_id, s.category,
                    suite.takeover_of(c.continuation_id)]
            if part == "new":
                writer.writerow(base)
                continue
            t = truth[c.continuation_id]
            labels = by_cid.get(c.continuation_id, [])[:3]
            for a in labels:
                row = base + [a.outcome, "" if a.marker_s is None else a.marker_s, a.annotator_id, a.failure_mode or ""]
                writer.writerow(row + ([t["outcome"], t["marker_s"]] if gold else []))
    commit(tmp, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autorater.data.example", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="example", help="a new folder")
    parser.add_argument("--scenarios", type=int, default=6, help="scenarios per table (two continuations each)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1, help="processes generating the videos")
    args = parser.parse_args(argv)
    out = build_example(args.out, args.scenarios, args.seed, args.workers)
    videos = sorted((out / "videos").iterdir())
    size = sum(v.stat().st_size for v in videos)
    print(f"wrote {len(videos)} videos ({size / 2 ** 20:.1f} MiB: "
          f"{', '.join(sorted({v.suffix for v in videos}))}) and train.csv, references.csv, new.csv to {out}")
    return 0


__all__ = ["CODECS", "VARIANTS", "build_example", "encode_video", "reshape_frames", "resample"]

if __name__ == "__main__":
    raise SystemExit(main())
