"""Version challengers: a stratum its model fails learns from the version's first labels, and every certificate still
keeps its word.

First the statistics, simulated through the product's own round machinery (``benchmarks/certify_sim.py``: the plan
``autorater label`` seals, ``rounds.decide``, challengers committed by ``rounds.commit_challenger``, the suite's
labelling-job ledger) and judged against the target on what each certificate covers: a challenger at the margin, one
worse than its parent, continuations the model learned, answers re-asked, a version labelled again or grown. CI runs
200 draws a cell (a count a binomial at the nominal 10% exceeds once in a thousand runs fails); the 1,000-draw cells
are ``python -m benchmarks.certify_sim``'s. Then the real loop on a tiny model: label, answer, ingest, certify, learn,
certify again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autorater.calibration import model_weights
from autorater.rater import Rater, read_metadata
from autorater.serving.labelling.certify import certify, format_certification
from autorater.serving.labelling.folder import LabelsFolder
from autorater.serving.labelling.ingest import ingest
from autorater.serving.labelling.label import label_suite
from autorater.serving.labelling.rounds import learning_batch
from benchmarks.certify_sim import Stratum, Team, relabel_cell, run_cell
from serving_env import torch_threads
from test_certify import at_most_nominal
from tiny_suites import read_lines

DRAWS = 200


def test_each_strata_budget_is_split_in_advance_across_its_models():
    for first in (0.5, 0.9):
        for adaptations in (1, 2, 4):
            w = model_weights(adaptations, first)
            assert len(w) == adaptations + 1 and w[0] == first and abs(sum(w) - 1) < 1e-12
            assert all(a >= b for a, b in zip(w[1:], w[2:]))  # later models get no more than earlier ones
    assert model_weights(0, 0.5) == (1.0,)


def test_a_learning_batch_asks_what_each_category_lacks_and_the_same_for_a_seed():
    ids = [f"c{i}" for i in range(40)]
    category = {c: f"t{i % 4}" for i, c in enumerate(ids)}
    labelled = {"c0", "c4", "c1"}  # two of t0, one of t1
    batch = learning_batch(ids, category, labelled, 3, seed=7)
    per = {t: sum(category[c] == t for c in batch) for t in ("t0", "t1", "t2", "t3")}
    assert per == {"t0": 1, "t1": 2, "t2": 3, "t3": 3} and not set(batch) & labelled
    assert batch == learning_batch(ids, category, labelled, 3, seed=7) != learning_batch(ids, category, labelled, 3, 8)


@pytest.mark.parametrize("claim", ["family", "fcr"])
def test_a_challenger_at_the_margin_is_certified_no_more_often_than_nominal(claim):
    cell = {"s": Stratum(600, 0.75, challengers=(0.895,), status="new")}
    r = run_cell(cell, 0.9, 0.1, claim, 0.926, DRAWS, seed=11, adapt=2, fixed=False)
    assert at_most_nominal(r["family_failure"]) and at_most_nominal(r["failure_any_run"])


def test_a_challenger_worse_than_its_parent_and_one_that_never_becomes_good_keep_the_promise():
    worse = run_cell({"s": Stratum(600, 0.89, challengers=(0.85,))}, 0.9, 0.1, "family", 0.926, DRAWS, seed=12,
                     adapt=2, fixed=False)
    never = run_cell({"s": Stratum(600, 0.80, challengers=(0.87, 0.895), status="new")}, 0.9, 0.1, "family", 0.926,
                     DRAWS, seed=13, adapt=2, fixed=False)
    assert at_most_nominal(worse["family_failure"]) and at_most_nominal(never["family_failure"])


def test_a_good_challenger_labels_most_of_a_new_version_for_a_third_of_a_label_each():
    r = run_cell({"s": Stratum(1000, 0.70, challengers=(0.97,), uncertain=0.3, status="new")}, 0.9, 0.1, "family",
                 0.926, 60, seed=14, adapt=2, fixed=False)
    assert r["strata"]["s"]["challenger_certified"] >= 0.9 and r["humans_per_continuation"] <= 0.4
    off = run_cell({"s": Stratum(1000, 0.70, uncertain=0.3, status="new")}, 0.9, 0.1, "family", 0.926, 30, seed=14,
                   fixed=False)
    assert off["humans_per_continuation"] >= 0.95  # without challengers the new version is labelled by hand


def test_continuations_the_model_learned_are_never_audited():
    # 30% of the version already carries human labels (the model trained on them: right on every one); the rest sits
    # under the target. Audited with them in, the audit would certify; the product leaves them out.
    r = run_cell({"s": Stratum(600, 0.88, labelled=0.3)}, 0.9, 0.1, "family", 0.926, DRAWS, seed=15, fixed=False)
    assert at_most_nominal(r["family_failure"])


def test_answers_re_asked_because_they_disagreed_never_earn_a_certificate():
    accuracy = 0.9
    model = (0.895 - (1 - accuracy)) / (2 * accuracy - 1)  # agrees with the annotators at 0.895
    r = run_cell({"s": Stratum(600, model)}, 0.9, 0.1, "family", 0.926, DRAWS, seed=16,
                 team=Team(accuracy, reask=True), fixed=False)
    corrected = run_cell({"s": Stratum(600, model)}, 0.9, 0.1, "family", 0.926, DRAWS, seed=17,
                         team=Team(accuracy, corrections=0.3), fixed=False)
    assert at_most_nominal(r["family_failure"]) and at_most_nominal(corrected["failure_any_run"])


def test_a_version_labelled_again_or_grown_keeps_its_first_verdict():
    again = relabel_cell("again", 0.9, 60, seed=18)
    assert again["refused_per_draw"] >= 0.95  # the first job saw answers: later jobs are refused
    grown = relabel_cell("grown", 0.9, 60, seed=19)
    assert at_most_nominal(again["family_failure"], 60) and at_most_nominal(grown["family_failure"], 60)


# -- the real loop ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A tiny learnable world (a success lights a bright square): a training suite to replay, a new version of 120
    continuations that arrives unlabelled (its truth kept for the simulated annotators), and an untrained tiny model
    calibrated to provisional-label everything at a 0.6 target, its references from another camera (the version is a
    new stratum: half its budget for the first model, a quarter for each challenger)."""
    import torch

    from autorater.calibration import CalibrationRecord
    from autorater.data.suite import Suite
    from autorater.encoders import tokenize_words
    from autorater.models import PRESETS, AutoModel
    from model_suites import learnable_suite
    from serving_env import set_calibration

    root = tmp_path_factory.mktemp("challengers")
    train = learnable_suite(root / "train", n_scenarios=16, per_scenario=2)
    v = learnable_suite(root / "version", n_scenarios=60, per_scenario=2, seed=1)
    truth = {a.continuation_id: a.outcome for a in v.annotations}
    Suite(v.root, v.info, v.scenarios, v.continuations, [], []).write(v.root)
    from autorater.data.suite import TRUTH_FILE

    (v.root / TRUTH_FILE).write_text("".join(json.dumps(  # what the simulated annotators of the benchmark read
        {"continuation_id": c, "outcome": o, "marker_s": 0.5 if o == "success" else 1.0, "failure_mode": None
         if o == "success" else "timeout", "fps": 8.0, "num_frames": 8, "takeover_s": 0.0, "category": "go_to",
         "traits": {"messiness": 0.0, "ambiguity": 0.0}}) + "\n" for c, o in truth.items()))
    torch.manual_seed(0)
    words = sorted({w for s in v.scenarios for w in tokenize_words(s.instruction)})
    model = AutoModel.from_config(PRESETS["tiny"].replace(vocab=words, failure_modes=["timeout"]))
    folder = model.save_pretrained(root / "model")
    set_calibration(folder, 0.5, [0.0] * 10)
    record = CalibrationRecord.from_json(folder / "calibration.json")
    record.target_agreement, record.empirical_agreement, record.expected_coverage = 0.6, 0.95, 1.0
    record.input_sample = [{"category": "goto_red", "camera": "elsewhere", "agent": "agent0", "tags": [],
                            "scenario": "r0", "frames": [0.0], "text": [0.0]}]
    record.to_json(folder / "calibration.json")
    return {"root": root, "train": train, "version": v.root, "truth": truth, "model": folder}


def _version(world, where: Path):
    import shutil

    from autorater.data.suite import Suite

    shutil.copytree(world["version"], where)
    return Suite.load(where)


def _answer_queue(labels: Path, out: Path, truth: dict) -> Path:
    """The annotators answer every queued task with the truth."""
    queued = [t["data"]["continuation_id"] for t in json.loads((labels / "labelstudio" / "tasks.json").read_text())]
    out.write_text("".join(json.dumps({"continuation_id": c, "annotator_id": "h1", "outcome": truth[c]}) + "\n"
                           for c in queued))
    return out


def test_a_routed_stratum_learns_from_its_first_labels_and_its_challenger_is_certified_on_the_rest(world, tmp_path):
    labels = tmp_path / "labels"
    version = _version(world, tmp_path / "v")
    summary = label_suite(world["model"], version, labels, strata="camera", adapt=2, adapt_after=10, seed=3,
                          cache_dir=str(tmp_path / "cache"), adapt_epochs=30, replay=[str(world["train"].root)])
    plan = summary["certification"]["strata"]["all"]
    assert plan["status"] == "new" and plan["weights"] == pytest.approx([0.5, 0.25, 0.25])
    rows = read_lines(labels / "labels.jsonl")
    first_queue = json.loads((labels / "labelstudio" / "tasks.json").read_text())
    assert len(first_queue) == sum(r["audit"] for r in rows)  # only the audit is asked: the rest waits
    cert = {}
    store = f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}"
    with torch_threads(1):
        for k in range(8):
            ingest(labels, _answer_queue(labels, tmp_path / f"a{k}.jsonl", world["truth"]), append_to_suite=False)
            cert = certify(labels, tracking_uri=store)
            if cert["state"] == "final":
                break
    s = cert["strata"]["all"]
    assert s["state"] == "certified" and s["model"] == "challenger-1", format_certification(cert)
    assert [m["index"] for m in s["models"]] == [0, 1] and "verdict" in s["models"][1]
    # the challenger is a model folder that loads, with its lineage, ratings and the labels it learned from
    folder = labels / cert["challengers"][0]["folder"]
    assert {"config.json", "model.safetensors", "metadata.json", "lineage.json", "ratings.jsonl"} <= \
        {p.name for p in folder.iterdir()}
    Rater.load(folder)
    lineage = json.loads((folder / "lineage.json").read_text())
    assert lineage["parent"] == str(Path(world["model"]).resolve()) and lineage["learned"]
    assert read_metadata(folder)["version_challenger"]["learned"] == lineage["learned"]
    # labels a model learned from are never its evidence: its population had no human label when it was committed
    records = [json.loads(line) for line in (labels / "rounds.jsonl").read_text().splitlines()]
    committed = next(p for r in records if r["kind"] == "commit" for p in r["plans"])
    held = {c for v in lineage["design_sets"].values() for c in v}
    assert not (set(committed["order"]) | set(committed["rest"])) & (set(lineage["learned"]) | held)
    # every row says which model labelled it; the certified ones are the challenger's, right where it said
    after = read_lines(labels / "labels.jsonl")
    auto = [r for r in after if r["decision"] == "auto" and r.get("label_source") != "human"]
    assert len(auto) >= 40 and all(r["model"] == "challenger-1" for r in auto)
    assert sum(r["outcome"] == world["truth"][r["continuation_id"]] for r in auto) / len(auto) >= 0.9
    assert LabelsFolder(labels).read_summary()["auto"] == len(auto)
    assert "model 1 challenger-1: learned from" in format_certification(cert)
    # registered in MLflow as a version challenger, with its lineage
    import mlflow

    client = mlflow.tracking.MlflowClient(store)
    run = client.get_run(cert["challengers"][0]["mlflow_run"])
    assert cert["challengers"][0]["registered_version"] is not None
    assert run.data.tags["autorater.version_challenger"] == "true"
    assert run.data.tags["autorater.learned_labels"] == str(len(lineage["learned"]))


def test_certify_trains_no_challenger_when_told_not_to(world, tmp_path):
    labels = tmp_path / "labels"
    version = _version(world, tmp_path / "v")
    label_suite(world["model"], version, labels, strata="camera", adapt=1, adapt_after=10,
                cache_dir=str(tmp_path / "cache"), replay=[])
    cert = {}
    for k in range(6):  # the annotators disagree with the job's model everywhere: it is routed
        rows = {r["continuation_id"]: r for r in read_lines(labels / "labels.jsonl")}
        against = {c: "failure" if r.get("model_outcome") == "success" else "success" for c, r in rows.items()}
        ingest(labels, _answer_queue(labels, tmp_path / f"a{k}.jsonl", against), append_to_suite=False)
        cert = certify(labels, adapt=False)
        if cert["strata"]["all"]["state"] == "learning" and not json.loads(
                (labels / "labelstudio" / "tasks.json").read_text()):
            break
    assert cert["strata"]["all"]["state"] == "learning" and not cert["challengers"]
    assert not (labels / "models").exists()


def test_the_new_version_benchmark_runs_the_real_rounds_with_and_without_challengers(world, tmp_path):
    from benchmarks.new_version import run

    options = {"strata": "camera", "claim": "family", "adapt_after": 10, "adapt_epochs": 30,
               "replay": [str(world["train"].root)], "cache_dir": str(tmp_path / "cache")}
    with torch_threads(1):
        results = run(world["model"], None, {"v": world["version"]}, [0.6], 1, [0, 2], options, tmp_path / "out")
    off, on = results["versions"]["v@0.60/adapt-0"], results["versions"]["v@0.60/adapt-2"]
    assert off["humans_per_continuation"] == 1.0 and off["coverage"] == 0.0  # the job's model is routed
    assert on["humans_per_continuation"] < 0.7 and on["challenger_certified_share"] == 1.0
    assert on["held_share"] == 1.0 and on["adapt_cpu_s_mean"] > 0
    assert (tmp_path / "out" / "new-version.png").is_file() and (tmp_path / "out" / "new-version.json").is_file()
