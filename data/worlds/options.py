"""A world's generation options: a frozen dataclass whose fields are its options (:func:`option`: the default, the
help of the CLI flag, the allowed values), checked alike for every world (:class:`WorldOptions`), and what the CLI
reads of them (:func:`option_infos`).

Example:
    >>> [info.name for info in option_infos(NoOptions)]
    []
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import typing
from dataclasses import dataclass, field
from typing import Any, Sequence


def option(default: Any, help: str, *, choices: Sequence | None = None, low: float | None = None,
           high: float | None = None) -> Any:
    """A field of a world's options dataclass: its default, its help (the CLI flag's), and what
    :class:`WorldOptions` checks for every world (a value in ``choices``; a number from ``low`` to ``high``)."""
    return field(default=default, metadata={"help": help, "choices": tuple(choices) if choices else None,
                                            "low": low, "high": high})


@dataclass(frozen=True)
class WorldOptions:
    """The base of a world's options: one field per option (:func:`option`), defaults the world's recipe.

    On construction, for every world: ``None`` is the option's default; a comma-separated string or a list
    becomes a ``tuple[str, ...]`` option's tuple; numbers are converted to the field's type; ``choices`` and
    ``low`` / ``high`` are checked. A world adds its own checks in ``__post_init__`` (after calling this one),
    raising ValueError that names the option and the fix.

    Example:
        >>> @dataclass(frozen=True)
        ... class SquareOptions(WorldOptions):
        ...     side: int = option(8, "squares per side", low=2, high=64)
        >>> SquareOptions(side=None).side
        8
        >>> SquareOptions(side=1)
        Traceback (most recent call last):
        ...
        ValueError: option side (--side) must be a finite number from 2 to 64, got 1
    """

    def __post_init__(self):
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None:
                value = f.default
            kind, _ = _kind(hints[f.name])
            if value is not None:
                value = _convert(f.name, value, kind)
                meta = f.metadata
                items = value if kind is tuple else (value,)
                if meta.get("choices") is not None:
                    bad = [v for v in items if v not in meta["choices"]]
                    if bad:
                        raise ValueError(f"option {flag(f.name)} must be one of {', '.join(map(str, meta['choices']))}"
                                         f", got {', '.join(map(repr, bad))}")
                low, high = meta.get("low"), meta.get("high")
                if kind in (int, float) and (not math.isfinite(value) or (low is not None and value < low)
                                             or (high is not None and value > high)):
                    raise ValueError(f"option {flag(f.name)} must be a finite number{_range(low, high)}, got {value}")
            object.__setattr__(self, f.name, value)


@dataclass(frozen=True)
class NoOptions(WorldOptions):
    """A world with no options of this kind (BabyAI's swaps)."""


def _range(low: float | None, high: float | None) -> str:
    if low is not None and high is not None:
        return f" from {low:g} to {high:g}"
    return f" >= {low:g}" if low is not None else f" <= {high:g}" if high is not None else ""


def flag(name: str) -> str:
    """An option's name and its CLI flag: ``image_size (--image-size)``."""
    return f"{name} (--{name.replace('_', '-')})"


def _kind(hint) -> tuple[type, bool]:
    """``(int | float | str | bool | tuple, optional)`` of a field's type hint."""
    args = typing.get_args(hint)
    optional = type(None) in args
    if optional:
        rest = [a for a in args if a is not type(None)]
        hint = rest[0] if len(rest) == 1 else hint
    origin = typing.get_origin(hint) or hint
    if origin in (tuple, list):
        return tuple, optional
    if origin not in (int, float, str, bool):
        raise TypeError(f"an option is an int, float, str, bool or tuple[str, ...] (optional or not), got {hint}")
    return origin, optional


def _convert(name: str, value, kind: type):
    if kind is tuple:
        if isinstance(value, str):
            return tuple(v.strip() for v in value.split(",") if v.strip())
        return tuple(value)
    if kind is bool:
        if not isinstance(value, bool):
            raise ValueError(f"option {flag(name)} is true or false, got {value!r}")
        return value
    if kind in (int, float) and (isinstance(value, bool) or not isinstance(value, numbers.Real)):
        raise ValueError(f"option {flag(name)} must be a number, got {value!r}")
    if kind is int and value != int(value):
        raise ValueError(f"option {flag(name)} must be a whole number, got {value}")
    return kind(value)


@dataclass(frozen=True)
class OptionInfo:
    """One option as the CLI shows it: name, type (``int``, ``float``, ``str``, ``bool`` or ``tuple``: a
    comma-separated list), default, help and the checked values."""

    name: str
    kind: type
    default: Any
    help: str
    choices: tuple | None = None
    low: float | None = None
    high: float | None = None


def option_infos(options: type[WorldOptions]) -> list[OptionInfo]:
    """The options of a world's options dataclass, in order."""
    hints = typing.get_type_hints(options)
    return [OptionInfo(f.name, _kind(hints[f.name])[0], f.default, f.metadata.get("help", ""),
                       f.metadata.get("choices"), f.metadata.get("low"), f.metadata.get("high"))
            for f in dataclasses.fields(options)]


__all__ = ["NoOptions", "OptionInfo", "WorldOptions", "flag", "option", "option_infos"]
