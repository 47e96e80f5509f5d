"""Interventions on the RIM's mechanisms: what the attention's choice *does*, not only what it is.

Every view elsewhere is correlational (which LSTM fired, on which rows). Here the same trained
weights are run with a change (``core.models.rim.Intervention``): cells of the active mask
forced on or off, an LSTM taken out in one of three ways (``KNOCKOUTS``), the communication
share ``alpha`` set at inference, the selection swapped ("random", seeded, or "all"), or one
LSTM's state or the whole selection mask patched in from a donor input. Both implementations
of the RIM take the same intervention and give the same numbers (tests/test_interventions.py).
This module computes; the wording, the tables and the CSV are ``core.report.interventions``.

* ``run``: logits and trace of many images under one intervention (the batched inference loop).
* ``force_grid`` / ``downstream_changes``: one input's override and the cells that changed
  because of it (the LSTMs whose selection moved at later rows).
* ``knockout``: one LSTM taken out as ``removed``, ``off`` or ``readout`` (see ``KNOCKOUTS``).
* ``donor_states`` / ``patch_state`` / ``patch_mask``: activation patching from a donor input.
* ``knockout_table`` / ``knockout_tables``: across a set (and across the weights of several
  seeds), each LSTM taken out in each way and the selection swapped, clean and under Gaussian
  noise: correct per image, from which accuracy, drops, paired tests and per-class drops follow.
* patching across a set: ``core.eval.patching``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from ..data.transforms import add_noise, to_sequence
from ..intervals import wilson_interval
from ..models.rim import RIM, Intervention
from .predict import BATCH

NOISE_VAR = 0.01  # the paper's noise test: Gaussian, variance 0.01
RANDOM_SEEDS = (0, 1, 2)  # the generators of the "random" selection swap: one variant per draw
# The three ways to take one LSTM out, default first (core.models.rim.Intervention):
#   "removed": it leaves the top-k competition, so k others stay active at every row;
#   "off":     it is switched off after the choice, so a row where it ranks in the top k runs
#              one LSTM short (its place stays empty);
#   "readout": the recurrence runs as trained and only its final state is replaced at the
#              classifier (zeros, or its mean over training images): its direct effect.
KNOCKOUTS = ("removed", "off", "readout")


def supports(model) -> bool:
    """Whether ``model`` takes interventions (the RIM and its variants)."""
    return isinstance(model, RIM)


def _rows_of(iv: Intervention, i: int, j: int, B: int) -> Intervention:
    """The part of a per-image intervention that belongs to images i..j-1 (B images in all)."""
    changes = {}
    if iv.force is not None and np.ndim(iv.force) == 3:
        changes["force"] = np.asarray(iv.force)[i:j]
    if iv.readout is not None and np.ndim(iv.readout) == 3:
        changes["readout"] = np.asarray(iv.readout)[i:j]
    if iv.patch is not None:
        h, c, cells = iv.patch
        per_image = np.shape(h)[0] == B and B > 1
        changes["patch"] = (np.asarray(h)[i:j] if per_image else h, np.asarray(c)[i:j] if per_image else c,
                            np.asarray(cells)[i:j] if np.ndim(cells) == 3 else cells)
    return dataclasses.replace(iv, **changes) if changes else iv


@torch.no_grad()
def run(model, images, intervention: Intervention | None = None, *, batch_size: int = BATCH,
        with_trace: bool = False, with_states: bool = False) -> tuple[np.ndarray, dict | None]:
    """Logits [N, C] and, with ``with_trace``, the trace ([N, T, ...] numpy arrays) of ``images``
    (uint8 or [0, 1] floats) under ``intervention``, in evaluation mode; ``with_states`` adds the
    states after each row ("h", "c" [N, T, n, H]) to the trace. Per-image parts of the
    intervention ([N, ...] force, read-out, donor states) are cut into the batches with the
    images. A seeded "random" selection seeds batch b's generator with ``seed + b``:
    reproducible for a given ``batch_size``."""
    x_all = np.asarray(images)
    if len(x_all) == 0:
        raise ValueError("no images to run")
    if intervention is not None and not supports(model):
        raise ValueError(f"{type(model).__name__} has no mechanisms to intervene on (RIM only)")
    with_trace = with_trace or with_states
    was = model.training
    model.eval()
    logits, traces = [], []
    try:
        for b, i in enumerate(range(0, len(x_all), batch_size)):
            x = to_sequence(x_all[i : i + batch_size])
            iv = intervention
            if iv is not None:
                iv = _rows_of(iv, i, i + batch_size, len(x_all))
                if iv.seed is not None and b:
                    iv = dataclasses.replace(iv, seed=iv.seed + b)
            kw = {} if iv is None else {"intervention": iv}
            if with_states:
                kw["return_states"] = True
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


def probabilities(logits) -> np.ndarray:
    """Softmax of logits [..., C] (numerically stable)."""
    z = np.asarray(logits, dtype=np.float64)
    z = np.exp(z - z.max(-1, keepdims=True))
    return z / z.sum(-1, keepdims=True)


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
    """[T, n] bool: the cells of the mask the intervention sets directly (forced, knocked out,
    removed, or patched from the donor's mask)."""
    pinned = np.zeros((T, n), dtype=bool)
    if intervention.force is not None:
        f = np.nan_to_num(np.asarray(intervention.force, dtype=np.float64), nan=-1.0)
        pinned |= (f.reshape(-1, T, n) >= 0).any(0)
    for i in (*intervention.knock_out, *intervention.remove):
        pinned[:, int(i)] = True
    return pinned


def downstream_changes(original: np.ndarray, after: np.ndarray, intervention: Intervention) -> np.ndarray:
    """[T, n] bool: cells of one input's mask that changed without being set by the intervention
    (an LSTM selected or dropped by the attention because an earlier cell was changed)."""
    original, after = np.asarray(original) > 0.5, np.asarray(after) > 0.5
    return (original != after) & ~pinned_cells(intervention, *original.shape)


# --------------------------------------------------------------------------- taking one LSTM out


def final_states(model, images, *, batch_size: int = BATCH) -> np.ndarray:
    """[N, n, H]: each LSTM's state after the last row, the input of the classifier."""
    _, trace = run(model, images, batch_size=batch_size, with_states=True)
    return trace["h"][:, -1]


def mean_final_state(model, images, *, batch_size: int = BATCH) -> np.ndarray:
    """[n, H]: the mean final state over ``images`` (training images: the read-out-only
    knock-out's replacement by the mean)."""
    return final_states(model, images, batch_size=batch_size).mean(0)


def knockout(model, mode: str, units, *, isolate: bool = False, mean_state=None, **others) -> Intervention:
    """LSTMs ``units`` (0-based) taken out as ``mode`` (see ``KNOCKOUTS``). ``isolate``: they
    also leave every reader's communication softmax ("removed" and "off"; the read-out-only
    knock-out leaves the recurrence as trained). ``mean_state`` ([n, H], "readout" only): the
    final state put in their place (None: zeros). ``others``: further fields of the
    ``Intervention`` (force, alpha, selection, seed)."""
    units = tuple(int(i) for i in ([units] if np.isscalar(units) else units))
    if mode not in KNOCKOUTS:
        raise ValueError(f"knock-out mode must be one of {', '.join(KNOCKOUTS)}, got {mode!r}")
    if mode == "readout":
        c = model.config
        readout = np.full((c.num_units, c.hidden_size), np.nan)
        fill = np.zeros((c.num_units, c.hidden_size)) if mean_state is None else np.asarray(mean_state, dtype=float)
        if fill.shape != readout.shape:
            raise ValueError(f"mean_state must be [n, H] = {list(readout.shape)}, got {list(fill.shape)}")
        for i in units:
            if not 0 <= i < c.num_units:
                raise ValueError(f"LSTM index {i} is not in 0..{c.num_units - 1}")
            readout[i] = fill[i]
        return Intervention(readout=readout if units else None, **others)
    iso = units if isolate else ()
    if mode == "removed":
        return Intervention(remove=units, isolate=iso, **others)
    return Intervention(knock_out=units, isolate=iso, **others)


# --------------------------------------------------------------------------- activation patching


def donor_states(model, images, *, batch_size: int = BATCH) -> tuple[np.ndarray, np.ndarray]:
    """(h, c) [N, T, n, H]: the states after each row of the donor ``images``."""
    _, trace = run(model, images, batch_size=batch_size, with_states=True)
    return trace["h"], trace["c"]


def noisy_copy(image, noise_var: float = NOISE_VAR, seed: int = 0) -> np.ndarray:
    """One image with Gaussian noise (the recipient of clean -> noisy patching on one input)."""
    return add_noise(np.asarray(image)[None], "gaussian", noise_var, seed=seed)[0]


def row_cells(T: int, n: int, units, rows) -> np.ndarray:
    """[T, n] bool: the cells of LSTMs ``units`` (0-based) on ``rows`` (1-based, inclusive
    (first, last))."""
    lo, hi = (int(r) for r in rows)
    if not 1 <= lo <= hi <= T:
        raise ValueError(f"rows must be 1 <= first <= last <= {T}, got {lo}..{hi}")
    cells = np.zeros((T, n), dtype=bool)
    for i in units:
        if not 0 <= int(i) < n:
            raise ValueError(f"LSTM index {i} is not in 0..{n - 1}")
        cells[lo - 1 : hi, int(i)] = True
    return cells


def patch_state(h, c, units, rows, **others) -> Intervention:
    """Patch the state (h and c) of LSTMs ``units`` after each row in ``rows`` with the donor's
    (``h``, ``c``: ``donor_states`` of one donor [T, n, H] or one per image [N, T, n, H])."""
    h, c = np.asarray(h), np.asarray(c)
    if h.ndim == 3:
        h, c = h[None], c[None]
    T, n = h.shape[1], h.shape[2]
    return Intervention(patch=(h, c, row_cells(T, n, units, rows)), **others)


def patch_mask(donor_mask, rows, **others) -> Intervention:
    """Patch the whole selection mask on ``rows`` with the donor's (``donor_mask`` [T, n] or one
    per image [N, T, n], 1 = active): those rows run with exactly the LSTMs the donor had."""
    m = np.asarray(donor_mask, dtype=np.float32)
    T, n = m.shape[-2:]
    cells = row_cells(T, n, range(n), rows)
    return Intervention(force=np.where(cells, (m > 0.5).astype(np.float32), -1.0).astype(np.float32), **others)


def one_input(model, T: int, *, cells: dict | None = None, knock_out=(), mode: str = KNOCKOUTS[0],
              isolate: bool = False, mean_state=None, alpha: float | None = None, selection: str | None = None,
              seed: int | None = None, patch: dict | None = None) -> Intervention:
    """Everything the Intervene tab sets on one input of ``T`` rows, as one ``Intervention``:
    forced ``cells`` ({(row, LSTM) 0-based: 0 or 1}), the LSTMs ``knock_out`` taken out as
    ``mode`` (see ``knockout``), alpha, the selection and its seed, and a ``patch`` from a donor:
    {"what": "state" or "mask", "units", "rows" (1-based, inclusive), "h", "c" [T, n, H],
    "mask" [T, n]}. A forced cell wins over the donor's mask on the same cell."""
    n = model.config.num_units
    force = None
    if patch is not None and patch["what"] == "mask":
        force = patch_mask(patch["mask"], patch["rows"]).force
    if cells:
        grid = force_grid(T, n, on=[c for c, v in cells.items() if v], off=[c for c, v in cells.items() if not v])
        force = grid if force is None else np.where(grid >= 0, grid, force).astype(np.float32)
    iv = knockout(model, mode, tuple(knock_out), isolate=isolate, mean_state=mean_state, force=force, alpha=alpha,
                  selection=selection, seed=seed)
    if patch is not None and patch["what"] == "state" and len(patch["units"]):
        iv = dataclasses.replace(iv, patch=patch_state(patch["h"], patch["c"], patch["units"], patch["rows"]).patch)
    return iv


# --------------------------------------------------------------------------- across a set


@dataclass
class Variant:
    """One way of running the model across the set, with what it gets right."""

    key: str  # "intact", "removed:0", "off:0", "readout:0", ..., "random:0", "selection:all", "alpha:0"
    kind: str  # "intact", "knockout", "selection"
    clean: np.ndarray  # [N] bool, correct per image
    noisy: np.ndarray  # [N] bool
    mode: str = ""  # the knock-out mode, or the selection swap ("random", "all", "alpha0")
    unit: int | None = None  # the LSTM taken out (0-based)
    seed: int | None = None  # the random selection's generator


@dataclass
class InterventionTable:
    """Knock-outs and selection swaps of one model on one set (see ``knockout_table``)."""

    labels: np.ndarray  # [N]
    classes: list[str]
    unit_names: list[str]
    noise_var: float
    variants: list[Variant] = field(default_factory=list)
    alpha: float = math.nan  # the trained communication share
    isolate: bool = False  # the taken-out LSTMs also left the communication softmax
    readout_fill: str = "zeros"  # what replaces the final state in the read-out-only knock-out
    k_active: int = 0
    active_count: dict = field(default_factory=dict)  # variant key -> [N, T] active LSTMs per row (clean)

    @property
    def n(self) -> int:
        return len(self.labels)

    def variant(self, key: str) -> Variant:
        return next(v for v in self.variants if v.key == key)

    def keys(self, kind: str | None = None, mode: str | None = None) -> list[str]:
        return [v.key for v in self.variants if (kind is None or v.kind == kind) and (mode is None or v.mode == mode)]

    @property
    def modes(self) -> list[str]:
        return list(dict.fromkeys(v.mode for v in self.variants if v.kind == "knockout"))

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

    def per_class_drops(self, mode: str = KNOCKOUTS[0], condition: str = "clean") -> np.ndarray:
        """[n LSTMs, C] drop in points per class of the knock-out ``mode``."""
        keys = self.keys("knockout", mode)
        return np.array([[self.drop(k, condition, c) for c in range(len(self.classes))] for k in keys])

    def short_rows(self, key: str) -> float:
        """Share of rows (clean) on which fewer than k LSTMs are active under the variant."""
        counts = self.active_count.get(key)
        return math.nan if counts is None else float((counts < self.k_active).mean())


def variants_of(model, modes: Sequence[str] = KNOCKOUTS, random_seeds: Sequence[int] = RANDOM_SEEDS, *,
                isolate: bool = False, mean_state=None) -> list[tuple[Variant, Intervention | None]]:
    """(variant without results, intervention) of every run in the table: intact, each LSTM in
    each knock-out mode, the random selection (one per seed), all active, and alpha 0."""
    n = model.config.num_units
    empty = np.zeros(0, dtype=bool)
    out: list[tuple[Variant, Intervention | None]] = [(Variant("intact", "intact", empty, empty), None)]
    for mode in modes:
        out += [(Variant(f"{mode}:{i}", "knockout", empty, empty, mode, i),
                 knockout(model, mode, i, isolate=isolate, mean_state=mean_state)) for i in range(n)]
    out += [(Variant(f"random:{s}", "selection", empty, empty, "random", seed=int(s)),
             Intervention(selection="random", seed=int(s))) for s in random_seeds]
    out += [(Variant("selection:all", "selection", empty, empty, "all"), Intervention(selection="all")),
            (Variant("alpha:0", "selection", empty, empty, "alpha0"), Intervention(alpha=0.0))]
    return out


def knockout_table(model, images, labels, classes, *, modes: Sequence[str] = KNOCKOUTS,
                   random_seeds: Sequence[int] = RANDOM_SEEDS, isolate: bool = False, mean_state=None,
                   noise_var: float = NOISE_VAR, noise_seed: int = 0, batch_size: int = BATCH,
                   progress: Callable[[float, str], None] | None = None) -> InterventionTable:
    """Run every variant of ``variants_of`` on ``images`` clean and with Gaussian noise
    (``noise_var``, seeded ``noise_seed``). ``mean_state``: the read-out-only knock-out's
    replacement (``mean_final_state`` of training images; None: zeros). ``progress(fraction,
    key)`` is called after each variant."""
    labels = np.asarray(labels, dtype=np.int64)
    noisy_images = add_noise(images, "gaussian", noise_var, seed=noise_seed)
    names = list(getattr(model, "unit_names", [f"LSTM {i + 1}" for i in range(model.config.num_units)]))
    table = InterventionTable(labels, list(classes), names, noise_var, alpha=float(model.config.alpha),
                              isolate=isolate, readout_fill="zeros" if mean_state is None else "mean",
                              k_active=int(model.config.k_active))
    todo = variants_of(model, modes, random_seeds, isolate=isolate, mean_state=mean_state)
    for j, (v, iv) in enumerate(todo):
        logits, trace = run(model, images, iv, batch_size=batch_size, with_trace=True)
        v.clean = logits.argmax(1) == labels
        table.active_count[v.key] = (trace["active"] > 0.5).sum(-1).astype(np.int8)
        logits, _ = run(model, noisy_images, iv, batch_size=batch_size)
        v.noisy = logits.argmax(1) == labels
        table.variants.append(v)
        if progress is not None:
            progress((j + 1) / len(todo), v.key)
    return table


def knockout_tables(models: Sequence, images, labels, classes, **kw) -> list[InterventionTable]:
    """``knockout_table`` of each model (one per seed, same images and noise draw): the study
    over several trained networks. ``kw``: as ``knockout_table`` (``mean_state`` may be a list,
    one per model)."""
    means = kw.pop("mean_state", None)
    if means is None or np.ndim(means) == 2:
        means = [means] * len(models)
    return [knockout_table(m, images, labels, classes, mean_state=ms, **kw) for m, ms in zip(models, means, strict=True)]


def decisive_cell(model, images, look_at: int = 30) -> tuple[int, int, int] | None:
    """(image index, row, LSTM), all 0-based, of one mask cell whose flip alone changes the
    model's answer, searched over the ``look_at`` least decided images (smallest gap between the
    two highest logits) first; ``None`` when none of them has such a cell. What the Intervene tab
    shows when one click should change the answer (its browser test and its screenshot)."""
    logits_all, _ = run(model, images)
    top2 = np.sort(logits_all, axis=1)[:, -2:]
    for idx in np.argsort(top2[:, 1] - top2[:, 0])[:look_at]:
        idx = int(idx)
        img = np.asarray(images)[idx: idx + 1]
        logits, tr = run(model, img, with_trace=True)
        mask = tr["active"][0]
        T, n = mask.shape
        cells = [(t, i) for t in range(T) for i in range(n)]
        force = np.full((len(cells), T, n), -1.0, dtype=np.float32)
        for b, (t, i) in enumerate(cells):
            force[b, t, i] = 1.0 - mask[t, i]
        out, _ = run(model, np.repeat(img, len(cells), 0), Intervention(force=force))
        flips = np.flatnonzero(out.argmax(1) != logits.argmax(1))
        if len(flips):
            return (idx, *cells[int(flips[0])])
    return None
