"""Lazy exports for a package's ``__init__`` (PEP 562): its public names, each imported from its home
module when first asked for, so that importing the package imports none of its heavy dependencies.

Example:
    In ``training/__init__.py``:

    >>> __all__, __getattr__ = lazy_exports("training", {"autorater.training.train": ["TrainConfig", "TrainResult"]})
    >>> __all__
    ['TrainConfig', 'TrainResult']
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence


def lazy_exports(package: str, homes: Mapping[str, Sequence[str]]) -> tuple[list[str], Callable[[str], object]]:
    """``__all__`` and a module ``__getattr__`` for ``package``.

    Args:
        package: the package's ``__name__``.
        homes: home module -> the names it gives the package. A name must not be a submodule's name too
            (``package.<submodule>`` becomes the module once that is imported).

    Returns:
        The sorted names (the package's ``__all__``) and the ``__getattr__`` that imports one from its home
        module and keeps it in the package.
    """
    home = {name: module for module, names in homes.items() for name in names}

    def __getattr__(name: str):
        if name not in home:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    return sorted(home), __getattr__


__all__ = ["lazy_exports"]
