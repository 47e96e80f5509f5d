"""Atomic file writes and strict JSON, torch-free (the run store's workers import this before torch).

A temporary file in the same folder, fsync, rename, then fsync of the folder: a reader
never sees half a file, and a crash leaves either the old file or the new one. JSON is
written strict (``allow_nan=False``): NaN and infinities (a diverged loss) become ``null``
through :func:`finite`, the one sanitiser the run store, models and records share.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (not every file system lets a folder be synced)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write_bytes(path: Path, data: bytes, write: Callable | None = None, mkdir: bool = True) -> None:
    """Write ``data`` to ``path`` atomically. ``write(f, data)`` does the writing (default
    ``f.write``): one place where a test can make a write fail midway."""
    path = Path(path)
    if mkdir:
        path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            (write or (lambda f_, d: f_.write(d)))(f, data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def os_error_reason(exc: OSError) -> str:
    """A failed write's cause in words ("the disk is full (No space left on device)")."""
    import errno

    hint = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up",
            errno.EROFS: "the file system is read-only", errno.EACCES: "permission denied",
            errno.EPERM: "permission denied"}.get(exc.errno)
    detail = exc.strerror or str(exc) or type(exc).__name__
    return f"{hint} ({detail})" if hint else detail


def json_safe(obj):
    """``obj`` as strict-JSON data: NaN/inf -> None, numpy/torch scalars -> Python numbers,
    arrays -> lists, tuples -> lists, keys -> str; recurses into dicts and lists."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, (str, bytes, bool, int)) or obj is None:
        return obj
    if hasattr(obj, "tolist") and getattr(obj, "ndim", 0):  # an array
        return json_safe(obj.tolist())
    if hasattr(obj, "item"):  # a numpy or torch scalar
        try:
            return json_safe(obj.item())
        except (TypeError, ValueError):
            return str(obj)
    return obj


def json_bytes(obj, indent: int | None = 1) -> bytes:
    """Strict JSON of ``obj`` after :func:`finite`."""
    return json.dumps(json_safe(obj), indent=indent, allow_nan=False).encode()


def write_json(path: Path, obj, mkdir: bool = True) -> None:
    """``obj`` as strict JSON at ``path``, atomically."""
    atomic_write_bytes(Path(path), json_bytes(obj), mkdir=mkdir)


def read_json(path: Path):
    """Parsed JSON, or None when the file is missing or unreadable."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


_DERIVED: dict[tuple, tuple[tuple[int, int, int], object]] = {}


def derived_from_json(path: Path, derive: Callable[[dict], object], name: str, owner: Callable | None = None):
    """``derive(record)`` of the JSON object at ``path``, remembered per process until the file
    changes (its modification time, size or inode): the reports read the same few hundred run
    records many times over, and parsing them is most of their cost. A value is kept under the
    file, ``name`` and the code of ``owner`` (default ``derive``), so another derivation, or a
    module reloaded after an edit, never gets it. None when the file is missing, unreadable or not
    a JSON object. The value is shared between callers: treat it as read-only (copy before
    changing it)."""
    path = Path(os.path.abspath(path))
    try:
        st = path.stat()
    except OSError:
        return None
    fn = owner or derive
    sig, key = (st.st_mtime_ns, st.st_size, st.st_ino), (str(path), name, getattr(fn, "__code__", fn))
    hit = _DERIVED.get(key)
    if hit is not None and hit[0] == sig:
        return hit[1]
    record = read_json(path)
    value = derive(record) if isinstance(record, dict) else None
    _DERIVED[key] = (sig, value)
    return value
