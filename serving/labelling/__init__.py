"""The labelling job and what follows it: a labels folder from a trained model and a new suite version, and the
human labels taken back into it.

- ``folder``: the labels folder and its one owner (``LabelsFolder``); ``history``: every change to a set of labels,
  one event a line.
- ``label``: ``autorater label``: rate a version in batches, resumably, and route the uncertain cases to humans.
- ``strata``: a version's strata and the plan of their audits; ``rounds``: the round-by-round decision, free of
  files (what the simulations run); ``version``: a version's state rebuilt from the sealed plan, the journal and the
  human labels, and the files derived from it; ``certify``: each version certified on its own audit, stratum by
  stratum, round by round (anytime-valid tests); ``adapt``: version challengers, fine-tuned on a version's own labels;
  ``ledger``: a suite version's labelling jobs (the first verdict binds); ``model_calibration``:
  ``autorater calibrate`` on a model folder (temperature, marker offset, selective policy).
- ``ingest``: the annotators' labels back into a labels folder and the suite.
- ``active``: which continuations to label next, and a round that may replace the champion.
- ``simulate``: simulated annotators answering the human queue (synthetic suites only).

It uses ``autorater.serving.labelstudio`` (the hand-off's formats); the analysis and the service read its folders.
"""

from autorater._lazy import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, {
    "autorater.serving.labelling.active": ["STRATEGIES", "active_select", "run_round"],
    "autorater.serving.labelling.adapt": ["fine_tune", "finetune_recipe", "train_challenger"],
    "autorater.serving.labelling.certify": ["certify", "format_certification"],
    "autorater.serving.labelling.folder": ["LabelJobError", "LabelRow", "LabelsFileError", "LabelsFolder",
                                           "folder_lock", "read_jsonl_rows"],
    "autorater.serving.labelling.history": ["LabelHistory", "suite_history"],
    "autorater.serving.labelling.ingest": ["append_annotations", "format_ingest", "read_labels"],
    "autorater.serving.labelling.label": ["audit_draw", "format_summary", "label_suite"],
    "autorater.serving.labelling.model_calibration": ["CalibrationResult", "calibrate_model", "check_drift",
                                                      "fit_marker_offset", "format_calibration"],
    "autorater.serving.labelling.simulate": ["simulate_queue_export"],
    "autorater.serving.labelling.strata": ["STRATA", "parse_strata", "plan_audit", "stratum_key"],
})
