"""docs/versions.md runs as written: every ``$ `` command of its ``console`` blocks, in order, in one folder, each
exiting as the page says (0; ``suite diff`` 1: the versions differ) and printing the first and last lines the page
shows (numbers aside).

The default run makes the suites smaller (4 scenarios a version instead of 12, a pool of 8 instead of 24, a draft
of 4); the ``slow`` test runs the page exactly. tests/test_suite_versions.py and tests/test_version_board.py hold the
properties; this test holds the page to the product.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from autorater.app import cli
from doc_walk import check_shown, console_commands, in_page_folder

DOC = Path(__file__).resolve().parent.parent / "docs" / "versions.md"
SMALLER = {"--scenarios 12": "--scenarios 4", "--scenarios 24": "--scenarios 8", "--n 8": "--n 4"}
EXIT = {("suite", "diff"): 1}  # the exit code says the versions differ


def shape(line: str) -> str:
    """A line with its numbers and run-dependent names left out: what a smaller or another run still prints."""
    line = re.sub(r"autorater[@:][\w.-]+", "MODEL", line)
    line = re.sub(r"\bs\d{4}\b", "SID", line)
    return re.sub(r"\s+", " ", re.sub(r"[-+]?\d+(\.\d+)?%?", "#", line)).strip()


def run(command: str, fast: bool) -> str:
    if fast:
        for big, small in SMALLER.items():
            command = command.replace(big, small)
    argv = shlex.split(command)
    assert argv[0] == "autorater", f"the walkthrough runs only autorater: {command}"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(argv[1:])
    expected = EXIT.get(tuple(argv[1:3]), 0)
    assert code == expected, f"{command} exited {code}, not {expected}:\n{out.getvalue()}"
    return out.getvalue()


def walk(tmp_path: Path, monkeypatch, fast: bool) -> None:
    commands = console_commands(DOC)
    assert len(commands) >= 10 and any(c.startswith("autorater suite propose ") for c, _ in commands)
    with in_page_folder(tmp_path, monkeypatch):
        for command, shown in commands:
            check_shown(command, run(command, fast), shown, shape)


def test_the_versions_walkthrough_runs_as_written_on_smaller_suites(tmp_path, monkeypatch):
    walk(tmp_path, monkeypatch, fast=True)
    assert (tmp_path / "board" / "versions-saturation.png").is_file()
    assert (tmp_path / "v3-draft" / "proposal.json").is_file()


@pytest.mark.slow
def test_the_versions_walkthrough_runs_exactly_as_written(tmp_path, monkeypatch):
    walk(tmp_path, monkeypatch, fast=False)


@pytest.mark.slow
def test_the_version_commands_run_end_to_end_on_meta_world(tmp_path, monkeypatch, capsys):
    """Two Meta-World versions: grown, diffed, tagged, scored across versions with saturation, and a proposed third
    version from a grown pool (the suites' own annotations as the labels)."""
    monkeypatch.chdir(tmp_path)
    world = ["--world", "metaworld", "--tasks", "drawer-open-v3,reach-v3", "--continuations-per-scenario", "3",
             "--image-size", "64", "--workers", "1", "--quiet"]
    assert cli.main(["suite", "generate", "--out", "v1", "--scenarios", "4", "--seed", "1", *world]) == 0
    assert cli.main(["suite", "generate", "--out", "v2", "--version", "v2", "--grow", "v1", "--scenarios", "4",
                     "--seed", "2", *world]) == 0
    assert cli.main(["suite", "diff", "v1", "v2"]) == 1
    assert cli.main(["suite", "tag", "v2", "--tag", "drawer", "--where", "instruction contains drawer"]) == 0
    assert cli.main(["leaderboard", "--suite", "v2", "--by-tag", "drawer", "--out", "board/v.html"]) == 0
    out = capsys.readouterr().out
    assert "rank agreement v1 vs v2" in out and "saturation v2" in out and "tag drawer:" in out
    assert cli.main(["suite", "generate", "--out", "pool", "--version", "candidates", "--grow", "v2", "--scenarios",
                     "6", "--seed", "3", *world]) == 0
    assert cli.main(["suite", "propose", "--pool", "pool", "--labels", "v2", "--n", "2", "--out", "v3"]) == 0
    assert cli.main(["suite", "validate", "v3"]) == 0
