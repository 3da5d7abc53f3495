"""Values that arrive from other people (requests, webhooks, exports), read with bounds before any arithmetic.

Python's ``math.isfinite`` and ``float()`` raise ``OverflowError`` on an integer of 309 digits or more, and
``str()`` raises ``ValueError`` past 4,300 digits: a JSON number can be either. Every number taken from outside
goes through :func:`number_in` (or :func:`integer_in`), which compares it with its bounds exactly, as the
integer or float it is, and only then converts it. Times go through :func:`parse_time`, which reads a time
without a timezone as UTC and refuses one beyond now plus :data:`MAX_CLOCK_SKEW_S`, or one whose UTC conversion
leaves the years 1..9999 (``0001-01-01T00:00:00+01:00``). Text that a JSON body carries may hold lone surrogates
(``"\\ud800"``), which UTF-8 cannot encode: :func:`json_safe` makes every string of a response encodable (the
surrogate shown as the escape ``\\ud800``), and :func:`bounded_id` refuses such an id. No FastAPI here: ingest uses
these too.

Example:
    >>> number_in(10 ** 400, 0.1, 1000.0) is None, number_in(8, 0.1, 1000.0), number_in(True, 0, 1) is None
    (True, 8.0, True)
    >>> parse_time("2026-11-23T12:00:00", "updated_at", now=None).isoformat()
    '2026-11-23T12:00:00+00:00'
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime, timedelta, timezone
from typing import Any

MAX_ID_CHARS = 128  # an annotation, task or project id kept from a request (longer ones are refused)
MAX_CLOCK_SKEW_S = 30.0  # a time up to 30 s ahead of this machine's clock is accepted (clocks drift a little): a
#                          time further ahead would freeze its label against real corrections until the clock caught up


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
        return {safe_text(str(k)[:60]): plain(v, depth + 1) for k, v in list(value.items())[:10]}
    if isinstance(value, (list, tuple, dict)):
        return f"a {type(value).__name__} nested deeper than 4"
    return safe_text(str(value)[:200])


def has_surrogates(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (``"\\ud800"`` from a JSON escape): text UTF-8 cannot encode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def safe_text(text: str) -> str:
    """``text`` with every lone surrogate written as its escape (``\\ud800``, six characters): encodable as UTF-8."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8") if has_surrogates(text) else text


def json_safe(value: Any, depth: int = 0) -> Any:
    """``value`` (JSON-like) with every string, keys too, made encodable by :func:`safe_text`; nothing else changes."""
    if isinstance(value, str):
        return safe_text(value)
    if depth > 64:
        return value
    if isinstance(value, dict):
        return {safe_text(k) if isinstance(k, str) else k: json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v, depth + 1) for v in value]
    return value


def _digits(value: int) -> int:
    return max(1, int(abs(value).bit_length() * 0.30103))


def shown(value: Any, limit: int = 80) -> str:
    """``value`` as it may appear in a message: JSON, at most ``limit`` characters."""
    return json.dumps(plain(value), ensure_ascii=False)[:limit]


def bounded_id(value: Any) -> int | str | None:
    """An id kept from a request: an integer of up to 18 digits or a string of up to :data:`MAX_ID_CHARS`
    characters of text; None for anything else (a boolean, a float, a longer id, a lone surrogate)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and abs(value) < 10 ** 18:
        return value
    if isinstance(value, str) and 0 < len(value) <= MAX_ID_CHARS and not has_surrogates(value):
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
        ValueError naming ``name``: not a string, not an ISO 8601 time, outside the years 1..9999 once converted to
        UTC, or later than ``now`` plus ``skew_s`` (``now`` None: no such check, as when a history is replayed).
    """
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > 64:
        raise ValueError(f"field '{name}' must be an ISO 8601 time, got {shown(value, 60)}")
    try:
        stamp = datetime.fromisoformat(value.strip().replace("z", "Z").replace("Z", "+00:00"))
        stamp = stamp.replace(tzinfo=timezone.utc) if stamp.tzinfo is None else stamp.astimezone(timezone.utc)
    except OverflowError:  # 0001-01-01T00:00:00+01:00 is in year 0 in UTC
        raise ValueError(f"field '{name}' is {shown(value, 60)}, outside the years 1..9999 once converted to UTC "
                         f"(fix: send the time Label Studio recorded, in UTC)") from None
    except ValueError:
        raise ValueError(f"field '{name}' must be an ISO 8601 time such as 2026-11-23T12:00:00Z, got "
                         f"{shown(value, 60)}") from None
    if now is not None and stamp > now + timedelta(seconds=skew_s):
        raise ValueError(f"field '{name}' is {stamp.isoformat()}, later than this machine's clock "
                         f"({now.isoformat(timespec='seconds')}) by more than {skew_s:g} s: a clock that far ahead "
                         f"would freeze the label (fix: correct the sending machine's clock)")
    return stamp


def without_roots(text: str, roots: dict[str, str]) -> str:
    """``text`` with each server path of ``roots`` replaced by its public name, the longest first: a file under a
    root becomes the name plus its relative path (``roots[media_root] == ""``: relative to the media root)."""
    for root in sorted((r for r in roots if r.rstrip("/")), key=len, reverse=True):  # never "/" itself
        name, path = roots[root], re.escape(root.rstrip("/"))
        text = re.sub(rf"(?<![\w.-]){path}/", lambda _: f"{name}/" if name else "", text)
        text = re.sub(rf"(?<![\w.-]){path}(?![\w-])(?!\.\w)", lambda _: name or "the media root", text)
    return text


def utc_now() -> datetime:
    """This machine's clock, in UTC."""
    return datetime.now(timezone.utc)


__all__ = ["MAX_CLOCK_SKEW_S", "MAX_ID_CHARS", "bounded_id", "has_surrogates", "integer_in", "json_safe", "loads",
           "number_in", "parse_time", "plain", "safe_text", "shown", "utc_now", "without_roots"]
