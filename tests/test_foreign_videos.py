"""Videos from other people's recorders: each one rates, letterboxed as the model expects (decoded with the general
model's own decode settings), or fails with an error that names the file.

The files are tiny and written in the test: with PyAV (VP9 in webm, MJPEG in avi, H.264 with an audio track, a
variable frame rate, rotation metadata, one frame, 30 minutes at 1 fps, 1280 x 720) and, where Debian's ``ffmpeg``
is installed, with it too (the same kinds, from its own encoders and muxers).
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
import torch

from autorater.app import cli
from autorater.data.example import encode_video
from autorater.data.imports.table import import_table
from autorater.data.imports.to_suite import probe_video
from autorater.data.video import VideoError, read_video
from autorater.models import PRESETS, AutoModel, processor_for
from model_suites import one_thread
from tiny_suites import read_lines

GENERAL = processor_for(PRESETS["general"]).decode_args()  # the default model decodes: 40 frames, letterboxed


def picture(n: int, h: int, w: int, seed: int = 0) -> np.ndarray:
    """Bright frames (never black, so the letterbox bars stand out) with a white block in the top-left corner."""
    rng = np.random.default_rng(seed)
    out = np.empty((n, h, w, 3), np.uint8)
    out[:] = rng.integers(90, 160, (1, 1, 1, 3))
    out[:, :, :, 0] = np.linspace(80, 200, w, dtype=np.uint8)[None, None]
    out[:, : max(2, h // 4), : max(2, w // 4)] = 255
    return out


# name -> (frames, fps, encode_video options, the picture a player shows: (height, width))
PYAV = {
    "vp9.webm": (lambda: picture(16, 48, 64), 8.0, {}, (48, 64)),
    "mjpeg.avi": (lambda: picture(16, 48, 64), 12.0, {}, (48, 64)),
    "h264-audio.mp4": (lambda: picture(16, 48, 64), 8.0, {"audio": True}, (48, 64)),
    "vfr.mp4": (lambda: picture(16, 48, 64), 8.0, {"times_s": np.cumsum([0] + [0.05, 0.2] * 7 + [0.05])}, (48, 64)),
    "rotated.mp4": (lambda: picture(16, 48, 64), 8.0, {"rotation": 90}, (64, 48)),
    "one-frame.mp4": (lambda: picture(1, 48, 64), 8.0, {}, (48, 64)),
    "thirty-minutes.mp4": (lambda: picture(1800, 16, 16), 1.0, {}, (16, 16)),
    "hd.mp4": (lambda: picture(6, 720, 1280), 30.0, {}, (720, 1280)),
}
FFMPEG = {  # made by the ffmpeg command line: name -> (arguments, the displayed (height, width))
    "ff-vp9.webm": (["-f", "lavfi", "-i", "testsrc=size=96x64:rate=10", "-t", "2", "-c:v", "libvpx-vp9"], (64, 96)),
    "ff-mjpeg.avi": (["-f", "lavfi", "-i", "testsrc=size=96x64:rate=10", "-t", "2", "-c:v", "mjpeg"], (64, 96)),
    "ff-audio.mp4": (["-f", "lavfi", "-i", "testsrc=size=96x64:rate=10", "-f", "lavfi", "-i", "sine=d=2", "-t", "2",
                      "-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac"], (64, 96)),
    "ff-rotated.mp4": (["-display_rotation", "90", "-f", "lavfi", "-i", "testsrc=size=96x64:rate=10", "-t", "2",
                        "-c:v", "libx264", "-pix_fmt", "yuv420p"], (96, 64)),  # ffmpeg >= 6.1 (Debian 12 has 5.1)
    "ff-vfr.mp4": (["-f", "lavfi", "-i", "testsrc=size=96x64:rate=10", "-t", "2", "-vf", r"select='not(mod(n\,3))'",
                    "-vsync", "vfr", "-c:v", "libx264", "-pix_fmt", "yuv420p"], (64, 96)),
    "ff-one-frame.mp4": (["-f", "lavfi", "-i", "testsrc=size=96x64:rate=10", "-frames:v", "1", "-c:v", "libx264",
                          "-pix_fmt", "yuv420p"], (64, 96)),
    "ff-hd.mp4": (["-f", "lavfi", "-i", "testsrc=size=1280x720:rate=30", "-t", "0.3", "-c:v", "libx264",
                   "-pix_fmt", "yuv420p"], (720, 1280)),
}


@pytest.fixture(scope="module")
def foreign(tmp_path_factory):
    folder = tmp_path_factory.mktemp("foreign")
    for name, (make, fps, options, _) in PYAV.items():
        encode_video(folder / name, make(), fps, **options)
    return folder


@pytest.fixture(scope="module")
def by_ffmpeg(tmp_path_factory):
    if shutil.which("ffmpeg") is None:
        pytest.skip("Debian's ffmpeg is not installed (apt-get install ffmpeg); the PyAV-made files are tested")
    folder = tmp_path_factory.mktemp("ffmpeg")
    made = {}
    for name, (args, shape) in FFMPEG.items():
        # an option this ffmpeg lacks (-display_rotation is 7.0's) skips that file, not the others
        done = subprocess.run(["ffmpeg", "-v", "error", "-y", *args, str(folder / name)], capture_output=True)
        if done.returncode == 0:
            made[name] = shape
    return folder, made


def content_box(frames: np.ndarray) -> tuple[int, int]:
    """(rows, columns) of the letterboxed frames that are not the black bars."""
    lit = frames.max(axis=(0, 3)) > 40
    return int(lit.any(axis=1).sum()), int(lit.any(axis=0).sum())


def assert_letterboxed(clip, shape: tuple[int, int]) -> None:
    assert clip.frames.shape == (GENERAL["num_frames"], GENERAL["size"], GENERAL["size"], 3)
    rows, cols = content_box(clip.frames)
    h, w = shape
    scale = GENERAL["size"] / max(h, w)
    assert abs(rows - h * scale) <= 2 and abs(cols - w * scale) <= 2, (rows, cols, shape)  # the aspect kept


@pytest.mark.parametrize("name", list(PYAV))
def test_each_foreign_file_decodes_letterboxed_for_the_model(foreign, name):
    clip = read_video(foreign / name, **GENERAL)
    assert_letterboxed(clip, PYAV[name][3])
    assert np.all(np.diff(clip.times_s) >= 0) and clip.times_s[-1] < clip.info.duration_s


def test_a_rotated_video_is_turned_as_a_player_turns_it_whichever_decoder_reads_it(foreign, monkeypatch):
    stored = picture(1, 48, 64)[0]
    shown = np.rot90(stored, 1)  # a display rotation of 90 degrees: counter-clockwise, as ffmpeg and players do
    clip = read_video(foreign / "rotated.mp4", num_frames=1)
    assert clip.frames.shape[1:] == shown.shape and np.abs(clip.frames[0].astype(int) - shown).mean() < 12
    import decord

    def broken(*args, **kwargs):
        raise decord.DECORDError("forced")  # decord 0.6 fails on some frame widths: the PyAV fallback decodes them

    monkeypatch.setattr(decord.VideoReader, "get_batch", broken)
    again = read_video(foreign / "rotated.mp4", num_frames=1)
    assert np.abs(again.frames[0].astype(int) - clip.frames[0]).mean() < 3
    assert_letterboxed(read_video(foreign / "rotated.mp4", **GENERAL), (64, 48))


def test_the_importer_warns_about_a_variable_frame_rate_and_times_the_rest(foreign):
    assert probe_video(foreign / "vfr.mp4").time_error_s > 0.05
    for name in ("vp9.webm", "mjpeg.avi", "h264-audio.mp4", "thirty-minutes.mp4"):
        assert probe_video(foreign / name).time_error_s < 1e-3, name
    info = probe_video(foreign / "thirty-minutes.mp4").info
    assert (info.num_frames, info.fps, info.duration_s) == (1800, 1.0, 1800.0)


def test_a_truncated_or_empty_file_fails_naming_the_file(foreign, tmp_path):
    data = (foreign / "h264-audio.mp4").read_bytes()
    (tmp_path / "cut.mp4").write_bytes(data[: len(data) // 3])
    (tmp_path / "empty.webm").write_bytes(b"")
    for name in ("cut.mp4", "empty.webm"):
        with pytest.raises(VideoError, match=name):
            read_video(tmp_path / name, **GENERAL)


def test_ffmpeg_made_files_decode_letterboxed_too(by_ffmpeg):
    folder, made = by_ffmpeg
    assert {"ff-vp9.webm", "ff-mjpeg.avi", "ff-audio.mp4", "ff-vfr.mp4", "ff-one-frame.mp4"} <= set(made)
    for name, shape in made.items():
        assert_letterboxed(read_video(folder / name, **GENERAL), shape)
    assert probe_video(folder / "ff-vfr.mp4").time_error_s > 0.1  # frames dropped, their timestamps kept


def test_every_foreign_file_imports_and_is_rated(foreign, tmp_path, monkeypatch):
    """Through the product: ``suite import`` takes them all (the variable frame rate with a warning) and ``predict``
    with the general architecture rates each one."""
    table = tmp_path / "t.csv"
    table.write_text("video,instruction,agent\n" + "".join(f"{n},open the drawer,a{i}\n" for i, n in enumerate(PYAV)))
    report = import_table(table, foreign, tmp_path / "suite")
    assert report.ok and report.imported == len(PYAV) and not report.problems
    assert [w.line for w in report.warnings] == [list(PYAV).index("vfr.mp4") + 2]
    torch.manual_seed(0)
    model = AutoModel.from_config(PRESETS["tiny-general"]).save_pretrained(tmp_path / "model")
    out = tmp_path / "predictions.jsonl"
    monkeypatch.setattr(cli.common, "threads", lambda: None)
    before = one_thread()
    try:
        assert cli.main(["predict", "--model", str(model), "--suite", str(tmp_path / "suite"), "--out", str(out),
                         "--quiet", "--device", "cpu"]) == 0
    finally:
        torch.set_num_threads(before)
    rows = read_lines(out)
    assert len(rows) == len(PYAV) and all("error" not in r and 0 <= r["p_success"] <= 1 for r in rows)
