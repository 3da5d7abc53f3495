"""The labels folder: what ``autorater label`` writes and ``ingest``, ``leaderboard``, ``simulate-annotators`` and
the benchmarks read. :class:`LabelsFolder` is its one owner: every reader and writer of these files goes through it.

    LABELS_DIR/
      job.json                         what is being labelled, by which model, with which settings (checked on
                                       --resume)
      parts/part-00012.jsonl           one file per batch of continuations, written atomically
      labels.jsonl                     every continuation exactly once (:class:`LabelRow`); written last: it marks
                                       the job finished; ``ingest`` rewrites it with the human labels merged in
      errors.jsonl                     the videos that could not be decoded (they went to humans)
      summary.json                     counts, coverage, the operating point, the drift check
      labelstudio/config.xml           the Label Studio labelling config (serving.labelstudio.formats)
      labelstudio/tasks.json           the human queue, to import into Label Studio
      human_annotations.jsonl          the human labels taken back by ``ingest``, one per annotation
      human_annotations_history.jsonl  their history: every change, in arrival order (``history``); the human
                                       labels are a pure function of it (a folder written before the event format
                                       keeps its old lines, which are skipped)
      ingest-problems.jsonl            what ``ingest`` refused or noticed, one line per problem
      leaderboard.html, .json          ``autorater leaderboard``'s report, by default
      .lock                            the writers' lock (:meth:`LabelsFolder.lock`)

One writer at a time (:meth:`LabelsFolder.lock`); every file is written whole or not at all
(``write_text_atomic``: a temp file, fsync and rename), but for the problems log, appended line by line
with fsync.

Example:
    >>> folder = LabelsFolder("labels-v3")                       # doctest: +SKIP
    >>> job, rows = folder.read_finished()                       # doctest: +SKIP
    >>> rows[0]["decision"], job["model_name"]                   # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import warnings
from pathlib import Path
from typing import Iterator, TypedDict

from autorater.data.files import append_line_durably, jsonl_text, write_text_atomic
from autorater.serving.fields import json_safe
from autorater.serving.labelling.history import LabelHistory

JOB_FILE, LABELS_FILE, ERRORS_FILE, SUMMARY_FILE, PARTS_DIR = (
    "job.json", "labels.jsonl", "errors.jsonl", "summary.json", "parts")
HUMAN_FILE, HUMAN_HISTORY_FILE, PROBLEMS_FILE = (
    "human_annotations.jsonl", "human_annotations_history.jsonl", "ingest-problems.jsonl")
LABELSTUDIO_DIR, LEADERBOARD_FILE = "labelstudio", "leaderboard.html"
PART_NAME = re.compile(r"part-(\d{5})\.jsonl")
JOB_KEYS = ("suite", "suite_name", "suite_version", "continuations", "ids_sha1", "model", "model_name",
            "weights_sha1", "calibration_sha1", "batch_size", "audit_share", "seed", "on_drift", "audit_hash",
            "certify", "strata", "claim", "audit_budget")


class LabelJobError(ValueError):
    """The labels folder cannot be used for this job (another job's folder, an unfinished one, a busy one)."""


class LabelRow(TypedDict, total=False):
    """One line of ``labels.jsonl``: the label, where it came from, and the model's own rating."""

    continuation_id: str
    outcome: str | None  # "success" | "failure"; None while a routed continuation awaits its human label
    marker_s: float | None
    failure_mode: str | None
    p_success: float | None  # calibrated; None for an undecodable video
    model: str  # ``name@version`` of the rater
    decision: str  # "provisional" (auto until the version's audit certifies it) | "auto" (certified) | "human"
    reason: str  # why a continuation went to humans: "uncertain", "uncalibrated", "drift", "uncertified", ...
    audit: bool  # auto-labelled and drawn into the random audit slice (also sent to humans)
    stratum: str  # the stratum it is certified in (serving.labelling.certify), e.g. "category=put_next|camera=corner"
    audit_rank: int | None  # its place in its stratum's audit order (None: not at the stratum's audited level)
    certified_by: str | None  # after ``certify``: "audit" (the version's own audit)
    error: str  # the video could not be decoded
    model_outcome: str
    model_marker_s: float
    model_failure_mode: str | None
    logit: float
    marker_spread_s: float
    duration_s: float
    label_source: str  # after ``ingest``: "human" or "model"
    human_outcome: str
    human_marker_s: float | None
    human_n: int


@contextlib.contextmanager
def folder_lock(folder: Path, what: str, wait: bool = False) -> Iterator[None]:
    """An exclusive lock on ``folder`` (``.lock`` inside it) while one writer works there.

    A second writer waits for it (``wait``) or is refused at once with a clear error (the default:
    two labelling jobs on one folder are a mistake, not a queue).
    """
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LabelJobError(f"{folder} is busy: another {what} is writing there; wait for it to finish") from None
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def uncertified_as_waiting(row: dict) -> dict:
    """A ``labels.jsonl`` row as certified evidence: a provisional model label without a human one is no label yet
    (``outcome`` None); a provisional row a human labelled counts as an audited auto-label (the human's label)."""
    if row.get("decision") != "provisional":
        return row
    if row.get("label_source") == "human":
        return {**row, "decision": "auto"}
    return {**row, "outcome": None, "marker_s": None, "failure_mode": None, "label_source": None}


def read_jsonl_rows(path: Path) -> list[dict]:
    """The JSON objects of a JSON Lines file the product wrote (one per non-empty line)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_jsonl_rows(path: Path, rows: list[dict]) -> None:
    """Write ``rows`` as JSON Lines, whole or not at all (NaN refused: the old file stays)."""
    write_text_atomic(path, jsonl_text(rows))


class LabelsFolder:
    """One labels folder: its paths, and every read and write of its files (the module docstring lists them)."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.job, self.labels, self.errors, self.summary, self.parts = (
            self.root / name for name in (JOB_FILE, LABELS_FILE, ERRORS_FILE, SUMMARY_FILE, PARTS_DIR))
        self.human, self.human_history, self.problems = (
            self.root / name for name in (HUMAN_FILE, HUMAN_HISTORY_FILE, PROBLEMS_FILE))
        self.labelstudio = self.root / LABELSTUDIO_DIR
        self.leaderboard = self.root / LEADERBOARD_FILE

    def __repr__(self) -> str:
        return f"LabelsFolder({str(self.root)!r})"

    def part(self, k: int) -> Path:
        """Batch ``k``'s part file."""
        return self.parts / f"part-{k:05d}.jsonl"

    def lock(self, what: str, wait: bool = False):
        """:func:`folder_lock` on this folder."""
        return folder_lock(self.root, what, wait)

    def read_job(self) -> dict:
        """``job.json``: the suite, the model and the settings of the job that wrote the folder."""
        if not self.job.is_file():
            raise FileNotFoundError(f"{self.root} has no {JOB_FILE}: pass a folder written by `autorater label`")
        return json.loads(self.job.read_text(encoding="utf-8"))

    def check_finished(self, hint: str = "") -> None:
        """FileNotFoundError (with ``hint``) unless the job has finished (``labels.jsonl`` written)."""
        if not self.labels.is_file():
            raise FileNotFoundError(f"{self.root} has no {LABELS_FILE}: pass a folder written by `autorater label`"
                                    f"{hint}")

    def read_finished(self, hint: str = "") -> tuple[dict, list[LabelRow]]:
        """The job and its labels, once the job has finished."""
        self.check_finished(hint)
        return self.read_job(), read_jsonl_rows(self.labels)

    def read_certified(self, hint: str = "") -> tuple[dict, list[LabelRow]]:
        """The job and its labels as a leaderboard or an export may present them: a provisional auto-label (not yet
        certified by the version's audit, ``autorater certify``) without a human label counts as waiting
        (``outcome`` None)."""
        job, rows = self.read_finished(hint)
        return job, [uncertified_as_waiting(r) for r in rows]

    def read_labels(self) -> list[LabelRow]:
        """``labels.jsonl`` (FileNotFoundError unless the job has finished)."""
        self.check_finished()
        return read_jsonl_rows(self.labels)

    def write_labels(self, rows: list[dict]) -> None:
        """Replace ``labels.jsonl`` (whole or not at all)."""
        write_jsonl_rows(self.labels, rows)

    def read_part(self, k: int) -> list[dict]:
        """Batch ``k``'s rows."""
        return read_jsonl_rows(self.part(k))

    def write_part(self, k: int, rows: list[dict] | str) -> None:
        """Batch ``k``'s rows (or their JSON Lines text, as a Ray actor sends it), whole or not at all."""
        write_text_atomic(self.part(k), rows if isinstance(rows, str) else jsonl_text(rows))

    def write_errors(self, rows: list[dict]) -> None:
        write_jsonl_rows(self.errors, rows)

    def read_summary(self) -> dict:
        return json.loads(self.summary.read_text(encoding="utf-8"))

    def write_summary(self, summary: dict, default=None) -> None:
        write_text_atomic(self.summary, json.dumps(summary, indent=1, default=default) + "\n")

    def human_labels(self) -> LabelHistory:
        """The human labels taken back by ``ingest`` and their history (serving.labelling.history)."""
        return LabelHistory(self.human, self.human_history)

    def append_problems(self, rows: list[dict]) -> None:
        """Append what ``ingest`` refused or noticed to ``ingest-problems.jsonl`` (each line fsynced)."""
        for row in rows:
            append_line_durably(self.problems, json.dumps(json_safe(row), ensure_ascii=False))

    @property
    def tasks_file(self) -> Path:
        """``labelstudio/tasks.json``: the human queue."""
        from autorater.serving.labelstudio.formats import TASKS_FILE

        return self.labelstudio / TASKS_FILE

    def read_tasks(self) -> list:
        """The Label Studio tasks of the human queue (ValueError naming the file when it cannot be read)."""
        from autorater.serving.labelstudio.formats import read_tasks

        return read_tasks(self.tasks_file)

    def write_labelstudio(self, suite, labels: list[dict], video_url_prefix: str | None = None) -> int:
        """Write ``labelstudio/config.xml`` and ``tasks.json`` for the human queue; returns the task count."""
        from autorater.serving.labelstudio.formats import write_labelstudio_files

        return write_labelstudio_files(self.labelstudio, suite, labels, video_url_prefix=video_url_prefix)

    def write_queue_round(self, suite, queue: list[dict], video_url_prefix: str | None = None) -> int:
        """Make ``queue`` (the rows still waiting for a human label) the current ``labelstudio/tasks.json``; the
        previous file is kept as ``tasks-round-K.json`` when it differs. Returns the round number (1: the
        labelling job's own queue)."""
        from autorater.serving.labelstudio.formats import TASKS_FILE, labelstudio_texts

        rounds = [int(m.group(1)) for f in self.labelstudio.glob("tasks-round-*.json")
                  if (m := re.fullmatch(r"tasks-round-(\d+)\.json", f.name))]
        current = max(rounds, default=0) + 1
        before = self.tasks_file.read_text(encoding="utf-8") if self.tasks_file.is_file() else None
        new = labelstudio_texts(suite, queue, video_url_prefix)[0][TASKS_FILE]
        if before == new:
            return current
        if before is not None:
            archived = self.labelstudio / f"tasks-round-{current}.json"
            if not archived.exists():
                write_text_atomic(archived, before)
            current += 1
        write_text_atomic(self.tasks_file, new)
        return current

    def done_parts(self, n_batches: int) -> set[int]:
        """The batches whose part file exists; any other file there is ignored with a warning."""
        done, stray = set(), []
        for p in sorted(self.parts.iterdir()) if self.parts.is_dir() else []:
            m = PART_NAME.fullmatch(p.name)
            if m and int(m.group(1)) < n_batches and p.is_file():
                done.add(int(m.group(1)))
            elif not p.name.endswith(".tmp"):
                stray.append(p.name)
        if stray:
            warnings.warn(f"{self.parts}: ignored {len(stray)} file(s) that are not this job's part files: "
                          f"{stray[:5]} (fix: remove them; only part-NNNNN.jsonl, written by the job, are read)",
                          stacklevel=2)
        return done

    def open_job(self, spec: dict, resume: bool) -> bool:
        """Create the folder for the job ``spec``, or re-open the same job's; True when it has already finished.

        Another job's folder, or an unfinished one without ``resume``, is a :class:`LabelJobError`.
        """
        if self.job.is_file():
            old = json.loads(self.job.read_text(encoding="utf-8"))
            if "audit_hash" not in old:  # written before the draw changed: the folder keeps its own
                spec["audit_hash"] = old["audit_hash"] = "crc32"
            if "certify" not in old:  # written before certification: it carried the references' promise
                spec["certify"], spec["strata"] = old["certify"], old["strata"] = "references", spec["strata"]
            for key in ("claim", "audit_budget"):  # written before sequential audits: its own certify refuses it
                old.setdefault(key, spec.get(key))
            changed = [k for k in JOB_KEYS if old.get(k) != spec.get(k)]
            if changed:
                raise LabelJobError(f"{self.root} holds another labelling job (different {', '.join(changed)}); "
                                    f"choose another --out, or delete {self.root} to start again")
            finished = self.labels.is_file()
            if not finished and not resume:
                done = len(list(self.parts.glob("part-*.jsonl")))
                raise LabelJobError(f"{self.root} holds an unfinished labelling job ({done} batches done); "
                                    f"pass --resume to finish it, or choose another --out")
            return finished
        self.parts.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.job, json.dumps(spec, indent=1) + "\n")
        return False


__all__ = ["ERRORS_FILE", "HUMAN_FILE", "HUMAN_HISTORY_FILE", "JOB_FILE", "JOB_KEYS", "LABELSTUDIO_DIR", "LABELS_FILE",
           "LEADERBOARD_FILE", "PARTS_DIR", "PROBLEMS_FILE", "SUMMARY_FILE", "LabelJobError", "LabelRow",
           "LabelsFolder", "folder_lock", "read_jsonl_rows", "uncertified_as_waiting", "write_jsonl_rows"]
