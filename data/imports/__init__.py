"""Your own data in: a suite imported from a folder of videos and a table, and what every importer shares.

- ``table``: the table (CSV, JSON Lines or Parquet) read into rows, and ``import_table``, the whole import.
- ``common``: what the importers share at their ends: the rows they read (``SourceRow``, ``Label``) and the report
  (``ImportReport``, ``format_report``).
- ``to_suite``: rows into a suite: each video probed once, ids from the row's content, one atomic change, validated.

The Label Studio export import (``autorater.serving.labelstudio.imports``) reads its source into the same rows and
writes them through ``to_suite``. The example folder of the walkthrough is ``autorater.data.example``.
"""

from autorater.data.imports.common import ImportReport, Label, SourceRow, format_report
from autorater.data.imports.table import import_table, read_table, rows_from_table
from autorater.data.imports.to_suite import import_rows, probe_video

__all__ = ["ImportReport", "Label", "SourceRow", "format_report", "import_rows", "import_table", "probe_video",
           "read_table", "rows_from_table"]
