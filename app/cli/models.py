"""The model's commands: ``train``, ``pack``, ``predict``, ``evaluate``, ``calibrate``, ``tune``, ``compare``,
``promote``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from autorater.app.cli import common


def _recipe(args, sources: list):
    """The model config and recipe ``--config`` names (or, without it, the one the ``sources``' worlds ask for:
    :func:`chosen_recipe`, printed), with the command line's epochs, seed, cache and device; and that choice."""
    from autorater.training.recipe import load_config

    recipe = chosen_recipe(args.config, sources)
    print(f"recipe: {recipe['preset']} ({recipe['why']})")
    model_cfg, train_cfg = load_config(args.config or recipe["preset"])
    if args.epochs is not None:
        train_cfg.epochs = args.epochs
    if args.seed is not None:
        train_cfg.seed = args.seed
    train_cfg.cache_dir = args.cache_dir
    train_cfg.device = args.device
    return model_cfg, train_cfg, recipe


def chosen_recipe(config: str | None, sources: list) -> dict:
    """What ``autorater train`` trains, and why: ``--config`` when given, else the preset the worlds of the suites
    (their suite.json ``source``s) ask for (``autorater.data.worlds.preset_for``: BabyAI's first-person view the grid
    reader, camera video and unknown or mixed worlds the general model). Recorded in the model's ``metadata.json``
    (``recipe``) and as MLflow tags."""
    from autorater.data.worlds import preset_for
    from autorater.models import DEFAULT_PRESET

    if config is not None:
        return {"preset": str(config), "chosen_by": "--config", "why": "named by --config"}
    preset, why = preset_for(sources, DEFAULT_PRESET)
    return {"preset": preset, "chosen_by": "world", "why": f"no --config: {why}"}


def cmd_pack(args) -> int:
    from autorater.data.suite import Suite
    from autorater.training.inputs.pack import NEEDS, Pack, write_pack

    common.threads()
    suites = [Suite.load(d) for d in args.suite]
    model_cfg, train_cfg, recipe = _recipe(args, [s.info.source for s in suites])
    out = write_pack(suites, model_cfg, train_cfg, args.out, progress=not args.quiet, compress=not args.no_compress)
    files = Pack(out).meta["files"]
    size = sum(f["bytes"] for f in files.values()) + (out / "pack.json").stat().st_size
    print(f"pack written to {out}: {size / 2**20:.1f} MiB in {len(files) + 1} files (checksums in pack.json)")
    print(f"the machine that trains from it needs Python >= 3.11, {', '.join(NEEDS)} and autorater (`pip install "
          f"--no-deps` of its wheel; torch the machine's own build): no decoder, weight package or MLflow")
    print(f"train there: autorater train --from-pack {out} --config {args.config or recipe['preset']} --out MODEL "
          f"--device cuda --no-tracking")
    return 0


def cmd_train(args) -> int:
    from autorater.data.suite import Suite
    from autorater.rater import update_metadata
    from autorater.training.train import train

    common.threads()
    if bool(args.suite) == bool(args.from_pack):
        raise SystemExit("error: train from --suite (one or more) or from --from-pack PACK, not both or neither")
    if args.from_pack:
        from autorater.training.inputs.pack import Pack

        suites = Pack(args.from_pack, allow_unverified=args.allow_unverified)
        sources = suites.sources
    else:
        suites = [Suite.load(d) for d in args.suite]
        sources = [s.info.source for s in suites]
    model_cfg, train_cfg, recipe = _recipe(args, sources)

    def run(log=None):  # the folder says which recipe it was trained with, and why, before MLflow logs it
        trained = train(suites, model_cfg, train_cfg, out=args.out, log=log, progress=not args.quiet)
        update_metadata(args.out, recipe=recipe)
        return trained

    if args.no_tracking:
        result = run()
    else:
        from autorater.mlflow_registry import default_tracking_uri, mlflow_client
        from autorater.training.tracking import track_training

        uri = args.tracking_uri or default_tracking_uri(args.workdir)
        result, run_id, version = track_training(uri, args.experiment, args.run_name, model_cfg, train_cfg, suites,
                                                 run, out=args.out, progress=not args.quiet)
        for key, value in recipe.items():
            mlflow_client(uri).set_tag(run_id, f"recipe.{key}", value)
        print(f"MLflow run {run_id} ({uri}); registered model autorater version {version}")
    best = result.best
    at = f"best epoch {best['epoch']}: " if best.get("epoch") is not None else ""
    print(f"trained on {result.n_train} continuations ({result.n_val} for validation) in {result.wall_s:.0f} s; "
          f"{at}validation balanced accuracy {best.get('val_balanced_accuracy'):.3f}")
    if result.verdict:
        print(f"training: {result.verdict}")
    for note in result.notes:
        print(f"recipe: {note}")
    print(f"model written to {args.out}")
    return 0


def cmd_predict(args) -> int:
    from autorater.data.suite import Suite, write_jsonl

    common.threads()
    rater = common.rater(args)
    model_dir = rater.folder
    rows = list(rater.rate_suite(Suite.load(args.suite), progress=not args.quiet, batch_size=args.batch_size))
    write_jsonl(args.out, rows)
    errors = [r for r in rows if "error" in r]
    for r in errors:
        print(f"warning: {r['continuation_id']}: {r['error']}", file=sys.stderr)
    print(f"wrote {len(rows) - len(errors)} predictions to {args.out}" +
          (f" ({len(errors)} videos could not be decoded)" if errors else ""))
    _warn_drift(model_dir, rows)
    return 0


def _warn_drift(model_dir: Path, rows: list[dict]) -> dict | None:
    """Warn when the suite's scores left the range the model was calibrated on."""
    from autorater.serving.labelling.model_calibration import check_drift

    drift = check_drift(model_dir, [r["logit"] for r in rows if "logit" in r])
    if drift is not None:
        level = "WARNING: " if drift["drifted"] else ""
        print(f"{level}drift against calibration suite {drift['calibration_suite']}: {drift['message']}",
              file=sys.stderr if drift["drifted"] else sys.stdout)
    return drift


def cmd_evaluate(args) -> int:
    from autorater.data.suite import Suite
    from autorater.training.evaluate import evaluate, format_failure_modes, format_report

    common.threads()
    rater = common.rater(args)
    model_dir = rater.folder
    suite = Suite.load(args.suite)
    rows = list(rater.rate_suite(suite, progress=not args.quiet))
    golds = [args.gold] if args.gold != "both" else ["references", "truth"]
    reports = {}
    for gold in golds:
        try:
            reports[gold] = evaluate(suite, rows, gold=gold)
        except ValueError as err:
            if args.gold != "both":
                raise
            print(f"note: {err}", file=sys.stderr)
    drift = _warn_drift(model_dir, rows)
    for report in reports.values():
        report["drift"] = drift
        print(format_report(report) + "\n")
        print(format_failure_modes(report) + "\n")
    if args.out:
        from autorater.data.files import write_text_atomic

        write_text_atomic(args.out, json.dumps(reports, indent=1, default=float) + "\n")
        print(f"report written to {args.out}")
    return 0


def cmd_calibrate(args) -> int:
    from autorater.data.suite import Suite
    from autorater.serving.labelling.model_calibration import calibrate_model, format_calibration

    common.threads()
    if args.model.startswith("models:/"):
        raise ValueError("calibrate writes calibration.json into a local model folder: download the registered "
                         "model first (autorater predict does it under --workdir/models) and pass that folder")
    suite = Suite.load(args.suite)
    report_dir = args.report or str(Path(args.model) / "calibration-report")
    result = calibrate_model(args.model, suite, report_dir, args.target_agreement, args.confidence,
                             args.max_marker_uncertainty_s, progress=not args.quiet, device=args.device,
                             allow_unverified=args.allow_unverified)
    print(format_calibration(result))
    print(f"calibration.json written to {args.model}")
    return 0


def cmd_tune(args) -> int:
    import optuna

    from autorater.data.suite import Suite
    from autorater.mlflow_registry import default_tracking_uri
    from autorater.training.recipe import load_config
    from autorater.training.tune import default_storage, trials_table, tune, write_best_config

    common.threads()
    if args.quiet:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
    suites = [Suite.load(d) for d in args.suite]
    recipe = chosen_recipe(args.config, [s.info.source for s in suites])  # what train would pick: it is searched
    print(f"recipe: {recipe['preset']} ({recipe['why']})")
    model_cfg, train_cfg = load_config(args.config or recipe["preset"])
    train_cfg.cache_dir = args.cache_dir
    train_cfg.device = args.device
    if args.epochs is not None:
        train_cfg.epochs = args.epochs
    study = tune(suites, model_cfg, train_cfg, args.trials, args.study_name,
                 args.storage or default_storage(args.workdir),
                 args.tracking_uri or default_tracking_uri(args.workdir), seed=args.seed,
                 timeout_s=args.timeout_s, progress=not args.quiet)
    for row in trials_table(study):
        value = "-" if row["value"] is None else f"{row['value']:.4f}"
        print(f"trial {row['number']:>3}  {row['state']:<9} {value:>8}  {row['params']}")
    path = write_best_config(study, args.best_config or Path(args.workdir) / f"best-{args.study_name}.json")
    print(f"best trial {study.best_trial.number} ({study.best_value:.4f}); its config: {path}\n"
          f"retrain with: autorater train --suite ... --config {path} --out MODEL")
    return 0


def cmd_compare(args) -> int:
    from autorater.mlflow_registry import default_tracking_uri
    from autorater.training.tracking import compare_runs, format_runs_table

    rows = compare_runs(args.tracking_uri or default_tracking_uri(args.workdir), args.experiment,
                        args.metric or None, args.max_runs, kind=args.kind, order_by=args.order_by)
    print(json.dumps(rows, indent=1, default=str) if args.json else format_runs_table(rows))
    return 0


def cmd_promote(args) -> int:
    from autorater.mlflow_registry import default_tracking_uri, promote

    done = promote(args.tracking_uri or default_tracking_uri(args.workdir), args.name, args.version, args.alias)
    was = f" (was version {done['previous_version']})" if done.get("previous_version") else ""
    print(f"{done['uri']} -> version {done['version']}{was}")
    return 0


def add_commands(sub) -> None:
    """The model's subcommands."""
    _train_commands(sub)
    _rating_commands(sub)
    _tracking_commands(sub)


def _recipe_args(p) -> None:
    """The recipe's flags, shared by train and pack (a pack is encoded for the config it trains)."""
    p.add_argument("--config", help='a preset (general, general-parts, babyai-grid, tiny, tiny-general) or a JSON '
                                    'file {"preset": "general", "model": {...}, "train": {...}}; default: the preset '
                                    "the suites' world asks for (BabyAI's first-person view: babyai-grid; camera "
                                    "video, your own suites or mixed worlds: general), printed with why")
    p.add_argument("--epochs", type=common.int_in(1, common.MAX_EPOCHS), help="override the recipe's epochs")
    p.add_argument("--seed", type=common.int_in(0, common.MAX_SEED), help="override the recipe's seed")
    p.add_argument("--cache-dir", default="runs/cache", help="feature cache folder")


def _train_commands(sub) -> None:
    """train, and pack (its inputs, portable)."""
    p = sub.add_parser("train", help="train an autorater on the annotations of one or more suites")
    common.device_arg(p)
    p.add_argument("--suite", action="append", default=[], help="training suite (repeat for several)")
    p.add_argument("--from-pack", help="train from a pack (autorater pack) instead of suites: no decoder or weight "
                                       "package needed (a GPU machine's way in)")
    p.add_argument("--out", required=True, help="model folder to write")
    p.add_argument("--allow-unverified", action="store_true",
                   help="train from a pack written before packs carried checksums (autorater-pack-1); without it "
                        "such a pack is refused")
    _recipe_args(p)
    p.add_argument("--experiment", default="autorater", help="MLflow experiment")
    p.add_argument("--run-name", default=None)
    p.add_argument("--no-tracking", action="store_true", help="do not log to MLflow")
    common.model_args(p)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("pack", help="write what training reads of suites (labels, encoded clips, sentence vectors, "
                                    "encoder weights) into a portable folder: autorater train --from-pack")
    common.device_arg(p)
    p.add_argument("--suite", action="append", required=True, help="training suite (repeat for several)")
    p.add_argument("--out", required=True, help="pack folder to write")
    p.add_argument("--no-compress", action="store_true", help="store the clips as they are (default: xz-compressed, "
                                                              "read back in a stream)")
    _recipe_args(p)
    common.model_args(p, tracking=False)
    p.set_defaults(func=cmd_pack)


def _rating_commands(sub) -> None:
    """predict, evaluate, calibrate."""
    p = sub.add_parser("predict", help="rate every continuation of a suite (SUITE_FORMAT predictions)")
    common.loading_args(p)
    common.model_and_suite(p)
    p.add_argument("--out", required=True, help="predictions .jsonl")
    p.add_argument("--batch-size", type=common.int_in(1, common.MAX_BATCH), default=16)
    common.model_args(p)
    p.set_defaults(func=cmd_predict)

    p = sub.add_parser("evaluate", help="score a model against gold labels, beside the human annotators")
    common.loading_args(p)
    common.model_and_suite(p, model_help=None)
    p.add_argument("--gold", choices=["references", "truth", "both"], default="both",
                   help="references.jsonl, the simulator truth of synthetic suites, or both")
    p.add_argument("--out", help="report .json")
    common.model_args(p)
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("calibrate", help="fit the temperature, shift and selective policy on a suite's references")
    common.loading_args(p)
    common.model_and_suite(p, "local model folder (calibration.json is written into it)",
                    "suite with references.jsonl (and annotations for the comparison)")
    p.add_argument("--target-agreement", type=common.float_in(0, 1, above=True, below=True), default=0.95)
    p.add_argument("--confidence", type=common.float_in(0, 1, above=True, below=True), default=0.9)
    p.add_argument("--max-marker-uncertainty-s", type=common.float_in(0, 3600, above=True), default=None,
                   help="send continuations whose predicted marker is more uncertain than this to humans")
    p.add_argument("--report", help="report folder (default: MODEL/calibration-report)")
    common.model_args(p)
    p.set_defaults(func=cmd_calibrate)


def _tracking_commands(sub) -> None:
    """tune, compare, promote."""
    p = sub.add_parser("tune", help="Optuna study (SQLite, resumable, pruned); every trial logged to MLflow")
    common.device_arg(p)
    p.add_argument("--suite", action="append", required=True)
    p.add_argument("--config", help="the base recipe: a preset name or a JSON file (as for train)")
    p.add_argument("--trials", type=common.int_in(1, 10_000), default=20, help="trials to add to the study")
    p.add_argument("--study-name", default="autorater")
    p.add_argument("--storage", help="Optuna storage URL (default: sqlite under --workdir)")
    p.add_argument("--epochs", type=common.int_in(1, common.MAX_EPOCHS), help="epochs per trial")
    common.seed_arg(p)
    p.add_argument("--timeout-s", type=common.float_in(0, 30 * 86400, above=True), help="stop adding trials after this "
                                                                                       "many seconds")
    p.add_argument("--best-config", help="where to write the best trial's config JSON")
    p.add_argument("--cache-dir", default="runs/cache")
    common.model_args(p)
    p.set_defaults(func=cmd_tune)

    p = sub.add_parser("compare", help="a table of MLflow runs: params and metrics side by side")
    p.add_argument("--experiment")
    p.add_argument("--kind", choices=["train", "trial", "study", "evaluation"])
    p.add_argument("--metric", action="append", help="metric name or pattern (repeatable)")
    p.add_argument("--order-by", help="sort by this metric, highest first")
    p.add_argument("--max-runs", type=common.int_in(1, 100_000), default=20)
    p.add_argument("--json", action="store_true")
    common.model_args(p)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("promote", help="set the registry alias 'champion' on a model version")
    p.add_argument("--name", default="autorater")
    p.add_argument("--version", type=common.int_in(1, 10 ** 9), help="default: the latest version")
    p.add_argument("--alias", default="champion")
    common.model_args(p)
    p.set_defaults(func=cmd_promote)
