"""The ``autorater`` command line: ``main(argv) -> int``, one short function per subcommand (``suites``,
``models``, ``labels``; what they share in ``common``).

Each subcommand imports what it needs when it runs, so ``autorater --help`` stays instant.
"""

from __future__ import annotations

import argparse
import sys

from autorater.cli import common


def build_parser() -> argparse.ArgumentParser:
    from autorater.cli import labels, models, suites

    parser = argparse.ArgumentParser(prog="autorater", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    suites.add_commands(sub)
    models.add_commands(sub)
    labels.add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    common.set_offline_env()
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


__all__ = ["build_parser", "main"]
