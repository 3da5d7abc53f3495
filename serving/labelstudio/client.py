"""Talking to Label Studio (and to ``autorater serve``) without letting a credential leave: the addresses, the
tokens and the HTTP clients that ``suite import --from-labelstudio-project`` and ``labelstudio setup`` use.

- Only ``http`` and ``https`` addresses (:func:`check_url`): ``file:``, ``ftp:`` and the like are refused.
- No credential follows a redirect to another origin (scheme, host or port): the SDK's client
  (:func:`sdk_client`) refuses any request to an origin other than Label Studio's own, so a ``307`` to another
  host never carries ``{"refresh": TOKEN}`` or an ``Authorization`` header; :func:`open_url` (urllib, for
  ``/health``) refuses such a redirect too.
- An address is stored and shown without its ``user:password@`` (:func:`public_url`).
- A token is read from the flag, a file or the environment (:func:`read_token`): a flag shows in ``ps``.

Example:
    >>> public_url("http://me:secret@localhost:8080/projects/3/")
    'http://localhost:8080/projects/3/'
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from autorater.data.paths import printable

TOKEN_ENV = "LABEL_STUDIO_API_KEY"
MAX_TOKEN_FILE_BYTES = 64 << 10


class RedirectRefused(ValueError):
    """A server answered with a redirect to another origin: nothing is sent there."""


def check_url(url: str, what: str = "--url") -> str:
    """``url`` without a trailing slash if it is an ``http(s)`` address with a host; a ValueError otherwise."""
    parts = urlsplit(url.strip()) if isinstance(url, str) else None
    if parts is None or parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{what} {printable(str(url))[:120]!r} is not an http(s) address (fix: pass e.g. "
                         f"http://localhost:8080)")
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise ValueError(f"{what} {public_url(url)!r} has a bad port (fix: pass e.g. http://localhost:8080)") from None
    return url.strip().rstrip("/")


def public_url(url: str) -> str:
    """``url`` without the ``user:password@`` of its address (what may be stored in ``suite.json`` or printed)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return printable(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    netloc = host + (f":{parts.port}" if _port(parts) is not None else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _port(parts) -> int | None:
    try:
        return parts.port
    except ValueError:
        return None


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(str(url))
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), _port(parts) or {"http": 80, "https": 443}.get(scheme)


def read_token(token: str | None, token_file: str | os.PathLike | None = None, env: dict | None = None,
               name: str = TOKEN_ENV) -> str | None:
    """The token: ``token`` (the flag), else the first line of ``token_file``, else the environment's ``name``."""
    if token:
        return token.strip()
    if token_file is not None:
        path = Path(token_file)
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_TOKEN_FILE_BYTES + 1)
        except OSError as err:
            raise ValueError(f"cannot read the token file {path}: {err.strerror or err} (fix: pass a file holding "
                             f"the token on its first line)") from None
        if len(data) > MAX_TOKEN_FILE_BYTES:
            raise ValueError(f"the token file {path} is larger than {MAX_TOKEN_FILE_BYTES >> 10} KiB: not a token "
                             f"(fix: pass a file holding the token on its first line)")
        lines = data.decode("utf-8", "replace").strip().splitlines()
        if not lines or not lines[0].strip():
            raise ValueError(f"the token file {path} is empty (fix: write the token on its first line)")
        return lines[0].strip()
    value = (env if env is not None else os.environ).get(name)
    return value.strip() if value and value.strip() else None


def sdk_client(url: str, token: str, timeout_s: float = 60.0):
    """A ``label_studio_sdk.LabelStudio`` for ``url`` whose HTTP client sends nothing to another origin.

    Redirects within Label Studio's origin are followed; a request to any other origin (a ``307`` to another host,
    the SDK's token refresh sent there) raises :class:`RedirectRefused` before it is sent."""
    import httpx
    from label_studio_sdk import LabelStudio

    url = check_url(url)
    home = _origin(url)

    def same_origin(request) -> None:
        if _origin(str(request.url)) != home:
            raise RedirectRefused(f"Label Studio at {public_url(url)} redirected a request to another address "
                                  f"({public_url(str(request.url.copy_with(query=None)))}); the token is not sent "
                                  f"there (fix: pass Label Studio's own address as --url)")

    client = httpx.Client(timeout=timeout_s, follow_redirects=True, event_hooks={"request": [same_origin]})
    return LabelStudio(base_url=url, api_key=token, httpx_client=client, timeout=timeout_s)


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if _origin(newurl) != _origin(req.full_url):
            raise RedirectRefused(f"{public_url(req.full_url)} redirected to another address ({public_url(newurl)}); "
                                  f"its credentials are not sent there (fix: pass the service's own address)")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def open_url(request: urllib.request.Request, timeout_s: float = 10.0):
    """``urllib.request.urlopen`` for http(s) only, following redirects only within the request's origin."""
    check_url(request.full_url, "address")
    opener = urllib.request.build_opener(_SameOriginRedirects(), urllib.request.HTTPHandler,
                                         urllib.request.HTTPSHandler)
    return opener.open(request, timeout=timeout_s)


__all__ = ["MAX_TOKEN_FILE_BYTES", "TOKEN_ENV", "RedirectRefused", "check_url", "open_url", "public_url",
           "read_token", "sdk_client"]
