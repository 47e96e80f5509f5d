"""The local engine: every missing cell of a grid trained in a process pool on this machine."""
from __future__ import annotations

import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from .cells import grid_jobs, train_cell


def run_grid(out: Path, datasets, models, seeds, iterations: int = 1000, workers: int = 2,
             noise_draws: int = 10, eval_every: int = 50, data_dir=None, log=print,
             overrides: dict | None = None, protocol: str = "paper", device: str = "auto") -> list[dict]:
    """Train every missing cell of the grid in up to ``workers`` processes (cores // workers torch
    threads each: one per core, so two grids side by side oversubscribe the cores).

    ``overrides``: per-model config changes, e.g. ``{"parallel_lstm": {"hidden_size": 81}}``
    (a parameter-matched baseline); they are recorded in each run's JSON (``config``).
    """
    out = Path(out)
    jobs = grid_jobs(out, datasets, models, seeds, iterations, noise_draws, eval_every, data_dir, overrides,
                     protocol, max(1, (os.cpu_count() or 1) // max(1, workers)), device)
    half = sum(1 for j in jobs if any(Path(j["path"]).with_suffix(".ckpt").glob("state-*.json")))
    log(f"{len(jobs)} runs to train ({workers} workers); finished runs are skipped"
        + (f"; {half} half-done continue from their training states" if half else ""))
    done = []
    t0 = time.perf_counter()
    # spawn, never fork: a forked child of a process with threads (Streamlit, pytest-xdist, a
    # notebook) can inherit a held lock and hang in its first tensor operation
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(train_cell, j): j for j in jobs}
        for i, fut in enumerate(as_completed(futures), 1):
            j = futures[fut]
            try:
                r = fut.result()
                err = r["test_error"]
                resumed = f", resumed from iteration {r['resumed_from']}" if r.get("resumed_from") else ""
                log(f"[{i}/{len(jobs)}] {j['dataset']} {j['model']} s{j['seed']}: {r['status']}, "
                    f"test error {err if err is None else f'{err:.4f}'}, {r['wall_s']:.0f} s{resumed} "
                    f"(elapsed {time.perf_counter() - t0:.0f} s)")
                done.append(r)
            except Exception as exc:  # one failed cell must not lose the others
                log(f"[{i}/{len(jobs)}] {j['dataset']} {j['model']} s{j['seed']}: FAILED {exc!r}")
    return done
