"""autorater: a video-language model that says whether an agent succeeded at its instruction, and when."""

from autorater.config import PRESETS, AutoraterConfig
from autorater.model import Autorater, AutoraterOutput, Targets

__all__ = ["Autorater", "AutoraterConfig", "AutoraterOutput", "PRESETS", "Targets"]
