"""What certify reads is the product's: a certificate nobody can edit into being, a run killed anywhere finishes the
same, a version labelled again keeps its first verdict, every job its own audit order (issue 65).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from autorater.app import cli
from autorater.calibration import CalibrationRecord
from autorater.data import files
from autorater.rater import Rater
from autorater.serving.labelling import folder as folder_module
from autorater.serving.labelling.certify import certify
from autorater.serving.labelling.folder import LabelJobError, LabelsFileError, LabelsFolder, seal
from autorater.serving.labelling.ingest import ingest
from autorater.serving.labelling.label import label_suite
from autorater.serving.labelling.ledger import VersionBoundError
from autorater.serving.labelling.strata import stratum_fields
from serving_env import fresh_version, make_env, torch_threads
from tiny_suites import read_lines


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """test_certify's world: a tiny model calibrated at a 0.6 target, every continuation provisional."""
    with torch_threads(1):
        env = make_env(tmp_path_factory.mktemp("integrity"), scenarios=8, per_scenario=6)
        suite, model = env["suite"], env["model"]
        rows = list(Rater.load(model, calibrated=False).rate_suite(suite, signature=True))
        record = CalibrationRecord.from_json(model / "calibration.json")
        record.t_success, record.t_fail, record.target_agreement = 0.5, 0.5, 0.6
        record.expected_coverage, record.empirical_agreement, record.n_references = 1.0, 0.95, 300
        record.input_sample = [{**stratum_fields(suite, r["continuation_id"]), **r["inputs"]} for r in rows]
        record.to_json(model / "calibration.json")
        yield env


def _agreeing_answers(labels: Path, out: Path) -> Path:
    rows = {r["continuation_id"]: r for r in read_lines(labels / "labels.jsonl")}
    queued = [t["data"]["continuation_id"] for t in json.loads((labels / "labelstudio" / "tasks.json").read_text())]
    out.write_text("".join(json.dumps({"continuation_id": c, "annotator_id": "h1",
                                       "outcome": rows[c]["model_outcome"]}) + "\n"
                           for c in queued if "model_outcome" in rows[c]))
    return out


def _labelled(env, tmp_path, name="labels", **kwargs) -> tuple[Path, object]:
    version = kwargs.pop("version", None) or fresh_version(env, tmp_path / f"v-{name}")
    labels = tmp_path / name
    label_suite(env["model"], version, labels, strata="none", adapt=0, **kwargs)
    return labels, version


def _reseal(labels: Path, change) -> None:
    """Edit plan.json as an attacker who also knows the seal would: change it, seal it again."""
    plan = json.loads((labels / "plan.json").read_text())
    body = {k: v for k, v in plan.items() if k not in ("format", "sha256")}
    change(body)
    job = json.loads((labels / "job.json").read_text())
    (labels / "plan.json").write_text(json.dumps({**body, "format": plan["format"], "sha256": seal(body, job)}))


def test_an_edited_plan_is_refused_sealed_or_not(env, tmp_path):
    labels, _ = _labelled(env, tmp_path)
    original = (labels / "plan.json").read_text()
    edited = json.loads(original)
    edited["strata"]["all"]["design"]["alpha"] = 1  # every audit would certify at once
    (labels / "plan.json").write_text(json.dumps(edited))
    with pytest.raises(LabelsFileError, match="does not match its seal"):
        certify(labels)
    for field, change in {"alpha": lambda b: b["strata"]["all"]["design"].update(alpha=1.0),
                          "target": lambda b: b.update(target=0.5),
                          "claim": lambda b: b.update(claim="fcr"),
                          "model": lambda b: b["strata"]["all"]["model"]["order"].reverse()}.items():
        (labels / "plan.json").write_text(original)
        _reseal(labels, change)
        with pytest.raises(LabelsFileError, match=f"'{'design' if field == 'alpha' else field}'"):
            certify(labels)
    (labels / "plan.json").write_text(original)
    assert certify(labels)["state"] == "waiting"


def test_an_edited_or_dropped_journal_record_is_refused_naming_its_line(env, tmp_path):
    labels, _ = _labelled(env, tmp_path)
    certify(labels)  # nothing answered yet: waiting
    ingest(labels, _agreeing_answers(labels, tmp_path / "a.jsonl"), append_to_suite=False)
    certify(labels)
    lines = (labels / "rounds.jsonl").read_text().splitlines()
    assert len(lines) >= 2
    record = json.loads(lines[1])
    record["states"]["all"]["verdict"]["threshold"] = 1.0  # a weaker test written in by hand
    (labels / "rounds.jsonl").write_text("\n".join([lines[0], json.dumps(record, sort_keys=True), *lines[2:]]) + "\n")
    with pytest.raises(LabelsFileError, match="rounds.jsonl:2.*hash chain"):
        certify(labels)
    (labels / "rounds.jsonl").write_text("\n".join(lines[1:]) + "\n")  # the first record dropped
    with pytest.raises(LabelsFileError, match="rounds.jsonl:1.*hash chain"):
        certify(labels)


def _outputs(labels: Path) -> dict:
    """Every file of a labels folder, the journal's records without their dates (and the chain over them)."""
    out = {p.relative_to(labels).as_posix(): p.read_bytes() for p in sorted(labels.rglob("*"))
           if p.is_file() and p.name != ".lock"}
    if "rounds.jsonl" in out:
        out["rounds.jsonl"] = [{k: v for k, v in json.loads(line).items() if k not in ("at", "chain")}
                               for line in out["rounds.jsonl"].decode().splitlines()]
    return out


def test_certify_killed_at_any_write_finishes_identically(env, tmp_path, monkeypatch):
    labels, _ = _labelled(env, tmp_path)
    ingest(labels, _agreeing_answers(labels, tmp_path / "a.jsonl"), append_to_suite=False)
    clean = tmp_path / "clean"
    shutil.copytree(labels, clean)
    certify(clean)
    expected = _outputs(clean)
    writes = {"atomic": files.write_text_atomic, "append": files.append_line_durably}
    for point in range(12):
        trial = tmp_path / f"kill-{point}"
        shutil.copytree(labels, trial)
        calls = {"n": 0}

        def dying(kind):
            def write(*args, **kwargs):
                calls["n"] += 1
                if calls["n"] == point + 1:
                    raise KeyboardInterrupt(f"killed at write {point}")
                return writes[kind](*args, **kwargs)
            return write

        for module in (folder_module, files):
            monkeypatch.setattr(module, "write_text_atomic", dying("atomic"), raising=False)
            monkeypatch.setattr(module, "append_line_durably", dying("append"), raising=False)
        try:
            certify(trial)
            finished = True
        except KeyboardInterrupt:
            finished = False
        monkeypatch.undo()
        certify(trial)
        got = {k.replace(f"kill-{point}", "clean"): v for k, v in _outputs(trial).items()}
        assert got == expected, point
        if finished:
            break
    assert point >= 3  # the run writes at least its journal, the queue, the labels and the summary


def test_a_version_whose_first_job_saw_answers_is_not_labelled_again(env, tmp_path, capsys):
    labels, version = _labelled(env, tmp_path)
    ingest(labels, _agreeing_answers(labels, tmp_path / "a.jsonl"))  # into the suite too, as by default
    certify(labels)
    with pytest.raises(VersionBoundError, match="already decided by the labelling job in .*labels"):
        label_suite(env["model"], version, tmp_path / "again", strata="none", adapt=0)
    assert cli.main(["label", "--model", str(env["model"]), "--suite", str(version.root), "--out",
                     str(tmp_path / "again-cli"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "verdicts bind" in err[0] and "autorater certify" in err[0]


def test_a_job_that_saw_no_answer_is_superseded_and_its_folder_refuses_to_certify(env, tmp_path):
    first, version = _labelled(env, tmp_path, "first")
    second, _ = _labelled(env, tmp_path, "second", version=version)
    with pytest.raises(LabelJobError, match="superseded by the job in .*second"):
        certify(first)
    assert certify(second)["state"] == "waiting"


def test_a_grown_version_leaves_the_first_jobs_continuations_to_their_verdict(env, tmp_path):
    labels, version = _labelled(env, tmp_path)
    ingest(labels, _agreeing_answers(labels, tmp_path / "a.jsonl"), append_to_suite=False)
    certify(labels)
    first_ids = set(version.continuation_ids())
    grown = fresh_version(env, tmp_path / "grown")  # the same continuations...
    shutil.copy(version.root / "labelling_jobs.jsonl", grown.root / "labelling_jobs.jsonl")  # ...and their ledger
    extra = tmp_path / "extra"
    shutil.copytree(env["suite"].root, extra)
    from autorater.data.suite import Suite

    base = Suite.load(extra)
    more = [c for c in base.continuations][:6]
    for c in more:  # six continuations new to the grown version (same videos, new ids)
        c.continuation_id = "new-" + c.continuation_id
    grown = Suite(grown.root, grown.info, grown.scenarios, grown.continuations + more, grown.annotations,
                  grown.references)
    grown.write(grown.root)
    grown = Suite.load(grown.root)
    summary = label_suite(env["model"], grown, tmp_path / "grown-labels", strata="none", adapt=0)
    rows = read_lines(tmp_path / "grown-labels" / "labels.jsonl")
    assert all(r["reason"] == "bound" for r in rows if r["continuation_id"] in first_ids)
    assert summary["provisional"] <= len(more)
    assert {r["continuation_id"] for r in rows if r.get("audit_rank") is not None} <= {c.continuation_id
                                                                                       for c in more}


def test_every_job_draws_its_own_audit_order_and_a_resumed_job_keeps_it(env, tmp_path):
    big, model = env, env["model"]
    orders, seeds = [], []
    for k in range(2):
        labels = tmp_path / f"labels{k}"
        label_suite(model, fresh_version(big, tmp_path / f"v{k}"), labels, strata="none", adapt=0)
        plan = json.loads((labels / "plan.json").read_text())
        orders.append(plan["strata"]["all"]["model"]["order"])
        seeds.append(json.loads((labels / "job.json").read_text())["seed"])
    assert seeds[0] != seeds[1] and orders[0] != orders[1] and sorted(orders[0]) == sorted(orders[1])
    # a given seed reproduces a job; resuming keeps the folder's own seed
    again = tmp_path / "again"
    label_suite(model, fresh_version(big, tmp_path / "v-again"), again, strata="none", adapt=0, seed=seeds[0])
    assert json.loads((again / "plan.json").read_text())["strata"]["all"]["model"]["order"] == orders[0]
    job = json.loads((tmp_path / "labels1" / "job.json").read_text())
    from autorater.data.suite import Suite

    label_suite(model, Suite.load(job["suite"]), tmp_path / "labels1", strata="none", adapt=0, resume=True)
    assert json.loads((tmp_path / "labels1" / "job.json").read_text())["seed"] == job["seed"]


def test_continuations_whose_videos_the_model_was_trained_on_are_never_audited(env, tmp_path):
    version = fresh_version(env, tmp_path / "v")
    replay = tmp_path / "train"
    shutil.copytree(version.root, replay)  # the model's training suite holds a third of the version's videos
    from autorater.data.suite import Suite

    train = Suite.load(replay)
    keep = set(train.continuation_ids()[: len(train.continuations) // 3])
    Suite(train.root, train.info, train.scenarios, [c for c in train.continuations if c.continuation_id in keep],
          [], []).write(train.root)
    labels = tmp_path / "labels"
    label_suite(env["model"], version, labels, strata="none", adapt=0, replay=[str(replay)])
    rows = read_lines(labels / "labels.jsonl")
    learned = {r["continuation_id"] for r in rows if r.get("reason") == "learned"}
    assert learned == keep and not any(r.get("audit_rank") is not None for r in rows if r["continuation_id"] in keep)
    summary = LabelsFolder(labels).read_summary()
    assert summary["reasons"]["learned"] == len(keep)


def test_the_queue_is_rewritten_every_round_even_when_nothing_was_auto_labelled(env, tmp_path):
    # a model without calibration labels nothing alone: every continuation is queued once, and once answered the queue
    # empties (the demo's smoke run once answered the same queue fifteen times)
    model = tmp_path / "model"
    shutil.copytree(env["model"], model)
    (model / "calibration.json").unlink()
    labels, _ = _labelled(env, tmp_path, version=fresh_version(env, tmp_path / "v"))
    shutil.rmtree(labels)
    label_suite(model, fresh_version(env, tmp_path / "v2"), labels, strata="none", adapt=0)
    queued = json.loads((labels / "labelstudio" / "tasks.json").read_text())
    assert queued
    rows = {r["continuation_id"]: r for r in read_lines(labels / "labels.jsonl")}
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps({"continuation_id": t["data"]["continuation_id"], "annotator_id": "h1",
                                           "outcome": "success"}) + "\n" for t in queued))
    ingest(labels, answers, append_to_suite=False)
    assert certify(labels)["state"] == "none"
    assert json.loads((labels / "labelstudio" / "tasks.json").read_text()) == []
    summary = LabelsFolder(labels).read_summary()
    assert summary["auto"] == 0 and summary["human_labelled"] == len(rows)
