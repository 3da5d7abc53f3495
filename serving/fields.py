"""Values that arrive from other people (requests, webhooks, exports), read with bounds before any arithmetic.

Python's ``math.isfinite`` and ``float()`` raise ``OverflowError`` on an integer of 309 digits or more, and
``str()`` raises ``ValueError`` past 4,300 digits: a JSON number can be either. Every number taken from outside
goes through :func:`number_in` (or :func:`integer_in`), which compares it with its bounds exactly, as the
integer or float it is, and only then converts it. Times go through :func:`parse_time`, which reads a time
without a timezone as UTC and refuses one beyond now plus :data:`MAX_CLOCK_SKEW_S`. No FastAPI here: ingest
uses these too.

Example:
    >>> number_in(10 ** 400, 0.1, 1000.0) is None, number_in(8, 0.1, 1000.0), number_in(True, 0, 1) is None
    (True, 8.0, True)
    >>> parse_time("2026-11-23T12:00:00", "updated_at", now=None).isoformat()
    '2026-11-23T12:00:00+00:00'
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta, timezone
from typing import Any

MAX_ID_CHARS = 128  # an annotation, task or project id kept from a request (longer ones are refused)
MAX_CLOCK_SKEW_S = 300.0  # a time up to five minutes ahead of this machine's clock is accepted (clocks drift)


def number_in(value: Any, low: float, high: float) -> float | None:
    """``value`` as a float when it is a JSON number (not a boolean) in ``low..high``, else None; never raises."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return float(value) if low <= value <= high else None  # int vs float compares exactly: no overflow


def integer_in(value: Any, low: int, high: int) -> int | None:
    """``value`` when it is a JSON integer (not a boolean, not 8.0) in ``low..high``, else None; never raises."""
    ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
    return value if ok else None


def plain(value: Any, depth: int = 0) -> Any:
    """A JSON-safe, short copy of a value to show in an error (no NaN, no huge number, nothing deep or long)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value if abs(value) < 2 ** 53 else f"an integer of about {_digits(value)} digits"
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple)) and depth < 4:
        return [plain(v, depth + 1) for v in value[:10]]
    if isinstance(value, dict) and depth < 4:
        return {str(k)[:60]: plain(v, depth + 1) for k, v in list(value.items())[:10]}
    if isinstance(value, (list, tuple, dict)):
        return f"a {type(value).__name__} nested deeper than 4"
    return str(value)[:200]


def _digits(value: int) -> int:
    return max(1, int(abs(value).bit_length() * 0.30103))


def shown(value: Any, limit: int = 80) -> str:
    """``value`` as it may appear in a message: JSON, at most ``limit`` characters."""
    return json.dumps(plain(value), ensure_ascii=False)[:limit]


def bounded_id(value: Any) -> int | str | None:
    """An id kept from a request: an integer of up to 18 digits or a string of up to :data:`MAX_ID_CHARS`
    characters; None for anything else (a boolean, a float, a longer id)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and abs(value) < 10 ** 18:
        return value
    if isinstance(value, str) and 0 < len(value) <= MAX_ID_CHARS:
        return value
    return None


def loads(text: str | bytes, what: str) -> Any:
    """JSON text parsed strictly: ValueError naming ``what`` for text that is not JSON, holds NaN or Infinity,
    an integer of over 4,300 digits, or nests too deeply for Python's stack."""
    def refuse(name):
        raise ValueError(f"{name} is not a JSON number")

    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        return json.loads(text, parse_constant=refuse)
    except RecursionError:
        raise ValueError(f"{what} is nested too deeply to be what it should be") from None
    except (UnicodeDecodeError, ValueError) as err:
        raise ValueError(f"{what} is not JSON: {str(err)[:200]}") from None


def parse_time(value: Any, name: str, now: datetime | None, skew_s: float = MAX_CLOCK_SKEW_S) -> datetime | None:
    """An ISO 8601 time as an aware UTC datetime (a time without a timezone is read as UTC); None when absent.

    Raises:
        ValueError naming ``name``: not a string, not an ISO 8601 time, or later than ``now`` plus ``skew_s``
        (``now`` None: no such check, as when a history is replayed).
    """
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > 64:
        raise ValueError(f"field '{name}' must be an ISO 8601 time, got {shown(value, 60)}")
    try:
        stamp = datetime.fromisoformat(value.strip().replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"field '{name}' must be an ISO 8601 time such as 2026-11-23T12:00:00Z, got "
                         f"{shown(value, 60)}") from None
    stamp = stamp.replace(tzinfo=timezone.utc) if stamp.tzinfo is None else stamp.astimezone(timezone.utc)
    if now is not None and stamp > now + timedelta(seconds=skew_s):
        raise ValueError(f"field '{name}' is {stamp.isoformat()}, later than this machine's clock "
                         f"({now.isoformat(timespec='seconds')}) by more than {skew_s:g} s: a clock that far ahead "
                         f"would freeze the label (fix: correct the sending machine's clock)")
    return stamp


def utc_now() -> datetime:
    """This machine's clock, in UTC."""
    return datetime.now(timezone.utc)


__all__ = ["MAX_CLOCK_SKEW_S", "MAX_ID_CHARS", "bounded_id", "integer_in", "loads", "number_in", "parse_time", "plain",
           "shown", "utc_now"]
