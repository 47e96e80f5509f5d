"""The look every figure shares: one colour per method, axis conventions, empty figures."""

from __future__ import annotations

import plotly.graph_objects as go

from ...models.registry import DEFAULT_MODEL, list_models

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


def method_order() -> list[str]:
    return list_models()


LOG_TICKS = ".2~g"  # log axes: "0.5, 1, 2, 5, 10" instead of plotly's bare digits "5, 1, 2, 5, 1"
TIMESTEP_AXIS = "image row = timestep"
MASK_COLORS = ("#EDEDED", METHOD_COLORS[DEFAULT_MODEL])  # inactive, active
CHANGE_COLORS = ("#EDEDED", "#000000")  # unchanged, changed


def axis_title(axis: str, log: bool) -> str:
    """``"training loss (nats)"`` -> ``"training loss (nats, log scale)"`` on a log axis."""
    if not log:
        return axis
    return axis[:-1] + ", log scale)" if axis.endswith(")") else axis + " (log scale)"


def empty_figure(message: str, height: int = 300) -> go.Figure:
    """A figure that only says ``message`` (nothing to draw)."""
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.update_layout(height=height, margin=dict(l=20, r=20, t=40, b=20))
    return fig


def binary_scale(colors=MASK_COLORS) -> list:
    """A two-colour scale for 0/1 heatmaps."""
    return [[0.0, colors[0]], [0.5, colors[0]], [0.5, colors[1]], [1.0, colors[1]]]


def rgba(hex_color: str, alpha: float) -> str:
    h = hex_color.lstrip("#")
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"
