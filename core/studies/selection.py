"""What the input attention of ``rim`` decides, for one weights file and its random-selection
twin, on the command line (the measurements are core.eval.selection's)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def measure_selection(root="results", data_dir=None, images: int = 2000) -> list[Path]:
    """Measure each shipped MNIST RIM's selection (``python -m core.studies.selection --shipped``) (``core.eval.selection``: margins, changes under
    noise, class information) on a fixed subset of the test split (``fixed_subset`` seed 0, as the
    Mechanisms page) and store it as ``results/<grid>/selection.json`` (needs torch and the data)."""
    from ..catalog import load_entry, pretrained_entries
    from ..data.datasets import load_dataset
    from ..eval.robustness_points import fixed_subset
    from ..eval.selection import selection_report

    data = load_dataset("mnist", "test", data_dir=data_dir, download=False, allow_sample=False)
    idx = fixed_subset(len(data.images), images, seed=0)
    out = []
    for entry in pretrained_entries("mnist"):
        grid_dir = Path(root) / {"converged": "converged", "paper": "paper"}.get(entry.protocol, "")
        if entry.model != "rim" or entry.protocol not in ("converged", "paper") or not grid_dir.is_dir():
            continue
        model, meta = load_entry(entry)
        rep = selection_report(model, data.images[idx], data.labels[idx]).summary()
        rep.update(dataset="mnist", protocol=entry.protocol, seed=meta.get("seed"), subset="fixed_subset seed 0")
        (grid_dir / "selection.json").write_text(json.dumps(rep, indent=1))
        out.append(grid_dir / "selection.json")
    return out


def main(argv=None) -> int:
    """``python -m core.studies.selection MODEL_STEM [--dataset mnist] [--n 2000]``: the three numbers
    for a model and its random-selection twin, as JSON."""
    import argparse
    import json

    import torch

    from ..data.datasets import load_dataset
    from ..eval.robustness_points import fixed_subset
    from ..eval.selection import random_twin, selection_report
    from ..training.weights import load_weights

    p = argparse.ArgumentParser(prog="python -m core.studies.selection", description=main.__doc__)
    p.add_argument("stem", nargs="?", help="model path without suffix, e.g. pretrained/mnist/rim")
    p.add_argument("--shipped", action="store_true",
                   help="instead: every shipped MNIST RIM, written to results/<grid>/selection.json")
    p.add_argument("--n", type=int, default=2000, help="test images (fixed subset, seed 0)")
    p.add_argument("--data-dir", default=None)
    args = p.parse_args(argv)
    if args.shipped:
        print("\n".join(map(str, measure_selection(data_dir=args.data_dir, images=args.n))))
        return 0
    if not args.stem:
        p.error("give a model stem, or --shipped")
    torch.set_num_threads(1)
    model, meta = load_weights(args.stem)
    data = load_dataset(meta["dataset"], "test", data_dir=args.data_dir)
    idx = fixed_subset(len(data), args.n, seed=0)
    out = {"model": args.stem, "test_source": data.source, "images": len(idx)}
    for name, m in (("attention", model), ("random_twin", random_twin(model))):
        r = selection_report(m, data.images[idx], data.labels[idx])
        s = r.summary()
        s["share_margin_below_0.01"] = float((r.margins[np.isfinite(r.margins)] < 0.01).mean()) \
            if np.isfinite(r.margins).any() else None
        out[name] = s
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
