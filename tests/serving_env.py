"""A small generated suite, a tiny seeded model and a hand-set calibration, for the serving tests (not a test module).

The model is untrained (seeded), which is all routing needs: the calibration's threshold is set
at the median confidence of its own predictions, so about half of the continuations are
auto-labelled and half go to humans, whatever the weights.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import torch

from autorater.calibration import CalibrationRecord
from autorater.data.generate import generate_suite
from autorater.data.suite import Suite, load_truth
from autorater.encoders import tokenize_words
from autorater.models import PRESETS, AutoModel
from autorater.rater import Rater


@contextlib.contextmanager
def torch_threads(n: int):
    """Run with ``n`` intra-op threads (tiny models are faster on one when the 2 cores are shared)."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def make_env(root: Path, scenarios: int = 6, per_scenario: int = 6) -> dict:
    """``suite`` (a new version, generated unlabelled: simulator truth, references labelled by the annotator pool;
    every agent at least once per scenario) and ``model`` (calibrated)."""
    suite_dir = generate_suite(root / "suite", scenarios=scenarios, continuations_per_scenario=per_scenario, seed=7,
                               version="v2", workers=1, image_size=64, annotators=0)
    suite = Suite.load(suite_dir)
    torch.manual_seed(0)
    words = sorted({w for s in suite.scenarios for w in tokenize_words(s.instruction)})  # as training learns them
    modes = sorted({t["failure_mode"] for t in load_truth(suite_dir) if t.get("failure_mode")})
    model = AutoModel.from_config(PRESETS["tiny"].replace(vocab=words, failure_modes=modes))
    model_dir = model.save_pretrained(root / "model")
    p = np.array([r["p_success"] for r in Rater(model).rate_suite(suite)])
    confidence = np.maximum(p, 1 - p)
    set_calibration(model_dir, float(np.median(confidence)), [r for r in np.log(p / (1 - p))])
    return {"root": root, "suite": suite, "model": Path(model_dir)}


def fresh_version(env: dict, where: Path) -> Suite:
    """A copy of the env's version of its own (a test that labels, answers and certifies leaves its human labels and
    its labelling-job ledger in the suite: the next test starts from a version nobody labelled)."""
    import shutil

    shutil.copytree(env["suite"].root, where, ignore=shutil.ignore_patterns(".lock"))
    for leftover in ("labelling_jobs.jsonl", "annotations_history.jsonl", "annotations_history.snapshot.json"):
        (where / leftover).unlink(missing_ok=True)
    return Suite.load(where)


def set_calibration(model_dir: Path, t_success: float, logits, feasible: bool = True) -> CalibrationRecord:
    """A calibration.json with temperature 1 and the symmetric threshold ``t_success`` (as calibrate writes)."""
    logits = np.asarray(logits, dtype=float)
    record = CalibrationRecord(temperature=1.0, target_agreement=0.95, confidence=0.9,
                               t_success=t_success if feasible else None, t_fail=1 - t_success if feasible else None,
                               bound=0.951 if feasible else None, expected_coverage=0.5 if feasible else 0.0,
                               n_references=300, feasible=feasible, reference_suite="babyai-sts",
                               reference_suite_version="v1",
                               score_quantiles=np.quantile(logits, np.linspace(0, 1, 101)).tolist(),
                               score_count=len(logits))
    record.to_json(Path(model_dir) / "calibration.json")
    return record
