"""The labels folder: what ``autorater label`` writes and ``ingest``, ``leaderboard``, ``simulate-annotators`` and
the benchmarks read. :class:`LabelsFolder` is its one owner: every reader and writer of these files goes through it.

    LABELS_DIR/
      job.json                         what is being labelled, by which model, with which settings (checked on
                                       --resume)
      parts/part-00012.jsonl           one file per batch of continuations, written atomically
      labels.jsonl                     every continuation exactly once (:class:`LabelRow`); written last: it marks
                                       the job finished; ``ingest`` rewrites it with the human labels merged in
      errors.jsonl                     the videos that could not be decoded (they went to humans)
      summary.json                     counts, coverage, the operating point, the drift check, the certification
                                       (derived: rewritten from the plan, the rounds and the human labels)
      plan.json                        the label-time audit plan (strata, designs, budgets, model shares, audit
                                       orders), sealed: a SHA-256 over it and job.json (``certify`` also
                                       recomputes it from the part files and the model's calibration)
      rounds.jsonl                     ``certify``'s journal: one line per round that changed anything (first
                                       answers, states, withdrawn certificates) or committed a challenger
      models/challenger-K/             version challengers (config + safetensors + metadata, ``ratings.jsonl``,
                                       ``lineage.json``: its parent and the labels it learned from)
      labelstudio/config.xml           the Label Studio labelling config (serving.labelstudio.formats)
      labelstudio/tasks.json           the human queue, to import into Label Studio
      human_annotations.jsonl          the human labels taken back by ``ingest``, one per annotation
      human_annotations_history.jsonl  their history: every change, in arrival order (``history``); the human
                                       labels are a pure function of it (a folder written before the event format
                                       keeps its old lines, which are skipped)
      ingest-problems.jsonl            what ``ingest`` refused or noticed, one line per problem
      leaderboard.html, .json          ``autorater leaderboard``'s report, by default
      .lock                            the writers' lock (:meth:`LabelsFolder.lock`)

One writer at a time (:meth:`LabelsFolder.lock`, which also removes the temps of its files a crashed writer left);
every file is written whole or not at all (``write_text_atomic``: a temp file, fsync and rename), but for the
problems log, appended line by line with fsync.

Every file is checked as it is read, since anyone may have changed it: ``job.json`` and ``summary.json`` must be
JSON objects whose known fields have their types, every line of ``labels.jsonl`` an object whose fields have
theirs (:data:`ROW_RULES`), and ``labels.jsonl`` must list the continuations ``job.json`` names, once each, in the
suite's order. Anything else is one :class:`LabelsFileError` line naming the file, the line and the fix.

Example:
    >>> folder = LabelsFolder("labels-v3")                       # doctest: +SKIP
    >>> job, rows = folder.read_finished()                       # doctest: +SKIP
    >>> rows[0]["decision"], job["model_name"]                   # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, TypedDict

from autorater.data import files
from autorater.data.files import append_line_durably, jsonl_text, remove_stale_temps, write_text_atomic
from autorater.data.paths import printable
from autorater.serving.fields import json_safe
from autorater.serving.labelling.history import LabelHistory

JOB_FILE, LABELS_FILE, ERRORS_FILE, SUMMARY_FILE, PARTS_DIR = (
    "job.json", "labels.jsonl", "errors.jsonl", "summary.json", "parts")
HUMAN_FILE, HUMAN_HISTORY_FILE, PROBLEMS_FILE = (
    "human_annotations.jsonl", "human_annotations_history.jsonl", "ingest-problems.jsonl")
PLAN_FILE, JOURNAL_FILE, MODELS_DIR = "plan.json", "rounds.jsonl", "models"
PLAN_FORMAT = "autorater-audit-plan/2"
LABELSTUDIO_DIR, LEADERBOARD_FILE = "labelstudio", "leaderboard.html"
PART_NAME = re.compile(r"part-(\d{5})\.jsonl")
JOB_KEYS = ("suite", "suite_name", "suite_version", "continuations", "ids_sha1", "model", "model_name",
            "weights_sha1", "calibration_sha1", "batch_size", "audit_share", "seed", "on_drift", "audit_hash",
            "certify", "strata", "claim", "audit_budget", "adapt", "adapt_after", "replay", "cache_dir", "adapt_epochs")


DECISIONS = ("provisional", "auto", "human")  # the values of ``decision`` the product writes
OUTCOMES = ("success", "failure")
# the files of the folder its locked writers own: the temps of these a crashed writer left are removed
_OWNED = re.compile(r"job\.json|labels\.jsonl|errors\.jsonl|summary\.json|plan\.json|rounds\.jsonl|"
                    r"human_annotations[\w.-]*|ingest-problems\.jsonl|part-\d{5}\.jsonl|config\.xml|"
                    r"tasks(?:-round-\d+)?\.json")


class LabelJobError(ValueError):
    """The labels folder cannot be used for this job (another job's folder, an unfinished one, a busy one)."""


class LabelsFileError(LabelJobError):
    """A file of the labels folder is not what the product writes (changed by hand, damaged, another job's): one line
    naming the file, the line and the fix."""

    def __init__(self, path: Path, line: int | None, what: str):
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{printable(where)}: {what} (fix: the product never writes this: restore {path.name} from "
                         f"a backup, or label the suite again into a new folder with `autorater label --out NEW`)")


def _number(low: float = -math.inf, high: float = math.inf, null: bool = False) -> Callable[[Any], bool]:
    return lambda v: (null and v is None) or (isinstance(v, (int, float)) and not isinstance(v, bool)
                                              and math.isfinite(v) and low <= v <= high)


def _whole(low: int = 0, high: int = 10 ** 12) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


def _text(null: bool = False) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, str) or (null and v is None)


def _one_of(values: tuple, null: bool = False) -> Callable[[Any], bool]:
    return lambda v: (null and v is None) or (isinstance(v, str) and v in values)


# field -> (what it must be, the check); a field absent is fine unless required
ROW_RULES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "continuation_id": ("a string", _text()), "decision": (f"one of {', '.join(DECISIONS)}", _one_of(DECISIONS)),
    "outcome": ("success, failure or null", _one_of(OUTCOMES, null=True)),
    "marker_s": ("a number or null", _number(null=True)), "failure_mode": ("a string or null", _text(null=True)),
    "p_success": ("a number from 0 to 1, or null", _number(0, 1, null=True)), "model": ("a string", _text()),
    "reason": ("a string", _text()), "audit": ("true or false", lambda v: isinstance(v, bool)),
    "stratum": ("a string", _text()), "certified_by": ("a string or null", _text(null=True)),
    "audit_rank": ("a whole number >= 0 or null", lambda v: v is None or _whole()(v)),
    "error": ("a string", _text()), "model_outcome": ("success or failure", _one_of(OUTCOMES)),
    "model_marker_s": ("a number or null", _number(null=True)),
    "model_failure_mode": ("a string or null", _text(null=True)), "logit": ("a number", _number()),
    "marker_spread_s": ("a number or null", _number(null=True)),
    "duration_s": ("a number or null", _number(null=True)), "label_source": ("a string or null", _text(null=True)),
    "human_outcome": ("success, failure or null", _one_of(OUTCOMES, null=True)),
    "human_marker_s": ("a number or null", _number(null=True)), "human_n": ("a whole number >= 0", _whole()),
}
ROW_REQUIRED = ("continuation_id", "decision")
JOB_RULES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "suite": ("a string", _text()), "suite_name": ("a string", _text()), "suite_version": ("a string", _text()),
    "continuations": ("a whole number >= 0", _whole()), "ids_sha1": ("a string", _text()),
    "model": ("a string", _text()), "model_name": ("a string", _text()),
    "weights_sha1": ("a string or null", _text(null=True)), "calibration_sha1": ("a string or null", _text(null=True)),
    "batch_size": ("a whole number >= 1", _whole(1)), "audit_share": ("a number from 0 to 1", _number(0, 1)),
    "seed": ("a whole number", _whole(-(2 ** 63), 2 ** 64)), "on_drift": ("a string", _text()),
    "audit_hash": ("a string", _text()), "certify": ("a string", _text()),
    "strata": ("a list of strings", lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)),
    "claim": ("family or fcr", _one_of(("family", "fcr"))),
    "audit_budget": ("a number in (0, 1] or null", lambda v: v is None or (_number(0, 1)(v) and v > 0)),
    "adapt": ("a whole number from 0 to 8", _whole(0, 8)), "adapt_after": ("a whole number from 1 to 10000",
                                                                             _whole(1, 10_000)),
    "replay": ("a list of strings", lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)),
    "cache_dir": ("a string or null", _text(null=True)),
    "adapt_epochs": ("a whole number from 1 to 1000, or null", lambda v: v is None or _whole(1, 1000)(v)),
    "job_id": ("a string of 1 to 64 characters", lambda v: isinstance(v, str) and 0 < len(v) <= 64),
}
JOB_REQUIRED = ("suite", "continuations", "ids_sha1")
SUMMARY_RULES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    **{k: ("a whole number >= 0", _whole()) for k in ("continuations", "auto", "provisional", "human", "audit",
                                                      "errors", "human_tasks", "rated_this_run")},
    "coverage": ("a number from 0 to 1", _number(0, 1)), "suite": ("a string", _text()),
    "model": ("a string", _text()), "routed_by": ("a string or null", _text(null=True)),
    **{k: ("an object or null", lambda v: v is None or isinstance(v, dict))
       for k in ("reasons", "drift", "operating_point", "certification")},
}


def check_fields(obj: Any, rules: dict, required: tuple[str, ...] = (), what: str = "") -> str | None:
    """What is wrong with ``obj`` by ``rules`` (field -> (what it must be, check)), or None: it must be a JSON
    object holding the ``required`` fields, and each known field must pass its check."""
    if not isinstance(obj, dict):
        return f"{what or 'it'} is {_json_kind(obj)}, not a JSON object"
    for name in required:
        if name not in obj:
            return f"field '{name}' is missing ({rules[name][0]})"
    for name, (must, check) in rules.items():
        if name in obj and not check(obj[name]):
            return f"field '{name}' must be {must}, not {printable(_shown(obj[name]))}"
    return None


def _json_kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "true or false", type(None): "null"}
    return names.get(type(value), "a number")


def _shown(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except ValueError:  # a number JSON cannot hold (1e400 read as infinity)
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


def _load_json(path: Path, text: str, line: int | None = None) -> Any:
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise LabelsFileError(path, line, "is nested too deeply to be what the product writes") from None
    except ValueError as err:
        raise LabelsFileError(path, line, f"is not JSON ({printable(str(err))[:80]})") from None


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise LabelsFileError(path, None, f"is not UTF-8 text (byte {err.start})") from None
    except IsADirectoryError:
        raise LabelsFileError(path, None, "is a folder") from None


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


def folder_lock(folder: Path, what: str, wait: bool = False) -> contextlib.AbstractContextManager[None]:
    """An exclusive lock on ``folder`` (``.lock`` inside it, never opened through a symlink) while one writer works
    there (``autorater.data.files.folder_lock``).

    A second writer waits for it (``wait``) or is refused at once with a LabelJobError (the default:
    two labelling jobs on one folder are a mistake, not a queue).
    """
    return files.folder_lock(folder, what, wait, busy=LabelJobError)


def uncertified_as_waiting(row: dict) -> dict:
    """A ``labels.jsonl`` row as certified evidence: a provisional model label without a human one is no label yet
    (``outcome`` None); a provisional row a human labelled counts as an audited auto-label (the human's label)."""
    if row.get("decision") != "provisional":
        return row
    if row.get("label_source") == "human":
        return {**row, "decision": "auto"}
    return {**row, "outcome": None, "marker_s": None, "failure_mode": None, "label_source": None}


def read_jsonl_rows(path: Path, check: Callable[[Any, int], str | None] | None = None) -> list[dict]:
    """The JSON objects of a JSON Lines file the product wrote (one per non-empty line), each checked by
    ``check(row, line number)`` (what is wrong, or None); a LabelsFileError naming the file and the line
    otherwise."""
    path = Path(path)
    check = check or (lambda row, number: check_fields(row, {}, what="the line"))
    rows = []
    for number, line in enumerate(_read_text(path).split("\n"), start=1):
        if not line.strip():
            continue
        row = _load_json(path, line, number)
        wrong = check(row, number)
        if wrong:
            raise LabelsFileError(path, number, wrong)
        rows.append(row)
    return rows


def _label_row_check() -> Callable[[Any, int], str | None]:
    """A check of ``labels.jsonl``'s lines: :data:`ROW_RULES`, a model label's own fields, each id once."""
    seen: dict[str, int] = {}

    def check(row: Any, number: int) -> str | None:
        wrong = check_fields(row, ROW_RULES, ROW_REQUIRED, what="the line")
        if wrong:
            return wrong
        if row["decision"] in ("auto", "provisional") and "model_outcome" not in row:
            return f"a model label (decision {row['decision']}) has no 'model_outcome'"
        cid = row["continuation_id"]
        if cid in seen:
            return f"continuation {printable(cid)[:80]!r} is listed again (first on line {seen[cid]})"
        seen[cid] = number
        return None

    return check


def seal(plan: dict, job: dict) -> str:
    """The SHA-256 of a plan and its job (canonical JSON): what ``plan.json`` carries."""
    text = json.dumps({"job": job, "plan": plan}, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


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
        self.plan, self.journal = self.root / PLAN_FILE, self.root / JOURNAL_FILE

    def __repr__(self) -> str:
        return f"LabelsFolder({str(self.root)!r})"

    def part(self, k: int) -> Path:
        """Batch ``k``'s part file."""
        return self.parts / f"part-{k:05d}.jsonl"

    @contextlib.contextmanager
    def lock(self, what: str, wait: bool = False) -> Iterator[None]:
        """:func:`folder_lock` on this folder; once held, the temps of the folder's own files that a crashed writer
        left (``NAME.<random>.tmp``, in the folder, ``parts/`` and ``labelstudio/``) are removed."""
        with folder_lock(self.root, what, wait):
            remove_stale_temps(self.root, subfolders=(PARTS_DIR, LABELSTUDIO_DIR), owned=_OWNED.fullmatch)
            yield

    def read_job(self) -> dict:
        """``job.json``: the suite, the model and the settings of the job that wrote the folder (checked:
        :data:`JOB_RULES`)."""
        if not self.job.is_file():
            raise FileNotFoundError(f"{self.root} has no {JOB_FILE}: pass a folder written by `autorater label`")
        job = _load_json(self.job, _read_text(self.job))
        wrong = check_fields(job, JOB_RULES, JOB_REQUIRED)
        if wrong:
            raise LabelsFileError(self.job, None, wrong)
        return job

    def check_finished(self, hint: str = "") -> None:
        """FileNotFoundError (with ``hint``) unless the job has finished (``labels.jsonl`` written)."""
        if not self.labels.is_file():
            raise FileNotFoundError(f"{self.root} has no {LABELS_FILE}: pass a folder written by `autorater label`"
                                    f"{hint}")

    def read_finished(self, hint: str = "") -> tuple[dict, list[LabelRow]]:
        """The job and its labels, once the job has finished: every row checked (:data:`ROW_RULES`), and the rows
        exactly the continuations of ``job.json`` (its count and ids hash), once each, in order."""
        self.check_finished(hint)
        job = self.read_job()
        rows = read_jsonl_rows(self.labels, _label_row_check())
        self._check_against_job(job, rows)
        return job, rows

    def _check_against_job(self, job: dict, rows: list[dict]) -> None:
        if len(rows) != job["continuations"]:
            raise LabelsFileError(self.labels, None, f"it lists {len(rows)} continuation(s) where {JOB_FILE} names "
                                                     f"{job['continuations']}")
        ids = "\n".join(r["continuation_id"] for r in rows).encode("utf-8", "surrogatepass")
        if hashlib.sha1(ids).hexdigest() != job["ids_sha1"]:
            raise LabelsFileError(self.labels, None, f"its continuations are not the ones {JOB_FILE} names (their "
                                                     f"ids or order differ from the suite's the job labelled)")

    def read_certified(self, hint: str = "") -> tuple[dict, list[LabelRow]]:
        """The job and its labels as a leaderboard or an export may present them: a provisional auto-label (not yet
        certified by the version's audit, ``autorater certify``) without a human label counts as waiting
        (``outcome`` None)."""
        job, rows = self.read_finished(hint)
        return job, [uncertified_as_waiting(r) for r in rows]

    def read_labels(self) -> list[LabelRow]:
        """``labels.jsonl``, checked as :meth:`read_finished` does (FileNotFoundError unless the job has finished)."""
        return self.read_finished()[1]

    def write_labels(self, rows: list[dict]) -> None:
        """Replace ``labels.jsonl`` (whole or not at all)."""
        write_jsonl_rows(self.labels, rows)

    def read_part(self, k: int) -> list[dict]:
        """Batch ``k``'s rows (each an object with its ``continuation_id``)."""
        return read_jsonl_rows(self.part(k), lambda row, _: check_fields(row, ROW_RULES, ("continuation_id",),
                                                                       what="the line"))

    def write_part(self, k: int, rows: list[dict] | str) -> None:
        """Batch ``k``'s rows (or their JSON Lines text, as a Ray actor sends it), whole or not at all."""
        write_text_atomic(self.part(k), rows if isinstance(rows, str) else jsonl_text(rows))

    def write_errors(self, rows: list[dict]) -> None:
        write_jsonl_rows(self.errors, rows)

    def read_summary(self) -> dict:
        """``summary.json`` (checked: :data:`SUMMARY_RULES`)."""
        if not self.summary.is_file():
            raise FileNotFoundError(f"{self.root} has no {SUMMARY_FILE}: pass a folder written by `autorater label`")
        summary = _load_json(self.summary, _read_text(self.summary))
        wrong = check_fields(summary, SUMMARY_RULES)
        if wrong:
            raise LabelsFileError(self.summary, None, wrong)
        return summary

    def write_summary(self, summary: dict, default=None) -> None:
        write_text_atomic(self.summary, json.dumps(summary, indent=1, default=default) + "\n")

    # -- the sealed plan and certify's journal ------------------------------------------------
    def write_plan(self, plan: dict, job: dict) -> dict:
        """Write ``plan.json`` once, sealed: its SHA-256 over the plan and ``job.json``; returns what was written."""
        sealed = {**plan, "format": PLAN_FORMAT, "sha256": seal(plan, job)}
        write_text_atomic(self.plan, json.dumps(sealed, indent=1) + "\n")
        return sealed

    def read_plan(self, job: dict) -> dict:
        """``plan.json``, checked against its seal (a plan edited after ``autorater label`` wrote it is refused)."""
        if not self.plan.is_file():
            raise LabelJobError(f"{self.root} has no {PLAN_FILE}: it was labelled by an autorater before sealed audit "
                                f"plans (fix: label the version again with `autorater label --out NEW`)")
        plan = _load_json(self.plan, _read_text(self.plan))
        if not isinstance(plan, dict) or plan.get("format") != PLAN_FORMAT:
            raise LabelsFileError(self.plan, None, f"is not an audit plan of format {PLAN_FORMAT}")
        body = {k: v for k, v in plan.items() if k not in ("format", "sha256")}
        if plan.get("sha256") != seal(body, job):
            raise LabelsFileError(self.plan, None, "does not match its seal (the plan or job.json was edited after "
                                                   "`autorater label` wrote them)")
        return body

    def read_journal(self) -> list[dict]:
        """``rounds.jsonl``: certify's records, in order (a torn last line, never acknowledged, is left out)."""
        if not self.journal.is_file():
            return []
        text = _read_text(self.journal)
        lines = text.split("\n")
        if not text.endswith("\n"):  # a record cut by a crash mid-append was never acted on
            lines = lines[:-1]
        records = []
        for number, line in enumerate(lines, 1):
            if line.strip():
                record = _load_json(self.journal, line, number)
                if not isinstance(record, dict) or record.get("kind") not in ("round", "commit"):
                    raise LabelsFileError(self.journal, number, "is not a record certify writes (kind round or "
                                                                "commit)")
                records.append(record)
        return records

    def append_journal(self, record: dict) -> None:
        """Append one record to ``rounds.jsonl`` (fsynced; a torn earlier line is cut off first)."""
        if self.journal.is_file():
            data = self.journal.read_bytes()
            if data and not data.endswith(b"\n"):
                write_text_atomic(self.journal, data[:data.rfind(b"\n") + 1].decode("utf-8"))
        append_line_durably(self.journal, json.dumps(record, sort_keys=True))

    def challenger_dir(self, k: int) -> Path:
        """The K-th version challenger's model folder."""
        return self.root / MODELS_DIR / f"challenger-{k}"

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
        last = self.labelstudio / f"tasks-round-{current - 1}.json"
        if before is not None and not (rounds and last.read_text(encoding="utf-8") == before):
            archived = self.labelstudio / f"tasks-round-{current}.json"
            if not archived.exists():
                write_text_atomic(archived, before)
            current += 1
        # else: this round's queue was archived by a run that stopped before replacing it (or there was none)
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
            old = self.read_job()
            if "audit_hash" not in old:  # written before the draw changed: the folder keeps its own
                spec["audit_hash"] = old["audit_hash"] = "crc32"
            if "certify" not in old:  # written before certification: it carried the references' promise
                spec["certify"], spec["strata"] = old["certify"], old["strata"] = "references", spec["strata"]
            for key in ("claim", "audit_budget", "adapt", "adapt_after", "replay", "cache_dir", "adapt_epochs"):
                old.setdefault(key, spec.get(key))  # written before these existed: its own certify says so
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


__all__ = ["DECISIONS", "ERRORS_FILE", "HUMAN_FILE", "HUMAN_HISTORY_FILE", "JOB_FILE", "JOB_KEYS", "JOB_RULES",
           "JOURNAL_FILE", "LABELSTUDIO_DIR", "LABELS_FILE", "LEADERBOARD_FILE", "MODELS_DIR", "PARTS_DIR",
           "PLAN_FILE", "PLAN_FORMAT", "PROBLEMS_FILE", "ROW_RULES", "seal",
           "SUMMARY_FILE", "SUMMARY_RULES", "LabelJobError", "LabelRow", "LabelsFileError", "LabelsFolder",
           "check_fields", "folder_lock", "read_jsonl_rows", "uncertified_as_waiting", "write_jsonl_rows"]
