"""The model behind ``autorater serve``: one prediction at a time, a bounded number of ratings at once, one deadline.

:class:`ServiceRater` rates one video file through ``autorater.rater.Rater`` (the model folder's owner) under the
service's video limits; :class:`RatingSlots` runs at most ``max_decodes`` ratings at once in worker threads (503
with ``Retry-After`` when all are busy) and answers 504 once a request's deadline passes. Decoding checks the
deadline before every frame, so a timed-out rating stops within one frame and gives its slot back.

Example:
    >>> rater = ServiceRater("model")                                          # doctest: +SKIP
    >>> slots = RatingSlots(max_decodes=2, timeout_s=90)                       # doctest: +SKIP
    >>> await slots.run(rater.rate, path, "go to the red ball", 0.0, deadline=slots.deadline())  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import concurrent.futures as futures
import math
import threading
import time
from pathlib import Path

from fastapi import HTTPException

from autorater.data.video import DEFAULT_LIMITS, DecodeTimeout, VideoError, VideoLimits
from autorater.device import DEFAULT_DEVICE
from autorater.rater import Rater
from autorater.serving.fields import without_roots


class ServiceRater:
    """The rater (model, calibration, name) and a lock: one prediction at a time (the model is not re-entrant).
    Its messages name videos relative to ``media_root``, never by the server's own paths."""

    def __init__(self, model_dir: str | Path, limits: VideoLimits = DEFAULT_LIMITS, device: str = DEFAULT_DEVICE,
                 allow_unverified: bool = False, media_root: str | Path | None = None):
        self.rater = Rater.load(Path(model_dir), device, allow_unverified=allow_unverified)
        self.name = self.rater.name
        self.record = self.rater.record()
        self.lock = threading.Lock()
        self.limits = limits
        self.media_root = None if media_root is None else Path(media_root).resolve()

    def _public(self, text: str, path: Path, shown: str | None) -> str:
        """``text`` naming ``path`` as ``shown`` (default: relative to the media root) and no other server path."""
        roots = {str(path): shown or self._relative(path)}
        if self.media_root is not None:
            roots[str(self.media_root)] = ""
        return without_roots(text, roots)

    def _relative(self, path: Path) -> str:
        try:
            return Path(path).resolve().relative_to(self.media_root).as_posix() if self.media_root else Path(path).name
        except ValueError:
            return Path(path).name

    def promise(self) -> str:
        """Which promise a per-video decision carries: the calibration references' (one video has no audit, so no suite
        version's certificate covers it)."""
        r = self.record
        if r is None or not r.feasible:
            return "none: the model has no operating point (uncalibrated or infeasible); every video goes to humans"
        return (f"the calibration references' (suite {r.reference_suite}@{r.reference_suite_version}): auto-labels "
                f"agree at a rate >= {r.target_agreement} with {r.confidence:.0%} confidence for videos drawn like "
                f"those references; not a suite version's certificate (label a version and `autorater certify` it "
                f"for that)")

    def rate(self, path: Path, instruction: str, takeover_s: float, deadline: float, shown: str | None = None) -> dict:
        """The rating of one video; HTTPException 422 (undecodable, too large, ``takeover_s`` past its end) or 504
        (past ``deadline``). ``shown``: how messages name the video (default: its path under the media root)."""
        try:
            clip = self.rater.decode_file(path, instruction, takeover_s, self.limits, deadline)
        except DecodeTimeout:
            raise HTTPException(504, "rating passed the request's deadline while decoding; it was stopped (fix: "
                                     "send a shorter or smaller video, or raise the server's --timeout-s)") from None
        except VideoError as err:
            raise HTTPException(422, f"cannot decode the video: {self._public(str(err), path, shown)}") from None
        if takeover_s > clip.duration_s + 1e-9:
            raise HTTPException(422, f"field 'takeover_s' {takeover_s:g} s is past the end of the video "
                                     f"({clip.duration_s:.3f} s) (fix: seconds from the first frame, within the video)")
        if not self.lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise HTTPException(504, "rating passed the request's deadline waiting for the model")
        try:
            row = self.rater.rate_clips(["x"], [clip]).records(self.name)[0]
        finally:
            self.lock.release()
        if not all(math.isfinite(row[k]) for k in ("p_success", "marker_s")):
            raise HTTPException(422, "the model gave no finite rating for this video (fix: check the video plays; "
                                     "if it does, report the model folder)")
        decision = "human"
        if self.record is not None and self.record.feasible:
            policy = self.record.policy()
            decision = str(policy.decide([row["p_success"]], marker_uncertainty=[row["marker_spread_s"]])[0])
        return {**{k: row[k] for k in ("p_success", "outcome", "marker_s", "failure_mode", "model")},
                "decision": decision, "promise": self.promise(), "duration_s": clip.duration_s, "fps": clip.info.fps,
                "frames": clip.info.num_frames}


class RatingSlots:
    """At most ``max_decodes`` ratings at once, each under its request's deadline (``timeout_s`` from its start)."""

    def __init__(self, max_decodes: int, timeout_s: float):
        if not (timeout_s > 0 and max_decodes >= 1):
            raise ValueError(f"timeout_s must be > 0 and max_decodes >= 1, got {timeout_s} and {max_decodes}")
        self.max_decodes, self.timeout_s = max_decodes, timeout_s
        self._slots = threading.BoundedSemaphore(max_decodes)
        self._count, self._count_lock = 0, threading.Lock()
        self._pool = futures.ThreadPoolExecutor(max_workers=max_decodes, thread_name_prefix="autorater-rate")

    def deadline(self) -> float:
        """A new request's deadline (``time.monotonic()`` seconds)."""
        return time.monotonic() + self.timeout_s

    async def run(self, fn, *args, deadline: float):
        """``fn(*args, deadline)`` in a rating slot (503 when all are busy), 504 past the deadline. The slot is
        given back when the work really ends (it checks the deadline), not when the request gives up on it."""
        if not self._slots.acquire(blocking=False):
            raise HTTPException(503, f"all {self.max_decodes} rating slots are busy; retry shortly",
                                headers={"Retry-After": "1"})
        self._add(1)
        try:
            job = self._pool.submit(fn, *args, deadline)
        except RuntimeError:
            self._release()
            raise
        job.add_done_callback(lambda _: self._release())
        try:
            return await asyncio.wait_for(asyncio.wrap_future(job), max(0.0, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            raise HTTPException(504, f"rating took longer than {self.timeout_s:g} s (fix: send a shorter video, or "
                                     f"raise the server's --timeout-s)") from None

    def busy(self) -> int:
        """Slots in use now."""
        with self._count_lock:
            return self._count

    def _add(self, n: int) -> None:
        with self._count_lock:
            self._count += n

    def _release(self) -> None:
        self._add(-1)
        self._slots.release()


__all__ = ["RatingSlots", "ServiceRater"]
