"""Names and paths that come from other people: one check for an id that becomes a file name, one resolution of a
path under a root that refuses to leave it, and text made safe to print.

Every place that turns outside input into a file the product reads or writes goes through here: the service's media
paths (``autorater.serving.service.guard.resolve_media``), the imports (a table's videos, a Label Studio export's and
project's), ``suite propose`` and ``suite diff``.

- :func:`check_name`: an id used in a file name (a continuation id: ``videos/<id>.mp4``) is letters, digits and
  ``-_.``, does not start with a dot and is at most ``MAX_NAME_CHARS`` long; anything else is a ValueError that says
  so (``../../escaped`` and ``/etc/x`` never reach a path).
- :func:`resolve_under`: a relative path (or one already under the root) resolved with its symlinks and refused
  when it leads outside the root (``PathError``, with ``kind`` ``"outside"``, ``"missing"``, ``"not_file"`` or
  ``"unreadable"``); with ``regular=True`` only a regular file is accepted, so a FIFO or a device (``/dev/zero``)
  is never opened.
- :func:`open_regular`: open a file for reading that is a regular file when it is opened (``O_NONBLOCK``, then
  ``fstat``): a FIFO planted after the check does not hang the reader.
- :func:`printable`: text with its control characters and lone surrogates written as escapes, for messages;
  :func:`unprintable` finds the first such character (a field the product prints may hold none).

Example:
    >>> check_name("c000913")
    'c000913'
    >>> is_name("../../escaped")
    False
    >>> printable("red\\x1b[31m")
    'red\\\\x1b[31m'
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path, PurePosixPath

MAX_NAME_CHARS = 128
_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,%d}" % (MAX_NAME_CHARS - 1))
_WHITESPACE = str.maketrans("\t\n\r", "   ")
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029\u202a-\u202e\u2066-\u2069]")


class PathError(ValueError):
    """A path that may not be used: ``kind`` says why (``outside``, ``missing``, ``not_file``, ``unreadable``)."""

    def __init__(self, message: str, kind: str):
        self.kind = kind
        super().__init__(message)


def is_name(value) -> bool:
    """True when ``value`` may be used as (part of) a file name: see :func:`check_name`."""
    return isinstance(value, str) and _NAME.fullmatch(value) is not None


def check_name(value, what: str = "id") -> str:
    """``value`` if it may be used as (part of) a file name; a ValueError that says what to fix otherwise.

    A name is 1..``MAX_NAME_CHARS`` letters, digits, ``-``, ``_`` and ``.``, and does not start with a dot (no
    ``..``, no ``/``, no hidden file)."""
    if is_name(value):
        return value
    shown = printable(str(value))
    shown = shown if len(shown) <= 80 else shown[:80] + "..."
    raise ValueError(f"{what} {shown!r} is not a name: it becomes a file name, so it must be 1 to {MAX_NAME_CHARS} "
                     f"letters, digits, '-', '_' or '.', not starting with '.' (fix: rename it, e.g. "
                     f"{_suggest(str(value))!r})")


def _suggest(value: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", value).strip("-.")[:MAX_NAME_CHARS] or "c1"


def relative_parts(value: str) -> PurePosixPath | None:
    """``value`` as a relative POSIX path that stays inside its folder (no ``..``, no absolute path, no ``\\``, no
    drive, no NUL), else None."""
    if not isinstance(value, str) or not value or "\x00" in value or "\\" in value or \
            (len(value) > 1 and value[1] == ":"):
        return None
    p = PurePosixPath(value)
    if p.is_absolute() or ".." in p.parts:
        return None
    return p


def resolve_under(root: str | os.PathLike, path: str | os.PathLike, *, regular: bool = True,
                  must_exist: bool = True, what: str = "file") -> Path:
    """``path`` (relative to ``root``, or absolute and under it) resolved with its symlinks, and checked to stay
    inside ``root``.

    Args:
        root: the folder nothing may leave.
        path: a relative path (a POSIX string is checked for ``..`` before anything is resolved) or a path under root.
        regular: the resolved path must be a regular file (not a FIFO, a device, a socket or a folder).
        must_exist: refuse a path that does not exist (a path to write to passes ``False``).
        what: how messages name the file ("video", "table row's video").

    Raises:
        PathError: ``kind`` ``"outside"`` (it leads out of the root: ``..``, an absolute path elsewhere, a symlink
            that points out), ``"missing"``, ``"not_file"`` or ``"unreadable"`` (a loop of symlinks, a name too
            long, ...). The message names the path as given, never the resolved one.
    """
    shown = printable(str(path))[:200]
    if isinstance(path, str) and not Path(path).is_absolute():
        if relative_parts(path) is None:
            raise PathError(f"{what} {shown!r} leaves its folder (fix: a path relative to {Path(root).name or root}, "
                            f"without '..')", "outside")
    try:
        base = Path(root).resolve()
        candidate = Path(path) if Path(path).is_absolute() else Path(root) / path
        resolved = candidate.resolve()  # symlinks followed: one that points out is caught below
        outside = resolved != base and base not in resolved.parents
        info = None if outside else _stat(resolved)
    except (OSError, ValueError, RuntimeError) as err:  # a loop of symlinks (RuntimeError), a name too long, NUL
        why = "a loop of symbolic links" if isinstance(err, RuntimeError) or getattr(err, "errno", None) == 40 \
            else getattr(err, "strerror", None) or err.__class__.__name__
        raise PathError(f"{what} {shown!r} cannot be opened: {why} (fix: name a file under the folder)",
                        "unreadable") from None
    if outside:
        raise PathError(f"{what} {shown!r} leads outside its folder (a symlink or a path that points elsewhere) "
                        f"(fix: copy the file into the folder)", "outside")
    if info is None:
        if must_exist:
            raise PathError(f"{what} {shown!r} does not exist (fix: correct the path)", "missing")
        return resolved
    if regular and not stat.S_ISREG(info.st_mode):
        raise PathError(f"{what} {shown!r} is not a regular file (a folder, a FIFO or a device) (fix: name a file)",
                        "not_file")
    return resolved


def _stat(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except FileNotFoundError:
        return None


def open_regular(path: str | os.PathLike):
    """``path`` opened for reading in binary, refused (``PathError`` ``not_file``) unless it is a regular file once
    opened: the open does not block on a FIFO, and a symlink as the last component is not followed (a PathError
    too)."""
    try:
        fd = os.open(str(path), os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC)
    except OSError as err:
        if err.errno != errno.ELOOP:
            raise
        raise PathError(f"{printable(str(path))[:200]!r} is a symbolic link (fix: name the file itself)",
                        "not_file") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise PathError(f"{printable(str(path))[:200]!r} is not a regular file (fix: name a file)", "not_file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def printable(text: str) -> str:
    """``text`` with control characters (C0, C1, DEL), lone surrogates and bidirectional overrides written as
    escapes (``\\x1b``, ``\\ud800``), so that a value from a file cannot move the cursor, recolour the terminal or
    fail to encode when it is printed."""
    return _UNPRINTABLE.sub(lambda m: m.group(0).encode("unicode_escape", "backslashreplace").decode("ascii")
                            if not 0xD800 <= ord(m.group(0)) <= 0xDFFF else f"\\u{ord(m.group(0)):04x}", text)


def unprintable(text: str, whitespace: bool = False) -> str | None:
    """The first character of ``text`` that :func:`printable` would escape (a control character, a terminal escape,
    a lone surrogate, a line separator or a bidirectional override such as U+202E), escaped; None when there is
    none. Fields the product prints (ids, categories, tags, instructions) must have none; free text
    (``whitespace``: an instruction) may hold tabs and line breaks."""
    found = _UNPRINTABLE.search(text.translate(_WHITESPACE) if whitespace else text)
    return None if found is None else printable(found.group(0))


def encodable(text: str) -> bool:
    """True when ``text`` can be written as UTF-8 (no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


__all__ = ["MAX_NAME_CHARS", "PathError", "check_name", "encodable", "is_name", "open_regular", "printable",
           "relative_parts", "resolve_under", "unprintable"]
