"""The exchange with Label Studio, and nothing else of serving's: what crosses between the product and the
annotation tool.

- ``formats``: the human hand-off in Label Studio's formats: the labelling config, the task import file, the export
  reader (``parse_export``) and the export writer the simulated annotators use.
- ``client``: the addresses, tokens and HTTP clients, so that no credential leaves for another origin.
- ``imports``: a suite imported from a Label Studio export file and the videos under a media root.
- ``project``: a suite imported straight from a running Label Studio project (``--from-labelstudio-project``).
- ``setup``: ``autorater labelstudio setup``, the project the labelling job routes to, in one idempotent command.

It uses ``autorater.serving.fields`` and the data layer only; the labelling job, the service and the analysis use it.
"""

from autorater._lazy import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, {
    "autorater.serving.labelstudio.formats": ["annotations_to_export", "build_tasks", "labeling_config",
                                              "parse_export", "write_labelstudio_files"],
    "autorater.serving.labelstudio.client": ["check_url", "read_token", "sdk_client"],
    "autorater.serving.labelstudio.imports": ["import_labelstudio"],
    "autorater.serving.labelstudio.project": ["import_labelstudio_project"],
    "autorater.serving.labelstudio.setup": ["format_setup", "setup_labelstudio"],
})
