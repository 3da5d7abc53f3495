"""The model folder has two owners: ``autorater/model.py`` (``config.json``, ``model.safetensors``: saving, checking,
loading) and ``autorater/rater.py`` (``calibration.json``, ``metadata.json``). Every other module names those files
through the owners' constants (``CONFIG_FILE``, ``WEIGHTS_FILE``, ``CALIBRATION_FILE``, ``METADATA_FILE``) or calls
their functions (``Autorater.check_folder``, ``read_calibration``, ``read_metadata``), so that the one owner stays
one.

Prose is free: a docstring or a message may mention ``calibration.json``. What is caught is a string that is the
file's name, or a path ending in it (``"config.json"``, ``f"{folder}/model.safetensors"``).
"""

import ast
from pathlib import Path

from autorater.model import CONFIG_FILE, WEIGHTS_FILE
from autorater.rater import CALIBRATION_FILE, METADATA_FILE

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("app", "autorater", "benchmarks", "calibration", "data", "serving", "training")  # not tests/, not docs/
OWNERS = {"autorater/model.py", "autorater/rater.py"}
MODEL_FILES = {CONFIG_FILE, WEIGHTS_FILE, CALIBRATION_FILE, METADATA_FILE}
# (file, the function the string is in, the string): why it may stay. Each must still be found (no stale ones).
EXEMPT = {
    ("calibration/report.py", "from_mapping", CALIBRATION_FILE):
        "the default label of a record's messages before it has a file (from_fitted); the calibration package is "
        "below the model and imports none of ours, so it cannot take the rater's constant",
}


def _names_a_model_file(text: str) -> bool:
    """True for a string that is a model folder's file name or a path ending in one (the last part of a path)."""
    return text.strip().replace("\\", "/").rsplit("/", 1)[-1] in MODEL_FILES


def test_the_rule_sees_names_and_paths_but_not_prose_or_other_files():
    assert _names_a_model_file("config.json") and _names_a_model_file("/model.safetensors")
    assert _names_a_model_file("runs/model/calibration.json")
    assert not _names_a_model_file("restore the config.json saved with this model")
    assert not _names_a_model_file("suite.json") and not _names_a_model_file("recipe-config.json")


def _function_of(tree: ast.AST) -> dict[int, str]:
    """id(node) -> the name of the innermost function around it."""
    inside = {}
    for function in ast.walk(tree):  # outer functions come first: the inner ones overwrite
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside.update((id(node), function.name) for node in ast.walk(function))
    return inside


def test_only_the_two_owners_name_the_model_folder_files():
    found, exempted = [], set()
    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            where = path.relative_to(ROOT).as_posix()
            if where in OWNERS:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            function = _function_of(tree)
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and _names_a_model_file(node.value):
                    key = (where, function.get(id(node)), node.value)
                    if key in EXEMPT:
                        exempted.add(key)
                    else:
                        found.append(f"{where}:{node.lineno} {node.value!r}")
    assert exempted == set(EXEMPT), f"exemptions no longer needed (remove them): {sorted(set(EXEMPT) - exempted)}"
    assert not found, (f"model folder files named outside {sorted(OWNERS)}: {found} (fix: use the owners' constants "
                       f"CONFIG_FILE, WEIGHTS_FILE (autorater.model), CALIBRATION_FILE, METADATA_FILE "
                       f"(autorater.rater), or their functions: Autorater.check_folder, read_calibration, "
                       f"read_metadata)")
