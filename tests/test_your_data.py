"""docs/your-data.md runs as written: every ``$ `` command of its ``console`` blocks, in order, in one folder, each
exiting 0 and printing the first and last lines the page shows (numbers aside).

The default run makes the example smaller (``--scenarios 3``) and trains the ``tiny`` recipe for one epoch without
MLflow (the page trains the default recipe: about 1.5 minutes on 2 cores); the ``slow`` test runs the page exactly.
The ``bash`` blocks (Label Studio's commands, which need a running Label Studio) are run by
tests/test_labelstudio_live.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
from pathlib import Path

import pytest

from autorater.app import cli
from autorater.data import example
from doc_walk import check_shown, console_commands, in_page_folder

DOC = Path(__file__).resolve().parent.parent / "docs" / "your-data.md"


def shape(line: str) -> str:
    """A line with its numbers, timings, paths, run ids and model name left out: what a run on other data or another
    machine, or with a model not from the registry, still prints."""
    line = re.sub(r"sqlite:/+[^)\s]+", "sqlite:PATH", re.sub(r"autorater[@:][\w.-]+", "MODEL", line))
    line = re.sub(r"\b[0-9a-f]{32}\b", "RUN", line)  # an MLflow run id
    return re.sub(r"-?\d+(\.\d+)?", "#", line).strip()


def run(command: str, fast: bool, tmp_path: Path) -> tuple[str, bool]:
    """The command's output, and whether the fast run changed it (the tiny recipe, and no MLflow line)."""
    argv = shlex.split(command)
    out, swapped = io.StringIO(), False
    with contextlib.redirect_stdout(out):
        if argv[:3] == ["python", "-m", "autorater.data.example"]:
            code = example.main(argv[3:] + (["--scenarios", "3"] if fast else []))
        else:
            assert argv[0] == "autorater", f"the walkthrough runs only autorater and the example's script: {command}"
            if fast and argv[1] == "train":
                config = tmp_path / "tiny.json"
                config.write_text(json.dumps({"preset": "tiny", "train": {"epochs": 1}}))
                argv += ["--config", str(config), "--no-tracking"]
                swapped = True
            code = cli.main(argv[1:])
    assert code == 0, f"{command} exited {code}:\n{out.getvalue()}"
    return out.getvalue(), swapped


def walk(tmp_path: Path, monkeypatch, fast: bool) -> None:
    commands = console_commands(DOC)
    assert len(commands) >= 8 and any(c.startswith("autorater label ") for c, _ in commands)
    with in_page_folder(tmp_path, monkeypatch):
        for command, shown in commands:
            output, swapped = run(command, fast, tmp_path)
            check_shown(command, output, shown, shape, first=not swapped)


def test_the_walkthrough_runs_as_written_on_a_smaller_example(tmp_path, monkeypatch):
    walk(tmp_path, monkeypatch, fast=True)
    assert (tmp_path / "my-model" / "calibration.json").is_file()
    assert (tmp_path / "my-labels" / "labelstudio" / "tasks.json").is_file()


@pytest.mark.slow
def test_the_walkthrough_runs_exactly_as_written(tmp_path, monkeypatch):
    walk(tmp_path, monkeypatch, fast=False)
