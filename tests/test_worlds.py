"""The world interface: BabyAI behind it writes what it wrote before; worlds are chosen by name."""

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

import autorater.data.worlds.babyai.scenes as babyai_scenes
from autorater.data.generate import generate_suite
from autorater.data.worlds import WORLDS, load_world, world_of

GOLDEN = Path(__file__).parent / "data" / "babyai_golden.json"


def test_babyai_suite_is_what_the_generator_wrote_before_the_world_interface(tmp_path, monkeypatch):
    """Recorded with the generator as it was before ``autorater.data.worlds`` (same seed, same arguments): every
    JSONL file byte for byte (suite.json less its ``created_at`` and the ``agent_rule_balanced_accuracy`` added
    to its source since, scenarios.jsonl less the ``version:v1`` tags added since; the references and annotations
    are chosen by whole scenario since) and every video's frames as rendered."""
    frames = {}
    real = babyai_scenes.write_video

    def capture(path, arr, fps=8.0):
        arr = np.ascontiguousarray(arr)
        frames[Path(path).name] = f"{hashlib.sha256(arr.tobytes()).hexdigest()} {arr.shape}"
        return real(path, arr, fps=fps)

    monkeypatch.setattr(babyai_scenes, "write_video", capture)
    out = generate_suite(tmp_path / "s", scenarios=6, continuations_per_scenario=3, seed=5, workers=1, progress=False,
                         agents=("expert", "noisy-0.2", "noisy-0.5", "distractor", "random", "ditherer", "quitter"))
    files = {}
    for p in sorted(out.glob("*.json*")):
        b = p.read_bytes()
        if p.name == "suite.json":
            d = json.loads(b)
            d.pop("created_at")
            assert 0.5 <= d["source"].pop("agent_rule_balanced_accuracy") <= 1.0
            b = json.dumps(d, sort_keys=True).encode()
        if p.name == "scenarios.jsonl":  # less the tag of the version each scenario came in, added since (issue 43)
            lines = [json.loads(line) for line in b.decode().splitlines()]
            assert all(s["tags"][-1] == "version:v1" for s in lines)
            b = "".join(json.dumps({**s, "tags": s["tags"][:-1]}, ensure_ascii=False) + "\n" for s in lines).encode()
        files[p.name] = hashlib.sha256(b).hexdigest()
    golden = json.loads(GOLDEN.read_text())
    # less the references (whole scenarios since issue 41, not single continuations) and so the annotations (every
    # annotator of the pool labels a reference)
    changed = {"references.jsonl", "annotations.jsonl"}
    assert {k: v for k, v in files.items() if k not in changed} == \
        {k: v for k, v in golden["files"].items() if k not in changed}
    assert frames == golden["frames"]


def test_worlds_load_by_name_and_share_one_interface():
    for name in WORLDS:
        world = load_world(name)
        assert world.NAME == name
        for attr in ("TASKS", "AGENTS", "DEFAULT_TASKS", "DEFAULT_AGENTS", "resolve_tasks", "check_agents",
                     "check_options", "run_scenario", "swap_scenario", "describe"):
            assert hasattr(world, attr), (name, attr)
        assert set(world.DEFAULT_AGENTS) <= set(world.AGENTS)
        assert world.resolve_tasks(world.DEFAULT_TASKS)
    with pytest.raises(ValueError, match="babyai, metaworld"):
        load_world("minecraft")


def test_a_suite_names_its_world():
    assert world_of({"generator": "data.generate.generate_suite"}) == "babyai"  # suites from before worlds
    assert world_of({"generator": "data.generate.generate_suite", "world": "metaworld"}) == "metaworld"
    assert world_of({"tool": "someone else's"}) is None and world_of(None) is None


def test_a_world_says_which_training_augmentations_need_its_renderer():
    from autorater.data.worlds import world_allows

    babyai, metaworld = {"world": "babyai"}, {"world": "metaworld"}
    assert world_allows([babyai, babyai], "recolour") and world_allows([babyai], "relax")
    assert not world_allows([babyai, metaworld], "recolour")  # every suite's world must allow it
    assert not world_allows([None], "relax") and not world_allows([], "relax")  # a suite from elsewhere: none


def test_a_world_package_under_data_worlds_is_found_by_the_packaging_unlisted(tmp_path):
    """A world shipped inside this repository is a package folder under data/worlds/ (setup.py finds it) and one
    entry-point line; one of one's own needs neither (tests/test_world_plugin.py)."""
    import runpy

    repo = tmp_path / "repo"
    for folder in ("autorater", "data", "data/worlds", "data/worlds/toy2", "training", "calibration", "serving", "app"):
        (repo / folder).mkdir(parents=True)
        (repo / folder / "__init__.py").write_text('"""a package"""\n')
    setup = runpy.run_path(str(Path(__file__).resolve().parent.parent / "setup.py"), run_name="setup_py")
    assert "autorater.data.worlds.toy2" in setup["packages"](repo)


def test_every_world_is_a_world_class_registered_under_its_name():
    from autorater.data.worlds import GROUP, World

    assert GROUP == "autorater.worlds" and set(WORLDS) >= {"babyai", "metaworld", "toy"}
    for name, value in WORLDS.items():
        world = load_world(name)
        assert isinstance(world, World) and world.NAME == name and value.endswith(":" + type(world).__name__)
