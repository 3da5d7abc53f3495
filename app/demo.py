"""``autorater demo``: the main job end to end on embedded defaults (local files, SQLite, nothing to start).

Steps: generate a training suite, a suite of gold reference episodes and a new suite version
(synthetic STS on BabyAI, or on Meta-World with ``world="metaworld"``), describe them, train the autorater
(tracked in MLflow, registered, promoted to champion), calibrate it on the reference episodes (temperature,
selective policy, agreement with the annotators), label the new version
(auto-labels plus a human queue and an audit slice in Label Studio's format), let the simulated
annotators answer the queue (a Label Studio export), ingest their labels, print the agent
leaderboard with its intervals, and evaluate the model on the new version against the simulator
truth beside the human annotators and a baseline.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from autorater.data.worlds import DEFAULT_WORLD
from autorater.device import DEFAULT_DEVICE


def _step(title: str) -> float:
    print(f"\n=== {title}", flush=True)
    return time.time()


# The agreement the demo promises. Its BabyAI model (1,200 training continuations) agrees with the simulated
# annotators at about 0.92 on its most confident labels of the new version: certifying 0.90 on the version's own audit
# would take more audit labels than the stratum holds (routed as futile after 532 audit labels, 2026-11-28), while
# 0.85 is certified after about 250 (docs/results/2026-11-28-sequential-certify.md).
DEMO_TARGET = 0.85
# The new version is certified as one stratum: an audit pays only where a stratum holds hundreds of provisional
# labels (at 0.90 with 90% confidence, a stratum whose model agrees at 0.94 needs about 250 audit labels), and the
# demo's versions hold 200-1,000 continuations; a version of many thousands keeps the default strata
# (category x camera x new agent). Rounds: the audit goes on until every stratum is certified or routed.
DEMO_STRATA, DEMO_ROUNDS = "none", 15


def run_demo(out: Path, quick: bool = False, world: str = DEFAULT_WORLD, device: str = DEFAULT_DEVICE) -> int:
    """The main job end to end on ``world``'s demo plan (its ``DEMO``: the preset trained, the suites' sizes) in
    ``out``; ``quick``: the plan's small suites and a few epochs (a smoke run)."""
    import torch

    from autorater.data.worlds import load_world

    plan = load_world(world).DEMO
    if plan is None:
        raise ValueError(f"world {world!r} has no demo (its DEMO is None)")
    torch.set_num_threads(2)
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    train_suite, ref_suite, new_suite = _generate(out, world, plan.quick if quick else plan.sizes)
    model_dir, cache_dir = _train(out, plan.preset, train_suite, quick, device)
    _calibrate(out, model_dir, ref_suite, device)
    labels_dir = _label(out, model_dir, new_suite, device, quick)
    _answer_and_certify(out, labels_dir)
    _leaderboard(out, labels_dir)
    _evaluate(out, model_dir, cache_dir, train_suite, new_suite, quick, device)
    print(f"\ndemo finished in {time.time() - started:.0f} s; everything is under {out}/")
    return 0


def _generate(out: Path, world: str, sizes) -> tuple:
    """Step 1: the training, reference and new-version suites (each generated once), described."""
    from autorater.data.generate import generate_suite
    from autorater.data.stats import format_stats, suite_stats
    from autorater.data.suite import Suite

    (n_train, k_train), (n_ref, k_ref), (n_new, k_new) = sizes
    t = _step(f"1. generate {world} suites: a training suite ({n_train} scenarios x {k_train} continuations), a "
              f"reference suite ({n_ref} scenarios x {k_ref}, every continuation a gold reference) and a new suite "
              f"version ({n_new} scenarios x {k_new} continuations: every agent twice per scenario)")
    train_dir, ref_dir, new_dir = out / "suite-train", out / "suite-references", out / "suite-v2"
    # the training suite needs no references of its own: the model is calibrated on the reference suite, and
    # references would be left out of training (wasting 15% of its labelled continuations)
    # the new version arrives unlabelled (annotators 0): only its references carry the annotators' labels
    for path, scenarios, per, seed, version, share, annotators in (
            (train_dir, n_train, k_train, 1, "v1", 0.0, 3), (ref_dir, n_ref, k_ref, 4, "v1-references", 1.0, 3),
            (new_dir, n_new, k_new, 2, "v2", 0.15, 0)):
        if not (path / "suite.json").exists():
            generate_suite(path, world=world, scenarios=scenarios, continuations_per_scenario=per, seed=seed,
                           version=version, reference_share=share, annotators=annotators)
    train_suite, ref_suite, new_suite = Suite.load(train_dir), Suite.load(ref_dir), Suite.load(new_dir)
    print(format_stats(suite_stats(train_suite)))
    print(f"({time.time() - t:.0f} s)")
    return train_suite, ref_suite, new_suite


def _train(out: Path, preset: str, train_suite, quick: bool, device: str) -> tuple[Path, str]:
    """Step 2: the autorater trained on the training suite's annotations, tracked, registered and promoted; its
    folder and feature cache."""
    from autorater.mlflow_registry import default_tracking_uri, promote
    from autorater.models import PRESETS
    from autorater.training.recipe import recipe_for
    from autorater.training.tracking import track_training

    t = _step("2. train the autorater on the training suite's annotations (MLflow: "
              f"{default_tracking_uri(out / 'runs')})")
    tc = recipe_for(PRESETS[preset], cache_dir=str(out / "cache"), device=device,
                    **({"epochs": 4, "stream": {"match_warmup_epochs": 3}} if quick else {}))
    model_dir = out / "model"
    result, run_id, version = track_training(default_tracking_uri(out / "runs"), "autorater-demo", "demo",
                                             PRESETS[preset], tc, [train_suite], out=model_dir, progress=True)
    champion = promote(default_tracking_uri(out / "runs"), version=version)
    print(f"best validation balanced accuracy {result.best['val_balanced_accuracy']:.3f} at epoch "
          f"{result.best['epoch']}; registered as autorater version {version}, promoted to {champion['uri']} "
          f"({time.time() - t:.0f} s)")
    return model_dir, tc.cache_dir


def _calibrate(out: Path, model_dir: Path, ref_suite, device: str) -> None:
    """Step 3: calibration on the reference suite's gold episodes."""
    from autorater.serving.labelling.model_calibration import calibrate_model, format_calibration

    t = _step(f"3. calibrate on the reference suite's {len(ref_suite.references)} gold episodes (never trained on): "
              f"temperature, the selective policy at {DEMO_TARGET} agreement, the agreement table")
    calib = calibrate_model(model_dir, ref_suite, out / "calibration-report", target_agreement=DEMO_TARGET,
                            device=device)
    print(format_calibration(calib, per_category=False))
    print(f"({time.time() - t:.0f} s)")


def _label(out: Path, model_dir: Path, new_suite, device: str, quick: bool = False) -> Path:
    """Step 4: the new version labelled: provisional auto-labels, the rest and an audit to the annotators."""
    from autorater.serving.labelling.folder import LabelsFolder
    from autorater.serving.labelling.label import format_summary, label_suite

    t = _step("4. label the new suite version: provisional auto-labels where the calibrated policy allows, the rest "
              "and a random audit of each stratum to the annotators in Label Studio's format")
    labels_dir = out / "labels-v2"
    if labels_dir.exists():  # a labels folder belongs to one model: this run's model is new
        shutil.rmtree(labels_dir)
    from autorater.serving.labelling.ledger import LEDGER_FILE

    (new_suite.root / LEDGER_FILE).unlink(missing_ok=True)  # the demo's model is new each run: so is its job
    summary = label_suite(model_dir, new_suite, labels_dir, workers=2, progress=True, device=device,
                          strata=DEMO_STRATA, **({"adapt_epochs": 1} if quick else {}))
    print(format_summary(summary))
    print(f"Label Studio: {LabelsFolder(labels_dir).tasks_file} ({summary['human_tasks']} tasks) "
          f"({time.time() - t:.0f} s)")
    return labels_dir


def _answer_and_certify(out: Path, labels_dir: Path) -> None:
    """Step 5: the simulated annotators answer the queue, their export is ingested, the version certified."""
    from autorater.serving.labelling.certify import certify, format_certification
    from autorater.serving.labelling.ingest import format_ingest, ingest
    from autorater.serving.labelling.simulate import simulate_queue_export

    t = _step("5. the annotators answer the queue (simulated), Label Studio exports, autorater ingests, and the "
              "version is certified on its own audit (autorater certify), round by round, until each stratum is "
              "decided")
    for round_no in range(1, DEMO_ROUNDS + 1):  # the audit goes on in rounds until every stratum is decided
        export = out / f"labelstudio-export-{round_no}.json"  # Label Studio's export lives outside the labels folder
        if simulate_queue_export(labels_dir, export, annotators=3, seed=3 + round_no) == 0:
            break
        # not into the suite: a re-run of the demo labels the version as it arrived
        print(format_ingest(ingest(labels_dir, export, append_to_suite=False), max_problems=5))
        print(format_certification(certify(labels_dir)))
    print(f"({time.time() - t:.0f} s)")


def _leaderboard(out: Path, labels_dir: Path) -> None:
    """Step 6: the agent leaderboard with its intervals, printed and written as HTML and JSON."""
    from autorater.serving.analysis.leaderboard import leaderboard
    from autorater.serving.analysis.report import format_leaderboard, write_report

    t = _step("6. the agent leaderboard: certified model labels + human labels corrected by the gold references "
              "(pooled across agents when they allow it, else each agent's own), 95% intervals")
    board = leaderboard(labels_dir, with_truth=True)
    print(format_leaderboard(board))
    report_path = write_report(board, out / "leaderboard.html")
    print(f"written: {report_path} and {report_path.with_suffix('.json')} ({time.time() - t:.0f} s)")


def _evaluate(out: Path, model_dir: Path, cache_dir: str, train_suite, new_suite, quick: bool, device: str) -> None:
    """Step 7: the model on the new version against the simulator truth, beside the annotators and a baseline."""
    from autorater.data.files import write_text_atomic
    from autorater.rater import Rater
    from autorater.training.baselines import predict_cached, predict_majority, train_majority
    from autorater.training.evaluate import evaluate, format_report
    from autorater.training.recipe import TrainConfig

    t = _step("7. how good is the model itself? The new version against the simulator truth, beside the "
              "annotators and a baseline")
    rater = Rater.load(model_dir, device)  # rates from the feature cache (on the CPU; batches follow the model)
    rows = predict_cached(rater.model, new_suite, cache_dir, name=rater.name, calibration=rater.calibration)
    majority = predict_majority(train_majority([train_suite], TrainConfig()), new_suite)
    report = evaluate(new_suite, {"autorater": rows, "majority_baseline": majority}, gold="truth")
    print(format_report(report))
    if quick:
        print("NOTE: --quick is a smoke run of the pipeline: its model trains for seconds on a few dozen videos, so a "
              "balanced accuracy near 0.5 (chance) is expected and says nothing of the autorater; run `autorater demo` "
              "for a real model")
    write_text_atomic(out / "evaluation.json", json.dumps(report, indent=1, default=float) + "\n")
    print(f"({time.time() - t:.0f} s)")
