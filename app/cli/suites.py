"""``autorater suite ...``: generate, swap, validate, import and describe suites."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from autorater.app.cli import common


def cmd_suite_generate(args) -> int:
    from autorater.data.generate import generate_suite

    if args.levels and args.tasks:
        raise SystemExit("error: pass --tasks or --levels (BabyAI's name for tasks), not both")
    out = generate_suite(args.out, world=args.world, tasks=args.tasks or args.levels, agents=args.agents,
                         scenarios=args.scenarios, continuations_per_scenario=args.continuations_per_scenario,
                         annotators=args.annotators, seed=args.seed, workers=args.workers, version=args.version,
                         progress=not args.quiet, grow=args.grow, **_given_options(args, args.world))
    print(f"wrote suite {out}")
    _print_agent_rule(out)
    return 0


def cmd_suite_swap(args) -> int:
    from autorater.data.generate import swap_instructions

    out = swap_instructions(args.suite, args.out, seed=args.seed, workers=args.workers, progress=not args.quiet,
                            annotators=args.annotators, reference_share=args.reference_share,
                            min_success_share=args.min_success_share, **_given_options(args))
    print(f"wrote suite {out}")
    _print_agent_rule(out)
    return 0


def _given_options(args, world: str | None = None) -> dict:
    """The world options given on the command line (``add_world_options``); with ``world``, a flag of another
    world is refused with the name of the world it belongs to."""
    given = {name: getattr(args, name) for name in args.world_options if hasattr(args, name)}
    if world is not None:
        for name in given:
            owners = args.world_options[name]
            if world not in owners:
                flag = f"--{name.replace('_', '-')}"
                raise SystemExit(f"error: {flag} is an option of {' and '.join(owners)}, not of {world} (fix: pass "
                                 f"--world {owners[0]}, or drop {flag})")
    return given


def add_world_options(parser, swap: bool = False) -> None:
    """Every world's options as flags, built from its options dataclass (``OPTIONS``; ``swap``: ``SWAP_OPTIONS``):
    one argument group per world, a flag several worlds share in a group of its own. A flag not given is not set
    (the world's default applies); ``args.world_options`` maps each option to the worlds that have it."""
    from autorater.data.worlds import WORLDS, load_world, option_infos

    by_name: dict[str, list] = {}
    for name in WORLDS:
        world = load_world(name)
        for info in option_infos(world.SWAP_OPTIONS if swap else world.OPTIONS):
            by_name.setdefault(info.name, []).append((name, info))
    kind = "swap options" if swap else "options"
    groups = {name: parser.add_argument_group(f"{name} {kind}") for name in WORLDS
              if any(owners == [name] for owners in ([w for w, _ in o] for o in by_name.values()))}
    if any(len(owners) > 1 for owners in by_name.values()):
        groups["shared"] = parser.add_argument_group(f"{kind} of several worlds")
    for option, owners in by_name.items():
        kinds = {info.kind for _, info in owners}
        if len(kinds) > 1:
            raise TypeError(f"option {option} has different types in {', '.join(w for w, _ in owners)}; give one of "
                            f"them another name")
        info = owners[0][1]
        helps = [_help(info)] if len(owners) == 1 else [f"{w}: {_help(i)}" for w, i in owners]
        kwargs = dict(dest=option, default=argparse.SUPPRESS, help="; ".join(helps).replace("%", "%%"))
        if info.kind is bool:
            kwargs["action"] = "store_true"
        else:
            kwargs["type"] = _parser(info)
            if info.choices and len(owners) == 1:
                kwargs["choices"] = list(info.choices)
            else:
                kwargs["metavar"] = option.upper()
        groups[owners[0][0] if len(owners) == 1 else "shared"].add_argument(f"--{option.replace('_', '-')}", **kwargs)
    parser.set_defaults(world_options={option: [w for w, _ in owners] for option, owners in by_name.items()})


def _help(info) -> str:
    default = info.default
    if default is None or default is False or default == ():
        return info.help
    shown = ",".join(default) if isinstance(default, tuple) else f"{default:g}" if info.kind is float else default
    return f"{info.help} (default {shown})"


def _parser(info):
    """An argparse ``type`` for an option (``int`` / ``float`` in their range, a comma-separated list, text)."""
    if info.kind is tuple:
        return common.csv
    if info.kind in (int, float):
        check = common.int_in if info.kind is int else common.float_in
        low = -float("inf") if info.low is None else info.low
        high = float("inf") if info.high is None else info.high
        return check(low, high)
    return str


def _print_agent_rule(suite_dir) -> None:
    from autorater.data.suite import SUITE_FILE

    rule = json.loads((Path(suite_dir) / SUITE_FILE).read_text())["source"].get("agent_rule_balanced_accuracy")
    if rule is not None:
        print(f"the agent's name alone predicts the true outcome with balanced accuracy {rule:.3f} "
              f"(each agent's majority outcome, in sample)")


def cmd_suite_validate(args) -> int:
    from autorater.data.paths import printable
    from autorater.data.suite import validate_suite

    problems = validate_suite(args.dir, check_videos=not args.no_videos, progress=not args.quiet)
    for p in problems:
        print(printable(str(p)), file=sys.stderr)  # a path or a value from a file never drives the terminal
    if problems:
        print(f"INVALID: {len(problems)} problem(s) in {printable(args.dir)}", file=sys.stderr)
        return 1
    print(f"OK: {printable(args.dir)} is a valid suite (format v1)")
    return 0


def cmd_suite_import(args) -> int:
    sources = [bool(args.table), bool(args.from_labelstudio), args.from_labelstudio_project is not None]
    if sum(sources) != 1:
        raise ValueError("pass one source: --videos DIR --table FILE, --from-labelstudio EXPORT.json --media-root DIR, "
                         "or --from-labelstudio-project ID --url URL --token TOKEN --media-root DIR")
    # the import takes the folder's lock itself, new folder or not (`serve --suite` may be appending to it), and
    # tags new scenarios with the version they came in, in its one change
    return _suite_import(args)


def _suite_import(args) -> int:
    from autorater.data.imports.common import format_report
    from autorater.data.imports.table import COLUMNS, import_table

    if args.table:
        if not args.videos:
            raise ValueError("--table needs --videos DIR, the folder its video paths are relative to")
        columns = {f: getattr(args, f"{f}_column") for f in COLUMNS if getattr(args, f"{f}_column") is not None}
        report = import_table(args.table, args.videos, args.out, columns=columns, link=args.link, strict=args.strict,
                              name=args.name, version=args.version, stamp=True)
    else:
        if not args.media_root:
            raise ValueError("--from-labelstudio and --from-labelstudio-project need --media-root DIR, the folder the "
                             "tasks' videos are under")
        options = dict(frame_rate=args.frame_rate, success_labels=args.success_label,
                       failure_labels=args.failure_label, link=args.link, strict=args.strict, name=args.name,
                       version=args.version, stamp=True)
        if args.from_labelstudio:
            from autorater.serving.labelstudio.imports import import_labelstudio

            report = import_labelstudio(args.from_labelstudio, args.media_root, args.out, **options)
        else:
            from autorater.serving.labelstudio.client import TOKEN_ENV, read_token
            from autorater.serving.labelstudio.project import import_labelstudio_project

            token = read_token(args.token, args.token_file, os.environ, TOKEN_ENV)
            if not token:
                raise ValueError(f"--from-labelstudio-project needs a token (Label Studio: Account & Settings > Access "
                                 f"Token): set {TOKEN_ENV}, or pass --token-file FILE (or --token, which other users "
                                 f"of this machine can see in ps)")
            report = import_labelstudio_project(args.from_labelstudio_project, args.url, token, args.media_root,
                                                args.out, **options)
    print(format_report(report))
    return 1 if not report.ok or (args.strict and (report.problems or report.warnings)) else 0


def cmd_suite_stats(args) -> int:
    from autorater.data.stats import format_stats, suite_stats
    from autorater.data.suite import Suite

    stats = suite_stats(Suite.load(args.dir))
    print(json.dumps(stats, indent=1) if args.json else format_stats(stats))
    return 0



def add_commands(sub) -> None:
    """The ``suite`` subcommands."""
    from autorater.app.cli.versions import add_suite_commands

    suite = sub.add_parser("suite", help="generate, validate, describe, diff, tag suites; propose the next version"
                           ).add_subparsers(
        dest="suite_command", required=True)
    _generate_commands(suite)
    _file_commands(suite)
    add_suite_commands(suite)


def _generate_commands(suite) -> None:
    """suite generate, suite swap: the worlds' flags."""
    from autorater.data.worlds import DEFAULT_WORLD, WORLDS, load_world

    worlds = {name: load_world(name) for name in WORLDS}
    agents_help = "\n".join(f"  {name} agents (default {','.join(w.DEFAULT_AGENTS)}):\n"
                            + "\n".join(f"    {k}: {v}" for k, v in w.AGENTS.items()) for name, w in worlds.items())
    tasks_help = "\n".join(f"  {name} tasks (default {','.join(w.DEFAULT_TASKS)}): {', '.join(w.TASKS)}"
                           for name, w in worlds.items())
    p = suite.add_parser("generate", help=f"generate a synthetic STS-style suite in one of the worlds "
                                          f"({', '.join(WORLDS)})",
                         description=f"{agents_help}\n{tasks_help}",
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="output suite folder")
    p.add_argument("--world", choices=list(WORLDS), default=DEFAULT_WORLD, help="which world records the videos")
    p.add_argument("--tasks", type=common.csv, default=None,
                   help="the world's tasks, comma-separated (BabyAI levels; Meta-World environment names)")
    p.add_argument("--levels", type=common.csv, default=None, help="BabyAI ids or short names (the same as --tasks)")
    p.add_argument("--agents", type=common.csv, default=None,
                   help="agent names, comma-separated (default: the world's)")
    p.add_argument("--scenarios", type=common.int_in(1, 1_000_000), default=40)
    p.add_argument("--continuations-per-scenario", type=common.int_in(1, 10_000), default=2)
    p.add_argument("--annotators", type=common.int_in(0, 1000), default=3, help="simulated annotators per continuation")
    common.seed_arg(p)
    p.add_argument("--workers", type=common.int_in(1, 256), default=2, help="processes")
    p.add_argument("--version", default="v1", help="suite version written to suite.json (and the tag version:V of "
                                                   "each new scenario)")
    p.add_argument("--grow", metavar="SUITE", help="an earlier version this one grows: its scenarios, continuations "
                                                   "and labels are kept and the new scenarios numbered after them")
    add_world_options(p)
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
    p.add_argument("--annotators", type=common.int_in(1, 1000), default=None,
                   help="simulated annotators per non-reference continuation (default: none, all references)")
    p.add_argument("--reference-share", type=common.float_in(0, 1), default=0.15,
                   help="with --annotators: share of references")
    p.add_argument("--min-success-share", type=common.float_in(0, 1), default=0.0,
                   help="drop swapped failures at random until successes are at least this share (a held-out "
                        "test that 'always failure' cannot pass)")
    add_world_options(p, swap=True)
    common.seed_arg(p)
    p.add_argument("--workers", type=common.int_in(1, 256), default=1, help="processes")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_suite_swap)


def _file_commands(suite) -> None:
    """suite validate, import, stats."""
    p = suite.add_parser("validate", help="check every rule of the suite format; list all problems")
    p.add_argument("dir")
    p.add_argument("--no-videos", action="store_true", help="skip opening the videos")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_suite_validate)

    from autorater.data.imports.table import COLUMNS, REQUIRED

    p = suite.add_parser("import", help="a suite from your videos: a folder and a table (CSV, JSON Lines, Parquet), "
                                        "or a Label Studio JSON export",
                         description="Every bad row is listed with its line and the fix; the rest is imported. "
                                     "Re-running on a grown table adds only what is new. See docs/your-data.md.")
    p.add_argument("--out", required=True, help="the suite folder to write (or to grow)")
    p.add_argument("--videos", help="the folder the table's video paths are relative to")
    p.add_argument("--table", help="CSV / TSV, JSON Lines (.jsonl) or Parquet: one row per continuation or per label")
    p.add_argument("--from-labelstudio", metavar="EXPORT", help="a Label Studio JSON export of a video project")
    p.add_argument("--from-labelstudio-project", metavar="ID", type=common.int_in(1, 10 ** 12),
                   help="a Label Studio project, fetched through its API (its JSON export of every task)")
    p.add_argument("--url", default="http://localhost:8080", help="with --from-labelstudio-project: Label Studio's "
                                                                  "address")
    p.add_argument("--token", help="with --from-labelstudio-project: an access token (visible in ps: prefer "
                                   "LABEL_STUDIO_API_KEY or --token-file)")
    p.add_argument("--token-file", metavar="FILE", help="a file whose first line is the access token")
    p.add_argument("--media-root", help="with --from-labelstudio(-project): the folder its tasks' videos are under "
                                        "(Label "
                                        "Studio's local-files document root, or its media folder for uploads)")
    p.add_argument("--frame-rate", type=common.float_in(0.1, 1000),
                   help="with --from-labelstudio: the frameRate of the project's <Video> "
                                                    "(default: the task's fps, else 24, Label Studio's default)")
    p.add_argument("--success-label", action="append", default=[], help="a choice or label that means success "
                                                                        "(repeatable; success, pass, yes... are known)")
    p.add_argument("--failure-label", action="append", default=[], help="a choice or label that means failure")
    p.add_argument("--link", action="store_true", help="hard-link the videos instead of copying them")
    p.add_argument("--strict", action="store_true", help="any problem or warning fails the import (exit 1, "
                                                         "nothing written)")
    p.add_argument("--name", help="suite name for a new suite (default: the folder's name)")
    p.add_argument("--version", help="suite version for a new suite (default v1); every scenario new to the suite is "
                                     "tagged version:V (default: the suite's version)")
    for field, column in COLUMNS.items():
        p.add_argument(f"--{field.replace('_', '-')}-column", metavar="NAME",
                       help=f"the column of {field} (default {column}{'; required' if field in REQUIRED else ''})")
    p.set_defaults(func=cmd_suite_import)

    p = suite.add_parser("stats", help="counts, success rates, annotator agreement and accuracy")
    p.add_argument("dir")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.set_defaults(func=cmd_suite_stats)
