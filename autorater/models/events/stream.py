"""The event stream, a part both event architectures are built from: per-frame event heads chained into the clip's
outcome, marker and failure mode (competing risks over frames, ``head.py``).

A model holds its heads (one, or the members of an ensemble: ``heads``) and says how one head reads its inputs
(``run``); :func:`stream_output` does the rest. An ensemble's clip-level distributions (outcome, marker, failure
mode) are the mixture of its members'; each member is trained on its own losses, as if alone.
"""

from __future__ import annotations

import itertools
import math
from typing import Callable, Sequence

import torch
from torch import nn

from autorater.model import AutoraterOutput, Targets
from autorater.models.events.head import active_frames, event_losses, first_events, log1mexp

Views = list[tuple[torch.Tensor, list[str]]]


def event_classes(failure_modes: Sequence[str]) -> list[str]:
    """The event classes after "none": success, then each failure mode that is an event (a timeout is none)."""
    return ["success"] + ([m for m in failure_modes if m != "timeout"] or ["failure"])


def one_or_ensemble(heads: list[nn.Module]) -> nn.Module:
    """One head keeps the first folders' weight names (``events.*``); an ensemble is ``events.<k>.*``."""
    if not heads:
        raise ValueError("an ensemble of no heads (fix: members >= 1)")
    return heads[0] if len(heads) == 1 else nn.ModuleList(heads)


def members(module: nn.Module) -> list[nn.Module]:
    """The heads of :func:`one_or_ensemble`'s module."""
    return list(module) if isinstance(module, nn.ModuleList) else [module]


def stream_output(heads: list[nn.Module], run: Callable, views: Views, times_s: torch.Tensor,
                  takeover_s: torch.Tensor, failure_modes: Sequence[str],
                  targets: Targets | None = None) -> AutoraterOutput:
    """The clip's output from every head on every view (``views``: the clips and their instructions, and e.g. their
    mirror at prediction; one view when training): ``run(head, features, instructions, active)`` -> the head's
    per-frame class log-probabilities (b, t, classes) and instruction match (b, t). With ``targets``, the losses."""
    active = active_frames(times_s, takeover_s)
    classes = event_classes(failure_modes)
    if targets is not None:
        # Each failure mode's event class (-1: "timeout", no event); the appended -1 serves unknown modes (-1).
        class_of = torch.tensor([-1 if m == "timeout" else classes.index(m) for m in failure_modes] + [-1],
                                device=times_s.device)
        failure_class = class_of[targets.failure_mode]
        timeout = (targets.marker_index == times_s.shape[1]) | ((targets.failure_mode >= 0) & (failure_class < 0))
    log_ps, marker, failure, matches, losses, won, lost = [], [], [], [], [], [], []
    for head, (feats, words) in itertools.product(heads, views):
        logp, match = run(head, feats, words, active)  # (b, t, classes), (b, t)
        first, none = first_events(logp, active)  # (b, t, events), (b,)
        log_ps.append(torch.logsumexp(first[..., 0], 1))
        marker.append(torch.cat([torch.logsumexp(first, -1), none[:, None]], 1))  # log P(first event at t / none)
        won.append(first[..., 0])  # log P(the first event is a success, at t)
        lost.append(torch.cat([torch.logsumexp(first[..., 1:], -1), none[:, None]], 1))  # a failure at t / none
        failure.append(torch.stack([none if m == "timeout" else torch.logsumexp(first[..., classes.index(m)], 1)
                                    for m in failure_modes], -1) if failure_modes else none.new_zeros(len(none), 1))
        matches.append(torch.logsumexp(2 * match.masked_fill(~active, -1e4), 1) / 2)
        if targets is not None:
            losses.append(event_losses(first, none, match, active, times_s, targets.success, targets.marker_index,
                                       failure_class, own=~(targets.match < 0.5), timeout=timeout,
                                       balanced=targets.balanced))

    def mixture(xs):  # log of the members' mean probability
        return torch.logsumexp(torch.stack(xs), 0) - math.log(len(xs))

    log_p = mixture(log_ps)
    out = AutoraterOutput(success_logit=log_p - log1mexp(log_p), marker_logits=mixture(marker),
                          failure_logits=mixture(failure), match_logit=torch.stack(matches).mean(0),
                          success_marker_logits=mixture(won), failure_marker_logits=mixture(lost))
    if targets is not None:
        out.losses = {k: torch.stack([m[k] for m in losses]).mean() for k in losses[0]}
        w = dict(zip(("event", "match", "counterfactual"), targets.weights))
        out.loss = w["event"] * out.losses["event"] + w["match"] * out.losses["match"] + \
            w["counterfactual"] * out.losses["counterfactual"]
    return out


__all__ = ["event_classes", "members", "one_or_ensemble", "stream_output"]
