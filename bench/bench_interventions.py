"""How long the interventions take: one input under each kind of intervention, the set-wide tables on 1,000.

Run from the repository root::

    .venv/bin/python -m bench.bench_interventions            # about a minute on 2 cores
    .venv/bin/python -m bench.bench_interventions --repeats 5 --out bench/results/interventions.json

On the pages' default MNIST RIM (the shipped long-grid one, ``core.catalog.DEFAULT_PROTOCOL``; fused
kernel) and the MNIST test set (``RIMSCOPE_DATA_DIR``, else the bundled sample), one thread:

* ``one_input``: what the Intervene tab computes per change, the original and the intervened
  run of one image with their traces, median of ``--repeats``, for each kind of intervention
  (``one_input_by_kind``: a forced block of cells with the LSTM removed, switched off after
  selection, read-out only; its state patched from a donor; the mask patched); ``one_input_s``
  is the slowest kind's median (the issue's target: the redraw in under 1 s);
* ``knockout_table_1000``: ``core.eval.interventions.knockout_table`` on a fixed subset of
  1,000 test images, every variant (each LSTM in each of the three ways, three random draws,
  all, alpha 0) x (clean, noisy), the first (uncached) time; ``patching_table``: the patching
  table on the same images paired with a donor of another class (target for both together:
  30 s on the bundled sample);
* ``attribution_rim``: Integrated Gradients of the predicted logit, from the pages' default number
  of points (doubled where the quadrature error is above the bound: ``attribution_steps``), one
  image, the input's own mask held fixed.

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
    from core.eval import attribution, patching
    from core.eval import interventions as ivs
    from core.eval.robustness_points import fixed_subset
    from core.training.weights import load_weights

    load_start = os.getloadavg()
    from core.catalog import DEFAULT_PROTOCOL

    stem = REPO / "pretrained" / DEFAULT_PROTOCOL / "mnist" / "rim"
    model, _ = load_weights(stem)
    data = load_dataset("mnist", "test")
    image, donor = data.images[:1], data.images[1:2]
    block = {(t, 0): 1 for t in range(5, 15)}
    h, c = ivs.donor_states(model, donor)
    _, tr = ivs.run(model, donor, with_trace=True)
    patch = {"h": h[0], "c": c[0], "mask": tr["active"][0], "units": [3], "rows": (10, 20)}
    kinds = {mode: ivs.one_input(model, 28, cells=block, knock_out=(3,), mode=mode) for mode in ivs.KNOCKOUTS}
    kinds["patch state"] = ivs.one_input(model, 28, patch={**patch, "what": "state"})
    kinds["patch mask"] = ivs.one_input(model, 28, patch={**patch, "what": "mask"})
    by_kind = {}
    for name, iv in kinds.items():
        ivs.run(model, image, iv, with_trace=True)  # warm up
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            ivs.run(model, image, None, with_trace=True)
            ivs.run(model, image, iv, with_trace=True)
            times.append(time.perf_counter() - t0)
        by_kind[name] = {"median": statistics.median(times), "max": max(times)}
    slowest = max(by_kind, key=lambda k: by_kind[k]["median"])
    idx = fixed_subset(len(data), min(args.n, len(data)), seed=0)
    images, labels = data.images[idx], data.labels[idx]
    t0, c0 = time.perf_counter(), time.process_time()
    table = ivs.knockout_table(model, images, labels, data.classes)
    table_s, table_cpu = time.perf_counter() - t0, time.process_time() - c0
    t0, c0 = time.perf_counter(), time.process_time()
    pt = patching.patching_table(model, images, images[patching.class_donors(labels, seed=0)], pairing="class")
    patch_s, patch_cpu = time.perf_counter() - t0, time.process_time() - c0
    t0, c0 = time.perf_counter(), time.process_time()
    a = attribution.prediction_attribution(model, data.images[0])
    ig_s, ig_cpu = time.perf_counter() - t0, time.process_time() - c0
    out = {"machine": {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                       "platform": platform.platform(), "load_average_start": load_start,
                       "load_average_end": os.getloadavg()},
           "model": str(stem.relative_to(REPO)), "test_source": data.source,
           "one_input_s": {"median": by_kind[slowest]["median"], "max": by_kind[slowest]["max"], "kind": slowest,
                           "repeats": args.repeats},
           "one_input_by_kind": by_kind,
           "knockout_table_s": table_s, "knockout_table_cpu_s": table_cpu, "knockout_images": len(idx),
           "knockout_runs": 2 * len(table.variants), "patching_table_s": patch_s, "patching_table_cpu_s": patch_cpu,
           "patching_pairs": pt.pairs, "patching_runs": len(pt.cells), "set_wide_s": table_s + patch_s,
           "attribution_rim_s": ig_s, "attribution_rim_cpu_s": ig_cpu, "attribution_steps": a.steps}
    for name, v in by_kind.items():
        print(f"one input, {name} (original + intervened, traced): median {v['median']:.3f} s, max {v['max']:.3f} s "
              f"over {args.repeats}")
    print(f"knock-out table, {len(idx)} images, {2 * len(table.variants)} runs: {table_s:.1f} s ({table_cpu:.1f} s of CPU)")
    print(f"patching table, {pt.pairs} pairs, {len(pt.cells)} runs: {patch_s:.1f} s ({patch_cpu:.1f} s of CPU); "
          f"set-wide together {table_s + patch_s:.1f} s")
    print(f"Integrated Gradients of the predicted logit (RIM, {a.steps} points, own mask fixed): "
          f"{ig_s:.2f} s ({ig_cpu:.2f} s of CPU)")
    print(f"load average {load_start[0]:.2f} at the start, {os.getloadavg()[0]:.2f} at the end, {os.cpu_count()} CPUs")
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1))
    return 0 if np.isfinite(table_s) else 1


if __name__ == "__main__":
    raise SystemExit(main())
