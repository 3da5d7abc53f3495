"""What a Label Studio webhook costs as the label history grows (issue 44): a flood of unknown deletions, then webhooks.

    python -m benchmarks.history_cost [--unknown 60000] [--per-request 20000] [--labels 2000] [--webhooks 30]
                                      [--out bench-out/history_cost]

Against ``autorater serve``'s app in a real uvicorn server on loopback (the default connection limits), with a pool
suite generated small (BabyAI, 8 continuations) and a tiny model: webhooks that create labels first (the baseline),
then ``--unknown`` deletions of annotation ids the service never saw in requests of ``--per-request`` ids (each under
the 1 MiB JSON limit; the attack sent 69,000 in one 1 MiB request), then webhooks again; then ``--labels`` labels
created and updated, then webhooks again. Each phase reports the webhooks' latency (median, 95th percentile, max)
and the history's size on disk (events and snapshot). Label Studio waits 1 s for a webhook's answer.

Prints a table and writes ``history_cost.json``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import platform
import shutil
import socket
import statistics
import threading
import time
from pathlib import Path


class _Server:
    """The service's app under ``server_config`` in a thread, on a free loopback port."""

    def __init__(self, app):
        import uvicorn

        from autorater.serving.service.guard import ConnectionLimits, server_config

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.server = uvicorn.Server(server_config(app, "127.0.0.1", self.port, ConnectionLimits()))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.02)

    def post(self, path: str, obj) -> tuple[int, float]:
        """(status, seconds) of one POST of JSON, on a new connection (as Label Studio sends a webhook)."""
        body = json.dumps(obj).encode()
        start = time.perf_counter()
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        conn.request("POST", path, body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        response.read()
        conn.close()
        return response.status, time.perf_counter() - start

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def _payload(suite, cid: str, ann_id: int, outcome: str, stamp: str, action: str) -> dict:
    from autorater.serving.labelstudio.formats import marker_region

    fps, frames = 8.0, 8
    region = marker_region(outcome, 0.5, fps, frames, f"r{ann_id}")
    return {"action": action, "project": {"id": 1},
            "task": {"id": 1, "data": {"continuation_id": cid, "video": suite.get(cid).video, "fps": fps}},
            "annotation": {"id": ann_id, "completed_by": 3, "result": [region], "was_cancelled": False,
                           "created_at": stamp, "updated_at": stamp}}


def _phase(server, suite, name: str, first_id: int, n: int) -> dict:
    """``n`` webhooks, each creating a label: their latency, and the history's size after them."""
    cids = suite.continuation_ids()
    times = []
    for i in range(n):
        status, seconds = server.post("/webhook", _payload(suite, cids[i % len(cids)], first_id + i, "success",
                                                           "2026-11-23T12:00:00Z", "ANNOTATION_CREATED"))
        assert status == 201, status
        times.append(seconds)
    times.sort()
    return {"phase": name, "webhooks": n, "median_s": round(statistics.median(times), 4),
            "p95_s": round(times[int(0.95 * (n - 1))], 4), "max_s": round(times[-1], 4), **_sizes(suite.root)}


def _sizes(root: Path) -> dict:
    history, snapshot = root / "annotations_history.jsonl", root / "annotations_history.snapshot.json"
    return {"history_bytes": history.stat().st_size if history.is_file() else 0,
            "snapshot_bytes": snapshot.stat().st_size if snapshot.is_file() else 0,
            "labels_bytes": (root / "annotations.jsonl").stat().st_size}


def _flood(server, unknown: int, per_request: int, first_id: int) -> dict:
    """Deletions of ``unknown`` ids never seen, ``per_request`` a request: the slowest answer."""
    slowest, statuses = 0.0, set()
    for start in range(0, unknown, per_request):
        ids = range(first_id + start, first_id + min(unknown, start + per_request))
        status, seconds = server.post("/webhook", {"action": "ANNOTATIONS_DELETED", "annotations": [
            {"id": i} for i in ids]})
        statuses.add(status)
        slowest = max(slowest, seconds)
    return {"unknown_ids": unknown, "per_request": per_request, "statuses": sorted(statuses),
            "slowest_request_s": round(slowest, 3)}


def _labels(server, suite, n: int, first_id: int) -> None:
    """``n`` labels created, then each updated once (2n events of real labels)."""
    cids = suite.continuation_ids()
    for i in range(n):
        for action, stamp, outcome in (("ANNOTATION_CREATED", "2026-11-23T12:00:00Z", "success"),
                                       ("ANNOTATION_UPDATED", "2026-11-23T12:05:00Z", "failure")):
            status, _ = server.post("/webhook", _payload(suite, cids[i % len(cids)], first_id + i, outcome, stamp,
                                                         action))
            assert status == 201, status


def run(out: Path, unknown: int, per_request: int, labels: int, webhooks: int) -> dict:
    import torch

    from autorater.data.generate import generate_suite
    from autorater.data.suite import Suite
    from autorater.models import PRESETS, AutoModel
    from autorater.serving.service.app import create_app

    if out.exists():
        shutil.rmtree(out)
    media = out / "media"
    suite = Suite.load(generate_suite(media / "pool", scenarios=4, continuations_per_scenario=2, seed=1,
                                      workers=1, progress=False))
    torch.manual_seed(0)
    model = AutoModel.from_config(PRESETS["tiny"]).save_pretrained(out / "model")
    server = _Server(create_app(model, media, suite=suite.root))
    try:
        phases = [_phase(server, suite, "start", 1, webhooks)]
        flood = _flood(server, unknown, per_request, 10 ** 9)
        phases.append(_phase(server, suite, f"after {unknown:,} unknown deletions", 1000, webhooks))
        _labels(server, suite, labels, 10 ** 6)
        phases.append(_phase(server, suite, f"then {labels:,} labels created and updated", 2000, webhooks))
    finally:
        server.stop()
    return {"machine": {"cpu_count": __import__("os").cpu_count(), "platform": platform.platform()},
            "flood": flood, "phases": phases}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unknown", type=int, default=60_000, help="annotation ids never seen, deleted")
    parser.add_argument("--per-request", type=int, default=20_000, help="ids in one ANNOTATIONS_DELETED")
    parser.add_argument("--labels", type=int, default=2_000, help="labels created and updated after the flood")
    parser.add_argument("--webhooks", type=int, default=30, help="webhooks timed in each phase")
    parser.add_argument("--out", default="bench-out/history_cost")
    args = parser.parse_args(argv)
    out = Path(args.out)
    result = run(out, args.unknown, args.per_request, args.labels, args.webhooks)
    out.mkdir(parents=True, exist_ok=True)
    (out / "history_cost.json").write_text(json.dumps(result, indent=1) + "\n")
    flood = result["flood"]
    print(f"\nflood: {flood['unknown_ids']:,} unknown ids in requests of {flood['per_request']:,}: answers "
          f"{flood['statuses']}, the slowest in {flood['slowest_request_s']} s")
    print(f"\n{'phase':<44}{'webhook median':>15}{'p95':>8}{'max':>8}{'history':>12}{'snapshot':>11}{'labels':>10}")
    for p in result["phases"]:
        print(f"{p['phase']:<44}{p['median_s']:>13.3f} s{p['p95_s']:>8.3f}{p['max_s']:>8.3f}"
              f"{p['history_bytes'] / 1e3:>9.0f} kB{p['snapshot_bytes'] / 1e3:>8.0f} kB"
              f"{p['labels_bytes'] / 1e3:>7.0f} kB")
    print(f"\nwritten to {out / 'history_cost.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


# The benchmark built small, run by tests/test_benchmark_modules.py (a benchmark that drifts from the product fails
# there, not on the day someone runs it).


def tiny(tmp_path):
    """The model folder its service loads."""
    from autorater.models import PRESETS, AutoModel

    return AutoModel.from_config(PRESETS["tiny"]).save_pretrained(Path(tmp_path) / "model")
