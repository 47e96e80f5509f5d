"""``RunStore``: runs on disk, created complete or not at all, read without locks, deleted whole.

A run folder is built under a hidden name and renamed into place, and removed by renaming
it away first, so a reader never sees half a run. Every id coming in is checked against
``RUN_ID_RE`` before it touches a path. The queue (the lock, ``pump()``) is ``QueueMixin``.
Torch-free until an upload is checked.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from .. import paths
from ..errors import ConfigError
from ..fileio import atomic_write_bytes, json_safe, read_json, write_json
from .events import forget, read_metrics_file
from .queue import QueueMixin, forget_child, worker_alive
from .schema import (
    CONFIG_FILE,
    MAX_QUEUED,
    MAX_RUNS,
    METRICS_FILE,
    RESUMABLE,
    RUN_ID_RE,
    STATE_DIR,
    STATUS_FILE,
    STOP_FILE,
    WEIGHTS_STEM,
    WITH_WEIGHTS,
    RunConfig,
    RunInfo,
    RunPermissionError,
    RunStatus,
    RunStoreError,
    check_run_id,
    clean_text,
    may_act,
    new_run_id,
    now_iso,
    scalars,
)

if TYPE_CHECKING:  # pragma: no cover
    from ..training.config import TrainConfig


def default_root() -> Path:
    return paths.runs_root()


def default_max_concurrent() -> int:
    """``RIMSCOPE_MAX_CONCURRENT`` (default 1); 0 pauses the queue (runs stay queued)."""
    return paths.max_concurrent()


class RunStore(QueueMixin):
    """Runs on disk plus the worker queue. Cheap to create; holds no open files.

    ``max_concurrent``: workers running at once (default ``RIMSCOPE_MAX_CONCURRENT`` or 1);
    0 pauses the queue.
    """

    def __init__(self, root: str | Path | None = None, max_concurrent: int | None = None):
        self.root = Path(root).expanduser() if root else default_root()
        self.max_concurrent = (max(0, int(max_concurrent)) if max_concurrent is not None
                               else default_max_concurrent())
        self.root.mkdir(parents=True, exist_ok=True)

    # -- paths ----------------------------------------------------------------------------
    def run_dir(self, run_id: str) -> Path:
        return self.root / check_run_id(run_id)

    def _existing_dir(self, run_id: str) -> Path:
        d = self.run_dir(run_id)
        if not (d / CONFIG_FILE).is_file():
            raise RunStoreError(f"No run {run_id} in the store.")
        return d

    def _run_ids(self) -> list[str]:
        try:
            names = [p.name for p in self.root.iterdir()]
        except OSError:
            return []
        return [n for n in names if RUN_ID_RE.fullmatch(n)]

    # -- reading --------------------------------------------------------------------------
    def read_status(self, run_id: str) -> RunStatus:
        return RunStatus.from_dict(read_json(self.run_dir(run_id) / STATUS_FILE))

    def read_config(self, run_id: str) -> RunConfig:
        return RunConfig.from_dict(read_json(self.run_dir(run_id) / CONFIG_FILE))

    def _info(self, run_id: str) -> RunInfo | None:
        doc = read_json(self.root / run_id / CONFIG_FILE)
        if not isinstance(doc, dict):
            return None  # being deleted, or not a run
        info = RunInfo.of(run_id, RunConfig.from_dict(doc), self.read_status(run_id))
        if info.status == "running":
            info.stop_requested = (self.root / run_id / STOP_FILE).exists()
        return info

    def list_runs(self, owner: str | None = None) -> list[RunInfo]:
        """Every run, newest first (``owner`` given: only that owner's)."""
        out = []
        for rid in self._run_ids():
            info = self._info(rid)
            if info is not None and (owner is None or info.owner == owner):
                out.append(info)
        out.sort(key=lambda r: (r.created_ts, r.run_id), reverse=True)
        return out

    def get(self, run_id: str) -> RunInfo | None:
        return self._info(check_run_id(run_id))

    def read_metrics(self, run_id: str) -> dict:
        return read_metrics_file(self.run_dir(run_id) / METRICS_FILE)

    def weights_stem(self, run_id: str) -> Path | None:
        """``runs/<id>/model`` when the run is completed, stopped or uploaded and has weights."""
        d = self.run_dir(run_id)
        if self.read_status(run_id).status not in WITH_WEIGHTS:
            return None
        stem = d / WEIGHTS_STEM
        if stem.with_suffix(".safetensors").is_file() and stem.with_suffix(".json").is_file():
            return stem
        return None

    def _queued(self) -> int:
        return sum(1 for r in self._run_ids() if self.read_status(r).status == "queued")

    # -- writing --------------------------------------------------------------------------
    def _check_capacity(self, queued_extra: int = 0) -> None:
        ids = self._run_ids()
        if len(ids) >= MAX_RUNS:
            raise RunStoreError(f"The run store holds {len(ids)} runs (at most {MAX_RUNS}); delete some first.")
        if queued_extra:
            queued = self._queued()
            if queued + queued_extra > MAX_QUEUED:
                raise RunStoreError(f"{queued} runs are already waiting (at most {MAX_QUEUED}); "
                                    "wait for them or stop some.")

    def _create(self, cfg: RunConfig, st: RunStatus, files: dict[str, bytes] | None = None) -> str:
        """Create a run folder complete or not at all (built under a hidden name, then renamed)."""
        for _ in range(10):
            run_id = new_run_id()
            if not (self.root / run_id).exists():
                break
        else:  # pragma: no cover
            raise RunStoreError("Could not find a free run id.")
        tmp = self.root / f".new-{run_id}"
        try:
            tmp.mkdir()
            now = time.time()
            cfg.update(run_id=run_id, created=now_iso(now), created_ts=now)
            st.update(created=now_iso(now), updated=now_iso(now))
            for name, data in (files or {}).items():
                atomic_write_bytes(tmp / name, data, mkdir=False)
            (tmp / METRICS_FILE).touch()
            write_json(tmp / STATUS_FILE, st.to_dict(), mkdir=False)
            write_json(tmp / CONFIG_FILE, cfg.to_dict(), mkdir=False)
            os.rename(tmp, self.root / run_id)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return run_id

    def submit(self, config: TrainConfig, owner: str = "", label: str = "",
               data_dir: str | Path | None = None) -> str:
        """Queue a training run; returns its id. ConfigError on bad settings.

        ``threads`` left at None becomes 1 (env ``RIMSCOPE_WORKER_THREADS``): workers share
        the machine with the server and each other.
        """
        from ..training.config import TrainConfig

        if not isinstance(config, TrainConfig):
            raise ConfigError("A training run needs a TrainConfig.")
        config.validate()
        if data_dir:
            data_dir = str(Path(data_dir).expanduser())
            if not Path(data_dir).is_dir():
                raise ConfigError(f"The data folder {data_dir} does not exist.")
        if config.threads is None:
            config = dataclasses.replace(config, threads=paths.worker_threads())
        with self.lock():
            self._check_capacity(queued_extra=1)
            return self._create(
                RunConfig(kind="train", dataset=config.dataset, model=config.model, owner=clean_text(owner, 100),
                          label=clean_text(label), data_dir=data_dir or None, train_config=config.to_dict()),
                RunStatus(status="queued", total=config.iterations, message="waiting for a free worker"))

    @staticmethod
    def identical_run(config: TrainConfig, runs: list[RunInfo], data_dir: str | Path | None = None) -> RunInfo | None:
        """Among ``runs``, one that trains exactly what :meth:`submit` would queue for ``config``
        and ``data_dir`` (the same settings, so the same result), newest first; a failed run does
        not count (trying again is the point). None when there is none."""
        if config.threads is None:
            config = dataclasses.replace(config, threads=paths.worker_threads())
        wanted = json.loads(json.dumps(json_safe(config.to_dict())))  # as config.json holds it
        folder = str(Path(data_dir).expanduser()) if data_dir else None
        return next((r for r in sorted(runs, key=lambda r: (r.created_ts, r.run_id), reverse=True)
                     if r.status != "failed" and r.config == wanted and (r.data_dir or None) == folder), None)

    def import_weights(self, weights: bytes, meta: bytes, expected_dataset: str | None = None,
                          owner: str = "", label: str = "") -> str:
        """Store an uploaded model as a new run with status "uploaded".

        Validated in full (core.training.weights.check_upload: size limits, the weights, the model
        fits its data set) before anything is written; on any problem a WeightsError is
        raised and the store is unchanged.
        """
        from ..models.registry import count_parameters
        from ..training.weights import check_upload

        model, meta_doc = check_upload(weights, meta, expected_dataset=expected_dataset)
        seed = meta_doc.get("seed")
        tc = meta_doc.get("train_config") if isinstance(meta_doc.get("train_config"), dict) else {}
        metrics = scalars(meta_doc.get("metrics"))
        metrics.setdefault("parameters", count_parameters(model))
        with self.lock():
            self._check_capacity()
            return self._create(
                RunConfig(kind="upload", dataset=meta_doc["dataset"], model=meta_doc["model"],
                          seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
                          owner=clean_text(owner, 100), label=clean_text(label), train_config=json_safe(tc)),
                RunStatus(status="uploaded", total=0, message="uploaded model", metrics=metrics,
                          finished=now_iso()),
                files={WEIGHTS_STEM + ".safetensors": bytes(weights), WEIGHTS_STEM + ".json": bytes(meta)})

    def _set_status(self, run_id: str, **changes) -> RunStatus:
        st = self.read_status(run_id).update(**changes, updated=now_iso())
        write_json(self.run_dir(run_id) / STATUS_FILE, st.to_dict(), mkdir=False)
        return st

    def _check_actor(self, run_id: str, actor: str | None, what: str) -> None:
        """RunPermissionError unless ``actor`` may act on the run (``schema.may_act``)."""
        if not may_act(self.read_config(run_id).owner, actor):
            raise RunPermissionError(f"Run {run_id} was started by another user; only they can {what} it.")

    def request_stop(self, run_id: str, actor: str | None = None) -> str:
        """Ask a run to stop; returns its status afterwards.

        A running worker sees the stop file within one iteration and saves what it learned;
        a queued run is marked stopped at once; a finished run is left as it is.
        ``actor``: who asks (``schema.may_act``; None: the machine's owner); RunPermissionError
        when the run is another user's.
        """
        d = self._existing_dir(run_id)
        with self.lock():
            self._check_actor(run_id, actor, "stop")
            status = self.read_status(run_id).status
            if status == "queued":
                self._set_status(run_id, status="stopped", message="stopped before it started", finished=now_iso())
                return "stopped"
            if status == "running":
                (d / STOP_FILE).touch()
            return status

    def resume(self, run_id: str, actor: str | None = None) -> str:
        """Queue an interrupted or stopped run again; returns "queued".

        Its worker continues from the newest intact training state (or from the start
        when there is none yet: the same run, bit for bit). RunStoreError for other statuses;
        RunPermissionError when the run is not ``actor``'s (see ``request_stop``).
        """
        from ..training.state import last_iteration

        d = self._existing_dir(run_id)
        with self.lock():
            self._check_actor(run_id, actor, "resume")
            st = self.read_status(run_id)
            if st.status not in RESUMABLE or self.read_config(run_id).kind != "train":
                raise RunStoreError(f"Run {run_id} is {st.status}; only interrupted or stopped runs can be resumed.")
            queued = self._queued()
            if queued >= MAX_QUEUED:
                raise RunStoreError(f"{queued} runs are already waiting (at most {MAX_QUEUED}); "
                                    "wait for them or stop some.")
            (d / STOP_FILE).unlink(missing_ok=True)
            saved = last_iteration(d / STATE_DIR) or 0
            where = f"from iteration {saved}" if saved else "from the start (no training state yet)"
            self._set_status(run_id, status="queued", pid=None, pid_started=None, host=None, heartbeat=None,
                             finished="", iteration=saved, metrics={}, resumes=st.resumes + 1,
                             message=f"waiting for a free worker; resumes {where}")
        return "queued"

    def delete(self, run_id: str, actor: str | None = None) -> None:
        """Remove a run and its files. Refused while its worker runs (stop it first), and
        (RunPermissionError) when the run is not ``actor``'s (see ``request_stop``)."""
        d = self._existing_dir(run_id)
        with self.lock():
            self._check_actor(run_id, actor, "delete")
            st = self.read_status(run_id)
            if st.status == "running" and worker_alive(st.pid, run_id, st.pid_started):
                raise RunStoreError(f"Run {run_id} is still running; stop it first.")
            trash = self.root / f".trash-{run_id}-{secrets.token_hex(2)}"
            os.rename(d, trash)  # readers never see a half-deleted run
        forget_child(run_id)
        forget(d / METRICS_FILE)
        shutil.rmtree(trash, ignore_errors=True)
