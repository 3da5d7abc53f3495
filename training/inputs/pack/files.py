"""A pack's files: opened only as regular files inside the pack, tensors read in a stream, every byte checksummed.

- :func:`open_member`: ``folder/relative`` opened for reading when every folder on the way is a real folder (no
  symbolic link) and the file is a regular file once opened (``open_regular``: a FIFO does not block, a symlink is
  refused); a missing file is a :class:`PackError` that says which.
- :func:`write_tensors` / :func:`read_tensors`: a safetensors file, stored as it is (``.safetensors``) or compressed
  as an xz stream of exactly that file (``.safetensors.xz``, the standard library's ``lzma``, preset 1: ``xz -d``
  gives the safetensors file back). Reading parses the header itself (JSON), asks the caller's ``expect`` whether
  each tensor's name, dtype and shape are what the pack says before anything is allocated, then reads each tensor's
  bytes straight into its own tensor, 16 MiB at a time: peak memory is the tensors and one chunk, never the file and
  the tensors. The file's bytes are hashed as they are read (SHA-256, compared at the end); trailing bytes, a gap
  between tensors, a truncated stream or a damaged one (xz's CRC) are refused.
- :func:`file_record`: a file's ``{"sha256", "bytes"}`` as ``pack.json`` records it.

Measured on the bars' BabyAI training suite (2,000 continuations, ``babyai-grid``): clips 450.4 MiB stored as they
are, 24.6 MiB as xz (18.3x; gzip's zlib at level 6: 40.7 MiB), compressed in 15 s, read back in 3-6 s on 2 cores.

Example:
    >>> record = write_tensors(Path("d/clips.safetensors.xz"), {"x": torch.zeros(2, 3)})       # doctest: +SKIP
    >>> read_tensors(Path("d"), "clips.safetensors.xz", expect=lambda name, dtype, shape: None,
    ...              sha256=record["sha256"])["x"].shape                                       # doctest: +SKIP
    torch.Size([2, 3])
"""

from __future__ import annotations

import hashlib
import io
import json
import lzma
import os
import stat
from pathlib import Path, PurePosixPath
from typing import Callable

import torch

from autorater.data.paths import PathError, open_regular, printable

COMPRESSED = ".xz"  # the suffix of a compressed safetensors file (an xz stream of it)
PRESET = 1  # xz preset: 24.6 MiB for the BabyAI pack (preset 6: the same size, 5x slower to write)
CHUNK = 16 << 20  # bytes read or written at a time
MAX_HEADER = 64 << 20  # bytes of a safetensors header (JSON): a pack of a million rows holds a few KiB
DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
          "BOOL": torch.bool}

Expect = Callable[[str, torch.dtype, tuple], None]  # raises PackError for a tensor the pack should not hold


class PackError(ValueError):
    """A pack that may not be trained from: one line that names the file, the field and the fix."""


def fail(path: Path | str, what: str, fix: str) -> PackError:
    """The error of one file of a pack: ``<file>: <what> (fix: <fix>)``, printable."""
    return PackError(f"{printable(str(path))}: {printable(what)} (fix: {fix})")


REPACK = "pack the suites again with `autorater pack`, or copy the pack again from where it was written"


def open_member(folder: Path, relative: str):
    """``folder/relative`` opened for reading (module docstring); the pack's own files only."""
    rel = PurePosixPath(relative)
    if rel.is_absolute() or any(part in ("", ".", "..") for part in rel.parts):
        raise fail(folder, f"{relative!r} is not a file of the pack", REPACK)
    path = folder
    for part in rel.parts[:-1]:
        path = path / part
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            raise fail(path, "missing", REPACK) from None
        if not stat.S_ISDIR(mode):
            raise fail(path, "a symbolic link or not a folder: a pack is read from its own folders only", REPACK)
    try:
        return open_regular(folder / rel)
    except FileNotFoundError:
        raise fail(folder / rel, "missing", REPACK) from None
    except PathError as err:
        raise fail(folder / rel, f"not a regular file of the pack ({err})", REPACK) from None


class _Hashed(io.RawIOBase):
    """A file's bytes as they are read, hashed (SHA-256) and counted."""

    def __init__(self, raw):
        self.raw, self.sha, self.size = raw, hashlib.sha256(), 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self.raw.readinto(buffer)
        if n:
            self.sha.update(memoryview(buffer)[:n])
            self.size += n
        return n or 0


def file_record(path: Path) -> dict:
    """``{"sha256": <hex>, "bytes": <size>}`` of a file: what ``pack.json`` records of each of the pack's files."""
    sha, size = hashlib.sha256(), 0
    with open_regular(path) as f:
        while chunk := f.read(CHUNK):
            sha.update(chunk)
            size += len(chunk)
    return {"sha256": sha.hexdigest(), "bytes": size}


def write_tensors(path: Path, tensors: dict[str, torch.Tensor]) -> dict:
    """Write ``tensors`` to ``path`` as safetensors, xz-compressed when ``path`` ends in ``.xz`` (the plain file is
    written beside it first, then streamed through the compressor and removed); returns its :func:`file_record`."""
    from safetensors.torch import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
    if not path.name.endswith(COMPRESSED):
        save_file(tensors, str(path))
        return file_record(path)
    plain = path.with_name(path.name[:-len(COMPRESSED)] + f".{os.getpid()}.tmp")
    try:
        save_file(tensors, str(plain))
        with open(plain, "rb") as src, lzma.open(path, "wb", preset=PRESET) as dst:
            while chunk := src.read(CHUNK):
                dst.write(chunk)
    finally:
        plain.unlink(missing_ok=True)
    return file_record(path)


def _exactly(stream, n: int, path: Path, what: str) -> bytes:
    data = stream.read(n)
    if len(data) != n:
        raise fail(path, f"truncated: the file ends inside {what}", REPACK)
    return data


def _entries(path: Path, header: dict) -> list[tuple[str, torch.dtype, tuple, int, int]]:
    """The header's tensors as (name, dtype, shape, begin, end), in the order of their bytes, checked: known dtypes,
    shapes of non-negative integers, byte ranges that match them and follow each other with no gap."""
    out = []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        ok = isinstance(entry, dict) and entry.get("dtype") in DTYPES and isinstance(entry.get("shape"), list) \
            and all(type(s) is int and 0 <= s < 2 ** 40 for s in entry["shape"]) \
            and isinstance(entry.get("data_offsets"), list) and len(entry["data_offsets"]) == 2 \
            and all(type(o) is int for o in entry["data_offsets"])
        if not ok:
            raise fail(path, f"tensor {name!r}: not a safetensors entry (dtype, shape, data_offsets)", REPACK)
        dtype, shape = DTYPES[entry["dtype"]], tuple(entry["shape"])
        begin, end = entry["data_offsets"]
        numel = 1
        for s in shape:
            numel *= s
        if end - begin != numel * torch.empty((), dtype=dtype).element_size() or begin < 0:
            raise fail(path, f"tensor {name!r}: its bytes do not match its shape {shape}", REPACK)
        out.append((name, dtype, shape, begin, end))
    out.sort(key=lambda e: (e[3], e[4]))
    at = 0
    for name, _, _, begin, end in out:
        if begin != at:
            raise fail(path, f"tensor {name!r}: its bytes do not follow the previous tensor's", REPACK)
        at = end
    return out


def _fill(stream, tensor: torch.Tensor, path: Path, name: str) -> None:
    """``tensor``'s bytes read from ``stream`` into it, a chunk at a time."""
    view = tensor.reshape(-1).view(torch.uint8).numpy() if tensor.numel() else None
    at, total = 0, tensor.numel() * tensor.element_size()
    while at < total:
        chunk = stream.read(min(CHUNK, total - at))
        if not chunk:
            raise fail(path, f"truncated: the file ends inside tensor {name!r}", REPACK)
        view[at:at + len(chunk)] = memoryview(chunk)
        at += len(chunk)


def read_tensors(folder: Path, relative: str, expect: Expect, sha256: str | None = None,
                 size: int | None = None) -> dict[str, torch.Tensor]:
    """The tensors of the pack's safetensors file ``relative`` (module docstring): ``expect(name, dtype, shape)`` is
    asked of every tensor before any is allocated; with ``sha256`` (and ``size``) the file's bytes must match them."""
    path = folder / relative
    with open_member(folder, relative) as raw:
        hashed = _Hashed(raw)
        try:
            stream = lzma.LZMAFile(hashed) if relative.endswith(COMPRESSED) else io.BufferedReader(hashed, CHUNK)
            tensors = _read_stream(stream, path, expect)
            if stream.read(1):
                raise fail(path, "bytes after the last tensor", REPACK)
            while hashed.read(CHUNK):  # the rest of the file (after xz's end), hashed
                pass
        except (lzma.LZMAError, EOFError, OSError, UnicodeDecodeError) as err:
            raise fail(path, f"damaged or truncated ({type(err).__name__}: {err})", REPACK) from None
    if (sha256 is not None and hashed.sha.hexdigest() != sha256) or (size is not None and hashed.size != size):
        raise fail(path, "its bytes do not match the checksum pack.json records of them (changed or damaged since "
                         "`autorater pack` wrote them)", REPACK)
    return tensors


def _read_stream(stream, path: Path, expect: Expect) -> dict[str, torch.Tensor]:
    n = int.from_bytes(_exactly(stream, 8, path, "the header's length"), "little")
    if not 2 <= n <= MAX_HEADER:
        raise fail(path, f"a safetensors header of {n} bytes (at most {MAX_HEADER})", REPACK)
    try:
        header = json.loads(_exactly(stream, n, path, "the header").decode("utf-8"))
    except (ValueError, RecursionError):
        raise fail(path, "the safetensors header is not JSON", REPACK) from None
    if not isinstance(header, dict):
        raise fail(path, "the safetensors header is not a JSON object", REPACK)
    entries = _entries(path, header)
    for name, dtype, shape, _, _ in entries:
        expect(name, dtype, shape)
    out = {}
    for name, dtype, shape, _, _ in entries:
        out[name] = torch.empty(shape, dtype=dtype)
        _fill(stream, out[name], path, name)
    return out


__all__ = ["COMPRESSED", "DTYPES", "REPACK", "PackError", "fail", "file_record", "open_member", "read_tensors",
           "write_tensors"]
