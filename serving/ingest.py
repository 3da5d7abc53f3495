"""``autorater ingest``: take the annotators' labels back into a labels folder and into the suite.

Reads a Label Studio JSON export (or a SUITE_FORMAT ``annotations.jsonl``), checks every label
(see serving.labelstudio.parse_export), and then:

- keeps every accepted label in ``LABELS_DIR/human_annotations.jsonl`` (deduplicated: ingesting the
  same export twice adds nothing);
- rewrites ``labels.jsonl``: a continuation with human labels gets their majority (``human_outcome``,
  ``human_marker_s``, ``human_n``), and that label wins (``outcome``, ``marker_s``,
  ``label_source: "human"``); the model's label stays beside it (``model_outcome``...) for later
  evaluation, and ``decision`` (how it was routed) is unchanged;
- appends the new labels to the suite's ``annotations.jsonl`` so that the next model can train on them;
- writes what it refused or noticed to ``LABELS_DIR/ingest-problems.jsonl``, one line per problem.

Example:
    >>> result = ingest("labels-v3", "project-7-export.json")   # doctest: +SKIP
    >>> result["accepted"], result["waiting"]                   # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from data.labels import label_table, majority_vote
from data.suite import Annotation, Problem, Suite, read_jsonl, record_to_dict, write_jsonl
from data.video import VideoError, video_info
from serving.label import JOB_FILE, LABELS_FILE, _jsonl, _read_jsonl, _write_atomic, folder_lock
from serving.labelstudio import TASKS_FILE, ExportProblem, parse_export

HUMAN_FILE, PROBLEMS_FILE = "human_annotations.jsonl", "ingest-problems.jsonl"


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
    """What makes a label the same label: its Label Studio annotation id, else its content."""
    if a.get("ls_annotation_id") is not None:
        return ("ls", a["continuation_id"], a["annotator_id"], a["ls_annotation_id"])
    return ("row", a["continuation_id"], a["annotator_id"], a["outcome"], a.get("marker_s"))


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
    known = {}
    if tasks_file is not None and Path(tasks_file).is_file():
        known = {t["data"]["continuation_id"]: {"fps": t["data"]["fps"], "frames": t["data"]["frames"]}
                 for t in json.loads(Path(tasks_file).read_text(encoding="utf-8"))}
    parsed = parse_export(export, _VideoLookup(suite, known))
    return parsed.annotations, parsed.problems, parsed.cancelled


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


def append_annotations(suite: Suite, annotations: list) -> int:
    """Append labels (Annotation records or dicts) to the suite's ``annotations.jsonl``, skipping ones already
    there; atomic, under the suite folder's lock. Returns how many were new."""
    rows = [a if isinstance(a, dict) else {k: v for k, v in record_to_dict(a).items() if not k.startswith("_")}
            for a in annotations]
    with folder_lock(suite.root, "ingest or webhook", wait=True):
        current = Suite.load(suite.root)  # re-read under the lock: another writer may have appended
        existing = [{k: v for k, v in record_to_dict(a).items() if not k.startswith("_")} for a in current.annotations]
        keys = {_key(a) for a in existing}
        fresh = []
        for a in rows:
            if _key(a) not in keys:
                keys.add(_key(a))
                fresh.append(a)
        if fresh:
            write_jsonl(suite.root / "annotations.jsonl", existing + fresh)
    return len(fresh)


def ingest(labels_dir: str | os.PathLike, export: str | os.PathLike, append_to_suite: bool = True) -> dict:
    """Merge the human labels of ``export`` into ``labels_dir`` (and the suite's annotations); returns counts."""
    labels_dir = Path(labels_dir)
    if not (labels_dir / LABELS_FILE).is_file():
        raise FileNotFoundError(f"{labels_dir} has no {LABELS_FILE}: pass the folder written by `autorater label` "
                                f"(finish it with --resume first)")
    with folder_lock(labels_dir, "labelling or ingest job"):
        return _ingest_locked(labels_dir, Path(export), append_to_suite)


def _ingest_locked(labels_dir: Path, export: Path, append_to_suite: bool) -> dict:
    if not export.is_file():
        raise FileNotFoundError(f"export {export} does not exist (fix: export the Label Studio project as JSON)")
    job = json.loads((labels_dir / JOB_FILE).read_text(encoding="utf-8"))
    suite = Suite.load(job["suite"])
    labels = _read_jsonl(labels_dir / LABELS_FILE)
    durations = {r["continuation_id"]: r["duration_s"] for r in labels if r.get("duration_s") is not None}
    new, problems, cancelled = read_labels(export, suite, labels_dir / "labelstudio" / TASKS_FILE, durations)

    human_path = labels_dir / HUMAN_FILE
    human = _read_jsonl(human_path) if human_path.is_file() else []
    seen = {_key(a) for a in human}
    added = []
    for a in new:
        d = {k: v for k, v in record_to_dict(a).items() if not k.startswith("_")}
        if _key(d) not in seen:
            seen.add(_key(d))
            added.append(d)
    human += added
    merged = merge_labels(labels, human)
    _write_atomic(human_path, _jsonl(human))
    if problems:
        with open(labels_dir / PROBLEMS_FILE, "a", encoding="utf-8") as f:
            for p in problems:
                f.write(json.dumps({"export": str(export), "level": p.level, "where": p.where,
                                    "message": p.message, "fix": p.fix}) + "\n")
    _write_atomic(labels_dir / LABELS_FILE, _jsonl(merged))

    appended = append_annotations(suite, added) if append_to_suite and added else 0
    waiting = sum(r["decision"] == "human" and r["label_source"] is None for r in merged)
    return {"export": str(export), "labels_read": len(new), "accepted": len(added), "duplicates": len(new) - len(added),
            "errors": sum(p.level == "error" for p in problems), "warnings": sum(p.level == "warning" for p in problems),
            "cancelled": cancelled, "appended_to_suite": appended, "human_labelled": sum(r["label_source"] == "human"
                                                                                        for r in merged),
            "waiting": waiting, "problems": [str(p) for p in problems]}


def format_ingest(result: dict, max_problems: int = 20) -> str:
    lines = [f"ingested {result['export']}: {result['accepted']} new labels ({result['duplicates']} already there), "
             f"{result['errors']} refused, {result['warnings']} warnings, {result['cancelled']} cancelled; "
             f"{result['appended_to_suite']} appended to the suite's annotations.jsonl",
             f"{result['human_labelled']} continuations now carry a human label; {result['waiting']} routed to "
             f"humans still wait for one"]
    lines += [f"  {p}" for p in result["problems"][:max_problems]]
    if len(result["problems"]) > max_problems:
        lines.append(f"  ... {len(result['problems']) - max_problems} more in {PROBLEMS_FILE}")
    return "\n".join(lines)


__all__ = ["append_annotations", "format_ingest", "ingest", "merge_labels", "read_labels"]
