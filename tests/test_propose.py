"""``autorater suite propose``: candidates of middle difficulty for today's agents, spread over their range and
balanced over categories, written as a valid draft version; an empty pool, a pool nobody predicted, a too large --n
are clear errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from autorater.app import cli
from autorater.data.generate import generate_suite
from autorater.data.suite import Suite, validate_suite
from autorater.data.versions import scenario_version
from autorater.serving.analysis.propose import (
    PROPOSAL_FILE,
    PROPOSED_TAG,
    Candidate,
    choose,
    fit_candidates,
    pair_weights,
    propose_version,
)
from blas_threads import one_blas_thread  # noqa: F401 - autouse fixture

ABILITY = {"weak": -2.0, "strong": 3.0, "strongest": 3.5}  # two close strong agents, one weak one


def candidate(sid: str, difficulty: float, category: str = "c") -> Candidate:
    chances = {a: float(1 / (1 + np.exp(-(t - difficulty)))) for a, t in ABILITY.items()}
    info = sum(p * (1 - p) for p in chances.values())
    return Candidate(sid, category, difficulty, [difficulty - 1, difficulty + 1], chances,
                     float(np.mean(list(chances.values()))), info)


def test_the_picks_serve_every_gap_between_todays_agents_not_only_the_crowded_one():
    pool = [candidate(f"s{i:02d}", b) for i, b in enumerate(np.linspace(-5, 6, 45))]
    weights = pair_weights({a: {"ability": t} for a, t in ABILITY.items()})
    assert weights == {"strongest": 1, "strong": 2, "weak": 1}
    chosen = [c.difficulty for c in choose(pool, 9, weights=weights)]
    most_informative = [c.difficulty for c in sorted(pool, key=lambda c: -c.information)[:9]]
    near_weak = [b for b in chosen if abs(b - ABILITY["weak"]) < 1]
    assert len(near_weak) >= 2 and not [b for b in most_informative if abs(b - ABILITY["weak"]) < 1]
    assert sum(abs(b - 3.25) < 1 for b in chosen) >= 4  # the two strong agents still get most
    assert not any(b > 5 or b < -4 for b in chosen)  # nothing every agent passes or fails


def test_the_choice_is_balanced_over_categories_while_each_has_candidates():
    pool = [candidate(f"a{i}", 0.1 * i, "a") for i in range(10)] + [candidate(f"b{i}", 8.0, "b") for i in range(3)] + \
        [candidate(f"c{i}", -0.2 * i, "c") for i in range(10)]
    counts = {}
    for c in choose(pool, 12):
        counts[c.category] = counts.get(c.category, 0) + 1
    assert counts["b"] == 3 and abs(counts["a"] - counts["c"]) <= 1  # b ran out; the rest shared evenly
    unbalanced = choose(pool, 12, balance=False)
    assert sum(c.category == "b" for c in unbalanced) < 3  # b's scenarios are the least useful
    with pytest.raises(ValueError, match=r"--n 30 but the pool holds only 23.*fix"):
        choose(pool, 30)
    with pytest.raises(ValueError, match="at least 1"):
        choose(pool, 0)


def test_candidates_every_agent_passes_are_easier_than_those_every_agent_fails():
    rng = np.random.default_rng(0)
    theta = {"a": -1.5, "b": 0.0, "c": 1.5}
    current = [{"agent_id": a, "scenario_id": f"s{s}", "outcome": "success" if rng.random() < 1 / (1 + np.exp(-t))
                else "failure"} for s in range(30) for a, t in theta.items()]
    pool = [{"agent_id": a, "scenario_id": sid, "category": "x", "p_success": p}
            for sid, p in (("easy", 0.95), ("hard", 0.05), ("mixed", None)) for a in theta]
    for r in pool[6:]:
        r["p_success"] = {"a": 0.1, "b": 0.5, "c": 0.9}[r["agent_id"]]
    pool.append({"agent_id": "stranger", "scenario_id": "easy", "category": "x", "p_success": 0.0})  # not today's
    candidates, abilities = fit_candidates(current, pool)
    by_id = {c.scenario_id: c for c in candidates}
    assert set(abilities) == set(theta) and abilities["a"]["ability"] < abilities["c"]["ability"]
    assert by_id["easy"].difficulty < by_id["mixed"].difficulty < by_id["hard"].difficulty
    assert by_id["mixed"].information > max(by_id["easy"].information, by_id["hard"].information)
    assert all(c.difficulty_ci[0] < c.difficulty < c.difficulty_ci[1] for c in candidates)
    with pytest.raises(ValueError, match="today's agents"):
        fit_candidates([], pool)
    with pytest.raises(ValueError, match="no pool continuation is by one of today's agents"):
        fit_candidates(current, pool[-1:])


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("propose")
    kw = dict(agents="expert,noisy-0.5,quitter,random", continuations_per_scenario=4, workers=1, image_size=32,
              progress=False)
    generate_suite(root / "v1", scenarios=6, seed=1, **kw)
    generate_suite(root / "pool", scenarios=10, seed=2, version="candidates", grow=root / "v1", **kw)
    return root


def test_a_proposed_draft_is_a_valid_suite_of_new_scenarios_with_their_predictions(world, tmp_path, capsys):
    out = tmp_path / "draft"
    assert cli.main(["suite", "propose", "--pool", str(world / "pool"), "--labels", str(world / "v1"), "--n", "5",
                     "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "proposed 5 of 10 candidate scenarios for v2" in printed
    draft = Suite.load(out)
    assert validate_suite(out) == [] and draft.info.version == "v2" and len(draft.scenarios) == 5
    pool = Suite.load(world / "pool")
    for s in draft.scenarios:
        assert scenario_version(s.tags) == "v2" and PROPOSED_TAG in s.tags
        assert scenario_version(pool.scenario_by_id[s.scenario_id].tags) == "candidates"  # never a v1 scenario
        lo, hi = s.metadata["predicted_difficulty_ci"]
        assert lo < s.metadata["predicted_difficulty"] < hi and set(s.metadata["predicted_chance"]) == {
            "expert", "noisy-0.5", "quitter", "random"}
    assert {c.scenario_id for c in draft.continuations} == {s.scenario_id for s in draft.scenarios}
    assert all((out / c.video).is_file() for c in draft.continuations)
    proposal = json.loads((out / PROPOSAL_FILE).read_text())
    assert sorted(c["scenario_id"] for c in proposal["chosen"]) == sorted(s.scenario_id for s in draft.scenarios)
    assert "annotations" in proposal["predicted_by"]


def test_a_models_predictions_drive_the_proposal_when_given(world, tmp_path):
    pool = Suite.load(world / "pool")
    predictions = tmp_path / "pool.jsonl"
    predictions.write_text("".join(json.dumps({"continuation_id": c.continuation_id, "p_success": 0.5}) + "\n"
                                   for c in pool.continuations))
    result = propose_version(world / "pool", [world / "v1"], tmp_path / "draft", 4, predictions=predictions,
                             version="v9")
    assert result["version"] == "v9" and "the model's p_success (pool.jsonl)" == result["predicted_by"]


def test_an_empty_pool_an_unpredicted_pool_and_too_large_a_draft_are_clear_errors(world, tmp_path):
    empty = Suite.load(world / "v1")
    empty.scenarios, empty.continuations, empty.annotations, empty.references = [], [], [], []
    empty.write(tmp_path / "empty")
    with pytest.raises(ValueError, match="holds no scenario"):
        propose_version(tmp_path / "empty", [world / "v1"], tmp_path / "d1", 3)
    bare = Suite.load(world / "pool")
    bare.annotations, bare.references = [], []
    bare.write(tmp_path / "bare")
    with pytest.raises(ValueError, match="no annotations and no --predictions.*autorater predict"):
        propose_version(tmp_path / "bare", [world / "v1"], tmp_path / "d2", 3)
    with pytest.raises(ValueError, match="--n 50 but the pool holds only 10"):
        propose_version(world / "pool", [world / "v1"], tmp_path / "d3", 50)
