"""Suite versions: ``suite diff``, ``suite tag``, ``suite propose``, and ``leaderboard`` across versions and tags
(docs/versions.md)."""

from __future__ import annotations

import json
from pathlib import Path

from autorater.app.cli import common


def cmd_suite_diff(args) -> int:
    """Exit 0: the suites are the same; 1: they differ; 2 (from ``main``): an error."""
    from autorater.data.diff import diff_suites, format_diff
    from autorater.data.files import json_text, write_text_atomic
    from autorater.data.suite import Suite

    diff = diff_suites(Suite.load(args.old), Suite.load(args.new), force=args.force, videos=not args.no_videos)
    if args.out:
        write_text_atomic(Path(args.out), json_text(diff.to_dict()))
    print(json.dumps(diff.to_dict(), indent=1) if args.json else format_diff(diff))
    if args.out and not args.json:
        print(f"written: {args.out}")
    return 1 if diff.differ else 0


def cmd_suite_tag(args) -> int:
    from autorater.serving.analysis.tags import tag_suite

    print(tag_suite(args.suite, args.tag, scenarios_file=args.scenarios, where=args.where, remove=args.remove))
    return 0


def cmd_suite_propose(args) -> int:
    from autorater.serving.analysis.propose import PROPOSAL_FILE, format_proposal, propose_version

    result = propose_version(args.pool, args.labels, args.out, args.n, predictions=args.predictions,
                             version=args.version, balance=not args.no_balance)
    print(format_proposal(result))
    print(f"written: the draft suite {args.out} ({PROPOSAL_FILE}: the table and the settings)")
    return 0


def across_versions(args) -> bool:
    """Whether ``leaderboard``'s arguments ask for the cross-version board: several sources, a suite, a tag, or one
    labels folder whose scenarios came in several versions (unless ``--truth`` asks for its one-folder board)."""
    if args.versions or args.by_tag or args.suite or len(args.labels) != 1:
        return True
    if args.truth:
        return False
    from autorater.data.suite import Suite
    from autorater.data.versions import scenario_version
    from autorater.serving.labelling.folder import LabelsFolder

    suite = Suite.load(LabelsFolder(args.labels[0]).read_job()["suite"])
    return len({scenario_version(s.tags, suite.info.version) for s in suite.scenarios}) > 1


def cmd_version_leaderboard(args) -> int:
    from autorater.serving.analysis.version_report import format_version_board, write_version_report
    from autorater.serving.analysis.versions import version_board

    if args.truth:
        raise ValueError("--truth compares one labels folder with its simulator truth: pass one --labels folder "
                         "without --suite, --by-tag or --versions")
    sources = list(args.labels) + list(args.suite)
    if not sources:
        raise ValueError("pass --labels FOLDER [FOLDER ...] and/or --suite DIR")
    board = version_board(sources, by_tags=args.by_tag, seed=args.seed)
    print(format_version_board(board))
    out = Path(args.out) if args.out else (Path(args.labels[0]) if args.labels else Path(".")) / \
        "leaderboard-versions.html"
    write_version_report(board, out)
    print(f"written: {out}, {out.with_suffix('.json')} and the figures {out.stem}-agents.png, "
          f"{out.stem}-saturation.png")
    return 0


def add_suite_commands(suite) -> None:
    """``suite diff``, ``suite tag`` and ``suite propose`` (``suite`` is the ``suite`` subparsers)."""
    p = suite.add_parser("diff", help="what changed between two versions of a suite (exit 0 same, 1 differ, 2 error)",
                         description="Scenarios added, removed and changed (instruction, category, tags, takeover, "
                                     "videos by content), continuations and labels changed, per category and tag.")
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument("--out", help="also write the JSON to this file")
    p.add_argument("--force", action="store_true", help="diff suites with different names (not versions of one suite)")
    p.add_argument("--no-videos", action="store_true", help="compare videos by path, not by content (faster)")
    p.set_defaults(func=cmd_suite_diff)

    p = suite.add_parser("tag", help="add a tag to scenarios chosen by a file of ids or an expression (locked, "
                                     "idempotent)",
                         description="EXPR: category == \"go_to\", category in [a, b], instruction contains \"red\", "
                                     "scenario_id startswith s00, tags has \"version:v2\" (or \"x\" in tags), joined "
                                     "with and, or, not and parentheses. Never evaluated as Python.")
    p.add_argument("suite")
    p.add_argument("--tag", required=True, help="the tag (no comma)")
    chosen = p.add_mutually_exclusive_group(required=True)
    chosen.add_argument("--scenarios", metavar="FILE", help="scenario ids, one per line (or JSON lines with "
                                                            "scenario_id)")
    chosen.add_argument("--where", metavar="EXPR", help="an expression over category, instruction, scenario_id, tags")
    p.add_argument("--remove", action="store_true", help="take the tag off instead")
    p.set_defaults(func=cmd_suite_tag)

    p = suite.add_parser("propose", help="the next version's mix: candidates of middle difficulty for today's agents",
                         description="Fits today's agents' abilities on the current labels and the pool's predicted "
                                     "outcomes in one item-response model, and picks the candidates that tell the "
                                     "agents apart best (middle difficulty), balanced over categories.")
    p.add_argument("--pool", required=True, help="suite of candidate scenarios with pilot continuations")
    p.add_argument("--labels", nargs="+", required=True, help="the current versions' labels folders (or suites)")
    p.add_argument("--n", type=common.int_in(1, 10 ** 6), required=True, help="how many scenarios to propose")
    p.add_argument("--out", required=True, help="the draft version's suite folder")
    p.add_argument("--predictions", help="autorater predict's output on the pool (default: the pool's annotations)")
    p.add_argument("--version", help="the draft's version (default: the one after the current ones)")
    p.add_argument("--no-balance", action="store_true", help="do not balance the choice over categories")
    p.set_defaults(func=cmd_suite_propose)


__all__ = ["across_versions", "add_suite_commands", "cmd_suite_diff", "cmd_suite_propose", "cmd_suite_tag",
           "cmd_version_leaderboard"]
