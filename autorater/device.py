"""Where models run: one policy for every entry point (the CLI, the library, the service, the Ray actors).

``"auto"`` (the default everywhere) is a GPU when torch sees one, else the CPU; any torch device name
("cpu", "cuda", "cuda:1") is taken as it is. Inputs follow the model (``module_device``); outputs come back to the
CPU for decoding. A Ray actor asks its cluster for a GPU by what the *cluster* has (``ray_gpus``), not by what the
driver's machine has, and resolves ``"auto"`` where it runs.

This module imports nothing of autorater's: the model and the encoders sit above it.

Example:
    >>> resolve_device("cpu")
    device(type='cpu')
    >>> ray_gpus("auto", {"CPU": 8.0})
    0
"""

from __future__ import annotations

import itertools

import torch
from torch import nn

DEFAULT_DEVICE = "auto"  # every command's --device and every library function's device= default


def resolve_device(name: str = DEFAULT_DEVICE) -> torch.device:
    """``"auto"``: CUDA when a GPU is present, else the CPU; or any torch device name ("cpu", "cuda:1")."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise ValueError(f"unknown device {name!r} (fix: auto, cpu, cuda or cuda:N)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {name!r} asked for, but torch sees no GPU here (fix: --device auto or cpu)")
    return device


def module_device(module: nn.Module, default: torch.device | str = "cpu") -> torch.device:
    """The device of a module's first parameter or buffer (``default`` for a module with neither)."""
    for t in itertools.chain(module.parameters(), module.buffers()):
        return t.device
    return torch.device(default)


def ray_gpus(device: str, cluster_resources: dict | None) -> int:
    """GPUs one Ray rating actor asks for: 0 for the CPU; 1 for a CUDA device, or for ``"auto"`` when the cluster
    (``ray.cluster_resources()``) has any, wherever the driver runs. The actor resolves ``device`` itself."""
    if device == "auto":
        return 1 if (cluster_resources or {}).get("GPU", 0) > 0 else 0
    try:
        kind = torch.device(device).type
    except (RuntimeError, TypeError):
        raise ValueError(f"unknown device {device!r} (fix: auto, cpu, cuda or cuda:N)") from None
    return 1 if kind == "cuda" else 0


__all__ = ["DEFAULT_DEVICE", "module_device", "ray_gpus", "resolve_device"]
