"""The labelling commands: ``label``, ``ingest``, ``leaderboard``, ``labelstudio``, ``simulate-annotators``,
``active``, ``serve``, ``demo``."""

from __future__ import annotations

import os
from pathlib import Path

from autorater.app.cli import common

_LOOPBACK = {"127.0.0.1", "::1", "localhost"}


def cmd_label(args) -> int:
    from autorater.data.suite import Suite
    from autorater.serving.labelling.label import format_summary, label_suite

    common.threads()
    model_dir = common.model_folder(args.model, args.tracking_uri, args.workdir)
    summary = label_suite(model_dir, Suite.load(args.suite), args.out, resume=args.resume, workers=args.workers,
                          batch_size=args.batch_size, audit_share=args.audit_share, seed=args.seed,
                          on_drift=args.on_drift, video_url_prefix=args.video_url_prefix, backend=args.backend,
                          ray_address=args.address, progress=not args.quiet, device=args.device,
                          allow_unverified=args.allow_unverified, certify=args.certify, strata=args.strata,
                          claim=args.claim, audit_budget=args.audit_budget, adapt=args.adapt,
                          adapt_after=args.adapt_after, replay=args.replay, cache_dir=args.cache_dir,
                          adapt_epochs=args.adapt_epochs)
    print(format_summary(summary))
    print(f"written: {args.out}/labels.jsonl, errors.jsonl, summary.json, labelstudio/config.xml and tasks.json "
          f"({summary['human_tasks']} tasks for the annotators)")
    return 0


def cmd_certify(args) -> int:
    from autorater.serving.labelling.certify import certify, format_certification
    from autorater.serving.labelling.folder import LabelsFolder

    store = args.tracking_uri or f"sqlite:///{Path(args.workdir).expanduser().resolve() / 'mlflow.db'}"  # made if used
    cert = certify(args.labels, video_url_prefix=args.video_url_prefix, adapt=not args.no_adapt, device=args.device,
                   tracking_uri=store, progress=not args.quiet)
    print(format_certification(cert))
    folder = LabelsFolder(args.labels)
    summary = folder.read_summary()
    print(f"{summary.get('auto', 0)} auto-labelled ({summary.get('coverage', 0):.1%}), "
          f"{summary.get('provisional', 0)} provisional, {summary.get('human', 0)} to humans; queue: "
          f"{folder.tasks_file} (round {cert.get('round', 1)})")
    return 0


def cmd_ingest(args) -> int:
    from autorater.serving.labelling.ingest import format_ingest, ingest

    result = ingest(args.labels, args.export, append_to_suite=not args.no_suite)
    print(format_ingest(result))
    return 1 if args.strict and result["errors"] else 0


def cmd_leaderboard(args) -> int:
    from autorater.app.cli.versions import across_versions, cmd_version_leaderboard
    from autorater.serving.analysis.leaderboard import leaderboard
    from autorater.serving.analysis.report import format_leaderboard, write_report
    from autorater.serving.labelling.folder import LabelsFolder

    if across_versions(args):
        return cmd_version_leaderboard(args)
    args.labels = args.labels[0]
    board = leaderboard(args.labels, seed=args.seed, with_truth=args.truth)
    print(format_leaderboard(board))
    out = Path(args.out) if args.out else LabelsFolder(args.labels).leaderboard
    write_report(board, out)
    print(f"written: {out} and {out.with_suffix('.json')}")
    return 0


def cmd_labelstudio_setup(args) -> int:
    from autorater.serving.labelstudio.client import read_token
    from autorater.serving.labelstudio.setup import format_setup, setup_labelstudio

    token = read_token(args.token, args.token_file)  # the flag, else the file, else LABEL_STUDIO_API_KEY
    if not token:
        raise ValueError("set LABEL_STUDIO_API_KEY or pass --token-file (Label Studio: Account & Settings > Access "
                         "Token); --token works too but shows in the process list")
    steps = setup_labelstudio(args.url, token, args.serve_url, project=args.project,
                              serve_token=args.serve_token or os.environ.get("AUTORATER_TOKEN"),
                              local_files=args.local_files, tasks=args.tasks)
    print(format_setup(steps))
    return 0


def cmd_simulate_annotators(args) -> int:
    from autorater.serving.labelling.simulate import simulate_queue_export

    n = simulate_queue_export(args.labels, args.out, annotators=args.annotators, seed=args.seed)
    print(f"wrote a Label Studio export of {n} tasks answered by simulated annotators to {args.out}")
    return 0


def cmd_active_select(args) -> int:
    from autorater.data.suite import Suite
    from autorater.serving.labelling.active import active_select

    common.threads()
    model_dir = common.model_folder(args.model, args.tracking_uri, args.workdir)
    summary = active_select(model_dir, Suite.load(args.pool), args.budget, args.out, strategy=args.strategy,
                            diversity=not args.no_diversity, seed=args.seed, video_url_prefix=args.video_url_prefix,
                            progress=not args.quiet, device=args.device, allow_unverified=args.allow_unverified)
    print(f"selected {summary['selected']} of {summary['pool_unlabelled']} unlabelled continuations by "
          f"{summary['strategy']} ({summary['scenarios']} scenarios, {summary['categories']} categories); "
          f"Label Studio: {args.out}/labelstudio/config.xml and tasks.json ({summary['tasks']} tasks)")
    return 0


def cmd_active_round(args) -> int:
    from autorater.mlflow_registry import default_tracking_uri
    from autorater.serving.labelling.active import run_round

    common.threads()
    from autorater.training.recipe import load_config

    uri = args.tracking_uri or default_tracking_uri(args.workdir)
    model_dir = common.model_folder(args.model, uri, args.workdir)
    train_config = load_config(args.config)[1] if args.config else None
    r = run_round(model_dir, args.pool, args.out, uri, references_dir=args.references, export=args.export,
                  tasks_file=args.tasks, finetune=not args.retrain, epochs=args.epochs, cache_dir=args.cache_dir,
                  seed=args.seed, train_config=train_config, progress=not args.quiet, level=args.level,
                  margin=args.margin, allow_unverified=args.allow_unverified, device=args.device)
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


def cmd_serve(args) -> int:
    import dataclasses

    import uvicorn

    from autorater.data.video import DEFAULT_LIMITS
    from autorater.serving.service.app import create_app
    from autorater.serving.service.guard import ConnectionLimits, server_config

    token = args.token or os.environ.get("AUTORATER_TOKEN")
    if args.host not in _LOOPBACK and not token and not args.allow_unauthenticated:
        raise ValueError(f"--host {args.host} reaches beyond this machine: set a bearer token (--token or "
                         f"AUTORATER_TOKEN), or pass --allow-unauthenticated if a proxy authenticates")
    common.threads()
    model_dir = common.model_folder(args.model, args.tracking_uri, args.workdir)
    limits = ConnectionLimits(header_timeout_s=args.header_timeout_s, body_timeout_s=args.body_timeout_s,
                              max_connections=args.max_connections, max_idle_connections=args.max_idle_connections)
    video_limits = dataclasses.replace(DEFAULT_LIMITS, max_pixels=args.max_frame_pixels,
                                       max_decoded_pixels=args.max_decoded_pixels)
    app = create_app(model_dir, args.media_root, token=token, suite=args.suite, timeout_s=args.timeout_s,
                     max_upload_bytes=int(args.max_upload_mb * 2 ** 20), max_decodes=args.max_decodes,
                     device=args.device, allow_unverified=args.allow_unverified, video_limits=video_limits,
                     body_timeout_s=limits.body_timeout_s, trusted_origins=tuple(args.allow_origin))
    print(f"serving {model_dir} on http://{args.host}:{args.port} (media root {args.media_root}; "
          f"{'bearer token required' if token else 'no auth'}; OpenAPI at /docs)")
    uvicorn.Server(server_config(app, args.host, args.port, limits)).run()
    return 0


def cmd_demo(args) -> int:
    from autorater.app.demo import run_demo
    from autorater.data.worlds import load_world

    out = Path(args.out if args.out is not None else load_world(args.world).DEMO.out)
    return run_demo(out, quick=args.quick, world=args.world, device=args.device)


def add_commands(sub) -> None:
    """The labelling, serving and demo subcommands."""
    _labelling_commands(sub)
    _labelstudio_commands(sub)
    _active_commands(sub)
    _serve_command(sub)
    _demo_command(sub)


def _label_parser(sub) -> None:
    """``autorater label``: its flags (the audit, the strata, version challengers)."""
    from autorater.serving.labelling.strata import STRATA, strata_help

    p = sub.add_parser("label", help="auto-label a new suite version; route the uncertain continuations to humans")
    common.loading_args(p)
    common.model_and_suite(p, suite_help="the new suite version")
    p.add_argument("--out", required=True, help="labels folder (labels.jsonl, summary.json, labelstudio/ ...)")
    p.add_argument("--resume", action="store_true", help="finish an interrupted job in --out")
    p.add_argument("--workers", type=common.int_in(1, 256), default=2,
                   help="decoding threads (local) or rating actors (ray)")
    p.add_argument("--backend", choices=["local", "ray"], default="local",
                   help="where batches are rated: this process, or Ray Data (pip install '.[ray]')")
    p.add_argument("--address", help="Ray cluster address for --backend ray (default: a local Ray)")
    p.add_argument("--batch-size", type=common.int_in(1, common.MAX_BATCH), default=16)
    p.add_argument("--audit-share", type=common.float_in(0, 1), default=0.2,
                   help="with --certify references: the share of the auto-labels audited by humans at random (for "
                        "unbiased rates); with --certify audit each stratum's audit is sequential and this is unused")
    p.add_argument("--seed", type=common.int_in(0, common.MAX_SEED), default=None,
                   help="seed of the audit order (default: drawn afresh for each job and kept in job.json: no two "
                        "jobs share an audit order; give one only to reproduce a job)")
    p.add_argument("--adapt", type=common.int_in(0, 8), default=2, metavar="N",
                   help="version challengers that may follow each stratum's model (default 2; 0: none): a stratum the "
                        "model fails asks a few labels per category, a challenger learns from the version's labels and "
                        "is audited on the rest; each stratum's error budget is split across its models in advance")
    p.add_argument("--adapt-after", type=common.int_in(1, 10_000), default=10, metavar="K",
                   help="human labels per category of a stratum before a challenger learns from them (default 10)")
    p.add_argument("--replay", action="append", default=None, metavar="SUITE",
                   help="a training suite a challenger replays beside the version's labels (repeatable; default: the "
                        "ones the model's metadata.json records); its videos are kept out of the audit")
    p.add_argument("--cache-dir", default=None, help="the feature cache challengers train and rate from "
                                                     "(default runs/cache)")
    p.add_argument("--adapt-epochs", type=common.int_in(1, 1000), default=None,
                   help="a challenger's epochs (default: the fine-tuning recipe's)")
    p.add_argument("--on-drift", choices=["warn", "route"], default="warn",
                   help="a stratum whose inputs moved from the references' (or a new one): audit it without the "
                        "references' prior (warn), or route it to humans whole (route)")
    p.add_argument("--certify", choices=["audit", "references"], default="audit",
                   help="audit (default): auto-labels stay provisional until this version's own audit certifies them "
                        "(`autorater certify`, round by round); references: carry the calibration references' "
                        "promise unchecked")
    p.add_argument("--strata", default=",".join(STRATA), help=strata_help())
    p.add_argument("--claim", choices=["family", "fcr"], default="family",
                   help="the promise across strata: family (default: every certified stratum at once, with the "
                        "calibration's confidence) or fcr (the expected share of certified strata below target is at "
                        "most 1 - confidence; cheaper when most strata are good)")
    p.add_argument("--audit-budget", type=common.float_in(0, 1, above=True), default=None, metavar="SHARE",
                   help="the largest share of a stratum's provisional labels its audit may take before the stratum "
                        "goes to humans (default: as long as the test can still pass)")
    p.add_argument("--video-url-prefix", help="how Label Studio reaches the videos (default: its local-files "
                                              "storage, /data/local-files/?d=<suite folder name>/)")
    common.model_args(p)
    p.set_defaults(func=cmd_label)



def _labelling_commands(sub) -> None:
    """label, ingest, certify, leaderboard."""
    _label_parser(sub)
    p = sub.add_parser("ingest", help="take human labels back (Label Studio JSON export or annotations.jsonl)")
    p.add_argument("--labels", required=True, help="labels folder written by `autorater label`")
    p.add_argument("--export", required=True, help="Label Studio JSON export, or a SUITE_FORMAT annotations.jsonl")
    p.add_argument("--no-suite", action="store_true", help="do not append the labels to the suite's annotations.jsonl")
    p.add_argument("--strict", action="store_true", help="exit 1 when any label was refused")
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("certify", help="certify a labelled version on its own audit, stratum by stratum, round by "
                                       "round",
                       description="After each `autorater ingest` of audit answers: every stratum's anytime-valid "
                                   "test is updated; a stratum is certified (its provisional auto-labels become "
                                   "auto), routed to humans, or asks for its next audit batch (a new Label Studio "
                                   "round); summary.json states the promise and the claim across strata. Idempotent: "
                                   "run it again after each ingest (docs/calibration.md).")
    p.add_argument("labels", help="labels folder written by `autorater label` (after `autorater ingest`)")
    p.add_argument("--video-url-prefix", help="how Label Studio reaches the videos of the new round (as for label)")
    p.add_argument("--no-adapt", action="store_true", help="train no version challenger this run (strata whose "
                                                           "learning labels are in wait for the next run)")
    p.add_argument("--device", default="cpu", help="where a challenger trains and rates: cpu (default), cuda, auto")
    common.model_args(p)  # --tracking-uri: where a challenger is registered (a version challenger, with its lineage)
    p.set_defaults(func=cmd_certify)

    p = sub.add_parser("leaderboard", help="per-agent success rates with 95%% intervals (PPI), JSON and HTML; across "
                                           "suite versions and tags",
                       description="One labels folder: its leaderboard. Several (one per version), suites (--suite), "
                                   "a suite whose scenarios carry several version:V tags, --by-tag or --versions: "
                                   "per agent the rate on each version and on their union, per category and tag, "
                                   "the rank agreement between versions and each version's saturation "
                                   "(docs/versions.md).")
    p.add_argument("--labels", nargs="+", default=[], help="labels folder(s) (after ingest), oldest version first")
    p.add_argument("--suite", action="append", default=[], help="a suite whose own annotations are the labels "
                                                                "(repeatable)")
    p.add_argument("--by-tag", action="append", default=[], metavar="TAG", help="also break the scores down by this "
                                                                               "tag (repeatable)")
    p.add_argument("--versions", action="store_true", help="the cross-version board even for one version")
    p.add_argument("--out", help="HTML report (default: LABELS/leaderboard.html, or leaderboard-versions.html across "
                                 "versions; the JSON goes next to it)")
    p.add_argument("--truth", action="store_true", help="compare with the simulator truth (synthetic suites)")
    common.seed_arg(p, "bootstrap seed")
    p.set_defaults(func=cmd_leaderboard)


def _labelstudio_commands(sub) -> None:
    """labelstudio setup, simulate-annotators."""
    ls = sub.add_parser("labelstudio", help="Label Studio: set up the project the labelling job routes to"
                        ).add_subparsers(dest="labelstudio_command", required=True)
    p = ls.add_parser("setup", help="create or update the project, connect autorater serve as its ML backend and "
                                    "register its webhook (idempotent)")
    p.add_argument("--url", default="http://localhost:8080", help="Label Studio's address")
    p.add_argument("--token", help="Label Studio access token (visible in `ps`: prefer LABEL_STUDIO_API_KEY or "
                                   "--token-file)")
    p.add_argument("--token-file", help="a file holding the Label Studio access token on its first line")
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
    p.add_argument("--annotators", type=common.int_in(1, 1000), default=3, help="annotators per task")
    common.seed_arg(p)
    p.set_defaults(func=cmd_simulate_annotators)


def _active_commands(sub) -> None:
    """active select, active round."""
    active = sub.add_parser("active", help="active learning: choose what to label next; run a round").add_subparsers(
        dest="active_command", required=True)
    p = active.add_parser("select", help="choose the unlabelled continuations humans should label next")
    common.loading_args(p)
    p.add_argument("--model", required=True, help="model folder, or models:/autorater@champion")
    p.add_argument("--pool", required=True, help="pool suite (its unannotated, non-reference continuations)")
    p.add_argument("--budget", type=common.int_in(1, 10 ** 6), required=True, help="how many to choose")
    p.add_argument("--out", required=True, help="folder for selection.jsonl and labelstudio/")
    p.add_argument("--strategy", choices=["uncertainty", "margin", "entropy", "random", "balanced"],
                   default="uncertainty", help="balanced: uncertainty with a quota per predicted class that moves the "
                                               "labelled set towards half successes, half failures")
    p.add_argument("--no-diversity", action="store_true", help="pure ranking (no spread over scenarios/categories)")
    common.seed_arg(p)
    p.add_argument("--video-url-prefix")
    common.model_args(p)
    p.set_defaults(func=cmd_active_select)

    p = active.add_parser("round", help="ingest labels, train a challenger, compare with the champion, maybe promote")
    common.loading_args(p)
    p.add_argument("--model", default="models:/autorater@champion", help="the champion (folder or registry URI)")
    p.add_argument("--pool", required=True, help="pool suite (new labels are appended to its annotations)")
    p.add_argument("--out", required=True, help="round folder")
    p.add_argument("--export", help="the annotators' answers: Label Studio JSON export or annotations.jsonl")
    p.add_argument("--tasks", help="the tasks.json they answered (from `active select`)")
    p.add_argument("--references", help="suite whose references judge both models (default: the pool's)")
    p.add_argument("--retrain", action="store_true", help="train from scratch instead of fine-tuning the champion")
    p.add_argument("--level", type=common.float_in(0, 1, above=True, below=True), default=0.95,
                   help="level of the paired interval of the gain in balanced accuracy (promote when above --margin)")
    p.add_argument("--margin", type=common.float_in(-1, 1), default=0.0,
                   help="the gain the interval's lower end must exceed")
    p.add_argument("--config", help='the training recipe: a preset name or a JSON file as for train (only its '
                                    '"train" part is used: the architecture is the champion\'s)')
    p.add_argument("--epochs", type=common.int_in(1, common.MAX_EPOCHS))
    p.add_argument("--cache-dir", default="runs/cache")
    common.seed_arg(p)
    common.model_args(p)
    p.set_defaults(func=cmd_active_round)


def _serve_command(sub) -> None:
    p = sub.add_parser("serve", help="HTTP service: /v1/rate and the Label Studio ML-backend protocol")
    common.loading_args(p)
    p.add_argument("--model", required=True, help="model folder, or models:/autorater@champion")
    p.add_argument("--media-root", required=True, help="folder that video paths in requests are relative to")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    p.add_argument("--port", type=common.int_in(0, 65535), default=9090, help="0: any free port")
    p.add_argument("--suite", help="pool suite whose annotations.jsonl the /webhook appends to")
    p.add_argument("--token", help="bearer token required on every request (or set AUTORATER_TOKEN)")
    p.add_argument("--allow-unauthenticated", action="store_true",
                   help="bind beyond loopback without a token (only behind an authenticating proxy)")
    p.add_argument("--timeout-s", type=common.float_in(0, 86400, above=True), default=90.0,
                   help="one deadline per request, in seconds (Label Studio waits 100 s for /predict)")
    p.add_argument("--max-upload-mb", type=common.float_in(0.001, 65536), default=64.0)
    p.add_argument("--max-decodes", type=common.int_in(1, 256), default=2,
                   help="ratings at once; more are answered 503")
    p.add_argument("--header-timeout-s", type=common.float_in(0, 3600, above=True), default=10.0,
                   help="a connection whose request head has not arrived in this time is closed")
    p.add_argument("--body-timeout-s", type=common.float_in(0, 86400, above=True), default=60.0,
                   help="a request's whole body must arrive within this time (408 otherwise)")
    p.add_argument("--max-connections", type=common.int_in(1, 100_000), default=64,
                   help="open connections at once; more are answered 503")
    p.add_argument("--max-idle-connections", type=common.int_in(1, 100_000), default=None,
                   help="connections waiting for a request head at once (default: half of --max-connections); one "
                        "more closes the longest-waiting")
    p.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                   help="a web page (https://host:port) allowed to send POST requests besides the service's own "
                        "loopback address; repeatable (requests from programs send no Origin and need none)")
    p.add_argument("--max-frame-pixels", type=common.int_in(1, 4096 * 4096), default=4096 * 2304,
                   help="pixels of one video frame (the container's claim and every decoded frame)")
    p.add_argument("--max-decoded-pixels", type=common.int_in(1, 1 << 40), default=1 << 34,
                   help="pixels decoded for one video, every frame counted (a running budget)")
    common.model_args(p)
    p.set_defaults(func=cmd_serve)


def _demo_command(sub) -> None:
    from autorater.data.worlds import DEFAULT_WORLD, demo_worlds

    p = sub.add_parser("demo", help="the end-to-end main job on embedded defaults")
    common.device_arg(p)
    p.add_argument("--out", default=None,
                   help="working folder (suites, models, MLflow store); default demo-out (demo-out-metaworld)")
    p.add_argument("--world", choices=demo_worlds(), default=DEFAULT_WORLD, help="the world of the suites")
    p.add_argument("--quick", action="store_true", help="a smaller, faster run")
    p.set_defaults(func=cmd_demo, builds_model=True)  # it trains one (the conformance suite checks its --device)
