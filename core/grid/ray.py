"""The Ray engine: where the cells of the reproduction grid (core.grid) are trained on Ray.

The local engine (the default) is :func:`core.grid.local.run_grid`, a process pool on this machine.
``ray`` (this module, :func:`run_grid_ray`) makes every missing cell a Ray task: on a local
Ray started here (``--engine ray``) or on a cluster it joins (``--engine ray --address
auto``). The unit of work is the same, :func:`core.grid.cells.train_cell`, so a cell gives
the same JSON and safetensors, bit for bit, whichever engine trains it (same threads).

Where the results go: the task writes the cell under ``--out`` as the local pool does (so
with a local Ray, or a cluster sharing a file system, they land there directly), and also
returns the two files' bytes; the driver writes them under its own ``--out`` when they are
not already there, atomically, the ``.json`` last (it is the commit record: a cell counts as
finished only when its JSON is there). A cluster without a shared file system therefore
still ends with every result on the driver's machine.

Failures: a task whose worker died (killed, out of memory, node lost) is retried once by Ray
(``max_retries=1``); a cell that raised is submitted once more by the driver; a cell that
fails twice is reported and left missing (the next run tries it again). Ray is optional:
``pip install -r requirements-scale.txt``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from .. import paths
from .cells import grid_jobs, train_cell

RAY_INSTALL_HINT = "pip install -r requirements-scale.txt"
ENV_PREFIX = "RIMSCOPE_"  # the driver's RIMSCOPE_* settings (data folder, offline, home) go to the tasks


class RayUnavailable(RuntimeError):
    """Ray is not installed (or does not import)."""


def import_ray():
    """``import ray``, or :class:`RayUnavailable` saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise RayUnavailable(f"--engine ray needs Ray, which is not installed here ({exc}). "
                             f"Install it with: {RAY_INSTALL_HINT}") from None
    return ray


def default_threads(workers: int) -> int:
    """Threads per cell: what the local pool gives each of its ``workers`` processes."""
    return max(1, (os.cpu_count() or 1) // max(1, workers))


def task_options(job: dict) -> dict:
    """Ray resources and retries of one cell: its threads as CPUs, a GPU only for ``device="cuda"``."""
    return dict(num_cpus=job["threads"], num_gpus=1 if job.get("device") == "cuda" else 0, max_retries=1,
                retry_exceptions=False, name=cell_name(job))


def cell_name(job: dict) -> str:
    """The task's name (also its worker's process title while it runs: ``ray::<name>``)."""
    return f"rimscope:{job['dataset']}/{job['model']}/s{job['seed']}"


def _label(job: dict) -> str:
    return f"{job['dataset']} {job['model']} s{job['seed']}"


def run_cell(job: dict) -> dict:
    """Body of one Ray task: train and store the cell with ``train_cell``; return its files too.

    When the folder of ``job["path"]`` cannot be written on this node, the cell is trained
    into a temporary folder instead (the driver stores the returned bytes).
    """
    path = Path(job["path"])
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        writable = os.access(path.parent, os.W_OK)
    except OSError:
        writable = False
    if not writable:
        tmp = tempfile.mkdtemp(prefix="rimscope-cell-")
        job = {**job, "path": str(Path(tmp) / path.name)}
    try:
        summary = train_cell(job)
        where = Path(job["path"])
        files = {}
        weights = where.with_suffix(".safetensors")
        if summary.get("status") == "completed" and weights.is_file():
            files[".safetensors"] = weights.read_bytes()
        files[".json"] = where.read_bytes()  # last: the commit record
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return {"summary": summary, "files": files, "attempt": _attempt_number(), "pid": os.getpid()}


def _attempt_number() -> int | None:
    """0 on the first run of a task, 1 when Ray runs it again after its worker died."""
    try:
        import ray

        return int(ray._private.worker.global_worker.core_worker.get_current_task_attempt_number())
    except Exception:  # an internal API: the count is a courtesy for the log, never required
        return None


def store_files(path: Path, files: dict) -> None:
    """Write a cell's returned files beside ``path`` unless identical ones are there; JSON last."""
    from ..fileio import atomic_write_bytes

    for suffix in sorted(files, key=lambda s: s == ".json"):
        target = Path(path).with_suffix(suffix)
        data = files[suffix]
        try:
            if target.is_file() and target.read_bytes() == data:
                continue
        except OSError:
            pass
        atomic_write_bytes(target, data)


def start_ray(address: str | None = None, num_cpus: int | None = None, env: dict | None = None):
    """Start a local Ray (``address=None``) with ``num_cpus`` CPUs, or join the cluster at
    ``address``, quietly and without the dashboard. Joining a cluster ships ``core/`` and the
    driver's ``RIMSCOPE_*`` variables to the tasks (a local Ray's workers inherit both)."""
    import logging

    ray = import_ray()
    kw = dict(include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    if address is None:
        ray.init(num_cpus=num_cpus, **kw)
    else:
        env = paths.settings_environment(ENV_PREFIX) if env is None else env
        runtime_env = {"py_modules": [str(Path(__file__).resolve().parents[1])], "env_vars": env}
        ray.init(address=address, runtime_env=runtime_env, **kw)
    return ray


def _check_feasible(ray, threads: int, device: str, strict: bool, log) -> None:
    """A grid no node can run would wait forever: too many threads per cell, or no GPU. On a
    local Ray that is an error; on a cluster joined by address (it may add nodes) a warning."""
    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    most_cpus = max((r.get("CPU", 0) for r in nodes), default=0)
    problems = []
    if threads > most_cpus:
        problems.append(f"each cell asks for {threads} CPUs (--threads) but the largest Ray node has {most_cpus:g}")
    if device == "cuda" and not any(r.get("GPU", 0) >= 1 for r in nodes):
        problems.append("--device cuda asks for one GPU per cell but no Ray node has a GPU")
    if problems and strict:
        raise RuntimeError("; ".join(problems))
    for msg in problems:
        log(f"warning: {msg}; the cells wait until the cluster has such a node")


def run_grid_ray(out, datasets, models, seeds, iterations: int = 1000, workers: int = 2, noise_draws: int = 10,
                 eval_every: int = 50, data_dir=None, log: Callable[[str], None] = print,
                 overrides: dict | None = None, protocol: str = "paper", address: str | None = None,
                 threads: int | None = None, device: str = "auto", progress: bool | None = None) -> list[dict]:
    """Train every missing cell of the grid as a Ray task; same arguments and result as ``run_grid``.

    Uses the Ray this process is connected to if there is one; otherwise starts a local Ray
    with ``workers * threads`` CPUs (``address=None``) or joins ``address``, and shuts it down
    at the end. ``threads``: torch threads and Ray CPUs per cell (default: the local pool's
    ``cpu_count // workers``). ``progress``: a tqdm bar over cells (None: only on a terminal).
    Returns the summaries of the cells trained; failed cells are logged and left out.
    """
    ray = import_ray()
    from tqdm import tqdm

    out = Path(out).resolve()  # the tasks may not share the driver's working directory
    threads = threads or default_threads(workers)
    jobs = grid_jobs(out, datasets, models, seeds, iterations, noise_draws, eval_every, data_dir, overrides,
                     protocol, threads, device)
    started = False
    if jobs and not ray.is_initialized():
        t0 = time.perf_counter()
        start_ray(address, num_cpus=None if address else max(1, workers) * threads)
        started = True
        log(f"Ray {'joined at ' + address if address else 'started locally'} in {time.perf_counter() - t0:.1f} s")
    where = f"Ray, {threads} thread(s) per cell" + (", 1 GPU per cell" if device == "cuda" else "")
    half = sum(1 for j in jobs if any(Path(j["path"]).with_suffix(".ckpt").glob("state-*.json")))
    log(f"{len(jobs)} runs to train ({where}); finished runs are skipped"
        + (f"; {half} half-done continue from their training states" if half else ""))
    if not jobs:
        return []
    pending: dict = {}
    bar = tqdm(total=len(jobs), unit="cell", desc="grid", disable=(None if progress is None else not progress))
    say = bar.write if not bar.disable else log
    try:
        _check_feasible(ray, threads, device, strict=address is None, log=say)
        return _schedule(ray, jobs, pending, say, bar.update)
    finally:
        bar.close()
        for ref in pending:  # interrupted: stop what is still queued or running
            ray.cancel(ref, force=True)
        if started:
            ray.shutdown()


def _schedule(ray, jobs: list[dict], pending: dict, say: Callable[[str], None],
              tick: Callable[[int], object]) -> list[dict]:
    """Submit every job as a Ray task and collect them as they finish: store each result's files,
    run a cell that raised once more, report a cell that failed for good. ``pending`` (task ref ->
    (job, tries)) is the caller's, so it can cancel what is left when this is interrupted; ``tick(1)``
    counts a finished cell. Returns the summaries of the cells trained."""
    from ray.exceptions import RayError, RayTaskError

    remote = ray.remote(run_cell)

    def submit(job, tries):
        pending[remote.options(**task_options(job)).remote(job)] = (job, tries)

    for j in jobs:
        submit(j, 1)
    done: list[dict] = []
    t0 = time.perf_counter()
    finished = 0
    while pending:
        (ref,), _ = ray.wait(list(pending), num_returns=1)
        job, tries = pending.pop(ref)
        try:
            r = ray.get(ref)
        except RayTaskError as exc:  # the cell itself raised: once more, then report
            cause = exc.cause if getattr(exc, "cause", None) is not None else exc
            if tries < 2:
                say(f"{_label(job)}: raised {type(cause).__name__}: {cause}; trying once more")
                submit(job, tries + 1)
                continue
            finished += 1
            say(f"[{finished}/{len(jobs)}] {_label(job)}: FAILED twice, {type(cause).__name__}: {cause}")
            tick(1)
            continue
        except RayError as exc:  # worker or node lost twice (Ray already retried once)
            finished += 1
            say(f"[{finished}/{len(jobs)}] {_label(job)}: FAILED, its worker was lost again after Ray's "
                f"retry ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})")
            tick(1)
            continue
        store_files(Path(job["path"]), r["files"])
        s = r["summary"]
        finished += 1
        err = s.get("test_error")
        again = f", resumed from iteration {s['resumed_from']}" if s.get("resumed_from") else ""
        again += " (redone: its first worker was lost)" if r.get("attempt") else ""
        again += " (after a failed try)" if tries > 1 else ""
        say(f"[{finished}/{len(jobs)}] {_label(job)}: {s['status']}, test error "
            f"{err if err is None else f'{err:.4f}'}, {s['wall_s']:.0f} s (elapsed "
            f"{time.perf_counter() - t0:.0f} s){again}")
        done.append({**s, "attempts": tries + (r.get("attempt") or 0)})
        tick(1)
    return done
