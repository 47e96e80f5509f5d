"""How long the interventions take: one intervention on one input, the knock-out table on 1,000.

Run from the repository root::

    .venv/bin/python -m bench.bench_interventions            # about half a minute to minutes on 2 cores
    .venv/bin/python -m bench.bench_interventions --repeats 5 --out bench/results/interventions.json

On the shipped converged MNIST RIM (fused kernel) and the MNIST test set (``RIMSCOPE_DATA_DIR``,
else the bundled sample), one thread:

* ``one_input``: what the Intervene tab computes per change, the original and the intervened
  run of one image with their traces (a forced block of cells and a knock-out), median of
  ``--repeats`` (the issue's target: the redraw in at most 1 s);
* ``knockout_table_1000``: ``core.eval.interventions.knockout_table`` on a fixed subset of
  1,000 test images, 10 variants x (clean, noisy), the first (uncached) time (target: 10 s);
* ``attribution_rim``: Integrated Gradients of the predicted logit, 64 points, one image.

The figures depend on the machine and on what else runs on it: the JSON records the CPU count,
torch's thread count, the load average at the start and end, and the process's CPU seconds
beside the wall-clock ones (on a machine shared with other work, the CPU seconds are closer to
what an idle core takes).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.bench_interventions", description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--out", default=None, help="write the figures as JSON here")
    args = p.parse_args(argv)
    torch.set_num_threads(1)

    from core.data.datasets import load_dataset
    from core.eval import attribution
    from core.eval import interventions as ivs
    from core.eval.robustness_points import fixed_subset
    from core.models.rim import Intervention
    from core.training.weights import load_weights

    load_start = os.getloadavg()
    model, _ = load_weights(REPO / "pretrained" / "converged" / "mnist" / "rim")
    data = load_dataset("mnist", "test")
    image = data.images[:1]
    iv = Intervention(force=ivs.force_grid(28, 6, on=[(t, 0) for t in range(5, 15)]), knock_out=(3,))
    ivs.run(model, image, iv, with_trace=True)  # warm up
    one = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        ivs.run(model, image, None, with_trace=True)
        ivs.run(model, image, iv, with_trace=True)
        one.append(time.perf_counter() - t0)
    idx = fixed_subset(len(data), min(args.n, len(data)), seed=0)
    t0, c0 = time.perf_counter(), time.process_time()
    table = ivs.knockout_table(model, data.images[idx], data.labels[idx], data.classes)
    table_s, table_cpu = time.perf_counter() - t0, time.process_time() - c0
    t0, c0 = time.perf_counter(), time.process_time()
    attribution.prediction_attribution(model, data.images[0])
    ig_s, ig_cpu = time.perf_counter() - t0, time.process_time() - c0
    out = {"machine": {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                       "platform": platform.platform(), "load_average_start": load_start,
                       "load_average_end": os.getloadavg()},
           "test_source": data.source, "one_input_s": {"median": statistics.median(one), "max": max(one),
                                                       "repeats": args.repeats},
           "knockout_table_s": table_s, "knockout_table_cpu_s": table_cpu, "knockout_images": len(idx), "knockout_runs": 2 * len(table.variants),
           "attribution_rim_s": ig_s, "attribution_rim_cpu_s": ig_cpu}
    print(f"one intervention on one input (original + intervened, traced): median {statistics.median(one):.3f} s, "
          f"max {max(one):.3f} s over {args.repeats}")
    print(f"knock-out table, {len(idx)} images, {2 * len(table.variants)} runs: {table_s:.1f} s ({table_cpu:.1f} s of CPU)")
    print(f"Integrated Gradients of the predicted logit (RIM, 64 points): {ig_s:.2f} s ({ig_cpu:.2f} s of CPU)")
    print(f"load average {load_start[0]:.2f} at the start, {os.getloadavg()[0]:.2f} at the end, {os.cpu_count()} CPUs")
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1))
    return 0 if np.isfinite(table_s) else 1


if __name__ == "__main__":
    raise SystemExit(main())
