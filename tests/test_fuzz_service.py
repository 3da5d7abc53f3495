"""Fuzzing the running service: generated requests (bodies, headers, videos) against the ASGI app.

Seeded; every request must answer below 500 with a JSON body, and afterwards the pool suite must still load,
with every marker a finite time inside its video and every label the webhook said it recorded still there.
The counts (``FUZZED``) are the ones docs/robustness.md reports.
"""

from __future__ import annotations

import copy
import json
import math
import random

from fastapi.testclient import TestClient

from autorater.data.suite import Suite
from autorater.serving.labelstudio.formats import labeling_config
from autorater.serving.service.app import create_app
from hardening_env import suite_rows, task_of, webhook_payload
from tiny_suites import FPS, N_FRAMES

WEIRD = [None, True, False, 0, -1, 1, 2 ** 70, -1e308, 1e308, 1e-320, float("nan"), float("inf"), -float("inf"),
         3.5, "", "x" * 3000, "NaN", "0", "c1", "../../etc/passwd", "/etc/passwd", "suite/videos/c1.mp4",
         "/data/local-files/?d=suite/videos/c2.mp4", "\u0000", "é\ud7ff", [], [1, 2], {}, {"a": [1, {"b": None}]},
         [[[[[[[[[[]]]]]]]]]], "<View/>"]
CIDS = ["c1", "c2", "c3", "c4"]
N_PER_KIND = {"rate": 120, "predict": 100, "webhook": 160, "delete": 20, "setup": 30, "upload": 40, "raw": 60,
              "auth": 40, "paths": 30}
FUZZED = sum(N_PER_KIND.values())


def _mutate(obj, rng: random.Random, times: int = 1):
    """Replace, delete or add one node of a JSON tree, ``times`` times."""
    obj = copy.deepcopy(obj)
    for _ in range(times):
        containers = []

        def walk(x):
            if isinstance(x, (dict, list)):
                containers.append(x)
                for v in (x.values() if isinstance(x, dict) else x):
                    walk(v)
        walk(obj)
        c = rng.choice(containers)
        if isinstance(c, dict) and c:
            k = rng.choice(list(c))
            op = rng.random()
            if op < 0.2:
                del c[k]
            elif op < 0.3:
                c[rng.choice(["extra", "id", "fps", "takeover_s", k + "_"])] = copy.deepcopy(rng.choice(WEIRD))
            else:
                c[k] = copy.deepcopy(rng.choice(WEIRD))
        elif isinstance(c, list) and c:
            c[rng.randrange(len(c))] = copy.deepcopy(rng.choice(WEIRD))
    return obj


def _body(obj, rng: random.Random) -> bytes:
    """JSON (NaN and Infinity as Python writes them), sometimes cut or with bytes flipped."""
    text = json.dumps(obj, allow_nan=True).encode("utf-8", "surrogatepass")
    op = rng.random()
    if op < 0.08 and text:
        return text[: rng.randrange(len(text))]
    if op < 0.14 and text:
        b = bytearray(text)
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b)
    return text


def _check(r, what):
    assert r.status_code < 500, (what, r.status_code, r.text[:300])
    json.loads(r.content)  # every answer is JSON, NaN-free


def test_generated_requests_never_answer_500_and_the_suite_stays_whole(env, tmp_path):
    import shutil

    media = tmp_path / "media"
    shutil.copytree(env["media"], media)
    suite = Suite.load(media / "suite")
    app = create_app(env["model"], media, suite=suite.root, timeout_s=30, max_upload_bytes=200_000)
    client = TestClient(app)
    rng = random.Random(27)
    sent, recorded, statuses = 0, {}, {}

    def post(path, content, kind, headers=None):
        nonlocal sent
        r = client.post(path, content=content, headers={"content-type": "application/json", **(headers or {})})
        _check(r, (kind, content[:200]))
        sent += 1
        statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
        return r

    rate = {"video": "suite/videos/c1.mp4", "instruction": "go to the red ball", "takeover_s": 0.25}
    for _ in range(N_PER_KIND["rate"]):
        post("/v1/rate", _body(_mutate(rate, rng, rng.randint(1, 2)), rng), "rate")
    for _ in range(N_PER_KIND["predict"]):
        tasks = [task_of(suite, rng.choice(CIDS), i) for i in range(rng.randint(1, 3))]
        body = {"tasks": tasks, "project": "1.1", "label_config": labeling_config() if rng.random() < 0.2 else None}
        post("/predict", _body(_mutate(body, rng, rng.randint(1, 3)), rng), "predict")
    for i in range(N_PER_KIND["webhook"]):
        cid = rng.choice(CIDS)
        payload = webhook_payload(suite, cid, rng.choice(["success", "failure"]), rng.randrange(N_FRAMES) / FPS,
                                  f"f{i % 7}", ann_id=1000 + i % 40,
                                  updated_at=f"2026-11-23T12:{i % 60:02d}:00Z")
        if rng.random() < 0.7:
            payload = _mutate(payload, rng, rng.randint(1, 3))
        r = post("/webhook", _body(payload, rng), "webhook")
        if r.status_code == 201 and r.json().get("ls_annotation_id") is not None:
            recorded[(r.json()["continuation_id"], r.json()["ls_annotation_id"])] = r.json()["status"]
    for _ in range(N_PER_KIND["delete"]):  # ids the webhook loop never used: nothing recorded may go
        payload = {"action": "ANNOTATIONS_DELETED", "annotations": [{"id": 5000 + j} for j in range(rng.randint(1, 3))]}
        post("/webhook", _body(_mutate(payload, rng, rng.randint(0, 2)) if rng.random() < 0.7 else payload, rng),
             "delete")
    for _ in range(N_PER_KIND["setup"]):
        schema = rng.choice([labeling_config(), "<View>", "<a>" * 2000, "", "<!DOCTYPE x [<!ENTITY e SYSTEM "
                             "'file:///etc/passwd'>]><View>&e;</View>", labeling_config().replace("success", "yes")])
        post("/setup", _body(_mutate({"project": "1", "schema": schema}, rng) if rng.random() < 0.3 else
                             {"project": "1", "schema": schema}, rng), "setup")
    video = suite.video_path("c1").read_bytes()
    for _ in range(N_PER_KIND["upload"]):
        data = bytearray(video)
        for _ in range(rng.randint(0, 12)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        data = bytes(data[: rng.randrange(len(data) + 1)] if rng.random() < 0.3 else data)
        if rng.random() < 0.1:
            data = b"\x00" * 300_000  # over the limit
        form = {"instruction": rng.choice(["go", "", "x" * 3000, "nan"]),
                "takeover_s": rng.choice(["0", "nan", "inf", "-1", "1e400", "x", "0.5"])}
        r = client.post("/v1/rate/upload", files={"file": (rng.choice(["v.mp4", "a.\x00", "", "../x.mp4", "v" * 300]),
                                                           data, "video/mp4")}, data=form)
        _check(r, "upload")
        sent += 1
    for _ in range(N_PER_KIND["raw"]):  # bytes that are not JSON, odd content types, deep nesting
        body = rng.choice([b"[" * 50_000, b"{" * 3 + b"}" * 3, bytes(rng.randrange(256) for _ in range(200)),
                           b'{"action": Infinity}', b"null", b'"str"', b"1e999999"])
        path = rng.choice(["/v1/rate", "/predict", "/webhook", "/setup"])
        ctype = rng.choice(["application/json", "text/plain", "multipart/form-data",
                            "application/x-www-form-urlencoded"])
        r = client.post(path, content=body, headers={"content-type": ctype})
        _check(r, ("raw", path, body[:40]))
        sent += 1
    for _ in range(N_PER_KIND["paths"]):
        method = rng.choice(["GET", "POST", "PUT", "DELETE", "OPTIONS", "HEAD"])
        path = rng.choice(["/", "/health", "/docs", "/openapi.json", "/v1/rate", "/nope", "/webhook/../health",
                           "/%00", "/predict?x=1"])
        r = client.request(method, path)
        assert r.status_code < 500
        sent += 1
    secured = TestClient(create_app(env["model"], media, token="t0ken"))
    for _ in range(N_PER_KIND["auth"]):
        auth = rng.choice(["Bearer t0ken", "Bearer t0ke", "bearer t0ken", "Bearer t0ken ", "Basic dTp0MGtlbg==",
                           "Basic dTp3cm9uZw==", "Basic ###", "Token t0ken", "", "Bearer " + "x" * 5000])
        r = secured.get(rng.choice(["/health", "/docs", "/openapi.json"]), headers={"Authorization": auth})
        assert r.status_code == (200 if auth in ("Bearer t0ken", "Basic dTp0MGtlbg==") else 401), auth
        sent += 1

    assert sent == FUZZED >= 500
    assert statuses.get(201, 0) > 10 and statuses.get(422, 0) > 50  # both sides were exercised
    after = Suite.load(suite.root)  # the pool suite still loads
    duration = N_FRAMES / FPS
    for a in after.annotations:
        assert a.marker_s is None or (math.isfinite(a.marker_s) and 0 <= a.marker_s <= duration + 1e-6)
    kept = {(r["continuation_id"], r["ls_annotation_id"]): (r["outcome"], r["marker_s"])
            for r in suite_rows(suite.root) if r.get("ls_annotation_id") is not None}
    lost = [k for k in recorded if k not in kept]
    assert lost == []  # no label the webhook accepted was lost
