"""Simple baselines, trained and scored on the same data as the autorater (docs/design.md section 4).

- ``majority``: always the training set's majority outcome (and its median marker).
- ``last_frame``: the autorater's architecture shown only the last frame (does the end reveal the outcome?).
- ``instruction_blind``: the autorater with the instruction removed (does it read the instruction?).
- ``barcode``: each frame averaged over its width into one column, the columns stacked into one
  image, a small CNN on it (the Navigation Turing Test's "bar code" model); no instruction.

Every baseline returns SUITE_FORMAT-like prediction rows via ``predict``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from autorater.config import AutoraterConfig
from autorater.data.suite import Suite
from autorater.model import Autorater
from autorater.models import AutoConfig, AutoModel
from autorater.training.inputs.batches import TrainingData, prepare
from autorater.training.inputs.cache import CachedClips, FeatureCache, rate_clips
from autorater.training.inputs.dataset import build_examples
from autorater.training.loop import Schedule, fit
from autorater.training.recipe import TrainConfig
from autorater.training.train import train


def predict_cached(model: Autorater, suite: Suite, cache_dir: str, last_frame_only: bool = False,
                   name: str = "autorater", calibration: dict | None = None, batch_size: int = 64) -> list[dict]:
    """Predictions for every continuation of ``suite`` from the feature cache (fast re-scoring), calibrated
    with ``calibration`` (a calibration.json dict: temperature, marker offset) when given."""
    ids = suite.continuation_ids()
    takeovers = [suite.takeover_of(i) for i in ids]
    clips = FeatureCache(cache_dir).load(model, [str(suite.video_path(i)) for i in ids], takeovers_s=takeovers)
    if last_frame_only:
        clips = _last_frame(clips)
    return rate_clips(model, clips, ids, [suite.instruction_of(c) for c in ids], takeovers, name, calibration,
                      batch_size)


def _last_frame(clips: CachedClips) -> CachedClips:
    """Each clip's last frame only (of every per-frame input the model encodes: the last one it reads)."""
    return CachedClips(clips.features[:, -1:], clips.times_s[:, -1:], clips.durations_s, clips.is_frames, clips.errors,
                       encoded={k: v[:, -1:] for k, v in clips.encoded.items()})


# ----------------------------------------------------------------------------------------------


def train_majority(suites: list[Suite], tc: TrainConfig) -> dict:
    ex = build_examples(suites, aggregation=tc.aggregation)
    y = np.array(ex.p_success) > 0.5
    success = bool(y.mean() >= 0.5)
    markers = np.array(ex.marker_s)[y == success]
    return {"outcome": "success" if success else "failure", "marker_s": float(np.nanmedian(markers))}


def predict_majority(state: dict, suite: Suite) -> list[dict]:
    p = 1.0 if state["outcome"] == "success" else 0.0
    return [{"continuation_id": cid, "p_success": p, "outcome": state["outcome"], "marker_s": state["marker_s"],
             "failure_mode": None, "model": "majority"} for cid in suite.continuation_ids()]


def train_last_frame(suites: list[Suite], model_config: AutoraterConfig, tc: TrainConfig, progress: bool = False):
    model, data = prepare(suites, model_config, tc, progress)
    no_marker = torch.full_like(data.marker_index, -1)  # one frame cannot place a marker
    data = TrainingData(data.ex, _last_frame(data.clips), no_marker, data.failure_index)
    return train(suites, model.config, tc, prepared=(model, data), progress=progress).model


def train_instruction_blind(suites: list[Suite], model_config: AutoraterConfig, tc: TrainConfig,
                            progress: bool = False):
    cfg = model_config.replace(use_instruction=False)
    # No instruction pairs at all: a blind model cannot tell another instruction from its own.
    blind = tc.replace(stream={"mismatch_share": 0.0, "match_weight": 0.0, "match_on_successes": False,
                               "success_negatives": False})
    return train(suites, cfg, blind, progress=progress).model


# ----------------------------------------------------------------------------------------------
# Bar code


class BarcodeCNN(nn.Module):
    """(b, t, H, W, 3) uint8 frames -> success logit, from the (H x t) bar-code image."""

    def __init__(self, width: int = 32):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1), nn.GELU(), nn.MaxPool2d(2),
            nn.Conv2d(width, width, 3, padding=1), nn.GELU(), nn.MaxPool2d(2),
            nn.Conv2d(width, width, 3, padding=1), nn.GELU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
            nn.Linear(width, 1))

    @staticmethod
    def barcode(frames: torch.Tensor) -> torch.Tensor:
        return frames.float().div(255).mean(dim=3).permute(0, 3, 2, 1)  # (b, 3, H, t)

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        return self.net(self.barcode(frames)).squeeze(-1)


class BarcodePart:
    """The bar-code CNN on decoded frames, for :func:`fit`: the binary cross-entropy of the soft labels; no
    validation (it trains its whole budget)."""

    def __init__(self, model: BarcodeCNN, frames: torch.Tensor, target: torch.Tensor):
        self.module, self.frames, self.target = model, frames, target

    def param_groups(self) -> list[dict]:
        return [{"params": list(self.module.parameters())}]

    def loss(self, rows: np.ndarray, rng: np.random.Generator) -> tuple[torch.Tensor, dict]:
        rows = torch.as_tensor(rows)
        return F.binary_cross_entropy_with_logits(self.module(self.frames[rows]), self.target[rows]), {}

    def epoch_metrics(self) -> dict:
        return {}

    def validate(self) -> dict:
        return {}


@dataclass
class BarcodeBaseline:
    model: BarcodeCNN
    config: AutoraterConfig  # only image_size / clip_frames matter: which frames to decode


def _frame_config(model_config: AutoraterConfig) -> AutoraterConfig:
    """Decoded frames (a trainable encoder's cache): 32 frames at 64 px, enough for a bar code, small in memory."""
    return AutoConfig.from_dict({"architecture": "events", "encoder": "tiny_cnn", "image_size": 64, "pixel_cells": 0,
                                 "clip_frames": min(32, model_config.clip_frames), "places": 1})  # its cache: frames


@dataclass(frozen=True)
class BarcodeRecipe:
    """How the bar-code CNN trains: its whole budget at a constant step (the recipe's batch size and decay)."""

    epochs: int = 30
    lr: float = 1e-3

    def schedule(self, tc: TrainConfig) -> Schedule:
        return Schedule(epochs=self.epochs, batch_size=tc.batch_size, lr=self.lr, weight_decay=tc.weight_decay,
                        warmup_steps=0, cosine=False, patience=None, clip=None)


def train_barcode(suites: list[Suite], model_config: AutoraterConfig, tc: TrainConfig, epochs: int = 30,
                  progress: bool = False) -> BarcodeBaseline:
    cfg = _frame_config(model_config)
    ex = build_examples(suites, aggregation=tc.aggregation)
    clips = FeatureCache(tc.cache_dir).load(AutoModel.from_config(cfg), ex.video_paths, progress=progress)
    keep = [i for i in range(len(ex)) if i not in clips.errors]
    frames, y = clips.features[keep], torch.tensor(ex.p_success, dtype=torch.float32)[keep]
    torch.manual_seed(tc.seed)
    part = BarcodePart(BarcodeCNN(), frames, y)
    fit(part, np.arange(len(y)), BarcodeRecipe(epochs=epochs).schedule(tc), np.random.default_rng(tc.seed),
        progress="barcode" if progress else "")
    return BarcodeBaseline(part.module.eval(), cfg)


@torch.no_grad()
def predict_barcode(baseline: BarcodeBaseline, suite: Suite, cache_dir: str) -> list[dict]:
    ids = suite.continuation_ids()
    clips = FeatureCache(cache_dir).load(AutoModel.from_config(baseline.config),
                                         [str(suite.video_path(i)) for i in ids])
    p = torch.sigmoid(torch.cat([baseline.model(f) for f in clips.features.split(64)])).numpy()
    return [{"continuation_id": cid, "p_success": float(pi), "outcome": "success" if pi >= 0.5 else "failure",
             "marker_s": float("nan"), "failure_mode": None, "model": "barcode"}
            if i not in clips.errors else {"continuation_id": cid, "error": clips.errors[i]}
            for i, (cid, pi) in enumerate(zip(ids, p))]
