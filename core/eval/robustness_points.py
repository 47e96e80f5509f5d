"""Computations behind the Mechanisms and Robustness pages, free of any UI.

Everything here is batched, runs under ``no_grad``, and is deterministic: the same model,
images and seed always give the same numbers, so the pages can cache results by key.

* ``fixed_subset``: the seeded test subset every method is scored on.
* ``run_batched``: probabilities (and optionally the per-timestep "activity") for many images.
* ``activation_stats``: how often each unit (LSTM) is active per class and per row.
* ``noisy_eval`` / ``stretch_eval``: test error (with a 95% interval) of one model under one
  noise level or vertical stretch, plus the activity pattern when asked for.
* ``activation_change``: which activations of a binary mask flip between two runs (clean vs
  noisy), as a fraction overall, per row and per unit.
* ``curve_from_points``: an error curve (with flips of a binary mask) from computed points.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from ..data.transforms import add_noise, stretch_rows
from ..intervals import wilson_interval
from .predict import TRACE_BATCH, forward_batched

# --------------------------------------------------------------------------- basics


def fixed_subset(n_total: int, n: int, seed: int = 0) -> np.ndarray:
    """Sorted indices of ``min(n, n_total)`` images drawn without replacement with ``seed``."""
    if n_total < 0 or n < 0:
        raise ValueError("sizes must not be negative")
    n = min(n, n_total)
    if n == n_total:
        return np.arange(n_total)
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n_total, size=n, replace=False))


def run_batched(model: torch.nn.Module, images, *, with_activity: bool = False,
                batch_size: int = TRACE_BATCH) -> tuple[np.ndarray, np.ndarray | None]:
    """Class probabilities ``[N, C]`` and, with ``with_activity``, activity ``[N, T, U]``.

    ``images`` are uint8 (divided by 255) or float in [0, 1], ``[N,H,W]`` or ``[N,H,W,3]``.
    """
    logits, act = forward_batched(model, images, batch_size=batch_size, with_activity=with_activity)
    return torch.softmax(logits, -1).numpy(), act


def error_interval(errors: int | float, n: int) -> tuple[float, float]:
    """Wilson 95% interval for an error rate measured as ``errors`` wrong out of ``n``."""
    return wilson_interval(errors, n)


def is_binary_mask(activity: np.ndarray) -> bool:
    """True when every activity value is 0 or 1 (RIM's active mask)."""
    a = np.asarray(activity)
    return bool(a.size) and bool(np.isin(a, (0.0, 1.0)).all())


def misclassified(probs: np.ndarray, labels) -> np.ndarray:
    """Positions of wrongly classified images, the most confidently wrong first."""
    probs = np.asarray(probs)
    labels = np.asarray(labels)
    pred = probs.argmax(1)
    wrong = np.flatnonzero(pred != labels)
    conf = probs[wrong, pred[wrong]]
    return wrong[np.argsort(-conf, kind="stable")]


# --------------------------------------------------------------------------- mechanisms


@dataclass
class ActivationStats:
    """Mean activity per class and per row over a set of images.

    For RIM the activity is the active mask, so the values are the fraction of time an LSTM
    is active. ``by_class_row[c, t, u]`` is the mean over images of class ``c``; classes with
    no image hold NaN.
    """

    by_class_row: np.ndarray  # [C, T, U]
    counts: np.ndarray  # [C] images per class
    accuracy: float
    n: int
    unit_names: list = field(default_factory=list)

    @property
    def by_class(self) -> np.ndarray:  # [C, U], averaged over rows; NaN for classes without images
        return self.by_class_row.mean(axis=1)

    @property
    def by_row(self) -> np.ndarray:  # [T, U], averaged over images (not over classes)
        w = self.counts[:, None, None].astype(np.float64)
        filled = np.nan_to_num(self.by_class_row)
        return (filled * w).sum(0) / max(1, self.counts.sum())

    @property
    def overall(self) -> np.ndarray:  # [U]
        return self.by_row.mean(0)

    def class_deviation(self) -> np.ndarray:
        """``by_class`` minus each unit's overall mean: > 0 where a unit prefers a class."""
        return self.by_class - self.overall[None, :]

    def preferences(self, classes: Sequence[str]) -> list[dict]:
        """Per unit: the class it is most and least active for, against its average."""
        dev = self.class_deviation()
        out = []
        for u, name in enumerate(self.unit_names or [f"unit {i + 1}" for i in range(dev.shape[1])]):
            col = dev[:, u]
            if np.all(np.isnan(col)):
                continue
            hi, lo = int(np.nanargmax(col)), int(np.nanargmin(col))
            out.append({"unit": name, "mean": float(self.overall[u]),
                        "most": classes[hi], "most_value": float(self.by_class[hi, u]),
                        "least": classes[lo], "least_value": float(self.by_class[lo, u]),
                        "spread": float(np.nanmax(col) - np.nanmin(col))})
        return out


def activation_stats(model: torch.nn.Module, images, labels, num_classes: int,
                     batch_size: int = TRACE_BATCH) -> ActivationStats:
    """Activity statistics of ``model`` over ``images`` (one batched pass with traces)."""
    labels = np.asarray(labels, dtype=np.int64)
    probs, act = run_batched(model, images, with_activity=True, batch_size=batch_size)
    _, T, U = act.shape
    sums = np.zeros((num_classes, T, U), dtype=np.float64)
    np.add.at(sums, labels, act.astype(np.float64))
    counts = np.bincount(labels, minlength=num_classes)
    with np.errstate(invalid="ignore", divide="ignore"):
        by_class_row = np.where(counts[:, None, None] > 0, sums / np.maximum(counts, 1)[:, None, None], np.nan)
    accuracy = float((probs.argmax(1) == labels).mean())
    return ActivationStats(by_class_row, counts, accuracy, len(labels), list(getattr(model, "unit_names", [])))


# --------------------------------------------------------------------------- robustness


@dataclass
class EvalPoint:
    """Test error of one model on one (noisy or stretched) version of a test subset."""

    error: float
    n: int
    predictions: np.ndarray  # [N]
    true_prob: float  # mean probability given to the true class
    activity: np.ndarray | None = None  # [N, T, U] (float16) when asked for

    @property
    def interval(self) -> tuple[float, float]:
        return error_interval(round(self.error * self.n), self.n)


def _point(model, x, labels, with_activity: bool, batch_size: int) -> EvalPoint:
    labels = np.asarray(labels, dtype=np.int64)
    probs, act = run_batched(model, x, with_activity=with_activity, batch_size=batch_size)
    pred = probs.argmax(1)
    return EvalPoint(float((pred != labels).mean()), len(labels), pred,
                     float(probs[np.arange(len(labels)), labels].mean()),
                     None if act is None else act.astype(np.float16))


def noisy_eval(model, images, labels, mode: str = "gaussian", strength: float = 0.01,
               seed: int = 0, *, with_activity: bool = False, batch_size: int = TRACE_BATCH) -> EvalPoint:
    """Error under one seeded noise draw (the same draw for every model given the same seed)."""
    x = add_noise(images, mode, strength, seed=seed)
    return _point(model, x, labels, with_activity, batch_size)


def stretch_eval(model, images, labels, factor: float, *, with_activity: bool = False,
                 batch_size: int = TRACE_BATCH) -> EvalPoint:
    """Error on the subset resized vertically by ``factor`` (T becomes round(H * factor))."""
    x = stretch_rows(images, factor)
    return _point(model, x, labels, with_activity, batch_size)


@dataclass
class ActivationChange:
    fraction: float  # share of (image, row, unit) activations that differ
    per_row: np.ndarray  # [T]
    per_unit: np.ndarray  # [U]
    changed: np.ndarray  # bool, same shape as the inputs


def activation_change(clean, noisy) -> ActivationChange:
    """Where two activation masks (``[T,U]`` or ``[N,T,U]``) differ (values rounded to 0/1)."""
    a = np.asarray(clean, dtype=np.float32) > 0.5
    b = np.asarray(noisy, dtype=np.float32) > 0.5
    if a.shape != b.shape:
        raise ValueError(f"activation masks differ in shape: {a.shape} vs {b.shape}")
    changed = a != b
    flat = changed.reshape(-1, *changed.shape[-2:])  # [N, T, U]
    return ActivationChange(float(changed.mean()) if changed.size else 0.0,
                            flat.mean(axis=(0, 2)), flat.mean(axis=(0, 1)), changed)


@dataclass
class Curve:
    x: np.ndarray  # noise strengths or stretch factors
    error: np.ndarray
    low: np.ndarray  # 95% interval
    high: np.ndarray
    flips: np.ndarray | None = None  # fraction of changed activations vs x = x[0] (binary masks)


def _curve(points: list[EvalPoint], xs, reference: EvalPoint | None) -> Curve:
    err = np.array([p.error for p in points])
    iv = np.array([p.interval for p in points]).reshape(-1, 2)
    flips = None
    if reference is not None and reference.activity is not None and is_binary_mask(reference.activity):
        flips = np.array([activation_change(reference.activity, p.activity).fraction
                          if p.activity is not None and p.activity.shape == reference.activity.shape
                          else np.nan for p in points])
    return Curve(np.asarray(xs, dtype=float), err, iv[:, 0], iv[:, 1], flips)


def curve_from_points(xs, points: list[EvalPoint], reference: EvalPoint | None = None) -> Curve:
    """A ``Curve`` from points computed (and cached) one by one by a caller."""
    return _curve(points, xs, reference)
