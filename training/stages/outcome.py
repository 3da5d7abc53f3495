"""The outcome path's stage (its part: ``OutcomePath``, a few larger frames, P(success)): its heads trained alone on
the cached frozen maps when the recipe trains the parts apart, else the path trained in the joint step
(``stages/joint.py``), where this stage says how its loss weighs each row.

Alone (issue 49), ``outcome.members`` heads, each from its own seed, on the cached frozen maps of the outcome frames
and the instruction's sentence vectors, computed once (:class:`OutcomeInputs`): a step reads a few tensors, so a head
trains to convergence in a minute or two on 2 cores where the joint step (every frame of the stream beside it) cost
0.3-0.9 s. Each stops early on validation balanced accuracy within its budget (``outcome.steps``) and says whether it
converged; the rest of the model then trains without the path, and the gate joins them (``stages/gate.py``).

Its recipe (``TrainConfig.outcome``, :class:`OutcomeRecipe`) holds the path's loss, the heads' budget and step, and
the heads' options (paraphrased instructions, rewound successes, a per-frame target, two views that agree): an
option is a field of the recipe marked ``ALONE`` and its use in :class:`OutcomeHeadPart`, both here.

Example:
    >>> OutcomeRecipe(steps=100).epochs(batch_size=16, n_train=160)
    10
    >>> OutcomeStage(OutcomeRecipe(rewind=0.5), "outcome").joint_notes()[0].split(":")[0]
    'outcome.rewind off'
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable, ClassVar, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from autorater.device import module_device
from autorater.models.parts.outcome import inputs_of, outcome_loss, outcome_times
from autorater.training.inputs.batches import Batch, TrainingData, seeded
from autorater.training.loop import Schedule, convergence_verdict, fit
from autorater.training.stages.base import PartStage, Run, StageResult, balanced_accuracy, prefixed

ALONE = {"alone": True}  # an option of the heads trained alone (a joint step notes it, off)


@dataclass
class OutcomeRecipe:
    """The outcome path's recipe (``TrainConfig.outcome``): its loss and, when the parts train apart, its heads'
    budget, step and options (the fields marked ``ALONE``)."""

    ranges: ClassVar[dict[str, tuple[float, float]]] = {  # a recipe file's numbers are checked (TrainConfig.check)
        "steps": (1, 10 ** 7), "patience": (0, 10_000), "lr": (1e-9, 10), "paraphrases": (0, 1), "rewind": (0, 1)}

    weight: float = 1.0  # the outcome path's loss (models with one: autorater/models/parts/outcome.py)
    negatives: float = 0.0  # weight of the rows pairing a success video with another task's words as an assumed
    #                         failure (0: none: across scenes they teach "words that do not fit the scene mean
    #                         failure", which an unseen task's words are)
    swap_weight: float = 0.5  # rows of swapped instructions (scenarios tagged instruction-swap: ``suite swap``, truth
    #                          judged by the simulator) weigh this much in the outcome path's loss
    steps: int = 3000  # parts apart: each head's budget of optimiser steps (whole epochs)
    patience: int = 4  # parts apart: epochs without a better validation BA before a head stops
    lr: float = 1e-3  # parts apart: the heads' learning rate (AdamW, warm-up, cosine over the budget)
    # Options of the heads trained alone (issue 56; off in the recipe until a paired ablation says they pay):
    paraphrases: float = field(default=0.0, metadata=ALONE)  # share of rows worded, each time they are drawn, by
    #                           another wording of their task (the scenario's metadata ``paraphrases``): the same
    #                           success in other words
    rewind: float = field(default=0.0, metadata=ALONE)  # share of a batch's success rows also shown rewound (ReWiND):
    #                      their outcome frames before the marker played forward and back, so the last frame shows
    #                      the task not done; a failure
    reached: float = field(default=0.0, metadata=ALONE)  # weight of a per-frame "outcome reached" loss: each outcome
    #                       frame's token, read by the head's own output layer, against whether the annotators'
    #                       marker lies at or before that frame
    consistency: float = field(default=0.0, metadata=ALONE)  # weight of the agreement of two views of one rollout
    #                           (continuation metadata ``twin``): the squared difference of their P(success)

    def epochs(self, batch_size: int, n_train: int) -> int:
        """The heads' budget in whole epochs: ``steps`` steps on ``n_train`` rows, at least one epoch."""
        return max(1, int(np.ceil(self.steps / int(np.ceil(n_train / batch_size)))))

    def schedule(self, base: Schedule, n_train: int, min_steps: int = 0) -> Schedule:
        """How each head trains alone on ``n_train`` rows: the joint step's batch, decay and warm-up (``base``),
        ``steps`` in whole epochs at its own step and patience, never stopped before ``min_steps``; no average."""
        return dataclasses.replace(base, epochs=self.epochs(base.batch_size, n_train), lr=self.lr,
                                   patience=self.patience, ema=0.0, min_steps=min_steps)


@dataclass
class OutcomeInputs:
    """What an outcome head reads of every row, computed once from the cache: a training step only indexes it."""

    maps: torch.Tensor  # (n, k, c, h, w) float16: the frozen encoder's maps of the k outcome frames
    share: torch.Tensor  # (n, k) where each frame lies in the continuation (0 the takeover, 1 the last frame)
    since_s: torch.Tensor  # (n, k) seconds since the takeover
    text: torch.Tensor  # (n, text_dim) the instruction's sentence vectors
    target: torch.Tensor  # (n,) the annotators' soft P(success)
    weight: torch.Tensor  # (n,) the row's weight in the loss (``swap_weight`` for a judged swap)
    reached: torch.Tensor | None = None  # (n, k) soft "outcome reached by this frame" (NaN: unknown; the marker)
    alt_text: torch.Tensor | None = None  # (m, text_dim) the sentence vectors of the rows' paraphrases
    alt_rows: list[list[int]] | None = None  # per row: its paraphrases' rows of ``alt_text``
    twin: torch.Tensor | None = None  # (n,) long: the row of the other view of the same rollout, -1: none
    frame_s: torch.Tensor | None = None  # (n, k) each outcome frame's time in its video (seconds)
    marker_s: torch.Tensor | None = None  # (n,) the annotators' marker (NaN: none)

    def logits(self, head: nn.Module, rows: np.ndarray, batch_size: int = 256) -> torch.Tensor:
        """(len(rows),) the head's logit of each row, in eval mode."""
        head.eval()
        with torch.no_grad():
            return torch.cat([self.logit(head, rows[i:i + batch_size]).cpu()
                              for i in range(0, len(rows), batch_size)])

    def logit(self, head: nn.Module, rows: np.ndarray) -> torch.Tensor:
        """(len(rows),) on the head's device: the rows' inputs move there (they stay on the CPU)."""
        r = torch.as_tensor(rows)
        maps, share, since, text = moved(head, self.maps[r], self.share[r], self.since_s[r], self.text[r])
        return head(maps.float(), share, since, text)


def moved(module: nn.Module, *tensors: torch.Tensor) -> list[torch.Tensor]:
    """``tensors`` on ``module``'s device: the cached inputs stay where they are (the CPU), each batch moves."""
    device = module_device(module)
    return [t.to(device) for t in tensors]


REWIND_MARGIN_S = 1.0  # a rewound clip keeps the outcome frames this long before the marker (the annotators mark
#                        0-0.8 s after the event): frames that surely do not show the success yet


def reached_targets(p_success: np.ndarray, marker_s: np.ndarray, frame_s: torch.Tensor) -> torch.Tensor:
    """(n, k) whether the outcome is reached by each frame: P(success) where the marker lies at or before the frame, 0
    before it; a failure's (P < 0.5) frames 0 when its marker is unknown, a success's NaN (not trained).

    Args:
        p_success: (n,) soft labels; marker_s: (n,) seconds (NaN: none); frame_s: (n, k) each frame's time."""
    p = torch.as_tensor(p_success, dtype=torch.float32)[:, None]
    m = torch.as_tensor(marker_s, dtype=torch.float32)[:, None]
    out = p * (frame_s >= m).float()
    unknown = torch.where(p < 0.5, torch.zeros_like(p), torch.full_like(p, float("nan")))
    return torch.where(torch.isfinite(m), out, unknown.expand_as(out))


def rewound_frames(frame_s: torch.Tensor, marker_s: torch.Tensor, k: int) -> list | None:
    """The frame order of a success's clip rewound (ReWiND): its frames at least ``REWIND_MARGIN_S`` before the marker
    played forward to the furthest of them over ``k - 1`` slots, then back a step in the last (so the last frame shows
    the task less done than before): None when fewer than two frames precede the success (nothing to rewind)."""
    if not bool(torch.isfinite(marker_s)):
        return None
    before = [j for j in range(k) if float(frame_s[j]) <= float(marker_s) - REWIND_MARGIN_S]
    if len(before) < 2:
        return None
    forward = [before[int(round(x))] for x in np.linspace(0, len(before) - 1, k - 1)]
    return forward + [before[-2]]


def outcome_inputs(path: nn.Module, data: TrainingData, recipe: OutcomeRecipe) -> OutcomeInputs:
    """The outcome heads' inputs of every row of ``data`` (whose cache holds the frozen encoder's maps of the outcome
    path ``path``); with the recipe's options, the per-frame targets, the paraphrases' sentence vectors and each row's
    other view."""
    if not path.encoder.frozen:
        raise ValueError("the parts train apart on the cached maps of a frozen outcome encoder (fix: outcome.blocks "
                         "0, or train_config parts_apart false to train the encoder's top blocks jointly)")
    maps, index = inputs_of(data.clips.encoded)
    ex, times = data.ex, data.clips.times_s
    takeover = torch.tensor(ex.takeover_s, dtype=torch.float32)
    share, since = outcome_times(times, takeover, index)
    words = [path.text(ex.instructions[i:i + 512]).cpu() for i in range(0, len(ex), 512)]
    swapped = ex.swapped or [False] * len(ex)
    inputs = OutcomeInputs(maps=maps, share=share, since_s=since, text=torch.cat(words).float(),
                           target=torch.tensor(ex.p_success, dtype=torch.float32),
                           weight=torch.tensor([recipe.swap_weight if s else 1.0 for s in swapped]))
    if recipe.reached or recipe.rewind:
        frame_s = times.gather(1, index.long()).float()
        inputs.reached = reached_targets(np.array(ex.p_success), np.array(ex.marker_s, dtype=float), frame_s)
        inputs.frame_s, inputs.marker_s = frame_s, torch.tensor(ex.marker_s, dtype=torch.float32)
    if recipe.paraphrases and any(ex.paraphrases):
        texts = sorted({w for words_of_row in ex.paraphrases for w in words_of_row})
        at = {w: i for i, w in enumerate(texts)}
        inputs.alt_text = torch.cat([path.text(texts[i:i + 512]).cpu()
                                     for i in range(0, len(texts), 512)]).float()
        inputs.alt_rows = [[at[w] for w in words_of_row] for words_of_row in ex.paraphrases]
    if recipe.consistency and any(t is not None for t in ex.twins or []):
        row_of = {f"{si}/{cid}": i for i, (si, cid) in enumerate(zip(ex.suite_index, ex.continuation_ids))}
        inputs.twin = torch.tensor([row_of.get(t, -1) if t else -1 for t in ex.twins], dtype=torch.long)
    return inputs


class OutcomeHeadPart:
    """One outcome head alone on the cached inputs (:class:`OutcomeInputs`), for :func:`fit`: its loss on a batch of
    rows (with the recipe's options: paraphrased instructions, rewound successes, the per-frame target, the agreement
    of two views of one rollout), validation balanced accuracy and loss on the held-out rows."""

    def __init__(self, head: nn.Module, inputs: OutcomeInputs, val_rows: np.ndarray,
                 recipe: OutcomeRecipe | None = None, train_rows: Sequence[int] | None = None):
        self.module, self.inputs, self.val_rows = head, inputs, val_rows
        self.recipe = recipe or OutcomeRecipe()
        # the rows a row's other view may come from (the training rows; None: no view agrees with another)
        self.train_rows: set[int] | None = None if train_rows is None else set(np.asarray(train_rows).tolist())

    def param_groups(self) -> list[dict]:
        return [{"params": list(self.module.parameters())}]

    def loss(self, rows: np.ndarray, rng: np.random.Generator) -> tuple[torch.Tensor, dict]:
        inputs, recipe, r = self.inputs, self.recipe, torch.as_tensor(rows)
        maps, share, since = inputs.maps[r], inputs.share[r], inputs.since_s[r]
        text, target, weight = self._words(rows, rng), inputs.target[r], inputs.weight[r]
        if recipe.rewind:
            maps, share, since, text, target, weight = self._rewound(rows, rng, maps, share, since, text, target,
                                                                     weight)
        maps, share, since, text, target, weight = moved(self.module, maps, share, since, text, target, weight)
        maps = maps.float()  # float16 travels, float32 computes
        named = {}
        if recipe.reached:
            logit, per_frame = self.module(maps, share, since, text, per_frame=True)
            y = inputs.reached[r].to(logit.device)
            known = torch.isfinite(y)
            named["reached"] = (F.binary_cross_entropy_with_logits(per_frame[:len(rows)][known], y[known])
                                if known.any() else logit.sum() * 0.0)
        else:
            logit = self.module(maps, share, since, text)
        loss = outcome_loss(logit, target, weight) + recipe.reached * named.get("reached", 0.0)
        if recipe.consistency and inputs.twin is not None:
            named["consistency"] = self._disagreement(rows, logit[:len(rows)], rng)
            loss = loss + recipe.consistency * named["consistency"]
        return loss, {k: v.detach() for k, v in named.items()}

    def _words(self, rows: np.ndarray, rng: np.random.Generator) -> torch.Tensor:
        """The rows' sentence vectors, a ``paraphrases`` share of them another wording of their task."""
        inputs, share = self.inputs, self.recipe.paraphrases
        text = inputs.text[torch.as_tensor(rows)]
        if not share or inputs.alt_rows is None:
            return text
        text = text.clone()
        for i, row in enumerate(rows):
            alts = inputs.alt_rows[row]
            if alts and rng.random() < share:
                text[i] = inputs.alt_text[alts[rng.integers(len(alts))]]
        return text

    def _rewound(self, rows, rng, maps, share, since, text, target, weight):
        """The batch and, for a ``rewind`` share of its success rows, the same clip rewound (:func:`rewound_frames`)
        as a failure of full weight."""
        inputs, k, extra = self.inputs, maps.shape[1], []
        for i, row in enumerate(rows):
            if float(inputs.target[row]) > 0.5 and rng.random() < self.recipe.rewind:
                order = rewound_frames(inputs.frame_s[row], inputs.marker_s[row], k)
                if order is not None:
                    extra.append((i, order))
        if not extra:
            return maps, share, since, text, target, weight
        at = torch.tensor([i for i, _ in extra])
        back = torch.stack([maps[i, order] for i, order in extra])
        return (torch.cat([maps, back]), torch.cat([share, share[at]]), torch.cat([since, since[at]]),
                torch.cat([text, text[at]]), torch.cat([target, torch.zeros(len(extra))]),
                torch.cat([weight, torch.ones(len(extra))]))

    def _disagreement(self, rows: np.ndarray, logit: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
        """Mean squared difference of P(success) between each row with another view among the training rows and that
        view (the same rollout from another camera, under its own instruction)."""
        if self.train_rows is None:
            return logit.sum() * 0.0
        twins = self.inputs.twin[torch.as_tensor(rows)]
        mine = (twins >= 0) & torch.tensor([int(t) in self.train_rows for t in twins.tolist()])
        if not mine.any():
            return logit.sum() * 0.0
        other = twins[mine]
        maps, share, since, text = moved(self.module, self.inputs.maps[other], self.inputs.share[other],
                                        self.inputs.since_s[other], self._words(other.numpy(), rng))
        z = self.module(maps.float(), share, since, text)
        return ((torch.sigmoid(logit[mine.to(logit.device)]) - torch.sigmoid(z)) ** 2).mean()

    def epoch_metrics(self) -> dict:
        return {}

    def validate(self) -> dict:
        rows, inputs = self.val_rows, self.inputs
        if not len(rows):
            return {}
        val = inputs.logits(self.module, rows)
        return {"val_balanced_accuracy": balanced_accuracy(val, inputs.target[rows]),
                "val_outcome_loss": float(outcome_loss(val, inputs.target[rows], inputs.weight[rows]))}


def fit_outcome_head(head: nn.Module, inputs: OutcomeInputs, train_rows: np.ndarray, val_rows: np.ndarray,
                     recipe: OutcomeRecipe, schedule: Schedule, seed: int,
                     log: Callable[[int, dict], None] | None = None, progress: str = "") -> list[dict]:
    """Train ``head`` alone on ``inputs``' ``train_rows`` along ``schedule`` (:meth:`OutcomeRecipe.schedule`:
    ``steps`` in whole epochs, stopped after ``patience`` epochs without a better validation balanced accuracy, never
    before ``min_steps`` steps), the best epoch's weights put back (of a tie, the later); returns the curve (one dict
    per epoch). The data order draws from ``seed``."""
    part = OutcomeHeadPart(head, inputs, val_rows, recipe, train_rows)
    return fit(part, train_rows, schedule, np.random.default_rng(seed), log=log, progress=progress).history


def outcome_targets(data: TrainingData, batch: Batch, recipe: OutcomeRecipe) -> dict:
    """The outcome path's ``Targets`` fields of a joint batch: each row's weight in its loss (``swap_weight`` for a
    judged swap) and the weight of the loss and of its rows under another task's words."""
    swapped = data.ex.swapped
    return {"row_weight": torch.tensor([recipe.swap_weight if swapped and swapped[i] else 1.0
                                        for i in batch.rows.tolist()]),
            "outcome_weights": (recipe.weight, recipe.negatives)}


def heads_verdict(curves: Sequence[Sequence[dict]], budget_epochs: int) -> str:
    """One line for the outcome heads: how many are still rising at the budget's end, or where each converged."""
    rising = sum(convergence_verdict(c, budget_epochs).startswith("still rising") for c in curves)
    if rising:
        return f"{rising} of {len(curves)} still rising at the budget's end ({budget_epochs} epochs): raise the budget"
    best = [max(c, key=_ba) for c in curves]
    return (f"converged at epoch{'s' if len(best) > 1 else ''} {', '.join(str(b['epoch']) for b in best)} of "
            f"{budget_epochs} (validation BA {min(map(_ba, best)):.3f}-{max(map(_ba, best)):.3f})")


def _ba(metrics: dict) -> float:
    return metrics["val_balanced_accuracy"]


@dataclass
class OutcomeStage(PartStage):
    """The outcome path's stage: its heads alone (:meth:`run`), or its loss's weights in the joint step."""

    name = "outcome"
    recipe: OutcomeRecipe

    def alone(self) -> bool:
        return True

    def run(self, run: Run) -> StageResult:
        """``members`` fresh heads, head i drawn and trained from seed ``run.seed + 1000 i`` (head 0 is the same
        whatever the number of members), each alone (:func:`fit_outcome_head`), then put into the path."""
        started, path, recipe = time.time(), run.part(self.part), self.recipe
        inputs = outcome_inputs(path, run.data, recipe)
        schedule = recipe.schedule(run.schedule, len(run.train_rows), run.min_steps)
        heads, curves = [], []
        for i in range(path.config.members):
            seed = run.seed + 1000 * i
            with seeded(seed):
                head = path.make_head().to(module_device(path))  # drawn on the CPU: the same on any device
                curves.append(fit_outcome_head(head, inputs, run.train_rows, run.val_rows, recipe, schedule, seed,
                                               prefixed(run.log, f"outcome{i}_"),
                                               progress=f"outcome head {i + 1}" if run.progress else ""))
            heads.append(head)
        path.set_heads(heads)
        return StageResult(history=[{"part": f"outcome{i}", **m} for i, c in enumerate(curves) for m in c],
                           best={"outcome_epochs": [max(c, key=_ba)["epoch"] for c in curves],
                                 "outcome_val_balanced_accuracy": [max(c, key=_ba)["val_balanced_accuracy"]
                                                                   for c in curves],
                                 "outcome_wall_s": round(time.time() - started, 1)},
                           verdict=heads_verdict(curves, schedule.epochs)).title("outcome heads")

    def targets(self, data: TrainingData, batch: Batch) -> dict:
        return outcome_targets(data, batch, self.recipe)

    def joint_notes(self) -> list[str]:
        on = [f"outcome.{f.name}" for f in dataclasses.fields(self.recipe)
              if f.metadata.get("alone") and getattr(self.recipe, f.name)]
        if not on:
            return []
        return [f"{', '.join(on)} off: the outcome heads' options train them alone (parts_apart, the general-parts "
                f"preset); this run trains its parts jointly"]


__all__ = ["ALONE", "REWIND_MARGIN_S", "OutcomeHeadPart", "OutcomeInputs", "OutcomeRecipe", "OutcomeStage",
           "fit_outcome_head", "heads_verdict", "moved", "outcome_inputs", "outcome_targets", "reached_targets",
           "rewound_frames"]
