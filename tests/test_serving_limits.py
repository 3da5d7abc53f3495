"""Issue 37, item 4: limits held at the connection, against a real uvicorn server on loopback (raw sockets).

A slow request head is cut off; a chunked body over the limit, and a body sent to an unknown route or to ``/health``,
is answered and the connection closed without reading the rest (what the server read is counted at its protocol);
a request body that stalls gets 408; connections over the cap get 503; a client that vanishes mid-body leaves no
traceback in the log.
"""

from __future__ import annotations

import logging
import socket
import threading
import time

import pytest
import torch
import uvicorn

from autorater.serving.service.app import create_app
from autorater.serving.service.guard import ConnectionLimits, server_config
from hardening_env import make_hardening_env

LIMITS = ConnectionLimits(header_timeout_s=1.0, body_timeout_s=1.0, max_connections=4)
JSON_LIMIT = 256 << 10


class _Server:
    """``autorater serve``'s app under ``server_config`` in a thread, with the bytes its protocol read counted."""

    def __init__(self, app, limits: ConnectionLimits):
        self.read = 0
        config = server_config(app, "127.0.0.1", 0, limits)
        base, outer = config.http, self

        class Counting(base):
            def data_received(self, data: bytes) -> None:
                outer.read += len(data)
                super().data_received(data)

        config.http = Counting
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        assert self.server.started

    def connect(self) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        return s

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    torch.set_num_threads(1)
    env = make_hardening_env(tmp_path_factory.mktemp("limits"))
    app = create_app(env["model"], env["media"], suite=env["suite"].root, max_json_bytes=JSON_LIMIT,
                     body_timeout_s=LIMITS.body_timeout_s)
    srv = _Server(app, LIMITS)
    yield srv
    srv.stop()


def _answer(s: socket.socket, limit_s: float = 10.0) -> bytes:
    """Everything the server sends until it closes the connection (or ``limit_s`` passes)."""
    s.settimeout(limit_s)
    out = b""
    try:
        while chunk := s.recv(65536):
            out += chunk
    except (ConnectionResetError, socket.timeout):
        pass
    return out


def test_a_slow_request_head_is_cut_off_within_the_header_timeout(server):
    s = server.connect()
    start = time.monotonic()
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
    closed_after = None
    for _ in range(40):  # one header byte every 0.1 s: the head never completes
        try:
            s.sendall(b"X")
            if s.recv(1, socket.MSG_DONTWAIT) == b"":
                closed_after = time.monotonic() - start
                break
        except BlockingIOError:
            pass
        except (BrokenPipeError, ConnectionResetError):
            closed_after = time.monotonic() - start
            break
        time.sleep(0.1)
    s.close()
    assert closed_after is not None and closed_after < LIMITS.header_timeout_s + 1.5, closed_after
    with server.connect() as ok:  # the server still answers
        ok.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert ok.recv(200).startswith(b"HTTP/1.1 200")


def _send_chunked(s: socket.socket, path: str, total: int, chunk: int = 64 << 10) -> int:
    """Stream ``total`` bytes of chunked body; returns how many were sent before the server closed."""
    s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              f"Transfer-Encoding: chunked\r\n\r\n".encode())
    sent, piece = 0, f"{chunk:x}\r\n".encode() + b" " * chunk + b"\r\n"
    try:
        while sent < total:
            s.sendall(piece)
            sent += chunk
    except (BrokenPipeError, ConnectionResetError):
        pass
    return sent


@pytest.mark.parametrize("path,status", [("/webhook", b"413"), ("/nowhere", b"404"), ("/health", b"405")])
def test_a_body_over_the_limit_or_to_an_unknown_route_is_not_read_to_its_end(server, path, status):
    total = 16 << 20  # 16 MiB offered; the JSON limit is 256 KiB
    s = server.connect()
    before = server.read
    result = {}
    writer = threading.Thread(target=lambda: result.update(sent=_send_chunked(s, path, total)))
    writer.start()
    answer = _answer(s)
    writer.join(30)
    s.close()
    read = server.read - before
    assert answer.split(b" ")[1] == status and b"connection: close" in answer.lower(), answer[:300]
    assert read < 4 << 20 < total, read  # the server stopped reading long before the end (socket buffers aside)


def test_a_stalled_body_is_answered_408(server):
    s = server.connect()
    s.sendall(b"POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
    start = time.monotonic()
    answer = _answer(s)
    s.close()
    assert answer.startswith(b"HTTP/1.1 408") and time.monotonic() - start < LIMITS.body_timeout_s + 3


def _health(server) -> bytes:
    with server.connect() as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        return s.recv(200)


def test_connections_over_the_cap_are_answered_503(server):
    busy = []  # each in the middle of a request (its body), not waiting for one
    head = b"POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
    try:
        for _ in range(LIMITS.max_connections):
            read = server.read
            busy.append(server.connect())
            busy[-1].sendall(head)
            # the server has read this head before the next socket opens (on a busy machine it may not have yet,
            # and a socket still waiting for its head counts as idle: past the idle share the oldest is closed)
            deadline = time.monotonic() + 10
            while server.read < read + len(head) and time.monotonic() < deadline:
                time.sleep(0.01)
        time.sleep(0.2)
        assert _health(server).startswith(b"HTTP/1.1 503")
    finally:
        for s in busy:
            s.close()
    time.sleep(0.3)
    assert _health(server).startswith(b"HTTP/1.1 200")


def _closed(s: socket.socket) -> bool:
    s.settimeout(0.5)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def test_idle_sockets_cannot_fill_the_cap_a_share_stays_for_requests(server):
    """Issue 44: sockets that send nothing (or trickle a head) may hold only ``idle_share`` of the connections; one
    more closes the longest-waiting, so a client that sends a request is answered."""
    idle = [server.connect() for _ in range(3 * LIMITS.max_connections)]
    try:
        time.sleep(0.2)
        assert _health(server).startswith(b"HTTP/1.1 200")
        closed = sum(_closed(s) for s in idle)
        assert closed >= len(idle) - LIMITS.idle_share  # the oldest were closed, at most the share kept
    finally:
        for s in idle:
            s.close()


def test_a_client_that_disconnects_mid_body_leaves_no_traceback(server):
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    handler = Keep(level=logging.ERROR)
    logging.getLogger("uvicorn.error").addHandler(handler)
    try:
        for path in ("/webhook", "/predict", "/v1/rate", "/v1/rate/upload"):
            s = server.connect()
            s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      f"Content-Length: 5000\r\n\r\n{{\"tasks\": [".encode())
            time.sleep(0.1)
            s.close()
        time.sleep(0.5)
    finally:
        logging.getLogger("uvicorn.error").removeHandler(handler)
    assert [r.getMessage() for r in records] == []


def test_a_request_head_over_the_limit_is_refused_even_when_it_arrives_in_one_segment(server):
    head = b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: %s\r\n" % (i, b"a" * 1000) for i in range(20))
    with server.connect() as s:  # about 20 KiB, sent at once: h11 alone took it (its limit is for incomplete heads)
        s.sendall(head + b"\r\n")
        answer = _answer(s)
    assert answer.split(b" ")[1] in (b"431", b"400") and b"connection: close" in answer.lower(), answer[:200]
    with server.connect() as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-ok: " + b"a" * 8000 + b"\r\n\r\n")
        assert s.recv(200).startswith(b"HTTP/1.1 200")


@pytest.mark.slow
def test_the_third_attack_at_full_size_against_the_default_limits(tmp_path):
    """Issue 44 at the attack's size: 64 idle sockets without a token against the default cap, then 50 requests;
    60,000 unknown deletions, then webhooks; all against a real server (no timing asserted: see
    benchmarks/history_cost.py)."""
    import json

    from autorater.data.suite import Suite
    from autorater.serving.labelling.history import MAX_UNSEEN_TOMBSTONES, suite_history
    from hardening_env import suite_rows, webhook_payload

    env = make_hardening_env(tmp_path)
    srv = _Server(create_app(env["model"], env["media"], suite=env["suite"].root), ConnectionLimits())
    try:
        idle = [srv.connect() for _ in range(64)]
        time.sleep(0.5)
        assert all(_health(srv).startswith(b"HTTP/1.1 200") for _ in range(50))
        for s in idle:
            s.close()
        for start in range(0, 60_000, 20_000):
            body = json.dumps({"action": "ANNOTATIONS_DELETED",
                               "annotations": [{"id": 10 ** 6 + i} for i in range(start, start + 20_000)]}).encode()
            with srv.connect() as s:
                s.sendall(b"POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: "
                          b"close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
                assert _answer(s, 60).startswith(b"HTTP/1.1 201")
        suite = Suite.load(env["suite"].root)
        for i in range(20):
            body = json.dumps(webhook_payload(suite, "c1", ann_id=500 + i)).encode()
            with srv.connect() as s:
                s.sendall(b"POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: "
                          b"close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
                assert _answer(s, 60).startswith(b"HTTP/1.1 201")
        assert len(suite_history(suite.root).deleted_ids()) == MAX_UNSEEN_TOMBSTONES
        assert len([r for r in suite_rows(suite.root) if r.get("ls_annotation_id")]) == 20
        history = suite.root / "annotations_history.jsonl"
        assert history.stat().st_size < 3 * 12 * MAX_UNSEEN_TOMBSTONES + 20 * 2000
    finally:
        srv.stop()
