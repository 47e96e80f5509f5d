"""The Intervene tab's words for one input, the attributions and the patching tables
(``core.eval.interventions``, ``core.eval.patching``, ``core.eval.attribution`` compute)."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd

from ..eval.attribution import TOLERANCE
from ..eval.patching import PatchTable
from .interventions import csv_value
from .markdown import md_table


def prediction_line(classes: list[str], p0, p1) -> str:
    """The prediction before and after the intervention, in one Markdown line."""
    y0, y1 = int(np.argmax(p0)), int(np.argmax(p1))
    return (f"**Prediction**: original **{classes[y0]}** ({p0[y0] * 100:.1f}%) → after the intervention "
            f"**{classes[y1]}** ({p1[y1] * 100:.1f}%)" + (" — changed" if y0 != y1 else " — unchanged"))


def unchanged_note(something_set: bool) -> str:
    """In place of the before/after bars while the intervention changes neither the probabilities
    nor the mask."""
    if something_set:
        return ("The intervention leaves the probabilities and the mask exactly as they were: the bars "
                "before and after would be the same.")
    return ("Nothing is changed yet, so the probabilities are the original ones (the bars above). Force cells, "
            "take an LSTM out, change alpha or the selection, or patch from a donor: the answers before and "
            "after are then drawn here side by side.")


def recipient_note(noise_var: float) -> str:
    """What runs when the clean input is the donor of its noisy copy."""
    return (f"Clean into noisy: the input with Gaussian noise (variance {noise_var:g}, one draw) runs, and "
            f"\"original\" is its prediction; the patched cells come from the clean input.")


def change_caption(classes: list[str], p0, p1, m0, m1, pinned, changed, names: list[str]) -> str:
    """How many cells the intervention set, which changed downstream, and the original class's
    probability before and after."""
    y0 = int(np.argmax(p0))
    T, n = np.shape(m0)
    n_changed, n_set = int(np.sum(changed)), int(np.sum(pinned))
    moved = [names[i] for i in np.flatnonzero(np.any(changed, 0))]
    first = int(np.flatnonzero(np.any(changed, 1))[0]) + 1 if n_changed else None
    return (f"{n_set} cell{'' if n_set == 1 else 's'} set by the intervention; {n_changed} other "
            f"cell{'' if n_changed == 1 else 's'} changed downstream"
            + (f" (from row {first} on, {', '.join(moved)})" if n_changed else "")
            + f"; {int((np.asarray(m0) != np.asarray(m1)).sum())} of {T * n} cells differ from the original mask. "
            f"Probability of {classes[y0]}: {p0[y0] * 100:.1f}% → {p1[y0] * 100:.1f}%.")


def knockout_help(mode: str, k: int) -> str:
    """What taking an LSTM out as ``mode`` does, for the tab's help text."""
    return {"removed": f"Removed: it leaves the competition, so the attention picks {k} among the others at every "
                       "row.",
            "off": f"Switched off after selection: it still takes one of the {k} places where its attention ranks "
                   f"it there, and that row runs with {k - 1}.",
            "readout": "Read-out only: the recurrence runs as trained; only its final state is replaced at the "
                       "classifier (its direct effect on the prediction)."}[mode]


def runs_text(table_variants: int) -> str:
    """How many runs of the model the set-wide table takes (each variant clean and noisy)."""
    return f"{2 * table_variants} runs of the model over the subset ({table_variants} variants, clean and noisy)"


def attribution_target(a, unit_names: list[str], classes: list[str] | None = None) -> str:
    """What an ``Attribution`` attributes, in words: the class's logit, or an LSTM's selection
    margin (against its competitor on the image) or raw score at a row; and whether the image's
    own mask was held fixed."""
    if a.kind == "logit":
        cls = a.target_class if classes is None else classes[a.target_class]
        return f"the logit of {'class ' if classes is None else ''}{cls}" + (
            " with the image's own mask held fixed" if a.frozen else "")
    name = unit_names[a.unit]
    if a.kind == "margin":
        what = (f"the selection margin of {name} at row {a.row} ({name}'s attention weight minus "
                f"{unit_names[a.competitor]}'s, its competitor on the image)")
    else:
        what = f"the selection score of {name} at row {a.row}"
    return what + (", the image's own mask held fixed on the earlier rows" if a.frozen else "")


def attribution_summary(a, label: str) -> str:
    """The sums behind completeness, in one clause (``label``: ``attribution_target``)."""
    return (f"attributions sum to {a.total:+.3f}; {label} is {a.value:+.3f} on the image and "
            f"{a.baseline_value:+.3f} on the baseline (difference {a.value - a.baseline_value:+.3f}); "
            f"completeness gap {a.delta:+.3f}" + ("" if a.complete else f" (above the {TOLERANCE:.0%} bound)"))


def attribution_path(a, asked: int) -> str:
    """The path integral of an ``Attribution`` in words: the baseline, the points (and why more
    than ``asked`` were used), the colours."""
    points = f"{a.steps:,} points" + ("" if a.steps == asked else
                                      f" (doubled from {asked:,}: fewer left a quadrature error above the bound)")
    return (f"Baseline: a black image; {points} on the straight path from it to the input. Red pixels raise the "
            "score, blue ones lower it; the framed row is the timeline's.")


def attribution_caption(a, classes: list[str], selects: bool, unit_names: list[str] | None = None) -> tuple[str, str]:
    """(what is attributed, in words; the completeness sentence) of an ``Attribution``."""
    label = attribution_target(a, unit_names or [], classes)
    text = attribution_summary(a, label)
    text = text[0].upper() + text[1:] + ". "
    if a.complete:
        text += "Completeness holds within the bound."
    elif selects and not a.frozen:
        text += ("The gap is above the bound: the attention's top-k selection switches LSTMs along the path, and a "
                 "gradient does not see such jumps; hold the image's own mask fixed for a function whose shares "
                 "add up.")
    else:
        text += "The gap is above the bound: more integration points shrink it."
    return label, text


def patch_frame(table: PatchTable) -> pd.DataFrame:
    """One row per patched LSTM (and the whole mask), one column per band of rows: the share of
    predictions that moved to the donor's, in percent, with its 95 % Wilson interval."""
    recs: dict = {}
    for c in table.cells:
        name = "whole mask" if c.unit is None else f"{table.unit_names[c.unit]} state"
        lo, hi = c.interval
        recs.setdefault(name, {"patched": name})[f"rows {c.rows[0]}-{c.rows[1]}"] = (
            f"{100 * c.share:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]")
    return pd.DataFrame(list(recs.values()))


def patch_caption(table: PatchTable) -> str:
    what = ("a donor of another class" if table.pairing == "class" else
            "its own clean image as donor, into the noisy one")
    if not table.pairs:
        return f"Patching from {what}: no pair whose predictions differ, nothing to move."
    best = max((c for c in table.cells if c.what == "state"), key=lambda c: c.share, default=None)
    text = (f"Patching from {what}, on the {table.pairs:,} pairs whose intact predictions differ: the share of "
            f"predictions that become the donor's, with its 95 % Wilson interval.")
    if best is not None:
        text += (f" The largest for one LSTM's state: {100 * best.share:.1f}% ({table.unit_names[best.unit]}, rows "
                 f"{best.rows[0]}-{best.rows[1]}).")
    return text


def frame_markdown(df: pd.DataFrame) -> list[str]:
    """A display frame as Markdown lines."""
    return md_table(list(df.columns), [list(r) for r in df.itertuples(index=False)])


def write_patch_csv(path: Path, tables: list[tuple[tuple[str, str, int | None], PatchTable]]) -> None:
    """``tables``: ((dataset, model, seed), patching table) pairs, one per network and pairing."""
    fields = ["dataset", "model", "seed", "pairing", "what", "unit", "rows", "moved", "pairs", "share",
              "wilson_low", "wilson_high"]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for (dataset, model, seed), t in tables:
            for c in t.cells:
                lo, hi = c.interval
                w.writerow({"dataset": dataset, "model": model, "seed": "" if seed is None else seed,
                            "pairing": t.pairing, "what": c.what, "unit": "" if c.unit is None else c.unit + 1,
                            "rows": f"{c.rows[0]}-{c.rows[1]}", "moved": c.moved, "pairs": c.pairs,
                            **{k: csv_value(v) for k, v in (("share", c.share), ("wilson_low", lo),
                                                              ("wilson_high", hi))}})


