"""Fixtures shared by several test modules.

``env`` is the hardening environment (a hand-made suite, a tiny seeded model and its calibration:
``tests/hardening_env.py``), built once for the session and read, never written, by the service, fuzzing and
label-history tests; ``pool`` is a fresh copy of its suite under a test's own media root, with a client whose
webhook writes there. A module that needs another environment defines its own ``env`` fixture, which takes
precedence over this one in that module (the serving, certify, CLI and active-learning tests).

Every test leaves the process's registries of given weights and sentence vectors as it found them (a pack read in a
test installs its encoder weights and vectors for the process: ``autorater.training.inputs.pack``).
"""

import pytest
import torch

from hardening_env import make_hardening_env, make_pool


@pytest.fixture(scope="session")
def env(tmp_path_factory):
    torch.set_num_threads(1)
    return make_hardening_env(tmp_path_factory.mktemp("hardening"))


@pytest.fixture()
def pool(env, tmp_path):
    """A fresh copy of the suite under a media root, and a client whose webhook writes to it."""
    return make_pool(env, tmp_path)


@pytest.fixture(autouse=True)
def _given_weights_and_vectors_restored():
    """``autorater.encoders.WEIGHT_FILES`` and the sentence vectors given to ``SentenceText`` put back after the test
    (a pack's, in a folder the test removes, must not serve the next test's models)."""
    from autorater.encoders import WEIGHT_FILES
    from autorater.models.parts import text

    weights, given = dict(WEIGHT_FILES), {k: dict(v) for k, v in text._GIVEN.items()}
    yield
    WEIGHT_FILES.clear()
    WEIGHT_FILES.update(weights)
    text._GIVEN.clear()
    text._GIVEN.update(given)
