"""What the walkthrough tests share (tests/test_your_data.py, tests/test_versions_walkthrough.py): a page's commands
and the output it shows under each, and the check that a run printed the same first and last lines (as shapes).
Not a test module (no ``test_`` prefix)."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Callable


def console_commands(doc: Path) -> list[tuple[str, list[str]]]:
    """(command, the output lines shown under it) for each ``$ `` line of the page's ``console`` blocks."""
    blocks = re.findall(r"```console\n(.*?)```", doc.read_text(encoding="utf-8"), flags=re.S)
    commands: list[tuple[str, list[str]]] = []
    for block in blocks:
        for line in block.splitlines():
            if line.startswith("$ "):
                commands.append((line[2:], []))
            elif commands:
                commands[-1][1].append(line)
    return commands


def check_shown(command: str, output: str, shown: list[str], shape: Callable[[str], str], first: bool = True) -> None:
    """The run printed what the page shows under ``command``: its first line (unless ``first`` is False) and its last
    one, as ``shape`` s; ``[...]`` on the page skips that end."""
    printed = [line for line in output.splitlines() if line.strip()]
    shown = [line for line in shown if line.strip()]
    if not shown:
        return
    assert printed, f"{command} printed nothing; the page shows {shown[0]!r}"
    if first and shown[0] != "[...]":
        assert shape(printed[0]) == shape(shown[0]), command
    if shown[-1] != "[...]":
        assert shape(printed[-1]) == shape(shown[-1]), command


@contextlib.contextmanager
def in_page_folder(folder: Path, monkeypatch):
    """Run a page's commands in ``folder``, on one intra-op thread (tiny models on 2 shared cores), restored after."""
    import torch

    from autorater.app import cli

    monkeypatch.chdir(folder)
    monkeypatch.setattr(cli.common, "threads", lambda: None)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
