"""Each package exports on purpose (``__all__``), importing one stays light, imports go down the layers, and the
installed packages live under one namespace (``autorater.data``, ``autorater.training``, ...)."""

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

# The installed product's folders and the packages they install as (benchmarks/ and tests/ are not installed).
PRODUCT = {"autorater": "autorater", "data": "autorater.data", "calibration": "autorater.calibration",
           "training": "autorater.training", "serving": "autorater.serving", "app": "autorater.app"}
MAX_MODULES = 14  # .py files in one folder, __init__.py counted: past that, a folder no longer shows what it holds
ROOT = Path(__file__).resolve().parent.parent


def _packages_in_tree() -> dict:
    """Every package of the product's folders (a folder with an ``__init__.py``): installed name -> its ``__init__``."""
    return {".".join([name, *init.parent.relative_to(ROOT / folder).parts]): init
            for folder, name in PRODUCT.items() for init in sorted((ROOT / folder).rglob("__init__.py"))}


PACKAGES = sorted(_packages_in_tree())  # found, not listed: a new package (a world's) needs no edit here


HEAVY = ["torch", "mlflow", "optuna", "ray", "metaworld", "mujoco", "minigrid", "fastapi", "matplotlib"]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_name_resolves(package):
    module = importlib.import_module(package)
    assert module.__all__, f"{package} exports nothing"
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert not missing, f"{package}.__all__ names what it does not have: {missing}"


def test_importing_a_package_below_the_model_imports_no_heavy_library():
    code = ("import json, sys, autorater.calibration, autorater.data, autorater.serving, autorater.training, "
            "autorater.serving.analysis, autorater.serving.labelling, autorater.serving.labelstudio, "
            "autorater.serving.service, autorater.app; "
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []


def test_calibration_imports_none_of_the_other_packages():
    code = ("import json, sys, autorater.calibration; "
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('autorater.') and "
            "not m.startswith(('autorater.calibration', 'autorater._lazy')))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []


def test_the_layers_install_under_the_autorater_namespace_only(tmp_path):
    """Outside the repository (where its folders are not on the path), ``import autorater.data`` fails: the installed
    package is ``autorater.data``, never a bare ``data`` that would shadow or be shadowed by a user's."""
    code = ("import importlib.util, json; print(json.dumps([importlib.util.find_spec(n) is not None for n in "
            "('data', 'training', 'calibration', 'serving', 'app', 'autorater.data', 'autorater.training', "
            "'autorater.app')]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path,
                         env={"PATH": "/usr/bin:/bin"}).stdout
    assert json.loads(out) == [False, False, False, False, False, True, True, True]


def test_no_module_imports_a_private_name_of_another():
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    found = []
    for package in ("app", "autorater", "benchmarks", "calibration", "data", "serving", "training"):
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom):
                    found += [f"{path.relative_to(root)}:{node.lineno} {alias.name}" for alias in node.names
                              if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert not found, f"private names imported across modules (make them public in their module): {found}"


def test_the_wheel_installs_every_package_of_the_tree():
    """setup.py finds the packages (pyproject.toml lists none): what a wheel installs is the tree, and nothing else;
    the layers it maps are this test's product folders."""
    import runpy

    setup = runpy.run_path(str(ROOT / "setup.py"), run_name="setup_py")  # its packages(), without running setup()
    assert setup["packages"]() == PACKAGES
    assert {folder: name for name, folder in setup["LAYERS"].items()} == PRODUCT
    assert len(PACKAGES) >= 19 and "autorater.data.worlds.toy" in PACKAGES


def test_every_package_says_what_it_owns():
    """Each package's ``__init__`` opens with a docstring: what the folder holds, so a reader need not open it all."""
    import ast

    bare = [name for name, init in _packages_in_tree().items()
            if len((ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or "").split()) < 5]
    assert not bare, f"packages without a docstring saying what they own: {bare}"


def test_no_product_folder_holds_more_than_14_modules():
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    folders = [path for folder in PRODUCT for path in [root / folder, *sorted((root / folder).rglob("*"))]
               if path.is_dir() and path.name != "__pycache__"]
    crowded = {str(path.relative_to(root)): n for path in folders if (n := len(list(path.glob("*.py")))) > MAX_MODULES}
    assert not crowded, (f"folders of more than {MAX_MODULES} modules: {crowded} (fix: move the modules that belong "
                         f"together into a package of their own, with a docstring saying what it owns)")


def test_the_layers_rank_the_application_on_top_and_every_serving_package_as_serving():
    assert _layer("autorater.app.cli.suites") == _layer("autorater.app.demo") == 5
    serving = ("analysis", "labelling", "labelstudio", "service")
    assert {_layer(f"autorater.serving.{package}.x") for package in serving} == {_layer("autorater.serving")} == {4}
    assert _layer("autorater.data.imports.table") == 0 and _layer("autorater.calibration.agents.irt") == 1
    assert _layer("autorater.models.general") == 2 and _layer("autorater.training.train") == 3
    assert _layer("benchmarks.quality") == 6


def _layer(module: str) -> int:
    """A module's layer: the installed namespace's parts from the bottom up, the entry points above them all."""
    parts = module.split(".")
    if parts[0] == "benchmarks":
        return 6
    if parts[0] != "autorater":
        return -1  # another library
    sub = parts[1] if len(parts) > 1 else ""
    return {"data": 0, "calibration": 1, "training": 3, "serving": 4, "app": 5}.get(sub, 2)


def _folder_module(path, root) -> str:
    """The module a file of the repository installs as (``data/suite.py`` -> ``autorater.data.suite``)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if parts[0] in ("data", "training", "calibration", "serving", "app"):
        parts = ["autorater", *parts]
    return ".".join(parts)


def test_imports_go_down_the_layers():
    """data < calibration < the model (autorater.*) < training < serving < the application (autorater.app: the CLI and
    its demo) < benchmarks: no module imports one of a layer above its own, with no exemption."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    upward = []
    for folder in ("app", "autorater", "benchmarks", "calibration", "data", "serving", "training"):
        for path in sorted((root / folder).rglob("*.py")):
            module = _folder_module(path, root)
            rank = _layer(module)
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                modules = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                           [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level
                           else [])
                upward += [f"{module}:{node.lineno} {m}" for m in modules if _layer(m) > rank]
    assert not upward, f"imports of a layer above (move the code down, or into the CLI): {upward}"


def test_no_module_imports_a_private_module_of_another_package():
    """``autorater.x._y`` is imported only from within ``autorater.x`` (the project's own packages: a library's
    documented extension points may live in its underscored modules, as torch's dispatch modes do)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    found = []
    for folder in ("app", "autorater", "benchmarks", "calibration", "data", "serving", "training", "tests"):
        for path in sorted((root / folder).rglob("*.py")):
            here = _folder_module(path, root)
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                modules = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                           [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level
                           else [])
                for m in modules:
                    parts = m.split(".")
                    private = next((i for i, p in enumerate(parts) if p.startswith("_") and not p.startswith("__")),
                                   None)
                    if private is not None and parts[0] in ("autorater", "benchmarks") and \
                            not here.startswith(".".join(parts[:private])):
                        found.append(f"{here}:{node.lineno} {m}")
    assert not found, f"private modules imported from another package (make them public): {found}"


def _import_graph() -> dict[str, set[str]]:
    """Every import statement of the tree (at module level or inside a function) between the project's modules:
    module -> the modules it names (a ``from package import name`` names ``package.name`` when that is a module)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    folders = {"autorater": "autorater", "data": "autorater.data", "training": "autorater.training",
               "calibration": "autorater.calibration", "serving": "autorater.serving", "app": "autorater.app",
               "benchmarks": "benchmarks"}
    modules = {}
    for folder, name in folders.items():
        for path in (root / folder).rglob("*.py"):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            if folder == "autorater" and parts[0] in ("data", "training", "calibration", "serving", "app"):
                continue
            modules[".".join([name, *parts[:-1]] + ([] if parts[-1] == "__init__" else [parts[-1]]))] = path
    graph = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base
                                                                                                       else []))
                targets |= {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names}
        graph[module] = {t for t in targets if t in modules and t != module}
    return graph


def test_no_import_loop_anywhere_in_the_tree():
    """No module reaches itself through the imports of others, deferred (inside a function) or not: each layer and
    each module sits above the ones it uses (the device policy below the model and the encoders, for one)."""
    graph = _import_graph()
    state, loops = {}, []

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                loops.append(" -> ".join(path[path.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    assert not loops, "import loops:\n" + "\n".join(loops[:20])


def test_no_product_function_is_longer_than_80_lines():
    """A function of the product fits on a screen (a longer one is split into named steps)."""
    import ast

    long = [f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for folder in PRODUCT for path in sorted((ROOT / folder).rglob("*.py"))
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 80]
    assert not long, f"split these into named steps: {long}"


def test_no_training_module_imports_a_model_class():
    """Training knows a model through its registry (``AutoModel``, ``spec_of``), its base (``Autorater``) and the parts
    it names (``Autorater.parts``, each naming its stage), never an architecture's, a part's or a config's class: a new
    architecture or part trains with no edit under training/."""
    import ast

    from torch import nn

    from autorater.config import AutoraterConfig, PartConfig
    from autorater.model import Autorater, ModelPart

    bases = {Autorater, ModelPart, AutoraterConfig, PartConfig}
    found = []
    for path in sorted((ROOT / "training").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("autorater.model"):
                module = importlib.import_module(node.module)
                for alias in node.names:
                    obj = getattr(module, alias.name, None)
                    if isinstance(obj, type) and obj not in bases and issubclass(obj, (nn.Module, AutoraterConfig,
                                                                                      PartConfig)):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} {alias.name}")
    assert not found, f"training modules importing a model class (reach it through the model or the registry): {found}"
