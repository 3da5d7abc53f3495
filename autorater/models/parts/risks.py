"""Competing risks over frames, the event stream's likelihood (``stream.py``): per-frame class log-probabilities
chained into the first event of a clip, and the losses that supervise it in a window around the annotators' markers.

A continuation succeeds when the first decisive *event* in it is a success; it fails when the first one is a mistake
or when nothing happens before the end (a timeout)::

    P(first event is class c at t) = P(c at t) * prod_{s < t} P(none at s)      (frames after the takeover only)

Frame padding: a frame whose time is not after the previous frame's (a repeated frame, when a clip is shorter than
``clip_frames``) takes no part; so does every frame before the takeover.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

# The event lies between 1.125 s before an annotator's marker and 0.25 s after it: annotators mark 0.0-0.8 s
# after the simulator's event (1st-99th percentile; median 0.36 s: README, "The model").
WINDOW_S = (1.125, 0.25)


def active_frames(times_s: torch.Tensor, takeover_s: torch.Tensor) -> torch.Tensor:
    """(b, t) bool: frames after the takeover that are not repeats of the previous frame (padding)."""
    new = torch.ones_like(times_s, dtype=torch.bool)
    new[:, 1:] = times_s[:, 1:] > times_s[:, :-1]
    return new & (times_s >= takeover_s[:, None])


def first_events(logp: torch.Tensor, active: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Competing risks over frames.

    Args:
        logp: (b, t, classes) per-frame log-probabilities, class 0 = no event.
        active: (b, t) frames that take part.

    Returns:
        ``first`` (b, t, classes - 1): log P(the first event is class c, at frame t);
        ``none`` (b,): log P(no event in the clip).
    """
    stay = torch.where(active, logp[..., 0], torch.zeros_like(logp[..., 0]))
    before = torch.cumsum(stay, 1) - stay  # log P(no event before t)
    first = (before[..., None] + logp[..., 1:]).masked_fill(~active[..., None], -1e4)
    return first, stay.sum(1)


def log1mexp(x: torch.Tensor) -> torch.Tensor:
    """log(1 - exp(x)) for x <= 0, stable."""
    x = x.clamp(max=-1e-7)
    return torch.where(x > -math.log(2), torch.log(-torch.expm1(x)), torch.log1p(-torch.exp(x)))


def event_losses(first: torch.Tensor, none: torch.Tensor, match: torch.Tensor, active: torch.Tensor,
                 times_s: torch.Tensor, success: torch.Tensor, marker_index: torch.Tensor, failure_class: torch.Tensor,
                 own: torch.Tensor, timeout: torch.Tensor, balanced: bool = False) -> dict[str, torch.Tensor]:
    """The event model's losses for a batch of b clips over t frames.

    Args:
        first, none: :func:`first_events`'s output; ``match`` (b, t) the per-frame instruction match.
        active: (b, t); times_s: (b, t).
        success: (b,) the label (NaN: unknown); on a row that pairs a video with another clip's instruction,
            the counterfactual label (NaN: none).
        marker_index: (b,) the frame nearest the annotators' marker, t for "end of video", -1 unknown.
        failure_class: (b,) column of ``first`` of the labelled failure mode (>= 1), -1 unknown / timeout.
        own: (b,) the video with its own instruction (False: another clip's instruction).
        timeout: (b,) failures labelled as a timeout (no event).
        balanced: weigh the event loss's successes and failures alike (each class half of the batch's loss), so
            that a training set with more failures (instruction swaps are mostly failures) does not teach the
            model to call a success only when it is sure.

    Returns:
        ``event``: -log P(the labelled first event inside the marker window), or of the outcome when there is
        no usable marker, on own rows; ``counterfactual``: binary cross-entropy of P(success) on the other rows
        that have a label; ``match``: the window's best match, own instruction (1) against another (0), on
        success videos.
    """
    b, t = times_s.shape
    zero = first.sum() * 0
    known = torch.isfinite(success)
    succ, fail = known & (success > 0.5), known & ~(success > 0.5)
    win = marker_window(times_s, marker_index, active)
    has_win = win.any(1)
    any_fail = torch.logsumexp(first[..., 1:], -1)
    labelled = first.gather(2, failure_class.clamp(min=1)[:, None, None].expand(b, t, 1)).squeeze(-1)
    fail_lp = torch.where((failure_class >= 1)[:, None], labelled, any_fail)
    target_lp = torch.where(succ[:, None], first[..., 0], fail_lp).masked_fill(~win, -1e5)  # finite: no NaN grads
    in_window = -torch.logsumexp(target_lp, 1)
    log_ps = torch.logsumexp(first[..., 0], 1)
    early = fail & ~timeout
    nll = torch.where(has_win & (succ | early), in_window,
                      torch.where(succ, -log_ps, torch.where(timeout & fail, -none, -log1mexp(log_ps))))
    rows = own & known
    if balanced and (rows & succ).any() and (rows & fail).any():
        weight = torch.where(succ, 0.5 / (rows & succ).sum(), 0.5 / (rows & fail).sum())
        losses = {"event": (nll * weight)[rows].sum()}
    else:
        losses = {"event": nll[rows].mean() if rows.any() else zero}
    other = ~own & known
    logit = log_ps - log1mexp(log_ps)
    losses["counterfactual"] = F.binary_cross_entropy_with_logits(logit[other], success[other].float()) \
        if other.any() else zero
    losses["match"] = match_loss(match, win, own & succ, other)
    return losses


def marker_window(times_s: torch.Tensor, marker_index: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
    """(b, t) bool: the active frames within ``WINDOW_S`` of the marker frame (none when it is unknown or the end)."""
    t = times_s.shape[1]
    in_clip = (marker_index >= 0) & (marker_index < t)
    marker_s = times_s.gather(1, marker_index.clamp(0, t - 1)[:, None])
    return active & in_clip[:, None] & (times_s >= marker_s - WINDOW_S[0]) & (times_s <= marker_s + WINDOW_S[1])


def match_loss(match: torch.Tensor, win: torch.Tensor, own: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """The window's best match (a soft maximum), own instruction (1) against another (0), rows with a window."""
    pos, neg = own & win.any(1), other & win.any(1)
    if not (pos.any() and neg.any()):
        return match.sum() * 0
    best = torch.logsumexp(2 * match.masked_fill(~win, -1e4), 1) / 2
    rows = pos | neg
    return F.binary_cross_entropy_with_logits(best[rows], pos[rows].float())


__all__ = ["WINDOW_S", "active_frames", "event_losses", "first_events", "log1mexp", "marker_window", "match_loss"]
