"""Fixtures shared by several test modules.

``env`` is the hardening environment (a hand-made suite, a tiny seeded model and its calibration:
``tests/hardening_env.py``), built once for the session and read, never written, by the service, fuzzing and
label-history tests; ``pool`` is a fresh copy of its suite under a test's own media root, with a client whose
webhook writes there. A module that needs another environment defines its own ``env`` fixture, which takes
precedence over this one in that module (the serving, certify, CLI and active-learning tests).
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
