"""The leaderboard across suite versions and tags: every cell is the leaderboard's own estimate with its interval, one
suite with version tags reads as one folder per version, a version with no labels or an unknown tag is a clear error,
and the saturation check warns on a saturated version and not on a separating one."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from autorater.app import cli
from autorater.data.generate import generate_suite
from autorater.data.suite import Suite, load_truth
from autorater.serving.analysis.leaderboard import leaderboard
from autorater.serving.analysis.saturation import saturation, separating
from autorater.serving.analysis.version_report import format_version_board, write_version_report
from autorater.serving.analysis.versions import UNION, rank_agreement, version_board
from autorater.serving.labelling.folder import JOB_FILE, LABELS_FILE
from blas_threads import one_blas_thread  # noqa: F401 - autouse fixture

AGENTS = "expert,noisy-0.5,ditherer,quitter,random"


@pytest.fixture(scope="module")
def suites(tmp_path_factory):
    root = tmp_path_factory.mktemp("versions")
    kw = dict(agents=AGENTS, continuations_per_scenario=5, workers=1, image_size=32, progress=False)
    generate_suite(root / "v1", scenarios=6, seed=3, **kw)
    generate_suite(root / "v2", scenarios=6, seed=4, version="v2", grow=root / "v1", **kw)
    return root


def labels_folder(root, suite_dir, name, truth_of=None, drop_version=None):
    """A finished labels folder written by hand: every continuation human-labelled (its truth, or nothing for the
    scenarios of ``drop_version``)."""
    suite = Suite.load(suite_dir)
    truth = {t["continuation_id"]: t for t in load_truth(suite_dir)}
    out = root / name
    out.mkdir()
    ids = suite.continuation_ids()
    (out / JOB_FILE).write_text(json.dumps({"suite": str(suite_dir), "model_name": "hand@1", "continuations": len(ids),
                                            "ids_sha1": hashlib.sha1("\n".join(ids).encode()).hexdigest()}))
    rows = []
    for c in suite.continuations:
        tags = suite.scenario_by_id[c.scenario_id].tags
        outcome = None if drop_version and f"version:{drop_version}" in tags else truth[c.continuation_id]["outcome"]
        rows.append({"continuation_id": c.continuation_id, "decision": "human", "audit": False, "outcome": outcome,
                     "marker_s": None, "human_outcome": outcome, "model_outcome": "failure"})
    (out / LABELS_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def test_every_cell_is_an_estimate_with_its_interval_and_the_union_holds_every_version(suites):
    board = version_board([suites / "v2"], by_tags=["GoToLocal"], n_boot=200)
    assert board["versions"] == ["v1", "v2"] and board["counts"][UNION]["continuations"] == 60
    assert board["counts"]["v1"]["scenarios"] == board["counts"]["v2"]["scenarios"] == 6
    for agent, a in board["agents"].items():
        cells = [*a["versions"].values(), a["union"]]
        assert all(c["ci"][0] - 1e-9 <= c["rate"] <= c["ci"][1] + 1e-9 for c in cells)
        assert a["union"]["n"] == sum(c["n"] for c in a["versions"].values())
    for cat, by in board["categories"].items():
        assert set(by) == {"v1", "v2", UNION}
        assert sum(c["n"] for c in by[UNION].values()) == sum(
            1 for r in Suite.load(suites / "v2").continuations
            if Suite.load(suites / "v2").scenario_by_id[r.scenario_id].category == cat)
    assert set(board["tags"]) == {"GoToLocal"} and board["tags"]["GoToLocal"][UNION]
    (agreement,) = board["rank_agreement"]
    assert agreement["versions"] == ["v1", "v2"] and agreement["agents"] == 5
    assert -1 <= agreement["ci"][0] <= agreement["ci"][1] <= 1
    text = format_version_board(board)
    assert "rank agreement v1 vs v2: Spearman" in text and "saturation v2:" in text and "tag GoToLocal:" in text


def test_one_suite_with_version_tags_reads_as_one_source_per_version(suites):
    tagged = version_board([suites / "v2"], n_boot=50, saturation=False)
    apart = version_board([suites / "v1", suites / "v2"], n_boot=50, saturation=False)
    assert tagged["agents"] == apart["agents"] and tagged["counts"] == apart["counts"]  # v1 counted once


def test_a_single_version_cell_is_the_leaderboards_own_estimate(suites, tmp_path):
    folder = labels_folder(tmp_path, suites / "v1", "labels-v1")
    one = leaderboard(folder)
    board = version_board([folder], n_boot=50, saturation=False)
    for agent, a in one["agents"].items():
        cell = board["agents"][agent]["union"]
        assert cell["rate"] == pytest.approx(a["rate"]) and cell["ci"] == pytest.approx(a["ci"])
        assert cell["method"] == a["method"]


def test_a_version_with_no_labels_and_an_unknown_tag_are_clear_errors(suites, tmp_path):
    folder = labels_folder(tmp_path, suites / "v2", "labels-v2", drop_version="v2")
    with pytest.raises(ValueError, match=r"version 'v2' has no labels.*fix: label it"):
        version_board([folder])
    with pytest.raises(ValueError, match=r"unknown tag\(s\) 'nope'.*autorater suite tag"):
        version_board([suites / "v2"], by_tags=["nope"])
    with pytest.raises(FileNotFoundError, match="neither a labels folder"):
        version_board([tmp_path])


def test_rank_agreement_is_one_when_two_versions_rank_alike_and_minus_one_when_reversed():
    def rows(version, rates):
        return [{"agent_id": a, "scenario_id": f"{version}/s{s}", "outcome": "success" if s < r else "failure"}
                for a, r in rates.items() for s in range(10)]

    same = rank_agreement({"v1": rows("v1", {"a": 2, "b": 5, "c": 8}), "v2": rows("v2", {"a": 1, "b": 4, "c": 9})},
                          n_boot=200)[0]
    assert same["spearman"] == pytest.approx(1.0) and same["ci"][1] == pytest.approx(1.0)
    flipped = rank_agreement({"v1": rows("v1", {"a": 2, "b": 5, "c": 8}), "v2": rows("v2", {"a": 9, "b": 5,
                                                                                             "c": 1})}, n_boot=200)[0]
    assert flipped["spearman"] == pytest.approx(-1.0)


def _rows(chance):
    """Four agents on 30 scenarios, one continuation each, success with ``chance(agent, scenario)``."""
    rng = np.random.default_rng(0)
    rows = [{"continuation_id": f"{a}-{s}", "agent_id": f"a{a}", "scenario_id": f"s{s}", "decision": "human",
             "outcome": "success" if rng.random() < chance(a, s) else "failure"} for a in range(4) for s in range(30)]
    return [{**r, "human_outcome": r["outcome"]} for r in rows]


def _cells(rows):
    from autorater.calibration.agents.rates import group_estimates

    return group_estimates(rows, None, "agent_id")[0]


def test_a_saturated_version_is_warned_about_and_a_separating_one_is_not():
    saturated = _rows(lambda a, s: 1.0 if a >= 2 else 0.0)  # two agents pass everything, two fail everything
    sat = saturation(saturated, None, _cells(saturated))
    assert sat["separating_share"] == 1.0  # every scenario splits the agents...
    assert sat["middle"] == 0  # ...but none tells the two best (or the two worst) apart
    assert any("ceiling" in w for w in sat["warnings"]) and any("middle difficulty" in w for w in sat["warnings"])
    easy = _rows(lambda a, s: 1.0)
    sat = saturation(easy, None, _cells(easy))
    assert sat["separating"] == 0 and sat["all_pass"] == 30 and any("separate" in w for w in sat["warnings"])
    graded = _rows(lambda a, s: 1 / (1 + np.exp(-(1.5 * (a - 1.5) - (s - 15) / 6))))
    sat = saturation(graded, None, _cells(graded))
    assert sat["warnings"] == [] and sat["middle_share"] > 0.5
    assert all(d["difficulty_ci"][0] <= d["difficulty"] <= d["difficulty_ci"][1]
               for d in sat["scenario_difficulty"].values())
    assert separating([{"scenario_id": "s", "agent_id": "a", "outcome": "success"}]) == {}  # one agent: no verdict


def test_the_report_writes_html_json_and_both_figures(suites, tmp_path):
    board = version_board([suites / "v2"], n_boot=50)
    page = write_version_report(board, tmp_path / "board.html").read_text()
    assert page.count("data:image/png;base64,") == 2 and "Rank agreement" in page and "Saturation" in page
    assert json.loads((tmp_path / "board.json").read_text())["versions"] == ["v1", "v2"]
    assert (tmp_path / "board-agents.png").stat().st_size > 1000
    assert (tmp_path / "board-saturation.png").stat().st_size > 1000


def test_cli_leaderboard_goes_across_versions_for_a_folder_whose_scenarios_came_in_two(suites, tmp_path, capsys):
    folder = labels_folder(tmp_path, suites / "v2", "labels")
    assert cli.main(["leaderboard", "--labels", str(folder), "--by-tag", "version:v2"]) == 0
    out = capsys.readouterr().out
    assert "all versions" in out and "tag version:v2:" in out
    assert (folder / "leaderboard-versions.html").is_file() and (folder / "leaderboard-versions.json").is_file()
    assert cli.main(["leaderboard", "--suite", str(suites / "v2"), "--truth"]) == 2
