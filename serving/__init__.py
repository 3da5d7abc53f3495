"""Serving: batch labelling, routing, the human queue and the annotation-tool exchange, calibration of a
trained model, active learning, the leaderboard and report, and the HTTP service.

What it offers the CLI and the benchmarks is listed in ``__all__``. The names are imported on first use
(PEP 562), so ``import autorater.serving`` stays free of torch, FastAPI and MLflow. ``ingest`` and ``leaderboard``
are imported from their modules, which they name: ``from autorater.serving.ingest import ingest``.
"""

from __future__ import annotations

from autorater._lazy import lazy_exports

_HOMES = {
    "autorater.serving.active": ["STRATEGIES", "active_select", "run_round"],
    "autorater.serving.model_calibration": ["CalibrationResult", "calibrate_model", "check_drift", "fit_marker_offset",
                          "format_calibration"],
    "autorater.serving.ingest": ["append_annotations", "format_ingest", "read_labels"],
    "autorater.serving.folder": ["LabelJobError", "LabelRow", "LabelsFolder", "folder_lock", "read_jsonl_rows"],
    "autorater.serving.guard": ["ConnectionLimits", "server_config"],
    "autorater.serving.history": ["LabelHistory", "suite_history"],
    "autorater.serving.label": ["audit_draw", "format_summary", "label_suite"],
    "autorater.serving.labelstudio": ["annotations_to_export", "parse_export", "write_labelstudio_files"],
    "autorater.serving.labelstudio_import": ["import_labelstudio"],
    "autorater.serving.labelstudio_setup": ["format_setup", "setup_labelstudio"],
    "autorater.serving.labelstudio_project": ["import_labelstudio_project"],
    "autorater.serving.propose": ["propose_version"],
    "autorater.serving.tags": ["stamp_version", "tag_suite"],
    "autorater.serving.versions": ["version_board"],
    "autorater.serving.report": ["format_leaderboard", "leaderboard_figures", "write_report"],
    "autorater.serving.service": ["create_app"],
    "autorater.serving.simulate": ["simulate_queue_export"],
}
__all__, __getattr__ = lazy_exports(__name__, _HOMES)
