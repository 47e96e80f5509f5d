"""Scratch buffers reused between training steps by the hand-written backward passes.

``rim`` and ``rmc`` run their whole recurrence as one autograd node whose forward writes what
the backward needs into a preallocated workspace (a dict of tensors). Allocating those ~100 MB
afresh every step costs more in page faults than the arithmetic they hold, so finished
workspaces go back to a small pool keyed by shape, dtype and device. A workspace belongs to one
forward until its backward has run; a forward whose backward never runs simply drops its own.
Both autograd nodes also share ``outputs_with_trace``: asked for a trace, their forward returns
it next to the result, so a traced training step runs the recurrence once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable


class WorkspacePool:
    """At most one free workspace per key, for at most ``max_keys`` keys (oldest key dropped)."""

    def __init__(self, max_keys: int = 4):
        self.max_keys = max_keys
        self._free: dict = {}
        self._lock = threading.Lock()

    def take(self, key: Hashable, build: Callable[[], dict]) -> dict:
        """A free workspace for ``key``, or a new one from ``build()``; ``ws["key"]`` is set."""
        with self._lock:
            free = self._free.get(key)
            if free:
                return free.pop()
        ws = build()
        ws["key"] = key
        return ws

    def give_back(self, ws: dict) -> None:
        with self._lock:
            key = ws["key"]
            if key not in self._free and len(self._free) >= self.max_keys:
                self._free.pop(next(iter(self._free)))
            free = self._free.setdefault(key, [])
            if not free:
                free.append(ws)


def claim(ctx, model: str) -> dict:
    """The workspace a forward left on ``ctx``, handed to its backward exactly once."""
    ws, ctx.ws = ctx.ws, None
    if ws is None:
        raise RuntimeError(f"{model}: backward through the same forward twice is not supported "
                           "(retain_graph); run the forward again")
    return ws


def outputs_with_trace(ctx, out, trace: dict | None) -> tuple:
    """An autograd node's outputs: ``out``, then the trace tensors (if any), which are marked
    non-differentiable (the backward receives no gradient for them and returns none)."""
    stacked = tuple(trace.values()) if trace is not None else ()
    ctx.mark_non_differentiable(*stacked)
    return (out, *stacked)
