"""Each package exports on purpose (``__all__``), and importing one stays light (DESIGN.md section 2)."""

import importlib
import json
import subprocess
import sys

import pytest

PACKAGES = ["autorater", "calibration", "data", "data.worlds", "data.worlds.babyai", "data.worlds.metaworld",
            "serving", "training"]
HEAVY = ["torch", "mlflow", "optuna", "ray", "metaworld", "mujoco", "minigrid", "fastapi", "matplotlib"]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_name_resolves(package):
    module = importlib.import_module(package)
    assert module.__all__, f"{package} exports nothing"
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert not missing, f"{package}.__all__ names what it does not have: {missing}"


def test_importing_a_package_below_the_model_imports_no_heavy_library():
    code = ("import json, sys, calibration, data, serving, training; "
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []


def test_calibration_imports_none_of_the_other_packages():
    code = ("import json, sys, calibration; "
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & {'autorater', 'data', 'serving', "
            "'training'})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []


def test_no_module_imports_a_private_name_of_another():
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    found = []
    for package in ("autorater", "benchmarks", "calibration", "data", "serving", "training"):
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom):
                    found += [f"{path.relative_to(root)}:{node.lineno} {alias.name}" for alias in node.names
                              if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert not found, f"private names imported across modules (make them public in their module): {found}"


def test_imports_go_down_the_layers_and_only_the_cli_reaches_up():
    import ast
    from pathlib import Path

    layer = {"data": 0, "calibration": 1, "autorater": 2, "training": 3, "serving": 4, "benchmarks": 5}
    cli = {"autorater/cli.py", "autorater/demo.py"}  # the entry point (and the demo it runs) wires every layer
    root = Path(__file__).resolve().parent.parent
    upward = []
    for package, rank in layer.items():
        for path in sorted((root / package).rglob("*.py")):
            name = path.relative_to(root).as_posix()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                modules = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                           [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level
                           else [])
                upward += [f"{name}:{node.lineno} {m}" for m in modules
                           if layer.get(m.split(".")[0], -1) > rank and name not in cli]
    assert not upward, f"imports of a layer above (move the code down, or into the CLI): {upward}"
