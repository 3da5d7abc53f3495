"""Every ``benchmarks/`` module imports, and what it trains or measures is built on a tiny input (its ``tiny``): a
benchmark that drifts from the product (a removed class, a renamed field) fails here, not on the day someone runs it."""

import importlib
import pkgutil

import pytest

import benchmarks

MODULES = sorted(m.name for m in pkgutil.iter_modules(benchmarks.__path__))


@pytest.mark.parametrize("name", MODULES)
def test_a_benchmark_module_imports_and_builds_what_it_trains(name, tmp_path):
    """Each module says what it builds at a tiny size (its ``tiny``; None: nothing of its own), found not listed: a
    new benchmark is checked without an edit here."""
    module = importlib.import_module(f"benchmarks.{name}")
    assert hasattr(module, "tiny"), (f"benchmarks/{name}.py: define tiny(tmp_path), what it trains or measures built "
                                     f"small, or tiny = None when it builds nothing of its own")
    if module.tiny is not None:
        assert module.tiny(tmp_path) is not None
    if hasattr(module, "main"):  # its command line parses
        with pytest.raises(SystemExit) as exit_:
            module.main(["--help"])
        assert exit_.value.code == 0


def test_no_benchmark_steps_an_optimiser_of_its_own():
    """Every benchmark trains through the product's one loop (training/loop.py's fit), so the schedule, the early
    stop and the kept epoch are the product's."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "benchmarks"
    own = [f"{p.name}:{i}" for p in sorted(root.glob("*.py")) for i, line in enumerate(p.read_text().splitlines(), 1)
           if "torch.optim" in line or ".step()" in line]
    assert not own, f"a benchmark with an optimiser of its own (train it as a Part through fit): {own}"
