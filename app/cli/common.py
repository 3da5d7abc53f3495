"""What the CLI's commands share: the offline environment, threads, the model folder ``--model`` names, the
arguments several subcommands take."""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path


def set_offline_env() -> None:
    """Nothing may download at run time; MLflow sends no telemetry."""
    for key, value in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MLFLOW_DISABLE_TELEMETRY": "true",
                       "DO_NOT_TRACK": "1", "TOKENIZERS_PARALLELISM": "false"}.items():
        os.environ.setdefault(key, value)


def csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose errors are one line: the command, what is wrong (a flag's value: the flag, the allowed
    range and the fix) and, where the message has no fix, where the help is. Exit status 2, as argparse's."""

    def error(self, message: str):
        from autorater.data.paths import printable

        text = printable(" ".join(str(message).split()))
        text = text if len(text) <= 1000 else f"{text[:600]} ... {text[-300:]}"
        fix = "" if "fix:" in text else f" (fix: see `{self.prog} --help`)"
        self.exit(2, f"{self.prog}: error: {text}{fix}\n")


MAX_SEED = 2 ** 32 - 1  # every --seed: what numpy's seeds take, and what the folders written with it read back
MAX_BATCH = 1024  # --batch-size: continuations rated at once (each a clip of frames in memory)
MAX_EPOCHS = 10_000  # --epochs: at least one (no untrained model is written), and a run that ends


def _shown(value) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


def _in_range(convert, what: str, low, high, above: bool = False, below: bool = False):
    """An argparse ``type``: ``convert(text)``, finite, from ``low`` to ``high`` (``above``: greater than ``low``;
    ``below``: less than ``high``); else argparse prints the flag, the range and the fix, before the command does any
    work. The bounds are kept on the function (``low``, ``high``, ``above``, ``below``) for the test that walks every
    flag of the CLI."""
    span = (f"{'greater than' if above else 'from'} {_shown(low)} {'and less than' if below else 'to'} "
            f"{_shown(high)}")

    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:  # not a number, or an integer of over 4,300 digits
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not {what} (fix: pass {what} {span})") from None
        inside = (low < value if above else low <= value) and (value < high if below else value <= high)
        if (isinstance(value, float) and not math.isfinite(value)) or not inside:
            raise argparse.ArgumentTypeError(f"{text[:40]} is out of range (fix: pass {what} {span})")
        return value

    parse.__name__ = "integer" if convert is int else "number"
    parse.low, parse.high, parse.above, parse.below = low, high, above, below
    return parse


def int_in(low: int, high: int):
    """An argparse ``type``: an integer from ``low`` to ``high``."""
    return _in_range(int, "an integer", low, high)


def float_in(low: float, high: float, above: bool = False, below: bool = False):
    """An argparse ``type``: a finite number from ``low`` to ``high`` (``above``: greater than ``low``; ``below``:
    less than ``high``); ``--frame-rate -1`` is refused, so is nan."""
    return _in_range(float, "a number", low, high, above, below)


def seed_arg(p, help: str = "the seed") -> None:
    """``--seed``, an integer from 0 to ``MAX_SEED`` (default 0)."""
    p.add_argument("--seed", type=int_in(0, MAX_SEED), default=0, help=f"{help} (0 to {MAX_SEED})")


def threads() -> None:
    """Torch threads: the machine's cores, at most 8."""
    import torch

    torch.set_num_threads(max(1, min(os.cpu_count() or 1, 8)))


def model_folder(arg: str, tracking_uri: str | None, workdir: str) -> Path:
    """The local model folder ``--model`` names: a folder, or a registry URI such as models:/autorater@champion
    (downloaded under ``workdir/models``). Opening it is the Rater's job (``Rater.load``)."""
    from autorater.mlflow_registry import default_tracking_uri, resolve_model_arg
    from autorater.model import Autorater

    if arg.startswith("models:/"):
        return Path(resolve_model_arg(arg, tracking_uri or default_tracking_uri(workdir), Path(workdir) / "models"))
    return Autorater.check_folder(arg)


def rater(args):
    """``Rater.load`` of ``--model`` on ``--device`` (``--allow-unverified``: weights without a checksum)."""
    from autorater.rater import Rater

    return Rater.load(model_folder(args.model, args.tracking_uri, args.workdir), args.device,
                      allow_unverified=args.allow_unverified)


def device_arg(p):
    from autorater.device import DEFAULT_DEVICE

    p.add_argument("--device", default=DEFAULT_DEVICE, help="auto (CUDA when a GPU is present, else the CPU), cpu, "
                                                     "cuda or cuda:N")

def unverified_arg(p):
    p.add_argument("--allow-unverified", action="store_true",
                   help="load a model folder whose weights carry no checksum (saved before it existed); "
                        "without it such a folder is refused")

def loading_args(p):
    """``--device`` and ``--allow-unverified``: every command that loads a model folder to run it."""
    device_arg(p)
    unverified_arg(p)


def model_args(p, tracking=True):
    p.add_argument("--tracking-uri", help="MLflow tracking URI (default: sqlite under --workdir)")
    p.add_argument("--workdir", default="runs", help="local store for MLflow, caches and downloaded models")
    p.add_argument("--quiet", action="store_true", help="no progress bars")

def model_and_suite(p, model_help="model folder, or models:/autorater@champion", suite_help=None):
    p.add_argument("--model", required=True, help=model_help)
    p.add_argument("--suite", required=True, help=suite_help)


__all__ = ["MAX_BATCH", "MAX_EPOCHS", "MAX_SEED", "Parser", "csv", "device_arg", "float_in", "int_in", "seed_arg",
           "loading_args", "model_and_suite", "model_args", "model_folder", "rater",
           "set_offline_env", "threads", "unverified_arg"]
