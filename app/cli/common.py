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


def _in_range(convert, what: str, low, high):
    """An argparse ``type``: ``convert(text)``, finite, from ``low`` to ``high`` (else argparse prints the fix)."""
    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not {what} (fix: pass a number from {low:g} to "
                                             f"{high:g})") from None
        if (isinstance(value, float) and not math.isfinite(value)) or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text[:40]} is out of range (fix: pass a number from {low:g} to "
                                             f"{high:g})")
        return value

    parse.__name__ = "integer" if convert is int else "number"
    return parse


def int_in(low: int, high: int):
    """An argparse ``type``: an integer from ``low`` to ``high``."""
    return _in_range(int, "an integer", low, high)


def float_in(low: float, high: float):
    """An argparse ``type``: a finite number from ``low`` to ``high`` (``--frame-rate -1`` is refused, so is nan)."""
    return _in_range(float, "a number", low, high)


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


__all__ = ["csv", "device_arg", "float_in", "int_in",
           "loading_args", "model_and_suite", "model_args", "model_folder", "rater",
           "set_offline_env", "threads", "unverified_arg"]
