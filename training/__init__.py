"""Training: examples from suites, the feature cache, the training loop, baselines, evaluation, Optuna, MLflow.

What it offers the layers above (serving and the CLI) is listed in ``__all__``. The names are imported on
first use (PEP 562), so ``import autorater.training`` stays free of torch, MLflow and Optuna. The functions named
like their modules (``train``, ``evaluate``, ``tune``) are imported from those modules:
``from autorater.training.train import train``.
"""

from __future__ import annotations

from autorater._lazy import lazy_exports

_HOMES = {
    "autorater.training.baselines": ["predict_cached"],
    "autorater.training.inputs.cache": ["CachedClips", "FeatureCache"],
    "autorater.training.inputs.dataset": ["Examples", "build_examples", "marker_indices", "suite_examples"],
    "autorater.training.evaluate": ["format_failure_modes", "format_report", "gold_table"],
    "autorater.training.tracking": ["TrackedModel", "TrainingRun", "compare_runs", "format_runs_table",
                                    "log_evaluation", "track_training"],
    "autorater.training.recipe": ["TrainConfig", "load_config", "load_config_file"],
    "autorater.training.train": ["TrainResult"],
    "autorater.training.tune": ["default_storage", "trials_table", "write_best_config"],
}
__all__, __getattr__ = lazy_exports(__name__, _HOMES)
