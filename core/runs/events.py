"""``metrics.jsonl``: one JSON line per training event, one writer and one reader.

The worker's training callback writes through :class:`MetricsWriter` (appended, flushed line
by line, strict JSON: a NaN loss becomes ``null``); the pages read through
:func:`read_metrics_file`, which is incremental (only what was appended since its last call)
and tolerant: a last line without its newline (a writer killed mid-line, or one still
writing) is left for later and never parsed. Torch-free.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from ..fileio import atomic_write_bytes, json_safe

KINDS = ("iter", "eval")  # the events that are metrics (a "state" event is not one)
METRIC_KEYS = ("iteration", "loss", "batch_acc", "eval_iteration", "test_acc", "test_loss")
_cache: dict[str, tuple] = {}  # path -> (inode, offset, data)
_cache_lock = threading.Lock()


class MetricsWriter:
    """Appends training events to a ``metrics.jsonl``; returns each line as written (sanitised)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._f = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def write(self, event: dict) -> dict:
        line = json_safe(dict(event))
        self._f.write(json.dumps(line, allow_nan=False) + "\n")
        self._f.flush()
        return line

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()

    def __enter__(self) -> MetricsWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _empty() -> dict:
    return {k: [] for k in METRIC_KEYS}


def _number_or_none(v) -> float | None:
    """``v`` as a float when it is a number (a non-finite loss too: a diverging run shows it), else None."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def parse_line(raw: bytes) -> dict | None:
    """One line as an event dict with an int ``iteration``, or None (not JSON, not an event)."""
    try:
        ev = json.loads(raw)
    except ValueError:
        return None
    return ev if isinstance(ev, dict) and isinstance(ev.get("iteration"), int) else None


def _add(ev: dict, data: dict) -> None:
    if ev.get("kind") == "iter":
        data["iteration"].append(ev["iteration"])
        data["loss"].append(_number_or_none(ev.get("loss")))
        data["batch_acc"].append(_number_or_none(ev.get("batch_acc")))
    elif ev.get("kind") == "eval":
        data["eval_iteration"].append(ev["iteration"])
        data["test_acc"].append(_number_or_none(ev.get("test_acc")))
        data["test_loss"].append(_number_or_none(ev.get("test_loss")))


def read_metrics_file(path: str | Path) -> dict:
    """Lists ``iteration, loss, batch_acc`` and ``eval_iteration, test_acc, test_loss``.

    Reads only what was appended since the last call; a torn last line waits for its newline.
    """
    path = Path(path)
    key = str(path)
    try:
        st = path.stat()
    except OSError:
        forget(path)
        return _empty()
    with _cache_lock:
        inode, offset, data = _cache.get(key, (None, 0, None))
        if data is None or inode != st.st_ino or st.st_size < offset:
            inode, offset, data = st.st_ino, 0, _empty()
        if st.st_size > offset:
            with open(path, "rb") as f:
                f.seek(offset)
                chunk = f.read(st.st_size - offset)
            end = chunk.rfind(b"\n")
            if end >= 0:
                for raw in chunk[: end + 1].splitlines():
                    ev = parse_line(raw)
                    if ev is not None:
                        _add(ev, data)
                offset += end + 1
        _cache[key] = (inode, offset, data)
        return {k: list(v) for k, v in data.items()}


def forget(path: str | Path) -> None:
    """Drop the reader's cache of ``path`` (the file was deleted or rewritten)."""
    with _cache_lock:
        _cache.pop(str(Path(path)), None)


def truncate_metrics(path: str | Path, upto: int) -> None:
    """Keep the events up to iteration ``upto`` (a resumed run's past), atomically; a torn
    last line and lines that are not events go."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError:
        return
    if not raw:
        return
    keep = [line + b"\n" for line in raw.split(b"\n")[:-1]  # the part after the last newline is torn
            if (ev := parse_line(line)) is not None and ev["iteration"] <= upto]
    data = b"".join(keep)
    if data != raw:
        atomic_write_bytes(path, data, mkdir=False)
        forget(path)
