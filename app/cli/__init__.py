"""The ``autorater`` command line: ``main(argv) -> int``, one short function per subcommand (``suites``,
``models``, ``labels``; what they share in ``common``).

Each subcommand imports what it needs when it runs, so ``autorater --help`` stays instant.
"""

from __future__ import annotations

import argparse
import sys

from autorater.app.cli import common


def build_parser() -> argparse.ArgumentParser:
    from autorater.app.cli import labels, models, suites

    parser = common.Parser(prog="autorater", description=__doc__.splitlines()[0])
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
        print(f"error: {_printable(str(msg))}", file=sys.stderr)
        return 2
    except (OSError, RecursionError, ArithmeticError) as err:  # input that reached the OS or a parser: no traceback
        what = getattr(err, "strerror", None) or str(err) or type(err).__name__
        where = getattr(err, "filename", None)
        print(f"error: {_printable(str(what) + (f': {where}' if where else ''))} ({type(err).__name__}; fix: check the "
              f"paths and values passed, and the permissions and free space of the folders)", file=sys.stderr)
        return 2


MAX_LINE = 1000  # characters of one line of an error; a longer one (a path of 5,000 characters) keeps its ends


def _printable(text: str) -> str:
    """A message as the terminal may show it: control characters (but line breaks) and lone surrogates escaped, each
    line at most ``MAX_LINE`` characters (its start and its end kept)."""
    from autorater.data.paths import printable

    lines = (printable(line) for line in text.split("\n"))
    return "\n".join(line if len(line) <= MAX_LINE else f"{line[:600]} ... {line[-300:]}" for line in lines)


__all__ = ["build_parser", "main"]
