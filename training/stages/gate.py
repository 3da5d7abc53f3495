"""The join: the gate that lets the event stream's logit correct the parts trained alone (the outcome path's heads),
fitted last on the held-out rows and left at 0 unless it pays on the half of those rows it was not fitted on.

The model's P(success) logit is the outcome path's plus ``gate`` x the stream's (``Autorater.join``: the general
model's ``gate``). Its recipe (``TrainConfig.gate``, :class:`GateRecipe`): whether to fit it at all.

Example:
    >>> import numpy as np
    >>> y = np.array([1.0, 0.0] * 20)
    >>> gate, gain = fit_gate(np.zeros(40), np.where(y > 0, 2.0, -2.0), y, [f"s{i // 2}" for i in range(40)])
    >>> gate > 0 and gain > 0
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Sequence

import numpy as np
import torch

from autorater.models.parts.outcome import outcome_loss
from autorater.training.inputs.batches import predict_rows
from autorater.training.stages.base import Run, StageResult, balanced_accuracy

# The gates tried (:func:`fit_gate`): up to 2 the stream corrects the heads; beyond, it outweighs them (where the few
# outcome frames do not show the outcome and every frame does, as in BabyAI's first-person video)
GATES = (*np.round(np.linspace(0.0, 2.0, 21), 2).tolist(), 3.0, 4.0, 6.0, 8.0, 16.0)


@dataclass
class GateRecipe:
    """The join's recipe (``TrainConfig.gate``)."""

    ranges: ClassVar[dict[str, tuple[float, float]]] = {}

    fit: bool = True  # fit the gate on held-out rows (kept only where it pays); False: 0


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


@dataclass
class GateStage:
    """The join of a run whose parts trained apart: the model's logit with the gate at 0 (the parts trained alone)
    and the joint step's model's (the rest: ``run.results["joint"]``) on the held-out rows, the gate fitted between
    them (:func:`fit_gate`) and set in the model."""

    recipe: GateRecipe
    name = "gate"

    def run(self, run: Run) -> StageResult:
        model, rest, rows = run.model, run.results["joint"], np.asarray(run.val_rows)
        gate_weight = model.join()
        with torch.no_grad():
            gate_weight.zero_()
        z_out = predict_rows(model, run.data, rows)["logit"]
        z_rest = predict_rows(rest.model, rest.data, rows)["logit"]
        target = np.array([run.data.ex.p_success[r] for r in rows])
        groups = [(run.data.groups or run.data.ex.scenario_keys)[r] for r in rows]
        gate, gain = fit_gate(z_out, z_rest, target, groups) if self.recipe.fit else (0.0, 0.0)
        with torch.no_grad():
            gate_weight.fill_(gate)
        model.eval()
        final = balanced_accuracy(torch.as_tensor(z_out + gate * z_rest), torch.as_tensor(target))
        return StageResult(best={"val_balanced_accuracy": final, "gate": gate, "gate_gain": gain,
                                 "outcome_ensemble_val_balanced_accuracy": balanced_accuracy(
                                     torch.as_tensor(z_out), torch.as_tensor(target))},
                           verdict=f"gate {gate:.2f} (adds {gain:+.3f} BA on held-out halves)")


__all__ = ["GATES", "GateRecipe", "GateStage", "fit_gate"]
