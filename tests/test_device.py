"""The device policy lives in one module (``autorater.device``) and reaches every command that runs a model (each
command that builds a model is checked by the conformance suite: tests/test_conformance.py)."""

import pytest
import torch

from autorater.device import DEFAULT_DEVICE, ray_gpus, resolve_device


def test_the_library_entry_points_default_to_the_same_policy():
    import inspect

    from autorater.app.demo import run_demo
    from autorater.rater import Rater
    from autorater.serving.labelling.active import active_select, run_round
    from autorater.serving.labelling.label import label_suite
    from autorater.serving.labelling.model_calibration import calibrate_model
    from autorater.serving.service.app import create_app
    from autorater.serving.service.rating import ServiceRater
    from autorater.training.recipe import TrainConfig

    for fn in (Rater.load, run_round, active_select, label_suite, calibrate_model, ServiceRater.__init__,
               create_app, run_demo):
        assert inspect.signature(fn).parameters["device"].default == DEFAULT_DEVICE, fn.__qualname__
    assert TrainConfig().device == DEFAULT_DEVICE


def test_a_ray_actor_asks_for_a_gpu_by_what_the_cluster_has_not_the_driver():
    assert ray_gpus("auto", {"CPU": 16.0, "GPU": 2.0}) == 1  # a GPU cluster driven from a laptop
    assert ray_gpus("auto", {"CPU": 16.0}) == 0
    assert ray_gpus("auto", None) == 0
    assert ray_gpus("cpu", {"GPU": 4.0}) == 0
    assert ray_gpus("cuda:1", {}) == 1
    with pytest.raises(ValueError, match="unknown device 'gpu0'.*fix"):
        ray_gpus("gpu0", {})


def test_auto_resolves_where_it_runs():
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
