"""The guards in front of ``autorater serve``: limits held at the connection, before the application sees a request.

- **At the connection** (:class:`ConnectionLimits`, applied by :func:`server_config` with uvicorn's own settings
  where they exist): at most ``max_connections`` open connections (uvicorn's ``limit_concurrency``: more are
  answered 503), idle keep-alive connections closed after ``keep_alive_s`` (``timeout_keep_alive``); and, which
  uvicorn has no setting for (:class:`GuardedH11Protocol`): the request head must arrive within
  ``header_timeout_s`` of the connection opening (or of the previous response), else the connection is closed; at
  most ``max_idle_connections`` connections may wait for a request head (idle or trickling one), and one more closes
  the longest-waiting one, so that sockets which send nothing cannot fill the cap and a share of it stays for
  clients that send requests; and a request head of over ``max_header_bytes`` is answered 431 however it arrives
  (h11's ``max_incomplete_event_size`` only bounds a head still incomplete, not one that arrives in one segment).
- **Before the body is read** (:class:`RequestGuard`, ASGI middleware): the token, then the size (a
  ``Content-Length`` over the limit is refused at once; a chunked body is counted as it streams and refused with
  413 as soon as it passes the limit), then **no cross-site writes**: a state-changing request (POST, PUT, ...)
  with an ``Origin`` other than the service's own loopback address (or one of ``trusted_origins``), or sent by a
  browser for another site (``Sec-Fetch-Site``), is answered 403, and one whose body is not JSON
  (``multipart/form-data`` for an upload) 415: a web page can send neither without the browser's consent (CORS,
  which the service does not grant). Then the whole body must arrive within ``body_timeout_s`` (408).
- **A body is never read past a refusal**: a response that starts before its request's body was read to the end
  (a 401, a 413, a 404 of an unknown route, a ``/health`` sent a body) carries ``Connection: close``, so the server
  closes the connection instead of draining what the client still sends.
- **Disconnects are quiet**: a client that goes away mid-body ends its request without a traceback in the log.
- **Fields** (:func:`resolve_media`, :func:`field_error`, :func:`json_body`): paths confined to the media root
  (symlink loops and every OS error a 400), JSON parsed strictly, a 422 that names the field and the fix.

Example:
    >>> app.add_middleware(RequestGuard, token=None, json_limit=1 << 20, upload_limit=64 << 20)   # doctest: +SKIP
    >>> uvicorn.Server(server_config(app, "127.0.0.1", 9090, ConnectionLimits())).run()          # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import secrets
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h11
from fastapi import HTTPException
from uvicorn.protocols.http.h11_impl import H11Protocol

from autorater.data.paths import PathError, relative_parts, resolve_under
from autorater.serving.fields import loads, shown

_LOG = logging.getLogger("autorater.serve")


@dataclass(frozen=True)
class ConnectionLimits:
    """What one client may hold of the server. Every limit is a flag of ``autorater serve`` (docs/robustness.md)."""

    header_timeout_s: float = 10.0  # the request head (line and headers) must arrive within this
    body_timeout_s: float = 60.0  # the whole body must arrive within this, from the end of the head
    max_connections: int = 64  # open connections at once (uvicorn limit_concurrency); more are answered 503
    keep_alive_s: int = 5  # an idle keep-alive connection is closed after this
    max_header_bytes: int = 16 << 10  # the request head, however it arrives (431)
    max_idle_connections: int | None = None  # waiting for a request head at once (None: half of max_connections)

    def __post_init__(self):
        idle = self.max_idle_connections
        if not (self.header_timeout_s > 0 and self.body_timeout_s > 0 and self.max_connections >= 1
                and self.keep_alive_s >= 1 and self.max_header_bytes >= 1024
                and (idle is None or 1 <= idle <= self.max_connections)):
            raise ValueError(f"connection limits must be positive (max_header_bytes >= 1024, max_idle_connections "
                             f"at most max_connections), got {self}")

    @property
    def idle_share(self) -> int:
        """How many connections may wait for a request head at once."""
        return self.max_idle_connections or max(1, self.max_connections // 2)


class HeadTooLarge(Exception):
    """A request head over the limit arrived whole (h11 bounds only a head still incomplete)."""


class _HeadLimitedConnection(h11.Connection):
    """h11's server connection that refuses a complete request head of over ``max_head`` bytes."""

    def __init__(self, max_head: int):
        super().__init__(h11.SERVER, max_incomplete_event_size=max_head)
        self.max_head = max_head

    def next_event(self):
        event = super().next_event()
        if isinstance(event, h11.Request) and head_size(event) > self.max_head:
            raise HeadTooLarge()
        return event


def head_size(request: h11.Request) -> int:
    """The bytes of a request head as sent: the request line, every header line and the blank line."""
    line = len(request.method) + len(request.target) + len(b" HTTP/1.1\r\n") + 1
    return line + sum(len(name) + len(value) + 4 for name, value in request.headers.raw_items()) + 2


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with limits on the request head: a connection whose request line and headers have not
    all arrived ``header_timeout_s`` after it opened (or after its previous response) is closed; past
    ``idle_share`` connections waiting for a head, the longest-waiting one is closed; a head of over
    ``max_header_bytes`` is answered 431, however it arrived. ``server_config`` makes a subclass per server (the
    waiting connections are shared by its connections)."""

    header_timeout_s = ConnectionLimits.header_timeout_s
    idle_share = ConnectionLimits().idle_share
    max_header_bytes = ConnectionLimits.max_header_bytes
    waiting: dict = {}  # the connections waiting for a request head, oldest first (one event loop: no lock)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.conn = _HeadLimitedConnection(self.max_header_bytes)

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def _arm_head_timer(self) -> None:
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_timeout)
        self.waiting[self] = None
        if len(self.waiting) > self.idle_share:
            oldest = next(iter(self.waiting))
            if oldest is not self:
                _LOG.info("closed the longest-waiting of %d connections without a request", len(self.waiting))
                oldest._cancel_head_timer()
                oldest.transport.close()

    def _cancel_head_timer(self) -> None:
        timer = getattr(self, "_head_timer", None)
        if timer is not None:
            timer.cancel()
        self._head_timer = None
        self.waiting.pop(self, None)

    def _head_timeout(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            _LOG.info("closed a connection whose request head took longer than %g s", self.header_timeout_s)
            self.transport.close()

    def handle_events(self) -> None:
        before = self.cycle
        try:
            super().handle_events()
        except HeadTooLarge:
            self._cancel_head_timer()
            self._refuse_head()
            return
        if self.cycle is not before:  # a request head arrived whole
            self._cancel_head_timer()

    def _refuse_head(self) -> None:
        """Answer 431 to a request head over the limit and close the connection."""
        body = json.dumps({"detail": f"the request head (line and headers) is over {self.max_header_bytes} bytes "
                                     f"(fix: send fewer or shorter headers)"}).encode()
        out = self.conn.send(h11.Response(status_code=431, headers=[
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"connection", b"close")], reason=b"Request Header Fields Too Large"))
        out += self.conn.send(h11.Data(data=body)) + self.conn.send(h11.EndOfMessage())
        self.transport.write(out)
        self.transport.close()

    def on_response_complete(self) -> None:
        before = self.cycle
        super().on_response_complete()  # may start a pipelined request already received
        if not self.transport.is_closing() and self.cycle is before:
            self._arm_head_timer()  # the next request's head

    def connection_lost(self, exc) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)


def server_config(app, host: str, port: int, limits: ConnectionLimits = ConnectionLimits(),
                  log_level: str = "warning"):
    """The ``uvicorn.Config`` that runs ``app`` under ``limits`` (h11, with :class:`GuardedH11Protocol`)."""
    import uvicorn

    protocol = type("AutoraterH11Protocol", (GuardedH11Protocol,), {
        "header_timeout_s": limits.header_timeout_s, "idle_share": limits.idle_share,
        "max_header_bytes": limits.max_header_bytes, "waiting": {}})
    return uvicorn.Config(app, host=host, port=port, http=protocol, log_level=log_level,
                          limit_concurrency=limits.max_connections, timeout_keep_alive=limits.keep_alive_s,
                          h11_max_incomplete_event_size=limits.max_header_bytes)


def _authorized(header: bytes | None, token: str) -> bool:
    """``Authorization: Bearer <token>``, or basic auth (any user) whose password is the token."""
    given = (header or b"").decode("latin-1")
    ok = secrets.compare_digest(given.encode("latin-1"), f"Bearer {token}".encode())
    if given[:6].lower() == "basic ":
        try:
            _, _, password = base64.b64decode(given[6:].strip(), validate=True).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            password = ""
        ok = secrets.compare_digest(password.encode("utf-8", "surrogatepass"), token.encode()) or ok
    return ok


class BodyRefused(HTTPException):
    """The guard stopped reading a request body (too large, too slow). An HTTPException, so that the application
    answers it wherever it was reading the body (FastAPI turns other exceptions there into 400)."""


class RequestGuard:
    """ASGI middleware: the token, then the body size and time, before the application reads a byte of the body.

    ``Content-Length`` over the limit is refused at once; a body without it (chunked) is counted as it streams and
    refused with 413 as soon as it passes the limit. ``upload_paths`` (path suffixes) get ``upload_limit``. The
    whole body must arrive within ``body_timeout_s`` (408). A response that starts before the body was read to its
    end closes the connection; a client that disconnects ends its request quietly.
    """

    def __init__(self, app, token: str | None, json_limit: int, upload_limit: int, upload_paths: tuple = ("/upload",),
                 body_timeout_s: float = ConnectionLimits.body_timeout_s, trusted_origins: tuple = ()):
        self.app, self.token = app, token
        self.json_limit, self.upload_limit, self.upload_paths = json_limit, upload_limit, upload_paths
        self.body_timeout_s = body_timeout_s
        self.trusted_origins = frozenset(o.rstrip("/").lower() for o in trusted_origins)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        chunked = b"chunked" in headers.get(b"transfer-encoding", b"").lower()
        # body_done decides Connection: close; every body is counted, whatever its headers say
        state = {"body_done": not chunked and length in (None, b"0"), "disconnected": False, "started": False}

        async def guarded_send(message):
            if message["type"] == "http.response.start":
                state["started"] = True
                sent = list(message.get("headers", []))
                if not state["body_done"] and not any(k.lower() == b"connection" for k, _ in sent):
                    message = {**message, "headers": [*sent, (b"connection", b"close")]}
            await send(message)

        if self.token is not None and not _authorized(headers.get(b"authorization"), self.token):
            return await _send_json(guarded_send, 401, "missing or wrong token (fix: send 'Authorization: Bearer "
                                                       "<token>', or basic auth with the token as the password)",
                                    [(b"www-authenticate", b'Bearer realm="autorater"')])
        upload = scope.get("path", "").endswith(self.upload_paths)
        limit = self.upload_limit + 65536 if upload else self.json_limit
        if length is not None and (not length.isdigit() or len(length) > 18 or int(length) > limit):
            return await _send_json(guarded_send, 413, f"request body too large (limit {limit} bytes)")
        refused = cross_site_refusal(scope.get("method", "GET"), headers, upload, self.trusted_origins)
        if refused is not None:
            return await _send_json(guarded_send, *refused)
        seen, due = 0, time.monotonic() + self.body_timeout_s

        async def limited_receive():
            nonlocal seen
            if state["disconnected"]:
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), max(0.0, due - time.monotonic()))
            except asyncio.TimeoutError:
                raise BodyRefused(408, f"the request body did not arrive within {self.body_timeout_s:g} s "
                                       f"(fix: send it at once, or ask for a longer --body-timeout-s)") from None
            if message["type"] == "http.disconnect":
                state["disconnected"] = True
            elif message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyRefused(413, f"request body too large (limit {limit} bytes)")
                state["body_done"] = not message.get("more_body", False)
            return message

        try:
            await self.app(scope, limited_receive, guarded_send)
        except BodyRefused as err:  # raised where the application does not answer it itself
            if not state["started"]:
                await _send_json(guarded_send, err.status_code, err.detail)
        except Exception:
            if not state["disconnected"]:
                raise
            _LOG.info("client disconnected during %s %s", scope.get("method"), scope.get("path", "")[:200])


SAFE_METHODS = ("GET", "HEAD", "OPTIONS")  # every other method may change state
_LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")


def cross_site_refusal(method: str, headers: dict, upload: bool, trusted: frozenset = frozenset()) \
        -> tuple[int, str] | None:
    """(status, why) when a state-changing request could come from a web page of another site: an ``Origin`` other
    than the service's own loopback address (the one in ``Host``) or one of ``trusted`` (403); a browser's
    ``Sec-Fetch-Site`` saying another site (403); a body that is not JSON (``multipart/form-data`` for an upload):
    a web page can send ``text/plain``, forms and multipart anywhere without asking (415). None: allowed. Label
    Studio's webhooks and ML-backend calls (JSON, no ``Origin``) pass."""
    if method.upper() in SAFE_METHODS:
        return None
    origin = headers.get(b"origin")
    if origin is not None and not _own_origin(origin, headers.get(b"host"), trusted):
        return 403, (f"cross-site request refused: Origin {shown(origin.decode('latin-1'), 100)} is not this service "
                     f"(fix: call the service from a program, which sends no Origin, or from a page the service "
                     f"trusts: serve --allow-origin ORIGIN)")
    site = headers.get(b"sec-fetch-site", b"").lower()
    if site in (b"cross-site", b"same-site"):
        return 403, (f"cross-site request refused: the browser says it comes from another site "
                     f"(Sec-Fetch-Site: {site.decode('latin-1')}) (fix: call the service from a program)")
    ctype = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
    body = headers.get(b"content-length", b"0") != b"0" or b"transfer-encoding" in headers
    json_type = ctype == b"application/json" or (ctype.startswith(b"application/") and ctype.endswith(b"+json"))
    if body and not (ctype == b"multipart/form-data" if upload else json_type):
        want = "multipart/form-data (a file and form fields)" if upload else "application/json"
        return 415, (f"content type {shown(ctype.decode('latin-1'), 60)} refused: this route takes {want} (fix: send "
                     f"the header Content-Type: {want.split(' ')[0]}, e.g. curl -H 'Content-Type: application/json')")
    return None


def _own_origin(origin: bytes, host: bytes | None, trusted: frozenset) -> bool:
    """Whether a request's ``Origin`` is the service itself on loopback (the address in ``Host``), or trusted."""
    text = origin.decode("latin-1").rstrip("/").lower()
    if text in trusted:
        return True
    scheme, _, netloc = text.partition("://")
    name = netloc.rsplit(":", 1)[0] if not netloc.endswith("]") else netloc
    return (scheme in ("http", "https") and host is not None and netloc == host.decode("latin-1").lower()
            and (name in _LOOPBACK_HOSTS or name.startswith("127.")))


def field_error(where: str, name: str, value, why: str, fix: str) -> HTTPException:
    """A 422 naming where (``task 3``, ``webhook task``), the field, what it must be, what came, and the fix."""
    return HTTPException(422, f"{where}: field '{name}' {why}, got {shown(value)} (fix: {fix})")


def json_body(raw: bytes, what: str) -> Any:
    """A request body as JSON: 400 when it is not JSON (NaN and Infinity are not JSON), or nests too deeply."""
    try:
        return loads(raw, f"the {what} body")
    except ValueError as err:
        raise HTTPException(400, str(err)) from None


def resolve_media(media_root: Path, value: str) -> Path:
    """The file ``value`` names under ``media_root``; HTTPException 400/404 if it leaves the root or is missing.

    Accepts a relative POSIX path or a Label Studio local-files URL (``/data/local-files/?d=rel/path``). Symlinks are
    followed, and one that leads out of the root is refused; a loop of symlinks and every other OS error is a 400.
    """
    if value.startswith("/data/local-files/"):
        value = urllib.parse.parse_qs(urllib.parse.urlparse(value).query).get("d", [""])[0]
    shown_path = value[:200]
    if relative_parts(value) is None or ":" in value:
        raise HTTPException(400, f"video path {shown_path!r} must be relative to the media root, without '..' "
                                 f"(fix: send e.g. 'suite-v3/videos/c000001.mp4')")
    try:  # the one resolution the imports, propose and diff use too (autorater.data.paths)
        return resolve_under(media_root, value, what="video path")
    except PathError as err:
        if err.kind == "outside":
            raise HTTPException(400, f"video path {shown_path!r} leads outside the media root") from None
        if err.kind in ("missing", "not_file"):
            raise HTTPException(404, f"no video at {shown_path!r} under the media root") from None
        why = str(err).split("cannot be opened: ", 1)[-1].split(" (fix:", 1)[0]
        raise HTTPException(400, f"video path {shown_path!r} cannot be opened: {why} (fix: send the path of a video "
                                 f"file under the media root)") from None


async def _send_json(send, status: int, detail: str, headers: list | None = None) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


__all__ = ["SAFE_METHODS", "BodyRefused", "ConnectionLimits", "GuardedH11Protocol", "HeadTooLarge", "RequestGuard",
           "cross_site_refusal", "field_error", "head_size", "json_body", "resolve_media", "server_config"]
