"""The error a model scores without learning anything: chance and the majority class.

* chance error: 1 − 1/classes (guessing uniformly at random).
* majority-class error: 1 − (largest class count) / (test images), always answering the
  biggest class of the test set.

The test sets' class counts are recorded here, so the tables and pages need no data set.
Counted with ``np.bincount(np.load("<data>/<ds>/test.npz")["y"])`` over the
npz folders the grids trained and tested on (/work/shared/data; the same counts are the row
sums of the confusion matrix every run JSON stores, which ``counts_from_confusion`` reads).
"""

from __future__ import annotations

import math

import numpy as np

SOURCE = "np.bincount of test.npz 'y' (the grids' npz folders)"
TEST_CLASS_COUNTS: dict[str, list[int]] = {
    "mnist": [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009],
    "fashion_mnist": [1000] * 10,
    "cifar10": [1000] * 10,
    # the small real Animals-10 subset: five classes of 46 test images, five of 6
    "animals10": [46, 46, 46, 46, 46, 6, 6, 6, 6, 6],
}


def counts_from_confusion(confusion) -> list[int]:
    """Test images per class: the row sums of a stored confusion matrix."""
    return [int(x) for x in np.asarray(confusion, dtype=np.int64).sum(1)]


def floors_from_counts(counts) -> dict:
    """``{"chance_error", "majority_error", "majority_class", "classes", "test_n"}`` (fractions)."""
    c = np.asarray(counts, dtype=float)
    if c.ndim != 1 or len(c) == 0 or c.sum() <= 0:
        return {"chance_error": math.nan, "majority_error": math.nan, "majority_class": None,
                "classes": 0, "test_n": 0}
    return {"chance_error": 1.0 - 1.0 / len(c), "majority_error": float(1.0 - c.max() / c.sum()),
            "majority_class": int(c.argmax()), "classes": len(c), "test_n": int(c.sum())}


def floors(dataset: str) -> dict:
    """The floors of a data set's test split (NaN for one without recorded counts)."""
    return floors_from_counts(TEST_CLASS_COUNTS.get(dataset, []))
