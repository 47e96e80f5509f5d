"""Train the long grid (core.grid.long) in two worker processes of one torch thread each, in
priority order: a CIFAR-10 cell waits for the pilot only while its budget is not decided, and the
other lane keeps training meanwhile. Resumable: finished cells are skipped, a half-done cell
continues from its training state.

    RIMSCOPE_DATA_DIR=../shared/data nice -n 10 .venv/bin/python -m scripts.long_grid [--dry-run]
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

from core.grid.cells import run_path, train_cell
from core.grid.long import FOLDERS, RETRAINED, SETS, budget, cell_path, cells, job
from core.report.tables import same_run

_DECIDED: dict[str, int] = {}


def decided(ds: str, results: str) -> int | None:
    """``budget`` read once per data set (a decided budget does not change)."""
    if ds not in _DECIDED and (b := budget(ds, results)) is not None:
        _DECIDED[ds] = b
    return _DECIDED.get(ds)


def _next(pending: list, running: set, results: str):
    """The first pending cell whose budget is decided, not finished and not running; finished
    ones are dropped from ``pending`` on the way."""
    for c in list(pending):
        it = c.iterations or decided(c.dataset, results)
        if it is None:
            continue
        if cell_path(c, it, results).is_file():
            pending.remove(c)
        elif cell_path(c, it, results) not in running:
            return c, it
    return None


def _compare(j: dict, results: str) -> str:
    """A retrained run beside its first record (core.grid.long.RETRAINED): the same numbers or not."""
    first = run_path(Path(results) / FOLDERS[j["iterations"]], j["dataset"], j["model"], j["seed"])
    try:
        same = same_run(json.loads(first.read_text()), json.loads(Path(j["path"]).read_text()))
    except (OSError, ValueError, KeyError) as exc:
        return f"; not compared with {first} ({exc})"
    return f"; {'the same test error and validation history as' if same else 'DIFFERS from'} {first}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--results", default="results", help="the results folder (budget/ and budget-24k/ under it)")
    ap.add_argument("--dry-run", action="store_true", help="print the cells still to train, train none")
    args = ap.parse_args(argv)
    pending = list(cells(args.results))
    if args.dry_run:
        for ds in SETS:
            print(f"{ds}: budget {decided(ds, args.results) or 'after the pilot'}")
        todo = [c for c in pending if (it := c.iterations or decided(c.dataset, args.results)) is None
                or not cell_path(c, it, args.results).is_file()]
        print(f"{len(todo)} of {len(pending)} cells to train")
        for c in todo:
            print("  ", *(x for x in c if x is not None))
        return 0
    t0 = time.perf_counter()
    busy: dict = {}
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=args.workers, mp_context=ctx) as pool:
        while pending or busy:
            running = {Path(j["path"]) for j in busy.values()}
            while len(busy) < args.workers and (nxt := _next(pending, running, args.results)) is not None:
                c, it = nxt
                pending.remove(c)
                j = job(c, it, args.data_dir, args.results)
                busy[pool.submit(train_cell, j)] = j
                running.add(Path(j["path"]))
                print(f"start {j['path']} ({time.perf_counter() - t0:.0f} s)", flush=True)
            if not busy:
                break  # only cells waiting on a pilot that cannot finish
            done, _ = wait(busy, return_when=FIRST_COMPLETED)
            for fut in done:
                j = busy.pop(fut)
                try:
                    r = fut.result()
                    again = _compare(j, args.results) if RETRAINED in Path(j["path"]).parts else ""
                    print(f"done {j['path']}: {r['status']}, test error {r['test_error']}, {r['wall_s']:.0f} s"
                          f"{again} ({time.perf_counter() - t0:.0f} s)", flush=True)
                except Exception as exc:  # noqa: BLE001 -- one failed cell is reported, the grid goes on
                    print(f"FAILED {j['path']}: {exc!r}", flush=True)
    print(f"grid finished in {time.perf_counter() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
