"""Issue 65: every numeric flag of every subcommand is bounded before any work. The test walks the parser the CLI
builds (``autorater.app.cli.build_parser``: every subcommand, the worlds' options included), not a hand list, and
feeds each numeric flag values out of its range: a one-line error naming the flag, its range and the fix, exit
status 2, no traceback, nothing written."""

from __future__ import annotations

import argparse
import math
import os

import pytest

from autorater.app import cli

# What people (and the attacks of issue 65) pass: zero, negative, huge, 2**70, not finite, 5,001 digits, not a number
VALUES = ["0", "-1", "-0.5", "10000000000000", str(2 ** 70), "nan", "inf", "-inf", "1e400", "1" + "0" * 5000, "abc",
          "1e3", "0x10"]


def numeric_flags(parser: argparse.ArgumentParser, path: tuple = ()):
    """(subcommand path, flag, its action) of every optional argument that takes a value with a ``type``, in every
    subcommand the CLI has."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from numeric_flags(sub, (*path, name))
        elif action.option_strings and action.type is not None:
            yield path, action.option_strings[-1], action


def _inside(action, text: str) -> bool:
    """Whether ``text`` is a value the flag's own range takes (then the parser must take it)."""
    t = action.type
    try:
        value = int(text) if t.__name__ == "integer" else float(text)
    except ValueError:
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return (t.low < value if t.above else t.low <= value) and (value < t.high if t.below else value <= t.high)


@pytest.fixture(scope="module")
def flags():
    parser = cli.build_parser()
    found = list(numeric_flags(parser))
    return parser, [(path, flag, action) for path, flag, action in found if hasattr(action.type, "low")], found


def test_every_numeric_flag_has_a_bounded_type(flags):
    _, bounded, everything = flags
    assert len(bounded) >= 50  # label, train, serve, suite generate, the worlds' options...
    plain = [(p, f) for p, f, a in everything if a.type in (int, float)]
    assert plain == [], f"flags read with a bare int/float, unbounded: {plain}"
    for path, flag, action in bounded:
        t = action.type
        assert math.isfinite(t.low) and math.isfinite(t.high) and t.low <= t.high, (path, flag)
        # a value the product can write and read back: job.json, model folders and MLflow hold 64-bit integers
        assert abs(t.high) < 2 ** 63 and abs(t.low) < 2 ** 63, (path, flag, t.low, t.high)


def test_out_of_range_values_are_a_one_line_error_naming_the_flag(flags, capsys):
    parser, bounded, _ = flags
    refused = 0
    for path, flag, action in bounded:
        for text in VALUES:
            if _inside(action, text):  # a value in range is taken (the error, if any, is a required flag's)
                with pytest.raises(SystemExit):
                    parser.parse_args([*path, f"{flag}={text}", "--help"])
                assert f"argument {flag}" not in capsys.readouterr().err, (path, flag, text)
                continue
            with pytest.raises(SystemExit) as exited:
                parser.parse_known_args([*path, f"{flag}={text}"])
            err = capsys.readouterr().err
            assert exited.value.code == 2, (path, flag, text)
            assert err.count("\n") == 1 and "Traceback" not in err, (path, flag, text, err)
            bounds = [str(b) if isinstance(b, int) else f"{b:g}" for b in (action.type.low, action.type.high)]
            assert f"argument {flag}" in err and "fix: pass " in err, (path, flag, text, err)
            assert all(f" {b} " in err or f" {b})" in err for b in bounds), (path, flag, text, err)
            refused += 1
    assert refused >= 10 * len(bounded)  # most of the values are out of every flag's range


def test_the_attacks_of_issue_65_stop_before_any_work(tmp_path, capsys, monkeypatch):
    """``label --batch-size 10000000000000`` and ``--seed 2**70`` wrote a folder the product then refused, ``train
    --epochs 0`` an untrained model; now each is refused by the CLI itself before it reads or writes anything."""
    monkeypatch.chdir(tmp_path)
    model, suite = tmp_path / "no-model", tmp_path / "no-suite"  # never opened: the flags are checked first
    cases = [["label", "--model", str(model), "--suite", str(suite), "--out", "labels", "--batch-size",
              "10000000000000"],
             ["label", "--model", str(model), "--suite", str(suite), "--out", "labels", "--seed", str(2 ** 70)],
             ["train", "--suite", str(suite), "--out", "model", "--epochs", "0"],
             ["suite", "generate", "--out", "suite", "--scenarios", "0"],
             ["serve", "--model", str(model), "--media-root", ".", "--port", "70000"],
             ["calibrate", "--model", str(model), "--suite", str(suite), "--confidence", "1"]]
    for argv in cases:
        with pytest.raises(SystemExit) as exited:
            cli.main(argv)
        err = capsys.readouterr().err
        assert exited.value.code == 2 and err.count("\n") == 1 and f"argument {argv[-2]}" in err, (argv, err)
        assert err.startswith(f"autorater {argv[0]}") and "fix: pass " in err
    assert os.listdir(tmp_path) == []


def test_other_argument_errors_are_one_line_with_where_the_help_is(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["label"])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.count("\n") == 1
    assert "required: --model, --suite, --out" in err and "autorater label --help" in err


# ----------------------------------------------------------------------------------------------
# Path flags


def _path_values(root) -> dict[str, str]:
    """What a path flag may get wrong, made under ``root``: missing, empty, a folder, a file, a FIFO, a symlink loop,
    a device, 5,000 characters, a lone surrogate (undecodable bytes of argv), a terminal escape."""
    (root / "dir").mkdir()
    (root / "file.txt").write_text("x")
    os.mkfifo(root / "fifo")
    os.symlink(root / "loop", root / "loop")
    return {"missing": str(root / "nope" / "x"), "empty": "", "dir": str(root / "dir"), "file": str(root / "file.txt"),
            "fifo": str(root / "fifo"), "loop": str(root / "loop"), "device": "/dev/null", "long": "a" * 5000,
            "surrogate": str(root / "s\udcff"), "escape": str(root / "a\x1b[31mb")}


@pytest.fixture(scope="module")
def labelled(env, tmp_path_factory):
    import json
    import shutil

    from autorater.data.suite import Annotation, Suite
    from autorater.serving.labelling.label import label_suite
    from autorater.serving.labelstudio.formats import annotations_to_export

    root = tmp_path_factory.mktemp("paths")
    shutil.copytree(env["suite"].root, root / "suite")
    label_suite(env["model"], Suite.load(root / "suite"), root / "labels", audit_share=0.3, progress=False)
    tasks = json.loads((root / "labels" / "labelstudio" / "tasks.json").read_text())
    export = annotations_to_export(tasks, [Annotation(t["data"]["continuation_id"], "h1", "success", marker_s=0.5)
                                           for t in tasks])
    (root / "export.json").write_text(json.dumps(export))
    return {"suite": str(root / "suite"), "labels": str(root / "labels"), "export": str(root / "export.json"),
            "model": str(env["model"])}


PATH_CASES = {  # a command with one path flag left to fill ({}), the others valid
    "ingest --labels": ["ingest", "--labels", "{}", "--export", "{export}"],
    "ingest --export": ["ingest", "--labels", "{labels}", "--export", "{}", "--no-suite"],
    "certify": ["certify", "{}"],
    "leaderboard --labels": ["leaderboard", "--labels", "{}"],
    "label --model": ["label", "--model", "{}", "--suite", "{suite}", "--out", "{out}"],
    "label --suite": ["label", "--model", "{model}", "--suite", "{}", "--out", "{out}"],
    "suite validate": ["suite", "validate", "{}", "--quiet"],
    "suite diff": ["suite", "diff", "{suite}", "{}"],
    "train --config": ["train", "--suite", "{suite}", "--out", "{out}", "--config", "{}", "--no-tracking"],
}


@pytest.mark.parametrize("case", list(PATH_CASES))
def test_a_bad_path_is_a_short_error_line_never_a_traceback(case, labelled, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    values = _path_values(tmp_path)
    before = sorted(os.listdir(tmp_path))
    for name, value in values.items():
        argv = [a if a[:1] != "{" else value if a == "{}" else labelled.get(a[1:-1], str(tmp_path / "out"))
                for a in PATH_CASES[case]]
        try:
            code = cli.main(argv)
        except SystemExit as exited:  # argparse's own refusals
            code = exited.code
        err = capsys.readouterr().err.strip().splitlines()
        assert code in (1, 2), (case, name, code)
        assert err and len(err[-1]) < 1200 and "Traceback" not in "\n".join(err), (case, name, err[-3:])
        assert not any(c in line for line in err for c in "\x1b\x00"), (case, name)  # nothing drives the terminal
    assert sorted(os.listdir(tmp_path)) == before  # nothing written, whatever was refused


def test_a_cache_folder_that_is_not_utf8_is_refused_before_anything_is_encoded(tmp_path):
    """``train --cache-dir`` (and ``pack``) given undecodable bytes (a lone surrogate in Python) ended in a
    SafetensorError traceback after encoding; the cache refuses it when it is opened, naming the flag."""
    from autorater.training.inputs.cache import FeatureCache

    with pytest.raises(ValueError, match=r"s\\udcff.*not a UTF-8 path.*--cache-dir"):
        FeatureCache(tmp_path / "s\udcff")
    assert FeatureCache(tmp_path / "sé").root.name == "sé"
