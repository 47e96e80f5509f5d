"""Robustness curves of the shipped models, computed once at build time and shipped.

The Robustness page scores every compared model on a fixed test subset at 21 noise levels
per noise kind and at 7 stretch factors. Those numbers are deterministic (fixed subset,
fixed noise seed), so for the shipped pretrained models they are computed here once and
stored in ``pretrained/curves.json``; the page reads a point from there when the weights
file and the image subset are byte for byte the ones it was computed on (both are hashed),
and computes it live otherwise (the user's own models, other data).

``python -m core.grid.curves build`` computes them (core/grid/curves.py).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from .robustness_points import EvalPoint, noisy_eval, stretch_eval

SUBSET = 500  # test images every method is scored on (fixed subset, seed 0)
SEED = 0  # one noise draw, shared by all methods
GRID = tuple(round(0.01 * i, 2) for i in range(21))  # noise strengths 0 .. 0.20
FACTORS = (0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0)
KINDS = ("gaussian", "salt_pepper", "speckle")  # plus "poisson" (no strength)
FILE = "curves.json"


def clean_key(kind: str, strength: float) -> tuple[str, float]:
    """Strength 0 is the clean test set whatever the kind: one point for all kinds."""
    if kind != "poisson" and strength <= 0:
        return "gaussian", 0.0
    return kind, (1.0 if kind == "poisson" else round(float(strength), 4))


def file_hash(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:20]


def subset_hash(images: np.ndarray, labels: np.ndarray) -> str:
    h = hashlib.sha256(np.ascontiguousarray(images).tobytes())
    h.update(np.ascontiguousarray(labels).astype(np.int64).tobytes())
    return h.hexdigest()[:20]


def point_key(weights: str, subset: str, what: str, value: float) -> str:
    return f"{weights}|{subset}|{what}|{value:g}"


class ShippedCurves:
    """Read-only view of ``curves.json``: ``get(...) -> (error, n) | None``."""

    def __init__(self, points: dict | None = None):
        self.points = points or {}

    @classmethod
    def load(cls, pretrained_dir: Path) -> ShippedCurves:
        p = Path(pretrained_dir) / FILE
        try:
            data = json.loads(p.read_text())
            pts = data.get("points") if isinstance(data, dict) else None
            return cls(pts if isinstance(pts, dict) else {})
        except (OSError, ValueError):
            return cls({})

    def subsets(self, weights: str) -> set[str]:
        """The subsets (their hashes) holding points of these weights."""
        return {k.split("|")[1] for k in self.points if k.startswith(weights + "|")}

    def get(self, weights: str, subset: str, what: str, value: float) -> EvalPoint | None:
        v = self.points.get(point_key(weights, subset, what, value))
        if not (isinstance(v, list) and len(v) == 2):
            return None
        return EvalPoint(float(v[0]), int(v[1]), np.empty(0, np.int64), float("nan"))


def score_all(model, images, labels) -> dict[tuple[str, float], tuple[float, int]]:
    """Every curve point the page draws for one model on one subset."""
    out = {}
    for kind in KINDS:
        for s in GRID:
            k = clean_key(kind, s)
            if k not in out:
                p = noisy_eval(model, images, labels, k[0], k[1], SEED)
                out[k] = (p.error, p.n)
    p = noisy_eval(model, images, labels, "poisson", 1.0, SEED)
    out[("poisson", 1.0)] = (p.error, p.n)
    for f in FACTORS:
        p = stretch_eval(model, images, labels, f)
        out[("stretch", float(f))] = (p.error, p.n)
    return out
