"""What the two importers of your own videos share at their ends: the rows they read (``SourceRow``, each with its
``Label``) and the report of an import (``ImportReport``, printed by ``format_report``).

The table import (``autorater.data.imports.table``) and the Label Studio export import
(``autorater.serving.labelstudio.imports``) each turn their source into ``SourceRow`` s, and
``autorater.data.imports.to_suite`` probes the rows' videos and writes them into a suite.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from autorater.data.paths import printable
from autorater.data.suite import Problem

DEFAULT_ANNOTATOR = "imported"


@dataclass
class Label:
    """One label of a row: an annotator's (``annotator_id``) or, for a reference, the gold one."""

    outcome: str
    marker_s: float | None = None
    failure_mode: str | None = None
    annotator_id: str = DEFAULT_ANNOTATOR
    label_id: str | int | None = None  # the source's own id of the label (a Label Studio annotation id), if any
    extra: dict = field(default_factory=dict)


@dataclass
class SourceRow:
    """One row of a table (or one annotation of a Label Studio task), with the place it came from.

    ``video`` is the file; ``video_name`` the video as the source writes it (ids derive from it).
    """

    file: str
    line: int | None
    video: Path
    video_name: str
    instruction: str
    agent_id: str
    scenario: str | None = None
    context: str | None = None
    continuation_id: str | None = None
    takeover_s: float | None = None
    category: str | None = None
    tags: list[str] = field(default_factory=list)
    label: Label | None = None
    gold: Label | None = None
    metadata: dict = field(default_factory=dict)
    where: str = ""  # more of the place ("task 12, annotation 345"), put before each message
    root: Path | None = None  # the folder the video must be inside (symlinks resolved); None: not checked


@dataclass
class ImportReport:
    """What an import did. ``problems``: rows not imported; ``warnings``: imported, with something to know."""

    out: Path
    source: str
    rows: int = 0
    unit: str = "row(s)"  # what a row of the source is
    imported: int = 0  # rows of this source now in the suite for the first time
    already: int = 0  # rows that an earlier run had imported (unchanged)
    continuations: int = 0
    scenarios: int = 0
    annotations: int = 0
    updated: int = 0  # labels of an earlier run replaced by a changed row
    references: int = 0
    videos_bytes: int = 0
    linked: bool = False
    seconds: float = 0.0
    written: bool = False
    columns: dict = field(default_factory=dict)  # field -> the column read for it
    kept_columns: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    validation: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """At least one row is in the suite and the suite is valid."""
        return self.written and self.imported + self.already > 0 and not self.validation


# ----------------------------------------------------------------------------------------------
# The report


def format_report(report: ImportReport, limit: int = 50) -> str:
    """The report as the CLI prints it: problems (with their lines and fixes), warnings, counts, the validation.

    Values from the source (ids, paths, text) are printed with their control characters escaped."""
    return "\n".join(printable(line) for line in _report_lines(report, limit).split("\n"))


def _report_lines(report: ImportReport, limit: int) -> str:
    lines = [f"read {report.rows} {report.unit} of {report.source}"]
    if report.columns:
        lines[0] += "; columns read: " + ", ".join(f if f == c else f"{f} <- {c!r}" for f, c in report.columns.items())
    if report.kept_columns:
        lines.append(f"kept as continuation metadata: {', '.join(report.kept_columns)}")
    for title, items in ((f"{len(report.problems)} row(s) not imported:", report.problems),
                         (f"{len(report.warnings)} warning(s):", report.warnings)):
        if items:
            lines.append(title)
            lines += [f"  {p}" for p in items[:limit]]
            if len(items) > limit:
                lines.append(f"  ... and {len(items) - limit} more")
    if not report.written:
        lines.append("nothing written: " + ("--strict and problems above" if report.problems or report.warnings
                                            else "no row could be imported"))
        return "\n".join(lines)
    how = "linked" if report.linked else "copied"
    lines.append(f"imported {report.imported} {report.unit} into {report.out}: {report.continuations} new "
                 f"continuation(s) in {report.scenarios} new scenario(s), {report.annotations} new label(s), "
                 f"{report.updated} updated, {report.references} new reference(s); {report.already} already there; "
                 f"{report.videos_bytes / 2 ** 20:.1f} MiB of video {how} in {report.seconds:.1f} s")
    if report.validation:
        lines += [f"  {p}" for p in report.validation[:limit]]
        lines.append(f"INVALID: {len(report.validation)} problem(s) in {report.out}")
    else:
        lines.append(f"OK: {report.out} is a valid suite (format v1)")
    return "\n".join(lines)

__all__ = ["DEFAULT_ANNOTATOR", "ImportReport", "Label", "SourceRow", "format_report"]
