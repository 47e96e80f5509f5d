#!/usr/bin/env python3
"""Cut the bundled samples of the external handwriting test sets (assets/samples/).

For each set (``semeion``, ``optdigits``) and each digit 0..9: the first 20 images of that
digit among the ODD-indexed images of the full set (the half that is reported, never tuned
on), 200 images per set in ascending index order. Keys: ``x`` uint8 [200, H, W] (255 = ink),
``y`` int64, ``index`` int64 (position in the full set), ``classes``. The licence and the
indices are in ``assets/samples/LICENSES.md``.

    python -m scripts.make_handwriting_samples /work/shared/data/handwriting
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

PER_CLASS = 20
OUT = Path(__file__).resolve().parent.parent / "assets" / "samples"


def cut(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    odd = np.arange(1, len(y), 2)
    picked = [odd[y[odd] == d][:PER_CLASS] for d in range(10)]
    return np.sort(np.concatenate(picked))


def main(argv: list[str]) -> int:
    folder = Path(argv[0]) if argv else Path("/work/shared/data/handwriting")
    for name in ("semeion", "optdigits"):
        with np.load(folder / f"{name}.npz", allow_pickle=False) as z:
            x, y = z["x"], z["y"].astype(np.int64)
        index = cut(x, y)
        np.savez_compressed(OUT / f"{name}_sample.npz", x=x[index], y=y[index], index=index,
                            classes=np.array([str(d) for d in range(10)]))
        ranges = [f"{d}: {index[y[index] == d][0]}..{index[y[index] == d][-1]}" for d in range(10)]
        print(f"{name}: {len(index)} images, indices per digit {'; '.join(ranges)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
