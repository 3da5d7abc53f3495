"""Splits grouped by scenario (never by continuation), and held-out splits by agent or category.

Continuations of one scenario share its replayed context and its instruction: putting them on both
sides of a split leaks the answer. Every split here keeps a group whole.

Example:
    >>> train, val = grouped_split(suite, val_share=0.2, seed=0)          # doctest: +SKIP
    >>> train, test = holdout_split(suite, by="agent", values=["random"])  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from autorater.data.suite import Suite

GROUP_KEYS = ("scenario", "agent", "category", "level")


def group_of(suite: Suite, continuation_id: str, by: str) -> str:
    """The group a continuation belongs to: its scenario, agent, category or level (tag 0 of the scenario)."""
    c = suite.get(continuation_id)
    if by == "scenario":
        return c.scenario_id
    if by == "agent":
        return c.agent_id
    scenario = suite.scenario_by_id[c.scenario_id]
    if by == "category":
        return scenario.category
    if by == "level":
        return scenario.metadata.get("level") or (scenario.tags[0] if scenario.tags else "")
    raise ValueError(f"unknown grouping {by!r}; choose one of {GROUP_KEYS}")


def split_groups(groups: Sequence[str], share: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Row indices (first, second) with whole groups on one side and about ``share`` of the groups second."""
    if not 0 < share < 1:
        raise ValueError(f"the held-out share must be between 0 and 1, got {share}")
    names = sorted(set(groups))
    if len(names) < 2:
        raise ValueError(f"need at least two groups to split, found {len(names)}")
    n_second = min(len(names) - 1, max(1, round(share * len(names))))
    held = set(np.random.default_rng(seed).permutation(names)[:n_second].tolist())
    second = np.array([g in held for g in groups])
    return np.flatnonzero(~second), np.flatnonzero(second)


def grouped_split(suite: Suite, val_share: float = 0.2, seed: int = 0, by: str = "scenario",
                  ids: Sequence[str] | None = None) -> tuple[list[str], list[str]]:
    """Split continuation ids in two, whole groups on one side, about ``val_share`` of groups in the second.

    Args:
        suite: the suite.
        val_share: share of groups that go to the second part.
        seed: the shuffle's seed.
        by: the grouping key (scenario by default).
        ids: restrict to these continuation ids (default: all, in suite order).

    Returns:
        (first, second): continuation ids in suite order.
    """
    ids = list(ids) if ids is not None else suite.continuation_ids()
    first, second = split_groups([group_of(suite, i, by) for i in ids], val_share, seed)
    return [ids[i] for i in first], [ids[i] for i in second]


def holdout_split(suite: Suite, by: str, values: Sequence[str],
                  ids: Sequence[str] | None = None) -> tuple[list[str], list[str]]:
    """Hold out every continuation whose ``by`` group is in ``values`` (unseen agents, unseen categories).

    Returns:
        (kept, held_out): continuation ids in suite order.
    """
    ids = list(ids) if ids is not None else suite.continuation_ids()
    present = {group_of(suite, i, by) for i in ids}
    missing = set(values) - present
    if missing:
        raise ValueError(f"no continuation has {by} in {sorted(missing)}; present: {sorted(present)}")
    values = set(values)
    kept = [i for i in ids if group_of(suite, i, by) not in values]
    held = [i for i in ids if group_of(suite, i, by) in values]
    return kept, held
