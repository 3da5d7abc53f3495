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
(serving.fields.MAX_CLOCK_SKEW_S) is refused, so a far-future clock cannot freeze a label. An update without a time
comes after the version it updates (arrival order): ``(version, bump + 1)``. A newer version replaces the label, an
older one is stale, the same one with the same row is a duplicate (with another row: stale, the first kept).
**Deletions are tombstones**: once an annotation id is deleted, every later creation or update of it is refused
(Label Studio gives a re-created annotation a new id).

The caller holds the folder's lock (serving.folder.folder_lock) around :meth:`LabelHistory.apply`.

Example:
    >>> history = suite_history("pool-suite")                                            # doctest: +SKIP
    >>> done = history.apply([arriving(row, "create", now)], via="webhook", now=now)    # doctest: +SKIP
    >>> done.statuses, history.rebuild() == history.rows()                               # doctest: +SKIP
    (['recorded'], True)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Sequence

from autorater.data.files import jsonl_text, write_text_atomic
from autorater.serving.fields import parse_time

SUITE_LABELS_FILE, SUITE_HISTORY_FILE = "annotations.jsonl", "annotations_history.jsonl"
KINDS = ("create", "update", "copy")  # copy: an export or another store's row (its own times, if any)
ACTIONS = ("add", "replace", "adopt", "delete")


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
    """A checked label row arriving, with its version (see :func:`arriving`)."""

    row: dict
    version: datetime | None = None


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
    return Incoming(row, row_version(row, kind, now))


@dataclass
class _Entry:
    row: dict
    version: datetime | None
    bump: int


@dataclass
class _State:
    """The fold of the events: live labels by key (in first-event order) and deleted annotation ids."""

    entries: dict[tuple, _Entry] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)
    last: int = 0

    def apply(self, event: dict) -> None:
        self.last = max(self.last, int(event["event"]))
        if event["action"] == "delete":
            gone = str(event["ls_annotation_id"])
            self.deleted.add(gone)
            for k in [k for k in self.entries if _ls_id(k) == gone]:
                del self.entries[k]
            return
        version = None if event.get("version") is None else datetime.fromisoformat(event["version"])
        self.entries[tuple(event["key"])] = _Entry(event["row"], version, int(event.get("bump", 0)))  # keeps its place

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
        return [r for r in rows if label_key(r) not in self.entries and _ls_id(label_key(r)) not in self.deleted]

    def rows(self) -> list[dict]:
        return [e.row for e in self.entries.values()]


@dataclass
class Applied:
    """What :meth:`LabelHistory.apply` did, one status per incoming row: "recorded", "updated", "duplicate",
    "stale" (an older version than the label kept) or "deleted" (refused: that annotation was deleted)."""

    statuses: list[str]
    replaced: list[dict] = field(default_factory=list)  # the rows that updates replaced
    events: int = 0

    def count(self, status: str) -> int:
        return self.statuses.count(status)


def decide(entry: _Entry | None, deleted: bool, new: Incoming) -> tuple[str, datetime | None, int]:
    """(status, version, bump) of ``new`` against the label kept under its key (None: none; ``deleted``: a
    tombstone). The rules of the module docstring; pure."""
    if deleted:
        return "deleted", None, 0
    if entry is None:
        return "recorded", new.version, 0
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
    """One store: ``labels`` (JSON Lines of label rows) and ``history`` (its events). See the module docstring."""

    def __init__(self, labels: str | Path, history: str | Path):
        self.labels, self.history = Path(labels), Path(history)

    def __repr__(self) -> str:
        return f"LabelHistory({str(self.labels)!r}, {str(self.history)!r})"

    # -- reading --------------------------------------------------------------------------------
    def _read_history(self) -> tuple[list[str], list[dict]]:
        """(lines written before the event format, kept as they are; the events, in order)."""
        if not self.history.is_file():
            return [], []
        legacy, events = [], []
        for i, line in enumerate(self.history.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as err:
                raise ValueError(f"{self.history}:{i}: not JSON ({str(err)[:80]}); the label history is damaged "
                                 f"(fix: restore it from a backup; it is only ever rewritten whole)") from None
            if not (isinstance(obj, dict) and "event" in obj):
                legacy.append(line)
            elif obj.get("action") in ACTIONS and isinstance(obj["event"], int) and not isinstance(obj["event"], bool):
                events.append(obj)
            else:
                raise ValueError(f"{self.history}:{i}: not an event of the label history (fix: restore it from a "
                                 f"backup)")
        return legacy, events

    def events(self) -> list[dict]:
        """The history's events, in order (lines written before the event format are skipped)."""
        return self._read_history()[1]

    def deleted_ids(self) -> set[str]:
        """The Label Studio annotation ids deleted (tombstoned) in this history."""
        return _fold(self.events()).deleted

    def rows(self) -> list[dict]:
        """The labels file's rows as they are on disk."""
        if not self.labels.is_file():
            return []
        return [json.loads(line) for line in self.labels.read_text(encoding="utf-8").splitlines() if line.strip()]

    def rebuild(self, rows: list[dict] | None = None) -> list[dict]:
        """The labels file as the history says it is: the rows of ``rows`` (default: the file's) that no event
        touched, then the history's live labels."""
        state = _fold(self.events())
        return state.untouched(self.rows() if rows is None else rows) + state.rows()

    # -- writing (the caller holds the folder's lock) ---------------------------------------------
    def apply(self, incoming: Sequence[Incoming], via: str, now: datetime | None = None) -> Applied:
        """Decide every incoming row in order, append an event for each change, and write the labels file."""
        legacy, events = self._read_history()
        state, rows = _fold(events), self.rows()
        base = _Base(state.untouched(rows))
        stamp, fresh, out = _stamp(now), [], Applied([])
        for new in incoming:
            key = label_key(new.row)
            if key not in state.entries and key[0] == "row" and key in base.where:
                out.statuses.append("duplicate")  # the suite's own row, the same content
                continue
            if key not in state.entries:
                fresh += [state.adopt(old, now, via) for old in base.take(lambda k: k == key, key)]
            entry = state.entries.get(key)
            status, version, bump = decide(entry, _ls_id(key) in state.deleted, new)
            out.statuses.append(status)
            if status in ("recorded", "updated"):
                if status == "updated":
                    out.replaced.append(entry.row)
                fresh.append(state.emit("add" if status == "recorded" else "replace", stamp, via, key=list(key),
                                        row=new.row, version=_iso(version), bump=bump))
        self._write(legacy, events + fresh, base.rows() + state.rows(), rows)
        out.events = len(fresh)
        return out

    def delete(self, annotation_ids: Iterable[Any], via: str, now: datetime | None = None) -> list[dict]:
        """Tombstone Label Studio annotation ids: their labels leave the labels file (kept in the history) and a
        later creation or update of them is refused. Returns the rows removed."""
        legacy, events = self._read_history()
        state, rows = _fold(events), self.rows()
        base = _Base(state.untouched(rows))
        stamp, fresh, removed = _stamp(now), [], []
        for gone in dict.fromkeys(str(i) for i in annotation_ids):
            if gone in state.deleted:
                continue
            fresh += [state.adopt(old, now, via) for old in base.take(lambda k: _ls_id(k) == gone)]
            removed += [e.row for k, e in state.entries.items() if _ls_id(k) == gone]
            fresh.append(state.emit("delete", stamp, via, ls_annotation_id=gone))
        self._write(legacy, events + fresh, base.rows() + state.rows(), rows)
        return removed

    def _write(self, legacy: list[str], events: list[dict], wanted: list[dict], rows: list[dict]) -> None:
        """The history first (a change is never lost), then the labels file; each only when it changed."""
        text = "".join(line + "\n" for line in legacy) + jsonl_text(events)
        known = self.history.read_text(encoding="utf-8") if self.history.is_file() else ""
        if text != known and (events or self.history.is_file()):
            write_text_atomic(self.history, text)
        if wanted != rows:
            write_text_atomic(self.labels, jsonl_text(wanted))


def suite_history(suite_root: str | Path) -> LabelHistory:
    """The store of a suite folder: ``annotations.jsonl`` and ``annotations_history.jsonl``."""
    root = Path(suite_root)
    return LabelHistory(root / SUITE_LABELS_FILE, root / SUITE_HISTORY_FILE)


class _Base:
    """The untouched rows of the labels file, indexed by key; rows taken out (adopted) leave it."""

    def __init__(self, rows: list[dict]):
        self.all, self.gone = rows, set()
        self.where: dict[tuple, list[int]] = {}
        for i, r in enumerate(rows):
            self.where.setdefault(label_key(r), []).append(i)

    def take(self, match, key: tuple | None = None) -> list[dict]:
        """Take out the rows whose key ``match``-es (only those under ``key`` when given: fast)."""
        keys = [key] if key is not None else [k for k in self.where if match(k)]
        found = sorted(i for k in keys for i in self.where.pop(k, []))
        self.gone.update(found)
        return [self.all[i] for i in found]

    def rows(self) -> list[dict]:
        return [r for i, r in enumerate(self.all) if i not in self.gone]


def _fold(events: list[dict]) -> _State:
    state = _State()
    for event in events:
        state.apply(event)
    return state


def _ls_id(key: tuple) -> str | None:
    return key[2] if key[0] == "ls" else None


def _stamp(now: datetime | None) -> str | None:
    return now.isoformat(timespec="seconds") if now is not None else None


def _iso(stamp: datetime | None) -> str | None:
    return None if stamp is None else stamp.isoformat()


__all__ = ["ACTIONS", "KINDS", "SUITE_HISTORY_FILE", "SUITE_LABELS_FILE", "Applied", "Incoming", "LabelHistory",
           "arriving", "decide", "label_key", "row_version", "stored_version", "suite_history"]
