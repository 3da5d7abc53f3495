"""What every durable write stands on: temp files beside their target (``NAME.<random>.tmp``, created with
``O_EXCL | O_NOFOLLOW``), fsync of files and folders, the JSON text the product writes, content hashes, and a
folder's one writer (its lock: the ``.lock`` file, never opened through a symlink).

Example:
    >>> with folder_lock("runs/labels", "labelling job"):   # doctest: +SKIP
    ...     fsync_dir("runs/labels")
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Iterator


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


NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)


@contextlib.contextmanager
def naming(path: str | os.PathLike) -> Iterator[None]:
    """Give ``path`` to an OSError that names no file (a write past the size limit, "File too large"; a full disk),
    so that the message says which file."""
    try:
        yield
    except OSError as err:
        if err.filename is None and err.errno is not None:
            raise OSError(err.errno, err.strerror, str(path)) from None
        raise


def temp_path(path: str | os.PathLike) -> Path:
    """A fresh temp file name beside ``path`` (same folder, so the rename is atomic): ``NAME.<random>.tmp``, so that
    a file or symlink planted under a predictable name is never written through."""
    path = Path(path)
    return path.with_name(f"{path.name}.{secrets.token_hex(4)}.tmp")


def open_new(path: str | os.PathLike, mode: str = "wb"):
    """Create ``path`` and open it for writing; refused (``FileExistsError``) when anything is there already, a
    symlink included (``O_CREAT | O_EXCL | O_NOFOLLOW``)."""
    fd = os.open(str(path), _NEW_FILE, 0o666)
    try:
        return os.fdopen(fd, mode, **({"encoding": "utf-8"} if "b" not in mode else {}))
    except BaseException:
        os.close(fd)
        raise










def json_text(obj, indent: int | None = 1) -> str:
    """``obj`` as JSON text ending in a newline; NaN and infinities are refused (ValueError), not written."""
    return json.dumps(obj, indent=indent, ensure_ascii=False, allow_nan=False) + "\n"


def jsonl_text(rows) -> str:
    """JSON Lines text of dicts (NaN and infinities refused)."""
    return "".join(json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n" for r in rows)


def append_line_durably(path: str | os.PathLike, line: str) -> None:
    """Append one line (a log, such as a problems file) and fsync it."""
    with naming(path), open(path, "a", encoding="utf-8") as f:
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


# ----------------------------------------------------------------------------------------------
# A folder's one writer


LOCK_FILE = ".lock"  # the writers' lock of a folder (a suite, a labels folder)


class FolderBusyError(ValueError):
    """Another writer holds the folder's lock, and the caller would not wait."""


def open_lock(folder: str | os.PathLike) -> int:
    """``folder/.lock`` opened for :func:`fcntl.flock` (created if missing): never through a symlink, never a FIFO
    (an OSError naming it, with the fix). Returns the descriptor."""
    path = Path(folder) / LOCK_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK | NOFOLLOW | os.O_CLOEXEC, 0o666)
    except OSError as err:
        if err.errno not in (errno.ELOOP, errno.ENXIO):
            raise
        fd = None
    if fd is not None and stat.S_ISREG(os.fstat(fd).st_mode):
        return fd
    if fd is not None:
        os.close(fd)
    raise OSError(errno.EINVAL, "the lock file is not a plain file (a symbolic link, a FIFO) (fix: delete it)",
                  str(path))


@contextlib.contextmanager
def folder_lock(folder: str | os.PathLike, what: str, wait: bool = False,
                busy: type[Exception] = FolderBusyError) -> Iterator[None]:
    """An exclusive lock on ``folder`` (its ``.lock``, created with the folder if need be) while one writer works
    there. A second writer waits for it (``wait``) or is refused at once with ``busy`` ("another ``what`` is writing
    there"). A new folder is locked like an existing one."""
    folder = Path(folder)
    while True:
        folder.mkdir(parents=True, exist_ok=True)
        fd = open_lock(folder)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise busy(f"{folder} is busy: another {what} is writing there; wait for it to finish") from None
        if _still_linked(fd, folder / LOCK_FILE):
            break
        os.close(fd)  # the writer before removed the new folder it left empty (its lock with it): start again
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _still_linked(fd: int, path: Path) -> bool:
    try:
        there = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    held = os.fstat(fd)
    return (there.st_dev, there.st_ino) == (held.st_dev, held.st_ino)


def remove_if_unused(folder: str | os.PathLike) -> bool:
    """Remove ``folder`` when it holds nothing but its lock: a new folder a writer created and then wrote nothing
    into. For the writer holding the lock (one waiting for it starts again, :func:`folder_lock`); True when
    removed."""
    folder = Path(folder)
    try:
        if any(p.name != LOCK_FILE for p in folder.iterdir()):
            return False
        (folder / LOCK_FILE).unlink(missing_ok=True)
        folder.rmdir()
    except OSError:
        return False
    return True




__all__ = ["DIR_FLAGS", "LOCK_FILE", "NOFOLLOW", "FolderBusyError", "append_line_durably", "content_sha1",
           "folder_lock", "fsync_dir", "json_text", "jsonl_text", "naming", "open_lock", "open_new", "remove_if_unused",
           "sha1_file", "temp_path"]
