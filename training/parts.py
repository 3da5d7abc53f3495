"""The general model's parts trained apart, each on its own cache (issue 49), in the order they depend on each other:

1. the **outcome heads** (``outcome.members`` of them, each from its own seed) alone on the cached frozen maps of the
   outcome frames and the instruction's sentence vectors, computed once (:class:`OutcomeInputs`): a step reads a few
   tensors, so a head trains to convergence in a minute or two on 2 cores where the joint step (every frame of the
   stream beside it) cost 0.3-0.9 s;
2. the **event stream** (every frame, the marker) alone on its stream cache, by the training loop of the event models
   (``autorater.training.train.train`` on the same prepared cache, the outcome path left out);
3. the **gate** that lets the stream's event logit correct the outcome heads', fitted last on the held-out rows, and
   left at 0 unless it pays on the half of those rows it was not fitted on (:func:`fit_gate`).

Every part stops early on validation balanced accuracy within a step budget and says whether it converged
(:func:`autorater.training.train.convergence_verdict`); the validation rows are those of the joint recipe (whole
scenarios, ``TrainConfig.val_share``).

Example:
    >>> config = PRESETS["general"]
    >>> result = train_parts([Suite.load("suite")], config, recipe_for(config), joint=train)  # doctest: +SKIP
    >>> print(result.verdict)                                                                # doctest: +SKIP
    outcome heads: converged at epoch 9 (...); ... | stream: converged at epoch 8 (...) | gate 0.00 (adds -0.004 ...)
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from autorater.calibration import outcome_metrics
from autorater.config import AutoraterConfig
from autorater.data.splits import split_groups
from autorater.data.suite import Suite
from autorater.device import module_device, resolve_device
from autorater.model import Autorater
from autorater.models import AutoModel
from autorater.models.general import GeneralConfig
from autorater.models.parts.outcome import OutcomeHead, inputs_of, outcome_loss, outcome_times, without_inputs
from autorater.training.batches import TrainingData, predict_rows, prepare, seeded
from autorater.training.loop import TrainResult, convergence_verdict, fit, write_model
from autorater.training.recipe import TrainConfig, outcome_epochs

Loop = Callable[..., TrainResult]  # the joint training loop (``autorater.training.train.train``)

# The gates tried (:func:`fit_gate`): up to 2 the stream corrects the heads; beyond, it outweighs them (where the few
# outcome frames do not show the outcome and every frame does, as in BabyAI's first-person video)
GATES = (*np.round(np.linspace(0.0, 2.0, 21), 2).tolist(), 3.0, 4.0, 6.0, 8.0, 16.0)


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

    def logits(self, head: OutcomeHead, rows: np.ndarray, batch_size: int = 256) -> torch.Tensor:
        """(len(rows),) the head's logit of each row, in eval mode."""
        head.eval()
        with torch.no_grad():
            return torch.cat([self.logit(head, rows[i:i + batch_size]).cpu()
                              for i in range(0, len(rows), batch_size)])

    def logit(self, head: OutcomeHead, rows: np.ndarray) -> torch.Tensor:
        """(len(rows),) on the head's device: the rows' inputs move there (they stay on the CPU)."""
        r = torch.as_tensor(rows)
        maps, share, since, text = _moved(head, self.maps[r], self.share[r], self.since_s[r], self.text[r])
        return head(maps.float(), share, since, text)


def _moved(module: torch.nn.Module, *tensors: torch.Tensor) -> list[torch.Tensor]:
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


def outcome_inputs(model: Autorater, data: TrainingData, tc: TrainConfig) -> OutcomeInputs:
    """The outcome heads' inputs of every row of ``data`` (whose cache holds a frozen outcome encoder's maps); with
    the recipe's options, the per-frame targets, the paraphrases' sentence vectors and each row's other view."""
    if not model.outcome.encoder.frozen:
        raise ValueError("the parts train apart on the cached maps of a frozen outcome encoder (fix: outcome.blocks "
                         "0, or train_config parts_apart false to train the encoder's top blocks jointly)")
    maps, index = inputs_of(data.clips.encoded)
    ex, times = data.ex, data.clips.times_s
    takeover = torch.tensor(ex.takeover_s, dtype=torch.float32)
    share, since = outcome_times(times, takeover, index)
    words = [model.outcome.text(ex.instructions[i:i + 512]).cpu() for i in range(0, len(ex), 512)]
    swapped = ex.swapped or [False] * len(ex)
    inputs = OutcomeInputs(maps=maps, share=share, since_s=since, text=torch.cat(words).float(),
                           target=torch.tensor(ex.p_success, dtype=torch.float32),
                           weight=torch.tensor([tc.outcome.swap_weight if s else 1.0 for s in swapped]))
    recipe = tc.outcome
    if recipe.reached or recipe.rewind:
        frame_s = times.gather(1, index.long()).float()
        inputs.reached = reached_targets(np.array(ex.p_success), np.array(ex.marker_s, dtype=float), frame_s)
        inputs.frame_s, inputs.marker_s = frame_s, torch.tensor(ex.marker_s, dtype=torch.float32)
    if recipe.paraphrases and any(ex.paraphrases):
        texts = sorted({w for words_of_row in ex.paraphrases for w in words_of_row})
        at = {w: i for i, w in enumerate(texts)}
        inputs.alt_text = torch.cat([model.outcome.text(texts[i:i + 512]).cpu()
                                     for i in range(0, len(texts), 512)]).float()
        inputs.alt_rows = [[at[w] for w in words_of_row] for words_of_row in ex.paraphrases]
    if recipe.consistency and any(t is not None for t in ex.twins or []):
        row_of = {f"{si}/{cid}": i for i, (si, cid) in enumerate(zip(ex.suite_index, ex.continuation_ids))}
        inputs.twin = torch.tensor([row_of.get(t, -1) if t else -1 for t in ex.twins], dtype=torch.long)
    return inputs


def balanced_accuracy(logits: torch.Tensor, target: torch.Tensor) -> float:
    """Balanced accuracy of ``logits >= 0`` against ``target > 0.5``."""
    return outcome_metrics((target > 0.5).int().numpy(), (logits >= 0).int().numpy())["balanced_accuracy"]


class OutcomeHeadPart:
    """One outcome head alone on the cached inputs (:class:`OutcomeInputs`), for :func:`fit`: its loss on a batch of
    rows (with the recipe's options: paraphrased instructions, rewound successes, the per-frame target, the agreement
    of two views of one rollout), validation balanced accuracy and loss on the held-out rows."""

    def __init__(self, head: OutcomeHead, inputs: OutcomeInputs, val_rows: np.ndarray, recipe=None,
                 train_rows: Sequence[int] | None = None):
        from autorater.training.recipe import OutcomeRecipe

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
        maps, share, since, text, target, weight = _moved(self.module, maps, share, since, text, target, weight)
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
        maps, share, since, text = _moved(self.module, self.inputs.maps[other], self.inputs.share[other],
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


def fit_outcome_head(head: OutcomeHead, inputs: OutcomeInputs, train_rows: np.ndarray, val_rows: np.ndarray,
                     tc: TrainConfig, seed: int, log: Callable[[int, dict], None] | None = None,
                     progress: str = "") -> list[dict]:
    """Train ``head`` alone on ``inputs``' ``train_rows`` along the recipe's outcome schedule (``outcome.steps`` in
    whole epochs, stopped after ``outcome.patience`` epochs without a better validation balanced accuracy, never
    before ``min_steps`` steps), the best epoch's weights put back (of a tie, the later); returns the curve (one dict
    per epoch). The data order draws from ``seed``."""
    part = OutcomeHeadPart(head, inputs, val_rows, tc.outcome, train_rows)
    fitted = fit(part, train_rows, tc.outcome_schedule(len(train_rows)), np.random.default_rng(seed), log=log,
                 progress=progress)
    return fitted.history


def fit_gate(outcome_logit: np.ndarray, event_logit: np.ndarray, target: np.ndarray, groups: Sequence[str],
             grid: Sequence[float] = GATES) -> tuple[float, float]:
    """The gate ``g`` of ``outcome_logit + g * event_logit`` on held-out rows, and what it pays: ``g`` minimises the
    class-balanced log loss over ``grid``; it is fitted on each half of the rows (split by ``groups``, whole
    scenarios) and scored on the other, and kept only if the balanced accuracy it adds there is above 0 on average.

    Returns:
        (gate, gain): the gate fitted on every row, or 0.0 when it does not pay; the mean balanced accuracy it added
        on the half it was not fitted on.
    """
    z_o, z_e = torch.as_tensor(outcome_logit, dtype=torch.float32), torch.as_tensor(event_logit, dtype=torch.float32)
    y = torch.as_tensor(target, dtype=torch.float32)
    ones = torch.ones_like(y)

    def best(rows: torch.Tensor) -> float:
        losses = [float(outcome_loss(z_o[rows] + g * z_e[rows], y[rows], ones[rows])) for g in grid]
        return float(grid[int(np.argmin(losses))])

    names = sorted(set(groups))
    half = torch.tensor([names.index(g) % 2 == 0 for g in groups])
    gains = []
    for fit_on in (half, ~half):
        if fit_on.all() or not fit_on.any():
            continue
        g, other = best(fit_on), ~fit_on
        gains.append(balanced_accuracy(z_o[other] + g * z_e[other], y[other]) -
                     balanced_accuracy(z_o[other], y[other]))
    gain = float(np.mean(gains)) if gains else 0.0
    return (best(torch.ones_like(half)) if gain > 0 else 0.0), gain


def _prefixed(log: Callable[[int, dict], None] | None, prefix: str) -> Callable[[int, dict], None] | None:
    if log is None:
        return None
    return lambda epoch, metrics: log(epoch, {f"{prefix}{k}": v for k, v in metrics.items() if k != "epoch"})


def stream_config(config: GeneralConfig) -> GeneralConfig:
    """The general model's config with no outcome path: its event stream alone."""
    return config.replace(outcome=dataclasses.replace(config.outcome, frames=0))


def stream_data(data: TrainingData) -> TrainingData:
    """``data`` without the outcome path's cached maps (what the stream alone reads)."""
    clips = dataclasses.replace(data.clips, encoded=without_inputs(data.clips.encoded))
    return dataclasses.replace(data, clips=clips)


def train_stream(source, model: Autorater, data: TrainingData, tc: TrainConfig, joint: Loop,
                 log: Callable[[int, dict], None] | None = None, progress: bool = False,
                 should_stop: Callable[[int, dict], bool] | None = None) -> TrainResult:
    """The event stream alone on its cache (``data`` without the outcome maps): ``joint``, the event models' training
    loop, on ``model``'s config with no outcome path."""
    return joint(source, stream_config(model.config), dataclasses.replace(tc, parts_apart=False),
                 log=_prefixed(log, "stream_"), progress=progress, prepared=(model, stream_data(data)),
                 should_stop=should_stop)


def train_outcome_heads(model: Autorater, data: TrainingData, train_rows: np.ndarray, val_rows: np.ndarray,
                        tc: TrainConfig, log: Callable[[int, dict], None] | None = None,
                        progress: bool = False) -> list[list[dict]]:
    """``outcome.members`` fresh heads, head i drawn and trained from seed ``tc.seed + 1000 i`` (head 0 is the same
    whatever the number of members), each alone (:func:`fit_outcome_head`); put into ``model``; their curves."""
    inputs = outcome_inputs(model, data, tc)
    heads, curves = [], []
    for i in range(model.config.outcome.members):
        seed = tc.seed + 1000 * i
        with seeded(seed):
            head = model.outcome.make_head().to(module_device(model))  # drawn on the CPU: the same on any device
            curves.append(fit_outcome_head(head, inputs, train_rows, val_rows, tc, seed,
                                           _prefixed(log, f"outcome{i}_"),
                                           progress=f"outcome head {i + 1}" if progress else ""))
        heads.append(head)
    model.outcome.set_heads(heads)
    return curves


def train_parts(source: Sequence[Suite], model_config: AutoraterConfig, tc: TrainConfig, joint: Loop,
                out: str | Path | None = None, log: Callable[[int, dict], None] | None = None, progress: bool = False,
                prepared: tuple[Autorater, TrainingData] | None = None,
                should_stop: Callable[[int, dict], bool] | None = None) -> TrainResult:
    """The general model with an outcome path, its parts trained apart (module docstring), the stream by ``joint``
    (``autorater.training.train.train``, which calls this one: passed in, not imported); the model folder written to
    ``out``, with each part's curve, verdict and wall time in its metadata."""
    start = time.time()
    with seeded(tc.seed):
        model, data = prepared if prepared is not None else prepare(source, model_config, tc, progress)
        if prepared is not None:  # a fresh model of this config on the same cache (Optuna trials)
            model = AutoModel.from_config(model_config.replace(failure_modes=model.config.failure_modes))
    model.to(resolve_device(tc.device))  # every part trains there; the cached inputs stay on the CPU
    encoded = time.time()
    train_rows, val_rows = split_groups(data.groups or data.ex.scenario_keys, tc.val_share, tc.seed)
    curves = train_outcome_heads(model, data, train_rows, val_rows, tc, log, progress)
    heads_done = time.time()
    stream = train_stream(source, model, data, tc, joint, log, progress, should_stop)
    model.load_state_dict(stream.model.state_dict(), strict=False)  # the event head; the encoders are the same
    stream_done = time.time()
    rows = np.asarray(val_rows)
    with torch.no_grad():
        model.gate.zero_()
    z_out = predict_rows(model, data, rows)["logit"]
    z_event = predict_rows(stream.model, stream_data(data), rows)["logit"]
    target = np.array([data.ex.p_success[r] for r in rows])
    groups = [(data.groups or data.ex.scenario_keys)[r] for r in rows]
    gate, gain = fit_gate(z_out, z_event, target, groups) if tc.outcome.fit_gate else (0.0, 0.0)
    with torch.no_grad():
        model.gate.fill_(gate)
    model.eval()
    verdict = (f"outcome heads: {heads_verdict(curves, outcome_epochs(tc, len(train_rows)))} | stream: "
               f"{stream.verdict} | gate {gate:.2f} (adds {gain:+.3f} BA on held-out halves)")
    final = balanced_accuracy(torch.as_tensor(z_out + gate * z_event), torch.as_tensor(target))
    best = {"val_balanced_accuracy": final, "outcome_epochs": [max(c, key=_ba)["epoch"] for c in curves],
            "outcome_val_balanced_accuracy": [max(c, key=_ba)["val_balanced_accuracy"] for c in curves],
            "outcome_ensemble_val_balanced_accuracy": balanced_accuracy(torch.as_tensor(z_out),
                                                                        torch.as_tensor(target)),
            "epoch": stream.best.get("epoch"),  # the stream's best epoch (each head's: outcome_epochs)
            "stream_epoch": stream.best.get("epoch"),
            "stream_val_balanced_accuracy": stream.best.get("val_balanced_accuracy"),
            "val_marker_median_abs_error_s": stream.best.get("val_marker_median_abs_error_s"),
            "gate": gate, "gate_gain": gain, "encode_wall_s": round(encoded - start, 1),
            "outcome_wall_s": round(heads_done - encoded, 1), "stream_wall_s": round(stream_done - heads_done, 1)}
    result = TrainResult(model=model, history=[{"part": f"outcome{i}", **m} for i, c in enumerate(curves) for m in c]
                         + [{"part": "stream", **m} for m in stream.history], best=best,
                         wall_s=time.time() - start, n_train=len(train_rows), n_val=len(val_rows), verdict=verdict,
                         notes=stream.notes, recipe=tc)
    if out is not None:
        write_model(result, out, tc, data.suite_names)
    return result


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


__all__ = ["GATES", "REWIND_MARGIN_S", "OutcomeHeadPart", "OutcomeInputs", "balanced_accuracy", "fit_gate",
           "fit_outcome_head", "heads_verdict", "outcome_inputs", "reached_targets", "rewound_frames",
           "train_outcome_heads", "train_parts", "train_stream"]
