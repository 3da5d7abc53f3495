"""Serving: what runs on a trained model's labels, in four packages, each below the next where it uses it.

- ``autorater.serving.labelstudio``: the exchange with Label Studio: its formats (labelling config, tasks, the export
  reader), the HTTP client that keeps credentials in, a suite imported from an export or a live project, and the
  project's setup.
- ``autorater.serving.labelling``: the labelling job and what follows it: the labels folder and its history, batch
  labelling and routing, certification per version, calibration of a model folder, ingest of the human labels,
  active learning, simulated annotators.
- ``autorater.serving.analysis``: analysis and curation of suite versions: the leaderboard and its report, scores
  across versions, saturation, the next version's proposal, tags.
- ``autorater.serving.service``: ``autorater serve``, the HTTP service: the app, its guards, the rating slots, the
  Label Studio ML backend and webhook.

``autorater.serving.fields`` (values from outside, read with bounds) sits under all four. What serving offers the CLI
and the benchmarks is listed in ``__all__``. The names are imported on first use (PEP 562), so
``import autorater.serving`` stays free of torch, FastAPI and MLflow. ``ingest`` and ``leaderboard`` are imported
from their modules, which they name: ``from autorater.serving.labelling.ingest import ingest``.
"""

from __future__ import annotations

from autorater._lazy import lazy_exports

_HOMES = {
    "autorater.serving.labelling.active": ["STRATEGIES", "active_select", "run_round"],
    "autorater.serving.labelling.model_calibration": ["CalibrationResult", "calibrate_model", "check_drift",
                                                      "fit_marker_offset", "format_calibration"],
    "autorater.serving.labelling.ingest": ["append_annotations", "format_ingest", "read_labels"],
    "autorater.serving.labelling.folder": ["LabelJobError", "LabelRow", "LabelsFileError", "LabelsFolder",
                                           "folder_lock", "read_jsonl_rows"],
    "autorater.serving.labelling.history": ["LabelHistory", "suite_history"],
    "autorater.serving.labelling.label": ["audit_draw", "format_summary", "label_suite"],
    "autorater.serving.labelling.simulate": ["simulate_queue_export"],
    "autorater.serving.labelstudio.formats": ["annotations_to_export", "parse_export", "write_labelstudio_files"],
    "autorater.serving.labelstudio.imports": ["import_labelstudio"],
    "autorater.serving.labelstudio.setup": ["format_setup", "setup_labelstudio"],
    "autorater.serving.labelstudio.project": ["import_labelstudio_project"],
    "autorater.serving.analysis.propose": ["propose_version"],
    "autorater.serving.analysis.tags": ["stamp_version", "tag_suite"],
    "autorater.serving.analysis.versions": ["version_board"],
    "autorater.serving.analysis.report": ["format_leaderboard", "leaderboard_figures", "write_report"],
    "autorater.serving.service.app": ["create_app"],
    "autorater.serving.service.guard": ["ConnectionLimits", "server_config"],
}
__all__, __getattr__ = lazy_exports(__name__, _HOMES)
