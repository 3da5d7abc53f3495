"""The application layer, above every other: the ``autorater`` command (``autorater.app.cli``: one module per group
of subcommands, what they share in ``common``) and its end-to-end demo (``autorater.app.demo``).

This is the one layer that may import serving and training together, read ``sys.argv``, print and start MLflow
runs; nothing below imports it. The names are imported on first use, so ``import autorater.app`` stays light.
"""

from autorater._lazy import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, {
    "autorater.app.cli": ["build_parser", "main"],
    "autorater.app.demo": ["run_demo"],
})
