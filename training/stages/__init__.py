"""The stages a training run is assembled from (``autorater.training.plan``): each module holds one stage's part for
the loop, its recipe and its options."""

from autorater._lazy import lazy_exports

_HOMES = {
    "autorater.training.stages.outcome": ["OutcomeHeadPart", "OutcomeInputs", "fit_gate", "train_parts"],
}
__all__, __getattr__ = lazy_exports(__name__, _HOMES)
