"""The long label table: majority vote, Dawid-Skene, agreement, annotator accuracy, marker spread, references."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from autorater.data.labels import (
    COLUMNS,
    aggregate,
    annotator_accuracy,
    dawid_skene,
    fleiss_kappa,
    krippendorff_alpha,
    label_table,
    majority_vote,
    marker_spread,
    reference_table,
)
from autorater.data.suite import Annotation, Reference

S, F = "success", "failure"


def table(rows) -> pd.DataFrame:
    """rows: (continuation_id, annotator_id, outcome[, marker_s])."""
    return label_table([{"continuation_id": r[0], "annotator_id": r[1], "outcome": r[2],
                         "marker_s": r[3] if len(r) > 3 else None} for r in rows])


def simulated(n_items: int, accuracies: dict[str, float], seed: int, p_success: float = 0.5):
    """(truth per item, long table): each annotator is right with its accuracy, independently."""
    rng = np.random.default_rng(seed)
    truth = rng.random(n_items) < p_success
    rows = []
    for i, t in enumerate(truth):
        for a, acc in accuracies.items():
            said = t if rng.random() < acc else not t
            rows.append((f"c{i:04d}", a, S if said else F))
    return pd.Series(np.where(truth, S, F), index=[f"c{i:04d}" for i in range(n_items)]), table(rows)


def test_label_table_from_records_and_dicts():
    t = label_table([Annotation("c1", "h1", S, 1), Annotation("c1", "h2", F, None, source="model"),
                     {"continuation_id": "c2", "annotator_id": "h1", "outcome": F}])
    assert list(t.columns) == COLUMNS and len(t) == 3
    assert t["marker_s"].dtype == float and t["marker_s"].isna().tolist() == [False, True, True]
    assert t["source"].tolist() == ["human", "model", "human"]
    assert len(label_table([])) == 0 and list(label_table([]).columns) == COLUMNS


def test_majority_vote_outcome_p_success_and_marker():
    t = table([("c1", "a", S, 1.0), ("c1", "b", S, 3.0), ("c1", "c", F, 9.0),        # 2:1 success
               ("c2", "a", F, 4.0), ("c2", "b", F, None), ("c2", "c", S, 0.5),        # 1:2 failure
               ("c3", "a", S, 2.0), ("c3", "b", F, 7.0),                              # tie
               ("c4", "a", S)])                                                       # one label, no marker
    mv = majority_vote(t)
    assert mv.loc["c1", "outcome"] == S and mv.loc["c1", "p_success"] == pytest.approx(2 / 3)
    assert mv.loc["c1", "marker_s"] == 2.0  # median of the agreeing annotators only
    assert mv.loc["c2", "outcome"] == F and mv.loc["c2", "p_success"] == pytest.approx(1 / 3)
    assert mv.loc["c2", "marker_s"] == 4.0  # missing markers are skipped
    assert mv.loc["c3", "outcome"] == F and mv.loc["c3", "p_success"] == 0.5  # ties go to failure
    assert mv.loc["c3", "marker_s"] == 7.0
    assert mv.loc["c4", "outcome"] == S and math.isnan(mv.loc["c4", "marker_s"])
    assert mv["n_labels"].to_dict() == {"c1": 3, "c2": 3, "c3": 2, "c4": 1}


def test_dawid_skene_recovers_truth_with_an_adversarial_annotator():
    truth, t = simulated(300, {"a": 0.8, "b": 0.8, "liar": 0.0}, seed=0)
    ds, mv = dawid_skene(t), majority_vote(t)
    ds_acc = (ds["outcome"].reindex(truth.index) == truth).mean()
    mv_acc = (mv["outcome"].reindex(truth.index) == truth).mean()
    assert ds_acc >= 0.9 and ds_acc > mv_acc + 0.2  # the liar fools the vote (about 0.64), not DS
    raters = ds.attrs["annotators"]
    assert raters.loc["liar", "sensitivity"] < 0.1 and raters.loc["liar", "specificity"] < 0.1
    for a in ("a", "b"):
        assert 0.65 < raters.loc[a, "sensitivity"] < 0.95 and 0.65 < raters.loc[a, "specificity"] < 0.95


def test_dawid_skene_posterior_is_a_probability_and_matches_confident_votes():
    truth, t = simulated(120, {"a": 0.9, "b": 0.7, "c": 0.6, "d": 0.55}, seed=3, p_success=0.3)
    ds = dawid_skene(t)
    assert ((ds["p_success"] >= 0) & (ds["p_success"] <= 1)).all()
    assert list(ds.index) == sorted(truth.index) and (ds["n_labels"] == 4).all()
    assert (ds["outcome"] == np.where(ds["p_success"] > 0.5, S, F)).all()
    unanimous = t.groupby("continuation_id")["outcome"].nunique() == 1
    first = t.groupby("continuation_id")["outcome"].first()
    assert (ds.loc[unanimous[unanimous].index, "outcome"] == first[unanimous]).all()


def test_aggregate_by_name():
    _, t = simulated(20, {"a": 0.9, "b": 0.9, "c": 0.9}, seed=1)
    pd.testing.assert_frame_equal(aggregate(t, "majority"), majority_vote(t))
    assert aggregate(t)["outcome"].equals(dawid_skene(t)["outcome"])
    with pytest.raises(ValueError, match="dawid_skene.*majority"):
        aggregate(t, "mean")


def test_fleiss_kappa_is_one_for_perfect_agreement_and_near_zero_for_random_labels():
    rng = np.random.default_rng(0)
    outcomes = rng.random(50) < 0.4
    perfect = table([(f"c{i}", a, S if o else F) for i, o in enumerate(outcomes) for a in "abc"])
    assert fleiss_kappa(perfect) == pytest.approx(1.0)
    random = table([(f"c{i}", a, S if rng.random() < 0.5 else F) for i in range(2000) for a in "abc"])
    assert abs(fleiss_kappa(random)) < 0.05
    # systematic disagreement on every item is worse than chance
    split = table([(f"c{i}", a, o) for i in range(20) for a, o in (("a", S), ("b", F))])
    assert fleiss_kappa(split) < 0


def test_fleiss_kappa_undefined_cases_are_nan():
    assert math.isnan(fleiss_kappa(table([("c1", "a", S), ("c2", "a", F)])))  # nobody labelled twice
    assert math.isnan(fleiss_kappa(table([("c1", "a", S), ("c1", "b", S)])))  # one class: chance is 1


def test_krippendorff_alpha_is_one_for_perfect_agreement():
    rows = [(f"c{i}", a, S if i % 3 else F) for i in range(30) for a in "abcd"]
    assert krippendorff_alpha(table(rows)) == pytest.approx(1.0)
    # missing labels (not every annotator labels every item) do not hurt perfect agreement
    assert krippendorff_alpha(table(rows[::2] + rows[1::4])) == pytest.approx(1.0)


def test_krippendorff_alpha_near_zero_for_random_and_close_to_fleiss_on_complete_data():
    rng = np.random.default_rng(1)
    random = table([(f"c{i}", a, S if rng.random() < 0.5 else F) for i in range(1000) for a in "abc"])
    assert abs(krippendorff_alpha(random)) < 0.05
    _, noisy = simulated(400, {"a": 0.9, "b": 0.8, "c": 0.85}, seed=2)
    assert 0.2 < krippendorff_alpha(noisy) < 0.9
    assert krippendorff_alpha(noisy) == pytest.approx(fleiss_kappa(noisy), abs=0.01)


def test_krippendorff_alpha_undefined_cases_are_nan():
    assert math.isnan(krippendorff_alpha(table([("c1", "a", S), ("c2", "a", F)])))  # one annotator
    assert math.isnan(krippendorff_alpha(table([("c1", "a", S), ("c2", "b", F)])))  # nobody labelled twice
    # everyone says success on everything: no expected disagreement (the krippendorff package raises here)
    assert math.isnan(krippendorff_alpha(table([(c, a, S) for c in ("c1", "c2") for a in "ab"])))


def test_annotator_accuracy_by_hand():
    gold = reference_table([Reference("g1", S), Reference("g2", F), Reference("g3", S), Reference("g4", F)])
    t = table([("g1", "a", S), ("g2", "a", F), ("g3", "a", F), ("g4", "a", F),   # 3/4; recalls 1/2 and 2/2
               ("g1", "b", S), ("g2", "b", S),                                    # 1/2; recalls 1 and 0
               ("g1", "c", S), ("x", "c", F), ("y", "d", S)])                     # c: one gold item; d: none
    acc = annotator_accuracy(t, gold)
    assert sorted(acc.index) == ["a", "b", "c"]
    assert acc.loc["a"].to_dict() == {"n": 4, "accuracy": 0.75, "balanced_accuracy": 0.75}
    assert acc.loc["b", "n"] == 2 and acc.loc["b", "accuracy"] == 0.5 and acc.loc["b", "balanced_accuracy"] == 0.5
    assert acc.loc["c", "n"] == 1 and acc.loc["c", "accuracy"] == 1.0
    assert math.isnan(acc.loc["c", "balanced_accuracy"])  # only one gold class seen


def test_marker_spread_by_hand():
    t = table([("c1", "a", S, 1.0), ("c1", "b", S, 2.0), ("c1", "c", F, 4.0),        # |dev| 1, 0, 2 -> 1
               ("c2", "a", F, 3.0), ("c2", "b", F, None), ("c2", "c", F, 5.0),       # |dev| 1, 1 -> 1
               ("c3", "a", S, 2.0), ("c3", "b", S),                                   # one marker: left out
               ("c4", "a", F, 2.0), ("c4", "b", F, 2.0), ("c4", "c", F, 2.0), ("c4", "d", F, 10.0)])  # -> 0
    spread = marker_spread(t)
    assert spread.to_dict() == {"c1": 1.0, "c2": 1.0, "c4": 0.0}


def test_reference_table():
    ref = reference_table([Reference("c2", F, 1.5, "wrong_object"),
                           {"continuation_id": "c1", "outcome": S}])
    assert list(ref.index) == ["c2", "c1"] and ref.index.name == "continuation_id"
    assert list(ref.columns) == ["outcome", "marker_s", "failure_mode"]
    assert ref.loc["c2"].tolist() == [F, 1.5, "wrong_object"]
    assert ref.loc["c1", "outcome"] == S and math.isnan(ref.loc["c1", "marker_s"])
    assert ref["marker_s"].dtype == float
