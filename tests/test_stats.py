"""Suite statistics: counts, success rates, agreement and annotator accuracy, and the ``suite stats`` command."""

from __future__ import annotations

import json

import pytest

from autorater.app.cli import main
from autorater.data.stats import format_stats, suite_stats
from autorater.data.suite import Annotation, Continuation, Reference, Scenario, Suite, SuiteInfo

S, F = "success", "failure"


def _strict_json(text: str):
    def reject(token):
        raise ValueError(f"{token} is not JSON")
    return json.loads(text, parse_constant=reject)


@pytest.fixture
def suite_dir(tmp_path):
    """5 continuations; c5 has no labels. h1 and h2 agree everywhere; h3 differs on c3 only, and is right there."""
    scenarios = [Scenario("s1", "go to the ball", "goto"), Scenario("s2", "pick up the key", "pickup")]
    continuations = [Continuation(f"c{i}", scenario, agent, f"videos/c{i}.mp4")
                     for i, scenario, agent in ((1, "s1", "good"), (2, "s1", "bad"), (3, "s2", "good"),
                                                (4, "s2", "bad"), (5, "s2", "bad"))]
    labels = {"c1": [(S, 1.0), (S, 1.0), (S, 2.0)], "c2": [(F, 0.5), (F, None), (F, 0.5)],
              "c3": [(S, 2.0), (S, 4.0), (F, 1.0)], "c4": [(S, None), (S, None), (S, None)]}
    annotations = [Annotation(c, f"h{i + 1}", o, m) for c, rows in labels.items() for i, (o, m) in enumerate(rows)]
    references = [Reference("c1", S, 1.0), Reference("c2", F, 0.5), Reference("c3", F, 1.0)]
    Suite(tmp_path / "s", SuiteInfo("stats-test", "v3"), scenarios, continuations, annotations, references).write()
    return tmp_path / "s"


def test_suite_stats_counts_rates_and_annotator_accuracy(suite_dir):
    stats = suite_stats(Suite.load(suite_dir))
    assert stats["suite"] == {"name": "stats-test", "version": "v3"}
    assert (stats["scenarios"], stats["continuations"], stats["annotations"], stats["references"]) == (2, 5, 12, 3)
    assert stats["by_category"] == {"goto": 2, "pickup": 3} and stats["by_agent"] == {"good": 2, "bad": 3}
    # aggregate of the annotators: c1 S, c2 F, c3 S, c4 S; c5 unlabelled (left out, not counted as failure)
    rates = stats["success_rate_annotators"]
    assert rates["overall"] == 0.75
    assert rates["by_agent"] == {"bad": 0.5, "good": 1.0}
    assert rates["by_category"] == {"goto": 0.5, "pickup": 1.0}
    gold = stats["success_rate_references"]
    assert gold["overall"] == pytest.approx(1 / 3, abs=1e-4) and gold["by_agent"] == {"bad": 0.0, "good": 0.5}
    acc = stats["annotators_on_references"]
    assert acc["h1"] == acc["h2"] == {"n": 3, "accuracy": pytest.approx(2 / 3, abs=1e-4), "balanced_accuracy": 0.75}
    assert acc["h3"] == {"n": 3, "accuracy": 1.0, "balanced_accuracy": 1.0}
    agreement = stats["agreement"]
    assert agreement["labels_per_continuation"] == 3.0
    assert agreement["marker_missing_share"] == pytest.approx(4 / 12)
    assert agreement["marker_spread_median_s"] == 0.0  # c1: 0, c2: 0, c3: 1
    for key in ("krippendorff_alpha", "fleiss_kappa"):
        assert 0 < agreement[key] < 1  # good but imperfect agreement
    _strict_json(json.dumps(stats))  # JSON-able as it is


def test_suite_stats_without_labels(tmp_path):
    Suite(tmp_path, SuiteInfo("bare", "v1"), [Scenario("s", "go", "goto")],
          [Continuation("c", "s", "a", "videos/c.mp4")]).write()
    stats = suite_stats(Suite.load(tmp_path))
    assert stats["continuations"] == 1 and stats["annotations"] == 0
    assert "success_rate_annotators" not in stats and "success_rate_references" not in stats
    assert "suite bare v1: 1 scenarios, 1 continuations, 0 annotations, 0 references" in format_stats(stats)


@pytest.mark.parametrize("labels", [[("c1", "h1", S), ("c2", "h1", F)],                       # one annotator
                                    [(c, h, S) for c in ("c1", "c2") for h in ("h1", "h2")]])   # all agree on S
def test_undefined_agreement_is_null_not_nan(tmp_path, capsys, labels):
    """Agreement is undefined here: stats must not crash, and ``--json`` must still print standard JSON."""
    Suite(tmp_path, SuiteInfo("one", "v1"), [Scenario("s", "go", "goto")],
          [Continuation("c1", "s", "a", "v/1.mp4"), Continuation("c2", "s", "a", "v/2.mp4")],
          [Annotation(*row) for row in labels]).write()
    stats = suite_stats(Suite.load(tmp_path))
    assert stats["agreement"]["krippendorff_alpha"] is None and stats["agreement"]["fleiss_kappa"] is None
    assert "Krippendorff alpha -" in format_stats(stats)
    assert main(["suite", "stats", str(tmp_path), "--json"]) == 0
    assert _strict_json(capsys.readouterr().out)["agreement"]["fleiss_kappa"] is None


def test_cli_stats_text_and_json(suite_dir, capsys):
    assert main(["suite", "stats", str(suite_dir)]) == 0
    out = capsys.readouterr().out
    assert "suite stats-test v3: 2 scenarios, 5 continuations, 12 annotations, 3 references" in out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.strip()}
    assert rows["good"] == ["2", "1.000", "0.500"] and rows["bad"] == ["3", "0.500", "0.000"]
    assert rows["goto"] == ["2", "0.500"] and rows["pickup"] == ["3", "1.000"]
    assert rows["h3"] == ["3", "1.000", "1.000"] and rows["h1"] == ["3", "0.667", "0.750"]

    assert main(["suite", "stats", str(suite_dir), "--json"]) == 0
    printed = _strict_json(capsys.readouterr().out)
    assert printed == json.loads(json.dumps(suite_stats(Suite.load(suite_dir))))
    assert printed["success_rate_annotators"]["overall"] == 0.75


def test_cli_stats_on_a_broken_suite_says_what_is_wrong(suite_dir, capsys):
    (suite_dir / "scenarios.jsonl").write_text('{"scenario_id": "s1"}\n')
    assert main(["suite", "stats", str(suite_dir)]) == 2
    err = capsys.readouterr().err
    assert "scenarios.jsonl:1: missing required field 'instruction'" in err
