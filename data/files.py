"""Writing files so that a crash leaves the old file or the new one, never a part (fsync + atomic replace).

Every file the product writes goes through here (or through a library that is handed a temp path that
is then fsynced and renamed with :func:`commit`): the bytes go to ``NAME.<random>.tmp`` beside the target, are
flushed and fsynced, the temp file is renamed over the target, and the folder is fsynced so that the
rename itself survives a power cut. An error of a write names its file ("File too large: summary.json").

Several files of one folder change at once through :class:`FolderChange` (temps, a journal ``.change.json``, the
renames); a journal is replayed only inside its folder (:func:`recover_folder`). A folder's one writer holds its
lock (:func:`folder_lock`, the ``.lock`` file, never opened through a symlink).

Example:
    >>> write_text_atomic("out/summary.json", json_text({"n": 3}))   # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import secrets
import stat
from pathlib import Path, PurePosixPath
from typing import Callable, Iterable, Iterator

from autorater.data.paths import PathError, open_regular, printable, relative_parts


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


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_DIR = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)


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
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK | _NOFOLLOW | os.O_CLOEXEC, 0o666)
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


# ----------------------------------------------------------------------------------------------
# Several files of one folder changed at once


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
        fd = os.open(root / CHANGE_FILE, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | os.O_CLOEXEC)
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
    fds: dict[PurePosixPath, int] = {PurePosixPath(): os.open(root, _DIR)}

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
                fds[below] = os.open(part, _DIR | _NOFOLLOW, dir_fd=fds[at])
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
    top = os.open(root, _DIR)
    try:
        removed = _remove_temps(top, tmp=True, part=parts, owned=owned)
        for entry in list(os.scandir(top)):
            if entry.is_dir(follow_symlinks=False) and (parts or entry.name in subfolders):
                try:
                    sub = os.open(entry.name, _DIR | _NOFOLLOW, dir_fd=top)
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


def _settle(folder: Path) -> None:
    """Before a single file of ``folder`` is replaced: finish a change of several files a crash left there, so that
    finishing it later cannot undo this write."""
    if (folder / CHANGE_FILE).exists():
        with contextlib.suppress(OSError):
            recover_folder(folder)


__all__ = ["CHANGE_FILE", "LOCK_FILE", "MAX_JOURNAL_BYTES", "FolderBusyError", "FolderChange", "JournalError",
           "append_line_durably", "commit", "content_sha1", "folder_lock", "fsync_dir", "identity", "json_text",
           "jsonl_text", "naming", "open_lock", "open_new", "pending_files", "recover_folder", "recover_if_free",
           "remove_if_unused", "remove_stale_temps", "sha1_file", "temp_path", "write_bytes_atomic",
           "write_text_atomic"]
