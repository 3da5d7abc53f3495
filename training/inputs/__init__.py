"""What training reads, prepared once: the examples and their labels (``dataset``), the feature cache (``cache``),
the batches with their instruction pairs (``batches``), the augmentations they apply
(``augment``), and the portable pack of all of it (``pack``)."""

from autorater._lazy import lazy_exports

_HOMES = {
    "autorater.training.inputs.batches": ["TrainingData", "make_batch", "predict_rows", "prepare", "seeded"],
    "autorater.training.inputs.cache": ["CachedClips", "FeatureCache"],
    "autorater.training.inputs.dataset": ["Examples", "build_examples", "marker_indices", "suite_examples"],
    "autorater.training.inputs.pack": ["Pack", "write_pack"],
}
__all__, __getattr__ = lazy_exports(__name__, _HOMES)
