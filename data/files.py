"""Writing files so that a crash leaves the old file or the new one, never a part (fsync + atomic replace).

Every file the product writes goes through here (or through a library that is handed a temp path that
is then fsynced and renamed with :func:`commit`): the bytes go to ``NAME.tmp`` beside the target, are
flushed and fsynced, the temp file is renamed over the target, and the folder is fsynced so that the
rename itself survives a power cut.

Example:
    >>> write_text_atomic("out/summary.json", json_text({"n": 3}))   # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path


def fsync_dir(folder: str | os.PathLike) -> None:
    """fsync a folder (its entries: a rename inside it). Best effort where the OS does not allow it."""
    try:
        fd = os.open(str(folder), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def temp_path(path: str | os.PathLike) -> Path:
    """The temp file written before ``path`` is replaced (same folder, so the rename is atomic)."""
    path = Path(path)
    return path.with_name(path.name + ".tmp")


def commit(tmp: str | os.PathLike, path: str | os.PathLike) -> Path:
    """fsync the finished temp file ``tmp``, rename it over ``path`` and fsync the folder."""
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(Path(path).parent)
    return Path(path)


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically and durably."""
    path = Path(path)
    tmp = temp_path(path)
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)
    return path


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write UTF-8 ``text`` to ``path`` atomically and durably."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def json_text(obj, indent: int | None = 1) -> str:
    """``obj`` as JSON text ending in a newline; NaN and infinities are refused (ValueError), not written."""
    return json.dumps(obj, indent=indent, ensure_ascii=False, allow_nan=False) + "\n"


def jsonl_text(rows) -> str:
    """JSON Lines text of dicts (NaN and infinities refused)."""
    return "".join(json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n" for r in rows)


def append_line_durably(path: str | os.PathLike, line: str) -> None:
    """Append one line (a log, such as a problems file) and fsync it."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(line if line.endswith("\n") else line + "\n")
        f.flush()
        os.fsync(f.fileno())


def content_sha1(path: str | os.PathLike) -> str:
    """The SHA-1 of a file's bytes, read in 1 MiB blocks (OSError when it cannot be read)."""
    h = hashlib.sha1()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def sha1_file(path: str | os.PathLike) -> str | None:
    """:func:`content_sha1`, or None when there is no such file."""
    return content_sha1(path) if Path(path).is_file() else None


__all__ = ["append_line_durably", "commit", "content_sha1", "fsync_dir", "json_text", "jsonl_text", "sha1_file",
           "temp_path", "write_bytes_atomic", "write_text_atomic"]
