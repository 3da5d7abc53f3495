"""autorater: a video-language model that says whether an agent succeeded at its instruction, and when.

The prediction functions (``autorater.predict``) and the MLflow store and model registry
(``autorater.registry``) are imported on first use (PEP 562).
"""

from autorater.config import AutoraterConfig
from autorater.model import Autorater, AutoraterOutput, Targets
from autorater.models import PRESETS
from data.lazy import lazy_exports

_predict, __getattr__ = lazy_exports(__name__, {
    "autorater.predict": ["ClipInput", "load_clip", "predict_batch"],
    "autorater.rater": ["Decoded", "Predictions", "Rater", "model_name", "read_calibration", "read_metadata",
                        "update_metadata"],
    "autorater.registry": ["champion_model_dir", "default_tracking_uri", "promote", "resolve_model_arg"],
})

__all__ = ["Autorater", "AutoraterConfig", "AutoraterOutput", "PRESETS", "Targets", *_predict]
