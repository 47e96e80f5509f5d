"""The run store: training runs on disk, started as background worker processes.

One folder per run under ``$RIMSCOPE_HOME/runs`` (default ``~/.rimscope/runs``)::

    runs/<run_id>/config.json        training config, owner (who started it), label, data folder (schema.RunConfig)
    runs/<run_id>/status.json        status, pid, timestamps, heartbeat, progress, final metrics (schema.RunStatus)
    runs/<run_id>/metrics.jsonl      one JSON line per iteration / periodic evaluation (events)
    runs/<run_id>/model.safetensors  weights (completed or stopped runs, uploads)
    runs/<run_id>/model.json         model metadata (core.training.weights format)
    runs/<run_id>/stop               present once a stop was requested
    runs/<run_id>/ckpt/              training states (core.training.state) while the run is unfinished
    runs/<run_id>/worker.log         the worker's stdout/stderr

Statuses: queued, running, completed, stopped, diverged, interrupted, failed, uploaded.

Who may stop, resume or delete a run: ``schema.may_act``. The command line and a dashboard
without sign-in act for the machine's owner (every run); a dashboard with sign-in passes the
signed-in user's id, which acts only on the runs it started.

Everything a page needs is on disk, so runs survive page reloads and server restarts, and
several Streamlit sessions (or processes) can share one store. The modules:

* ``schema``: file names, limits, run ids, the typed ``RunConfig`` / ``RunStatus`` / ``RunInfo``;
* ``store``: ``RunStore``, creating, reading, stopping, resuming and deleting runs;
* ``queue``: the store lock (``filelock``), worker liveness (``psutil``) and ``pump()``, which
  starts queued runs as detached workers (``python -m core.runs worker <run_dir>``) while
  fewer than ``max_concurrent`` run, and marks runs whose worker died (process gone, or no
  heartbeat for ``STALE_AFTER_S``) "interrupted", keeping their metrics so far;
* ``worker``: ``run_worker``, a thin wrapper around ``core.training.loop.train``; a resumed run continues
  from the newest intact training state in ``ckpt/`` and ends bit-identical to an
  uninterrupted run;
* ``events``: the one ``metrics.jsonl`` writer and reader;
* ``progress``: what a run's card says: its progress line (the final evaluation after the last
  iteration, a stop under way), what a stop came to, and which weights a finished run keeps, with
  a warning when its final test accuracy is far below the best periodic one;
* ``compare``: a run as the Compare page draws it beside the shipped methods (its curves, a
  table row with its final test error and budget, why it is not on an equal footing with them).

CLI (``core/runs/__main__.py``)::

    python -m core.runs list            # the runs in the store
    python -m core.runs pump            # start queued runs, mark dead ones
    python -m core.runs stop <run_id>
    python -m core.runs resume <run_id>  # an interrupted or stopped run continues from its training state
    python -m core.runs worker <run_dir>   # what pump() starts; not for people

Nothing here imports torch at import time, so a worker writes its first heartbeat before it
spends seconds importing it; validation is ``TrainConfig.validate`` (core.training.config) only.
"""
