"""The knock-out and selection-swap study of the shipped converged RIMs:
``python -m core.studies.interventions`` writes results/interventions/ (knockout.csv, knockout.md).
The computation is core.eval.interventions; this module loads the shipped weights and the test sets."""
from __future__ import annotations

from pathlib import Path

import torch

from ..data.datasets import load_dataset
from ..eval.interventions import NOISE_VAR, knockout_table, write_csv
from ..report.fmt import source_parts
from ..training.weights import load_weights


def main(argv=None) -> int:
    """``python -m core.studies.interventions [--datasets mnist fashion_mnist] [--n N]``: the knock-out
    and selection-swap tables of the shipped converged RIMs on the full test sets, written to
    results/interventions/ (knockout.csv, knockout.md)."""
    import argparse
    import time


    root = Path(__file__).resolve().parents[2]
    p = argparse.ArgumentParser(prog="python -m core.studies.interventions", description=main.__doc__)
    p.add_argument("--datasets", nargs="+", default=["mnist", "fashion_mnist"])
    p.add_argument("--protocol", default="converged", help="pretrained/<protocol>/<dataset>/rim")
    p.add_argument("--n", type=int, default=0, help="first N test images (0: all)")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--out", default=str(root / "results" / "interventions"))
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tables, md = {}, ["# Interventions on the shipped RIM", "",
                      "Written by `python -m core.studies.interventions`. Each LSTM knocked out in turn (never active; "
                      "it keeps its zero initial state, see `core/models/rim.py`, `Intervention`), and the same "
                      "weights run with another selection or alpha 0 at inference. Accuracy with its 95% Wilson "
                      "interval; drop = intact minus variant, in points; lost / gained = images the variant gets "
                      "wrong that the intact model gets right, and the reverse; p: the paired exact (McNemar) test "
                      "of the variant against the intact model on the same images (not adjusted for the 9 "
                      "comparisons). Noise: Gaussian, variance "
                      f"{NOISE_VAR:g}, one draw (seed 0).", ""]
    for dataset in args.datasets:
        stem = root / "pretrained" / args.protocol / dataset / "rim"
        model, meta = load_weights(stem)
        data = load_dataset(dataset, "test", data_dir=args.data_dir)
        images, labels = data.images, data.labels
        if args.n:
            images, labels = images[: args.n], labels[: args.n]
        t0 = time.perf_counter()
        table = knockout_table(model, images, labels, data.classes)
        secs = time.perf_counter() - t0
        tables[(dataset, f"{args.protocol}/rim")] = table
        md.append(table.markdown(f"{dataset}: `pretrained/{args.protocol}/{dataset}/rim` (seed {meta.get('seed')}), "
                                 f"{len(labels):,} test images ({source_parts(data.source)[0]})"))
        print(f"{dataset}: {len(labels)} images, {len(table.variants)} variants x 2 conditions in {secs:.1f} s")
    write_csv(out / "knockout.csv", tables)
    (out / "knockout.md").write_text("\n".join(md))
    print(f"wrote {out / 'knockout.csv'} and {out / 'knockout.md'}")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
