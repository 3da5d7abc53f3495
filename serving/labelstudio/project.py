"""``autorater suite import --from-labelstudio-project ID --url URL --token TOKEN``: a suite straight from a running
Label Studio project, beside the import of an export file (``labelstudio.imports``).

Through ``label-studio-sdk`` (2.x): the project (``GET /api/projects/ID/``: its title and labelling config) and its
JSON export of every task, labelled or not (``GET /api/projects/ID/export?export_type=JSON&download_all_tasks=true``,
the endpoint behind Export > JSON). The export is written to a file and imported by
:func:`autorater.serving.labelstudio.imports.import_labelstudio`, so both roads read tasks the same way; the file is
kept in the suite as ``labelstudio/project-ID-export.json``. The project's ``<Video frameRate>``, when it is a number,
is the frame rate of its timeline (``--frame-rate`` wins over it).

Tokens: a legacy access token or a personal access token (Account & Settings); the SDK sends the first as
``Authorization: Token ...`` and trades the second for an access token at ``/api/token/refresh``. The client sends
nothing to an origin other than ``--url``'s (``labelstudio.client.sdk_client``: a redirect elsewhere is refused).

Bounds: the export is streamed to a file (never held in memory whole), at most ``MAX_EXPORT_BYTES``, within
``EXPORT_DEADLINE_S`` overall, and parsed once, nesting bounded (``[`` x 100,000 is a one-line error); the labelling
config is parsed as XML, at most ``MAX_LABEL_CONFIG_BYTES`` (1 MB in a few milliseconds).

Example:
    >>> report = import_labelstudio_project(7, "http://localhost:8080", "TOKEN", media_root="/data/videos",
    ...                                     out="my-suite")                                   # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from autorater.data.files import commit, open_new, temp_path
from autorater.data.imports.common import ImportReport
from autorater.serving.labelstudio.client import check_url, public_url, sdk_client
from autorater.serving.labelstudio.formats import read_export
from autorater.serving.labelstudio.imports import import_labelstudio

EXPORT_DIR = "labelstudio"
MAX_EXPORT_BYTES = 2 << 30  # 2 GiB: a larger answer is not an export of a video project's labels
EXPORT_DEADLINE_S = 1800.0  # the whole export (project and download), however slowly it trickles
MAX_LABEL_CONFIG_BYTES = 4 << 20  # a labelling config is a few KB; a larger one is not read for its frame rate


@dataclass
class ProjectExport:
    """A project's JSON export fetched from Label Studio: where it was written, and what the project says."""

    path: Path
    project_id: int
    title: str
    frame_rate: float | None  # the <Video frameRate> of its labelling config, when a number
    tasks: int
    url: str


def video_frame_rate(label_config: str | None) -> float | None:
    """The ``frameRate`` of the first ``<Video>`` of a labelling config when it is a number (not ``$fps``).

    The config is read as XML by expat up to its first ``<Video>`` (linear in its size, no tree built; no DTD or
    entity is expanded: a config that declares one is not read), at most ``MAX_LABEL_CONFIG_BYTES``; anything else
    (not XML up to the ``<Video>``, too large, no number) gives None."""
    from xml.parsers import expat

    if not isinstance(label_config, str) or len(label_config) > MAX_LABEL_CONFIG_BYTES or "<!" in label_config:
        return None
    found: list[dict] = []

    def start(name: str, attrs: dict) -> None:
        if name.lower() == "video":
            found.append(attrs)
            raise _FoundVideo  # the first <Video> is the one: stop reading

    parser = expat.ParserCreate()
    parser.StartElementHandler = start
    try:
        parser.Parse(label_config, True)
    except _FoundVideo:
        pass
    except (expat.ExpatError, ValueError, RecursionError):
        return None
    if not found:
        return None
    rate = next((v for k, v in found[0].items() if k.lower() == "framerate"), None)
    try:
        value = float(rate) if rate is not None else None
    except ValueError:
        return None
    return value if value is not None and 0 < value < 1000 else None


class _FoundVideo(Exception):
    pass


def fetch_project_export(project_id: int, url: str, token: str, out_file: str | os.PathLike,
                         client=None, deadline_s: float = EXPORT_DEADLINE_S,
                         max_bytes: int = MAX_EXPORT_BYTES) -> ProjectExport:
    """Download project ``project_id``'s JSON export (every task) from the Label Studio at ``url`` to ``out_file``.

    The export is streamed to a temp file beside ``out_file`` (never held in memory), checked to be a list of tasks
    and renamed into place.

    Args:
        project_id: the project's id (the number in its address, ``/projects/ID/``).
        url: Label Studio's address (http or https).
        token: an access token (legacy or personal).
        out_file: where the export is written.
        client: a ``label_studio_sdk.LabelStudio`` (default: ``labelstudio.client.sdk_client``, which sends nothing to
            another origin).
        deadline_s: the whole fetch must end within this many seconds.
        max_bytes: the largest export taken.

    Raises:
        ValueError: Label Studio cannot be reached, refuses the token, has no such project, redirects elsewhere,
            answers too much or too slowly, or with something that is not an export (each with the fix).
    """
    from label_studio_sdk.core.api_error import ApiError

    url = check_url(url)
    shown = public_url(url)
    ls = client or sdk_client(url, token)
    out_file = Path(out_file)
    out_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(out_file)
    start = time.monotonic()
    try:
        project = ls.projects.get(id=project_id)
        size = 0
        with open_new(tmp) as f:
            for chunk in ls.projects.exports.download_sync(project_id, export_type="JSON", download_all_tasks=True):
                size += len(chunk)
                if size > max_bytes:
                    raise ValueError(f"project {project_id}'s export at {shown} is larger than "
                                     f"{max_bytes / 2 ** 20:g} MiB (fix: export it from Label Studio to a file and "
                                     f"import that with --from-labelstudio)")
                if time.monotonic() - start > deadline_s:
                    raise ValueError(f"project {project_id}'s export at {shown} took longer than {deadline_s:g} s "
                                     f"(fix: export it from Label Studio to a file and import that with "
                                     f"--from-labelstudio)")
                f.write(chunk)
        tasks = _read_fetched(tmp, shown, project_id)
        commit(tmp, out_file)
    except ApiError as err:
        raise ValueError(_refusal(err.status_code, err.body, shown, project_id)) from None
    except OSError as err:  # httpx's connection errors are OSErrors underneath
        raise ValueError(f"cannot reach Label Studio at {shown}: {err} (fix: start it, or pass its --url)") from None
    except ValueError:
        raise
    except Exception as err:
        if type(err).__module__.startswith("httpx"):
            raise ValueError(f"cannot reach Label Studio at {shown}: {err} (fix: start it, or pass its --url)") \
                from None
        raise
    finally:
        tmp.unlink(missing_ok=True)
    return ProjectExport(out_file, int(project_id), str(getattr(project, "title", "") or ""),
                         video_frame_rate(getattr(project, "label_config", None)), len(tasks), shown)


def _read_fetched(path: Path, shown: str, project_id: int) -> list:
    """The tasks of a fetched export; a ValueError that says what Label Studio answered otherwise."""
    with open(path, "rb") as f:
        head = f.read(120)
    try:
        return read_export(path)
    except ValueError as err:
        if "nested too deeply" in str(err) or "a list of tasks" in str(err):
            raise ValueError(f"project {project_id}'s export at {shown} is not a list of tasks "
                             f"({str(err).split(': ', 1)[-1][:120]}) (fix: check --url and the project id)") from None
        raise ValueError(f"Label Studio at {shown} answered project {project_id}'s export with something that is "
                         f"not JSON: {head!r} (fix: check --url: it is Label Studio's address, such as "
                         f"http://localhost:8080)") from None


def _refusal(status: int | None, body, url: str, project_id: int) -> str:
    text = body if isinstance(body, str) else json.dumps(body, default=str)
    text = text if len(text) <= 300 else text[:300] + "..."
    fix = {401: "pass a valid access token (Label Studio: Account & Settings > Access Token), with --token or "
                "LABEL_STUDIO_API_KEY",
           403: "use the token of a member of the project's organisation",
           404: "pass the id of an existing project: the number in its address, /projects/ID/"}.get(
        status, "check --url and the project id")
    return f"Label Studio at {url} answered {status} for project {project_id}: {text} (fix: {fix})"


def import_labelstudio_project(project_id: int, url: str, token: str, media_root: str | os.PathLike,
                               out: str | os.PathLike, *, frame_rate: float | None = None, client=None,
                               **options) -> ImportReport:
    """Import Label Studio project ``project_id`` into the suite folder ``out`` (created, or grown as an export file
    import grows it); the export is kept as ``out/labelstudio/project-ID-export.json``.

    Args:
        project_id, url, token, client: as :func:`fetch_project_export`.
        media_root: the folder the tasks' videos are under (Label Studio's local-files document root, or its media
            folder for uploads).
        frame_rate: the project's timeline frame rate (default: its ``<Video frameRate>`` if a number, else each
            task's ``fps``, else 24).
        options: ``success_labels``, ``failure_labels``, ``link``, ``strict``, ``name``, ``version`` as for
            ``import_labelstudio``.
    """
    out = Path(out)
    with tempfile.TemporaryDirectory(prefix="autorater-ls-") as tmp:
        fetched = fetch_project_export(project_id, url, token, Path(tmp) / f"project-{int(project_id)}-export.json",
                                       client=client)
        report = import_labelstudio(fetched.path, media_root, out, frame_rate=frame_rate or fetched.frame_rate,
                                    source=f"{fetched.url}/projects/{fetched.project_id}/",
                                    extra_files={f"{EXPORT_DIR}/{fetched.path.name}": fetched.path}, **options)
    report.source = f"Label Studio project {fetched.project_id} ({fetched.title!r}, {fetched.tasks} task(s)) at " \
                    f"{fetched.url}"
    return report


__all__ = ["EXPORT_DIR", "ProjectExport", "fetch_project_export", "import_labelstudio_project", "video_frame_rate"]
