"""Video I/O: H.264 round trip, frame times from the container's rate, sampling, resizing, and clear errors."""

from __future__ import annotations

import numpy as np
import pytest

from autorater.data.video import VideoError, read_video, sample_indices, video_info, write_video
from tiny_suites import frames


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    """(path, original frames): 12 frames of 32x32 at 8 fps."""
    original = frames(seed=1, n=12, size=32)
    return write_video(tmp_path_factory.mktemp("v") / "a.mp4", original, fps=8.0), original


def test_round_trip_is_close_and_keeps_count_fps_and_times(video):
    path, original = video
    clip = read_video(path)
    assert clip.frames.shape == original.shape and clip.frames.dtype == np.uint8
    assert np.abs(clip.frames.astype(int) - original).mean() < 6  # crf 18 on a smooth gradient
    assert clip.info.num_frames == 12 and clip.info.fps == pytest.approx(8.0)
    assert (clip.info.width, clip.info.height) == (32, 32)
    np.testing.assert_allclose(clip.times_s, np.arange(12) / 8.0)
    # frame order is kept: each decoded frame is closest to its own original
    err = np.abs(clip.frames[:, None].astype(int) - original[None].astype(int)).mean(axis=(2, 3, 4))
    assert (err.argmin(axis=1) == np.arange(12)).all()


@pytest.mark.parametrize("fps", [1.0, 10.0, 12.5, 29.97])
def test_fps_comes_from_the_container(tmp_path, fps):
    path = write_video(tmp_path / "v.mp4", frames(n=6), fps=fps)
    info = video_info(path)
    assert info.fps == pytest.approx(fps, rel=1e-3) and info.num_frames == 6
    assert info.duration_s == pytest.approx(6 / fps, rel=1e-3)
    np.testing.assert_allclose(read_video(path).times_s, np.arange(6) / info.fps)


def test_video_info_duration_is_frames_over_fps(video):
    path, _ = video
    info = video_info(path)
    assert (info.num_frames, info.width, info.height) == (12, 32, 32)
    assert info.duration_s == pytest.approx(12 / 8.0)


@pytest.mark.parametrize("n", [1, 3, 5, 12])
def test_sampling_gives_sorted_spread_indices(video, n):
    path, original = video
    clip = read_video(path, num_frames=n)
    assert clip.frames.shape == (n, 32, 32, 3)
    idx = np.rint(clip.times_s * clip.info.fps).astype(int)
    np.testing.assert_allclose(clip.times_s, idx / clip.info.fps)
    assert (np.diff(idx) > 0).all() and idx.min() >= 0 and idx.max() < 12  # sorted, distinct, inside
    assert clip.info.num_frames == 12  # the info describes the whole video, not the sample
    gaps = np.diff(np.concatenate([[-1], idx, [12]]))
    assert gaps.max() <= int(np.ceil(12 / n)) + 1  # spread over the whole video, no big hole
    # the sampled frames are the frames at those indices
    assert np.abs(clip.frames.astype(int) - original[idx]).mean() < 6


def test_sample_indices_properties():
    for total in (1, 7, 100):
        for n in (1, 2, 8, 50):
            idx = sample_indices(total, n)
            assert len(idx) == n and (np.diff(idx) >= 0).all() and idx.min() >= 0 and idx.max() < total
            if n <= total:
                assert len(set(idx.tolist())) == n
            else:  # every frame once, then the last one repeated: padding at the end
                np.testing.assert_array_equal(idx[:total], np.arange(total))
                assert (idx[total:] == total - 1).all()
    np.testing.assert_array_equal(sample_indices(5, None), np.arange(5))


@pytest.mark.parametrize("size, shape", [(16, (16, 16)), (48, (48, 48)), (64, (64, 64)), ((16, 24), (16, 24))])
def test_size_resizes(video, size, shape):
    path, original = video
    clip = read_video(path, num_frames=4, size=size)
    assert clip.frames.shape == (4, *shape, 3)
    assert (clip.info.height, clip.info.width) == shape
    # still the same picture: the mean colour is kept
    shown = original[np.rint(clip.times_s * 8).astype(int)]
    assert np.abs(clip.frames.mean(axis=(1, 2)) - shown.mean(axis=(1, 2))).max() < 8


@pytest.mark.parametrize("hw", [(16, 16), (16, 48), (24, 72), (30, 50)])
def test_small_and_odd_widths_decode(tmp_path, hw):
    """decord 0.6 misreads some widths (8, 12, 16, 24, 48, 72): they must still decode correctly."""
    original = frames(n=5, size=max(hw))[:, :hw[0], :hw[1]]
    path = write_video(tmp_path / "w.mp4", np.ascontiguousarray(original), fps=5.0)
    clip = read_video(path)
    assert clip.frames.shape == original.shape
    assert np.abs(clip.frames.astype(int) - original).mean() < 8
    assert read_video(path, num_frames=2).frames.shape == (2, *hw, 3)


def test_broken_files_raise_video_error_naming_the_path(tmp_path, video):
    path, _ = video
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    text = tmp_path / "text.mp4"
    text.write_text("this is not a video\n")
    truncated = tmp_path / "truncated.mp4"
    raw = path.read_bytes()
    truncated.write_bytes(raw[: len(raw) // 2])
    for bad, words in ((tmp_path / "missing.mp4", "not found"), (empty, "empty"), (text, "cannot decode"),
                       (truncated, "")):
        for fn in (video_info, read_video):
            with pytest.raises(VideoError) as info:
                fn(bad)
            assert str(bad) in str(info.value) and words in str(info.value)
            assert isinstance(info.value, ValueError)


def test_write_video_rejects_odd_sizes_and_wrong_dtypes(tmp_path):
    good = frames(n=2, size=16)
    with pytest.raises(ValueError, match="even"):
        write_video(tmp_path / "x.mp4", good[:, :15])
    with pytest.raises(ValueError, match="even"):
        write_video(tmp_path / "x.mp4", np.ascontiguousarray(good[:, :, :15]))
    for bad in (good.astype(np.float32), good.astype(np.int64), good[..., :2], good[0]):
        with pytest.raises(ValueError, match="uint8"):
            write_video(tmp_path / "x.mp4", bad)
    assert not list(tmp_path.iterdir())  # nothing half-written


def test_write_video_creates_folders_and_overwrites_atomically(tmp_path):
    path = write_video(tmp_path / "deep" / "er" / "x.mp4", frames(n=3))
    assert video_info(path).num_frames == 3
    write_video(path, frames(n=5))
    assert video_info(path).num_frames == 5
    assert sorted(p.name for p in path.parent.iterdir()) == ["x.mp4"]
