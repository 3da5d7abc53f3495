"""``autorater demo``: the main job end to end on embedded defaults (local files, SQLite, nothing to start).

Steps: generate a training suite and a new suite version (synthetic BabyAI STS), describe them,
train the autorater (tracked in MLflow, registered), calibrate it on reference episodes (temperature,
selective policy, agreement with the annotators), and evaluate it on the new version against the
simulator truth beside the human annotators and a baseline.
"""

from __future__ import annotations

import json
import time
from pathlib import Path


def _step(title: str) -> float:
    print(f"\n=== {title}", flush=True)
    return time.time()


def run_demo(out: Path, quick: bool = False) -> int:
    import torch

    from data.generate import generate_suite
    from data.stats import format_stats, suite_stats
    from data.suite import Suite
    from training.baselines import predict_cached, predict_majority, train_majority
    from training.evaluate import evaluate, format_report
    from training.tracking import default_tracking_uri, track_training
    from training.train import TrainConfig
    from autorater.config import PRESETS
    from serving.calibrate import calibrate_model, format_calibration

    torch.set_num_threads(2)
    out.mkdir(parents=True, exist_ok=True)
    n_train, n_new = (60, 30) if quick else (200, 60)
    started = time.time()

    t = _step(f"1. generate a training suite ({n_train} scenarios) and a new suite version ({n_new} scenarios)")
    train_dir, new_dir = out / "suite-train", out / "suite-v2"
    for path, scenarios, seed, version in ((train_dir, n_train, 1, "v1"), (new_dir, n_new, 2, "v2")):
        if not (path / "suite.json").exists():
            generate_suite(path, scenarios=scenarios, continuations_per_scenario=2, seed=seed, version=version)
    train_suite, new_suite = Suite.load(train_dir), Suite.load(new_dir)
    print(format_stats(suite_stats(train_suite)))
    print(f"({time.time() - t:.0f} s)")

    t = _step("2. train the autorater on the training suite's annotations (MLflow: "
              f"{default_tracking_uri(out / 'runs')})")
    tc = TrainConfig(cache_dir=str(out / "cache"), epochs=8 if quick else 20)
    model_dir = out / "model"
    result, run_id, version = track_training(default_tracking_uri(out / "runs"), "autorater-demo", "demo",
                                             PRESETS["base"], tc, [train_suite], out=model_dir, progress=True)
    print(f"best validation balanced accuracy {result.best['val_balanced_accuracy']:.3f} at epoch "
          f"{result.best['epoch']}; registered as autorater version {version} ({time.time() - t:.0f} s)")

    t = _step("3. calibrate on the training suite's reference episodes (never trained on): temperature, "
              "the selective policy, the agreement table")
    calib = calibrate_model(model_dir, train_suite, out / "calibration-report")
    print(format_calibration(calib, per_category=False))
    print(f"({time.time() - t:.0f} s)")

    t = _step("4. evaluate on the new suite version, against the simulator truth, beside the annotators")
    rows = predict_cached(result.model, new_suite, tc.cache_dir, name=f"autorater@{version}",
                          temperature=calib.record.temperature)
    majority = predict_majority(train_majority([train_suite], tc), new_suite)
    report = evaluate(new_suite, {"autorater": rows, "majority_baseline": majority}, gold="truth")
    print(format_report(report))
    (out / "evaluation.json").write_text(json.dumps(report, indent=1, default=float) + "\n")
    print(f"({time.time() - t:.0f} s)")

    print(f"\ndemo finished in {time.time() - started:.0f} s; everything is under {out}/")
    return 0
