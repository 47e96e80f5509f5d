"""Overhead and speed of the Ray engine against the local process pool, on one machine.

Run from the repository root (needs ``pip install -r requirements-scale.txt``)::

    .venv/bin/python -m bench.bench_engines                  # 2 data sets x 2 models x 2 seeds, 50 iterations
    .venv/bin/python -m bench.bench_engines --repeat 2 --iterations 100

The same small grid (fashion_mnist and cifar10 x parallel_lstm and indrnn at their default
sizes x seeds 0 1, noise_draws 1, on tiny synthetic data written to a temporary folder) is
trained into a fresh folder by each engine with 2 workers / 2 CPUs and the local pool's
thread count per cell: ``core.grid.local.run_grid`` (process pool) and
``core.grid.ray.run_grid_ray`` on a local Ray. For Ray it reports ``ray.init`` (start of the
local Ray), the grid itself and ``ray.shutdown`` separately; the totals include everything
from the call to the last result. Prints the times and the ratio Ray / local pool.
Other work on the machine slows both sides: the load average is printed with the times.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from core.grid import local as reproduce
from core.grid import ray as engine

DATASETS = ["fashion_mnist", "cifar10"]
MODELS = ["parallel_lstm", "indrnn"]
SHAPES = {"fashion_mnist": (28, 28), "cifar10": (32, 32, 3)}


def write_data(root: Path, n_train: int, n_test: int) -> Path:
    rng = np.random.default_rng(0)
    for ds in DATASETS:
        (root / ds).mkdir(parents=True, exist_ok=True)
        for split, n in (("train", n_train), ("test", n_test)):
            y = rng.integers(0, 10, n)
            x = rng.integers(0, 64, (n, *SHAPES[ds]), dtype=np.uint8)
            x[np.arange(n), y * 2 + 3] = 255  # the class is which row is bright
            np.savez(root / ds / f"{split}.npz", x=x, y=y.astype(np.int64),
                     classes=np.array([str(i) for i in range(10)]))
    return root


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.bench_engines", description=__doc__.split("::")[0].strip())
    p.add_argument("--iterations", type=int, default=50)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--repeat", type=int, default=1, help="measure both engines this many times (alternating which goes first)")
    p.add_argument("--train-images", type=int, default=500)
    p.add_argument("--test-images", type=int, default=200)
    p.add_argument("--json", default=None, help="also write the measurements to this JSON file")
    args = p.parse_args(argv)
    ray = engine.import_ray()
    os.environ["RIMSCOPE_OFFLINE"] = "1"
    threads = engine.default_threads(args.workers)
    grid = dict(iterations=args.iterations, workers=args.workers, noise_draws=1, eval_every=args.iterations,
                log=lambda s: None)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-engines-") as tmp:
        data = str(write_data(Path(tmp) / "data", args.train_images, args.test_images))
        cells = len(DATASETS) * len(MODELS) * len(args.seeds)
        print(f"{cells} cells ({' '.join(DATASETS)} x {' '.join(MODELS)} x seeds {args.seeds}), "
              f"{args.iterations} iterations, {args.workers} workers x {threads} thread(s), "
              f"{os.cpu_count()} cores, ray {ray.__version__}", flush=True)
        for rep in range(args.repeat):
            load0 = os.getloadavg()[0]

            def run_local(rep=rep):
                t0 = time.perf_counter()
                res = reproduce.run_grid(Path(tmp) / f"local{rep}", DATASETS, MODELS, args.seeds, data_dir=data, **grid)
                return res, time.perf_counter() - t0

            def run_ray(rep=rep):
                t0 = time.perf_counter()
                engine.start_ray(num_cpus=args.workers * threads)
                t_init = time.perf_counter() - t0
                res = engine.run_grid_ray(Path(tmp) / f"ray{rep}", DATASETS, MODELS, args.seeds, data_dir=data,
                                          threads=threads, progress=False, **grid)
                t_grid = time.perf_counter() - t0 - t_init
                t1 = time.perf_counter()
                ray.shutdown()
                return res, t_init, t_grid, time.perf_counter() - t1, time.perf_counter() - t0

            if rep % 2 == 0:  # alternate which engine goes first
                local, t_local = run_local()
                done, t_init, t_grid, t_down, t_ray = run_ray()
            else:
                done, t_init, t_grid, t_down, t_ray = run_ray()
                local, t_local = run_local()
            assert len(local) == len(done) == cells, (len(local), len(done))
            row = dict(local_pool_s=t_local, ray_init_s=t_init, ray_grid_s=t_grid, ray_shutdown_s=t_down,
                       ray_total_s=t_ray, ratio_total=t_ray / t_local, ratio_grid_only=t_grid / t_local,
                       load_before=load0, load_after=os.getloadavg()[0])
            rows.append(row)
            print(f"[{rep + 1}/{args.repeat}] local pool {t_local:.1f} s | Ray: ray.init {t_init:.1f} s + grid "
                  f"{t_grid:.1f} s + shutdown {t_down:.1f} s = {t_ray:.1f} s | ratio Ray/local {t_ray / t_local:.2f} "
                  f"(grid only {t_grid / t_local:.2f}) | load average {load0:.1f} -> {row['load_after']:.1f}",
                  flush=True)
    med = {k: float(np.median([r[k] for r in rows])) for k in rows[0]}
    print(f"median of {len(rows)}: local pool {med['local_pool_s']:.1f} s, Ray {med['ray_total_s']:.1f} s "
          f"(ray.init {med['ray_init_s']:.1f} s), ratio Ray/local {med['ratio_total']:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "runs": rows, "median": med}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
