"""Markdown pieces every generated table shares: a table from rows, the Holm family note under it,
the floors line."""

from __future__ import annotations

import math

from . import fmt
from .floors import floors
from .paper import DATASET_ORDER


def md_table(head: list[str], rows: list[list]) -> list[str]:
    """A Markdown table: a header row and one row per list."""
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(map(str, r)) + " |"
                                                                        for r in rows]


def family_note(rows: list[dict], what: str = "Welch tests", compact: bool = False,
                undecided: tuple[str, ...] = ("cannot tell",), equivalence: bool = False) -> str:
    """The sentence under a table: its Holm family, what the interval is and how the verdict follows;
    ``compact``: for the short columns, which show neither p values nor levels; ``undecided``: the
    table's verdicts for a difference its test does not show; ``equivalence``: the family also holds
    TOST equivalence tests, whose intervals are read against the margin, not 0."""
    m = rows[0].get("holm_m", 0) if rows else 0
    family = f"the {m} {what} of this table" + pending_words(rows)
    not_shown = " or ".join(f'"{w}"' for w in undecided)
    level = "the level of the Holm step that decides its test" + ("" if compact else " (in brackets)")
    if equivalence:
        rule = (f"Each difference interval is at {level}, so it excludes 0 exactly when its verdict is not "
                f"{not_shown}; each equivalence interval is at 1 − 2 × the alpha of the Holm step that decides "
                "its test, so it lies within ± the margin exactly when its verdict is \"equivalent within the margin\"")
    else:
        rule = f"Each interval is at {level}, so it excludes 0 exactly when the verdict is not {not_shown}"
    if compact:
        return f"One Holm-Bonferroni family: {family}. {rule}."
    return (f"One Holm-Bonferroni family: {family}; p = raw / Holm-adjusted. {rule}; an unadjusted or seed-paired "
            "95 % interval, where shown, decides nothing.")


def pending_count(rows: list[dict]) -> int:
    """The planned tests of a table's Holm family not run yet (``holm_pending``; 0 where none)."""
    k = rows[0].get("holm_pending") if rows else None
    return int(k) if isinstance(k, (int, float)) and math.isfinite(k) and k > 0 else 0


def pending_words(rows: list[dict]) -> str:
    """", N of them planned and not run yet (...)" for a family with pending tests, else ""."""
    k = pending_count(rows)
    if not k:
        return ""
    return (f", {k} of them planned and not run yet (cells queued or training), counted as not rejected, so a "
            "verdict here stands when they land and others can join it")


def floors_line(datasets) -> str:
    """One line of floors: ``"Floors (chance / majority-class error, %): MNIST 90.00 / 88.65; ..."``."""
    order = [d for d in DATASET_ORDER if d in datasets] + [d for d in datasets if d not in DATASET_ORDER]
    parts = []
    for d in order:
        f = floors(d)
        if f["classes"]:
            parts.append(f"{fmt.dataset_title(d)} {100 * f['chance_error']:.2f} / {100 * f['majority_error']:.2f}")
    return "Floors (chance / majority-class error, %): " + "; ".join(parts) + "." if parts else ""
