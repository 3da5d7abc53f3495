"""What a machine needs to train from a pack is exactly what ``autorater pack`` says
(``autorater.training.inputs.pack.NEEDS`` and the product): ``autorater train --from-pack`` runs in a fresh process
where every other package is refused at import (a finder in front of Python's), the product's own imports checked by
who asks: a package the product imports is refused unless it is in NEEDS; what those packages import for themselves
(torch's own optional imports) is theirs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch

from autorater.models import PRESETS
from autorater.training.inputs.pack import NEEDS
from model_suites import camera_suite, learnable_suite, one_thread

BLOCKER = textwrap.dedent('''
    import builtins, importlib.abc, json, sys

    NEEDED = set(json.loads(sys.argv[1]))
    THEIRS = set(NEEDED)  # packages a needed package (or the standard library) imported for itself: theirs to need
    REFUSED = []

    def asker(depth):
        \"\"\"The module whose import statement (or import_module call) is running.\"\"\"
        frame = sys._getframe(depth)
        while frame is not None:
            name = frame.f_globals.get("__name__", "")
            if not name.startswith("importlib") and name != __name__:
                return name
            frame = frame.f_back
        return "__main__"

    def refuse(name, by):
        REFUSED.append(f"{name} (imported by {by})")
        raise ImportError(f"{name} is not what a pack's machine needs (imported by {by})")

    class Blocker(importlib.abc.MetaPathFinder):
        \"\"\"A package loaded for the first time: the product's or its needs', or a need's own.\"\"\"
        def find_spec(self, name, path=None, target=None):
            top, by = name.partition(".")[0], asker(2)
            mine = by.partition(".")[0]
            if top in sys.stdlib_module_names or top == "autorater" or top in THEIRS:
                return None
            if mine in sys.stdlib_module_names or (mine in THEIRS and mine != "autorater"):
                THEIRS.add(top)
                return None
            refuse(name, by)

    real_import = builtins.__import__

    def product_import(name, globals=None, locals=None, fromlist=(), level=0):
        \"\"\"Every import statement of the product, of a package loaded already or not.\"\"\"
        by = (globals or {}).get("__name__", "")
        top = name.partition(".")[0]
        if level == 0 and by.startswith("autorater") and top and top != "autorater" and \\
                top not in sys.stdlib_module_names and top not in NEEDED:
            refuse(name, by)
        return real_import(name, globals, locals, fromlist, level)

    sys.meta_path.insert(0, Blocker())
    builtins.__import__ = product_import
    from autorater.app.cli import main
    code = main(sys.argv[2:])
    print("REFUSED " + json.dumps(REFUSED))
    sys.exit(code)
''')


@pytest.fixture()
def threads():
    before = one_thread()
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("preset", ["tiny", "tiny-general"])
def test_training_from_a_pack_needs_torch_the_product_and_what_pack_says_nothing_else(preset, tmp_path, threads):
    from autorater.training.inputs.pack import write_pack
    from autorater.training.recipe import recipe_for

    config = PRESETS[preset]
    make = camera_suite if config.architecture == "general" else learnable_suite
    suite = make(tmp_path / "suite", n_scenarios=4, per_scenario=2)
    write_pack([suite], config, recipe_for(config, cache_dir=str(tmp_path / "cache")), tmp_path / "pack")
    recipe = tmp_path / "recipe.json"  # one epoch, and a few steps of each outcome head trained apart
    recipe.write_text(json.dumps({"preset": preset, "train": {"outcome": {"steps": 4},
                                                              "stream": {"match_warmup_epochs": 1}}}))
    run = subprocess.run([sys.executable, "-c", BLOCKER, json.dumps(list(NEEDS)), "train", "--from-pack",
                          str(tmp_path / "pack"), "--config", str(recipe), "--out", str(tmp_path / "model"),
                          "--epochs", "1", "--no-tracking", "--device", "cpu"], capture_output=True, text=True,
                         timeout=600,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OMP_NUM_THREADS": "1"})
    refused = json.loads(next((line[len("REFUSED "):] for line in run.stdout.splitlines()
                               if line.startswith("REFUSED ")), "null") or "null")
    assert run.returncode == 0, run.stderr[-3000:]
    assert refused == [], refused  # not even an import the product caught and went on without
    assert (tmp_path / "model" / "model.safetensors").is_file()
