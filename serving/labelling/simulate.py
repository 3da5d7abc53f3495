"""Simulated annotators answering the human queue, for the demo and the benchmarks (synthetic suites only).

The generator's annotator pool (data.annotators) labels the Label Studio tasks of a labels folder
from the suite's simulator truth, and the answers are written as the JSON export Label Studio would
give, so that ``autorater ingest`` reads them exactly as it reads people's work.

Example:
    >>> simulate_queue_export("labels-v3", "export.json", annotators=3, seed=0)  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os

from autorater.data.annotators import simulate_annotations
from autorater.data.files import write_text_atomic
from autorater.data.suite import load_truth
from autorater.serving.labelling.folder import LabelsFolder
from autorater.serving.labelstudio.formats import annotations_to_export


def simulate_queue_export(labels_dir: str | os.PathLike, out: str | os.PathLike, annotators: int = 3,
                          seed: int = 0) -> int:
    """Answer every task of ``labels_dir/labelstudio/tasks.json``; write the export to ``out``; return its task
    count."""
    folder = LabelsFolder(labels_dir)
    job, tasks = folder.read_job(), folder.read_tasks()
    wanted = {t["data"]["continuation_id"] for t in tasks}
    truths = [t for t in load_truth(job["suite"]) if t["continuation_id"] in wanted]
    # Label Studio numbers annotations across its whole database: a later round's ids follow the labels already taken
    taken = [r.get("ls_annotation_id") for r in folder.human_labels().rows()]
    start = 1 + max((int(i) for i in taken if isinstance(i, int) or (isinstance(i, str) and i.isdigit())), default=0)
    export = annotations_to_export(tasks, simulate_annotations(truths, n_per_item=annotators, seed=seed), start)
    write_text_atomic(out, json.dumps(export, indent=1) + "\n")
    return len(export)


__all__ = ["simulate_queue_export"]
