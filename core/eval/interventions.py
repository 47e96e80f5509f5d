"""Interventions on the RIM's mechanisms: what the attention's choice *does*, not only what it is.

Every view elsewhere is correlational (which LSTM fired, on which rows). Here the same trained
weights are run with a change (``core.models.rim.Intervention``): cells of the active mask
forced on or off, an LSTM knocked out for the whole input, the communication share ``alpha``
set at inference, or the selection swapped ("random", seeded, or "all"). Both implementations
of the RIM take the same intervention and give the same numbers (tests/test_interventions.py).

* ``run``: logits and trace of many images under one intervention (the batched inference loop).
* ``force_grid`` / ``downstream_changes``: one input's override and the cells that changed
  because of it (the LSTMs whose selection moved at later rows).
* ``knockout_table``: across a set, knock out each LSTM in turn and swap the selection, clean
  and under Gaussian noise: accuracy, its Wilson interval and its drop, overall and per class,
  with a caption computed from the numbers.
* ``main``: the CLI that writes ``results/interventions/`` for the shipped converged RIMs.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..data.transforms import add_noise, to_sequence
from ..intervals import wilson_interval
from ..models.rim import RIM, Intervention
from .predict import BATCH

NOISE_VAR = 0.01  # the paper's noise test: Gaussian, variance 0.01
RANDOM_SEED = 0  # the generator of the "random" selection swap
SIGNIFICANCE = 0.05  # the paired exact test's level (one test per variant, not adjusted)


def supports(model) -> bool:
    """Whether ``model`` takes interventions (the RIM and its variants)."""
    return isinstance(model, RIM)


@torch.no_grad()
def run(model, images, intervention: Intervention | None = None, *, batch_size: int = BATCH,
        with_trace: bool = False) -> tuple[np.ndarray, dict | None]:
    """Logits [N, C] and, with ``with_trace``, the trace ([N, T, ...] numpy arrays) of ``images``
    (uint8 or [0, 1] floats) under ``intervention``, in evaluation mode. A per-image ``force``
    ([N, T, n]) is cut into the batches with the images. A seeded "random" selection seeds batch
    b's generator with ``seed + b``: reproducible for a given ``batch_size``."""
    x_all = np.asarray(images)
    if len(x_all) == 0:
        raise ValueError("no images to run")
    if intervention is not None and not supports(model):
        raise ValueError(f"{type(model).__name__} has no mechanisms to intervene on (RIM only)")
    was = model.training
    model.eval()
    logits, traces = [], []
    try:
        for b, i in enumerate(range(0, len(x_all), batch_size)):
            x = to_sequence(x_all[i : i + batch_size])
            iv = intervention
            if iv is not None and iv.force is not None and np.ndim(iv.force) == 3:
                iv = Intervention(np.asarray(iv.force)[i : i + batch_size], iv.knock_out, iv.alpha, iv.selection,
                                  iv.seed)
            if iv is not None and iv.seed is not None and b:
                iv = Intervention(iv.force, iv.knock_out, iv.alpha, iv.selection, iv.seed + b)
            kw = {} if iv is None else {"intervention": iv}
            if with_trace:
                out, tr = model(x, return_trace=True, **kw)
                traces.append({k: v.cpu().numpy() for k, v in tr.items()})
            else:
                out = model(x, **kw)
            logits.append(out.cpu().numpy())
    finally:
        model.train(was)
    trace = {k: np.concatenate([t[k] for t in traces]) for k in traces[0]} if with_trace else None
    return np.concatenate(logits), trace


def force_grid(T: int, n: int, on=(), off=()) -> np.ndarray:
    """A [T, n] override: -1 (as chosen) except the (row, LSTM) cells in ``on`` (1) and ``off`` (0);
    rows and LSTMs count from 0."""
    grid = np.full((T, n), -1.0, dtype=np.float32)
    for cells, value in ((on, 1.0), (off, 0.0)):
        for t, i in cells:
            if not (0 <= t < T and 0 <= i < n):
                raise ValueError(f"cell (row {t}, LSTM {i}) is outside the {T} x {n} mask")
            grid[t, i] = value
    return grid


def pinned_cells(intervention: Intervention, T: int, n: int) -> np.ndarray:
    """[T, n] bool: the cells the intervention sets directly (forced or knocked out)."""
    pinned = np.zeros((T, n), dtype=bool)
    if intervention.force is not None:
        f = np.nan_to_num(np.asarray(intervention.force, dtype=np.float64), nan=-1.0)
        pinned |= (f.reshape(-1, T, n) >= 0).any(0)
    for i in intervention.knock_out:
        pinned[:, int(i)] = True
    return pinned


def downstream_changes(original: np.ndarray, after: np.ndarray, intervention: Intervention) -> np.ndarray:
    """[T, n] bool: cells of one input's mask that changed without being set by the intervention
    (an LSTM selected or dropped by the attention because an earlier cell was changed)."""
    original, after = np.asarray(original) > 0.5, np.asarray(after) > 0.5
    return (original != after) & ~pinned_cells(intervention, *original.shape)


# --------------------------------------------------------------------------- across a set


@dataclass
class Variant:
    """One way of running the model across the set, with its accuracies."""

    key: str  # "intact", "knockout:0", ..., "selection:random", "selection:all", "alpha:0"
    label: str
    kind: str  # "intact", "knockout", "selection"
    clean: np.ndarray  # [N] bool, correct per image
    noisy: np.ndarray  # [N] bool


@dataclass
class InterventionTable:
    """Knock-outs and selection swaps of one model on one set (see ``knockout_table``)."""

    labels: np.ndarray  # [N]
    classes: list[str]
    unit_names: list[str]
    noise_var: float
    variants: list[Variant] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.labels)

    def variant(self, key: str) -> Variant:
        return next(v for v in self.variants if v.key == key)

    def accuracy(self, key: str, condition: str = "clean", cls: int | None = None) -> tuple[float, float, float, int]:
        """(accuracy, Wilson low, Wilson high, images) of a variant, overall or on one class."""
        correct = getattr(self.variant(key), condition)
        if cls is not None:
            correct = correct[self.labels == cls]
        k, n = int(correct.sum()), len(correct)
        lo, hi = wilson_interval(k, n)
        return (k / n if n else math.nan), lo, hi, n

    def drop(self, key: str, condition: str = "clean", cls: int | None = None) -> float:
        """Accuracy of the intact model minus the variant's, in points (positive = worse)."""
        return 100.0 * (self.accuracy("intact", condition, cls)[0] - self.accuracy(key, condition, cls)[0])

    def flips(self, key: str, condition: str = "clean") -> tuple[int, int]:
        """(images the variant gets wrong that the intact model gets right, the reverse)."""
        base, var = getattr(self.variant("intact"), condition), getattr(self.variant(key), condition)
        return int((base & ~var).sum()), int((~base & var).sum())

    def p_value(self, key: str, condition: str = "clean") -> float:
        """Paired exact test (McNemar's, two-sided) of the variant against the intact model on
        the same images: under no effect, the images lost and gained are equally likely."""
        from scipy.stats import binomtest

        lost, gained = self.flips(key, condition)
        return 1.0 if lost + gained == 0 else float(binomtest(lost, lost + gained, 0.5).pvalue)

    def significant(self, key: str, condition: str = "clean", level: float = SIGNIFICANCE) -> bool:
        """The variant's accuracy differs from the intact model's (paired exact test, p < level)."""
        return self.p_value(key, condition) < level

    def significant_drop(self, key: str, condition: str = "clean") -> bool:
        return self.drop(key, condition) > 0 and self.significant(key, condition)

    def rows(self) -> list[dict]:
        """Long-format rows (one per variant x condition x class, 'all' first) for the CSV."""
        out = []
        for v in self.variants:
            for condition in ("clean", "noisy"):
                for cls in [None, *range(len(self.classes))]:
                    acc, lo, hi, n = self.accuracy(v.key, condition, cls)
                    lost, gained = self.flips(v.key, condition) if cls is None else (None, None)
                    out.append({"variant": v.key, "label": v.label, "condition": condition,
                                "noise_var": self.noise_var if condition == "noisy" else 0.0,
                                "class": "all" if cls is None else self.classes[cls], "images": n,
                                "accuracy": acc, "wilson_low": lo, "wilson_high": hi,
                                "drop_points": self.drop(v.key, condition, cls),
                                "lost": lost, "gained": gained,
                                "p_paired": self.p_value(v.key, condition) if cls is None else None})
        return out

    def per_class_drops(self, condition: str = "clean") -> np.ndarray:
        """[n LSTMs, C] knock-out drop in points per class."""
        knock = [v.key for v in self.variants if v.kind == "knockout"]
        return np.array([[self.drop(k, condition, c) for c in range(len(self.classes))] for k in knock])

    def caption(self, condition: str = "clean") -> str:
        """What the numbers mean, in one paragraph computed from them."""
        knock = [v for v in self.variants if v.kind == "knockout"]
        what = "clean" if condition == "clean" else f"with Gaussian noise (variance {self.noise_var:g})"
        base = self.accuracy("intact", condition)[0] * 100
        parts = [f"On {self.n:,} images {what}, the intact model is right on {base:.2f}%."]
        if knock:
            drops = [self.drop(v.key, condition) for v in knock]
            unit = [self.unit_names[int(v.key.split(":")[1])] for v in knock]
            worst = unit[int(np.argmax(drops))]
            needed = [u for u, v in zip(unit, knock) if self.significant_drop(v.key, condition)]
            test = f"paired exact test, p < {SIGNIFICANCE:g}"
            if not needed:
                parts.append(f"No single LSTM is necessary: each knock-out costs at most {max(drops):.2f} points "
                             f"({worst}), none of them significant ({test}).")
            elif len(needed) == len(knock):
                parts.append(f"Every LSTM is needed: knocking out one costs from {min(drops):.2f} to {max(drops):.2f} "
                             f"points, each drop significant ({test}); the largest: {worst}.")
            else:
                rest = [u for u in unit if u not in needed]
                parts.append(f"Knocking out one LSTM costs from {min(drops):.2f} to {max(drops):.2f} points; "
                             f"{', '.join(needed)} {'is' if len(needed) == 1 else 'are'} needed ({test}), "
                             f"{', '.join(rest)} not; the largest drop: {worst}.")
            per_class = self.per_class_drops(condition)
            if per_class.size:
                u, c = np.unravel_index(int(np.nanargmax(per_class)), per_class.shape)
                parts.append(f"Per class the largest drop is {per_class[u, c]:.1f} points "
                             f"({unit[u]} knocked out, class {self.classes[c]}).")
        swaps = [v for v in self.variants if v.kind == "selection"]
        if swaps:
            parts.append("At inference with the same weights: " + "; ".join(
                f"{v.label} {self._signed(v.key, condition)}" for v in swaps) + ".")
        return " ".join(parts)

    def _signed(self, key: str, condition: str) -> str:
        d = -self.drop(key, condition)
        sig = "significant" if self.significant(key, condition) else "not significant"
        return f"{d:+.2f} points ({sig})"

    def markdown(self, title: str) -> str:
        """A table of every variant (clean and noisy) and the per-class knock-out drops, with the captions."""
        lines = [f"### {title}", "", "| Variant | Clean accuracy [95% CI] | Drop (points) | Lost / gained | p (paired) | "
                 f"Noisy accuracy (var {self.noise_var:g}) [95% CI] | Drop (points) | p (paired) |",
                 "|---|---|---|---|---|---|---|---|"]
        for v in self.variants:
            cells = []
            for condition in ("clean", "noisy"):
                acc, lo, hi, _ = self.accuracy(v.key, condition)
                cells.append(f"{acc * 100:.2f} [{lo * 100:.2f}, {hi * 100:.2f}]")
                cells.append("–" if v.kind == "intact" else f"{self.drop(v.key, condition):+.2f}")
                if condition == "clean":
                    lost, gained = self.flips(v.key, condition)
                    cells.append("–" if v.kind == "intact" else f"{lost} / {gained}")
                cells.append("–" if v.kind == "intact" else f"{self.p_value(v.key, condition):.2g}")
            lines.append(f"| {v.label} | " + " | ".join(cells) + " |")
        knock = [v for v in self.variants if v.kind == "knockout"]
        if knock:
            drops = self.per_class_drops("clean")
            lines += ["", "Knock-out drop per class (clean, points):", "",
                      "| | " + " | ".join(self.classes) + " |", "|---" * (len(self.classes) + 1) + "|"]
            lines += [f"| {v.label} | " + " | ".join(f"{d:+.1f}" for d in row) + " |" for v, row in zip(knock, drops)]
        lines += ["", self.caption("clean"), "", self.caption("noisy"), ""]
        return "\n".join(lines)


def variants_of(model) -> list[tuple[str, str, str, Intervention | None]]:
    """(key, label, kind, intervention) of every run in the table: intact, each knock-out, the
    selection swaps (random with a fixed seed, all) and alpha 0, each at inference."""
    names = list(getattr(model, "unit_names", [f"LSTM {i + 1}" for i in range(model.config.num_units)]))
    out: list[tuple[str, str, str, Intervention | None]] = [("intact", "intact (attention)", "intact", None)]
    out += [(f"knockout:{i}", f"knock out {name}", "knockout", Intervention(knock_out=(i,)))
            for i, name in enumerate(names)]
    out += [("selection:random", f"selection random (seed {RANDOM_SEED})", "selection",
             Intervention(selection="random", seed=RANDOM_SEED)),
            ("selection:all", "selection all", "selection", Intervention(selection="all")),
            ("alpha:0", "alpha 0 (no communication)", "selection", Intervention(alpha=0.0))]
    return out


def knockout_table(model, images, labels, classes, *, noise_var: float = NOISE_VAR, noise_seed: int = 0,
                   batch_size: int = BATCH, progress: Callable[[float, str], None] | None = None) -> InterventionTable:
    """Run every variant of ``variants_of`` on ``images`` clean and with Gaussian noise
    (``noise_var``, seeded ``noise_seed``). ``progress(fraction, what)`` is called after each run."""
    labels = np.asarray(labels, dtype=np.int64)
    noisy_images = add_noise(images, "gaussian", noise_var, seed=noise_seed)
    names = list(getattr(model, "unit_names", [f"LSTM {i + 1}" for i in range(model.config.num_units)]))
    table = InterventionTable(labels, list(classes), names, noise_var)
    todo = variants_of(model)
    for j, (key, label, kind, iv) in enumerate(todo):
        correct = {}
        for condition, imgs in (("clean", images), ("noisy", noisy_images)):
            logits, _ = run(model, imgs, iv, batch_size=batch_size)
            correct[condition] = logits.argmax(1) == labels
        table.variants.append(Variant(key, label, kind, correct["clean"], correct["noisy"]))
        if progress is not None:
            progress((j + 1) / len(todo), label)
    return table


CSV_FIELDS = ["dataset", "model", "variant", "label", "condition", "noise_var", "class", "images", "accuracy",
              "wilson_low", "wilson_high", "drop_points", "lost", "gained", "p_paired"]


def write_csv(path: Path, tables: dict[tuple[str, str], InterventionTable]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        for (dataset, model), table in tables.items():
            for row in table.rows():
                w.writerow({"dataset": dataset, "model": model, **{k: _fmt(v) for k, v in row.items()}})


def _fmt(v):
    return f"{v:.6f}" if isinstance(v, float) else ("" if v is None else v)
