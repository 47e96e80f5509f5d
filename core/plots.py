"""Plotly figures shared by the pages. One colour per method, everywhere.

Figures take plain data (numpy arrays, dicts, DataFrames) and return ``plotly`` figures;
no streamlit here, so they work in a notebook too.
"""

from __future__ import annotations

from .models import get_spec, list_models

# Okabe-Ito palette: distinguishable for colour-blind readers; RIM gets the strongest colour.
METHOD_COLORS = {
    "rim": "#D55E00",
    "parallel_lstm": "#0072B2",
    "entnet": "#009E73",
    "rmc": "#CC79A7",
    "indrnn": "#E69F00",
}
UPLOAD_COLOR = "#555555"


def method_color(name: str) -> str:
    return METHOD_COLORS.get(name, UPLOAD_COLOR)


def method_title(name: str) -> str:
    try:
        return get_spec(name).title
    except KeyError:
        return name


def method_order() -> list[str]:
    return list_models()


# --- curves, tables and comparisons (Overview, Models, Compare pages) -------------------


# --- per-timestep traces and robustness (Mechanisms, Robustness pages) ------------------
