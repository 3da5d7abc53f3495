"""A training run as a plan of stages, built from the parts the model names (``Autorater.parts``: each part's class
says which stage trains it, ``ModelPart.stage``), and run in order.

::

    every part together (the default; any fine-tuning start)
        joint      each part's warm-up (the event stream: its instruction match), then every part in one step
    the parts apart (TrainConfig.parts_apart, a part that can train alone: the general-parts preset)
        outcome    the outcome path's heads alone, on their cached maps
        joint      the rest (the event stream, with its warm-up) on a model without them
        gate       the join: the stream's logit weighed against the heads' on the held-out rows

A stage (``training/stages/``) holds its part, its recipe (its field of ``TrainConfig``) and its options; the plan
knows the parts only by the stages their classes name (:data:`STAGES`), never by their class, and a run never calls
itself.

Example:
    >>> from autorater.models import AutoModel, PRESETS
    >>> from autorater.training.recipe import recipe_for
    >>> config = PRESETS["tiny-general"]
    >>> [stage.name for stage in plan(AutoModel.from_config(config), recipe_for(config))]
    ['outcome', 'joint', 'gate']
    >>> [stage.name for stage in plan(AutoModel.from_config(config), recipe_for(config, parts_apart=False))]
    ['joint']
"""

from __future__ import annotations

from typing import Protocol

from autorater.model import Autorater
from autorater.training.recipe import TrainConfig
from autorater.training.stages.base import PartStage, Run, StageResult
from autorater.training.stages.gate import GateStage
from autorater.training.stages.joint import JointStage
from autorater.training.stages.outcome import OutcomeStage
from autorater.training.stages.stream import StreamStage

# A part's stage by the name its class gives (``ModelPart.stage``), which is also its recipe's field of TrainConfig
STAGES: dict[str, type[PartStage]] = {stage.name: stage for stage in (StreamStage, OutcomeStage)}


class Stage(Protocol):
    """What a plan runs: a named stage that trains (part of) the run's model and says what it did."""

    name: str

    def run(self, run: Run) -> StageResult: ...


def part_stages(model: Autorater, tc: TrainConfig) -> list[PartStage]:
    """The stage of each part of ``model`` (the one its class names), holding its recipe (``tc``'s field of that
    name), in the model's order."""
    stages = []
    for name, part in model.parts().items():
        if part.stage not in STAGES:
            raise ValueError(f"part {name!r} ({type(part).__name__}) names stage {part.stage!r}, which no stage "
                             f"registers (known: {', '.join(STAGES)}; fix: register its stage in "
                             f"autorater.training.plan.STAGES)")
        stages.append(STAGES[part.stage](getattr(tc, part.stage), name))
    return stages


def plan(model: Autorater, tc: TrainConfig, init_state: dict | None = None) -> list[Stage]:
    """The stages of a run of ``model`` under ``tc`` (module docstring): the parts apart when the recipe asks for it
    and a part can train alone (never from starting weights: ``init_state`` or ``tc.init_from``), else one joint
    step."""
    stages = part_stages(model, tc)
    fine_tuning = init_state is not None or bool(tc.init_from)
    alone = [stage for stage in stages if stage.alone()] if tc.parts_apart and not fine_tuning else []
    if not alone:
        return [JointStage(tc, stages, init_state)]
    rest = [stage for stage in stages if stage not in alone]
    joint = JointStage(tc, rest, init_state, without=tuple(stage.part for stage in alone))
    return [*alone, joint, *([GateStage(tc.gate)] if model.join() is not None else [])]


def run_plan(stages: list[Stage], run: Run) -> StageResult:
    """Run ``stages`` in order on ``run`` (each sees the results before it in ``run.results``): one stage's result as
    it is; several stages' joined (curves one after the other, best metrics merged, verdicts joined by ``|``, the
    recipe as the joint step ran it)."""
    results = []
    for stage in stages:
        results.append(stage.run(run))
        run.results[stage.name] = results[-1]
    if len(results) == 1:
        return results[0]
    return StageResult(history=[h for r in results for h in r.history],
                       best={k: v for r in results for k, v in r.best.items()},
                       verdict=" | ".join(r.verdict for r in results), notes=[n for r in results for n in r.notes],
                       recipe=next((r.recipe for r in reversed(results) if r.recipe is not None), None))


__all__ = ["STAGES", "Stage", "part_stages", "plan", "run_plan"]
