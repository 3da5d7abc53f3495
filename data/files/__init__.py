"""Writing files so that a crash leaves the old file or the new one, never a part (fsync + atomic replace).

Every file the product writes goes through here (or through a library that is handed a temp path that is then fsynced
and renamed with :func:`commit`). Three modules, each on the ones below it: ``base`` (temps, fsync, JSON text, hashes,
a folder's lock), ``change`` (several files of one folder changed at once through :class:`FolderChange`: temps, a
journal ``.change.json``, the renames; a journal is replayed only inside its folder, :func:`recover_folder`) and
``writes`` (one file at a time, after finishing a change a crash left in its folder).

Example:
    >>> write_text_atomic("out/summary.json", json_text({"n": 3}))   # doctest: +SKIP
"""

from autorater.data.files.base import (
    LOCK_FILE,
    FolderBusyError,
    append_line_durably,
    content_sha1,
    folder_lock,
    fsync_dir,
    json_text,
    jsonl_text,
    naming,
    open_lock,
    open_new,
    remove_if_unused,
    sha1_file,
    temp_path,
)
from autorater.data.files.change import (
    CHANGE_FILE,
    MAX_JOURNAL_BYTES,
    FolderChange,
    JournalError,
    identity,
    pending_files,
    recover_folder,
    recover_if_free,
    remove_stale_temps,
)
from autorater.data.files.writes import commit, write_bytes_atomic, write_text_atomic

__all__ = ["CHANGE_FILE", "LOCK_FILE", "MAX_JOURNAL_BYTES", "FolderBusyError", "FolderChange", "JournalError",
           "append_line_durably", "commit", "content_sha1", "folder_lock", "fsync_dir", "identity", "json_text",
           "jsonl_text", "naming", "open_lock", "open_new", "pending_files", "recover_folder", "recover_if_free",
           "remove_if_unused", "remove_stale_temps", "sha1_file", "temp_path", "write_bytes_atomic",
           "write_text_atomic"]
