"""The stages a training run is assembled from (``autorater.training.plan``), each module one stage with its part for
the loop, its recipe and its options: ``stream`` (the event stream: its match warm-up, its pairs and targets),
``outcome`` (the outcome path: its heads alone, or its loss's weights), ``gate`` (the join of parts trained apart),
``joint`` (every part in one step, or the rest of a model without the parts trained alone); ``base`` holds what they
share (the run as they see it, a stage's result)."""

from autorater._lazy import lazy_exports

_HOMES = {
    "autorater.training.stages.base": ["PartStage", "Run", "StageResult"],
    "autorater.training.stages.gate": ["GateRecipe", "GateStage", "fit_gate"],
    "autorater.training.stages.joint": ["JointPart", "JointStage"],
    "autorater.training.stages.outcome": ["OutcomeHeadPart", "OutcomeInputs", "OutcomeRecipe", "OutcomeStage"],
    "autorater.training.stages.stream": ["MatchWarmUp", "StreamRecipe", "StreamStage"],
}
__all__, __getattr__ = lazy_exports(__name__, _HOMES)
