"""The queue: the store lock, worker liveness, and ``pump()``, which starts and reaps workers.

The lock is a ``filelock.FileLock`` on ``runs/.lock`` (an OS lock: it ends with the process
that held it, so a killed server never leaves the store locked), polled with a timeout and
re-entrant within a thread. Liveness comes from ``psutil``: a worker is alive while its
process exists, is no zombie, started when the status says it did (``pid_started``: a pid
the system gave to another process since is told apart), and runs this run's worker
(its command line names the run). Torch-free.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import filelock
import psutil

from .. import paths
from .events import read_metrics_file
from .schema import FINISHED, LOG_FILE, METRICS_FILE, STALE_AFTER_S, STATE_DIR, RunStoreError, now_iso

_children: dict[str, subprocess.Popen] = {}  # workers started by this process (reaped in pump)
_children_lock = threading.Lock()
_held = threading.local()  # roots whose lock this thread holds (re-entrant locking)
PID_START_SLACK_S = 1.0  # create times are rounded differently by different readers


def process_started(pid: int) -> float | None:
    """The start time of process ``pid`` (seconds since the epoch), or None when there is none."""
    try:
        return psutil.Process(pid).create_time()
    except (psutil.Error, ValueError, OverflowError):
        return None


def worker_alive(pid, run_id: str, started: float | None = None) -> bool:
    """True when ``pid`` is a live (not zombie) worker process for ``run_id``.

    ``started``: the process's start time as recorded; a process of that pid started at
    another time took over a reused pid and is not our worker.
    """
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        proc = psutil.Process(pid)
        if proc.status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
            return False
        if started is not None and abs(proc.create_time() - started) > PID_START_SLACK_S:
            return False  # the pid was reused
        if pid == os.getpid():
            return True  # a worker running in this process (tests)
        return run_id in " ".join(proc.cmdline())  # a pid reused by another program: not our worker
    except psutil.NoSuchProcess:  # ZombieProcess is one too
        return False
    except psutil.AccessDenied:
        return True  # exists, someone else's: assume alive and rely on the heartbeat


def forget_child(run_id: str) -> None:
    with _children_lock:
        _children.pop(run_id, None)


class QueueMixin:
    """The queue half of ``RunStore`` (``root``, ``max_concurrent`` and the reading and status
    methods come from the store)."""

    @contextlib.contextmanager
    def lock(self, timeout: float = 30.0):
        """Exclusive store lock (``filelock`` on runs/.lock); re-entrant within a thread."""
        held = getattr(_held, "roots", None)
        if held is None:
            held = _held.roots = set()
        key = str(self.root.resolve())
        if key in held:
            yield
            return
        lock = filelock.FileLock(self.root / ".lock")
        try:
            lock.acquire(timeout=timeout, poll_interval=0.02)
        except filelock.Timeout:
            raise RunStoreError("The run store is busy; try again in a moment.") from None
        held.add(key)
        try:
            yield
        finally:
            held.discard(key)
            lock.release()

    def _mark_dead(self, run_id: str, why: str) -> None:
        from ..training.state import last_iteration

        d = self.run_dir(run_id)
        st = self.read_status(run_id)  # re-read: the worker may have finished just before it ended
        if st.status != "running":
            return
        m = read_metrics_file(d / METRICS_FILE)
        it = m["iteration"][-1] if m["iteration"] else st.iteration
        latest = dict(st.latest)
        if m["loss"]:
            latest.update(loss=m["loss"][-1], batch_acc=m["batch_acc"][-1])
        if m["test_acc"]:
            latest.update(test_acc=m["test_acc"][-1], test_loss=m["test_loss"][-1])
        saved = last_iteration(d / STATE_DIR)
        where = (f"resume continues from its training state at iteration {saved}" if saved
                 else "resume starts it again (no training state yet)")
        self._set_status(run_id, status="interrupted", iteration=it, latest=latest, finished=now_iso(),
                         message=f"{why} after {it} iterations; the metrics so far are kept; {where}")
        for tmp in d.glob(".*.tmp"):  # half-written files of the dead worker
            tmp.unlink(missing_ok=True)

    def _spawn(self, run_id: str) -> subprocess.Popen:
        d = self.run_dir(run_id)
        env = dict(os.environ)
        env.setdefault("OMP_NUM_THREADS", "1")
        env.setdefault("MKL_NUM_THREADS", "1")
        with open(d / LOG_FILE, "ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", "core.runs", "worker", str(d)], cwd=str(paths.ROOT),
                                    env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, close_fds=True)
        with _children_lock:
            _children[run_id] = proc
        return proc

    def _check_running(self, run_id: str, st, now: float) -> bool:
        """A running run's worker: True when it lives, else the run is marked interrupted."""
        ours = st.host in (None, socket.gethostname())
        alive = worker_alive(st.pid, run_id, st.pid_started) if ours else True  # elsewhere: the heartbeat tells
        stale = st.heartbeat is not None and now - st.heartbeat > STALE_AFTER_S
        if not alive:
            self._mark_dead(run_id, "the worker process ended unexpectedly")
        elif stale:
            if ours and st.pid != os.getpid():  # a hung worker (verified ours above)
                with contextlib.suppress(OSError):
                    os.kill(st.pid, signal.SIGKILL)
            self._mark_dead(run_id, f"no heartbeat from the worker for over {STALE_AFTER_S:.0f} s")
        return alive and not stale

    def pump(self, lock_timeout: float = 2.0) -> list[str]:
        """Mark dead workers "interrupted" and start queued runs up to ``max_concurrent``.

        Returns the ids started. Safe to call often and from many sessions/processes: it
        holds the store lock, and gives up quietly when another caller holds it for longer
        than ``lock_timeout`` seconds (that caller does the same work).
        """
        with _children_lock:  # reap workers this process started, so none stays a zombie
            for rid, proc in list(_children.items()):
                if proc.poll() is not None:
                    del _children[rid]
        started: list[str] = []
        try:
            with self.lock(timeout=lock_timeout):
                self._cleanup_hidden()
                running, queued = 0, []
                now = time.time()
                for rid in self._run_ids():
                    st = self.read_status(rid)
                    if st.status == "running":
                        running += self._check_running(rid, st, now)
                    elif st.status == "queued":
                        queued.append((self.read_config(rid).created_ts, rid))
                for _, rid in sorted(queued):
                    if running >= self.max_concurrent:
                        break
                    try:
                        proc = self._spawn(rid)
                    except OSError as exc:  # e.g. out of processes or memory: tell, don't retry forever
                        self._set_status(rid, status="failed", finished=now_iso(),
                                         message=f"could not start a worker process ({exc})")
                        continue
                    self._set_status(rid, status="running", pid=proc.pid, pid_started=process_started(proc.pid),
                                     host=socket.gethostname(), started=now_iso(), heartbeat=time.time(),
                                     message="starting the worker")
                    running += 1
                    started.append(rid)
        except RunStoreError:
            return started
        return started

    def _cleanup_hidden(self, older_than_s: float = 3600.0) -> None:
        """Remove leftovers of crashed creates/deletes (hidden folders, old enough)."""
        now = time.time()
        for p in self.root.iterdir():
            if p.is_dir() and (p.name.startswith(".new-") or p.name.startswith(".trash-")):
                try:
                    if p.name.startswith(".trash-") or now - p.stat().st_mtime > older_than_s:
                        shutil.rmtree(p, ignore_errors=True)
                except OSError:
                    pass

    def wait(self, run_id: str, timeout: float = 60.0, poll: float = 0.2, until: tuple = FINISHED):
        """Pump and poll until the run reaches one of ``until`` (tests and the CLI); its RunInfo."""
        deadline = time.monotonic() + timeout
        while True:
            self.pump()
            info = self.get(run_id)
            if info is None or info.status in until or time.monotonic() >= deadline:
                return info
            time.sleep(poll)

