"""Serving: batch labelling, routing, the human queue and the annotation-tool exchange, calibration of a
trained model, active learning, the leaderboard and report, and the HTTP service.

What it offers the CLI and the benchmarks is listed in ``__all__``. The names are imported on first use
(PEP 562), so ``import serving`` stays free of torch, FastAPI and MLflow. ``ingest`` and ``leaderboard``
are imported from their modules, which they name: ``from serving.ingest import ingest``.
"""

from __future__ import annotations

from data.lazy import lazy_exports

_HOMES = {
    "serving.active": ["STRATEGIES", "active_select", "run_round"],
    "serving.calibrate": ["CalibrationResult", "calibrate_model", "check_drift", "fit_marker_offset",
                          "format_calibration"],
    "serving.ingest": ["append_annotations", "format_ingest", "read_labels"],
    "serving.folder": ["LabelJobError", "LabelRow", "LabelsFolder", "folder_lock", "read_jsonl_rows"],
    "serving.guard": ["ConnectionLimits", "server_config"],
    "serving.history": ["LabelHistory", "suite_history"],
    "serving.label": ["audit_draw", "format_summary", "label_suite"],
    "serving.labelstudio": ["annotations_to_export", "parse_export", "write_labelstudio_files"],
    "serving.labelstudio_import": ["import_labelstudio"],
    "serving.labelstudio_setup": ["format_setup", "setup_labelstudio"],
    "serving.report": ["format_leaderboard", "leaderboard_figures", "write_report"],
    "serving.service": ["create_app"],
    "serving.simulate": ["simulate_queue_export"],
}
__all__, __getattr__ = lazy_exports(__name__, _HOMES)
