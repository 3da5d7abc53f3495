"""The ``autorater`` command line: ``main(argv) -> int``, one short function per subcommand.

Each subcommand imports what it needs when it runs, so ``autorater --help`` stays instant.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def _set_offline_env() -> None:
    """Nothing may download at run time; MLflow sends no telemetry."""
    for key, value in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MLFLOW_DISABLE_TELEMETRY": "true",
                       "DO_NOT_TRACK": "1", "TOKENIZERS_PARALLELISM": "false"}.items():
        os.environ.setdefault(key, value)


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


# ----------------------------------------------------------------------------------------------
# suite


def cmd_suite_generate(args) -> int:
    from autorater.data.generate import generate_suite

    if args.levels and args.tasks:
        raise SystemExit("error: pass --tasks or --levels (BabyAI's name for tasks), not both")
    out = generate_suite(args.out, world=args.world, tasks=args.tasks or args.levels, agents=args.agents,
                         scenarios=args.scenarios, continuations_per_scenario=args.continuations_per_scenario,
                         annotators=args.annotators, seed=args.seed, workers=args.workers, version=args.version,
                         view=args.view, image_size=args.image_size, camera=args.camera,
                         hold_out_camera=args.hold_out_camera, hold_out_degrees=args.hold_out_degrees,
                         progress=not args.quiet)
    print(f"wrote suite {out}")
    _print_agent_rule(out)
    return 0


def cmd_suite_swap(args) -> int:
    from autorater.data.generate import swap_instructions

    out = swap_instructions(args.suite, args.out, seed=args.seed, workers=args.workers, progress=not args.quiet,
                            annotators=args.annotators, reference_share=args.reference_share,
                            cross_task=args.cross_task)
    print(f"wrote suite {out}")
    _print_agent_rule(out)
    return 0


def _print_agent_rule(suite_dir) -> None:
    from autorater.data.suite import SUITE_FILE

    rule = json.loads((Path(suite_dir) / SUITE_FILE).read_text())["source"].get("agent_rule_balanced_accuracy")
    if rule is not None:
        print(f"the agent's name alone predicts the true outcome with balanced accuracy {rule:.3f} "
              f"(each agent's majority outcome, in sample)")


def cmd_suite_validate(args) -> int:
    from autorater.data.suite import validate_suite

    problems = validate_suite(args.dir, check_videos=not args.no_videos, progress=not args.quiet)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"INVALID: {len(problems)} problem(s) in {args.dir}", file=sys.stderr)
        return 1
    print(f"OK: {args.dir} is a valid suite (format v1)")
    return 0


def cmd_suite_import(args) -> int:
    import contextlib

    from autorater.serving.folder import folder_lock

    if bool(args.from_labelstudio) == bool(args.table):
        raise ValueError("pass --videos DIR --table FILE, or --from-labelstudio EXPORT.json --media-root DIR")
    out = Path(args.out)
    grown = (out / "suite.json").is_file()  # a suite `serve --suite` may be appending to: take its lock
    with folder_lock(out, "suite import, ingest or webhook", wait=True) if grown else contextlib.nullcontext():
        return _suite_import(args)


def _suite_import(args) -> int:
    from autorater.data.importing import COLUMNS, format_report, import_table

    if args.table:
        if not args.videos:
            raise ValueError("--table needs --videos DIR, the folder its video paths are relative to")
        columns = {f: getattr(args, f"{f}_column") for f in COLUMNS if getattr(args, f"{f}_column") is not None}
        report = import_table(args.table, args.videos, args.out, columns=columns, link=args.link, strict=args.strict,
                              name=args.name, version=args.version)
    else:
        from autorater.serving.labelstudio_import import import_labelstudio

        if not args.media_root:
            raise ValueError("--from-labelstudio needs --media-root DIR, the folder the tasks' videos are under")
        report = import_labelstudio(args.from_labelstudio, args.media_root, args.out, frame_rate=args.frame_rate,
                                    success_labels=args.success_label, failure_labels=args.failure_label,
                                    link=args.link, strict=args.strict, name=args.name, version=args.version)
    print(format_report(report))
    return 1 if not report.ok or (args.strict and (report.problems or report.warnings)) else 0


def cmd_suite_stats(args) -> int:
    from autorater.data.stats import format_stats, suite_stats
    from autorater.data.suite import Suite

    stats = suite_stats(Suite.load(args.dir))
    print(json.dumps(stats, indent=1) if args.json else format_stats(stats))
    return 0


# ----------------------------------------------------------------------------------------------
# model


def _threads() -> None:
    import torch

    torch.set_num_threads(max(1, min(os.cpu_count() or 1, 8)))


def cmd_train(args) -> int:
    from autorater.data.suite import Suite
    from autorater.training.recipe import load_config
    from autorater.training.train import train

    _threads()
    model_cfg, train_cfg = load_config(args.config)
    if args.epochs is not None:
        train_cfg.epochs = args.epochs
    if args.seed is not None:
        train_cfg.seed = args.seed
    train_cfg.cache_dir = args.cache_dir
    train_cfg.device = args.device
    suites = [Suite.load(d) for d in args.suite]
    if args.no_tracking:
        result = train(suites, model_cfg, train_cfg, out=args.out, progress=not args.quiet)
    else:
        from autorater.mlflow_registry import default_tracking_uri
        from autorater.training.tracking import track_training

        uri = args.tracking_uri or default_tracking_uri(args.workdir)
        result, run_id, version = track_training(uri, args.experiment, args.run_name, model_cfg, train_cfg, suites,
                                                 out=args.out, progress=not args.quiet)
        print(f"MLflow run {run_id} ({uri}); registered model autorater version {version}")
    best = result.best
    print(f"trained on {result.n_train} continuations ({result.n_val} for validation) in {result.wall_s:.0f} s; "
          f"best epoch {best.get('epoch')}: validation balanced accuracy {best.get('val_balanced_accuracy'):.3f}")
    print(f"model written to {args.out}")
    return 0


def _model_folder(arg: str, tracking_uri: str | None, workdir: str) -> Path:
    """The local model folder ``--model`` names: a folder, or a registry URI such as models:/autorater@champion
    (downloaded under ``workdir/models``). Opening it is the Rater's job (``Rater.load``)."""
    from autorater.mlflow_registry import default_tracking_uri, resolve_model_arg
    from autorater.model import Autorater

    if arg.startswith("models:/"):
        return Path(resolve_model_arg(arg, tracking_uri or default_tracking_uri(workdir), Path(workdir) / "models"))
    return Autorater.check_folder(arg)


def _rater(args):
    """``Rater.load`` of ``--model`` on ``--device`` (``--allow-unverified``: weights without a checksum)."""
    from autorater.rater import Rater

    return Rater.load(_model_folder(args.model, args.tracking_uri, args.workdir), args.device,
                      allow_unverified=args.allow_unverified)


def cmd_predict(args) -> int:
    from autorater.data.suite import Suite, write_jsonl

    _threads()
    rater = _rater(args)
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
    from autorater.serving.model_calibration import check_drift

    drift = check_drift(model_dir, [r["logit"] for r in rows if "logit" in r])
    if drift is not None:
        level = "WARNING: " if drift["drifted"] else ""
        print(f"{level}drift against calibration suite {drift['calibration_suite']}: {drift['message']}",
              file=sys.stderr if drift["drifted"] else sys.stdout)
    return drift


def cmd_evaluate(args) -> int:
    from autorater.data.suite import Suite
    from autorater.training.evaluate import evaluate, format_failure_modes, format_report

    _threads()
    rater = _rater(args)
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
    from autorater.serving.model_calibration import calibrate_model, format_calibration

    _threads()
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

    _threads()
    if args.quiet:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
    model_cfg, train_cfg = load_config(args.config)
    train_cfg.cache_dir = args.cache_dir
    if args.epochs is not None:
        train_cfg.epochs = args.epochs
    study = tune([Suite.load(d) for d in args.suite], model_cfg, train_cfg, args.trials, args.study_name,
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
    from autorater.training.compare import compare_runs, format_runs_table

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


# ----------------------------------------------------------------------------------------------
# demo


def cmd_label(args) -> int:
    from autorater.data.suite import Suite
    from autorater.serving.label import format_summary, label_suite

    _threads()
    model_dir = _model_folder(args.model, args.tracking_uri, args.workdir)
    summary = label_suite(model_dir, Suite.load(args.suite), args.out, resume=args.resume, workers=args.workers,
                          batch_size=args.batch_size, audit_share=args.audit_share, seed=args.seed,
                          on_drift=args.on_drift, video_url_prefix=args.video_url_prefix, backend=args.backend,
                          ray_address=args.address, progress=not args.quiet, device=args.device,
                          allow_unverified=args.allow_unverified)
    print(format_summary(summary))
    print(f"written: {args.out}/labels.jsonl, errors.jsonl, summary.json, labelstudio/config.xml and tasks.json "
          f"({summary['human_tasks']} tasks for the annotators)")
    return 0


def cmd_ingest(args) -> int:
    from autorater.serving.ingest import format_ingest, ingest

    result = ingest(args.labels, args.export, append_to_suite=not args.no_suite)
    print(format_ingest(result))
    return 1 if args.strict and result["errors"] else 0


def cmd_leaderboard(args) -> int:
    from autorater.serving.folder import LabelsFolder
    from autorater.serving.leaderboard import leaderboard
    from autorater.serving.report import format_leaderboard, write_report

    board = leaderboard(args.labels, seed=args.seed, with_truth=args.truth)
    print(format_leaderboard(board))
    out = Path(args.out) if args.out else LabelsFolder(args.labels).leaderboard
    write_report(board, out)
    print(f"written: {out} and {out.with_suffix('.json')}")
    return 0


def cmd_labelstudio_setup(args) -> int:
    from autorater.serving.labelstudio_setup import format_setup, setup_labelstudio

    token = args.token or os.environ.get("LABEL_STUDIO_API_KEY")
    if not token:
        raise ValueError("pass --token (Label Studio: Account & Settings > Access Token) or set LABEL_STUDIO_API_KEY")
    steps = setup_labelstudio(args.url, token, args.serve_url, project=args.project,
                              serve_token=args.serve_token or os.environ.get("AUTORATER_TOKEN"),
                              local_files=args.local_files, tasks=args.tasks)
    print(format_setup(steps))
    return 0


def cmd_simulate_annotators(args) -> int:
    from autorater.serving.simulate import simulate_queue_export

    n = simulate_queue_export(args.labels, args.out, annotators=args.annotators, seed=args.seed)
    print(f"wrote a Label Studio export of {n} tasks answered by simulated annotators to {args.out}")
    return 0


def cmd_active_select(args) -> int:
    from autorater.data.suite import Suite
    from autorater.serving.active import active_select

    _threads()
    model_dir = _model_folder(args.model, args.tracking_uri, args.workdir)
    summary = active_select(model_dir, Suite.load(args.pool), args.budget, args.out, strategy=args.strategy,
                            diversity=not args.no_diversity, seed=args.seed, video_url_prefix=args.video_url_prefix,
                            progress=not args.quiet, device=args.device, allow_unverified=args.allow_unverified)
    print(f"selected {summary['selected']} of {summary['pool_unlabelled']} unlabelled continuations by "
          f"{summary['strategy']} ({summary['scenarios']} scenarios, {summary['categories']} categories); "
          f"Label Studio: {args.out}/labelstudio/config.xml and tasks.json ({summary['tasks']} tasks)")
    return 0


def cmd_active_round(args) -> int:
    from autorater.mlflow_registry import default_tracking_uri
    from autorater.serving.active import run_round

    _threads()
    from autorater.training.recipe import load_config

    uri = args.tracking_uri or default_tracking_uri(args.workdir)
    model_dir = _model_folder(args.model, uri, args.workdir)
    train_config = load_config(args.config)[1] if args.config else None
    r = run_round(model_dir, args.pool, args.out, uri, references_dir=args.references, export=args.export,
                  tasks_file=args.tasks, finetune=not args.retrain, epochs=args.epochs, cache_dir=args.cache_dir,
                  seed=args.seed, train_config=train_config, progress=not args.quiet, level=args.level,
                  margin=args.margin, allow_unverified=args.allow_unverified)
    if "new_labels" in r:
        print(f"ingested {r['new_labels']} new labels into {args.pool} ({len(r['refused_labels'])} refused)")
    ci = r["ba_gain_ci"]
    ci_text = f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci[0] is not None else "[-]"
    print(f"on {r['n_references']} references of {r['references']} that neither model was calibrated on: champion "
          f"BA {r['ba_champion']:.3f}, challenger BA {r['ba_challenger']:.3f} (gain {r['ba_gain']:+.3f}, "
          f"{r['level']:.0%} paired interval {ci_text}, McNemar p {r['mcnemar_p']:.3f})")
    print(f"challenger registered as version {r['challenger_version']}: " +
          (f"promoted to {r['alias']}" if r["promoted"] else
           f"NOT promoted (the interval of the gain does not lie above {r['margin']})"))
    print(f"written: {args.out}/round.json")
    return 0


_LOOPBACK = {"127.0.0.1", "::1", "localhost"}


def cmd_serve(args) -> int:
    import dataclasses

    import uvicorn

    from autorater.data.video import DEFAULT_LIMITS
    from autorater.serving.guard import ConnectionLimits, server_config
    from autorater.serving.service import create_app

    token = args.token or os.environ.get("AUTORATER_TOKEN")
    if args.host not in _LOOPBACK and not token and not args.allow_unauthenticated:
        raise ValueError(f"--host {args.host} reaches beyond this machine: set a bearer token (--token or "
                         f"AUTORATER_TOKEN), or pass --allow-unauthenticated if a proxy authenticates")
    _threads()
    model_dir = _model_folder(args.model, args.tracking_uri, args.workdir)
    limits = ConnectionLimits(header_timeout_s=args.header_timeout_s, body_timeout_s=args.body_timeout_s,
                              max_connections=args.max_connections)
    video_limits = dataclasses.replace(DEFAULT_LIMITS, max_pixels=args.max_frame_pixels,
                                       max_decoded_pixels=args.max_decoded_pixels)
    app = create_app(model_dir, args.media_root, token=token, suite=args.suite, timeout_s=args.timeout_s,
                     max_upload_bytes=int(args.max_upload_mb * 2 ** 20), max_decodes=args.max_decodes,
                     device=args.device, allow_unverified=args.allow_unverified, video_limits=video_limits,
                     body_timeout_s=limits.body_timeout_s)
    print(f"serving {model_dir} on http://{args.host}:{args.port} (media root {args.media_root}; "
          f"{'bearer token required' if token else 'no auth'}; OpenAPI at /docs)")
    uvicorn.Server(server_config(app, args.host, args.port, limits)).run()
    return 0


def cmd_demo(args) -> int:
    from autorater.demo import run_demo

    default = "demo-out" if args.world == "babyai" else f"demo-out-{args.world}"
    out = Path(args.out if args.out is not None else default)
    return run_demo(out, quick=args.quick, world=args.world)


# ----------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    from autorater.data.worlds import WORLDS, load_world

    parser = argparse.ArgumentParser(prog="autorater", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    suite = sub.add_parser("suite", help="generate, validate and describe suites").add_subparsers(
        dest="suite_command", required=True)
    worlds = {name: load_world(name) for name in WORLDS}
    agents_help = "\n".join(f"  {name} agents (default {','.join(w.DEFAULT_AGENTS)}):\n"
                            + "\n".join(f"    {k}: {v}" for k, v in w.AGENTS.items()) for name, w in worlds.items())
    tasks_help = "\n".join(f"  {name} tasks (default {','.join(w.DEFAULT_TASKS)}): {', '.join(w.TASKS)}"
                           for name, w in worlds.items())
    p = suite.add_parser("generate", help="generate a synthetic STS-style suite (BabyAI or Meta-World)",
                         description=f"{agents_help}\n{tasks_help}",
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="output suite folder")
    p.add_argument("--world", choices=list(WORLDS), default="babyai", help="which world records the videos")
    p.add_argument("--tasks", type=_csv, default=None,
                   help="the world's tasks, comma-separated (BabyAI levels; Meta-World environment names)")
    p.add_argument("--levels", type=_csv, default=None, help="BabyAI ids or short names (the same as --tasks)")
    p.add_argument("--agents", type=_csv, default=None, help="agent names, comma-separated (default: the world's)")
    p.add_argument("--scenarios", type=int, default=40)
    p.add_argument("--continuations-per-scenario", type=int, default=2)
    p.add_argument("--annotators", type=int, default=3, help="simulated annotators per continuation")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=2, help="processes")
    p.add_argument("--version", default="v1", help="suite version written to suite.json")
    p.add_argument("--view", choices=["full", "ego"], default="ego",
                   help="the agent's first-person 7x7 view (default, as STS videos are) or the whole grid from above")
    p.add_argument("--image-size", type=int, default=None,
                   help="frame size in pixels (BabyAI 112: 16-pixel tiles; Meta-World 128)")
    p.add_argument("--camera", type=_csv, default=None,
                   help="Meta-World camera(s), comma-separated: one drawn per scenario (default corner); random: a "
                        "free camera drawn per scenario around the table, every object in view")
    p.add_argument("--hold-out-camera", type=_csv, default=None,
                   help="with --camera random: named camera(s) no drawn camera comes near (its optical axis stays "
                        "--hold-out-degrees away from theirs), e.g. corner2 for an unseen-camera test")
    p.add_argument("--hold-out-degrees", type=float, default=None, help="see --hold-out-camera (default 30)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_suite_generate)

    p = suite.add_parser("swap", help="the same videos with altered instructions, truth recomputed by the simulator",
                         description="Per scenario, another instruction whose truth the simulator recomputes "
                                     "(BabyAI: another object or verb; Meta-World: the other task of a shared "
                                     "scene, or an object the scene lacks). Without --annotators every "
                                     "continuation is a reference (a held-out test); with it, simulated "
                                     "annotators label the new truth (a training suite).")
    p.add_argument("--suite", required=True, help="a suite written by `autorater suite generate`")
    p.add_argument("--out", required=True, help="output suite folder")
    p.add_argument("--annotators", type=int, default=None,
                   help="simulated annotators per non-reference continuation (default: none, all references)")
    p.add_argument("--reference-share", type=float, default=0.15, help="with --annotators: share of references")
    p.add_argument("--cross-task", action="store_true",
                   help="Meta-World: also swap between reach, push and pick-place where the simulator can judge it")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=1, help="processes")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_suite_swap)

    p = suite.add_parser("validate", help="check every rule of the suite format; list all problems")
    p.add_argument("dir")
    p.add_argument("--no-videos", action="store_true", help="skip opening the videos")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_suite_validate)

    from autorater.data.importing import COLUMNS, REQUIRED

    p = suite.add_parser("import", help="a suite from your videos: a folder and a table (CSV, JSON Lines, Parquet), "
                                        "or a Label Studio JSON export",
                         description="Every bad row is listed with its line and the fix; the rest is imported. "
                                     "Re-running on a grown table adds only what is new. See docs/your-data.md.")
    p.add_argument("--out", required=True, help="the suite folder to write (or to grow)")
    p.add_argument("--videos", help="the folder the table's video paths are relative to")
    p.add_argument("--table", help="CSV / TSV, JSON Lines (.jsonl) or Parquet: one row per continuation or per label")
    p.add_argument("--from-labelstudio", metavar="EXPORT", help="a Label Studio JSON export of a video project")
    p.add_argument("--media-root", help="with --from-labelstudio: the folder its tasks' videos are under (Label "
                                        "Studio's local-files document root, or its media folder for uploads)")
    p.add_argument("--frame-rate", type=float, help="with --from-labelstudio: the frameRate of the project's <Video> "
                                                    "(default: the task's fps, else 24, Label Studio's default)")
    p.add_argument("--success-label", action="append", default=[], help="a choice or label that means success "
                                                                        "(repeatable; success, pass, yes... are known)")
    p.add_argument("--failure-label", action="append", default=[], help="a choice or label that means failure")
    p.add_argument("--link", action="store_true", help="hard-link the videos instead of copying them")
    p.add_argument("--strict", action="store_true", help="any problem or warning fails the import (exit 1, "
                                                         "nothing written)")
    p.add_argument("--name", help="suite name for a new suite (default: the folder's name)")
    p.add_argument("--version", help="suite version for a new suite (default v1)")
    for field, column in COLUMNS.items():
        p.add_argument(f"--{field.replace('_', '-')}-column", metavar="NAME",
                       help=f"the column of {field} (default {column}{'; required' if field in REQUIRED else ''})")
    p.set_defaults(func=cmd_suite_import)

    p = suite.add_parser("stats", help="counts, success rates, annotator agreement and accuracy")
    p.add_argument("dir")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.set_defaults(func=cmd_suite_stats)

    def device_arg(p):
        p.add_argument("--device", default="auto", help="auto (CUDA when a GPU is present, else the CPU), cpu, "
                                                         "cuda or cuda:N")

    def unverified_arg(p):
        p.add_argument("--allow-unverified", action="store_true",
                       help="load a model folder whose weights carry no checksum (saved before it existed); "
                            "without it such a folder is refused")

    def model_args(p, tracking=True):
        p.add_argument("--tracking-uri", help="MLflow tracking URI (default: sqlite under --workdir)")
        p.add_argument("--workdir", default="runs", help="local store for MLflow, caches and downloaded models")
        p.add_argument("--quiet", action="store_true", help="no progress bars")

    def model_and_suite(p, model_help="model folder, or models:/autorater@champion", suite_help=None):
        p.add_argument("--model", required=True, help=model_help)
        p.add_argument("--suite", required=True, help=suite_help)

    p = sub.add_parser("train", help="train an autorater on the annotations of one or more suites")
    device_arg(p)
    p.add_argument("--suite", action="append", required=True, help="training suite (repeat for several)")
    p.add_argument("--out", required=True, help="model folder to write")
    p.add_argument("--config", help='a preset (general: the default; babyai-grid, transformer, tiny, tiny-general) or '
                                    'a JSON file {"preset": "general", "model": {...}, "train": {...}}')
    p.add_argument("--epochs", type=int, help="override the recipe's epochs")
    p.add_argument("--seed", type=int, help="override the recipe's seed")
    p.add_argument("--cache-dir", default="runs/cache", help="feature cache folder")
    p.add_argument("--experiment", default="autorater", help="MLflow experiment")
    p.add_argument("--run-name", default=None)
    p.add_argument("--no-tracking", action="store_true", help="do not log to MLflow")
    model_args(p)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("predict", help="rate every continuation of a suite (SUITE_FORMAT predictions)")
    unverified_arg(p)
    device_arg(p)
    model_and_suite(p)
    p.add_argument("--out", required=True, help="predictions .jsonl")
    p.add_argument("--batch-size", type=int, default=16)
    model_args(p)
    p.set_defaults(func=cmd_predict)

    p = sub.add_parser("evaluate", help="score a model against gold labels, beside the human annotators")
    unverified_arg(p)
    device_arg(p)
    model_and_suite(p, model_help=None)
    p.add_argument("--gold", choices=["references", "truth", "both"], default="both",
                   help="references.jsonl, the simulator truth of synthetic suites, or both")
    p.add_argument("--out", help="report .json")
    model_args(p)
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("calibrate", help="fit the temperature, shift and selective policy on a suite's references")
    device_arg(p)
    unverified_arg(p)
    model_and_suite(p, "local model folder (calibration.json is written into it)",
                    "suite with references.jsonl (and annotations for the comparison)")
    p.add_argument("--target-agreement", type=float, default=0.95)
    p.add_argument("--confidence", type=float, default=0.9)
    p.add_argument("--max-marker-uncertainty-s", type=float, default=None,
                   help="send continuations whose predicted marker is more uncertain than this to humans")
    p.add_argument("--report", help="report folder (default: MODEL/calibration-report)")
    model_args(p)
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("tune", help="Optuna study (SQLite, resumable, pruned); every trial logged to MLflow")
    p.add_argument("--suite", action="append", required=True)
    p.add_argument("--config", help="the base recipe: a preset name or a JSON file (as for train)")
    p.add_argument("--trials", type=int, default=20, help="trials to add to the study")
    p.add_argument("--study-name", default="autorater")
    p.add_argument("--storage", help="Optuna storage URL (default: sqlite under --workdir)")
    p.add_argument("--epochs", type=int, help="epochs per trial")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout-s", type=float)
    p.add_argument("--best-config", help="where to write the best trial's config JSON")
    p.add_argument("--cache-dir", default="runs/cache")
    model_args(p)
    p.set_defaults(func=cmd_tune)

    p = sub.add_parser("compare", help="a table of MLflow runs: params and metrics side by side")
    p.add_argument("--experiment")
    p.add_argument("--kind", choices=["train", "trial", "study", "evaluation"])
    p.add_argument("--metric", action="append", help="metric name or pattern (repeatable)")
    p.add_argument("--order-by", help="sort by this metric, highest first")
    p.add_argument("--max-runs", type=int, default=20)
    p.add_argument("--json", action="store_true")
    model_args(p)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("promote", help="set the registry alias 'champion' on a model version")
    p.add_argument("--name", default="autorater")
    p.add_argument("--version", type=int, help="default: the latest version")
    p.add_argument("--alias", default="champion")
    model_args(p)
    p.set_defaults(func=cmd_promote)

    p = sub.add_parser("label", help="auto-label a new suite version; route the uncertain continuations to humans")
    unverified_arg(p)
    device_arg(p)
    model_and_suite(p, suite_help="the new suite version")
    p.add_argument("--out", required=True, help="labels folder (labels.jsonl, summary.json, labelstudio/ ...)")
    p.add_argument("--resume", action="store_true", help="finish an interrupted job in --out")
    p.add_argument("--workers", type=int, default=2, help="decoding threads (local) or rating actors (ray)")
    p.add_argument("--backend", choices=["local", "ray"], default="local",
                   help="where batches are rated: this process, or Ray Data (pip install '.[ray]')")
    p.add_argument("--address", help="Ray cluster address for --backend ray (default: a local Ray)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--audit-share", type=float, default=0.2,
                   help="share of the auto-labelled continuations also sent to humans, at random (for unbiased rates)")
    p.add_argument("--seed", type=int, default=0, help="seed of the audit draw")
    p.add_argument("--on-drift", choices=["warn", "route"], default="warn",
                   help="when the suite drifted from the calibration suite: warn, or route everything to humans")
    p.add_argument("--video-url-prefix", help="how Label Studio reaches the videos (default: its local-files "
                                              "storage, /data/local-files/?d=<suite folder name>/)")
    model_args(p)
    p.set_defaults(func=cmd_label)

    p = sub.add_parser("ingest", help="take human labels back (Label Studio JSON export or annotations.jsonl)")
    p.add_argument("--labels", required=True, help="labels folder written by `autorater label`")
    p.add_argument("--export", required=True, help="Label Studio JSON export, or a SUITE_FORMAT annotations.jsonl")
    p.add_argument("--no-suite", action="store_true", help="do not append the labels to the suite's annotations.jsonl")
    p.add_argument("--strict", action="store_true", help="exit 1 when any label was refused")
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("leaderboard", help="per-agent success rates with 95%% intervals (PPI), JSON and HTML")
    p.add_argument("--labels", required=True, help="labels folder (after ingest)")
    p.add_argument("--out", help="HTML report (default: LABELS/leaderboard.html; the JSON goes next to it)")
    p.add_argument("--truth", action="store_true", help="compare with the simulator truth (synthetic suites)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.set_defaults(func=cmd_leaderboard)

    ls = sub.add_parser("labelstudio", help="Label Studio: set up the project the labelling job routes to"
                        ).add_subparsers(dest="labelstudio_command", required=True)
    p = ls.add_parser("setup", help="create or update the project, connect autorater serve as its ML backend and "
                                    "register its webhook (idempotent)")
    p.add_argument("--url", default="http://localhost:8080", help="Label Studio's address")
    p.add_argument("--token", help="Label Studio access token (or set LABEL_STUDIO_API_KEY)")
    p.add_argument("--project", default="autorater", help="the project's title (found, else created)")
    p.add_argument("--serve-url", default="http://localhost:9090", help="how Label Studio reaches autorater serve")
    p.add_argument("--serve-token", help="autorater serve's --token (or set AUTORATER_TOKEN)")
    p.add_argument("--local-files", help="the folder Label Studio serves the videos from (a local-files storage; "
                                         "under its LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT)")
    p.add_argument("--tasks", help="tasks.json of autorater label: import the tasks the project lacks")
    p.set_defaults(func=cmd_labelstudio_setup)

    p = sub.add_parser("simulate-annotators", help="answer a labels folder's human queue with simulated "
                                                   "annotators (synthetic suites): a Label Studio export")
    p.add_argument("--labels", required=True)
    p.add_argument("--out", required=True, help="export .json to write")
    p.add_argument("--annotators", type=int, default=3, help="annotators per task")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_simulate_annotators)

    active = sub.add_parser("active", help="active learning: choose what to label next; run a round").add_subparsers(
        dest="active_command", required=True)
    p = active.add_parser("select", help="choose the unlabelled continuations humans should label next")
    device_arg(p)
    unverified_arg(p)
    p.add_argument("--model", required=True, help="model folder, or models:/autorater@champion")
    p.add_argument("--pool", required=True, help="pool suite (its unannotated, non-reference continuations)")
    p.add_argument("--budget", type=int, required=True, help="how many to choose")
    p.add_argument("--out", required=True, help="folder for selection.jsonl and labelstudio/")
    p.add_argument("--strategy", choices=["uncertainty", "margin", "entropy", "random", "balanced"],
                   default="uncertainty", help="balanced: uncertainty with a quota per predicted class that moves the "
                                               "labelled set towards half successes, half failures")
    p.add_argument("--no-diversity", action="store_true", help="pure ranking (no spread over scenarios/categories)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--video-url-prefix")
    model_args(p)
    p.set_defaults(func=cmd_active_select)

    p = active.add_parser("round", help="ingest labels, train a challenger, compare with the champion, maybe promote")
    unverified_arg(p)
    p.add_argument("--model", default="models:/autorater@champion", help="the champion (folder or registry URI)")
    p.add_argument("--pool", required=True, help="pool suite (new labels are appended to its annotations)")
    p.add_argument("--out", required=True, help="round folder")
    p.add_argument("--export", help="the annotators' answers: Label Studio JSON export or annotations.jsonl")
    p.add_argument("--tasks", help="the tasks.json they answered (from `active select`)")
    p.add_argument("--references", help="suite whose references judge both models (default: the pool's)")
    p.add_argument("--retrain", action="store_true", help="train from scratch instead of fine-tuning the champion")
    p.add_argument("--level", type=float, default=0.95,
                   help="level of the paired interval of the gain in balanced accuracy (promote when above --margin)")
    p.add_argument("--margin", type=float, default=0.0, help="the gain the interval's lower end must exceed")
    p.add_argument("--config", help='the training recipe: a preset name or a JSON file as for train (only its '
                                    '"train" part is used: the architecture is the champion\'s)')
    p.add_argument("--epochs", type=int)
    p.add_argument("--cache-dir", default="runs/cache")
    p.add_argument("--seed", type=int, default=0)
    model_args(p)
    p.set_defaults(func=cmd_active_round)

    p = sub.add_parser("serve", help="HTTP service: /v1/rate and the Label Studio ML-backend protocol")
    unverified_arg(p)
    device_arg(p)
    p.add_argument("--model", required=True, help="model folder, or models:/autorater@champion")
    p.add_argument("--media-root", required=True, help="folder that video paths in requests are relative to")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    p.add_argument("--port", type=int, default=9090)
    p.add_argument("--suite", help="pool suite whose annotations.jsonl the /webhook appends to")
    p.add_argument("--token", help="bearer token required on every request (or set AUTORATER_TOKEN)")
    p.add_argument("--allow-unauthenticated", action="store_true",
                   help="bind beyond loopback without a token (only behind an authenticating proxy)")
    p.add_argument("--timeout-s", type=float, default=90.0,
                   help="one deadline per request, in seconds (Label Studio waits 100 s for /predict)")
    p.add_argument("--max-upload-mb", type=float, default=64.0)
    p.add_argument("--max-decodes", type=int, default=2, help="ratings at once; more are answered 503")
    p.add_argument("--header-timeout-s", type=float, default=10.0,
                   help="a connection whose request head has not arrived in this time is closed")
    p.add_argument("--body-timeout-s", type=float, default=60.0,
                   help="a request's whole body must arrive within this time (408 otherwise)")
    p.add_argument("--max-connections", type=int, default=64, help="open connections at once; more are answered 503")
    p.add_argument("--max-frame-pixels", type=int, default=4096 * 2304,
                   help="pixels of one video frame (the container's claim and every decoded frame)")
    p.add_argument("--max-decoded-pixels", type=int, default=1 << 34,
                   help="pixels decoded for one video, every frame counted (a running budget)")
    model_args(p)
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("demo", help="the end-to-end main job on embedded defaults")
    p.add_argument("--out", default=None,
                   help="working folder (suites, models, MLflow store); default demo-out (demo-out-metaworld)")
    p.add_argument("--world", choices=["babyai", "metaworld"], default="babyai", help="the world of the suites")
    p.add_argument("--quick", action="store_true", help="a smaller, faster run")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    _set_offline_env()
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (ValueError, FileNotFoundError, KeyError) as err:  # our errors say what to fix
        msg = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
