"""The toy world: one registered class (its entry point), and it makes real suites (H.264 videos, truth, swaps)
through the generator and the CLI like the big worlds; options are checked by the world they belong to."""

import dataclasses
from collections import Counter

import pytest

from autorater.app.cli import main
from autorater.data.generate import generate_suite, load_truth, simulate_truths, swap_instructions
from autorater.data.suite import Suite, validate_suite
from autorater.data.video import video_info
from autorater.data.worlds import INTERFACE, WORLDS, load_world, options_of, world_of
from autorater.data.worlds.metaworld import MetaWorldOptions
from autorater.data.worlds.toy import ToyOptions
from suite_schema import independent_problems

SMALL = dict(world="toy", options=ToyOptions(grid_size=6), scenarios=6, continuations_per_scenario=4, seed=2,
             progress=False)


@pytest.fixture(scope="module")
def suite_dir(tmp_path_factory):
    return generate_suite(tmp_path_factory.mktemp("toy") / "s", workers=1, **SMALL)


def test_a_world_is_one_class_registered_by_its_entry_point():
    assert WORLDS["toy"] == "autorater.data.worlds.toy:Toy"
    world = load_world("toy")
    assert all(hasattr(world, name) for name in INTERFACE) and world.NAME == "toy"
    assert set(world.DEFAULT_AGENTS) <= set(world.AGENTS) and world.resolve_tasks(world.DEFAULT_TASKS)


def test_a_toy_suite_is_valid_by_both_validators_and_reads_back_with_its_world(suite_dir):
    assert validate_suite(suite_dir) == [] and independent_problems(suite_dir) == []
    suite = Suite.load(suite_dir)
    assert len(suite.scenarios) == 6 and len(suite.continuations) == 24
    assert world_of(suite.info.source) == "toy" and suite.info.source["grid_size"] == 6
    truths = {t["continuation_id"]: t for t in load_truth(suite_dir)}
    for c in suite.continuations:
        info = video_info(suite_dir / c.video)
        t = truths[c.continuation_id]
        assert info.num_frames == t["num_frames"] and (info.width, info.height) == (64, 64)
        assert 0 <= t["marker_s"] <= t["duration_s"]
    outcomes = Counter((t["agent"], t["outcome"]) for t in truths.values())
    assert outcomes[("expert", "failure")] == 0 and outcomes[("wrong-target", "success")] == 0
    assert simulate_truths(**{k: v for k, v in SMALL.items() if k != "progress"}) == list(truths.values())


def test_a_swap_is_judged_again_from_the_recorded_cells(suite_dir, tmp_path):
    swapped = swap_instructions(suite_dir, tmp_path / "swapped", seed=1)
    assert validate_suite(swapped) == []
    truths = load_truth(swapped)
    assert all(t["instruction"] != t["original_instruction"] for t in truths)
    # the expert walks to the square first named, which the new instruction does not name
    assert {(t["outcome"], t["failure_mode"]) for t in truths if t["agent"] == "expert"} == {("failure",
                                                                                             "wrong_square")}


def test_options_are_checked_and_another_worlds_option_names_its_world(tmp_path):
    assert options_of("toy", {"image_size": None}) == ToyOptions()
    assert dataclasses.asdict(options_of("toy", ToyOptions(grid_size=5), image_size=40)) == {"grid_size": 5,
                                                                                            "image_size": 40}
    with pytest.raises(ValueError, match=r"image_size \(--image-size\) must be even and at least 2 pixels a cell"):
        ToyOptions(image_size=33)
    with pytest.raises(ValueError, match=r"at least 2 pixels a cell \(40 for grid_size 20\)"):
        ToyOptions(grid_size=20, image_size=32)
    with pytest.raises(ValueError, match=r"grid_size \(--grid-size\) must be a finite number from 4 to 32"):
        ToyOptions(grid_size=2)
    with pytest.raises(ValueError, match=r"view \(--view\) is an option of babyai, not of toy"):
        generate_suite(tmp_path / "s", world="toy", view="full", progress=False)
    with pytest.raises(ValueError, match="MetaWorldOptions are not toy's options"):
        options_of("toy", MetaWorldOptions())
    with pytest.raises(ValueError, match="cross_task .* is an option of metaworld, not of babyai"):
        options_of("babyai", {"cross_task": True}, swap=True)


def test_the_cli_builds_each_worlds_flags_from_its_options(tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["suite", "generate", "--world", "toy", "--grid-size", "5", "--image-size", "40", "--scenarios", "2",
                 "--workers", "1", "--quiet", "--out", str(out)]) == 0
    assert Suite.load(out).info.source["grid_size"] == 5 and validate_suite(out, check_videos=False) == []
    with pytest.raises(SystemExit, match="--camera is an option of metaworld, not of toy .*--world metaworld"):
        main(["suite", "generate", "--world", "toy", "--camera", "corner", "--out", str(tmp_path / "no")])
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["suite", "generate", "--help"])
    text = capsys.readouterr().out
    assert "toy options:" in text and "--grid-size" in text and "metaworld options:" in text
