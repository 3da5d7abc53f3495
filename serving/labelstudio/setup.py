"""``autorater labelstudio setup``: the Label Studio project the labelling job routes to, in one idempotent command.

Through ``label-studio-sdk`` (2.x), against a running Label Studio:

1. the project (found by its title, else created) with the product's labelling config (``labeling_config``),
   updated when its config differs;
2. the running ``autorater serve`` as its ML backend (basic auth with the service's token as the password, as Label
   Studio's connector sends it), so that Label Studio asks it for predictions;
3. a webhook to the service's ``/webhook`` for created, updated and deleted annotations (with the bearer token), so
   that each label reaches the pool suite as it is made;
4. optionally, a local-files storage for the folder the videos are under (Label Studio plays
   ``/data/local-files/?d=...`` only from a storage it knows), and the tasks of ``autorater label`` (only those whose
   ``continuation_id`` the project lacks).

Each step finds what is already there before it creates anything: a second run changes nothing and says so.

Both addresses must be http(s); neither client sends a credential to another origin (a redirect of ``/health`` or of
an API call to another host is refused, ``autorater.serving.labelstudio.client``), and addresses are shown without a
``user:password@``.

Label Studio refuses ML backends and webhooks on loopback and private addresses unless it was started with
``ML_BLOCK_LOCAL_IP=false`` and ``USE_DEFAULT_BANNED_SUBNETS=false``; local files need
``LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED=true`` and ``LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT``.

Example:
    >>> steps = setup_labelstudio("http://localhost:8080", "LS-TOKEN", "http://localhost:9090",
    ...                           serve_token="autorater-token")                           # doctest: +SKIP
    >>> print(format_setup(steps))                                                         # doctest: +SKIP
    project 'autorater' (id 3): created with the autorater labelling config
"""

from __future__ import annotations

import base64
import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from autorater.serving.labelstudio.client import RedirectRefused, check_url, open_url, public_url, sdk_client
from autorater.serving.labelstudio.formats import labeling_config

WEBHOOK_ACTIONS = ("ANNOTATION_CREATED", "ANNOTATION_UPDATED", "ANNOTATIONS_DELETED")
BASIC_AUTH_USER = "label-studio"


@dataclass
class Step:
    """One thing set up: what (``project``, ``ML backend``...), its name and id, and what was done."""

    what: str
    name: str
    id: int | None
    done: str  # "created", "updated: ...", "unchanged", ...

    def __str__(self) -> str:
        ident = f" (id {self.id})" if self.id is not None else ""
        return f"{self.what} {self.name}{ident}: {self.done}"


def setup_labelstudio(url: str, token: str, serve_url: str, *, project: str = "autorater",
                      serve_token: str | None = None, local_files: str | os.PathLike | None = None,
                      tasks: str | os.PathLike | None = None, client=None) -> list[Step]:
    """Create or update the project, its ML backend, its webhook (and, if asked, its local-files storage and tasks).

    Args:
        url: Label Studio's address (``http://localhost:8080``).
        token: a Label Studio access token (Account & Settings; a legacy token or a personal access token).
        serve_url: how Label Studio reaches ``autorater serve`` (``http://localhost:9090``).
        project: the project's title.
        serve_token: the service's bearer token (``autorater serve --token``), if it has one.
        local_files: the folder Label Studio serves the videos from (under its local-files document root).
        tasks: a ``tasks.json`` written by ``autorater label`` or ``autorater active select``.
        client: a ``label_studio_sdk.LabelStudio`` (default: one for ``url`` and ``token``).

    Raises:
        ValueError: the service or Label Studio cannot be reached, or Label Studio refused a step (its answer is
            quoted, with the fix).
    """
    from label_studio_sdk.core.api_error import ApiError

    url, serve_url = check_url(url), check_url(serve_url, "--serve-url")
    _check_service(serve_url, serve_token)
    ls = client or sdk_client(url, token)
    url = public_url(url)
    try:
        steps = [_project(ls, project)]
        pid = steps[0].id
        # the webhook first: connecting an ML backend registers one for its URL, for every action and without the token
        steps.append(_webhook(ls, pid, f"{serve_url}/webhook", serve_token))
        steps.append(_ml_backend(ls, pid, serve_url, serve_token))
        if local_files is not None:
            steps.append(_local_storage(ls, pid, Path(local_files)))
        if tasks is not None:
            steps.append(_tasks(ls, pid, Path(tasks)))
    except ApiError as err:
        fix = "pass a valid access token: Label Studio's Account & Settings" if err.status_code in (401, 403) else \
            (f"check that Label Studio may reach {serve_url}: start it with ML_BLOCK_LOCAL_IP=false and "
             f"USE_DEFAULT_BANNED_SUBNETS=false for a service on this machine or a private network")
        raise ValueError(f"Label Studio at {url} refused: {err.status_code} {_short(err.body)} (fix: {fix})") from None
    except OSError as err:  # httpx's connection errors are OSErrors underneath; the SDK re-raises them as they are
        raise ValueError(f"cannot reach Label Studio at {url}: {err} (fix: start it, or pass its --url)") from None
    except Exception as err:
        if type(err).__module__.startswith("httpx"):
            raise ValueError(f"cannot reach Label Studio at {url}: {err} (fix: start it, or pass its --url)") from None
        raise
    return steps


def format_setup(steps: list[Step]) -> str:
    return "\n".join(str(s) for s in steps)


def _check_service(serve_url: str, serve_token: str | None) -> None:
    """``autorater serve`` answers its health check (with the token), or a ValueError that says what to do."""
    request = urllib.request.Request(f"{serve_url}/health")
    if serve_token:
        credentials = base64.b64encode(f"{BASIC_AUTH_USER}:{serve_token}".encode()).decode()
        request.add_header("Authorization", f"Basic {credentials}")
    shown = public_url(serve_url)
    try:
        with open_url(request, timeout_s=10) as response:
            status = json.loads(response.read(1 << 16) or b"{}").get("status")
    except RedirectRefused:
        raise
    except urllib.error.HTTPError as err:
        fix = "pass its token with --serve-token" if err.code == 401 else "check --serve-url"
        raise ValueError(f"autorater serve at {shown} answered {err.code} to /health (fix: {fix})") from None
    except (OSError, ValueError, AttributeError, RecursionError) as err:
        raise ValueError(f"autorater serve does not answer at {shown} ({err}) (fix: start it: autorater serve "
                         f"--model MODEL --media-root DIR --suite POOL, and pass its address as --serve-url)") from None
    if status != "UP":
        raise ValueError(f"{shown}/health answered {str(status)[:40]!r}, not 'UP': is it autorater serve? (fix: "
                         f"check --serve-url)")


def _project(ls, title: str) -> Step:
    config = labeling_config()
    found = sorted((p for p in ls.projects.list() if p.title == title), key=lambda p: p.id)
    if not found:
        created = ls.projects.create(title=title, label_config=config, description="autorater: did the agent do what "
                                                                                    "the instruction says?")
        return Step("project", repr(title), created.id, "created with the autorater labelling config")
    project = ls.projects.get(id=found[0].id)
    more = f" ({len(found) - 1} more with this title left alone)" if len(found) > 1 else ""
    if _same_xml(project.label_config or "", config):
        return Step("project", repr(title), project.id, "unchanged" + more)
    ls.projects.update(id=project.id, label_config=config)
    return Step("project", repr(title), project.id, "labelling config updated to autorater's" + more)


def _ml_backend(ls, pid: int, serve_url: str, serve_token: str | None) -> Step:
    auth = {"auth_method": "BASIC_AUTH", "basic_auth_user": BASIC_AUTH_USER, "basic_auth_pass": serve_token} \
        if serve_token else {"auth_method": "NONE"}
    found = [m for m in ls.ml.list(project=pid) if (m.url or "").rstrip("/") == serve_url]
    if not found:
        backend = ls.ml.create(project=pid, url=serve_url, title="autorater", is_interactive=False, **auth)
        return Step("ML backend", serve_url, backend.id, f"connected ({_state(backend)})")
    backend = found[0]  # its password cannot be read back: one Label Studio reports Connected is left as it is
    wanted_method = auth["auth_method"]
    if _state(backend) == "Connected" and str(getattr(backend, "auth_method", wanted_method)) == wanted_method:
        return Step("ML backend", serve_url, backend.id, "unchanged (Connected)")
    backend = ls.ml.update(id=backend.id, url=serve_url, **auth)
    return Step("ML backend", serve_url, backend.id, f"reconnected ({_state(backend)})")


def _state(backend) -> str:
    return str(getattr(backend, "readable_state", None) or getattr(backend, "state", "") or "?")


def _webhook(ls, pid: int, hook_url: str, serve_token: str | None) -> Step:
    headers = {"Authorization": f"Bearer {serve_token}"} if serve_token else {}
    wanted = {"actions": list(WEBHOOK_ACTIONS), "headers": headers, "send_payload": True,
              "send_for_all_actions": False, "is_active": True}
    found = [w for w in ls.webhooks.list(project=str(pid)) if w.url == hook_url and w.project == pid]
    if not found:
        hook = ls.webhooks.create(project=pid, url=hook_url, **wanted)
        return Step("webhook", hook_url, hook.id, f"registered for {', '.join(WEBHOOK_ACTIONS)}")
    hook = found[0]
    have = {"actions": sorted(hook.actions or []), "headers": hook.headers or {}, "send_payload": hook.send_payload,
            "send_for_all_actions": hook.send_for_all_actions, "is_active": hook.is_active}
    if have == {**wanted, "actions": sorted(WEBHOOK_ACTIONS)}:
        return Step("webhook", hook_url, hook.id, "unchanged")
    ls.webhooks.update(id=hook.id, url=hook_url, **wanted)
    return Step("webhook", hook_url, hook.id, "updated (actions, token or payload)")


def _local_storage(ls, pid: int, folder: Path) -> Step:
    path = str(folder.resolve())
    found = [s for s in ls.import_storage.local.list(project=pid) if s.path == path]
    if found:
        return Step("local-files storage", path, found[0].id, "unchanged")
    storage = ls.import_storage.local.create(project=pid, path=path, title="autorater videos", use_blob_urls=True,
                                             regex_filter="")
    return Step("local-files storage", path, storage.id, "added (Label Studio serves the videos under it)")


def _tasks(ls, pid: int, path: Path) -> Step:
    try:
        tasks = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ValueError(f"cannot read tasks {path}: {err} (fix: pass the tasks.json written by autorater label)") \
            from None
    if not isinstance(tasks, list) or not all(isinstance(t, dict) and isinstance(t.get("data"), dict) for t in tasks):
        raise ValueError(f"{path} is not a list of Label Studio tasks (fix: pass LABELS/labelstudio/tasks.json)")
    have = {t.data.get("continuation_id") for t in ls.tasks.list(project=pid, fields="all")
            if isinstance(getattr(t, "data", None), dict)}
    new = [t for t in tasks if t["data"].get("continuation_id") not in have]
    if new:
        ls.projects.import_tasks(id=pid, request=new)
    return Step("tasks", str(path), None, f"{len(new)} imported, {len(tasks) - len(new)} already in the project")


def _same_xml(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


def _short(value, limit: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[:limit] + "..."


__all__ = ["BASIC_AUTH_USER", "WEBHOOK_ACTIONS", "Step", "format_setup", "setup_labelstudio"]
