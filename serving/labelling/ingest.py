"""``autorater ingest``: take the annotators' labels back into a labels folder and into the suite.

Reads a Label Studio JSON export (or a SUITE_FORMAT ``annotations.jsonl``), checks every label
(see serving.labelstudio.formats.parse_export), and then:

- takes every accepted label into the labels folder's human labels through their history (serving.labelling.history;
  ``LabelsFolder.human_labels``): a label seen again unchanged adds nothing; one seen again (same Label Studio
  annotation id) with a newer version (Label Studio's ``updated_at``) replaces the old one; an older copy is
  reported as stale and changes nothing; an annotation deleted in Label Studio (a tombstone in the suite's history,
  written by the webhook) is refused, and its label leaves the human labels too; a time beyond this machine's
  clock (plus a small skew) is refused;
- brings the suite's labels up to date with *every* human label (the same rules, through the suite's history), so
  that a run that died before this step, or one with ``append_to_suite=False``, is made good by the next run;
- rewrites ``labels.jsonl``: a continuation with human labels gets their majority (``human_outcome``,
  ``human_marker_s``, ``human_n``), and that label wins (``outcome``, ``marker_s``,
  ``label_source: "human"``); the model's label stays beside it (``model_outcome``...) for later
  evaluation, and ``decision`` (how it was routed) is unchanged;
- writes what it refused or noticed to ``ingest-problems.jsonl``, one line per problem.

Every file is written with fsync and an atomic rename (a history before its labels), in an order (human labels,
suite, labels.jsonl) after which a crash at any point loses no label and a re-run finishes the job.

Example:
    >>> result = ingest("labels-v3", "project-7-export.json")   # doctest: +SKIP
    >>> result["accepted"], result["waiting"]                   # doctest: +SKIP
"""

from __future__ import annotations

import os
from pathlib import Path

from autorater.data.labels import label_table, majority_vote
from autorater.data.suite import Annotation, Problem, Suite, annotation_problems, read_jsonl, record_to_dict
from autorater.data.video import VideoError, video_info
from autorater.serving.fields import MAX_ID_CHARS, bounded_id, number_in, shown, utc_now
from autorater.serving.labelling.folder import PROBLEMS_FILE, LabelsFolder, folder_lock
from autorater.serving.labelling.history import Applied, Incoming, arriving, stored_version, suite_history
from autorater.serving.labelstudio.formats import (
    ExportProblem,
    checked_fps,
    checked_frames,
    parse_export,
    read_tasks,
)


class _VideoLookup(dict):
    """continuation id -> {"fps", "frames", "duration_s", "note"}: the video's own, read from it when first asked.

    The video's frame rate and frame count convert and bound the markers; ``tasks.json`` (``tasks``, what
    ``autorater label`` wrote) is used only where the video cannot be read, and a ``tasks.json`` that disagrees with
    the video is named in the note (its values are not used).
    """

    def __init__(self, suite: Suite, tasks: dict[str, dict]):
        super().__init__()
        self.suite, self.tasks = suite, tasks

    def __contains__(self, cid) -> bool:
        return cid in self.suite.continuation_by_id

    def __missing__(self, cid: str) -> dict:
        task = self.tasks.get(cid, {})
        try:
            info = video_info(self.suite.video_path(cid))
        except VideoError as err:
            fps, frames = checked_fps(task.get("fps")), checked_frames(task.get("frames"))
            note = f"the video cannot be read ({str(err)[:120]}); tasks.json's fps {fps:g} is used" if fps else ""
            self[cid] = {"fps": fps, "frames": frames, "note": note, "source": "tasks.json",
                         "duration_s": frames / fps if fps and frames else None}
            return self[cid]
        said = [f"{name} {shown(task.get(name), 20)}" for name, own in (("fps", info.fps), ("frames", info.num_frames))
                if task.get(name) is not None and not _agrees(task.get(name), own, exact=name == "frames")]
        note = (f"tasks.json says {' and '.join(said)}, the video {info.fps:g} fps and {info.num_frames} frames; the "
                f"video's are used") if said else ""
        self[cid] = {"fps": info.fps, "frames": info.num_frames, "duration_s": info.duration_s, "note": note}
        return self[cid]

    def duration_s(self, cid: str) -> float | None:
        """The video's duration (s), None when it cannot be read and tasks.json does not say."""
        return self[cid]["duration_s"] if cid in self else None


def _agrees(given, own: float, exact: bool = False) -> bool:
    """Whether a value of tasks.json is the video's own (a frame rate within 0.1%, a frame count ``exact``); never
    raises."""
    value = number_in(given, 0, 1e300)
    return value is not None and (value == own if exact else abs(value - own) <= 1e-3 * own)


def _read_suite_annotations(path: Path, suite: Suite, video: _VideoLookup,
                            durations: dict) -> tuple[list[Annotation], list[ExportProblem]]:
    problems: list[Problem] = []
    records = read_jsonl(path, Annotation, problems)
    out = [ExportProblem("error", f"{p.file}:{p.line}", p.message, p.fix) for p in problems]
    broken = {p.line for p in problems}  # a line with a problem (text UTF-8 cannot hold, ...) is not taken
    accepted = []
    for a in records:
        line = a.extra.pop("_line", None)
        where = f"{path.name}:{line if line is not None else '?'}"
        if line in broken:
            continue
        ls_id = a.extra.get("ls_annotation_id")
        known = a.continuation_id in suite.continuation_by_id
        duration = video.duration_s(a.continuation_id) if known else None
        duration = durations.get(a.continuation_id) if duration is None and known else duration
        if not known:
            out.append(ExportProblem("error", where, f"unknown continuation_id {a.continuation_id[:80]!r}",
                                     f"labels must name continuations of suite {suite.root}"))
        elif ls_id is not None and bounded_id(ls_id) is None:
            out.append(ExportProblem("error", where, f"ls_annotation_id {shown(ls_id)} is not an id (an integer, or "
                                                     f"a string of up to {MAX_ID_CHARS} characters)"))
        elif a.outcome not in ("success", "failure"):
            out.append(ExportProblem("error", where, f"outcome {a.outcome!r} is not success or failure"))
        elif a.marker_s is not None and not 0 <= a.marker_s <= (duration if duration is not None else 1e300) + 1e-6:
            out.append(ExportProblem("error", where, f"marker_s {a.marker_s} is outside the video "
                                                     f"(0..{duration:.3f} s)", "markers are seconds from the first "
                                                                               "frame of the video"))
        elif found := annotation_problems(_row(a), path.name, line):  # what the suite would refuse (NaN anywhere)
            out += [ExportProblem("error", where, p.message, p.fix) for p in found]
        else:
            accepted.append(a)
    return accepted, out


def read_labels(export: str | os.PathLike, suite: Suite, tasks_file: str | os.PathLike | None = None,
                durations: dict[str, float] | None = None) -> tuple[list[Annotation], list[ExportProblem], int]:
    """Checked human labels for ``suite`` from a Label Studio JSON export or a SUITE_FORMAT ``annotations.jsonl``.

    Markers are converted and bounded by each video's own frame rate and frame count (read from the video); the
    ``tasks.json`` the annotators answered, and the fps an export's task carries, are used only where the video
    cannot be read, and a warning names either when it disagrees with the video.

    Args:
        export: the file; ``.jsonl`` is read as SUITE_FORMAT annotations, anything else as a Label Studio export.
        suite: the suite the labels are for.
        tasks_file: the ``tasks.json`` the annotators answered (its fps and frame counts, where a video cannot be
            read).
        durations: continuation id -> video duration (s), for SUITE_FORMAT markers whose video cannot be read.

    Returns:
        (accepted annotations, problems, cancelled count).
    """
    export = Path(export)
    tasks = _task_timing(read_tasks(tasks_file)) if tasks_file is not None and Path(tasks_file).is_file() else {}
    video = _VideoLookup(suite, tasks)
    if export.suffix == ".jsonl":
        return (*_read_suite_annotations(export, suite, video, durations or {}), 0)
    parsed = parse_export(export, video)
    return parsed.annotations, parsed.problems, parsed.cancelled


def _task_timing(tasks: list) -> dict[str, dict]:
    """continuation id -> {"fps", "frames"} from the ``tasks.json`` written by ``autorater label``."""
    known = {}
    for t in tasks:
        data = t.get("data") if isinstance(t, dict) else None
        if isinstance(data, dict) and isinstance(data.get("continuation_id"), str):
            known[data["continuation_id"]] = {"fps": data.get("fps"), "frames": data.get("frames")}
    return known


def merge_labels(labels: list[dict], human: list[dict]) -> list[dict]:
    """``labels.jsonl`` rows with the human majority merged in (human labels win)."""
    agg = majority_vote(label_table(human)) if human else None
    out = []
    for row in labels:
        if row.get("reason") == "human_labelled" and row.get("label_source") == "human" and (
                agg is None or row["continuation_id"] not in agg.index):
            out.append(row)  # labelled before the job (the suite's own labels): the plan left it to them
            continue
        row = {k: v for k, v in row.items() if k not in ("human_outcome", "human_marker_s", "human_n", "label_source")}
        cid = row["continuation_id"]
        if agg is not None and cid in agg.index:
            h = agg.loc[cid]
            marker = None if h["marker_s"] != h["marker_s"] else round(float(h["marker_s"]), 4)  # NaN -> None
            row.update(outcome=h["outcome"], marker_s=marker, human_outcome=h["outcome"], human_marker_s=marker,
                       human_n=int(h["n_labels"]), label_source="human")
        elif row["decision"] in ("auto", "provisional"):  # provisional: the model's, until `autorater certify`
            row.update(outcome=row["model_outcome"], marker_s=row["model_marker_s"],
                       label_source="model" if row["decision"] == "auto" else "provisional")
        else:
            row.update(outcome=None, marker_s=None, label_source=None)
        out.append(row)
    return out


def _row(a) -> dict:
    return a if isinstance(a, dict) else {k: v for k, v in record_to_dict(a).items() if not k.startswith("_")}


def append_annotations(suite: Suite, annotations: list, durations: dict[str, float] | None = None,
                       via: str = "append") -> int:
    """Bring the suite's labels up to date with labels (Annotation records or dicts); returns how many were added
    or replaced (see :func:`upsert_suite_annotations`; a row that breaks a rule raises ValueError, nothing written)."""
    done = upsert_suite_annotations(suite, annotations, durations, via)
    return done.count("recorded") + done.count("updated")


def upsert_suite_annotations(suite: Suite, annotations: list, durations: dict[str, float] | None = None,
                             via: str = "append", keep_good: bool = False) -> Applied:
    """Take labels into the suite's ``annotations.jsonl`` through its history, under the suite folder's lock.

    Every row is checked with the suite's own record checks first (``durations``: continuation id -> video seconds,
    to check the marker), so the suite still loads afterwards; a row that breaks a rule raises ValueError and
    nothing is written, or, with ``keep_good``, is left out: its status is "refused" and ``Applied.problems`` says
    why. Each row is ordered by its own version (``ls_updated_at``, else ``created_at``).
    """
    rows = [_row(a) for a in annotations]
    refused = {i: "; ".join(str(p) for p in found) for i, r in enumerate(rows) if (found := annotation_problems(
        r, "label", i + 1, (durations or {}).get(r.get("continuation_id")) if isinstance(r, dict) else None,
        suite.continuation_by_id))}
    if refused and not keep_good:
        raise ValueError("labels refused before they reach the suite: " + "; ".join(list(refused.values())[:5]))
    now = utc_now()
    good = [i for i in range(len(rows)) if i not in refused]
    incoming = [Incoming(rows[i], stored_version(rows[i], now)) for i in good]  # checked when they arrived
    with folder_lock(suite.root, "ingest or webhook", wait=True):
        Suite.load(suite.root)  # it loads before the write (a broken suite is named, not made worse)
        done = suite_history(suite.root).apply(incoming, via=via, now=now)
    statuses = dict(zip(good, done.statuses))
    return Applied([statuses.get(i, "refused") for i in range(len(rows))], done.replaced, done.events,
                   [refused[i] for i in sorted(refused)])


def ingest(labels_dir: str | os.PathLike, export: str | os.PathLike, append_to_suite: bool = True) -> dict:
    """Merge the human labels of ``export`` into ``labels_dir`` (and the suite's annotations); returns counts."""
    folder = LabelsFolder(labels_dir)
    folder.check_finished(" (finish it with --resume first)")  # a clear error before the lock
    with folder.lock("labelling or ingest job"):
        return _ingest_locked(folder, Path(export), append_to_suite)


def _ingest_locked(folder: LabelsFolder, export: Path, append_to_suite: bool) -> dict:
    if not export.is_file():
        what = "is not a regular file" if export.exists() or export.is_symlink() else "does not exist"
        raise FileNotFoundError(f"export {export} {what} (fix: export the Label Studio project as JSON, and pass the "
                                f"file)")
    job, labels = folder.read_finished()
    suite = Suite.load(job["suite"])
    durations = {r["continuation_id"]: r["duration_s"] for r in labels if r.get("duration_s") is not None}
    new, problems, cancelled = read_labels(export, suite, folder.tasks_file, durations)
    now, via = utc_now(), f"ingest {export.name[:100]}"
    incoming, wheres = [], []
    for a in new:
        row, where = _row(a), _where(a, export)
        try:
            incoming.append(arriving(row, "copy", now))
            wheres.append(where)
        except ValueError as err:  # a far-future, out-of-range or unreadable time: the label is not taken
            problems.append(ExportProblem("error", where, str(err)))
    human = folder.human_labels()
    change = human.apply(incoming, via=via, now=now)
    problems += [_refusal(status, where) for where, status in zip(wheres, change.statuses) if status in _REFUSALS]
    deleted = suite_history(suite.root).deleted_ids()  # the webhook's tombstones reach the human labels too
    gone = [r["ls_annotation_id"] for r in human.rows() if r.get("ls_annotation_id") is not None
            and str(r["ls_annotation_id"]) in deleted]
    if gone:
        human.delete(gone, via=f"{via}: deleted in Label Studio (the suite's history)", now=now)
    rows = human.rows()
    # Every human label, not only this run's: a run that stopped before this step is made good here.
    synced = upsert_suite_annotations(suite, rows, durations, via, keep_good=True) if append_to_suite and rows \
        else Applied([])
    reasons = iter(synced.problems)
    for r, status in zip(rows, synced.statuses):
        where = f"the suite's annotations.jsonl: {r['continuation_id']}, annotation {r.get('ls_annotation_id')}"
        if status == "refused":
            problems.append(ExportProblem("error", where, next(reasons), "correct the human label"))
        elif status in _REFUSALS:
            problems.append(_refusal(status, where))
    merged = merge_labels(labels, rows)
    folder.append_problems([{"export": str(export), "level": p.level, "where": p.where, "message": p.message,
                             "fix": p.fix} for p in problems])
    folder.write_labels(merged)
    waiting = sum(r["decision"] == "human" and r["label_source"] is None for r in merged)
    return {"export": str(export), "labels_read": len(new), "accepted": change.count("recorded"),
            "updated": change.count("updated"), "stale": change.count("stale"),
            "duplicates": change.count("duplicate"), "deleted": change.count("deleted") + len(gone),
            "errors": sum(p.level == "error" for p in problems),
            "warnings": sum(p.level == "warning" for p in problems), "cancelled": cancelled,
            "appended_to_suite": synced.count("recorded") + synced.count("updated"),
            "human_labelled": sum(r["label_source"] == "human" for r in merged), "waiting": waiting,
            "problems": [str(p) for p in problems]}


# (level, message, fix) of a label the history refused, by its status
_REFUSALS = {"deleted": ("warning", "deleted in Label Studio: not taken", "a new label is a new annotation"),
             "conflict": ("error", "its annotation id already names a label of another continuation: not taken",
                          "export the project from Label Studio, unedited")}


def _refusal(status: str, where: str) -> ExportProblem:
    level, message, fix = _REFUSALS[status]
    return ExportProblem(level, where, message, fix)


def _where(a, export: Path) -> str:
    """Where a label of an export is (its task and annotation, with their indexes), for a problem."""
    where = a.extra.get("_where") if isinstance(a, Annotation) else None
    row = _row(a)
    return where or f"{export.name}: {row['continuation_id']}, annotation {row.get('ls_annotation_id')}"


def format_ingest(result: dict, max_problems: int = 20) -> str:
    lines = [f"ingested {result['export']}: {result['accepted']} new labels, {result['updated']} updated "
             f"({result['duplicates']} already there, {result['stale']} older than the label kept), "
             f"{result['errors']} refused, {result['warnings']} warnings, {result['cancelled']} cancelled"
             + (f", {result['deleted']} deleted in Label Studio" if result.get("deleted") else "") + "; "
             f"{result['appended_to_suite']} added to or updated in the suite's annotations.jsonl",
             f"{result['human_labelled']} continuations now carry a human label; {result['waiting']} routed to "
             f"humans still wait for one"]
    lines += [f"  {p}" for p in result["problems"][:max_problems]]
    if len(result["problems"]) > max_problems:
        lines.append(f"  ... {len(result['problems']) - max_problems} more in {PROBLEMS_FILE}")
    return "\n".join(lines)


__all__ = ["append_annotations", "format_ingest", "ingest", "merge_labels", "read_labels", "upsert_suite_annotations"]
