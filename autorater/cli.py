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
    from data.generate import generate_suite

    out = generate_suite(args.out, levels=args.levels, agents=args.agents, scenarios=args.scenarios,
                         continuations_per_scenario=args.continuations_per_scenario, annotators=args.annotators,
                         seed=args.seed, workers=args.workers, version=args.version, view=args.view,
                         image_size=args.image_size, progress=not args.quiet)
    print(f"wrote suite {out}")
    return 0


def cmd_suite_validate(args) -> int:
    from data.suite import validate_suite

    problems = validate_suite(args.dir, check_videos=not args.no_videos, progress=not args.quiet)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"INVALID: {len(problems)} problem(s) in {args.dir}", file=sys.stderr)
        return 1
    print(f"OK: {args.dir} is a valid suite (format v1)")
    return 0


def cmd_suite_stats(args) -> int:
    from data.stats import format_stats, suite_stats
    from data.suite import Suite

    stats = suite_stats(Suite.load(args.dir))
    print(json.dumps(stats, indent=1) if args.json else format_stats(stats))
    return 0


# ----------------------------------------------------------------------------------------------
# demo


def cmd_demo(args) -> int:
    from autorater.demo import run_demo

    return run_demo(Path(args.out), quick=args.quick)


# ----------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    from data.generate import AGENTS, DEFAULT_AGENTS, DEFAULT_LEVELS, LEVELS

    parser = argparse.ArgumentParser(prog="autorater", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    suite = sub.add_parser("suite", help="generate, validate and describe suites").add_subparsers(
        dest="suite_command", required=True)
    agents_help = "; ".join(f"{k}: {v}" for k, v in AGENTS.items())
    p = suite.add_parser("generate", help="generate a synthetic STS-style suite on BabyAI",
                         description=f"Agents: {agents_help}")
    p.add_argument("--out", required=True, help="output suite folder")
    p.add_argument("--levels", type=_csv, default=list(DEFAULT_LEVELS),
                   help=f"BabyAI ids or short names, comma-separated (known: {', '.join(LEVELS)})")
    p.add_argument("--agents", type=_csv, default=list(DEFAULT_AGENTS), help="agent names, comma-separated")
    p.add_argument("--scenarios", type=int, default=40)
    p.add_argument("--continuations-per-scenario", type=int, default=2)
    p.add_argument("--annotators", type=int, default=3, help="simulated annotators per continuation")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=2, help="processes")
    p.add_argument("--version", default="v1", help="suite version written to suite.json")
    p.add_argument("--view", choices=["full", "ego"], default="full", help="top-down full view or egocentric")
    p.add_argument("--image-size", type=int, default=128)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_suite_generate)

    p = suite.add_parser("validate", help="check every rule of the suite format; list all problems")
    p.add_argument("dir")
    p.add_argument("--no-videos", action="store_true", help="skip opening the videos")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_suite_validate)

    p = suite.add_parser("stats", help="counts, success rates, annotator agreement and accuracy")
    p.add_argument("dir")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.set_defaults(func=cmd_suite_stats)

    p = sub.add_parser("demo", help="the end-to-end main job on embedded defaults")
    p.add_argument("--out", default="demo-out", help="working folder (suites, models, MLflow store)")
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
