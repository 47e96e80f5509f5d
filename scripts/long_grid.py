"""The long grid: every method trained until it stops improving, in priority order, in two lanes.

Each data set gets the shortest budget at which at least 90 % of its runs meet the convergence
criterion (core.report.convergence), decided by a rule fixed before these runs:

- MNIST and Fashion-MNIST: from their 12,000-iteration runs (results/budget, RIM, parallel LSTMs
  and EntNet, seeds 0-4): 12,000 iterations when >= 90 % of them meet it, else 24,000.
- CIFAR-10: a pilot (RIM and parallel LSTMs, seed 0, 12,000 and 24,000 iterations): 12,000 when
  both pilot runs at 12,000 meet it, else 24,000.
- Animals-10: its 4,000-iteration runs (results/converged) stop early at 2,000-3,250: kept as they are.

Cells, in this order (each a useful answer on its own): MNIST, all five methods, seeds 0-4; the
CIFAR-10 pilot; Fashion-MNIST, all five methods, seeds 0-4; CIFAR-10, all five methods, seeds 0-4; RIM and parallel LSTMs,
seeds 5-9, on the three sets; the controls (parameter-matched parallel LSTMs and random selection,
then six parallel LSTMs of 32, all six active, no communication), seeds 0-4.

Runs of 12,000 iterations go to results/budget, of 24,000 to results/budget-24k. Resumable:
finished cells are skipped, a half-done cell continues from its training state. Two worker
processes of one torch thread each; a CIFAR-10 cell waits for the pilot only when its budget is
not yet decided (the other lane keeps training meanwhile).

    RIMSCOPE_DATA_DIR=../shared/data nice -n 10 .venv/bin/python scripts/long_grid.py [--dry-run]
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

from core.grid.cells import run_path, train_cell
from core.report.convergence import CONVERGED, plateau

FOLDERS = {12000: Path("results/budget"), 24000: Path("results/budget-24k")}
PROTOCOL = {12000: "converged-12k", 24000: "converged-24k"}
PASS_SHARE = 0.9
METHODS = ["rim", "parallel_lstm", "entnet", "rmc", "indrnn"]
MATCHED = {"mnist": "parallel_lstm_h81", "fashion_mnist": "parallel_lstm_h81", "cifar10": "parallel_lstm_h60"}
SETS = ["mnist", "fashion_mnist", "cifar10"]


def _record(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def budget(ds: str) -> int | None:
    """The data set's budget by the rule above; None while the CIFAR-10 pilot is not finished."""
    if ds == "cifar10":
        recs = [_record(run_path(FOLDERS[12000], ds, m, 0)) for m in ("rim", "parallel_lstm")]
        if any(r is None for r in recs):
            return None
        return 12000 if all(plateau(r).state == CONVERGED for r in recs) else 24000
    recs = [r for m in ("rim", "parallel_lstm", "entnet") for s in range(5)
            if (r := _record(run_path(FOLDERS[12000], ds, m, s))) is not None]
    if len(recs) < 15:
        raise SystemExit(f"{ds}: {len(recs)} of the 15 12,000-iteration runs the budget rule reads are in results/budget")
    share = sum(plateau(r).state == CONVERGED for r in recs) / len(recs)
    return 12000 if share >= PASS_SHARE else 24000


def cells() -> list[tuple[str, str, int, int | None]]:
    """(data set, model, seed, iterations or None = the set's budget, decided when it is trained)."""
    out = [("mnist", m, s, None) for s in range(5) for m in METHODS]
    out += [("cifar10", m, 0, it) for it in (12000, 24000) for m in ("rim", "parallel_lstm")]
    out += [("fashion_mnist", m, s, None) for s in range(5) for m in METHODS]
    out += [("cifar10", m, s, None) for s in range(5) for m in METHODS]
    out += [(ds, m, s, None) for s in range(5, 10) for ds in SETS for m in ("rim", "parallel_lstm")]
    out += [(ds, m, s, None) for s in range(5) for ds in SETS for m in (MATCHED[ds], "rim_random")]
    out += [(ds, m, s, None) for s in range(5) for ds in SETS for m in ("parallel_lstm_6", "rim_all", "rim_alpha0")]
    return out


_DECIDED: dict[str, int] = {}


def decided(ds: str) -> int | None:
    """``budget`` read once per data set (a decided budget does not change)."""
    if ds not in _DECIDED and (b := budget(ds)) is not None:
        _DECIDED[ds] = b
    return _DECIDED.get(ds)


def _next(pending: list, running: set):
    """The first pending cell whose budget is decided, not finished and not running; finished
    ones are dropped from ``pending`` on the way."""
    for c in list(pending):
        it = c[3] or decided(c[0])
        if it is None:
            continue
        if run_path(FOLDERS[it], c[0], c[1], c[2]).is_file():
            pending.remove(c)
        elif (c[0], c[1], c[2], it) not in running:
            return c, it
    return None


def job(ds: str, model: str, seed: int, iterations: int, data_dir: str | None) -> dict:
    return dict(dataset=ds, model=model, seed=seed, iterations=iterations, protocol=PROTOCOL[iterations],
                path=str(run_path(FOLDERS[iterations], ds, model, seed)), device="cpu", noise_draws=10,
                eval_every=250, data_dir=data_dir, overrides={}, threads=1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--dry-run", action="store_true", help="print the cells still to train, train none")
    args = ap.parse_args(argv)
    pending = list(cells())
    if args.dry_run:
        for ds in SETS:
            print(f"{ds}: budget {decided(ds) or 'after the pilot'}")
        todo = [c for c in pending if (c[3] or decided(c[0])) is None
                or not run_path(FOLDERS[c[3] or decided(c[0])], c[0], c[1], c[2]).is_file()]
        print(f"{len(todo)} of {len(pending)} cells to train")
        for c in todo:
            print("  ", *c)
        return 0
    t0 = time.perf_counter()
    busy: dict = {}
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=args.workers, mp_context=ctx) as pool:
        while pending or busy:
            running = {(j["dataset"], j["model"], j["seed"], j["iterations"]) for j in busy.values()}
            while len(busy) < args.workers and (nxt := _next(pending, running)) is not None:
                c, it = nxt
                pending.remove(c)
                j = job(c[0], c[1], c[2], it, args.data_dir)
                busy[pool.submit(train_cell, j)] = j
                running.add((c[0], c[1], c[2], it))
                print(f"start {c[0]} {c[1]} s{c[2]} {it} ({time.perf_counter() - t0:.0f} s)", flush=True)
            if not busy:
                break  # only cells waiting on a pilot that cannot finish
            done, _ = wait(busy, return_when=FIRST_COMPLETED)
            for fut in done:
                j = busy.pop(fut)
                try:
                    r = fut.result()
                    print(f"done {j['dataset']} {j['model']} s{j['seed']} {j['iterations']}: {r['status']}, "
                          f"test error {r['test_error']}, {r['wall_s']:.0f} s ({time.perf_counter() - t0:.0f} s)",
                          flush=True)
                except Exception as exc:  # noqa: BLE001 -- one failed cell is reported, the grid goes on
                    print(f"FAILED {j['dataset']} {j['model']} s{j['seed']} {j['iterations']}: {exc!r}", flush=True)
    print(f"grid finished in {time.perf_counter() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
