"""A new version certified on its own audit, stratum by stratum, round by round.

The promise is simulated through the product's own decision functions (``strata.plan_audit``, ``rounds.decide``, as
``benchmarks/certify_sim.py`` runs them) and judged against the target itself: references at the margin, shifts that
hide, errors flat or among the confident, several strata at once, a bad stratum among good ones. CI runs 200 draws a
cell and asserts what 200 draws can hold: a failure count no binomial at the nominal 10% exceeds more than once in a
thousand runs (:func:`at_most_nominal`); the 1,000-draw cells are the benchmark's. The test martingale is checked
against an exact computation. Then the real procedure: label -> ingest -> certify in rounds, withdrawn certificates,
edited files, new agents.
"""

from __future__ import annotations

import datetime
import itertools
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from autorater.app import cli
from autorater.calibration import CalibrationRecord, log_evidence, mmd_test
from autorater.calibration.audit import bets
from autorater.data.suite import Annotation
from autorater.rater import Rater
from autorater.serving.analysis.leaderboard import leaderboard
from autorater.serving.labelling.certify import certify, format_certification
from autorater.serving.labelling.folder import LabelsFolder
from autorater.serving.labelling.ingest import ingest
from autorater.serving.labelling.label import label_suite
from autorater.serving.labelling.strata import input_drift, parse_strata, stratum_fields, stratum_key
from autorater.serving.labelstudio.formats import annotations_to_export
from autorater.signature import frame_signature, text_signature
from benchmarks.certify_sim import Stratum, run_cell
from serving_env import fresh_version, make_env, torch_threads
from tiny_suites import read_lines

DRAWS = 200


def at_most_nominal(rate: float, draws: int = DRAWS, nominal: float = 0.10) -> bool:
    """A failure rate measured on ``draws`` draws is consistent with at most ``nominal``: its count does not exceed
    the 99.9% quantile of Binomial(draws, nominal) (a procedure at the nominal rate fails this 1 run in 1,000)."""
    from scipy.stats import binom

    return round(rate * draws) <= binom.ppf(0.999, draws, nominal)


def test_the_test_martingale_keeps_its_level_exactly():
    # every answer sequence of length 14 at a rate exactly at the target, enumerated: the chance that the evidence ever
    # reaches 1 / alpha is at most alpha (Ville), whatever the prior the references give the bets
    target, alpha, n = 0.6, 0.1, 14
    for prior in ((0.95, 20.0), (0.6, 5.0)):
        crossed = 0.0
        for seq in itertools.product((0, 1), repeat=n):
            if log_evidence(seq, target, *prior).max() >= math.log(1 / alpha):
                crossed += target ** sum(seq) * (1 - target) ** (n - sum(seq))
        assert 0 < crossed <= alpha, prior
    # and the evidence is the product it claims to be
    seq = np.array([1, 1, 0, 1, 1, 1, 0, 1], dtype=float)
    lam = bets(seq, 0.6, 0.9, 10.0)
    assert np.allclose(np.exp(log_evidence(seq, 0.6, 0.9, 10.0)), np.cumprod(1 + lam * (seq - 0.6)))


@pytest.mark.parametrize("target", [0.9, 0.95])
@pytest.mark.parametrize("profile", ["flat", "calibrated", "confident"])
def test_a_stratum_just_under_the_target_is_certified_in_at_most_ten_percent_of_draws(target, profile):
    # references as Learn-then-Test leaves them (a few points above the target), a version 0.005 under it
    margin = target + 0.026 if target < 0.95 else target + 0.02
    for size in (400, 2000):
        r = run_cell({"s": Stratum(size, target - 0.005, profile)}, target, 0.1, "family", margin, DRAWS, seed=size)
        assert at_most_nominal(r["family_failure"]), (size, r["family_failure"])


def test_a_shift_that_hides_behind_optimistic_references_keeps_the_promise():
    r = run_cell({"s": Stratum(1000, 0.89)}, 0.9, 0.1, "family", 0.94, DRAWS, seed=1)
    assert at_most_nominal(r["family_failure"])


def test_several_strata_keep_the_stated_claim_across_them():
    spread = {f"s{i}": Stratum(300, float(0.9 + d)) for i, d in enumerate(np.linspace(-0.05, 0.05, 10))}
    family = run_cell(spread, 0.9, 0.1, "family", 0.926, DRAWS, seed=2)
    assert at_most_nominal(family["family_failure"])  # any certified stratum below the target, in all
    fcr = run_cell(spread, 0.9, 0.1, "fcr", 0.926, DRAWS, seed=3)
    assert fcr["false_certification_rate"] <= 0.10  # the expected share of certified strata below it (a mean)
    assert max(s["certified"] for s in fcr["strata"].values()) >= 0.3  # and the good ones are certified


@pytest.mark.parametrize("claim", ["family", "fcr"])
def test_a_bad_stratum_among_good_ones_is_certified_no_more_often_than_alone(claim):
    good = {f"good{i}": Stratum(200, 0.98) for i in range(4)}
    together = run_cell({**good, "bad": Stratum(400, 0.87)}, 0.9, 0.1, claim, 0.926, DRAWS, seed=4)
    alone = run_cell({"bad": Stratum(400, 0.87)}, 0.9, 0.1, claim, 0.926, DRAWS, seed=4)
    assert together["strata"]["bad"]["certified"] <= alone["strata"]["bad"]["certified"] + 0.03
    assert min(together["strata"][f"good{i}"]["certified"] for i in range(4)) >= 0.8


def test_a_version_like_its_references_costs_about_a_third_of_a_label_per_provisional_label():
    # 1,000 provisional labels at 0.94 (target 0.90), references alike: today's fixed audit spent 0.79 a label
    r = run_cell({"s": Stratum(1000, 0.94)}, 0.9, 0.1, "family", 0.94, 300, seed=5)
    assert r["strata"]["s"]["certified"] >= 0.95 and r["humans_per_provisional"] <= 0.35


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
    null = [mmd_test(rng.normal(size=(30, 4)), rng.normal(size=(20, 4)), permutations=99, seed=s)["pvalue"]
            for s in range(40)]
    assert np.mean(np.array(null) < 0.05) <= 0.15


def test_strata_names_are_checked_and_keys_never_collide():
    assert parse_strata("category, camera,tag:room") == ("category", "camera", "tag:room")
    assert parse_strata("none") == ()
    with pytest.raises(ValueError, match="unknown.*colour"):
        parse_strata("category,colour")
    a = stratum_key({"category": "go|camera=x", "camera": None, "tags": []}, ("category", "camera"))
    b = stratum_key({"category": "go", "camera": "x", "tags": []}, ("category", "camera"))
    assert a != b
    new = stratum_key({"category": "go", "agent": "mia"}, ("category", "new-agent"), known_agents={"bob"})
    old = stratum_key({"category": "go", "agent": "bob"}, ("category", "new-agent"), known_agents={"bob"})
    assert new == "category=go|new-agent=mia" and old == "category=go"


# -- the real procedure ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """A tiny model calibrated at a 0.6 target on this suite's own inputs (every stratum known), thresholds at 0.5
    (every continuation provisional), the references' agreement 0.95: audits of a few labels can certify."""
    with torch_threads(1):
        env = make_env(tmp_path_factory.mktemp("certify"), scenarios=8, per_scenario=6)
        suite, model = env["suite"], env["model"]
        rows = list(Rater.load(model, calibrated=False).rate_suite(suite, signature=True))
        record = CalibrationRecord.from_json(model / "calibration.json")
        record.t_success, record.t_fail, record.target_agreement = 0.5, 0.5, 0.6
        record.expected_coverage, record.empirical_agreement, record.n_references = 1.0, 0.95, 300
        record.input_sample = [{**stratum_fields(suite, r["continuation_id"]), **r["inputs"]} for r in rows]
        record.to_json(model / "calibration.json")
        yield env


def _answer(labels: Path, out: Path, wrong_in: str = "none", every: bool = False) -> Path:
    """Humans answer every audit task (``every``: every queued task), agreeing with the model except in the stratum
    ``wrong_in``."""
    rows = read_lines(labels / "labels.jsonl")
    flip = {"success": "failure", "failure": "success"}
    queued = {t["data"]["continuation_id"] for t in json.loads((labels / "labelstudio" / "tasks.json").read_text())}
    lines = [{"continuation_id": r["continuation_id"], "annotator_id": "h1",
              "outcome": flip[r["model_outcome"]] if r.get("stratum") == wrong_in else r["model_outcome"]}
             for r in rows if r["continuation_id"] in queued and (every or r["audit"])]
    out.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return out


def _rounds(labels: Path, tmp: Path, wrong_in: str = "none", limit: int = 8) -> dict:
    cert = {}
    for k in range(limit):
        ingest(labels, _answer(labels, tmp / f"answers-{k}.jsonl", wrong_in), append_to_suite=False)
        cert = certify(labels)
        if cert["state"] == "final":
            break
    return cert


def test_rounds_certify_an_agreeing_stratum_and_route_a_disagreeing_one(env, tmp_path):
    labels = tmp_path / "labels"
    version = fresh_version(env, tmp_path / "v")
    summary = label_suite(env["model"], version, labels, strata="category", adapt=0)
    rows = read_lines(labels / "labels.jsonl")
    strata = sorted({r["stratum"] for r in rows if "stratum" in r})
    labelled = {a.continuation_id for a in version.annotations}  # its references: the annotator pool labelled them
    assert labelled and summary["auto"] == 0 and len(strata) >= 2
    assert summary["provisional"] == sum(r.get("audit_rank") is not None for r in rows) > 0
    assert not any(r.get("audit_rank") is not None for r in rows if r["continuation_id"] in labelled)
    assert all(r["decision"] == "human" and r["reason"] == "human_labelled" and not r["audit"]
               for r in rows if r["continuation_id"] in labelled)
    assert "provisional" in summary["certification"]["promise"]
    audited = {k for k, p in summary["certification"]["strata"].items() if p["design"]}
    assert audited and all(any(r["audit"] for r in rows if r.get("stratum") == s) for s in audited)
    assert leaderboard(labels)["waiting"] == len(rows) - len(labelled)  # no provisional label counts before certify
    assert certify(labels)["state"] == "waiting"  # nothing answered: nothing decided
    assert {r["decision"] for r in read_lines(labels / "labels.jsonl") if r.get("audit_rank") is not None} == \
        {"provisional"}

    cert = _rounds(labels, tmp_path, wrong_in=strata[0])
    after = read_lines(labels / "labels.jsonl")
    assert cert["state"] == "final" and cert["claim"] == "family"
    assert strata[0] in audited and cert["strata"][strata[0]]["state"] == "routed"
    assert all(cert["strata"][s]["state"] == "certified" for s in audited - {strata[0]})
    for r in after:
        if r.get("audit_rank") is not None:
            assert r["decision"] == ("human" if r["stratum"] == strata[0] or r.get("label_source") == "human"
                                     and r["decision"] != "auto" else "auto")
        if r["decision"] == "auto" and r.get("label_source") != "human":
            assert r["label_source"] == "model" and r["outcome"] == r["model_outcome"]  # final as certify writes it
    summary = LabelsFolder(labels).read_summary()  # auto counts the model's labels only, never an answered audit
    assert summary["auto"] == sum(r["decision"] == "auto" and r.get("label_source") != "human" for r in after)
    # the routed stratum's continuations not yet answered are the new round's queue
    tasks = json.loads((labels / "labelstudio" / "tasks.json").read_text())
    assert {t["data"]["continuation_id"] for t in tasks} == \
        {r["continuation_id"] for r in after if r["decision"] == "human" and r.get("label_source") != "human"}
    # idempotent: again, nothing changes
    before = {p.name: p.read_bytes() for p in labels.rglob("*.json*") if p.is_file()}
    assert certify(labels) == cert
    assert {p.name: p.read_bytes() for p in labels.rglob("*.json*") if p.is_file()} == before
    assert "agree with the annotators at a rate >= 0.6" in cert["promise"] and "family-wise" in cert["promise"]


def _export(labels: Path, tasks: list[dict], flip: bool, updated_at: str | None = None) -> list[dict]:
    """A Label Studio export of ``tasks`` answered by one annotator, agreeing with the model (or not: ``flip``)."""
    rows = {r["continuation_id"]: r for r in read_lines(labels / "labels.jsonl")}
    other = {"success": "failure", "failure": "success"}
    answers = [Annotation(t["data"]["continuation_id"], "h1",
                          other[m] if flip else m, marker_s=min(0.5, rows[t["data"]["continuation_id"]]["duration_s"]))
               for t in tasks for m in [rows[t["data"]["continuation_id"]]["model_outcome"]]]
    export = annotations_to_export(tasks, answers, start_id=1)
    for task in export:
        for ann in task["annotations"]:
            ann["updated_at"] = updated_at or ann["updated_at"]
    return export


def test_a_certificate_is_withdrawn_when_its_audit_answers_are_corrected_and_the_withdrawal_is_kept(env, tmp_path):
    labels = tmp_path / "labels"
    label_suite(env["model"], fresh_version(env, tmp_path / "v"), labels, strata="none", adapt=0)
    tasks = json.loads((labels / "labelstudio" / "tasks.json").read_text())
    (tmp_path / "round1.json").write_text(json.dumps(_export(labels, tasks, flip=False)))
    ingest(labels, tmp_path / "round1.json")
    assert certify(labels)["strata"]["all"]["state"] == "certified"
    assert any(r["decision"] == "auto" for r in read_lines(labels / "labels.jsonl"))
    # the annotators correct every answer in Label Studio: the same annotations, a newer updated_at, the other outcome
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    (tmp_path / "fix.json").write_text(json.dumps(_export(labels, tasks, flip=True, updated_at=now)))
    ingest(labels, tmp_path / "fix.json")
    cert = certify(labels)
    rows = read_lines(labels / "labels.jsonl")
    assert [r["stratum"] for r in cert["revoked"]] == ["all"] and cert["revoked"][0]["at"]
    assert cert["strata"]["all"]["state"] in ("routed", "learning")
    assert cert["strata"]["all"]["reason"] == "revoked" and "WITHDRAWN" in format_certification(cert)
    assert not any(r["decision"] == "auto" for r in rows)
    summary = LabelsFolder(labels).read_summary()
    assert summary["auto"] == 0 and "no stratum certified" in summary["certification"]["promise"]
    queued = {t["data"]["continuation_id"] for t in json.loads((labels / "labelstudio" / "tasks.json").read_text())}
    assert queued == {r["continuation_id"] for r in rows if r.get("label_source") != "human"}
    again = certify(labels)  # nothing new: the withdrawal stays, with its date and reason
    assert again["strata"]["all"]["reason"] == "revoked" and again["revoked"] == cert["revoked"]


def test_an_answer_that_changes_to_an_agreement_never_earns_a_certificate(env, tmp_path):
    # every first answer disagrees; the team re-asks them and the new answers agree: the first answer stands
    labels = tmp_path / "labels"
    label_suite(env["model"], fresh_version(env, tmp_path / "v"), labels, strata="none", adapt=0)
    tasks = json.loads((labels / "labelstudio" / "tasks.json").read_text())
    (tmp_path / "first.json").write_text(json.dumps(_export(labels, tasks, flip=True)))
    ingest(labels, tmp_path / "first.json")
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    (tmp_path / "again.json").write_text(json.dumps(_export(labels, tasks, flip=False, updated_at=now)))
    ingest(labels, tmp_path / "again.json")  # re-asked before certify ever ran: the history still knows the first
    cert = certify(labels)
    assert cert["strata"]["all"]["state"] != "certified"
    assert cert["strata"]["all"]["estimate"] == 0.0


def test_labels_jsonl_and_summary_are_derived_so_editing_them_certifies_nothing(env, tmp_path):
    labels = tmp_path / "labels"
    label_suite(env["model"], fresh_version(env, tmp_path / "v"), labels, strata="category", adapt=0)
    rows = read_lines(labels / "labels.jsonl")
    for r in rows:  # forged: every row auto, human answers that agree written in, audit ranks renumbered
        r.update(decision="auto", label_source="human", human_outcome=r.get("model_outcome"), audit_rank=0)
    (labels / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = json.loads((labels / "summary.json").read_text())
    summary["certification"]["strata"] = {k: {**v, "design": {**(v["design"] or {}), "alpha": 1}}
                                          for k, v in summary["certification"]["strata"].items()}
    (labels / "summary.json").write_text(json.dumps(summary))
    cert = certify(labels)
    assert not any(s["state"] == "certified" for s in cert["strata"].values())
    assert not any(r["decision"] == "auto" for r in read_lines(labels / "labels.jsonl"))


def test_a_version_of_new_agents_is_audited_as_new(env, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(env["model"], model)
    record = CalibrationRecord.from_json(model / "calibration.json")
    agents = sorted({r["agent"] for r in record.input_sample})
    record.input_sample = [r for r in record.input_sample if r["agent"] == agents[0]]  # the references saw one agent
    record.to_json(model / "calibration.json")
    summary = label_suite(model, fresh_version(env, tmp_path / "v"), tmp_path / "labels", strata="new-agent")
    keys = set(summary["certification"]["strata"])
    assert keys == {"all"} | {f"new-agent={a}" for a in agents[1:]}
    assert all(summary["certification"]["strata"][f"new-agent={a}"]["status"] == "new" for a in agents[1:])
    # the new agents' strata give their first model half of their budget, the known one nine tenths: challengers
    # may follow (adaptation is on by default)
    assert summary["certification"]["strata"]["all"]["weights"][0] == 0.9
    assert all(summary["certification"]["strata"][f"new-agent={a}"]["weights"][0] == 0.5 for a in agents[1:])


def test_cli_certify_prints_the_promise_and_the_claim(env, tmp_path, capsys):
    labels = tmp_path / "labels"
    version = fresh_version(env, tmp_path / "v")
    assert cli.main(["label", "--model", str(env["model"]), "--suite", str(version.root), "--out", str(labels),
                     "--quiet", "--strata", "none", "--claim", "fcr", "--adapt", "0"]) == 0
    assert "provisional" in capsys.readouterr().out
    for k in range(6):
        ingest(labels, _answer(labels, tmp_path / f"a{k}.jsonl"), append_to_suite=False)
        assert cli.main(["certify", str(labels)]) == 0
        if LabelsFolder(labels).read_summary()["certification"]["state"] == "final":
            break
    out = capsys.readouterr().out
    assert "claim fcr" in out and "false certification rate" in out and "certified (" in out
    assert LabelsFolder(labels).read_summary()["provisional"] == 0
    assert cli.main(["label", "--model", str(env["model"]), "--suite", str(version.root), "--out",
                     str(tmp_path / "ref"), "--quiet", "--certify", "references"]) == 0
    capsys.readouterr()
    assert cli.main(["certify", str(tmp_path / "ref")]) == 2
    assert "without an audit" in capsys.readouterr().err
