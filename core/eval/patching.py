"""Activation patching across a set: the share of predictions that move to the donor's when
one LSTM's state (h, c), or the whole selection mask, is patched in from a donor input on a
band of rows (``core.eval.interventions.patch_state`` / ``patch_mask`` make one patch).

* ``class_donors``: a donor of another class for each image (one class -> another: does the
  prediction follow the donor?); ``pairs``: the study's two pairings (``PAIRINGS``);
* ``patching_table``: every LSTM and the mask on every band of rows, over pairs (recipient,
  donor) such as (image, image of another class) or (noisy image, its clean self: which LSTMs
  carry the robustness?).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..data.transforms import add_noise
from ..intervals import wilson_interval
from .interventions import NOISE_VAR, patch_mask, patch_state, run
from .predict import BATCH

BANDS = ((1, 7), (8, 14), (15, 21), (22, 28))  # row bands (1-based, inclusive) of the patching table


@dataclass
class PatchCell:
    """One patch (an LSTM's state or the mask, on one band of rows) across the pairs."""

    what: str  # "state" or "mask"
    unit: int | None  # the patched LSTM (None: the whole mask)
    rows: tuple[int, int]  # 1-based, inclusive
    moved: int  # pairs whose prediction became the donor's
    pairs: int  # pairs where the recipient's and the donor's predictions differ

    @property
    def share(self) -> float:
        return self.moved / self.pairs if self.pairs else math.nan

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.moved, self.pairs)


@dataclass
class PatchTable:
    """Activation patching across pairs (recipient, donor) of one model (``patching_table``)."""

    pairing: str  # "class" (a donor of another class) or "noise" (noisy recipient, its clean self as donor)
    unit_names: list[str]
    bands: tuple[tuple[int, int], ...]
    pairs: int  # pairs whose predictions differ: the denominator of every share
    cells: list[PatchCell] = field(default_factory=list)

    def grid(self, what: str = "state") -> np.ndarray:
        """[n LSTMs (or 1 for the mask), bands] share of predictions that moved to the donor's."""
        rows = sorted({c.unit for c in self.cells if c.what == what}, key=lambda u: -1 if u is None else u)
        out = np.full((len(rows), len(self.bands)), math.nan)
        for c in self.cells:
            if c.what == what:
                out[rows.index(c.unit), self.bands.index(c.rows)] = c.share
        return out


def class_donors(labels, seed: int = 0) -> np.ndarray:
    """For each image, the index of a donor of another class (seeded draw)."""
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    donors = np.empty(len(labels), dtype=np.int64)
    for i, y in enumerate(labels):
        other = np.flatnonzero(labels != y)
        if not len(other):
            raise ValueError("every image has the same label: no donor of another class")
        donors[i] = other[rng.integers(len(other))]
    return donors


PAIRINGS = ("class", "noise")  # a donor of another class; the clean image into its noisy copy


def pairs(images, labels, pairing: str, *, seed: int = 0, noise_var: float = NOISE_VAR) -> tuple[np.ndarray, np.ndarray]:
    """(recipients, donors) of the set-wide patching: "class" pairs each image with a donor of
    another class (``class_donors``, seeded); "noise" pairs each image's noisy copy (Gaussian,
    ``noise_var``, seeded) with the clean image as its donor."""
    images = np.asarray(images)
    if pairing == "class":
        return images, images[class_donors(labels, seed=seed)]
    if pairing == "noise":
        return add_noise(images, "gaussian", noise_var, seed=seed), images
    raise ValueError(f"pairing must be one of {', '.join(PAIRINGS)}, got {pairing!r}")


def patching_table(model, recipients, donors, *, pairing: str, bands=BANDS, batch_size: int = BATCH,
                   progress: Callable[[float, str], None] | None = None) -> PatchTable:
    """Patch each LSTM's state, and the whole selection mask, on each band of rows, from the
    donor image into the recipient (paired by position). A pair counts where the intact
    predictions differ; it moves when the patched prediction becomes the donor's."""
    recipients, donors = np.asarray(recipients), np.asarray(donors)
    if recipients.shape != donors.shape:
        raise ValueError("recipients and donors must be paired: the same number of images of the same size")
    y_r = run(model, recipients, batch_size=batch_size)[0].argmax(1)
    y_d, donor = run(model, donors, batch_size=batch_size, with_states=True)
    y_d = y_d.argmax(1)
    keep = np.flatnonzero(y_r != y_d)
    n = model.config.num_units
    table = PatchTable(pairing, list(model.unit_names), tuple(tuple(b) for b in bands), len(keep))
    if not len(keep):
        return table
    rec, h, c, mask, target = recipients[keep], donor["h"][keep], donor["c"][keep], donor["active"][keep], y_d[keep]
    todo = [("state", u, b) for u in range(n) for b in table.bands] + [("mask", None, b) for b in table.bands]
    for j, (what, u, b) in enumerate(todo):
        iv = patch_state(h, c, [u], b) if what == "state" else patch_mask(mask, b)
        y_p = run(model, rec, iv, batch_size=batch_size)[0].argmax(1)
        table.cells.append(PatchCell(what, u, b, int((y_p == target).sum()), len(keep)))
        if progress is not None:
            progress((j + 1) / len(todo), f"{what} {u} rows {b[0]}-{b[1]}")
    return table
