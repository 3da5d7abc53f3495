"""A hand-made suite (tests/tiny_suites.py), a tiny seeded model and a calibration, for the hardening and service
fuzzing tests (not a test module). No generator: fast, and independent of the worlds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import torch

from autorater.calibration import CalibrationRecord
from autorater.data.suite import Annotation, Suite
from autorater.models import PRESETS, AutoModel
from autorater.serving.labelstudio.formats import annotations_to_export, marker_region
from tiny_suites import FPS, N_FRAMES, tiny_suite


def make_hardening_env(root: Path) -> dict:
    """``suite`` (tiny_suite under ``root/media/suite``), ``model`` (tiny, calibrated), ``media`` (the media root)."""
    media = root / "media"
    suite = tiny_suite(media / "suite")
    torch.manual_seed(0)
    model_dir = AutoModel.from_config(PRESETS["tiny"]).save_pretrained(root / "model")
    CalibrationRecord(temperature=1.0, target_agreement=0.95, confidence=0.9, t_success=0.5, t_fail=0.5, bound=0.951,
                      expected_coverage=0.5, n_references=300, feasible=True, reference_suite="tiny",
                      reference_suite_version="v1", score_quantiles=np.linspace(-2, 2, 101).tolist(),
                      score_count=300).to_json(model_dir / "calibration.json")
    return {"root": root, "media": media, "suite": suite, "model": Path(model_dir)}


def make_pool(env: dict, root: Path, **app_kwargs) -> dict:
    """A fresh copy of the env's suite under ``root/media``, and a client whose webhook writes to it: ``suite``,
    ``media``, ``client`` (a TestClient that answers a server error as 500 instead of raising it)."""
    from fastapi.testclient import TestClient

    from autorater.serving.service.app import create_app

    media = Path(root) / "media"
    shutil.copytree(env["suite"].root, media / "suite")
    suite = Suite.load(media / "suite")
    app = create_app(env["model"], media, suite=suite.root, **{"timeout_s": 30, **app_kwargs})
    return {"suite": suite, "media": media, "client": TestClient(app, raise_server_exceptions=False)}


def task_of(suite: Suite, cid: str, task_id: int = 1) -> dict:
    """A Label Studio task as ``autorater label`` writes it (the media root holds the suite folder)."""
    c = suite.get(cid)
    return {"id": task_id, "data": {"continuation_id": cid, "video": f"suite/{c.video}",
                                    "instruction": suite.instruction_of(cid), "fps": FPS, "frames": N_FRAMES}}


def webhook_payload(suite: Suite, cid: str, outcome: str = "success", marker_s: float = 0.5, annotator: str = "h9",
                    ann_id: int = 1, updated_at: str = "2026-11-23T12:00:00.000000Z",
                    action: str = "ANNOTATION_CREATED") -> dict:
    """What Label Studio posts when an annotation is created or updated."""
    task = task_of(suite, cid)
    (exported,) = annotations_to_export([task], [Annotation(cid, annotator, outcome, marker_s=marker_s)],
                                        start_id=ann_id)
    ann = exported["annotations"][0]
    ann["updated_at"] = updated_at
    return {"action": action, "annotation": ann, "task": task, "project": {"id": 1}}


def region(outcome: str, marker_s: float) -> dict:
    return marker_region(outcome, marker_s, FPS, N_FRAMES, "r1")


def suite_rows(suite_root: Path) -> list[dict]:
    path = Path(suite_root) / "annotations.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []
