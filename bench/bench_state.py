"""What the training states (core.training.state) cost: time per training state and share of a run.

Run from the repository root::

    .venv/bin/python -m bench.bench_state                  # the five models, about a minute or two
    .venv/bin/python -m bench.bench_state --models rim --iterations 30

For every model at its default size, on synthetic MNIST-shaped data (50,000 uint8 training
images of 28x28, as MNIST after the bundled sample is held out; made in-process), with one
torch thread, it trains ``--iterations`` iterations (default 50) of the paper protocol (SGD,
lr 0.1, batch 100) through ``core.training.loop.train`` with a training state every ``--every``
iterations, and reports:

* **ms / iteration**: the mean of iterations 2..N without the training state writes;
* **training state**: the median time of one training state (weights, optimiser and
  scheduler state, RNG states, data order, history; safetensors + JSON, checksummed, fsynced,
  pruned), its size, and the same with Adam's moments (the converged protocol);
* **share**: the training states of a paper-protocol run (1,000 iterations, with the defaults
  ``state_every=200`` and ``state_every_s=60``: at iterations 200, 400, 600, 800 and
  whenever 60 s passed) as a share of its wall time, estimated as 1,000 x ms / iteration
  plus the training states (evaluations left out, so the share is an upper bound);
* **read**: the time to read and verify the newest training state (a resume's start).

Other processes may be running on the machine (see the load average printed): absolute times
then mean little.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from core.data.datasets import LoadedData
from core.models.registry import list_models
from core.training import state
from core.training.config import TrainConfig
from core.training.loop import train

PROTOCOL_ITERATIONS = 1000


def synthetic(n: int, seed: int) -> LoadedData:
    r = np.random.default_rng(seed)
    return LoadedData(r.integers(0, 256, (n, 28, 28), dtype=np.uint8), r.integers(0, 10, n).astype(np.int64),
                      [str(i) for i in range(10)], "synthetic MNIST-shaped", np.arange(n))


def states_in_protocol_run(ms_per_it: float, ckpt_s: float, iterations: int = PROTOCOL_ITERATIONS,
                                every: int | None = None, every_s: float | None = None) -> int:
    """How many training states a run of ``iterations`` writes with the default intervals."""
    d = TrainConfig()
    every = d.state_every if every is None else every
    every_s = d.state_every_s if every_s is None else every_s
    n, clock, last = 0, 0.0, 0.0
    for it in range(1, iterations):  # none after the last iteration: the final training state is the model's
        clock += ms_per_it / 1000
        if (every and it % every == 0) or (every_s and clock - last >= every_s):
            n += 1
            clock += ckpt_s
            last = clock
    return n


def measure(model: str, tr: LoadedData, te: LoadedData, iterations: int, every: int, folder: Path,
            optimizer: str = "sgd") -> dict:
    kw = dict(optimizer="adam", lr=1e-3) if optimizer == "adam" else {}
    cfg = TrainConfig(dataset="mnist", model=model, iterations=iterations, batch_size=100, eval_every=10**6,
                      eval_samples=100, noise_draws=0, threads=1, holdout_sample=False, state_every=every,
                      state_every_s=0, **kw)
    events = []
    res = train(cfg, tr, te, callback=events.append, state_dir=folder)
    its = {e["iteration"]: e["elapsed_s"] for e in events if e["kind"] == "iter"}
    ck = [e for e in events if e["kind"] == "state"]
    assert all(e["ok"] for e in ck), ck
    ck_s = [e["seconds"] for e in ck]
    ms = (its[iterations] - its[1] - sum(ck_s)) / (iterations - 1) * 1000
    newest = state.list_states(folder)[0][1]
    size = newest.stat().st_size + newest.with_suffix(".safetensors").stat().st_size
    t = time.perf_counter()
    state.latest_state(folder)
    read_s = time.perf_counter() - t
    state.remove_states(folder)
    return {"model": model, "optimizer": optimizer, "parameters": res.metrics["parameters"],
            "ms_per_iteration": ms, "state_s": statistics.median(ck_s), "states_timed": len(ck_s),
            "weights_bytes": size, "read_s": read_s}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.bench_state", description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", default=list_models(), choices=list_models())
    p.add_argument("--iterations", type=int, default=50, help="iterations timed per model (default %(default)s)")
    p.add_argument("--every", type=int, default=10, help="a training state every N of them (default %(default)s)")
    p.add_argument("--train-images", type=int, default=50_000, help="synthetic training images (default %(default)s)")
    p.add_argument("--dir", default=None, help="where to write the training states (default: a temporary folder)")
    p.add_argument("--no-adam", action="store_true", help="skip the training state timing with Adam's state")
    p.add_argument("--json", default=None, help="also write the results as JSON here")
    args = p.parse_args(argv)
    if args.iterations < 2 * args.every:
        p.error("--iterations must allow at least two training states (>= 2 x --every)")
    torch.set_num_threads(1)
    tr, te = synthetic(args.train_images, 0), synthetic(1000, 1)
    rows = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for m in args.models:
            row = measure(m, tr, te, args.iterations, args.every, Path(tmp) / m)
            if not args.no_adam:
                adam = measure(m, tr, te, 2 * args.every + 2, args.every, Path(tmp) / f"{m}-adam", "adam")
                row.update(adam_state_s=adam["state_s"], adam_state_bytes=adam["weights_bytes"])
            n = states_in_protocol_run(row["ms_per_iteration"], row["state_s"])
            run_s = PROTOCOL_ITERATIONS * row["ms_per_iteration"] / 1000
            row.update(protocol_states=n, protocol_train_s=run_s,
                       protocol_share=n * row["state_s"] / (run_s + n * row["state_s"]))
            rows.append(row)
            print(f"  {m}: {row['ms_per_iteration']:.1f} ms/it, training state {1000 * row['state_s']:.1f} ms",
                  file=sys.stderr, flush=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"Training states, 1 thread, batch 100, synthetic MNIST-shaped data ({args.train_images:,} training "
          f"images); torch {torch.__version__}, {os.cpu_count()} cores, load average {load:.2f}")
    print(f"{'model':<14}{'params':>9}{'ms/it':>9}{'state ms':>9}{'size KB':>9}{'Adam ms':>9}{'Adam KB':>9}"
          f"{'read ms':>9}{'states/run':>10}{'share of a 1,000-it run':>25}")
    for r in rows:
        adam_ms = f"{1000 * r['adam_state_s']:.1f}" if "adam_state_s" in r else "-"
        adam_kb = f"{r['adam_state_bytes'] / 1024:.0f}" if "adam_state_bytes" in r else "-"
        print(f"{r['model']:<14}{r['parameters']:>9,}{r['ms_per_iteration']:>9.1f}{1000 * r['state_s']:>9.1f}"
              f"{r['weights_bytes'] / 1024:>9.0f}{adam_ms:>9}{adam_kb:>9}{1000 * r['read_s']:>9.1f}"
              f"{r['protocol_states']:>10}{100 * r['protocol_share']:>24.3f}%")
    print(f"share = training states x time per training state / (1,000 x ms per iteration + training states); defaults: every "
          f"{TrainConfig().state_every} iterations and at most every {TrainConfig().state_every_s:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"load_average": load, "torch": torch.__version__,
                                               "train_images": args.train_images, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
