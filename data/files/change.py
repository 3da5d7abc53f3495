"""Several files of one folder changed at once, so that a crash leaves all of the old ones or all of the new.

Each new file goes to a temp beside its target (``O_EXCL | O_NOFOLLOW``) and is fsynced; then a small journal
(``.change.json``: target -> temp) is written, and from that moment the change has happened: the renames follow, and a
crash before they end is finished by the next writer or reader (:func:`recover_folder`, :func:`recover_if_free`). A
journal is replayed only inside its folder (dir-fd, no-follow). Single files are written by
:mod:`autorater.data.files.writes`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import secrets
import stat
from pathlib import Path, PurePosixPath
from typing import Callable, Iterable, Iterator

from autorater.data.files.base import (
    DIR_FLAGS,
    LOCK_FILE,
    NOFOLLOW,
    fsync_dir,
    naming,
    open_lock,
    open_new,
    temp_path,
)
from autorater.data.paths import PathError, open_regular, printable, relative_parts

CHANGE_FILE = ".change.json"  # the journal of a change of several files: once it exists, the change has happened
MAX_JOURNAL_BYTES = 16 << 20  # about 150,000 files in one change
_CHANGE_ID = re.compile(r"[0-9a-f]{16}")
_PART = re.compile(r"\..+\.[0-9a-f]{16}\.part")
_STRAY_TMP = re.compile(r"(.+?)\.(?:[0-9a-f]{8}\.)?tmp")  # group 1: the file it was to replace


class JournalError(ValueError):
    """A journal (``.change.json``) that cannot be replayed safely: not one autorater writes, or one that points
    through a symlink, at a folder or at a temp autorater never writes. Nothing was changed. ``why`` and ``fix``
    are what a :class:`autorater.data.suite.Problem` shows."""

    def __init__(self, root: Path, why: str):
        self.why = why
        self.fix = (f"delete {CHANGE_FILE} from the folder: autorater's own journals name files beside their temps, "
                    f"never a symlink, a folder or a path outside; then check it with `autorater suite validate`")
        super().__init__(f"{printable(str(root / CHANGE_FILE))}: {why}; nothing was changed (fix: {self.fix})")


def _temp_of(rel: PurePosixPath, change: str) -> str:
    """The temp a change writes the new content of ``rel`` into: ``.NAME.<change id>.part`` beside it."""
    return str(rel.with_name(f".{rel.name}.{change}.part"))


class FolderChange:
    """Several files of one folder written, replaced or removed all at once: after a crash (kill -9, a power cut) the
    folder holds either all of the old files or all of the new ones.

    Each new file is written beside its target under a hidden temp name (``.NAME.<change id>.part``, created with
    ``O_EXCL | O_NOFOLLOW``) and fsynced; then a small journal (``.change.json``: target -> temp) is written
    atomically: that is the moment the change happens. The temps are then renamed over their targets and the journal
    removed. A crash before the journal leaves only stray temps (removed by the next writer, ignored by readers); a
    crash after it is finished by the next writer or reader (:func:`recover_folder`), and readers that cannot finish
    it read through it (:func:`pending_files`). A change whose staged file is gone when it commits (another writer
    removed it) fails before its journal: the folder keeps its old files.

    The caller is the folder's one writer (it holds the folder's lock, :func:`folder_lock`, or owns a new folder).

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
        return _temp_of(PurePosixPath(rel), self.id)

    def _check(self, rel: str) -> str:
        p = PurePosixPath(rel)
        if p.is_absolute() or ".." in p.parts or not rel or rel in (CHANGE_FILE, LOCK_FILE):
            raise ValueError(f"{rel!r} is not a file inside {self.root} (a bug: please report it)")
        return str(p)

    def _new_temp(self, rel: str) -> Path:
        rel = self._check(rel)
        temp = self.root / self._temp(rel)
        temp.parent.mkdir(parents=True, exist_ok=True)
        self.staged[rel] = self._temp(rel)
        return temp

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Stage ``data`` as the new content of ``root/rel``."""
        temp = self._new_temp(rel)
        with naming(temp), open_new(temp) as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())

    def write_text(self, rel: str, text: str) -> None:
        """Stage UTF-8 ``text`` (UnicodeEncodeError on a lone surrogate, before anything of it is written)."""
        self.write_bytes(rel, text.encode("utf-8"))

    def place_file(self, rel: str, source: str | os.PathLike, link: bool = False,
                   expect: tuple[int, ...] | None = None) -> None:
        """Stage a copy (or, with ``link``, a hard link where the file system allows) of the file ``source``.

        The source is opened once, without following a symlink and without blocking on a FIFO, and checked through
        its descriptor, never its path: it must be a regular file and, given ``expect`` (:func:`identity` of the
        file checked before), that very file, unchanged. A file swapped after its check is a PathError, never
        copied.
        """
        import shutil

        with open_regular(source) as src:
            info = os.fstat(src.fileno())
            if expect is not None and identity(info) != tuple(expect):
                raise PathError(f"{printable(str(source))[:200]!r} changed after it was checked (fix: import again "
                                f"once nothing else is changing the file)", "changed")
            temp = self._new_temp(rel)
            if link and _linked(source, temp, info):
                return
            with naming(temp), open_new(temp) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
                dst.flush()
                os.fsync(dst.fileno())

    def remove(self, rel: str) -> None:
        """Stage the removal of ``root/rel`` (nothing if it does not exist)."""
        self.staged[self._check(rel)] = None

    def commit(self) -> None:
        """Make the change: the journal, then the renames (a no-op when nothing was staged). Every staged file must
        still be there (an OSError before the journal otherwise: nothing changes)."""
        if not self.staged:
            return
        with _opened(self.root, self.staged, staged=True):
            pass  # every temp is there, every target's folder reached without a symlink
        for folder in {(self.root / t).parent for t in self.staged.values() if t is not None} | {self.root}:
            fsync_dir(folder)
        journal = json.dumps({"change": self.id, "files": self.staged}, ensure_ascii=True).encode()
        tmp = temp_path(self.root / CHANGE_FILE)
        with naming(tmp), open_new(tmp) as f:
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


def identity(info: os.stat_result) -> tuple[int, ...]:
    """What tells one file from another and from its own later content: device, inode (reused once a file is
    deleted), size and the time of its last write in nanoseconds (not its ctime: a hard link changes that)."""
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


def _linked(source: str | os.PathLike, temp: Path, info: os.stat_result) -> bool:
    """Hard-link ``source`` at ``temp``; True when the link is the very file ``info`` describes (a source swapped
    since it was opened leaves nothing: the caller copies from its descriptor)."""
    try:
        os.link(source, temp, follow_symlinks=False)
    except OSError:
        return False  # another file system, or no links there: copy
    linked = os.lstat(temp)
    if stat.S_ISREG(linked.st_mode) and (linked.st_dev, linked.st_ino) == (info.st_dev, info.st_ino):
        return True
    temp.unlink(missing_ok=True)
    return False


def _read_journal(root: Path) -> dict[str, str | None] | None:
    """The files of the committed, unfinished change of ``root`` (target -> temp; None: remove the target), each
    checked by name to be a file inside the folder with the temp autorater writes beside it; None when there is no
    journal. JournalError when it is not one autorater wrote."""
    try:
        fd = os.open(root / CHANGE_FILE, os.O_RDONLY | os.O_NONBLOCK | NOFOLLOW | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as err:
        raise JournalError(root, "cannot be read: " + ("it is a symbolic link" if err.errno == errno.ELOOP else
                                                       str(err.strerror))) from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise JournalError(root, "is not a regular file")
        data = f.read(MAX_JOURNAL_BYTES + 1)
    if len(data) > MAX_JOURNAL_BYTES:
        raise JournalError(root, f"is larger than {MAX_JOURNAL_BYTES} bytes")
    try:
        obj = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        raise JournalError(root, "is not a journal autorater writes (not JSON)") from None
    change, files = (obj.get("change"), obj.get("files")) if isinstance(obj, dict) else (None, None)
    if not isinstance(change, str) or not _CHANGE_ID.fullmatch(change) or not isinstance(files, dict):
        raise JournalError(root, 'is not a journal autorater writes ("change": 16 hex digits, "files": an object)')
    for rel, temp in files.items():
        p = relative_parts(rel)
        shown = printable(rel)[:100]
        if p is None or not p.parts or str(p) in (CHANGE_FILE, LOCK_FILE):
            raise JournalError(root, f"names {shown!r}, which is not a file inside the folder")
        if not _file_name(rel):
            raise JournalError(root, f"names {shown!r}, which cannot be a file name (a lone surrogate)")
        if temp is not None and temp != _temp_of(p, change):
            raise JournalError(root, f"gives {printable(str(temp))[:100]!r} as the new content of {shown!r}, not "
                                     f"the temp autorater writes beside it ({_temp_of(p, change)!r})")
    return files


def _file_name(text: str) -> bool:
    try:
        os.fsencode(text)
    except UnicodeEncodeError:
        return False
    return True


@contextlib.contextmanager
def _opened(root: Path, files: dict[str, str | None],
            staged: bool = False) -> Iterator[list[tuple[str, int, str, str | None]]]:
    """The steps of a change, ``(target, folder descriptor, name, temp name or None)``, each target's folder opened
    from ``root`` one part at a time without following a symlink, so that nothing outside the folder can be reached
    through them; the target must not be a folder and its temp must be a regular file.

    A temp already gone was renamed by an earlier replay (the step is left out); for a commit's own change
    (``staged``) it is an OSError, as is anything unsafe (a JournalError when replaying a journal).
    """
    fds: dict[PurePosixPath, int] = {PurePosixPath(): os.open(root, DIR_FLAGS)}

    def refuse(why: str) -> Exception:
        return OSError(errno.EINVAL, f"cannot change {root}: {why}; nothing was changed") if staged \
            else JournalError(root, why)

    try:
        steps = []
        for rel, temp in files.items():
            p = PurePosixPath(rel)
            fd = _folder_fd(p.parent, fds, refuse)
            there = None if fd is None else _lstat(p.name, fd)
            if there is not None and stat.S_ISDIR(there.st_mode):
                raise refuse(f"it names the folder {printable(rel)[:100]!r}, and a change replaces files only")
            if temp is None:
                if there is not None:
                    steps.append((rel, fd, p.name, None))
                continue
            held = None if fd is None else _lstat(PurePosixPath(temp).name, fd)
            if held is None and staged:
                raise OSError(errno.ENOENT, f"the new content of {rel} is gone before the change was made "
                                            f"(another writer removed it); nothing was changed", str(root / temp))
            if held is not None and not stat.S_ISREG(held.st_mode):
                raise refuse(f"the new content of {printable(rel)[:100]!r} is not a regular file")
            if held is not None:
                steps.append((rel, fd, p.name, PurePosixPath(temp).name))
        yield steps
    finally:
        for fd in fds.values():
            os.close(fd)


def _folder_fd(folder: PurePosixPath, fds: dict[PurePosixPath, int], refuse) -> int | None:
    """``folder`` (relative to the root, whose descriptor is ``fds[PurePosixPath()]``) opened part by part with
    ``O_NOFOLLOW``; None when a part does not exist; ``refuse(why)`` raised when a part is a symlink or a file."""
    at = PurePosixPath()
    for part in folder.parts:
        below = at / part
        if below not in fds:
            try:
                fds[below] = os.open(part, DIR_FLAGS | NOFOLLOW, dir_fd=fds[at])
            except FileNotFoundError:
                return None
            except OSError as err:
                kind = "a symbolic link or a file" if err.errno in (errno.ELOOP, errno.ENOTDIR) else err.strerror
                raise refuse(f"it points through {printable(str(below))[:100]!r}, which is {kind}, not a folder of "
                             f"its own") from None
        at = below
    return fds[at]


def _lstat(name: str, fd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _apply(root: Path, files: dict[str, str | None]) -> None:
    """Replay a change inside ``root``: each temp renamed over its target (or the target removed), relative to its
    folder's descriptor; then the journal removed. JournalError, before anything is renamed, when a step is
    unsafe."""
    with _opened(root, files) as steps:
        for _, fd, name, temp in steps:
            with contextlib.suppress(FileNotFoundError):  # renamed already: a change finished twice is finished once
                if temp is None:
                    os.unlink(name, dir_fd=fd)
                else:
                    os.replace(temp, name, src_dir_fd=fd, dst_dir_fd=fd)
        for fd in {step[1] for step in steps}:
            with contextlib.suppress(OSError):
                os.fsync(fd)
    (root / CHANGE_FILE).unlink(missing_ok=True)
    fsync_dir(root)


def pending_files(root: str | os.PathLike) -> dict[str, Path | None]:
    """Where a reader finds the files of a committed but unfinished change: target -> the file that holds its new
    content (None: removed). Empty when the folder has no such change; JournalError when its journal cannot be
    replayed safely (the reader must not read through it either)."""
    root = Path(root)
    files = _read_journal(root)
    if not files:
        return {}
    with _opened(root, files) as steps:
        renamed = {rel: root / files[rel] for rel, _, _, temp in steps if temp is not None}  # a gone temp: renamed
    return renamed | {rel: None for rel, temp in files.items() if temp is None}


def recover_folder(root: str | os.PathLike) -> bool:
    """Finish a change a crash interrupted (roll forward when its journal exists) and remove the temps of changes
    that never happened. For the folder's writer (it holds the lock); True when something was done. JournalError
    when the journal cannot be replayed safely: then nothing is changed."""
    root = Path(root)
    done = False
    files = _read_journal(root)
    if files is not None:
        _apply(root, files)
        done = True
    if root.is_dir():
        done |= remove_stale_temps(root, parts=True) > 0
    return done


def remove_stale_temps(root: str | os.PathLike, subfolders: Iterable[str] = (), parts: bool = False,
                       owned: Callable[[str], bool] | None = None) -> int:
    """Remove what crashed writers left in ``root``: the single-file writer's temps (``NAME.<random>.tmp``; with
    ``owned``, only those of the files ``owned(NAME)`` names) in the folder and in ``subfolders``, and with ``parts``
    the temps of changes that never happened (``.NAME.<id>.part``) in the folder and every sub-folder. Sub-folders
    are opened without following a symlink. For the folder's writer; returns how many were removed."""
    subfolders = set(subfolders)
    top = os.open(root, DIR_FLAGS)
    try:
        removed = _remove_temps(top, tmp=True, part=parts, owned=owned)
        for entry in list(os.scandir(top)):
            if entry.is_dir(follow_symlinks=False) and (parts or entry.name in subfolders):
                try:
                    sub = os.open(entry.name, DIR_FLAGS | NOFOLLOW, dir_fd=top)
                except OSError:
                    continue
                try:
                    removed += _remove_temps(sub, tmp=entry.name in subfolders, part=parts, owned=owned)
                finally:
                    os.close(sub)
    finally:
        os.close(top)
    return removed


def _remove_temps(fd: int, tmp: bool, part: bool, owned: Callable[[str], bool] | None) -> int:
    def stale(name: str) -> bool:
        if part and _PART.fullmatch(name):
            return True
        found = _STRAY_TMP.fullmatch(name) if tmp else None
        return found is not None and (owned is None or owned(found.group(1)))

    names = [e.name for e in os.scandir(fd) if not e.is_dir(follow_symlinks=False) and stale(e.name)]
    for name in names:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=fd)
    return len(names)


def recover_if_free(root: str | os.PathLike) -> bool:
    """:func:`recover_folder` when a change is pending and no writer holds the folder's lock (:func:`folder_lock`);
    False when there is nothing to do or a writer is at work (readers then read through the journal)."""
    root = Path(root)
    if not (root / CHANGE_FILE).exists():
        return False
    try:
        fd = open_lock(root)
    except OSError:
        return False  # a read-only suite, or a lock that is not a file: readers read through the journal
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        try:
            return recover_folder(root)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


__all__ = ["CHANGE_FILE", "MAX_JOURNAL_BYTES", "FolderChange", "JournalError", "identity", "pending_files",
           "recover_folder", "recover_if_free", "remove_stale_temps"]
