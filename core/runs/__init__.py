"""The run store: training runs on disk, started as background worker processes.

One folder per run under ``$RIMSCOPE_HOME/runs`` (default ``~/.rimscope/runs``)::

    runs/<run_id>/config.json        training config, owner (session id), label, data folder (schema.RunConfig)
    runs/<run_id>/status.json        status, pid, timestamps, heartbeat, progress, final metrics (schema.RunStatus)
    runs/<run_id>/metrics.jsonl      one JSON line per iteration / periodic evaluation (events)
    runs/<run_id>/model.safetensors  weights (completed or stopped runs, uploads)
    runs/<run_id>/model.json         checkpoint metadata (core.checkpoint format)
    runs/<run_id>/stop               present once a stop was requested
    runs/<run_id>/ckpt/              training checkpoints (core.resume) while the run is unfinished
    runs/<run_id>/worker.log         the worker's stdout/stderr

Statuses: queued, running, completed, stopped, diverged, interrupted, failed, uploaded.

Everything a page needs is on disk, so runs survive page reloads and server restarts, and
several Streamlit sessions (or processes) can share one store. The modules:

* ``schema``: file names, limits, run ids, the typed ``RunConfig`` / ``RunStatus`` / ``RunInfo``;
* ``store``: ``RunStore``, creating, reading, stopping, resuming and deleting runs;
* ``queue``: the store lock (``filelock``), worker liveness (``psutil``) and ``pump()``, which
  starts queued runs as detached workers (``python -m core.runs worker <run_dir>``) while
  fewer than ``max_concurrent`` run, and marks runs whose worker died (process gone, or no
  heartbeat for ``STALE_AFTER_S``) "interrupted", keeping their metrics so far;
* ``worker``: ``run_worker``, a thin wrapper around ``core.train.train``; a resumed run continues
  from the newest intact training checkpoint in ``ckpt/`` and ends bit-identical to an
  uninterrupted run;
* ``events``: the one ``metrics.jsonl`` writer and reader.

CLI (``core/runs/__main__.py``)::

    python -m core.runs list            # the runs in the store
    python -m core.runs pump            # start queued runs, mark dead ones
    python -m core.runs stop <run_id>
    python -m core.runs resume <run_id>  # an interrupted or stopped run continues from its checkpoint
    python -m core.runs worker <run_dir>   # what pump() starts; not for people

Nothing here imports torch at import time, so a worker writes its first heartbeat before it
spends seconds importing it. ``parse_seeds``, ``training_data_plan`` and ``DataPlan`` live elsewhere (core.config,
core.data) and are loaded on first use; validation is ``TrainConfig.validate`` only.
"""

from __future__ import annotations

from .cli import main
from .events import MetricsWriter, read_metrics_file
from .queue import process_started, worker_alive
from .schema import ACTIVE, FINISHED, RESUMABLE, STATUSES, WITH_WEIGHTS, RunConfig, RunInfo, RunStatus, RunStoreError
from .store import RunStore, default_max_concurrent, default_root
from .worker import run_worker

_ELSEWHERE = {"parse_seeds": "core.config", "training_data_plan": "core.data", "DataPlan": "core.data"}


def __getattr__(name: str):
    """Names that moved out (they import torch), loaded when first asked for."""
    if name in _ELSEWHERE:
        import importlib

        return getattr(importlib.import_module(_ELSEWHERE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ACTIVE", "FINISHED", "RESUMABLE", "STATUSES", "WITH_WEIGHTS", "DataPlan", "MetricsWriter", "RunConfig",
           "RunInfo", "RunStatus", "RunStore", "RunStoreError", "default_max_concurrent",
           "default_root", "main", "parse_seeds", "process_started", "read_metrics_file",
           "run_worker", "training_data_plan", "worker_alive"]
