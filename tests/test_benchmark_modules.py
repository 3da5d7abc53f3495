"""Every ``benchmarks/`` module imports, and what it trains or measures is built here on a tiny input: a benchmark that
drifts from the product (a removed class, a renamed field) fails here, not on the day someone runs it."""

import importlib
import pkgutil

import numpy as np
import pytest
import torch

import benchmarks
from autorater.models import PRESETS, AutoModel

MODULES = sorted(m.name for m in pkgutil.iter_modules(benchmarks.__path__))


def rate_tiny(config) -> torch.Tensor:
    """A model of ``config`` built and run on two clips of random frames at its decoded size: its P(success) logits."""
    torch.manual_seed(0)
    model = AutoModel.from_config(config.replace(failure_modes=["timeout"])).eval()
    size, frames = config.decoded_size(), min(config.clip_frames, 8)
    x = {"frames": torch.randint(0, 256, (2, frames, size, size, 3), dtype=torch.uint8),
         "times_s": torch.arange(frames).float().repeat(2, 1) / 8, "takeover_s": torch.zeros(2),
         "instructions": ["open the drawer", "go to the red ball"]}
    with torch.no_grad():
        return model(**x).success_logit


def build_whole_encoder():
    """Its arms' configs, each reading other inputs (their models trained and scored end to end, from packs, by
    tests/test_gpu_path.py)."""
    from autorater.models import processor_for
    from benchmarks.whole_encoder import ARMS, arm_config

    keys = {processor_for(arm_config(PRESETS["tiny-general"], blocks)).cache_key(True) for blocks in ARMS.values()}
    assert len(keys) == len(ARMS)
    return rate_tiny(arm_config(PRESETS["tiny-general"], ARMS["block4"]))


def build_gpu():
    """Its recipes: the worlds' defaults, Meta-World's two with the whole encoder (trained end to end from packs at
    tiny size by tests/test_gpu_path.py)."""
    from benchmarks.gpu import RECIPES, recipe_config

    configs = {name: recipe_config(name, {}) for name in RECIPES}
    assert configs["babyai"] == PRESETS["babyai-grid"]
    assert configs["metaworld"].outcome.blocks == configs["metaworld-parts"].outcome.blocks == 6
    return rate_tiny(recipe_config("metaworld", {"metaworld": "tiny-general"}))


def build_outcome_cost():
    """The cut it measures first (every cut is measured on a tiny suite by tests/test_benchmarks.py)."""
    return rate_tiny(PRESETS["tiny-general"].replace(outcome_blocks=1))


def build_quality():
    from benchmarks.quality import parse_overrides

    config = PRESETS["tiny-general"]
    return rate_tiny(config.replace(**parse_overrides(["outcome.members=1", "queries=3"], type(config))))


def build_active_learning():
    return rate_tiny(PRESETS["tiny"].replace(vocab=["open", "the", "drawer"]))


def build_readability():
    from benchmarks.readability import decode_accuracy, tile_features

    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (12, 28, 28, 3)).astype(np.uint8)
    x = np.stack([tile_features(f, cells=7, block=2)[5, 3] for f in frames])
    return decode_accuracy(x, np.arange(12) % 2, [str(i) for i in range(12)], seed=0)


def build_certify_sim():
    """The decision it simulates, on one small stratum for a few draws (its cells run in tests/test_certify.py)."""
    from benchmarks.certify_sim import Stratum, run_cell

    return run_cell({"s": Stratum(200, 0.97)}, 0.9, 0.1, "family", 0.95, draws=3, seed=0)["humans_per_provisional"]


def build_camera_adaptation():
    """Whole scenarios drawn until they hold k labels; each route fitted on them, the head frozen (``none``: as is)."""
    from autorater.models.parts.outcome import OutcomeHead
    from benchmarks.camera_adaptation import draw_scenarios, fit_route

    scenarios, labels = np.repeat(np.arange(6), 2), np.array([1.0, 0.0] * 6)
    rows = draw_scenarios(scenarios, labels, 5, np.random.default_rng(0))
    assert len(rows) == 5 and len(set(scenarios[rows])) == 3
    head = OutcomeHead(channels=4, dim=8, queries=1, layers=1, heads=1, pooling="max").eval()
    for p in head.parameters():
        p.requires_grad_(False)
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(12, 4, 4, 2, 2, generator=g), torch.rand(12, 4), torch.rand(12, 4),
         torch.randn(12, head.text_dim, generator=g))
    plain = fit_route(head, x, rows, labels, "none")(np.arange(12))
    shifted = fit_route(head, x, rows, labels, "threshold", steps=20)(np.arange(12))
    assert torch.allclose((shifted - plain), (shifted - plain)[0].expand(12), atol=1e-5)  # one offset for all
    return fit_route(head, x, rows, labels, "affine", steps=5)(np.arange(12))


def build_head_ablations():
    """An arm's recipe read and checked, and the seeds' heads averaged into one probability (its logit beside it)."""
    from benchmarks.head_ablations import mean_rows, parse_arm

    assert parse_arm("rewind=0.5+reached=1") == ("rewind_0.5+reached_1", {"rewind": 0.5, "reached": 1.0})
    with pytest.raises(SystemExit, match="not an outcome recipe field"):
        parse_arm("rewound=1")
    rows = mean_rows([{"s": [{"continuation_id": "c", "p_success": p, "outcome": "x"}]} for p in (0.2, 0.9)])["s"]
    assert rows[0]["p_success"] == pytest.approx(0.55) and rows[0]["outcome"] == "success"
    return torch.tensor([rows[0]["logit"]])


def build_history_cost(tmp_path):
    return AutoModel.from_config(PRESETS["tiny"]).save_pretrained(tmp_path / "model")


# What each module trains or measures, built small; None: it trains nothing of its own (its command line is checked)
BUILDS = {"active_learning": build_active_learning, "camera_adaptation": build_camera_adaptation, "certify": None,
          "certify_sim": build_certify_sim, "gpu": build_gpu, "head_ablations": build_head_ablations,
          "history_cost": build_history_cost, "labelling": None, "new_version": None,
          "outcome_cost": build_outcome_cost, "paired": None, "propose": None, "quality": build_quality,
          "quality_scores": None, "quality_suites": None, "readability": build_readability, "strip": None,
          "throughput": None, "whole_encoder": build_whole_encoder}


def test_every_benchmark_module_is_listed_here():
    assert sorted(BUILDS) == MODULES, "a new benchmark: add what it builds to BUILDS"


@pytest.mark.parametrize("name", MODULES)
def test_a_benchmark_module_imports_and_builds_what_it_trains(name, tmp_path):
    module = importlib.import_module(f"benchmarks.{name}")
    build = BUILDS.get(name)
    if build is not None:
        built = build(tmp_path) if "tmp_path" in build.__code__.co_varnames else build()
        assert built is not None
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
