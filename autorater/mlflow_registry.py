"""The MLflow store and the model registry: where runs live, the champion alias, and ``--model`` resolution.

Used by training (to track runs and register models) and by serving and the CLI (to promote a version and
to fetch ``models:/NAME@ALIAS``), so a served model never goes through the training package. Every function
takes ``tracking_uri`` explicitly and works through an ``MlflowClient`` bound to it (no global MLflow state);
MLflow is imported inside the functions, with telemetry off. A SQLite store keeps its artifacts in
``mlartifacts/`` next to the database. Versions are folders (``config.json``, ``model.safetensors``, ...):
downloading one runs no code.

Example:
    >>> uri = default_tracking_uri("runs")                                      # doctest: +SKIP
    >>> promote(uri)["version"]                                                 # doctest: +SKIP
    3
    >>> resolve_model_arg("models:/autorater@champion", uri, "runs/models")     # doctest: +SKIP
    PosixPath('runs/models/autorater/3')
"""

from __future__ import annotations

import datetime
import os
import re
import shutil
import tempfile
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

__all__ = [
    "DEFAULT_ALIAS", "DEFAULT_MODEL_NAME", "artifact_root", "champion_model_dir", "default_tracking_uri",
    "download_version", "ensure_experiment", "import_mlflow", "mlflow_client", "mlflow_key", "model_version",
    "promote", "redact_uri", "registered_versions", "resolve_model_arg", "sqlite_path",
]

DEFAULT_MODEL_NAME = "autorater"
DEFAULT_ALIAS = "champion"

# ----------------------------------------------------------------------------------------------
# Store


def default_tracking_uri(workdir: str | os.PathLike = "runs") -> str:
    """``sqlite:///<absolute workdir>/mlflow.db``, creating the folder."""
    folder = Path(workdir).expanduser().resolve()
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / 'mlflow.db'}"


def sqlite_path(tracking_uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI (absolute), else None."""
    if not tracking_uri.startswith("sqlite:///"):
        return None
    raw = tracking_uri[len("sqlite:///"):].split("?", 1)[0]
    if not raw or raw == ":memory:":
        return None
    return Path(raw).expanduser().resolve()


def artifact_root(tracking_uri: str) -> str | None:
    """Where a store keeps its artifacts: ``<db folder>/mlartifacts`` for SQLite, else the server's choice."""
    db = sqlite_path(tracking_uri)
    return str(db.parent / "mlartifacts") if db is not None else None


def import_mlflow():
    """Import MLflow with telemetry off (set before the import: MLflow starts its client at import)."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    import mlflow
    from mlflow.telemetry import get_telemetry_client, set_telemetry_client

    if os.environ["MLFLOW_DISABLE_TELEMETRY"].lower() in ("true", "1") and get_telemetry_client() is not None:
        set_telemetry_client()  # imported earlier by someone else: drop the client now
    return mlflow


def mlflow_client(tracking_uri: str):
    """An ``MlflowClient`` on ``tracking_uri`` (tracking and registry), creating a SQLite store next to its
    artifacts."""
    if not tracking_uri:
        raise ValueError("a tracking URI is needed (fix: pass --tracking-uri, e.g. sqlite:///runs/mlflow.db)")
    import_mlflow()
    from mlflow import MlflowClient

    db = sqlite_path(tracking_uri)
    if db is not None and not db.exists():
        db.parent.mkdir(parents=True, exist_ok=True)
        try:  # create the tables with the artifact root next to the db (it becomes the "Default" experiment's)
            from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

            SqlAlchemyStore(tracking_uri, artifact_root(tracking_uri)).engine.dispose()
        except (ImportError, TypeError):  # a future MLflow: the client creates the tables itself
            pass
    return MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)


def ensure_experiment(client, name: str, tracking_uri: str) -> str:
    """The id of experiment ``name``, creating it with its artifacts in the store's artifact root."""
    from mlflow.exceptions import MlflowException

    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    root = artifact_root(tracking_uri)
    location = str(Path(root) / re.sub(r"[^\w.-]+", "_", name)) if root else None
    try:
        return client.create_experiment(name, artifact_location=location)
    except MlflowException:  # created meanwhile by another process
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise
        return exp.experiment_id


def redact_uri(uri: str) -> str:
    """``uri`` without a password (safe to log or print)."""
    parts = urlsplit(uri)
    if parts.password is None:
        return uri
    netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def mlflow_key(name: str) -> str:
    """A valid MLflow metric/param key: characters outside ``[A-Za-z0-9_.- /]`` become ``_``."""
    key = re.sub(r"[^\w.\- /]", "_", str(name))
    key = "/".join(p for p in key.split("/") if p not in ("", ".", ".."))  # MLflow rejects path-like names
    return key[:250] or "_"


# ----------------------------------------------------------------------------------------------
# Registry: champion alias, downloads


def registered_versions(client, name: str) -> list:
    from mlflow.exceptions import MlflowException

    try:
        client.get_registered_model(name)
    except MlflowException as err:
        if err.error_code == "RESOURCE_DOES_NOT_EXIST":
            raise ValueError(f"no registered model {name!r} in the MLflow registry (fix: train with "
                             f"`autorater train --tracking-uri ...` first, which registers each model)") from None
        raise
    return list(client.search_model_versions(f"name='{name}'"))


def promote(tracking_uri: str, name: str = DEFAULT_MODEL_NAME, version: int | str | None = None,
            alias: str = DEFAULT_ALIAS) -> dict:
    """Point registry alias ``alias`` at a version of ``name`` (default: the highest version number).

    Returns:
        ``name``, ``alias``, ``version``, ``previous_version`` (None when the alias was unset),
        ``run_id``, ``source`` and ``uri`` (``models:/NAME@ALIAS``).
    """
    client = mlflow_client(tracking_uri)
    versions = {int(v.version): v for v in registered_versions(client, name)}
    if not versions:
        raise ValueError(f"registered model {name!r} has no versions (fix: train with --tracking-uri)")
    chosen = max(versions) if version is None else int(version)
    if chosen not in versions:
        raise ValueError(f"{name!r} has no version {chosen}; versions: {sorted(versions)}")
    previous = client.get_registered_model(name).aliases.get(alias)
    client.set_registered_model_alias(name, alias, str(chosen))
    client.set_model_version_tag(name, str(chosen), f"{alias}_since",
                                 datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    mv = versions[chosen]
    return {"name": name, "alias": alias, "version": chosen,
            "previous_version": int(previous) if previous is not None else None,
            "run_id": mv.run_id, "source": mv.source, "uri": f"models:/{name}@{alias}"}


def model_version(client, name: str, version: int | str | None = None, alias: str | None = None):
    from mlflow.exceptions import MlflowException

    registered_versions(client, name)  # a clear error when the model is unknown
    try:
        if alias is not None:
            return client.get_model_version_by_alias(name, alias)
        return client.get_model_version(name, str(version))
    except MlflowException as err:
        what = f"alias {alias!r}" if alias is not None else f"version {version}"
        fix = "run `autorater promote`" if alias is not None else "see `autorater compare` for registered versions"
        raise ValueError(f"registered model {name!r} has no {what} (fix: {fix}): {err.message}") from None


def download_version(mv, dst: Path) -> Path:
    """The version's artifacts in ``dst`` (config.json at its top), written atomically."""
    import_mlflow()
    from mlflow.artifacts import download_artifacts

    from autorater.model import CONFIG_FILE

    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".download-", dir=dst.parent))
    quiet = os.environ.get("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR")
    os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = "false"  # MLflow's tqdm bar would print
    try:
        local = Path(download_artifacts(artifact_uri=mv.source, dst_path=str(tmp)))
        if not (local / CONFIG_FILE).is_file():
            raise ValueError(f"model version {mv.name}/{mv.version} at {mv.source} is not an autorater model "
                             f"folder (no config.json)")
        if dst.exists():
            dst.rmdir()  # empty (checked by the callers)
        os.replace(local, dst)
    finally:
        if quiet is None:
            os.environ.pop("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", None)
        else:
            os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = quiet
        shutil.rmtree(tmp, ignore_errors=True)
    return dst


def _is_empty_or_absent(path: Path) -> bool:
    return not path.exists() or (path.is_dir() and not any(path.iterdir()))


def champion_model_dir(tracking_uri: str, dst: str | os.PathLike, name: str = DEFAULT_MODEL_NAME,
                       alias: str = DEFAULT_ALIAS) -> Path:
    """Download the model version behind ``name@alias`` into ``dst`` (absent or empty); return ``dst``."""
    dst = Path(dst)
    if not _is_empty_or_absent(dst):
        raise ValueError(f"{dst} exists and is not empty (fix: choose a new folder or remove it)")
    client = mlflow_client(tracking_uri)
    return download_version(model_version(client, name, alias=alias), dst)


_MODELS_URI = re.compile(r"^models:/(?P<name>[^/@]+)(?:@(?P<alias>[^/]+)|/(?P<version>[^/]+))/?$")


def resolve_model_arg(arg: str | os.PathLike, tracking_uri: str | None, cache_dir: str | os.PathLike) -> Path:
    """A local model folder for ``--model``: a folder as is, or a registry URI downloaded once per version.

    Accepts ``models:/NAME@ALIAS``, ``models:/NAME/VERSION`` and ``models:/NAME/latest``. Versions
    are immutable, so ``<cache_dir>/<NAME>/<VERSION>`` is re-used once downloaded (an alias is
    resolved afresh every time).
    """
    from autorater.model import CONFIG_FILE

    text = str(arg)
    if not text.startswith("models:/"):
        path = Path(text)
        if not (path / CONFIG_FILE).is_file():
            raise FileNotFoundError(f"{path} is not a model folder (no config.json); pass a folder written by "
                                    f"`autorater train`, or models:/NAME@ALIAS with --tracking-uri")
        return path
    m = _MODELS_URI.match(text)
    if m is None:
        raise ValueError(f"cannot parse model URI {text!r}: use models:/NAME@ALIAS, models:/NAME/VERSION or "
                         f"models:/NAME/latest")
    if not tracking_uri:
        raise ValueError(f"{text} is a registry URI: pass --tracking-uri (the MLflow store that holds it)")
    client = mlflow_client(tracking_uri)
    name, alias, version = m["name"], m["alias"], m["version"]
    if version == "latest":
        versions = registered_versions(client, name)
        if not versions:
            raise ValueError(f"registered model {name!r} has no versions (fix: train with --tracking-uri)")
        version = str(max(int(v.version) for v in versions))
    elif version is not None and not version.isdigit():
        raise ValueError(f"model version must be a number or 'latest', got {version!r} in {text}")
    mv = model_version(client, name, version=version, alias=alias)
    dst = Path(cache_dir) / mlflow_key(name) / str(mv.version)
    if (dst / CONFIG_FILE).is_file():
        return dst
    if not _is_empty_or_absent(dst):
        raise ValueError(f"{dst} holds a partial download (fix: remove it and retry)")
    return download_version(mv, dst)
