"""Writing one file so that a crash leaves the old file or the new one, never a part (fsync + atomic replace).

The bytes go to ``NAME.<random>.tmp`` beside the target, are flushed and fsynced, the temp file is renamed over the
target, and the folder is fsynced so that the rename itself survives a power cut. An error of a write names its file
("File too large: summary.json"). Before a file is replaced, a change of several files a crash left in its folder is
finished (:mod:`autorater.data.files.change`), so that finishing it later cannot undo this write.

Example:
    >>> write_text_atomic("out/summary.json", "{}")   # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from autorater.data.files.base import fsync_dir, naming, open_new, temp_path
from autorater.data.files.change import CHANGE_FILE, recover_folder
from autorater.data.paths import printable


def commit(tmp: str | os.PathLike, path: str | os.PathLike) -> Path:
    """fsync the finished temp file ``tmp``, rename it over ``path`` and fsync the folder."""
    fd = os.open(str(tmp), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    _settle(Path(path).parent)
    os.replace(tmp, path)
    fsync_dir(Path(path).parent)
    return Path(path)


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically and durably (the temp file created with ``O_EXCL | O_NOFOLLOW``)."""
    path = Path(path)
    _settle(path.parent)
    tmp = temp_path(path)
    try:
        with naming(path), open_new(tmp) as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.replace(tmp, path)
        except IsADirectoryError as err:  # named by its temp: say which file it was to replace
            raise IsADirectoryError(err.errno, f"{err.strerror} (a folder is where the file would be written)",
                                    str(path)) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
    return path


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write UTF-8 ``text`` to ``path`` atomically and durably; text UTF-8 cannot hold (a lone surrogate, read from a
    file changed by hand) is a ValueError naming the file and the line, and nothing is written."""
    return write_bytes_atomic(path, _utf8(text, path))


def _utf8(text: str, path: str | os.PathLike) -> bytes:
    """``text`` as UTF-8 bytes for ``path``; a lone surrogate is a ValueError naming the file, the line and the text
    around it (escaped), never a UnicodeEncodeError that names no file."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as err:
        line = text.count("\n", 0, err.start) + 1
        around = printable(text[max(0, err.start - 40):err.end + 20])
        raise ValueError(f"cannot write {printable(str(path))}: its line {line} would hold text UTF-8 cannot hold (a "
                         f"lone surrogate): ...{around}...; nothing was written (fix: the text came from a file "
                         f"changed by hand or a value passed in: correct it)") from None


def _settle(folder: Path) -> None:
    """Before a single file of ``folder`` is replaced: finish a change of several files a crash left there, so that
    finishing it later cannot undo this write."""
    if (folder / CHANGE_FILE).exists():
        with contextlib.suppress(OSError):
            recover_folder(folder)


__all__ = ["commit", "write_bytes_atomic", "write_text_atomic"]
