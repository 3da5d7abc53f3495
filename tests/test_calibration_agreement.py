import json

import numpy as np
import pytest

from autorater.calibration import agreement_report, format_agreement_table

# 8 references in 4 scenarios (2 per scenario), 2 categories.
REFERENCES = {
    "continuation_ids": [f"c{i}" for i in range(8)],
    "gold_outcome": [1, 0, 1, 1, 0, 0, 1, 0],
    "gold_marker_s": [2.0, 5.0, 3.0, 1.0, np.nan, 4.0, 2.5, 6.0],
    "group_ids": ["s0", "s0", "s1", "s1", "s2", "s2", "s3", "s3"],
    "categories": ["goto", "goto", "goto", "goto", "pickup", "pickup", "pickup", "pickup"],
    "p_success": [0.9, 0.2, 0.8, 0.4, 0.1, 0.3, 0.7, 0.6],  # wrong on c3 and c7
    "pred_marker_s": [2.5, 4.0, 3.0, 1.5, 3.0, 4.0, 4.0, 5.0],
}
ANNOTATIONS = [  # (continuation_id, annotator_id, outcome, marker_s)
    ("c0", "h1", 1, 1.0), ("c0", "h2", 1, 1.2), ("c0", "h3", 1, 2.0),
    ("c1", "h1", 0, 5.0), ("c1", "h2", 0, 5.5), ("c1", "h3", 1, 3.0),
    ("c2", "h1", 1, 3.0), ("c2", "h2", 1, 3.5),
    ("c3", "h1", 1, 1.0), ("c3", "h2", 0, None),  # a tie: no majority
    ("c4", "h1", 0, None), ("c4", "h3", 0, None),
    ("c5", "h2", 0, 4.0), ("c5", "h3", 1, 2.0),
    ("c6", "h1", 1, 2.5), ("c6", "h3", 1, 2.6),
    ("c7", "h2", 0, 6.0), ("c7", "h3", 0, 6.5),
    ("not-a-reference", "h1", 1, 1.0),
]


def make_report(annotations=ANNOTATIONS):
    return agreement_report(**REFERENCES, annotations=annotations, n_boot=200, seed=0)


def test_report_rows_intervals_and_json():
    report = make_report()
    rows = {row["name"]: row for row in report["rows"]}
    assert list(rows) == ["autorater", "h1", "h2", "h3", "human_majority", "autorater_vs_human_majority"]
    assert rows["autorater"]["overall"]["accuracy"] == pytest.approx(6 / 8)
    assert rows["h1"]["overall"]["n"] == 6  # only the references h1 labelled
    assert rows["human_majority"]["overall"]["n"] == 6  # c3 (tie) and c5 (tie) left out
    assert rows["autorater_vs_human_majority"]["reference"] == "human_majority"
    for row in report["rows"]:
        for entry in [row["overall"], *row["per_category"].values()]:
            for metric, (lo, hi) in entry["ci"].items():
                if entry[metric] is not None and lo is not None:
                    assert lo <= entry[metric] <= hi, (row["name"], metric)
    assert set(rows["autorater"]["per_category"]) == {"goto", "pickup"}
    json.dumps(report, allow_nan=False)  # strict JSON: undefined values are None


def test_marker_and_alpha_sections():
    report = make_report()
    # gold successes called success by h1, h2, h3 with >= 2 markers: c0 (1.0, 1.2, 2.0) -> MAD 0.2,
    # c2 (3.0, 3.5) -> 0.25, c6 (2.5, 2.6) -> 0.05
    spread = report["markers"]["annotator_spread"]
    assert spread["n_continuations"] == 3 and spread["median_mad_s"] == pytest.approx(0.2)
    raters = report["markers"]["raters"]
    assert list(raters) == ["autorater", "h1", "h2", "h3"]
    assert raters["autorater"]["n"] == 3  # c0, c2, c6: errors 0.5, 0, 1.5
    assert raters["autorater"]["median_abs_error_s"] == pytest.approx(0.5)
    assert raters["h1"]["n"] == 4 and raters["h1"]["median_abs_error_s"] == pytest.approx(0.0)  # c0, c2, c3, c6
    alpha = report["krippendorff_alpha"]
    assert -1 <= alpha["annotators"] <= 1 and -1 <= alpha["annotators_and_autorater"] <= 1


def test_column_table_with_outcome_strings_gives_the_same_report_and_table_names_annotators():
    columns = dict(zip(["continuation_id", "annotator_id", "outcome", "marker_s"], map(list, zip(*ANNOTATIONS))))
    columns["outcome"] = ["success" if o else "failure" for o in columns["outcome"]]  # as in data's label table
    assert make_report(columns) == make_report()
    table = format_agreement_table(make_report())
    for name in ("autorater", "h1", "h2", "h3", "human_majority", "Krippendorff"):
        assert name in table


def test_duplicate_annotation_is_an_error():
    with pytest.raises(ValueError, match="twice"):
        make_report([*ANNOTATIONS, ("c0", "h1", 0, 1.0)])
