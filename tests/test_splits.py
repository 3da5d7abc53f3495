"""Splits keep groups whole: a scenario (its context and instruction) never sits on both sides."""

from __future__ import annotations

import pytest

from autorater.data.splits import group_of, grouped_split, holdout_split, split_groups
from autorater.data.suite import Continuation, Scenario, Suite, SuiteInfo

CATEGORIES = ("goto", "pickup", "open")
AGENTS = ("expert", "noisy", "random")


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Suite:
    """12 scenarios over 3 categories, 3 continuations each (one per agent); in memory, no files needed."""
    scenarios = [Scenario(f"s{i:02d}", f"task {i}", CATEGORIES[i % 3], tags=[f"L{i % 2}"]) for i in range(12)]
    continuations = [Continuation(f"s{i:02d}-{a}", f"s{i:02d}", a, f"videos/s{i:02d}-{a}.mp4")
                     for i in range(12) for a in AGENTS]
    return Suite(tmp_path_factory.mktemp("split"), SuiteInfo("split", "v1"), scenarios, continuations)


def _scenarios(suite, ids):
    return {suite.get(i).scenario_id for i in ids}


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("share", [0.1, 0.25, 0.5, 0.9])
def test_grouped_split_keeps_scenarios_whole_and_covers_every_id_once(suite, seed, share):
    first, second = grouped_split(suite, val_share=share, seed=seed)
    assert not _scenarios(suite, first) & _scenarios(suite, second)
    assert sorted(first + second) == sorted(suite.continuation_ids())
    assert len(set(first + second)) == len(first) + len(second)
    assert first and second  # both sides non-empty whatever the share
    order = {c: i for i, c in enumerate(suite.continuation_ids())}
    assert first == sorted(first, key=order.get) and second == sorted(second, key=order.get)  # suite order
    n_held = len(_scenarios(suite, second))
    assert n_held == min(11, max(1, round(share * 12)))


def test_grouped_split_is_deterministic_for_a_seed_and_varies_across_seeds(suite):
    assert grouped_split(suite, 0.25, seed=7) == grouped_split(suite, 0.25, seed=7)
    assert len({tuple(grouped_split(suite, 0.25, seed=s)[1]) for s in range(6)}) > 1


@pytest.mark.parametrize("by", ["agent", "category", "level"])
def test_grouped_split_by_other_keys(suite, by):
    first, second = grouped_split(suite, 0.4, seed=0, by=by)
    assert not {group_of(suite, i, by) for i in first} & {group_of(suite, i, by) for i in second}
    assert sorted(first + second) == sorted(suite.continuation_ids())


def test_grouped_split_on_a_subset(suite):
    ids = [c for c in suite.continuation_ids() if c.endswith("-expert")]
    first, second = grouped_split(suite, 0.5, seed=1, ids=ids)
    assert sorted(first + second) == sorted(ids)


def test_split_groups_rows_and_errors():
    groups = ["a", "a", "b", "c", "c", "c", "d"]
    first, second = split_groups(groups, 0.5, seed=0)
    assert sorted(first.tolist() + second.tolist()) == list(range(7))
    assert not {groups[i] for i in first} & {groups[i] for i in second}
    for share in (0, 1, -0.1, 1.5):
        with pytest.raises(ValueError, match=rf"between 0 and 1, got {share}"):
            split_groups(groups, share)
    with pytest.raises(ValueError, match="at least two groups.*found 1"):
        split_groups(["a", "a"], 0.5)
    with pytest.raises(ValueError, match="found 0"):
        split_groups([], 0.5)


def test_unknown_grouping_names_the_choices(suite):
    with pytest.raises(ValueError, match="unknown grouping 'colour'.*scenario"):
        grouped_split(suite, 0.5, by="colour")


def test_holdout_split_by_agent(suite):
    kept, held = holdout_split(suite, by="agent", values=["random"])
    assert held == [c for c in suite.continuation_ids() if c.endswith("-random")]
    assert kept == [c for c in suite.continuation_ids() if not c.endswith("-random")]


def test_holdout_split_by_category(suite):
    kept, held = holdout_split(suite, by="category", values=["open", "goto"])
    assert {suite.scenario_of(c).category for c in held} == {"open", "goto"}
    assert {suite.scenario_of(c).category for c in kept} == {"pickup"}
    assert sorted(kept + held) == sorted(suite.continuation_ids())


def test_holdout_split_unknown_value_names_the_present_values(suite):
    with pytest.raises(ValueError) as info:
        holdout_split(suite, by="agent", values=["random", "oracle"])
    message = str(info.value)
    assert "'oracle'" in message and "'random'" not in message.split("present")[0]
    assert "present: ['expert', 'noisy', 'random']" in message
