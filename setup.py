"""Packaging beside pyproject.toml: the package list, found in the tree rather than written out.

The layers keep their folders at the repository's top level and install under one namespace (``autorater.data``,
``autorater.training``, ``autorater.calibration``, ``autorater.serving``, ``autorater.app``; no bare ``data`` package
in a user's environment). Every package under those folders is found here, so a new one (a world's package under
``data/worlds/``) needs no edit of the packaging.
"""

from pathlib import Path

from setuptools import find_packages, setup

LAYERS = {"autorater": "autorater", "autorater.data": "data", "autorater.training": "training",
          "autorater.calibration": "calibration", "autorater.serving": "serving", "autorater.app": "app"}


def packages(root: Path = Path(__file__).resolve().parent) -> list[str]:
    """Every package the wheel installs: each layer and the packages found under its folder."""
    return sorted({name for layer, folder in LAYERS.items()
                   for name in [layer, *(f"{layer}.{p}" for p in find_packages(root / folder))]})


if __name__ == "__main__":
    setup(package_dir=LAYERS, packages=packages())
