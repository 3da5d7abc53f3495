"""The event stream, a part both architectures are built from: per-frame event heads chained into the clip's outcome,
marker and failure mode (competing risks over frames, ``risks.py``).

A head is any module ``head(features, instructions, active) -> (per-frame class log-probabilities (b, t, classes),
instruction match (b, t))`` with ``head.match_score(features, instructions, active)`` (the match alone) and its match
parameters under ``head.match``: the grid recipe's ``EventHead`` on tile cells, the general model's ``GeneralHead`` on
feature maps. The stream holds one head or the members of an ensemble; an ensemble's clip-level distributions
(outcome, marker, failure mode) are the mixture of its members', each member trained on its own losses, as if alone.

Example:
    >>> from autorater.models.events.head import EventHead
    >>> stream = EventStream([EventHead(12, 16, ["go", "red"], classes=2, places=2)], failure_modes=["timeout"])
    >>> out = stream([(torch.rand(2, 5, 12, 4, 4), ["go red", "go"])], torch.arange(5.0).repeat(2, 1),
    ...              torch.zeros(2))
    >>> out.success_logit.shape, out.marker_logits.shape
    (torch.Size([2]), torch.Size([2, 6]))
"""

from __future__ import annotations

import itertools
import math
import re
from typing import Sequence

import torch
from torch import nn

from autorater.model import AutoraterOutput, ModelPart, Targets
from autorater.models.parts.risks import active_frames, event_losses, first_events, log1mexp

Views = list[tuple[torch.Tensor, list[str]]]


def event_classes(failure_modes: Sequence[str]) -> list[str]:
    """The event classes after "none": success, then each failure mode that is an event (a timeout is none)."""
    return ["success"] + ([m for m in failure_modes if m != "timeout"] or ["failure"])


class EventStream(ModelPart):
    """Per-frame event heads (``heads``: one, or an ensemble's members) chained into the clip's output (module
    docstring). Weights ``stream.heads.<k>.*``; folders saved before the parts were modules named them
    ``events.*`` (one head) or ``events.<k>.*`` (:func:`legacy_name` maps them). Trained by the ``stream`` stage
    (its match warmed up alone, then in the joint step)."""

    stage = "stream"

    def __init__(self, heads: Sequence[nn.Module], failure_modes: Sequence[str]):
        super().__init__()
        if not heads:
            raise ValueError("an ensemble of no heads (fix: members >= 1)")
        self.heads = nn.ModuleList(heads)
        self.failure_modes = list(failure_modes)

    def match_parameters(self) -> list[nn.Parameter]:
        """Every head's instruction-match parameters (what the match warm-up trains)."""
        return [p for head in self.heads for p in head.match.parameters()]

    def match_scores(self, features: torch.Tensor, instructions: list[str], active: torch.Tensor
                     ) -> list[torch.Tensor]:
        """Each head's instruction match alone (b, t) (the match warm-up's task)."""
        return [head.match_score(features, instructions, active) for head in self.heads]

    def forward(self, views: Views, times_s: torch.Tensor, takeover_s: torch.Tensor,
                targets: Targets | None = None) -> AutoraterOutput:
        """The clip's output from every head on every view (``views``: the clips (b, t, ...) and their instructions,
        and e.g. their mirror at prediction; one view when training); with ``targets``, the losses."""
        failure_modes = self.failure_modes
        active = active_frames(times_s, takeover_s)
        classes = event_classes(failure_modes)
        if targets is not None:
            # Each failure mode's event class (-1: "timeout", no event); the appended -1 serves unknown modes (-1).
            class_of = torch.tensor([-1 if m == "timeout" else classes.index(m) for m in failure_modes] + [-1],
                                    device=times_s.device)
            failure_class = class_of[targets.failure_mode]
            timeout = (targets.marker_index == times_s.shape[1]) | ((targets.failure_mode >= 0) & (failure_class < 0))
        log_ps, marker, failure, matches, losses, won, lost = [], [], [], [], [], [], []
        for head, (feats, words) in itertools.product(self.heads, views):
            logp, match = head(feats, words, active)  # (b, t, classes), (b, t)
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


def legacy_name(name: str) -> str:
    """A weight's name in a folder saved before the parts were modules, in today's: ``events.*`` (one head) and
    ``events.<k>.*`` (an ensemble) are ``stream.heads.<k>.*``; other names are unchanged."""
    if not name.startswith("events."):
        return name
    rest = name[len("events."):]
    return f"stream.heads.{rest}" if re.match(r"\d+\.", rest) else f"stream.heads.0.{rest}"


__all__ = ["EventStream", "event_classes", "legacy_name"]
