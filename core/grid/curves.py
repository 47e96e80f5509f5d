"""The robustness curves shipped with the pretrained models (``pretrained/curves.json``, read by
core.eval.curves): every manifest entry scored on the fixed subset of every test source here.

::

    python -m core.grid.curves build          # every manifest entry x every data source here
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from .. import paths
from ..eval.curves import FACTORS, FILE, GRID, SEED, SUBSET, ShippedCurves, file_hash, point_key, score_all, subset_hash
from ..eval.robustness_points import fixed_subset


def build(pretrained_dir: Path, data_dirs: list, log=print, subset: int = SUBSET) -> dict:
    """Score every manifest entry on the fixed subset of every test source found (the bundled
    sample, and the full test set of each data folder given) and write ``curves.json``. Points of
    weights and subsets already in the file are kept, not recomputed (they are deterministic)."""
    import torch

    from ..catalog import load_entry, pretrained_entries
    from ..data.datasets import load_dataset

    torch.set_num_threads(1)
    pretrained_dir = Path(pretrained_dir)
    points: dict = dict(ShippedCurves.load(pretrained_dir).points)  # incremental: known weights are kept
    t0 = time.perf_counter()
    entries = pretrained_entries(pretrained_dir=pretrained_dir)
    for ds in sorted({e.dataset for e in entries}):
        subsets = []
        for d in [None, *data_dirs]:  # None: whatever a machine without data sees (the sample)
            try:
                data = load_dataset(ds, "test", data_dir=d, download=False, allow_sample=d is None,
                                    sources=("npz", "folder") if d else ("sample",))
            except Exception as exc:  # noqa: BLE001 - a source that is not here is skipped
                log(f"{ds}: no test data from {d or 'the bundled sample'} ({type(exc).__name__})")
                continue
            idx = fixed_subset(len(data), subset, seed=0)
            x, y = np.ascontiguousarray(data.images[idx]), np.ascontiguousarray(data.labels[idx])
            subsets.append((subset_hash(x, y), x, y, data.source))
        for e in [e for e in entries if e.dataset == ds]:
            model, _ = load_entry(e)
            wh = file_hash(e.stem.with_suffix(".safetensors"))
            for sh, x, y, src in subsets:
                if point_key(wh, sh, "stretch", 1.0) in points:  # this weights file on this subset: done
                    continue
                for (what, v), (err, n) in score_all(model, x, y).items():
                    points[point_key(wh, sh, what, v)] = [err, n]
                log(f"{e.key}: {src} done ({time.perf_counter() - t0:.0f} s)")
    current = {file_hash(e.stem.with_suffix(".safetensors")) for e in entries}
    points = {k: v for k, v in points.items() if k.split("|", 1)[0] in current}  # drop replaced weights
    out = {"subset": subset, "seed": SEED, "grid": list(GRID), "factors": list(FACTORS),
           "built_s": round(time.perf_counter() - t0, 1), "points": points}
    (pretrained_dir / FILE).write_text(json.dumps(out, separators=(",", ":")))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m core.grid.curves", description=__doc__.split("::")[0].strip())
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="score the shipped models and write pretrained/curves.json")
    b.add_argument("--pretrained", default=None, help="the pretrained folder (default: $RIMSCOPE_PRETRAINED_DIR or pretrained/)")
    b.add_argument("--data-dir", action="append", default=[], help="a folder with <dataset>/test.npz (repeatable)")
    args = p.parse_args(argv)
    pre = Path(args.pretrained) if args.pretrained else paths.pretrained_dir()
    out = build(pre, args.data_dir)
    print(f"{len(out['points'])} points in {out['built_s']} s -> {pre / FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
