"""Mechanisms across a whole set of images (LSTMVis-style exploration), free of any UI.

* ``set_traces``: one batched pass over a set that keeps, per image, the selection mask
  ``[T, U]`` (models whose trace schema has one) and the per-unit score the attention ranks
  by (input-attention weight; the activity for models without one).
* ``find_matches``: the images whose mask on a block (rows t1..t2 x some units) is closest to a
  query's, by Hamming distance on that block (exact, integer), nearest first.
* ``top_rows``: the images and rows that select a unit most strongly.
* ``unit_rates``: a unit's mean value (active share for a mask) per class and per row.
* ``selection_shift``: per unit, how its selection changes between two runs (clean vs noisy).

Everything is deterministic (ties: lower image index first), so pages can cache by key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..models.registry import TraceSchema
from .predict import batched_outputs

BATCH = 500


@dataclass
class SetTraces:
    """What a model did on every image of a set."""

    mask: np.ndarray | None  # bool [N, T, U]; None: the model has no selection mask
    score: np.ndarray  # float16 [N, T, U]: what selects a unit (input-attention weight) or its activity
    score_label: str
    pred: np.ndarray  # int64 [N] predicted class
    labels: np.ndarray  # int64 [N]
    indices: np.ndarray  # [N] position of each image in the images given to ``set_traces``' caller

    def __len__(self) -> int:
        return len(self.labels)


def set_traces(model: torch.nn.Module, images, labels, schema: TraceSchema, *, indices=None,
               batch_size: int = BATCH) -> SetTraces:
    """Masks and scores of ``model`` on ``images`` (uint8 or [0, 1] floats), in batches
    (``core.eval.predict.batched_outputs``, the one inference loop)."""
    if len(images) == 0:
        raise ValueError("no images to trace")
    masks, scores, preds = [], [], []
    use_attention = schema.input_attention is not None
    for logits, trace in batched_outputs(model, images, batch_size=batch_size, with_trace=True):
        preds.append(logits.argmax(-1).cpu().numpy())
        if schema.has(trace, "mask"):
            masks.append(schema.get(trace, "mask").cpu().numpy() > 0.5)
        s = schema.get(trace, "input_attention") if use_attention else None
        scores.append((trace["activity"] if s is None else s).float().cpu().numpy().astype(np.float16))
    label = "input-attention weight" if use_attention else schema.activity_label
    return SetTraces(np.concatenate(masks) if masks else None, np.concatenate(scores), label,
                     np.concatenate(preds).astype(np.int64), np.asarray(labels, dtype=np.int64),
                     np.arange(len(images)) if indices is None else np.asarray(indices))


# --------------------------------------------------------------------------- match view


@dataclass(frozen=True)
class Block:
    """Rows ``t1..t2`` (1-based, inclusive, as the pages number rows) x ``units`` (0-based)."""

    t1: int
    t2: int
    units: tuple[int, ...]

    @property
    def cells(self) -> int:
        return (self.t2 - self.t1 + 1) * len(self.units)

    def check(self, T: int, U: int) -> None:
        if not (1 <= self.t1 <= self.t2 <= T):
            raise ValueError(f"rows must satisfy 1 <= first <= last <= {T}, got {self.t1}..{self.t2}")
        if not self.units:
            raise ValueError("choose at least one unit")
        if len(set(self.units)) != len(self.units) or not all(0 <= u < U for u in self.units):
            raise ValueError(f"units must be distinct numbers from 0 to {U - 1}, got {list(self.units)}")

    def take(self, a: np.ndarray) -> np.ndarray:
        """The block of ``a`` (``[..., T, U]``) as ``[..., rows, units]``."""
        return np.asarray(a)[..., self.t1 - 1 : self.t2, :][..., list(self.units)]


@dataclass
class Matches:
    """Every image of the set ordered by its distance to the query on the block."""

    order: np.ndarray  # [M] positions in the set, nearest first (ties: lower position first)
    distance: np.ndarray  # [M] int, Hamming distance on the block, ascending
    block: Block

    def within(self, threshold: int) -> int:
        """How many images are at most ``threshold`` cells away."""
        return int(np.searchsorted(self.distance, threshold, side="right"))

    def class_counts(self, labels, num_classes: int, threshold: int) -> np.ndarray:
        """Class histogram ``[C]`` of the images within ``threshold``."""
        hit = self.order[: self.within(threshold)]
        return np.bincount(np.asarray(labels)[hit], minlength=num_classes)


def find_matches(masks: np.ndarray, query: np.ndarray, block: Block, *, exclude: Sequence[int] = ()) -> Matches:
    """Images of ``masks`` ``[N, T, U]`` ranked by Hamming distance to ``query`` ``[T, U]`` on
    ``block``; positions in ``exclude`` (e.g. the query image itself) are left out."""
    masks = np.asarray(masks)
    query = np.asarray(query)
    if masks.ndim != 3 or query.shape != masks.shape[1:]:
        raise ValueError(f"query {list(query.shape)} does not fit the set's masks {list(masks.shape)}")
    block.check(*query.shape)
    dist = (block.take(masks > 0.5) != block.take(query > 0.5)[None]).sum(axis=(1, 2))
    keep = np.ones(len(masks), dtype=bool)
    keep[[int(i) for i in exclude if 0 <= int(i) < len(masks)]] = False
    pos = np.flatnonzero(keep)
    order = pos[np.argsort(dist[pos], kind="stable")]
    return Matches(order, dist[order].astype(np.int64), block)


# --------------------------------------------------------------------------- each unit


def top_rows(score: np.ndarray, unit: int, k: int = 8) -> list[tuple[int, int, float]]:
    """The ``k`` images whose strongest row for ``unit`` scores highest: ``(position, row
    (1-based), score)``, one row per image, highest first (ties: lower position first)."""
    s = np.asarray(score[:, :, unit], dtype=np.float32)
    row = s.argmax(axis=1)
    best = s[np.arange(len(s)), row]
    order = np.argsort(-best, kind="stable")[:k]
    return [(int(i), int(row[i]) + 1, float(best[i])) for i in order]


def unit_rates(values: np.ndarray, labels, num_classes: int, unit: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean of ``values[:, :, unit]`` per class ``[C]`` (NaN: no image) and per row ``[T]``."""
    v = np.asarray(values[:, :, unit], dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    sums = np.bincount(labels, weights=v.mean(axis=1), minlength=num_classes)
    counts = np.bincount(labels, minlength=num_classes)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_class = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return per_class, v.mean(axis=0)


@dataclass
class UnitShift:
    """Per unit: share of (image, row) cells active in each run, and how many switched."""

    clean: np.ndarray  # [U]
    noisy: np.ndarray  # [U]
    switched_on: np.ndarray  # [U] inactive clean, active noisy
    switched_off: np.ndarray  # [U] active clean, inactive noisy

    @property
    def changed(self) -> np.ndarray:
        return self.switched_on + self.switched_off


def selection_shift(clean: np.ndarray, noisy: np.ndarray) -> UnitShift:
    """How each unit's selection differs between two masks ``[N, T, U]`` of the same images."""
    a, b = np.asarray(clean) > 0.5, np.asarray(noisy) > 0.5
    if a.shape != b.shape or a.ndim != 3:
        raise ValueError(f"masks must both be [N, T, U] of one shape, got {list(a.shape)} and {list(b.shape)}")
    axes = (0, 1)
    return UnitShift(a.mean(axes), b.mean(axes), (~a & b).mean(axes), (a & ~b).mean(axes))
