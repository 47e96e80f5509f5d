"""Measurements of a 28x28 digit image shared by the preprocessing and digit-generator tests."""

from __future__ import annotations

import numpy as np


def centre_of_mass(a: np.ndarray) -> tuple[float, float]:
    rows, cols = np.indices(a.shape)
    w = a.astype(np.float64)
    return (rows * w).sum() / w.sum(), (cols * w).sum() / w.sum()


def ink_box(a: np.ndarray) -> tuple[int, int]:
    rows = np.flatnonzero(a.any(axis=1))
    cols = np.flatnonzero(a.any(axis=0))
    return rows[-1] - rows[0] + 1, cols[-1] - cols[0] + 1
