"""Property-based fuzzing (Hypothesis) of ``/predict``, ``/v1/rate``, ``/webhook``, ``ingest`` and ``metadata.json``.

Each example is a valid request with one to three of its nodes replaced by arbitrary JSON (huge integers, NaN,
nested containers, odd strings, lone surrogates such as ``"\\ud800"``, times whose UTC conversion leaves the years
1..9999) or deleted, or arbitrary JSON outright. Properties: no answer of 500 (every answer is JSON in UTF-8), and a
refusal (4xx) changes nothing in the pool suite's folder; ``ingest`` refuses an export with a ValueError that changes
nothing, or takes what is valid, and the suite always still loads; a tampered ``metadata.json`` is refused with a
ValueError naming it, or gives a printable model name. Bounded for CI: ``derandomize`` (the same examples every
run), no example database, ``EXAMPLES`` in all (about 12 s on 2 cores).
"""

from __future__ import annotations

import json
import math
import shutil
from collections import Counter

import pytest
import torch
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autorater.data.suite import Suite
from autorater.serving.service.app import create_app
from hardening_env import make_hardening_env, task_of, webhook_payload
from tiny_suites import new_version

EXAMPLES = {"predict": 150, "rate": 200, "webhook": 400, "ingest": 40, "metadata": 150}  # ingest: each kind of file
SETTINGS = dict(deadline=None, derandomize=True, database=None, print_blob=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])

NUMBERS = (st.integers() | st.sampled_from([10 ** 400, -(10 ** 400), 2 ** 63, 10 ** 18, 0, -1]) | st.floats()
           | st.booleans() | st.sampled_from(["5", "1e999", "", None]))
ODD_TEXT = ["\ud800", "a\udfffb", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-00:01"]  # issue 44's 500s
LEAVES = (st.none() | NUMBERS | st.text(max_size=12)
          | st.sampled_from(["", "c1", "suite/videos/c1.mp4", "../x", "\u0000", "NaN", "9999-12-31T23:59:59Z",
                             "2026-11-23T12:00:00", *ODD_TEXT]))
SEEN: Counter = Counter()  # (path, status): what the examples reached, to check both sides were exercised
KEYS = st.text(max_size=6) | st.sampled_from(ODD_TEXT[:2])
JSON = st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
                    max_leaves=8)


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, prefix + (i,))


def _renumber(obj, draw):
    """Every number of ``obj`` replaced by a drawn one (huge integers, NaN, booleans, numeric strings...)."""
    if isinstance(obj, dict):
        return {k: _renumber(v, draw) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_renumber(v, draw) for v in obj]
    if isinstance(obj, (int, float)) and not isinstance(obj, bool):
        return draw(NUMBERS) if draw(st.booleans()) else obj
    return obj


@st.composite
def mutated(draw, base):
    """``base`` with one to three nodes replaced by arbitrary JSON or deleted; or its numbers replaced; or, now and
    then, arbitrary JSON."""
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(JSON)
    if kind <= 3:
        return _renumber(base, draw)
    obj = json.loads(json.dumps(base))
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(obj) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = obj
        for step in path[:-1]:
            parent = parent[step]
        if isinstance(parent, dict) and draw(st.booleans()) and draw(st.booleans()):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(JSON)
    return obj


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    torch.set_num_threads(1)
    env = make_hardening_env(tmp_path_factory.mktemp("hypothesis"))
    media = env["root"] / "pool-media"
    shutil.copytree(env["media"], media)
    suite = Suite.load(media / "suite")
    client = TestClient(create_app(env["model"], media, suite=suite.root, timeout_s=30),
                        raise_server_exceptions=False)
    return {"env": env, "suite": suite, "client": client}


def _folder_state(root) -> dict:
    return {p.name: p.read_bytes() for p in sorted(root.iterdir()) if p.is_file() and p.name != ".lock"}


def _post(world, path: str, obj):
    before = _folder_state(world["suite"].root)
    body = json.dumps(obj, allow_nan=True)
    r = world["client"].post(path, content=body, headers={"content-type": "application/json"})
    assert r.status_code < 500, (path, r.status_code, r.text[:300], body[:300])
    json.loads(r.content.decode("utf-8"))  # strict UTF-8
    SEEN[path, r.status_code] += 1
    if r.status_code >= 400:
        assert _folder_state(world["suite"].root) == before, (path, r.status_code, body[:300])
    return r


def _rate_base(world) -> dict:
    return {"video": "suite/videos/c1.mp4", "instruction": "go to the red ball", "takeover_s": 0.25}


def test_rate_never_answers_500(world):
    @settings(max_examples=EXAMPLES["rate"], **SETTINGS)
    @given(mutated(_rate_base(world)))
    def check(obj):
        _post(world, "/v1/rate", obj)
    check()


def test_predict_never_answers_500(world):
    base = {"tasks": [task_of(world["suite"], "c1", 1), task_of(world["suite"], "c2", 2)], "project": "1.1"}

    @settings(max_examples=EXAMPLES["predict"], **SETTINGS)
    @given(mutated(base))
    def check(obj):
        _post(world, "/predict", obj)
    check()
    assert SEEN["/predict", 200] >= 3 and SEEN["/predict", 422] >= 3, SEEN


def test_webhook_never_answers_500_and_a_refusal_changes_nothing(world):
    bases = [webhook_payload(world["suite"], cid, outcome, 0.5, f"h{i}", ann_id=7000 + i, action=action)
             for i, (cid, outcome, action) in enumerate([("c1", "success", "ANNOTATION_CREATED"),
                                                         ("c2", "failure", "ANNOTATION_UPDATED")])]
    bases.append({"action": "ANNOTATIONS_DELETED", "annotations": [{"id": 7001}, {"id": 8000}]})

    @settings(max_examples=EXAMPLES["webhook"], **SETTINGS)
    @given(st.sampled_from(range(len(bases))).flatmap(lambda i: mutated(bases[i])))
    def check(obj):
        _post(world, "/webhook", obj)
    check()
    assert SEEN["/webhook", 201] >= 5 and SEEN["/webhook", 422] >= 5, SEEN  # accepted and refused, both
    after = Suite.load(world["suite"].root)  # the pool suite still loads, every marker a time inside its video
    assert all(a.marker_s is None or (math.isfinite(a.marker_s) and a.marker_s >= 0) for a in after.annotations)


@pytest.mark.parametrize("kind", ["labelstudio", "jsonl"])
def test_ingest_takes_what_is_valid_and_refuses_the_rest_without_a_traceback(world, tmp_path_factory, kind):
    from autorater.data.suite import Annotation
    from autorater.serving.labelling.folder import LabelsFolder
    from autorater.serving.labelling.ingest import ingest
    from autorater.serving.labelling.label import label_suite
    from autorater.serving.labelstudio.formats import annotations_to_export

    root = tmp_path_factory.mktemp(f"ingest-fuzz-{kind}")
    shutil.copytree(world["env"]["suite"].root, root / "suite")
    suite = new_version(root / "suite")  # a version arrives unlabelled: its continuations are queued
    label_suite(world["env"]["model"], suite, root / "labels", audit_share=1.0)
    folder = LabelsFolder(root / "labels")
    answers = [Annotation("c1", "h7", "success", 0.5), Annotation("c2", "h8", "failure", 0.25)]
    if kind == "labelstudio":
        base = annotations_to_export(folder.read_tasks(), answers)
    else:  # a SUITE_FORMAT annotations.jsonl, one row a line
        base = [{"continuation_id": a.continuation_id, "annotator_id": a.annotator_id, "outcome": a.outcome,
                 "marker_s": a.marker_s, "ls_annotation_id": 40 + i, "created_at": "2026-11-23T12:00:00Z"}
                for i, a in enumerate(answers)]

    @settings(max_examples=EXAMPLES["ingest"], **SETTINGS)
    @given(mutated(base))
    def check(obj):
        path = root / ("export.json" if kind == "labelstudio" else "annotations.jsonl")
        rows = obj if kind == "jsonl" and isinstance(obj, list) else [obj]
        path.write_text(json.dumps(obj, allow_nan=True) if kind == "labelstudio" else
                        "".join(json.dumps(r, allow_nan=True) + "\n" for r in rows))
        before = (_folder_state(suite.root), _folder_state(folder.root))
        try:
            result = ingest(folder.root, path)
        except ValueError:  # the whole export refused, with a message: nothing changed
            assert (_folder_state(suite.root), _folder_state(folder.root)) == before
            return
        SEEN["ingest", kind, result["accepted"] > 0] += 1
        Suite.load(suite.root)
    check()
    assert SEEN["ingest", kind, True] >= 1, SEEN


def test_a_tampered_metadata_json_is_refused_naming_it_or_gives_a_printable_name(world, tmp_path_factory):
    from autorater.rater import model_name

    folder = tmp_path_factory.mktemp("metadata-fuzz")
    base = {"registered_name": "autorater", "registered_version": "3", "mlflow_run_id": "0a1b",
            "mlflow_experiment": "autorater", "train_config": {"epochs": 3}}

    @settings(max_examples=EXAMPLES["metadata"], **SETTINGS)
    @given(mutated(base))
    def check(obj):
        (folder / "metadata.json").write_text(json.dumps(obj, allow_nan=True))
        try:
            name = model_name(folder)
        except ValueError as err:
            assert "metadata.json" in str(err) and "fix:" in str(err)
            SEEN["metadata", "refused"] += 1
            return
        assert name.isprintable() and name.encode("utf-8")
        SEEN["metadata", "loaded"] += 1
    check()
    assert SEEN["metadata", "refused"] >= 5 and SEEN["metadata", "loaded"] >= 5, SEEN
