"""Writing files so that a crash leaves the old file or the new one, never a part (fsync + atomic replace).

Every file the product writes goes through here (or through a library that is handed a temp path that
is then fsynced and renamed with :func:`commit`): the bytes go to ``NAME.tmp`` beside the target, are
flushed and fsynced, the temp file is renamed over the target, and the folder is fsynced so that the
rename itself survives a power cut.

Example:
    >>> write_text_atomic("out/summary.json", json_text({"n": 3}))   # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import secrets
from pathlib import Path, PurePosixPath


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


_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


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
        with open_new(tmp) as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
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


# ----------------------------------------------------------------------------------------------
# Several files of one folder changed at once


CHANGE_FILE = ".change.json"  # the journal of a change of several files: once it exists, the change has happened
_PART = re.compile(r"\..+\.[0-9a-f]{16}\.part")
_STRAY_TMP = re.compile(r".+\.(?:[0-9a-f]{8}\.)?tmp")


class FolderChange:
    """Several files of one folder written, replaced or removed all at once: after a crash (kill -9, a power cut) the
    folder holds either all of the old files or all of the new ones.

    Each new file is written beside its target under a hidden temp name (``.NAME.<change id>.part``, created with
    ``O_EXCL | O_NOFOLLOW``) and fsynced; then a small journal (``.change.json``: target -> temp) is written
    atomically: that is the moment the change happens. The temps are then renamed over their targets and the journal
    removed. A crash before the journal leaves only stray temps (removed by the next writer, ignored by readers); a
    crash after it is finished by the next writer or reader (:func:`recover_folder`), and readers that cannot finish
    it read through it (:func:`pending_files`).

    The caller is the folder's one writer (it holds the folder's lock, or owns a new folder).

    Example:
        >>> with FolderChange("my-suite") as change:                      # doctest: +SKIP
        ...     change.write_text("scenarios.jsonl", scenarios_text)
        ...     change.write_text("continuations.jsonl", continuations_text)
    """

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        recover_folder(self.root)
        self.id = secrets.token_hex(8)
        self.staged: dict[str, str | None] = {}  # target -> temp (relative to root); None: remove the target

    def _temp(self, rel: str) -> str:
        p = PurePosixPath(rel)
        return str(p.with_name(f".{p.name}.{self.id}.part"))

    def _check(self, rel: str) -> str:
        p = PurePosixPath(rel)
        if p.is_absolute() or ".." in p.parts or not rel or rel == CHANGE_FILE:
            raise ValueError(f"{rel!r} is not a file inside {self.root} (a bug: please report it)")
        return str(p)

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Stage ``data`` as the new content of ``root/rel``."""
        rel = self._check(rel)
        temp = self.root / self._temp(rel)
        temp.parent.mkdir(parents=True, exist_ok=True)
        self.staged[rel] = self._temp(rel)
        with open_new(temp) as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())

    def write_text(self, rel: str, text: str) -> None:
        """Stage UTF-8 ``text`` (UnicodeEncodeError on a lone surrogate, before anything of it is written)."""
        self.write_bytes(rel, text.encode("utf-8"))

    def place_file(self, rel: str, source: str | os.PathLike, link: bool = False) -> None:
        """Stage a copy (or, with ``link``, a hard link where the file system allows) of the file ``source``."""
        import shutil

        rel = self._check(rel)
        temp = self.root / self._temp(rel)
        temp.parent.mkdir(parents=True, exist_ok=True)
        self.staged[rel] = self._temp(rel)
        if link:
            try:
                os.link(source, temp, follow_symlinks=False)
                return
            except OSError:
                pass  # another file system, or no links there: copy
        with open(source, "rb") as src, open_new(temp) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
            dst.flush()
            os.fsync(dst.fileno())

    def remove(self, rel: str) -> None:
        """Stage the removal of ``root/rel`` (nothing if it does not exist)."""
        self.staged[self._check(rel)] = None

    def commit(self) -> None:
        """Make the change: the journal, then the renames (a no-op when nothing was staged)."""
        if not self.staged:
            return
        for folder in {(self.root / t).parent for t in self.staged.values() if t is not None} | {self.root}:
            fsync_dir(folder)
        journal = json.dumps({"change": self.id, "files": self.staged}, ensure_ascii=True).encode()
        tmp = temp_path(self.root / CHANGE_FILE)
        with open_new(tmp) as f:
            f.write(journal)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.root / CHANGE_FILE)  # the change has happened
        fsync_dir(self.root)
        _apply(self.root, self.staged)
        self.staged = {}

    def abort(self) -> None:
        """Forget the staged files (their temps are removed)."""
        for temp in self.staged.values():
            if temp is not None:
                (self.root / temp).unlink(missing_ok=True)
        self.staged = {}

    def __enter__(self) -> "FolderChange":
        return self

    def __exit__(self, kind, value, tb) -> None:
        if kind is None:
            self.commit()
        else:
            self.abort()


def _journal(root: Path) -> dict[str, str | None] | None:
    """The files of a committed change not yet finished (None when there is none, or the journal is not ours)."""
    try:
        obj = json.loads((root / CHANGE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    files = obj.get("files") if isinstance(obj, dict) else None
    if not isinstance(files, dict):
        return None
    out = {}
    for rel, temp in files.items():
        parts = PurePosixPath(str(rel)).parts
        if not parts or ".." in parts or PurePosixPath(str(rel)).is_absolute() or \
                (temp is not None and (not isinstance(temp, str) or not _PART.fullmatch(PurePosixPath(temp).name)
                                       or ".." in PurePosixPath(temp).parts or PurePosixPath(temp).is_absolute())):
            return None  # not a journal this module wrote
        out[str(rel)] = temp
    return out


def _apply(root: Path, files: dict[str, str | None]) -> None:
    folders = set()
    for rel, temp in files.items():
        target = root / rel
        folders.add(target.parent)
        if temp is None:
            target.unlink(missing_ok=True)
            continue
        try:
            os.replace(root / temp, target)
        except FileNotFoundError:
            pass  # renamed already (a change finished twice is finished once)
    for folder in folders:
        fsync_dir(folder)
    (root / CHANGE_FILE).unlink(missing_ok=True)
    fsync_dir(root)


def pending_files(root: str | os.PathLike) -> dict[str, Path | None]:
    """Where a reader finds the files of a committed but unfinished change: target -> the file that holds its new
    content (None: removed). Empty when the folder has no such change."""
    root = Path(root)
    files = _journal(root) if (root / CHANGE_FILE).exists() else None
    if not files:
        return {}
    out: dict[str, Path | None] = {}
    for rel, temp in files.items():
        if temp is None:
            out[rel] = None
        elif (root / temp).exists():
            out[rel] = root / temp
    return out


def recover_folder(root: str | os.PathLike) -> bool:
    """Finish a change a crash interrupted (roll forward when its journal exists) and remove the temps of changes
    that never happened. For the folder's writer (it holds the lock); True when something was done."""
    root = Path(root)
    done = False
    if (root / CHANGE_FILE).exists():
        files = _journal(root)
        if files is not None:
            _apply(root, files)
        else:
            (root / CHANGE_FILE).unlink(missing_ok=True)
        done = True
    if not root.is_dir():
        return done
    for folder in [root] + [p for p in root.iterdir() if p.is_dir() and not p.is_symlink()]:
        for p in folder.iterdir():
            if _PART.fullmatch(p.name) or (folder == root and _STRAY_TMP.fullmatch(p.name)):
                if p.is_file() or p.is_symlink():
                    p.unlink(missing_ok=True)
                    done = True
    return done


def recover_if_free(root: str | os.PathLike) -> bool:
    """:func:`recover_folder` when a change is pending and no writer holds the folder's lock (``.lock``, the one
    ``autorater.serving.labelling.folder.folder_lock`` takes); False when there is nothing to do or a writer is at
    work."""
    root = Path(root)
    if not (root / CHANGE_FILE).exists():
        return False
    try:
        f = open(root / ".lock", "a")
    except OSError:
        return False  # a read-only suite: readers read through the journal
    with f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        try:
            return recover_folder(root)
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _settle(folder: Path) -> None:
    """Before a single file of ``folder`` is replaced: finish a change of several files a crash left there, so that
    finishing it later cannot undo this write."""
    if (folder / CHANGE_FILE).exists():
        with contextlib.suppress(OSError):
            recover_folder(folder)


__all__ = ["CHANGE_FILE", "FolderChange", "append_line_durably", "commit", "content_sha1", "fsync_dir", "json_text",
           "jsonl_text", "open_new", "pending_files", "recover_folder", "recover_if_free", "sha1_file", "temp_path",
           "write_bytes_atomic", "write_text_atomic"]
