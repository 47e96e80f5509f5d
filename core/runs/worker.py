"""The worker: one queued run, trained to its end in this process by ``core.training.loop.train``.

What it adds around the training loop: claiming the run under the store lock (a run is
never trained twice), a heartbeat and progress in ``status.json`` (:class:`StatusWriter`),
the metrics through ``events.MetricsWriter``, the stop file and SIGTERM as a stop signal,
resuming from the newest training state, and the final training state. Torch is imported
only after the first heartbeat.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from pathlib import Path

from ..errors import RimscopeError
from ..fileio import read_json, write_json
from .events import MetricsWriter, truncate_metrics
from .progress import FINAL_EVALUATION, STOPPING, training_text
from .queue import process_started, worker_alive
from .schema import (
    CONFIG_FILE,
    HEARTBEAT_S,
    METRICS_FILE,
    STATE_DIR,
    STATUS_EVERY_S,
    STATUS_FILE,
    STOP_FILE,
    WEIGHTS_STEM,
    RunConfig,
    RunStatus,
    check_run_id,
    now_iso,
    scalars,
)
from .store import RunStore


class _Terminated(Exception):
    pass


class StatusWriter:
    """The worker's view of status.json: progress in memory, written at most every second,
    a heartbeat thread, and nothing written after the final status."""

    def __init__(self, path: Path, status: RunStatus):
        self.path, self.st = path, status
        self.lock = threading.RLock()  # a SIGTERM handler may raise inside write()
        self.last_write = 0.0
        self.final = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="rimscope-heartbeat", daemon=True)

    def start(self):
        self._thread.start()

    def _beat(self):
        while not self._stop.wait(HEARTBEAT_S):
            self.write(force=True)

    def write(self, force: bool = False, final: bool = False, **changes):
        with self.lock:
            if self.final:
                return
            self.st.update(**changes)
            now = time.time()
            if not (force or final) and now - self.last_write < STATUS_EVERY_S:
                return
            self.st.update(heartbeat=now, updated=now_iso(now))
            if final:
                self.st.finished = now_iso(now)
                self.final = True
            write_json(self.path, self.st.to_dict(), mkdir=False)
            self.last_write = now

    def close(self):
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)


def _claim(store: RunStore, run_id: str, run_dir: Path) -> tuple[StatusWriter | None, str]:
    """(the run's status writer, "running") once this process owns the run; (None, its status)
    when another does."""
    with store.lock(timeout=120):
        st = store.read_status(run_id)
        mine = st.status == "running" and st.pid == os.getpid()
        # queued (a pump that died before recording us), ours, or running with its worker gone
        if not (st.status == "queued" or mine or (st.status == "running"
                                                  and not worker_alive(st.pid, run_id, st.pid_started))):
            print(f"worker {os.getpid()} did not claim {run_id} (status {st.status}, pid {st.pid})", flush=True)
            return None, st.status
        print(f"worker {os.getpid()} claimed {run_id}", flush=True)
        writer = StatusWriter(run_dir / STATUS_FILE, st)
        writer.write(force=True, status="running", pid=os.getpid(), pid_started=process_started(os.getpid()),
                     host=socket.gethostname(), started=st.started or now_iso(), message="loading data")
    return writer, "running"


def _latest(resume_from) -> dict:
    """Last loss, batch accuracy and test accuracy of a training state."""
    latest = {}
    if resume_from is not None:
        h, e = resume_from.history, resume_from.evals
        if h.get("loss"):
            latest.update(loss=h["loss"][-1], batch_acc=h["batch_acc"][-1])
        if e.get("test_acc"):
            latest.update(test_acc=e["test_acc"][-1], test_loss=e["test_loss"][-1])
    return latest


def _train(run_dir: Path, run_id: str, writer: StatusWriter, state: dict) -> str:
    """Data, resume point, training, training state; the final status (written)."""
    stop_file = run_dir / STOP_FILE
    run_cfg = RunConfig.from_dict(read_json(run_dir / CONFIG_FILE))
    from ..training.config import TrainConfig
    from ..training.lifecycle import finish_run, load_run_data
    from ..training.loop import train
    from ..training.state import latest_state

    cfg = TrainConfig.from_dict(dict(run_cfg.train_config)).validate()
    if stop_file.exists():
        writer.write(final=True, status="stopped", message="stopped before training started")
        return "stopped"
    cfg, train_data, test_data, note = load_run_data(cfg, run_cfg.data_dir or None)
    ckpt_dir = run_dir / STATE_DIR
    resume_from = latest_state(ckpt_dir, on_damaged=lambda p, e: print(f"skipping a damaged training state: {e}",
                                                                          flush=True))
    start = resume_from.iteration if resume_from is not None else 0
    truncate_metrics(run_dir / METRICS_FILE, start)  # what the killed worker did after its training state
    train_msg = training_text(train_data.source, len(train_data))
    if resume_from is not None:
        train_msg += f"; resumed from iteration {start}"
    writer.write(force=True, message=train_msg, total=cfg.iterations, data_source=train_data.source,
                 n_train=len(train_data), iteration=start, latest=_latest(resume_from))

    with MetricsWriter(run_dir / METRICS_FILE) as metrics:
        def callback(ev: dict):
            if ev["kind"] == "state":  # not a metric: shown in the status only
                writer.write(force=True, state={"iteration": ev["iteration"], "ok": ev["ok"]},
                             message=train_msg if ev["ok"] else f"training goes on, but {ev['message']}")
                return
            line = metrics.write(ev)
            latest = dict(writer.st.latest)
            if ev["kind"] == "iter":
                latest.update(loss=line.get("loss"), batch_acc=line.get("batch_acc"))
                if ev["iteration"] >= cfg.iterations:  # the last one: the final evaluation comes next
                    writer.write(force=True, iteration=ev["iteration"], latest=latest, message=FINAL_EVALUATION)
                else:
                    writer.write(iteration=ev["iteration"], latest=latest)
            else:
                latest.update(test_acc=line.get("test_acc"), test_loss=line.get("test_loss"))
                writer.write(force=True, latest=latest)

        def should_stop() -> bool:
            if not (state["term"] or stop_file.exists()):
                return False
            writer.write(force=True, message=STOPPING)  # the evaluation and the save take a while
            return True

        state["phase"] = "training"
        result = train(cfg, train_data, test_data, callback=callback, should_stop=should_stop,
                       state_dir=ckpt_dir, resume_from=resume_from, state_extra={"run_id": run_id})
        state["phase"] = "finishing"
    done = int(result.metrics.get("iterations_done", 0))
    status, message = result.status, result.message
    if status == "stopped" and state["term"] and not stop_file.exists():
        message = f"stopped by a termination signal after {done} iterations"
    if status != "diverged" and done >= 1:
        writer.write(force=True, message="saving the weights")
    finished = finish_run(cfg, result, train_data, test_data, note, stem=run_dir / WEIGHTS_STEM, state_dir=ckpt_dir,
                          extra_meta={"run_id": run_id, "run_name": run_id}, message=message)
    status, message = finished.status, finished.message
    writer.write(final=True, status=status, message=message, iteration=done, metrics=scalars(result.metrics))
    return status


def run_worker(run_dir: str | Path, install_signals: bool = False) -> str:
    """Run one queued run to its end in this process; returns the final status.

    ``pump()`` runs this in a fresh process (``python -m core.runs worker``); tests may call
    it directly. Claims the run under the store lock first, so a run is never trained twice.
    """
    run_dir = Path(run_dir).resolve()
    run_id = check_run_id(run_dir.name)
    writer, status = _claim(RunStore(root=run_dir.parent), run_id, run_dir)
    if writer is None:
        return status
    writer.start()
    state = {"phase": "starting", "term": False}
    old_handler = None
    if install_signals:
        def on_term(signum, frame):
            state["term"] = True
            if state["phase"] == "starting":
                raise _Terminated()
        old_handler = signal.signal(signal.SIGTERM, on_term)
    try:
        return _train(run_dir, run_id, writer, state)
    except _Terminated:
        writer.write(final=True, status="interrupted", message="the worker was terminated before training started")
        return "interrupted"
    except RimscopeError as exc:
        writer.write(final=True, status="failed", message=str(exc), detail=exc.detail)
        return "failed"
    except Exception as exc:  # noqa: BLE001 - reported to the user, traceback in worker.log
        import traceback

        traceback.print_exc()
        writer.write(final=True, status="failed", message=f"unexpected problem ({type(exc).__name__}: {exc})")
        return "failed"
    finally:
        writer.close()
        if install_signals and old_handler is not None:
            signal.signal(signal.SIGTERM, old_handler)
