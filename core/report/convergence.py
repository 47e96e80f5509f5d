"""The convergence criterion: has a run finished learning by the end of its schedule?

Fixed before the long grid's runs (REPRODUCTION.md, "Protocols"; docs/glossary.md):

    A run *meets the criterion* ("converged") when its best validation accuracy is at most
    ``GAIN_POINTS`` (0.1) percentage points above the best it had reached by three quarters of its
    schedule (iteration ``0.75 * iterations`` of its protocol). A run that fails it is
    *still improving*. A run without a validation split (the paper's protocol) is *not measured*.

A run that stopped early before three quarters of its schedule meets it by construction (its
best came before the cut). The validation accuracy is the one the run records every
``eval_every`` iterations on its held-out split (``evals.val_acc``), never the test set.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

GAIN_POINTS = 0.1  # percentage points of validation accuracy over the last quarter
CUT = 0.75  # the last quarter of the schedule starts here
PASS_SHARE = 0.9  # the share of a grid's runs that must meet the criterion (the long grid's bar, its budget rule)

CONVERGED, IMPROVING, NOT_MEASURED = "converged", "still improving", "not measured"


@dataclass(frozen=True)
class Plateau:
    state: str  # CONVERGED, IMPROVING or NOT_MEASURED
    gain_points: float  # best validation accuracy minus the best up to the cut, in points (nan: not measured)
    cut_iteration: int  # 0.75 x the schedule's iterations
    best_iteration: int | None


def plateau(record: dict) -> Plateau:
    """The criterion for one run record (its JSON as stored under ``results/*/runs``)."""
    tc = record.get("train_config") or {}
    total = int(tc.get("iterations") or 0)
    cut = int(round(CUT * total))
    ev = record.get("evals") or {}
    its, val = list(ev.get("iteration") or []), list(ev.get("val_acc") or [])
    pairs = [(int(i), float(v)) for i, v in zip(its, val) if v is not None and math.isfinite(float(v))]
    if not total or not tc.get("val_images") or not pairs:
        return Plateau(NOT_MEASURED, math.nan, cut, None)
    best_i, best = max(pairs, key=lambda p: (p[1], -p[0]))
    before = [v for i, v in pairs if i <= cut]
    gain = 100.0 * (best - (max(before) if before else 0.0))
    state = CONVERGED if gain <= GAIN_POINTS + 1e-9 else IMPROVING
    return Plateau(state, gain, cut, best_i)


def ends_before_cut(row: dict) -> bool:
    """A run (a row of ``runs.csv``: ``iterations``, ``iterations_run``) that early stopping ended
    at or before three quarters of its schedule: it meets the criterion by construction, so its
    "converged" says only that validation stopped improving for the protocol's patience."""
    total, ran = row.get("iterations"), row.get("iterations_run")
    try:
        total, ran = int(total), int(ran)
    except (TypeError, ValueError):
        return False
    return 0 < ran < total and ran <= round(CUT * total)
