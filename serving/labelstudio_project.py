"""``autorater suite import --from-labelstudio-project ID --url URL --token TOKEN``: a suite straight from a running
Label Studio project, beside the import of an export file (``labelstudio_import``).

Through ``label-studio-sdk`` (2.x): the project (``GET /api/projects/ID/``: its title and labelling config) and its
JSON export of every task, labelled or not (``GET /api/projects/ID/export?export_type=JSON&download_all_tasks=true``,
the endpoint behind Export > JSON). The export is written to a file and imported by
:func:`autorater.serving.labelstudio_import.import_labelstudio`, so both roads read tasks the same way; the file is
kept in the suite as ``labelstudio/project-ID-export.json``. The project's ``<Video frameRate>``, when it is a number,
is the frame rate of its timeline (``--frame-rate`` wins over it).

Tokens: a legacy access token or a personal access token (Account & Settings); the SDK sends the first as
``Authorization: Token ...`` and trades the second for an access token at ``/api/token/refresh``.

Example:
    >>> report = import_labelstudio_project(7, "http://localhost:8080", "TOKEN", media_root="/data/videos",
    ...                                     out="my-suite")                                   # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from autorater.data.files import write_bytes_atomic
from autorater.data.import_common import ImportReport
from autorater.serving.labelstudio_import import import_labelstudio

EXPORT_DIR = "labelstudio"
MAX_EXPORT_BYTES = 2 << 30  # 2 GiB: a larger answer is not an export of a video project's labels


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
    """The ``frameRate`` of the first ``<Video>`` of a labelling config when it is a number (not ``$fps``)."""
    m = re.search(r"<Video\b[^>]*\bframeRate\s*=\s*[\"']([^\"']+)[\"']", label_config or "", flags=re.I)
    try:
        value = float(m.group(1)) if m else None
    except ValueError:
        return None
    return value if value is not None and 0 < value < 1000 else None


def fetch_project_export(project_id: int, url: str, token: str, out_file: str | os.PathLike,
                         client=None) -> ProjectExport:
    """Download project ``project_id``'s JSON export (every task) from the Label Studio at ``url`` to ``out_file``.

    Args:
        project_id: the project's id (the number in its address, ``/projects/ID/``).
        url: Label Studio's address.
        token: an access token (legacy or personal).
        out_file: where the export is written.
        client: a ``label_studio_sdk.LabelStudio`` (default: one for ``url`` and ``token``).

    Raises:
        ValueError: Label Studio cannot be reached, refuses the token, has no such project, or answers with
            something that is not an export (each with the fix).
    """
    from label_studio_sdk import LabelStudio
    from label_studio_sdk.core.api_error import ApiError

    url = url.rstrip("/")
    ls = client or LabelStudio(base_url=url, api_key=token)
    try:
        project = ls.projects.get(id=project_id)
        chunks, size = [], 0
        for chunk in ls.projects.exports.download_sync(project_id, export_type="JSON", download_all_tasks=True):
            size += len(chunk)
            if size > MAX_EXPORT_BYTES:
                raise ValueError(f"project {project_id}'s export at {url} is larger than {MAX_EXPORT_BYTES >> 30} GiB "
                                 f"(fix: export it from Label Studio to a file and import that with "
                                 f"--from-labelstudio)")
            chunks.append(chunk)
    except ApiError as err:
        raise ValueError(_refusal(err.status_code, err.body, url, project_id)) from None
    except OSError as err:  # httpx's connection errors are OSErrors underneath
        raise ValueError(f"cannot reach Label Studio at {url}: {err} (fix: start it, or pass its --url)") from None
    except Exception as err:
        if type(err).__module__.startswith("httpx"):
            raise ValueError(f"cannot reach Label Studio at {url}: {err} (fix: start it, or pass its --url)") from None
        raise
    data = b"".join(chunks)
    try:
        tasks = json.loads(data)
    except ValueError:
        raise ValueError(f"Label Studio at {url} answered project {project_id}'s export with something that is not "
                         f"JSON: {data[:120]!r} (fix: check --url: it is Label Studio's address, such as "
                         f"http://localhost:8080)") from None
    if not isinstance(tasks, list):
        raise ValueError(f"project {project_id}'s export at {url} is not a list of tasks (fix: check --url and the "
                         f"project id)")
    out_file = Path(out_file)
    out_file.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(out_file, data)
    return ProjectExport(out_file, int(project_id), str(getattr(project, "title", "") or ""),
                         video_frame_rate(getattr(project, "label_config", None)), len(tasks), url)


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
                                    source=f"{fetched.url}/projects/{fetched.project_id}/", **options)
        if report.written:
            (out / EXPORT_DIR).mkdir(exist_ok=True)
            shutil.copyfile(fetched.path, out / EXPORT_DIR / fetched.path.name)
    report.source = f"Label Studio project {fetched.project_id} ({fetched.title!r}, {fetched.tasks} task(s)) at {url}"
    return report


__all__ = ["EXPORT_DIR", "ProjectExport", "fetch_project_export", "import_labelstudio_project", "video_frame_rate"]
