"""core.report.plots.traces.probability_table: each column's bars in its method's colour, or in the
colour a row names (a model after an intervention: a grey that is no method's colour)."""

from __future__ import annotations

import re

import numpy as np

from core.report.plots.style import INTERVENED_COLOR, METHOD_COLORS, UPLOAD_COLOR
from core.report.plots.traces import probability_table


def _colors_by_column(styler) -> dict[int, set[str]]:
    css = styler.to_html()
    found: dict[int, set[str]] = {}
    for col, color in re.findall(r"_col(\d+) \{\s*background: linear-gradient\(90deg, (#[0-9A-Fa-f]{6})55 ", css):
        found.setdefault(int(col), set()).add(color.upper())
    return found


def test_columns_take_their_methods_colour_unless_a_row_names_one():
    p = np.full(10, 0.1)
    rows = [{"label": "RIM", "method": "rim", "probs": p},
            {"label": "after", "method": "rim", "color": INTERVENED_COLOR, "probs": p},
            {"label": "LSTMs", "method": "parallel_lstm", "probs": p}]
    colors = _colors_by_column(probability_table(rows, list(range(10))))
    assert colors == {0: {METHOD_COLORS["rim"].upper()}, 1: {INTERVENED_COLOR.upper()},
                      2: {METHOD_COLORS["parallel_lstm"].upper()}}


def test_the_intervened_colour_is_no_methods_colour():
    assert INTERVENED_COLOR.upper() not in {c.upper() for c in METHOD_COLORS.values()} | {UPLOAD_COLOR.upper()}
