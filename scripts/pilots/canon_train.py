"""PILOT (not a protocol of the project): train on MNIST's training digits as the upload path sees them.

Hypothesis: part of the external sets' misreads come from a train/test mismatch, the models
being trained on raw MNIST but reading every upload after ``prepare_digit`` (strokes eroded or
redrawn to 2.2 px, refitted, mass-centred). Here the training images (not the validation or
test images) are replaced by ``prepare_digit(image, invert=False)`` of themselves, then the
converged protocol trains as usual (``core.training.cli.main``, in this process).

    RIMSCOPE_DATA_DIR=<data> OMP_NUM_THREADS=1 python -m scripts.pilots.canon_train <cache.npz> \
        --protocol converged --model entnet --seed 3 --out <dir>
"""
from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time

import numpy as np


def _canon(chunk: np.ndarray) -> np.ndarray:
    from core.digits.prepare import prepare_digit
    return np.stack([prepare_digit(img, invert=False).array for img in chunk]).astype(np.uint8)


def canonical_train(cache: str) -> np.ndarray:
    if os.path.exists(cache):
        return np.load(cache)["x"]
    data_dir = os.environ.get("RIMSCOPE_DATA_DIR")
    if not data_dir or not os.path.exists(os.path.join(data_dir, "mnist", "train.npz")):
        raise SystemExit("set RIMSCOPE_DATA_DIR to a folder with mnist/train.npz (the cache is made from it)")
    x = np.load(os.path.join(data_dir, "mnist", "train.npz"))["x"]
    t = time.time()
    with mp.get_context("spawn").Pool(2) as pool:
        out = np.concatenate(pool.map(_canon, np.array_split(x, 40)))
    print(f"canonicalised {len(out)} digits in {time.time() - t:.0f} s", flush=True)
    np.savez_compressed(cache, x=out)
    return out


def main() -> int:
    cache, argv = sys.argv[1], sys.argv[2:]
    canon = canonical_train(cache)
    import core.training.loop as L
    original = L.prepare_data

    def patched(cfg, train_data, test_data):
        data = original(cfg, train_data, test_data)
        mine = canon[train_data.indices] if train_data.indices is not None else canon
        assert mine.shape == train_data.images.shape, (mine.shape, train_data.images.shape)
        idx = L.split_validation(cfg, len(mine))[0] if cfg.val_images else np.arange(len(mine))
        data.x_train = mine[idx]
        return data

    L.prepare_data = patched
    from core.training.cli import main as train_main
    return train_main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
