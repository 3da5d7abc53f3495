"""A new version certified on its own audit: the procedure's promise holds on shifted versions (simulation), the
input check sees a moved camera or new words, and label -> ingest -> certify turns every provisional label into an
auto-label or a routed one, idempotently, with the leaderboard counting only certified and human labels."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from autorater.app import cli
from autorater.calibration import CalibrationRecord, audit_size, certify_stratum, mmd_test
from autorater.rater import Rater
from autorater.serving.analysis.leaderboard import leaderboard
from autorater.serving.labelling.certify import certify, input_drift, parse_strata, stratum_fields
from autorater.serving.labelling.folder import LabelsFolder
from autorater.serving.labelling.ingest import ingest
from autorater.serving.labelling.label import label_suite
from autorater.signature import frame_signature, text_signature
from serving_env import make_env, torch_threads
from tiny_suites import read_lines


def _simulated_version(rng, agreement: float, n: int, threshold: float = 0.9):
    """A stratum's provisional auto-labels: confidences above ``threshold``, each wrong with chance 1 - agreement."""
    conf = rng.uniform(threshold, 1.0, n)
    return conf, rng.random(n) > agreement


@pytest.mark.parametrize("target", [0.9, 0.95])
def test_the_promise_holds_over_audit_draws_on_shifted_and_alike_versions(target):
    # The references say 0.98 (300 auto-labelled, 6 wrong). Versions of 400 provisional labels: alike (0.98), a small
    # shift (target - 0.03), a new camera (0.6) and new tasks (0.8) the input check flagged (known=False: audited
    # alone) or missed (known=True: the known group's 20% audit, pooled with the references where they agree).
    rng = np.random.default_rng(0)
    reference = (300, 6)
    cases = [(0.98, True), (target - 0.03, True), (0.6, False), (0.8, False), (0.6, True), (0.8, True)]
    for agreement, known in cases:
        broken, certified = 0, 0
        for _ in range(200):
            conf, wrong = _simulated_version(rng, agreement, 400)
            n_audit = 80 if known else audit_size(target, 0.9)
            audited = rng.choice(400, n_audit, replace=False)
            v = certify_stratum(conf[audited], wrong[audited], 0.9, reference, known=known, target=target,
                                confidence=0.9)
            if v["certified"]:
                certified += 1
                auto = conf >= v["threshold"]
                broken += (1 - wrong[auto].mean()) < target - 0.02
        # the promise (within the benchmark's 0.02) fails in at most 10% of the audit draws
        assert broken <= 0.1 * 200, (agreement, known, broken)
        if agreement == 0.98:
            assert certified >= 0.8 * 200  # and a version like the references is certified


def test_an_audit_alone_certifies_a_good_new_stratum_and_refuses_a_bad_one():
    rng = np.random.default_rng(1)
    n = audit_size(0.9, 0.9)
    good = certify_stratum(np.full(n, 0.97), np.zeros(n, bool), 0.9, None, known=False, target=0.9, confidence=0.9)
    assert good["certified"] and good["evidence"] == "audit" and good["bound"] >= 0.9
    conf, wrong = _simulated_version(rng, 0.7, n)
    bad = certify_stratum(conf, wrong, 0.9, (300, 3), known=True, target=0.9, confidence=0.9)
    assert not bad["certified"] and bad["consistency_p"] < 0.1 and bad["audits_needed"] > 0


def test_the_input_check_sees_a_moved_camera_and_new_words_and_not_a_fresh_draw():
    rng = np.random.default_rng(0)

    def frames(shift):  # a bright object at a random place; the camera moves everything by ``shift`` pixels
        out = np.zeros((60, 3, 32, 32, 3), np.uint8)
        for i in range(60):
            y, x = rng.integers(4, 12, 2) + shift
            out[i, :, y:y + 8, x:x + 8] = 255
        return np.stack([frame_signature(f) for f in out])

    words = ["open the drawer", "close the drawer", "push the button"]
    ref = [{"frames": f.tolist(), "text": text_signature(words[i % 3]).tolist()} for i, f in enumerate(frames(0))]
    same = [{"frames": f.tolist(), "text": text_signature(words[i % 3]).tolist()} for i, f in enumerate(frames(0))]
    camera = [{"frames": f.tolist(), "text": text_signature(words[i % 3]).tolist()} for i, f in enumerate(frames(14))]
    tasks = [{"frames": f.tolist(), "text": text_signature("turn the faucet left").tolist()} for f in frames(0)]
    assert input_drift(ref, same)["pvalue"] > 0.05
    assert input_drift(ref, camera)["changed"] == ["frames"]
    assert input_drift(ref, tasks)["changed"] == ["text"]
    # the permutation test keeps its level: about 5% of null draws below 0.05
    null = [mmd_test(rng.normal(size=(30, 4)), rng.normal(size=(20, 4)), permutations=99, seed=s)["pvalue"]
            for s in range(40)]
    assert np.mean(np.array(null) < 0.05) <= 0.15


def test_strata_names_are_checked():
    assert parse_strata("category, camera,tag:room") == ("category", "camera", "tag:room")
    with pytest.raises(ValueError, match="unknown.*category"):
        parse_strata("category,colour")


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """A tiny model calibrated at 0.9 on this suite's own inputs (every stratum known), thresholds at 0.5 (it
    auto-labels everything provisionally), the references' evidence 300 auto-labelled with 3 wrong."""
    with torch_threads(1):
        env = make_env(tmp_path_factory.mktemp("certify"), scenarios=8, per_scenario=6)
        suite, model = env["suite"], env["model"]
        rows = list(Rater.load(model, calibrated=False).rate_suite(suite, signature=True))
        record = CalibrationRecord.from_json(model / "calibration.json")
        record.t_success, record.t_fail, record.target_agreement = 0.5, 0.5, 0.9
        record.expected_coverage, record.empirical_agreement, record.n_references = 1.0, 0.99, 300
        record.input_sample = [{**stratum_fields(suite, r["continuation_id"]), **r["inputs"]} for r in rows]
        record.to_json(model / "calibration.json")
        yield env


def _answer_audit(labels: Path, out: Path, bad_stratum: str) -> Path:
    """Humans agree with the model on every audited label but those of ``bad_stratum``."""
    rows = read_lines(labels / "labels.jsonl")
    flip = {"success": "failure", "failure": "success"}
    lines = [{"continuation_id": r["continuation_id"], "annotator_id": "h1",
              "outcome": flip[r["model_outcome"]] if r["stratum"] == bad_stratum else r["model_outcome"]}
             for r in rows if r["audit"]]
    out.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return out


def test_label_ingest_certify_certifies_agreeing_strata_and_routes_the_rest(env, tmp_path):
    labels = tmp_path / "labels"
    summary = label_suite(env["model"], env["suite"], labels, audit_share=0.3)
    rows = read_lines(labels / "labels.jsonl")
    assert summary["auto"] == 0 and summary["provisional"] == len(rows) and "provisional" in \
        summary["certification"]["promise"]
    strata = sorted({r["stratum"] for r in rows})
    assert len(strata) >= 2 and all(any(r["audit"] for r in rows if r["stratum"] == s) for s in strata)
    # before certify, the leaderboard counts no provisional label: every continuation waits
    assert leaderboard(labels)["waiting"] == len(rows)
    assert certify(labels)["state"] == "waiting"  # nothing answered yet: nothing decided
    assert {r["decision"] for r in read_lines(labels / "labels.jsonl")} == {"provisional"}

    ingest(labels, _answer_audit(labels, tmp_path / "answers.jsonl", strata[0]))
    cert = certify(labels)
    after = read_lines(labels / "labels.jsonl")
    assert {r["decision"] for r in after} <= {"auto", "human"}
    assert not cert["strata"][strata[0]]["certified"]
    assert all(cert["strata"][s]["certified"] and cert["strata"][s]["evidence"] == "pooled" for s in strata[1:])
    for r in after:
        assert r["decision"] == ("human" if r["stratum"] == strata[0] else "auto")
    # the newly routed ones (less those a human already labelled) are the new round's queue; the old one is kept
    tasks = json.loads((labels / "labelstudio" / "tasks.json").read_text())
    assert {t["data"]["continuation_id"] for t in tasks} == \
        {r["continuation_id"] for r in after if r["stratum"] == strata[0] and not r["audit"]}
    assert (labels / "labelstudio" / "tasks-round-1.json").is_file() and cert["round"] == 2
    # idempotent: again, nothing changes
    before = {p.name: p.read_bytes() for p in labels.rglob("*.json*") if p.is_file()}
    assert certify(labels) == cert
    assert {p.name: p.read_bytes() for p in labels.rglob("*.json*") if p.is_file()} == before
    board = leaderboard(labels)
    assert board["waiting"] == len(tasks)


def test_a_new_stratum_gets_an_audit_that_can_certify_it_alone_or_goes_to_humans(env, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(env["model"], model)
    record = CalibrationRecord.from_json(model / "calibration.json")
    first = record.input_sample[0]["category"]
    record.input_sample = [r for r in record.input_sample if r["category"] != first]  # a category the refs lack
    record.to_json(model / "calibration.json")
    summary = label_suite(model, env["suite"], tmp_path / "labels")
    plan = summary["certification"]["strata"][f"category={first}"]
    assert plan["status"] == "new"
    # 12 provisional labels cannot hold the 22 audits that certify 0.9 alone: the stratum goes to humans at once
    assert plan["provisional"] < audit_size(0.9, 0.9) and plan["routed"] == "too_few_to_certify"
    rows = [r for r in read_lines(tmp_path / "labels" / "labels.jsonl") if r["stratum"] == f"category={first}"]
    assert all(r["decision"] == "human" and r["reason"] == "too_few_to_certify" for r in rows)


def test_cli_certify_prints_the_promise_per_stratum(env, tmp_path, capsys):
    labels = tmp_path / "labels"
    assert cli.main(["label", "--model", str(env["model"]), "--suite", str(env["suite"].root), "--out", str(labels),
                     "--quiet"]) == 0
    assert "provisional" in capsys.readouterr().out
    ingest(labels, _answer_audit(labels, tmp_path / "answers.jsonl", "none"))
    assert cli.main(["certify", str(labels)]) == 0
    out = capsys.readouterr().out
    assert "certified on pooled evidence" in out and LabelsFolder(labels).read_summary()["provisional"] == 0
    assert cli.main(["label", "--model", str(env["model"]), "--suite", str(env["suite"].root), "--out",
                     str(tmp_path / "ref"), "--quiet", "--certify", "references"]) == 0
    capsys.readouterr()
    assert cli.main(["certify", str(tmp_path / "ref")]) == 2
    assert "without an audit" in capsys.readouterr().err
