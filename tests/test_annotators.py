"""Simulated annotators: accuracy in the human range, STS-style errors, determinism."""

import numpy as np
import pytest

from autorater.data.annotators import annotator_scores, default_pool, simulate_annotations, synthetic_truths


@pytest.fixture(scope="module")
def truths():
    return synthetic_truths(3000, seed=3)


@pytest.fixture(scope="module")
def labels(truths):
    return simulate_annotations(truths, n_per_item=12, seed=0)


def test_each_annotator_is_about_ninety_percent_balanced_accurate(truths, labels):
    scores = annotator_scores(labels, truths)
    assert set(scores) == {p.annotator_id for p in default_pool()}
    bas = [s["balanced_accuracy"] for s in scores.values()]
    assert all(0.85 <= b <= 0.95 for b in bas), bas
    assert 0.87 <= np.mean(bas) <= 0.93


def test_deterministic_per_item_and_order_free(truths):
    few = truths[:200]
    a = simulate_annotations(few, 3, seed=5)
    assert a == simulate_annotations(few, 3, seed=5)
    assert a != simulate_annotations(few, 3, seed=6)
    shuffled = simulate_annotations(few[::-1], 3, seed=5)
    key = lambda x: (x.continuation_id, x.annotator_id)  # noqa: E731
    assert sorted(a, key=key) == sorted(shuffled, key=key)
    per_item = {}
    for x in a:
        per_item.setdefault(x.continuation_id, []).append(x.annotator_id)
    assert all(len(v) == 3 == len(set(v)) for v in per_item.values())


def test_markers_react_late_stay_inside_and_sometimes_miss(truths, labels):
    by_id = {t["continuation_id"]: t for t in truths}
    delays, missing = [], 0
    for x in labels:
        t = by_id[x.continuation_id]
        if x.marker_s is None:
            missing += 1
            continue
        assert 0 <= x.marker_s <= t["num_frames"] / t["fps"] + 1e-9
        if x.outcome == t["outcome"] == "success":
            delays.append(x.marker_s - t["marker_s"])
    assert 0 < missing < 0.1 * len(labels)
    assert 0.1 < np.median(delays) < 0.8 and np.std(delays) > 0.05


def test_errors_follow_rigidity_and_ambiguity(truths, labels):
    by_id = {t["continuation_id"]: t for t in truths}

    def error_rate(pick):
        sel = [x for x in labels if pick(by_id[x.continuation_id])]
        return np.mean([x.outcome != by_id[x.continuation_id]["outcome"] for x in sel])

    messy = error_rate(lambda t: t["outcome"] == "success" and t["traits"]["messiness"] > 0.4)
    clean = error_rate(lambda t: t["outcome"] == "success" and t["traits"]["messiness"] < 0.15)
    assert messy > clean + 0.03
    ambiguous = error_rate(lambda t: t["outcome"] == "failure" and t["traits"]["ambiguity"] >= 0.45)
    clear = error_rate(lambda t: t["outcome"] == "failure" and t["traits"]["ambiguity"] == 0)
    assert ambiguous > clear + 0.02
    rigid_misses = [x for x in labels if by_id[x.continuation_id]["outcome"] == "success"
                    and x.outcome == "failure"]
    assert rigid_misses and all(x.failure_mode for x in rigid_misses)
