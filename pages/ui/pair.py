"""Two models, one input (Mechanisms page): the "Compare with" picker, both predictions side by
side, and the panels of both traces on one time axis. What each trace holds comes from its
model's trace schema, so any pair of models of one data set works."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st

from core.eval.robustness_points import activation_change
from core.models.registry import TraceSchema
from core.report.plots import traces

from .pickers import keep_valid

NOBODY = ""


@dataclass
class Side:
    """One model's part of the comparison."""

    entry: object  # catalog.ModelEntry
    probs: np.ndarray
    trace: dict
    unit_names: list
    schema: TraceSchema

    @property
    def mask(self):
        return self.schema.get(self.trace, "mask")


def compare_with_picker(all_entries: list, entry, key: str):
    """A second model of the data set to put beside ``entry`` (or None)."""
    by_key = {e.key: e for e in all_entries if e.key != entry.key}
    options = [NOBODY, *by_key]
    keep_valid(key, options)
    chosen = st.selectbox("Compare with", options, key=key,
                          format_func=lambda k: "no second model" if k == NOBODY else by_key[k].display,
                          help="A second model on the same input: both traces row by row on one time axis, "
                               "with the same colour scales and step cursor, and where the masks differ.")
    return by_key.get(chosen)


def panels(a: Side, b: Side | None, heads: bool) -> list[dict]:
    """The timeline panels of ``a`` alone, or of ``a`` and ``b`` aligned (``traces.pair_panels``)."""
    pa = traces.trace_panels(a.trace, a.unit_names, a.schema, heads=heads)
    if b is None:
        return pa
    pb = traces.trace_panels(b.trace, b.unit_names, b.schema, heads=heads)
    na, nb = short_name(a.entry), short_name(b.entry)
    if na == nb:  # e.g. two runs of one method and seed: their ids tell them apart
        na, nb = f"{na} {a.entry.key[-6:]}", f"{nb} {b.entry.key[-6:]}"
    return traces.pair_panels(pa, pb, na, nb, a.mask, b.mask)


def short_name(entry) -> str:
    """A model in a few words for a subplot title (``"RIM Adam 4k s4"``); the full display name
    is in the picker and the predictions above."""
    from core.report.fmt import PROTOCOL_SHORT, short_method_title

    parts = [short_method_title(entry.model)]
    if entry.protocol:
        parts.append("paper" if entry.protocol == "paper" else PROTOCOL_SHORT.get(entry.protocol, entry.protocol))
    if entry.seed is not None:
        parts.append(f"s{entry.seed}")
    if entry.source != "pretrained":
        parts.append("run")
    return " ".join(parts)


def predictions(a: Side, b: Side, classes: list, true_class: int | None) -> None:
    """Both predictions side by side and how much the two masks differ."""
    cols = st.columns(3)
    for col, s in zip(cols, (a, b)):
        c = int(np.argmax(s.probs))
        ok = "" if true_class is None else (" ✓" if c == true_class else " ✗")
        col.metric(s.entry.display, f"{classes[c]}{ok}", help=f"probability {s.probs[c] * 100:.1f}%",
                   delta=f"{s.probs[c] * 100:.0f}% probability", delta_color="off", delta_arrow="off")
    if a.mask is not None and b.mask is not None and np.shape(a.mask) == np.shape(b.mask):
        ch = activation_change(a.mask, b.mask)
        worst = int(np.argmax(ch.per_row)) + 1
        cols[2].metric("Mask cells that differ", f"{ch.fraction * 100:.1f}%",
                       help="share of (row, unit) cells where one model's unit is active and the other's is not; "
                            "units are compared by position (unit 1 with unit 1, ...)")
        cols[2].caption(f"most at row {worst} ({ch.per_row[worst - 1] * 100:.0f}% of its units)")
    else:
        missing = [s.entry.display for s in (a, b) if s.mask is None]
        cols[2].caption(("No selection mask in " + " and ".join(missing) + ": " if missing else
                         "The masks differ in shape: ") + "only the traces are shown, nothing to compare cell by cell.")
