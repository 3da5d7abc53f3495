"""A world of one's own plugs in: a package outside this repository with one registered class (an entry point of
the group ``autorater.worlds``, here a real distribution's metadata put on the path) generates a suite, trains a
model one step and labels the suite, nothing of this repository edited. Its class inherits what it does not say
(agents' and tasks' checks, options, suite.json's source, no swap, no augmentation, the general model)."""

from __future__ import annotations

import json

import pytest
import torch

from autorater.app import cli
from autorater.data.suite import Suite, validate_suite
from autorater.data.worlds import WORLDS, load_world, world_of
from model_suites import one_thread
from tiny_suites import read_lines

LAMP = '''"""A lamp that an agent lights, or does not: someone else's world."""

import numpy as np

from autorater.data.annotators import trait_scores
from autorater.data.video import write_video
from autorater.data.worlds import World

FRAMES, TAKEOVER = 16, 4


class Lamp(World):
    NAME = "lamp"
    TASKS = {"light": "light the lamp of the named colour"}
    AGENTS = {"quick": "lights it soon after the takeover", "late": "lights it near the end", "idle": "never does"}

    def run_scenario(self, job):
        sid, colour = f"s{job.index:04d}", ("red", "blue")[job.index % 2]
        rng = np.random.default_rng([job.seed, job.index])
        continuations, truths = [], []
        for k, agent in enumerate(job.agents):
            cid, lit = f"c{job.first_continuation + k:06d}", {"quick": 7, "late": 12, "idle": None}[agent]
            if job.out is not None:
                frames = rng.integers(0, 30, (FRAMES, 32, 32, 3)).astype(np.uint8)
                if lit is not None:
                    frames[lit:, 8:24, 8:24] = (230, 40, 40) if colour == "red" else (40, 40, 230)
                write_video(f"{job.out}/videos/{cid}.mp4", frames, fps=job.fps)
            outcome = "failure" if lit is None else "success"
            traits = {"off_expert_share": 0.0, "near_miss": False, "near_miss_frame": None}
            traits["messiness"], traits["ambiguity"] = trait_scores(outcome, traits, TAKEOVER, lit, FRAMES)
            truths.append({"continuation_id": cid, "scenario_id": sid, "agent": agent, "task": job.task,
                           "instruction": f"light the {colour} lamp", "category": "light", "outcome": outcome,
                           "marker_s": (lit or FRAMES) / job.fps, "failure_mode": None if lit else "timeout",
                           "failure_modes": ["timeout"], "event_frame": lit, "num_frames": FRAMES, "fps": job.fps,
                           "duration_s": FRAMES / job.fps, "takeover_frame": TAKEOVER,
                           "takeover_s": TAKEOVER / job.fps, "traits": traits})
            continuations.append({"continuation_id": cid, "scenario_id": sid, "agent_id": agent,
                                  "video": f"videos/{cid}.mp4"})
        scenario = {"scenario_id": sid, "instruction": f"light the {colour} lamp", "category": "light",
                    "tags": [job.task], "takeover_s": TAKEOVER / job.fps, "metadata": {"task": job.task}}
        return {"index": job.index, "scenario": scenario, "continuations": continuations, "truths": truths}
'''


@pytest.fixture()
def lamp_installed(tmp_path, monkeypatch):
    """The lamp world as an installed distribution would be: its package and a dist-info whose entry_points.txt
    registers it, on the path (as site-packages is)."""
    site = tmp_path / "site"
    (site / "lamp_world").mkdir(parents=True)
    (site / "lamp_world" / "__init__.py").write_text(LAMP, encoding="utf-8")
    dist = site / "lamp_world-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: lamp-world\nVersion: 0.1\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text("[autorater.worlds]\nlamp = lamp_world:Lamp\n", encoding="utf-8")
    assert "lamp" not in WORLDS
    monkeypatch.syspath_prepend(str(site))
    return site


def test_a_world_of_ones_own_generates_trains_one_step_and_labels(lamp_installed, tmp_path, monkeypatch):
    assert WORLDS["lamp"] == "lamp_world:Lamp"
    world = load_world("lamp")
    assert world.DEFAULT_AGENTS == ("quick", "late", "idle") and world.default_preset({})[0] == "general"
    suite_dir = tmp_path / "suite"
    assert cli.main(["suite", "generate", "--world", "lamp", "--out", str(suite_dir), "--scenarios", "4",
                     "--continuations-per-scenario", "3", "--workers", "1", "--quiet"]) == 0
    suite = Suite.load(suite_dir)
    assert validate_suite(suite_dir) == [] and world_of(suite.info.source) == "lamp" and len(suite.continuations) == 12
    recipe = tmp_path / "recipe.json"
    recipe.write_text(json.dumps({"preset": "tiny-general", "train": {"epochs": 1, "val_share": 0.25,
                                                                      "stream": {"match_warmup_epochs": 0}}}))
    monkeypatch.setattr(cli.common, "threads", lambda: None)
    before = one_thread()
    try:
        assert cli.main(["train", "--suite", str(suite_dir), "--out", str(tmp_path / "model"), "--config", str(recipe),
                         "--no-tracking", "--cache-dir", str(tmp_path / "cache"), "--quiet"]) == 0
        assert cli.main(["label", "--model", str(tmp_path / "model"), "--suite", str(suite_dir), "--out",
                         str(tmp_path / "labels"), "--quiet"]) == 0
    finally:
        torch.set_num_threads(before)
    history = json.loads((tmp_path / "model" / "metadata.json").read_text())
    assert history["n_train"] > 0 and history["train_config"]["epochs"] == 1
    labelled = read_lines(tmp_path / "labels" / "labels.jsonl")
    assert {r["continuation_id"] for r in labelled} == set(suite.continuation_ids())


def test_a_broken_registration_is_refused_naming_the_entry_point_and_the_fix(lamp_installed):
    (lamp_installed / "lamp_world-0.1.dist-info" / "entry_points.txt").write_text(
        "[autorater.worlds]\nlamp = lamp_world:Lamp\nlantern = lamp_world:Lamp\n", encoding="utf-8")
    import autorater.data.worlds as worlds

    worlds._registered.cache_clear()  # the same path, its metadata changed in place
    with pytest.raises(TypeError, match=r"world lantern = lamp_world:Lamp .*its NAME is 'lamp', not 'lantern'.*fix"):
        load_world("lantern")
    with pytest.raises(ValueError, match="unknown world 'candle'; choose one of babyai, .*lamp"):
        load_world("candle")
