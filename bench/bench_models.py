"""Speed of the five models, each measured side by side with a fused LSTM.

Run from the repository root::

    .venv/bin/python -m bench.bench_models                 # full run (about 15-30 min on 2 cores)
    .venv/bin/python -m bench.bench_models --threads 1 2   # both thread counts
    .venv/bin/python -m bench.bench_models --quick --protocol-iterations 20   # a few minutes
    python -m bench.bench_models --help

What it measures, for every model (rim, parallel_lstm, entnet, rmc, indrnn):

* **per step**, for both data shapes (28x28x1 -> x ``[100, 28, 28]``, 32x32x3 -> x
  ``[100, 32, 96]``): one training step (forward, cross-entropy, backward, SGD step, lr 0.1)
  and one inference batch (``no_grad``, eval mode), batch 100, each alternated with the
  same work on the reference ``nn.LSTM(input_dim, 192, batch_first=True)`` + ``nn.Linear(192,
  10)`` in the same process and thread count. The ratio is the median over pairs of
  (model time / reference time) taken back to back, so slow phases of a busy machine hit
  both sides of a pair; CPU-time ratios are reported as well.
* **protocol**: wall time of the paper's training protocol through ``core.training.loop.train``
  (SGD lr 0.1, batch 100, 1,000 iterations unless ``--protocol-iterations`` says otherwise)
  on synthetic MNIST-shaped data (uint8 ``[N, 28, 28]``, made in-process: no data files).
* **trace**: latency of tracing one image, ``model(x[None], return_trace=True)`` (median).
* **noise**: evaluating 1,000 test images with Gaussian noise (variance 0.01) through
  ``core.eval.predict.noisy_accuracy`` with one draw (noise generation included).

Prints plain-text tables and writes JSON (default ``bench/results/latest.json``) with the
machine (CPU model, cores, threads, torch version, date, load average). Other processes may
be running on the machine: absolute times then mean little; the side-by-side ratios are the
numbers to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from core.data.datasets import LoadedData
from core.data.transforms import to_sequence
from core.eval.predict import noisy_accuracy
from core.models.registry import build_model, count_parameters, list_models
from core.training.config import TrainConfig
from core.training.loop import train

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "latest.json"
SHAPES = {"28x28x1": (28, 28), "32x32x3": (32, 96)}  # name -> (T rows, D features per row)
BATCH = 100
REF_HIDDEN = 192
LOAD_NOTE = ("Other processes may have been running on this machine while it was measured: "
             "absolute times are then inflated and noisy; the ratios are measured side by side "
             "(alternating model and reference, medians over pairs) to cancel most of it.")


class ReferenceLSTM(nn.Module):
    """The yardstick: a fused nn.LSTM with 192 units and a linear read-out of its last state."""

    def __init__(self, input_dim: int, num_classes: int = 10):
        super().__init__()
        self.lstm = nn.LSTM(input_dim, REF_HIDDEN, batch_first=True)
        self.fc = nn.Linear(REF_HIDDEN, num_classes)

    def forward(self, x):
        return self.fc(self.lstm(x)[0][:, -1])


# ----------------------------------------------------------------------------------------
def _train_step(model: nn.Module, x, y):
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step():
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def _infer_step(model: nn.Module, x):
    def step():
        model.eval()
        with torch.no_grad():
            model(x)

    return step


def _timed(fn) -> tuple[float, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w0, time.process_time() - c0


def side_by_side(fn_model, fn_ref, reps: int, warmup: int) -> dict:
    """Alternate model and reference ``reps`` times (order flipped every pair); medians."""
    for _ in range(warmup):
        fn_model()
        fn_ref()
    wm, wr, cm, cr = [], [], [], []
    for i in range(reps):
        if i % 2 == 0:
            (a_w, a_c), (b_w, b_c) = _timed(fn_model), _timed(fn_ref)
        else:
            (b_w, b_c), (a_w, a_c) = _timed(fn_ref), _timed(fn_model)
        wm.append(a_w)
        wr.append(b_w)
        cm.append(a_c)
        cr.append(b_c)
    med = statistics.median
    return {
        "model_ms": med(wm) * 1e3, "ref_ms": med(wr) * 1e3,
        "ratio": med(a / b for a, b in zip(wm, wr)),
        "model_cpu_ms": med(cm) * 1e3, "ref_cpu_ms": med(cr) * 1e3,
        "ratio_cpu": med(a / b for a, b in zip(cm, cr) if b > 0) if any(b > 0 for b in cr) else None,
        "model_min_ms": min(wm) * 1e3, "ref_min_ms": min(wr) * 1e3,
        "ratio_of_minima": min(wm) / min(wr),  # least disturbed estimate on a busy machine
        "reps": reps,
    }


def bench_steps(models, reps: int, warmup: int, log) -> list[dict]:
    rows = []
    for shape, (T, D) in SHAPES.items():
        g = torch.Generator().manual_seed(0)
        x = torch.rand(BATCH, T, D, generator=g)
        y = torch.randint(0, 10, (BATCH,), generator=g)
        torch.manual_seed(0)
        ref = ReferenceLSTM(D)
        for name in models:
            torch.manual_seed(0)
            model = build_model(name, input_dim=D)
            tr = side_by_side(_train_step(model, x, y), _train_step(ref, x, y), reps, warmup)
            inf = side_by_side(_infer_step(model, x), _infer_step(ref, x), reps, warmup)
            rows.append({"shape": shape, "T": T, "D": D, "model": name, "parameters": count_parameters(model),
                         "train": tr, "infer": inf})
            log(f"  {shape:8s} {name:14s} train {tr['model_ms']:8.1f} ms  x{tr['ratio']:.2f}   "
                f"infer {inf['model_ms']:7.1f} ms  x{inf['ratio']:.2f}")
    return rows


def synthetic_mnist(n: int, seed: int = 0) -> LoadedData:
    """MNIST-shaped uint8 images [n, 28, 28] with a class-dependent bright band (learnable)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 10, n).astype(np.int64)
    x = rng.integers(0, 64, (n, 28, 28)).astype(np.uint8)
    for c in range(10):
        x[y == c, 2 + 2 * c : 5 + 2 * c, 4:24] = 230
    return LoadedData(x, y, [str(i) for i in range(10)], f"synthetic MNIST-shaped data (seed {seed})",
                      np.arange(n))


def bench_protocol(models, iterations: int, threads: int, n_test: int, log) -> list[dict]:
    train_data = synthetic_mnist(10_000, seed=0)
    test_data = synthetic_mnist(n_test, seed=1)
    rows = []
    for name in models:
        cfg = TrainConfig(dataset="mnist", model=name, seed=0, iterations=iterations, threads=threads,
                          noise_draws=0, eval_samples=min(1000, n_test))
        t0 = time.perf_counter()
        result = train(cfg, train_data, test_data)
        wall = time.perf_counter() - t0
        done = result.metrics["iterations_done"]
        rows.append({"model": name, "iterations": iterations, "iterations_done": done,
                     "status": result.status, "wall_s": wall,
                     "train_loop_s": result.metrics["train_time_s"],
                     "ms_per_iteration": result.metrics["train_time_s"] / max(done, 1) * 1e3})
        log(f"  {name:14s} {done} iterations  {wall:8.1f} s  ({rows[-1]['ms_per_iteration']:.1f} ms/iteration)")
    return rows


def bench_trace(models, reps: int, log) -> list[dict]:
    img = synthetic_mnist(1, seed=2).images
    x1 = to_sequence(img)  # [1, 28, 28]
    rows = []
    for name in models:
        torch.manual_seed(0)
        model = build_model(name).eval()
        with torch.no_grad():
            model(x1, return_trace=True)
            times = []
            for _ in range(reps):
                w0 = time.perf_counter()
                model(x1, return_trace=True)
                times.append(time.perf_counter() - w0)
        rows.append({"model": name, "median_ms": statistics.median(times) * 1e3, "reps": reps})
        log(f"  {name:14s} {rows[-1]['median_ms']:7.2f} ms")
    return rows


def bench_noise(models, n_images: int, log) -> list[dict]:
    data = synthetic_mnist(n_images, seed=3)
    rows = []
    for name in models:
        torch.manual_seed(0)
        model = build_model(name)
        w0 = time.perf_counter()
        acc = noisy_accuracy(model, data.images, data.labels, "gaussian", 0.01, draws=1, seed=0)
        wall = time.perf_counter() - w0
        rows.append({"model": name, "images": n_images, "seconds": wall, "accuracy_untrained": float(acc[0])})
        log(f"  {name:14s} {wall:7.2f} s for {n_images} noisy images")
    return rows


# ----------------------------------------------------------------------------------------
def machine_info() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        load = [round(v, 2) for v in os.getloadavg()]
    except OSError:
        load = None
    return {
        "cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform(),
        "python": platform.python_version(), "torch": torch.__version__,
        "mkldnn": bool(torch.backends.mkldnn.is_available()),
        "date": datetime.now(UTC).astimezone().isoformat(timespec="seconds"),
        "load_average_start": load, "note": LOAD_NOTE,
    }


def format_tables(result: dict) -> str:
    out = []
    m = result["machine"]
    out.append(f"RIMscope model benchmark  {m['date']}  torch {m['torch']}  {m['cpu']} ({m['cores']} cores)")
    out.append(f"load average at start {m['load_average_start']}; {LOAD_NOTE}")
    for run in result["runs"]:
        th = run["threads"]
        out.append("")
        out.append(f"== {th} thread(s) ==  reference: nn.LSTM(input_dim, {REF_HIDDEN}) + Linear({REF_HIDDEN}, 10), batch {BATCH}")
        out.append("Per step: median ms; ratio = median of model/reference over back-to-back pairs; cpu = the same "
                   "with CPU time; min = fastest model run / fastest reference run")
        out.append(f"{'shape':8s} {'model':14s} {'params':>8s} | {'train ms':>9s} {'lstm ms':>8s} {'ratio':>6s} {'cpu':>6s}"
                   f" {'min':>6s} | {'infer ms':>9s} {'lstm ms':>8s} {'ratio':>6s} {'cpu':>6s} {'min':>6s}")
        for r in run["steps"]:
            tr, inf = r["train"], r["infer"]

            def rc(d):
                return f"{d['ratio_cpu']:6.2f}" if d["ratio_cpu"] is not None else f"{'-':>6s}"

            out.append(f"{r['shape']:8s} {r['model']:14s} {r['parameters']:8d} | {tr['model_ms']:9.1f} {tr['ref_ms']:8.1f} "
                       f"{tr['ratio']:6.2f} {rc(tr)} {tr['ratio_of_minima']:6.2f} | {inf['model_ms']:9.1f} {inf['ref_ms']:8.1f} "
                       f"{inf['ratio']:6.2f} {rc(inf)} {inf['ratio_of_minima']:6.2f}")
        if run.get("protocol"):
            its = run["protocol"][0]["iterations"]
            note = "" if its == 1000 else f"  (SHORTENED: {its} iterations instead of the protocol's 1,000)"
            out.append("")
            out.append(f"Paper protocol via core.training.loop.train (SGD lr 0.1, batch 100, synthetic MNIST-shaped data){note}")
            out.append(f"{'model':14s} {'iterations':>10s} {'wall s':>9s} {'ms/iter':>9s} {'status':>10s}")
            for r in run["protocol"]:
                out.append(f"{r['model']:14s} {r['iterations_done']:10d} {r['wall_s']:9.1f} {r['ms_per_iteration']:9.1f} {r['status']:>10s}")
        if run.get("trace"):
            out.append("")
            out.append("Tracing one image, model(x[None], return_trace=True), median ms")
            out.append("  ".join(f"{r['model']} {r['median_ms']:.2f}" for r in run["trace"]))
        if run.get("noise"):
            n = run["noise"][0]["images"]
            out.append("")
            out.append(f"Evaluating {n} images with Gaussian noise (var 0.01, 1 draw, noise generation included), s")
            out.append("  ".join(f"{r['model']} {r['seconds']:.2f}" for r in run["noise"]))
    return "\n".join(out)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.bench_models", description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, nargs="+", default=None,
                   help="torch thread count(s) to measure, e.g. --threads 1 2 (default: as training, min(2, cores))")
    p.add_argument("--quick", action="store_true", help="few repetitions and images (a smoke test, numbers are rough)")
    p.add_argument("--protocol-iterations", type=int, default=1000,
                   help="iterations of the protocol run (default 1000, the paper's; fewer = shortened, and said so)")
    p.add_argument("--reps", type=int, default=None, help="back-to-back pairs per measurement (default 15, quick 2)")
    p.add_argument("--models", nargs="+", default=None, choices=list_models(), help="models (default: all five)")
    p.add_argument("--skip", nargs="+", default=[], choices=["steps", "protocol", "trace", "noise"],
                   help="sections to leave out")
    p.add_argument("--out", default=str(DEFAULT_OUT), help="JSON output path (default %(default)s)")
    return p


def main(argv=None) -> dict:
    args = build_parser().parse_args(argv)
    if args.protocol_iterations < 1:
        raise SystemExit("--protocol-iterations must be at least 1")
    models = args.models or list_models()
    threads_list = args.threads or [max(1, min(2, os.cpu_count() or 1))]
    reps = args.reps or (2 if args.quick else 15)
    warmup = 1 if args.quick else 3
    noise_images = 200 if args.quick else 1000
    n_test = 200 if args.quick else 1000

    def log(msg):
        print(msg, flush=True)

    result = {"machine": machine_info(), "settings": {
        "batch": BATCH, "reference": f"nn.LSTM(input_dim, {REF_HIDDEN}, batch_first=True) + nn.Linear({REF_HIDDEN}, 10)",
        "shapes": {k: {"T": t, "D": d} for k, (t, d) in SHAPES.items()}, "reps": reps, "warmup": warmup,
        "quick": args.quick, "protocol_iterations": args.protocol_iterations,
        "protocol_shortened": args.protocol_iterations != 1000, "models": models,
        "train_step": "forward + cross-entropy + zero_grad + backward + SGD(lr 0.1) step",
        "infer_step": "eval mode, no_grad, forward only"}, "runs": []}
    before = torch.get_num_threads()
    try:
        for threads in threads_list:
            torch.set_num_threads(threads)
            run = {"threads": threads}
            log(f"== {threads} thread(s) ==")
            if "steps" not in args.skip:
                log("per step, side by side with the LSTM reference:")
                run["steps"] = bench_steps(models, reps, warmup, log)
            if "protocol" not in args.skip:
                short = "" if args.protocol_iterations == 1000 else " (shortened from 1,000)"
                log(f"paper protocol, {args.protocol_iterations} iterations{short}:")
                run["protocol"] = bench_protocol(models, args.protocol_iterations, threads, n_test, log)
            if "trace" not in args.skip:
                log("trace latency, one image:")
                run["trace"] = bench_trace(models, 5 if args.quick else 30, log)
            if "noise" not in args.skip:
                log("noisy evaluation:")
                run["noise"] = bench_noise(models, noise_images, log)
            result["runs"].append(run)
    finally:
        torch.set_num_threads(before)
    try:
        result["machine"]["load_average_end"] = [round(v, 2) for v in os.getloadavg()]
    except OSError:
        pass
    print()
    print(format_tables(result))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(json.dumps(result, indent=1))
    tmp.replace(out)
    print(f"\nJSON written to {out}")
    return result


if __name__ == "__main__":
    main()
