"""A writer for the kill -9 tests (tests/test_hardening_imports.py): ``python tests/kill_worker.py import|tag SUITE
[MEDIA TABLES]``. It imports what it needs, prints ``ready``, waits for a line on stdin, then writes to the suite in a
loop until it is killed: ``import`` grows a table by one row per import (continuation ``k<i>``), ``tag`` adds and
removes the tag ``hot`` on every scenario.

``python tests/kill_worker.py rounds MEDIA TABLE`` (tests/test_hardening_folders.py, concurrent imports) prints
``ready``, then imports TABLE into each folder named on a line of stdin, answering ``ok`` or ``error ...`` per line.
Not a test module (no ``test_`` prefix)."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

ROWS = 10_000


def row(i: int) -> dict:
    return {"video": f"suite/videos/c{i % 4 + 1}.mp4", "instruction": f"task {i}", "agent": "a",
            "continuation_id": f"k{i:05d}"}


def import_loop(out: Path, media: Path, tables: Path) -> None:
    from autorater.data.imports.table import import_table
    from autorater.data.suite import Suite

    print("ready", flush=True)
    sys.stdin.readline()
    n = len(Suite.load(out).continuations)
    while n < ROWS:
        table = tables / f"rows-{n + 1}.csv"
        with open(table, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(row(0)))
            writer.writeheader()
            writer.writerows(row(i) for i in range(n + 1))
        import_table(table, media, out)
        n += 1


def tag_loop(out: Path) -> None:
    from autorater.serving.analysis.tags import tag_suite

    print("ready", flush=True)
    sys.stdin.readline()
    while True:
        for remove in (False, True):
            tag_suite(out, "hot", where="scenario_id startswith s or scenario_id startswith k", remove=remove)


def rounds_loop(media: Path, table: Path) -> None:
    from autorater.data.imports.table import import_table

    print("ready", flush=True)
    for line in sys.stdin:
        try:
            report = import_table(table, media, Path(line.strip()))
            answer = "ok" if report.ok and not report.problems else f"error {report.problems}"
        except Exception as err:  # the round's answer, whatever went wrong
            answer = f"error {type(err).__name__}: {err}"
        print(answer.replace("\n", " "), flush=True)


if __name__ == "__main__":
    kind, out = sys.argv[1], Path(sys.argv[2])
    if kind == "rounds":
        rounds_loop(out, Path(sys.argv[3]))
    elif kind == "import":
        import_loop(out, Path(sys.argv[3]), Path(sys.argv[4]))
    else:
        tag_loop(out)
