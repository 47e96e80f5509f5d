"""What the input attention of ``rim`` decides, for one weights file and its random-selection
twin, on the command line (the measurements are core.eval.selection's)."""

from __future__ import annotations

import numpy as np


def main(argv=None) -> int:
    """``python -m core.studies.selection MODEL_STEM [--dataset mnist] [--n 2000]``: the three numbers
    for a checkpoint and its random-selection twin, as JSON."""
    import argparse
    import json

    import torch

    from ..data.datasets import load_dataset
    from ..eval.robustness_points import fixed_subset
    from ..eval.selection import random_twin, selection_report
    from ..training.weights import load_weights

    p = argparse.ArgumentParser(prog="python -m core.studies.selection", description=main.__doc__)
    p.add_argument("stem", help="checkpoint path without suffix, e.g. pretrained/mnist/rim")
    p.add_argument("--n", type=int, default=2000, help="test images (fixed subset, seed 0)")
    p.add_argument("--data-dir", default=None)
    args = p.parse_args(argv)
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
