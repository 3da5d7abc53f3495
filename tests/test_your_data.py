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
import torch

from autorater import cli
from autorater.data import example
from model_suites import one_thread

DOC = Path(__file__).resolve().parent.parent / "docs" / "your-data.md"


def doc_commands() -> list[tuple[str, list[str]]]:
    """(command, the output lines shown under it) for each ``$ `` line of the page's console blocks."""
    blocks = re.findall(r"```console\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    commands = []
    for block in blocks:
        for line in block.splitlines():
            if line.startswith("$ "):
                commands.append((line[2:], []))
            elif commands:
                commands[-1][1].append(line)
    return commands


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
    commands = doc_commands()
    assert len(commands) >= 8 and any(c.startswith("autorater label ") for c, _ in commands)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli.common, "threads", lambda: None)
    before = one_thread()
    try:
        for command, shown in commands:
            output, swapped = run(command, fast, tmp_path)
            printed = [line for line in output.splitlines() if line.strip()]
            shown = [line for line in shown if line.strip()]
            if not shown:
                continue
            assert printed, f"{command} printed nothing; the page shows {shown[0]!r}"
            if shown[0] != "[...]" and not swapped:
                assert shape(printed[0]) == shape(shown[0]), command
            if shown[-1] != "[...]":
                assert shape(printed[-1]) == shape(shown[-1]), command
    finally:
        torch.set_num_threads(before)


def test_the_walkthrough_runs_as_written_on_a_smaller_example(tmp_path, monkeypatch):
    walk(tmp_path, monkeypatch, fast=True)
    assert (tmp_path / "my-model" / "calibration.json").is_file()
    assert (tmp_path / "my-labels" / "labelstudio" / "tasks.json").is_file()


@pytest.mark.slow
def test_the_walkthrough_runs_exactly_as_written(tmp_path, monkeypatch):
    walk(tmp_path, monkeypatch, fast=False)
