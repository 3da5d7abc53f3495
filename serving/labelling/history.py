"""The label history: every change to a set of labels, one event a line, in arrival order; the labels follow from it.

A store is two files in one folder: the labels (a suite's ``annotations.jsonl``; a labels folder's
``human_annotations.jsonl``) and their history (``annotations_history.jsonl``; ``human_annotations_history.jsonl``),
one JSON event a line::

    {"event": 7, "action": "replace", "key": ["ls", "c000913", "345"], "version": "2026-11-23T12:05:00+00:00",
     "bump": 0, "via": "webhook ANNOTATION_UPDATED", "received_at": "2026-11-23T12:05:01+00:00", "row": {...}}
    {"event": 8, "action": "delete", "ls_annotation_id": "345", "via": "webhook ANNOTATIONS_DELETED", ...}

**The labels are a pure function of the history.** The labels file is the rows the history never touched (a
suite's own annotations, in their order), then the rows the history holds, in the order their key first appeared;
:meth:`LabelHistory.rebuild` computes it from the events alone, and every write writes exactly that (a crash between
the history and the labels file is made good by the next write). A history written before this format (plain rows
that were replaced) is kept as it is and skipped; a label of such a folder that an event touches is first
``adopt``-ed into the history, with the version it had.

**Which label wins** (:func:`decide`). A label's key is its Label Studio annotation id (with the continuation), else
its content. Its version is Label Studio's own clock: ``updated_at``, else ``created_at`` for a creation or an
export; a time without a timezone is read as UTC, and one later than this machine's clock plus a small skew
(serving.fields.MAX_CLOCK_SKEW_S) is refused, so a far-future clock cannot freeze a label. **A creation never
replaces a label of its id** (it is the first version, whatever its times say: a late or replayed creation is stale
or a duplicate). An update without a time comes after the version it updates (arrival order): ``(version, bump +
1)``. A newer version replaces the label, an older one is stale, the same one with the same row is a duplicate (with
another row: stale, the first kept). **An annotation id belongs to one continuation**: a row that gives a live id
another continuation is a ``conflict`` and changes nothing. **Deletions are tombstones**: once an annotation id is
deleted, every later creation or update of it is refused (Label Studio gives a re-created annotation a new id). The
ids of one deletion are one event; ids the history never held (a deletion before its creation) are kept as
tombstones too, but only the latest :data:`MAX_UNSEEN_TOMBSTONES` of them, so a flood of unknown ids costs
bounded memory and disk.

**A write costs what it changes, not the history's length.** Events are appended (fsynced; a torn last line, never
acknowledged, is cut off before the next append), and the fold of the history up to a point is kept in a snapshot
beside it (``annotations_history.snapshot.json``: the live labels, the tombstones, the event number and the byte
offset it covers, with a check of the bytes before that offset). A write reads the snapshot and the events after it,
and writes a new snapshot once those pass :data:`SNAPSHOT_AFTER_BYTES`; a snapshot that does not match its history
(restored from a backup, say) is ignored and rebuilt from the events. One write may append at most ``max_bytes``
(the webhook: :data:`MAX_WRITE_BYTES`); more is refused (:class:`HistoryWriteTooLarge`) and changes nothing.

The caller holds the folder's lock (serving.labelling.folder.folder_lock) around :meth:`LabelHistory.apply`.

Example:
    >>> history = suite_history("pool-suite")                                            # doctest: +SKIP
    >>> done = history.apply([arriving(row, "create", now)], via="webhook", now=now)    # doctest: +SKIP
    >>> done.statuses, history.rebuild() == history.rows()                               # doctest: +SKIP
    (['recorded'], True)
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Sequence

from autorater.data.files import jsonl_text, write_text_atomic
from autorater.serving.fields import parse_time

SUITE_LABELS_FILE, SUITE_HISTORY_FILE = "annotations.jsonl", "annotations_history.jsonl"
KINDS = ("create", "update", "copy")  # copy: an export or another store's row (its own times, if any)
ACTIONS = ("add", "replace", "adopt", "delete")
MAX_UNSEEN_TOMBSTONES = 10_000  # tombstones of ids the history never held: the latest are kept, the oldest forgotten
MAX_WRITE_BYTES = 1 << 20  # what one webhook may append to the history (1 MiB); more is refused
SNAPSHOT_AFTER_BYTES = 64 << 10  # a new snapshot once the events after the last one pass this
SNAPSHOT_FORMAT = "autorater-label-history-snapshot/1"


class HistoryWriteTooLarge(ValueError):
    """One write would append more to the label history than its bound; nothing was written."""


def label_key(row: dict) -> tuple:
    """What makes two rows the same label: its Label Studio annotation id (with the continuation), else its content."""
    if row.get("ls_annotation_id") is not None:
        return ("ls", row.get("continuation_id"), str(row["ls_annotation_id"]))
    return ("row", row.get("continuation_id"), row.get("annotator_id"), row.get("outcome"), row.get("marker_s"))


def row_version(row: dict, kind: str, now: datetime | None) -> datetime | None:
    """Label Studio's version of a label row: ``ls_updated_at``, else (not for an update) ``created_at``; None when
    it has neither. ValueError when a time is not ISO 8601 or is beyond ``now`` plus the allowed skew."""
    version = parse_time(row.get("ls_updated_at"), "updated_at", now)
    if version is None and kind != "update":
        version = parse_time(row.get("created_at"), "created_at", now)
    return version


@dataclass(frozen=True)
class Incoming:
    """A checked label row arriving, with its version and its kind (see :func:`arriving`)."""

    row: dict
    version: datetime | None = None
    kind: str = "copy"


def stored_version(row: dict, now: datetime | None = None) -> datetime | None:
    """The version of a row already stored (a labels file, another store): as :func:`row_version`, but a time that
    does not parse, or (``now`` given) lies beyond the clock, counts as none: such a row, written before these checks,
    is ordered by arrival instead of freezing its label."""
    try:
        return row_version(row, "copy", now)
    except ValueError:
        return None


def arriving(row: dict, kind: str = "copy", now: datetime | None = None) -> Incoming:
    """``row`` as it arrives: ``kind`` "create" (a creation), "update" (a correction) or "copy" (an export, or a row of
    another store), its version from :func:`row_version`. ValueError when a time is not ISO 8601 or (``now``
    given) beyond ``now`` plus the allowed skew."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return Incoming(row, row_version(row, kind, now), kind)


@dataclass
class _Entry:
    row: dict
    version: datetime | None
    bump: int


@dataclass
class _State:
    """The fold of the events: live labels by key (in first-event order), the deleted annotation ids (those the
    history held, and the latest ids it never held) and which key holds each live annotation id."""

    entries: dict[tuple, _Entry] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)
    unseen: dict[str, None] = field(default_factory=dict)  # an ordered set, oldest first
    owner: dict[str, set[tuple]] = field(default_factory=dict)  # one key each, but for folders of before the rule
    last: int = 0

    def apply(self, event: dict) -> None:
        self.last = max(self.last, int(event["event"]))
        if event["action"] == "delete":
            ids = event.get("ls_annotation_ids") or [event.get("ls_annotation_id")]
            for gone in map(str, ids):
                self._tombstone(gone)
            return
        key = tuple(event["key"])
        version = None if event.get("version") is None else datetime.fromisoformat(event["version"])
        self.entries[key] = _Entry(event["row"], version, int(event.get("bump", 0)))  # keeps its place
        if key[0] == "ls":
            self.owner.setdefault(key[2], set()).add(key)

    def _tombstone(self, gone: str) -> None:
        keys = self.owner.pop(gone, None)
        if keys is not None or gone in self.deleted:
            for key in keys or ():
                del self.entries[key]
            self.deleted.add(gone)
            return
        self.unseen.pop(gone, None)
        self.unseen[gone] = None
        if len(self.unseen) > MAX_UNSEEN_TOMBSTONES:
            del self.unseen[next(iter(self.unseen))]

    def is_deleted(self, ls_id: str | None) -> bool:
        return ls_id is not None and (ls_id in self.deleted or ls_id in self.unseen)

    def emit(self, action: str, stamp: str | None, via: str, **fields) -> dict:
        """A new event, applied."""
        event = {"event": self.last + 1, "action": action, **fields, "via": via[:200], "received_at": stamp}
        self.apply(event)
        return event

    def adopt(self, row: dict, now: datetime | None, via: str) -> dict:
        """Take a row of the labels file that no event held into the history, with the version it had."""
        return self.emit("adopt", _stamp(now), via, key=list(label_key(row)), row=row,
                         version=_iso(stored_version(row, now)), bump=0)

    def untouched(self, rows: list[dict]) -> list[dict]:
        """The rows of the labels file whose label the history never held (a suite's own annotations)."""
        return [r for r in rows if label_key(r) not in self.entries and not self.is_deleted(_ls_id(label_key(r)))]

    def rows(self) -> list[dict]:
        return [e.row for e in self.entries.values()]

    def to_json(self) -> dict:
        return {"entries": [[list(k), e.row, _iso(e.version), e.bump] for k, e in self.entries.items()],
                "deleted": sorted(self.deleted), "unseen": list(self.unseen), "last": self.last}

    @classmethod
    def from_json(cls, d: dict) -> "_State":
        state = cls(deleted=set(d["deleted"]), unseen=dict.fromkeys(d["unseen"]), last=int(d["last"]))
        for key, row, version, bump in d["entries"]:
            state.entries[tuple(key)] = _Entry(row, None if version is None else datetime.fromisoformat(version), bump)
            if key[0] == "ls":
                state.owner.setdefault(key[2], set()).add(tuple(key))
        return state


@dataclass
class Applied:
    """What :meth:`LabelHistory.apply` did, one status per incoming row: "recorded", "updated", "duplicate",
    "stale" (an older version than the label kept), "deleted" (refused: that annotation was deleted) or "conflict"
    (refused: its annotation id belongs to another continuation)."""

    statuses: list[str]
    replaced: list[dict] = field(default_factory=list)  # the rows that updates replaced
    events: int = 0
    problems: list[str] = field(default_factory=list)  # why rows were refused before the history saw them

    def count(self, status: str) -> int:
        return self.statuses.count(status)


def decide(entry: _Entry | None, deleted: bool, new: Incoming) -> tuple[str, datetime | None, int]:
    """(status, version, bump) of ``new`` against the label kept under its key (None: none; ``deleted``: a
    tombstone). The rules of the module docstring; pure."""
    if deleted:
        return "deleted", None, 0
    if entry is None:
        return "recorded", new.version, 0
    if new.kind == "create":  # the first version of its annotation: never replaces what is kept
        return ("duplicate" if new.row == entry.row else "stale"), entry.version, entry.bump
    if new.version is None:  # no time of its own: it comes after the label it updates
        if new.row == entry.row:
            return "duplicate", entry.version, entry.bump
        return "updated", entry.version, entry.bump + 1
    if entry.version is None:  # the kept label had no time: arrival order
        return ("duplicate" if new.row == entry.row else "updated"), new.version, 0
    ours, theirs = (new.version, 0), (entry.version, entry.bump)
    if ours > theirs:
        return ("duplicate" if new.row == entry.row else "updated"), new.version, 0
    if ours == theirs and new.row == entry.row:
        return "duplicate", entry.version, entry.bump
    return "stale", entry.version, entry.bump


class LabelHistory:
    """One store: ``labels`` (JSON Lines of label rows) and ``history`` (its events, with a snapshot of their fold
    beside it). See the module docstring."""

    def __init__(self, labels: str | Path, history: str | Path):
        self.labels, self.history = Path(labels), Path(history)
        self.snapshot = self.history.with_name(self.history.name.removesuffix(".jsonl") + ".snapshot.json")

    def __repr__(self) -> str:
        return f"LabelHistory({str(self.labels)!r}, {str(self.history)!r})"

    # -- reading --------------------------------------------------------------------------------
    def _parse(self, data: bytes, offset: int = 0) -> list[dict]:
        """The events of history bytes from byte ``offset`` on (whole lines; lines written before the event format
        are skipped)."""
        events = []
        for i, line in enumerate(data.split(b"\n"), start=1):
            if not line.strip():
                continue
            where = f"{self.history}:{i}" if not offset else f"{self.history}, line {i} after byte {offset}"
            try:
                obj = json.loads(line)
            except ValueError as err:
                raise ValueError(f"{where}: not JSON ({str(err)[:80]}); the label history is damaged (fix: restore "
                                 f"it from a backup)") from None
            if not (isinstance(obj, dict) and "event" in obj):
                continue  # a plain row, written before the event format: kept in the file as it is
            if obj.get("action") in ACTIONS and isinstance(obj["event"], int) and not isinstance(obj["event"], bool):
                events.append(obj)
            else:
                raise ValueError(f"{where}: not an event of the label history (fix: restore it from a backup)")
        return events

    def _whole(self) -> bytes:
        """The history's bytes up to its last full line (a torn last line was never acknowledged)."""
        data = self.history.read_bytes() if self.history.is_file() else b""
        return data[:data.rfind(b"\n") + 1]

    def events(self) -> list[dict]:
        """The history's events, in order (lines written before the event format are skipped)."""
        return self._parse(self._whole())

    def _load(self) -> tuple[_State, int, int]:
        """(the fold of the history, the byte offset of its end, the offset its snapshot covers): from the snapshot
        and the events after it when the snapshot matches the history, else from every event."""
        size = self.history.stat().st_size if self.history.is_file() else 0
        snap = self._read_snapshot(size)
        if snap is None:
            data = self._whole()
            return _fold(self._parse(data)), len(data), 0
        state, offset = snap
        with open(self.history, "rb") as f:
            f.seek(offset)
            tail = f.read()
        tail = tail[:tail.rfind(b"\n") + 1]
        for event in self._parse(tail, offset):
            state.apply(event)
        return state, offset + len(tail), offset

    def _read_snapshot(self, size: int) -> tuple[_State, int] | None:
        """The snapshot's state and offset, or None when there is none or it does not match the history."""
        try:
            d = json.loads(self.snapshot.read_text(encoding="utf-8"))
            offset = int(d["offset"])
            if d.get("format") != SNAPSHOT_FORMAT or not 0 < offset <= size or d["check"] != _check(self.history,
                                                                                                      offset):
                return None
            return _State.from_json(d["state"]), offset
        except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError):  # none or damaged: the events
            return None

    def deleted_ids(self) -> set[str]:
        """The Label Studio annotation ids deleted (tombstoned) in this history."""
        state = self._load()[0]
        return state.deleted | set(state.unseen)

    def rows(self) -> list[dict]:
        """The labels file's rows as they are on disk."""
        if not self.labels.is_file():
            return []
        return [json.loads(line) for line in self.labels.read_text(encoding="utf-8").splitlines() if line.strip()]

    def rebuild(self, rows: list[dict] | None = None) -> list[dict]:
        """The labels file as the history says it is, from every event: the rows of ``rows`` (default: the file's)
        that no event touched, then the history's live labels."""
        state = _fold(self.events())
        return state.untouched(self.rows() if rows is None else rows) + state.rows()

    # -- writing (the caller holds the folder's lock) ---------------------------------------------
    def apply(self, incoming: Sequence[Incoming], via: str, now: datetime | None = None,
              max_bytes: int | None = None) -> Applied:
        """Decide every incoming row in order, append an event for each change, and write the labels file.
        ``max_bytes``: refuse (:class:`HistoryWriteTooLarge`, nothing written) to append more than this."""
        state, end, covered = self._load()
        rows = self.rows()
        base = _Base(state.untouched(rows))
        stamp, fresh, out = _stamp(now), [], Applied([])
        for new in incoming:
            key = label_key(new.row)
            if key not in state.entries and key[0] == "row" and key in base.where:
                out.statuses.append("duplicate")  # the suite's own row, the same content
                continue
            if key not in state.entries:
                fresh += [state.adopt(old, now, via) for old in base.take([key])]
            ls_id = _ls_id(key)
            if ls_id is not None and not state.is_deleted(ls_id) and (
                    key not in state.owner.get(ls_id, {key}) or base.owned_elsewhere(ls_id, key)):
                out.statuses.append("conflict")  # the id is another continuation's
                continue
            entry = state.entries.get(key)
            status, version, bump = decide(entry, state.is_deleted(ls_id), new)
            out.statuses.append(status)
            if status in ("recorded", "updated"):
                if status == "updated":
                    out.replaced.append(entry.row)
                fresh.append(state.emit("add" if status == "recorded" else "replace", stamp, via, key=list(key),
                                        row=new.row, version=_iso(version), bump=bump, kind=new.kind))
        self._commit(fresh, state, (end, covered), base.rows() + state.rows(), rows, max_bytes)
        out.events = len(fresh)
        return out

    def delete(self, annotation_ids: Iterable[Any], via: str, now: datetime | None = None,
               max_bytes: int | None = None) -> list[dict]:
        """Tombstone Label Studio annotation ids, in one event: their labels leave the labels file (kept in the
        history) and a later creation or update of them is refused; of the ids the history never held, only the
        last :data:`MAX_UNSEEN_TOMBSTONES` are recorded. Returns the rows removed."""
        state, end, covered = self._load()
        rows = self.rows()
        base = _Base(state.untouched(rows))
        fresh, removed, known, unseen = [], [], [], []
        for gone in dict.fromkeys(str(i) for i in annotation_ids):
            if gone in state.deleted:
                continue
            fresh += [state.adopt(old, now, via) for old in base.take(base.by_id.pop(gone, ()))]
            if gone in state.owner:
                removed += [state.entries[k].row for k in state.owner[gone]]
                known.append(gone)
            else:
                unseen.append(gone)
        ids = known + unseen[-MAX_UNSEEN_TOMBSTONES:]
        if ids:
            fresh.append(state.emit("delete", _stamp(now), via, ls_annotation_ids=ids))
        self._commit(fresh, state, (end, covered), base.rows() + state.rows(), rows, max_bytes)
        return removed

    def _commit(self, events: list[dict], state: _State, offsets: tuple[int, int], wanted: list[dict],
                rows: list[dict], max_bytes: int | None) -> None:
        """The new events appended (a change is never lost), then the labels file and, when the events after the
        snapshot pass SNAPSHOT_AFTER_BYTES, a new snapshot; each only when it changed."""
        text = jsonl_text(events).encode("utf-8")
        if max_bytes is not None and len(text) > max_bytes:
            raise HistoryWriteTooLarge(f"this change would write {len(text)} bytes to the label history, over the "
                                       f"limit of {max_bytes} for one request; nothing was written (fix: send it in "
                                       f"smaller parts)")
        end, covered = offsets
        if text:
            _append(self.history, text, end)
        if wanted != rows:
            write_text_atomic(self.labels, jsonl_text(wanted))
        if end + len(text) - covered > SNAPSHOT_AFTER_BYTES:
            self._write_snapshot(state, end + len(text))

    def _write_snapshot(self, state: _State, offset: int) -> None:
        write_text_atomic(self.snapshot, json.dumps({"format": SNAPSHOT_FORMAT, "offset": offset,
                                                     "check": _check(self.history, offset),
                                                     "state": state.to_json()}, ensure_ascii=False) + "\n")


def suite_history(suite_root: str | Path) -> LabelHistory:
    """The store of a suite folder: ``annotations.jsonl`` and ``annotations_history.jsonl``."""
    root = Path(suite_root)
    return LabelHistory(root / SUITE_LABELS_FILE, root / SUITE_HISTORY_FILE)


class _Base:
    """The untouched rows of the labels file, indexed by key and by annotation id; rows taken out (adopted) leave
    it."""

    def __init__(self, rows: list[dict]):
        self.all, self.gone = rows, set()
        self.where: dict[tuple, list[int]] = {}
        self.by_id: dict[str, set[tuple]] = {}
        for i, r in enumerate(rows):
            key = label_key(r)
            self.where.setdefault(key, []).append(i)
            if key[0] == "ls":
                self.by_id.setdefault(key[2], set()).add(key)

    def take(self, keys: Iterable[tuple]) -> list[dict]:
        """Take out the rows under ``keys``, in file order."""
        found = sorted(i for k in keys for i in self.where.pop(k, []))
        self.gone.update(found)
        return [self.all[i] for i in found]

    def owned_elsewhere(self, ls_id: str, key: tuple) -> bool:
        """Whether a row of another continuation holds annotation id ``ls_id``."""
        return any(k != key and k in self.where for k in self.by_id.get(ls_id, ()))

    def rows(self) -> list[dict]:
        return [r for i, r in enumerate(self.all) if i not in self.gone]


def _fold(events: list[dict]) -> _State:
    state = _State()
    for event in events:
        state.apply(event)
    return state


def _append(path: Path, data: bytes, end: int) -> None:
    """Append whole lines at ``end`` (cutting off a torn last line, never acknowledged) and fsync."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if os.fstat(fd).st_size != end:
            os.ftruncate(fd, end)
        os.lseek(fd, end, os.SEEK_SET)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def _check(path: Path, offset: int) -> str:
    """A check of the history's bytes just before ``offset`` (the snapshot covers them): SHA-256 of the last 4 KiB."""
    with open(path, "rb") as f:
        f.seek(max(0, offset - 4096))
        return hashlib.sha256(f.read(min(offset, 4096))).hexdigest()


def _ls_id(key: tuple) -> str | None:
    return key[2] if key[0] == "ls" else None


def _stamp(now: datetime | None) -> str | None:
    return now.isoformat(timespec="seconds") if now is not None else None


def _iso(stamp: datetime | None) -> str | None:
    return None if stamp is None else stamp.isoformat()


__all__ = ["ACTIONS", "KINDS", "MAX_UNSEEN_TOMBSTONES", "MAX_WRITE_BYTES", "SNAPSHOT_AFTER_BYTES", "SUITE_HISTORY_FILE",
           "SUITE_LABELS_FILE", "Applied", "HistoryWriteTooLarge", "Incoming", "LabelHistory", "arriving", "decide",
           "label_key", "row_version", "stored_version", "suite_history"]
