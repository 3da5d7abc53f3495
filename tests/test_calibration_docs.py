import doctest
import importlib

import pytest


@pytest.mark.parametrize("module", ["metrics", "temperature", "selective", "report", "marker", "split", "compare",
                                    "agents.irt", "audit", "drift"])
def test_docstring_examples_run(module):
    result = doctest.testmod(importlib.import_module(f"autorater.calibration.{module}"))
    assert result.failed == 0
