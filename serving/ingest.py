"""``autorater ingest``: take the annotators' labels back into a labels folder and into the suite.

Reads a Label Studio JSON export (or a SUITE_FORMAT ``annotations.jsonl``), checks every label
(see serving.labelstudio.parse_export), and then:

- keeps every accepted label in ``LABELS_DIR/human_annotations.jsonl``, one per annotation: a label
  seen again unchanged adds nothing; one seen again (same Label Studio annotation id) with new content
  or a newer ``updated_at`` replaces the old one, which moves to ``human_annotations_history.jsonl``; an
  older copy of a label already updated is reported as stale and changes nothing;
- rewrites ``labels.jsonl``: a continuation with human labels gets their majority (``human_outcome``,
  ``human_marker_s``, ``human_n``), and that label wins (``outcome``, ``marker_s``,
  ``label_source: "human"``); the model's label stays beside it (``model_outcome``...) for later
  evaluation, and ``decision`` (how it was routed) is unchanged;
- brings the suite's ``annotations.jsonl`` up to date with *every* label of ``human_annotations.jsonl``
  (the same rule; replaced rows go to the suite's ``annotations_history.jsonl``), so that a run that died
  before this step, or one with ``append_to_suite=False``, is made good by the next run;
- writes what it refused or noticed to ``LABELS_DIR/ingest-problems.jsonl``, one line per problem.

Every file is written with fsync and an atomic rename, in an order (history, human labels, labels.jsonl,
suite) after which a crash at any point loses no label and a re-run finishes the job.

Example:
    >>> result = ingest("labels-v3", "project-7-export.json")   # doctest: +SKIP
    >>> result["accepted"], result["waiting"]                   # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from data.files import append_line_durably, jsonl_text, write_text_atomic
from data.labels import label_table, majority_vote
from data.suite import Annotation, Problem, Suite, annotation_problems, read_jsonl, record_to_dict, write_jsonl
from data.video import VideoError, video_info
from serving.folder import LabelsFolder, folder_lock, read_jsonl_rows
from serving.labelstudio import TASKS_FILE, ExportProblem, parse_export

HUMAN_FILE, PROBLEMS_FILE = "human_annotations.jsonl", "ingest-problems.jsonl"
HUMAN_HISTORY_FILE, SUITE_HISTORY_FILE = "human_annotations_history.jsonl", "annotations_history.jsonl"


class _VideoLookup(dict):
    """continuation id -> {"fps", "frames"}: from the task file, else read from the video when first asked."""

    def __init__(self, suite: Suite, known: dict[str, dict]):
        super().__init__(known)
        self.suite = suite

    def __contains__(self, cid) -> bool:
        return cid in self.suite.continuation_by_id

    def __missing__(self, cid: str) -> dict:
        try:
            info = video_info(self.suite.video_path(cid))
            self[cid] = {"fps": info.fps, "frames": info.num_frames}
        except VideoError:
            self[cid] = {"fps": None, "frames": None}
        return self[cid]


def _key(a: dict) -> tuple:
    """What makes two rows the same label: its Label Studio annotation id, else its whole content."""
    if a.get("ls_annotation_id") is not None:
        return ("ls", a["continuation_id"], str(a["ls_annotation_id"]))
    return ("row", a["continuation_id"], a["annotator_id"], a["outcome"], a.get("marker_s"))


def _content(a: dict) -> tuple:
    return (a.get("annotator_id"), a.get("outcome"), a.get("marker_s"), a.get("failure_mode"))


def _when(value) -> datetime | str | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
        return stamp if stamp.tzinfo is not None else None
    except ValueError:
        return None


@dataclass
class Upsert:
    """What :func:`upsert_annotations` did: rows added, replaced (the old rows, for the history) and stale."""

    rows: list[dict]
    added: int = 0
    replaced: list[dict] = field(default_factory=list)
    stale: int = 0
    duplicates: int = 0


def upsert_annotations(existing: list[dict], incoming: list[dict]) -> Upsert:
    """``existing`` annotation rows brought up to date with ``incoming`` (order kept; replacements in place).

    A row whose key (:func:`_key`) is new is added; the same key with the same content is a duplicate; with new
    content or a newer ``ls_updated_at`` it replaces the old row, unless it is older than the row it would replace
    (stale: the newer label is kept).
    """
    rows = list(existing)
    where = {_key(r): i for i, r in enumerate(rows)}
    out = Upsert(rows)
    for new in incoming:
        k = _key(new)
        if k not in where:
            where[k] = len(rows)
            rows.append(new)
            out.added += 1
            continue
        old = rows[where[k]]
        t_old, t_new = _when(old.get("ls_updated_at")), _when(new.get("ls_updated_at"))
        if t_old is not None and t_new is not None and t_new < t_old:
            out.stale += 1
        elif _content(old) != _content(new) or (t_old is not None and t_new is not None and t_new > t_old):
            rows[where[k]] = new
            out.replaced.append(old)
        else:
            out.duplicates += 1
    return out


def remove_loaded_suite(current: Suite, ls_annotation_ids) -> list[dict]:
    """Remove the labels of Label Studio annotations that were deleted there from ``current`` (a suite just loaded
    by a caller that holds its folder's lock); the removed rows go to the history file. Returns them."""
    gone = {str(i) for i in ls_annotation_ids}
    rows = [_row(a) for a in current.annotations]
    removed = [r for r in rows if r.get("ls_annotation_id") is not None and str(r["ls_annotation_id"]) in gone]
    if removed:
        _append_history(current.root / SUITE_HISTORY_FILE, removed)
        write_jsonl(current.root / "annotations.jsonl", [r for r in rows if not any(r is x for x in removed)])
    return removed


def _append_history(path: Path, replaced: list[dict]) -> None:
    """Keep replaced labels (once each) in a history file beside the one they left."""
    if not replaced:
        return
    history = read_jsonl_rows(path) if path.is_file() else []
    known = {json.dumps(r, sort_keys=True) for r in history}
    fresh = [r for r in replaced if json.dumps(r, sort_keys=True) not in known]
    if fresh:
        write_text_atomic(path, jsonl_text(history + fresh))


def _read_suite_annotations(path: Path, suite: Suite, durations: dict) -> tuple[list[Annotation], list[ExportProblem]]:
    problems: list[Problem] = []
    records = read_jsonl(path, Annotation, problems)
    out = [ExportProblem("error", f"{p.file}:{p.line}", p.message, p.fix) for p in problems]
    accepted = []
    for a in records:
        where = f"{path.name}:{a.extra.pop('_line', '?')}"
        if a.continuation_id not in suite.continuation_by_id:
            out.append(ExportProblem("error", where, f"unknown continuation_id {a.continuation_id!r}",
                                     f"labels must name continuations of suite {suite.root}"))
        elif a.outcome not in ("success", "failure"):
            out.append(ExportProblem("error", where, f"outcome {a.outcome!r} is not success or failure"))
        elif a.marker_s is not None and not 0 <= a.marker_s <= durations.get(a.continuation_id, float("inf")) + 1e-6:
            out.append(ExportProblem("error", where, f"marker_s {a.marker_s} is outside the video "
                                                     f"(0..{durations[a.continuation_id]:.3f} s)",
                                     "markers are seconds from the first frame"))
        else:
            accepted.append(a)
    return accepted, out


def read_labels(export: str | os.PathLike, suite: Suite, tasks_file: str | os.PathLike | None = None,
                durations: dict[str, float] | None = None) -> tuple[list[Annotation], list[ExportProblem], int]:
    """Checked human labels for ``suite`` from a Label Studio JSON export or a SUITE_FORMAT ``annotations.jsonl``.

    Args:
        export: the file; ``.jsonl`` is read as SUITE_FORMAT annotations, anything else as a Label Studio export.
        suite: the suite the labels are for.
        tasks_file: the ``tasks.json`` the annotators answered (its fps and frame counts check the markers;
            for other continuations they are read from the video).
        durations: continuation id -> video duration (s), to check SUITE_FORMAT markers.

    Returns:
        (accepted annotations, problems, cancelled count).
    """
    export = Path(export)
    if export.suffix == ".jsonl":
        return (*_read_suite_annotations(export, suite, durations or {}), 0)
    known = _read_tasks(Path(tasks_file)) if tasks_file is not None and Path(tasks_file).is_file() else {}
    parsed = parse_export(export, _VideoLookup(suite, known))
    return parsed.annotations, parsed.problems, parsed.cancelled


def _read_tasks(path: Path) -> dict[str, dict]:
    """continuation id -> {"fps", "frames"} from the ``tasks.json`` written by ``autorater label``."""
    try:
        tasks = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as err:
        raise ValueError(f"cannot read {path}: {str(err)[:200]} (fix: rerun `autorater label --resume` to "
                         f"rewrite it)") from None
    known = {}
    for t in tasks if isinstance(tasks, list) else []:
        data = t.get("data") if isinstance(t, dict) else None
        if isinstance(data, dict) and isinstance(data.get("continuation_id"), str):
            known[data["continuation_id"]] = {"fps": data.get("fps"), "frames": data.get("frames")}
    return known


def merge_labels(labels: list[dict], human: list[dict]) -> list[dict]:
    """``labels.jsonl`` rows with the human majority merged in (human labels win)."""
    agg = majority_vote(label_table(human)) if human else None
    out = []
    for row in labels:
        row = {k: v for k, v in row.items() if k not in ("human_outcome", "human_marker_s", "human_n", "label_source")}
        cid = row["continuation_id"]
        if agg is not None and cid in agg.index:
            h = agg.loc[cid]
            marker = None if h["marker_s"] != h["marker_s"] else round(float(h["marker_s"]), 4)  # NaN -> None
            row.update(outcome=h["outcome"], marker_s=marker, human_outcome=h["outcome"], human_marker_s=marker,
                       human_n=int(h["n_labels"]), label_source="human")
        elif row["decision"] == "auto":
            row.update(outcome=row["model_outcome"], marker_s=row["model_marker_s"], label_source="model")
        else:
            row.update(outcome=None, marker_s=None, label_source=None)
        out.append(row)
    return out


def _row(a) -> dict:
    return a if isinstance(a, dict) else {k: v for k, v in record_to_dict(a).items() if not k.startswith("_")}


def append_annotations(suite: Suite, annotations: list, durations: dict[str, float] | None = None) -> int:
    """Bring the suite's ``annotations.jsonl`` up to date with labels (Annotation records or dicts); returns how
    many rows were added or replaced (see :func:`upsert_suite_annotations`)."""
    done = upsert_suite_annotations(suite, annotations, durations)
    return done.added + len(done.replaced)


def upsert_suite_annotations(suite: Suite, annotations: list, durations: dict[str, float] | None = None) -> Upsert:
    """Upsert labels into the suite's ``annotations.jsonl``, under the suite folder's lock.

    Re-reads the suite, applies :func:`upsert_annotations` (new labels added, updated ones replaced, the old rows
    kept in ``annotations_history.jsonl``) and writes atomically. Every row is checked with the suite's own record
    checks first (``durations``: continuation id -> video seconds, to check the marker), so the suite still loads
    afterwards; a row that breaks a rule raises ValueError and nothing is written.
    """
    rows = [_row(a) for a in annotations]
    problems = [p for i, r in enumerate(rows) for p in annotation_problems(
        r, "label", i + 1, (durations or {}).get(r.get("continuation_id")) if isinstance(r, dict) else None,
        suite.continuation_by_id)]
    if problems:
        raise ValueError("labels refused before they reach the suite: " + "; ".join(str(p) for p in problems[:5]))
    with folder_lock(suite.root, "ingest or webhook", wait=True):
        return upsert_loaded_suite(Suite.load(suite.root), rows)  # re-read under the lock: another writer may
        #                                                             have appended


def upsert_loaded_suite(current: Suite, rows: list[dict]) -> Upsert:
    """Upsert checked annotation rows into ``current``, a suite just loaded by a caller that holds its folder's lock
    (``folder_lock(root, ..., wait=True)``); writes ``annotations.jsonl`` (and the history) atomically."""
    result = upsert_annotations([_row(a) for a in current.annotations], rows)
    if result.added or result.replaced:
        _append_history(current.root / SUITE_HISTORY_FILE, result.replaced)
        write_jsonl(current.root / "annotations.jsonl", result.rows)
    return result


def ingest(labels_dir: str | os.PathLike, export: str | os.PathLike, append_to_suite: bool = True) -> dict:
    """Merge the human labels of ``export`` into ``labels_dir`` (and the suite's annotations); returns counts."""
    folder = LabelsFolder(labels_dir)
    folder.check_finished(" (finish it with --resume first)")  # a clear error before the lock
    with folder.lock("labelling or ingest job"):
        return _ingest_locked(folder, Path(export), append_to_suite)


def _ingest_locked(folder: LabelsFolder, export: Path, append_to_suite: bool) -> dict:
    if not export.is_file():
        raise FileNotFoundError(f"export {export} does not exist (fix: export the Label Studio project as JSON)")
    labels_dir = folder.root
    job, labels = folder.read_finished()
    suite = Suite.load(job["suite"])
    durations = {r["continuation_id"]: r["duration_s"] for r in labels if r.get("duration_s") is not None}
    new, problems, cancelled = read_labels(export, suite, labels_dir / "labelstudio" / TASKS_FILE, durations)

    human_path = labels_dir / HUMAN_FILE
    human = read_jsonl_rows(human_path) if human_path.is_file() else []
    change = upsert_annotations(human, [_row(a) for a in new])
    human = change.rows
    merged = merge_labels(labels, human)
    _append_history(labels_dir / HUMAN_HISTORY_FILE, change.replaced)  # first: a replaced label is never lost
    write_text_atomic(human_path, jsonl_text(human))
    for p in problems:
        append_line_durably(labels_dir / PROBLEMS_FILE, json.dumps(
            {"export": str(export), "level": p.level, "where": p.where, "message": p.message, "fix": p.fix},
            ensure_ascii=False))
    write_text_atomic(folder.labels, jsonl_text(merged))

    # Every human label, not only this run's: a run that stopped before this step is made good here.
    appended = append_annotations(suite, human, durations) if append_to_suite and human else 0
    waiting = sum(r["decision"] == "human" and r["label_source"] is None for r in merged)
    return {"export": str(export), "labels_read": len(new), "accepted": change.added, "updated": len(change.replaced),
            "stale": change.stale, "duplicates": change.duplicates,
            "errors": sum(p.level == "error" for p in problems),
            "warnings": sum(p.level == "warning" for p in problems),
            "cancelled": cancelled, "appended_to_suite": appended, "human_labelled": sum(r["label_source"] == "human"
                                                                                        for r in merged),
            "waiting": waiting, "problems": [str(p) for p in problems]}


def format_ingest(result: dict, max_problems: int = 20) -> str:
    lines = [f"ingested {result['export']}: {result['accepted']} new labels, {result['updated']} updated "
             f"({result['duplicates']} already there, {result['stale']} older than the label kept), "
             f"{result['errors']} refused, {result['warnings']} warnings, {result['cancelled']} cancelled; "
             f"{result['appended_to_suite']} added to or updated in the suite's annotations.jsonl",
             f"{result['human_labelled']} continuations now carry a human label; {result['waiting']} routed to "
             f"humans still wait for one"]
    lines += [f"  {p}" for p in result["problems"][:max_problems]]
    if len(result["problems"]) > max_problems:
        lines.append(f"  ... {len(result['problems']) - max_problems} more in {PROBLEMS_FILE}")
    return "\n".join(lines)


__all__ = ["Upsert", "append_annotations", "format_ingest", "ingest", "merge_labels", "read_labels",
           "remove_loaded_suite", "upsert_annotations", "upsert_loaded_suite", "upsert_suite_annotations"]
