"""Atomic file writes, torch-free (the run store's workers import this before torch).

A temporary file in the same folder, fsync, rename, then fsync of the folder: a reader
never sees half a file, and a crash leaves either the old file or the new one.
"""

from __future__ import annotations

import contextlib
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
