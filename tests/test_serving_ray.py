"""The Ray backend of ``autorater label`` gives the same labels as the local one (a local Ray; slow, not in CI)."""

from __future__ import annotations

import pytest

from autorater.serving.labelling.label import label_suite
from serving_env import make_env, torch_threads

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    pytest.importorskip("ray", reason="the Ray backend is optional: pip install '.[ray]'")
    with torch_threads(1):
        yield make_env(tmp_path_factory.mktemp("ray"))
    import ray

    ray.shutdown()


def _files(folder):
    return {name: (folder / name).read_bytes() for name in ("labels.jsonl", "errors.jsonl", "labelstudio/tasks.json")}


def test_ray_backend_matches_local_and_resumes(env, tmp_path):
    label_suite(env["model"], env["suite"], tmp_path / "local", batch_size=4, workers=1)
    label_suite(env["model"], env["suite"], tmp_path / "ray", batch_size=4, workers=2, backend="ray")
    assert _files(tmp_path / "ray") == _files(tmp_path / "local")
    # A crash on Ray resumes like a local one: drop half the parts, finish on Ray.
    out = tmp_path / "ray"
    for name in ("labels.jsonl", "summary.json"):
        (out / name).unlink()
    for p in sorted((out / "parts").glob("part-*.jsonl"))[::2]:
        p.unlink()
    summary = label_suite(env["model"], env["suite"], out, batch_size=4, workers=2, backend="ray", resume=True)
    assert summary["rated_this_run"] > 0
    assert _files(out) == _files(tmp_path / "local")
