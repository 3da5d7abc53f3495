"""autorater: a video-language model that says whether an agent succeeded at its instruction, and when.

The layers install under this one namespace: ``autorater.data`` (suites, video, labels, the generator),
``autorater.calibration``, the model here (``autorater.model``, ``autorater.models``, ``autorater.rater``),
``autorater.training``, ``autorater.serving``, and the CLI (``autorater.app.cli``) above them. Every name below is
imported on first use (PEP 562), so ``import autorater.data`` or ``autorater.calibration`` stays free of torch.
"""

from autorater._lazy import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, {
    "autorater.config": ["AutoraterConfig"],
    "autorater.model": ["Autorater", "AutoraterOutput", "Targets"],
    "autorater.models": ["PRESETS", "AutoConfig", "AutoModel"],
    "autorater.predict": ["ClipInput", "load_clip", "predict_batch"],
    "autorater.rater": ["Decoded", "Predictions", "Rater", "model_name", "read_calibration", "read_metadata",
                        "update_metadata"],
    "autorater.mlflow_registry": ["champion_model_dir", "default_tracking_uri", "promote", "resolve_model_arg"],
})
