"""The look every figure shares: one colour per method, axis conventions, empty figures."""

from __future__ import annotations

import plotly.graph_objects as go

from ...models.registry import DEFAULT_MODEL, list_models

# one colour per results folder (grid), the same on Compare and in the README figure
GRID_COLORS = {"paper": "#7f7f7f", "converged": "#1f77b4", "budget": "#d62728", "budget-24k": "#2ca02c"}

# Okabe-Ito palette: distinguishable for colour-blind readers; RIM gets the strongest colour.
METHOD_COLORS = {
    "rim": "#D55E00",
    "parallel_lstm": "#0072B2",
    "entnet": "#009E73",
    "rmc": "#CC79A7",
    "indrnn": "#E69F00",
}
UPLOAD_COLOR = "#555555"
# a model's values after an intervention, beside its own (method) colour: a neutral grey that is
# no method's colour, so no column reads as another method
INTERVENED_COLOR = "#8C8C8C"


def method_color(name: str) -> str:
    return METHOD_COLORS.get(name, UPLOAD_COLOR)


def _number(value) -> float | None:
    """``value`` as a float, or None when it is missing, not a number or NaN (a cell left plain)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return None if v != v else v


def bar_css(value, vmax, color: str, alpha: str = "55") -> str:
    """A table cell drawn as a bar: ``color`` (a ``#rrggbb``, made translucent by ``alpha`` so the
    number stays readable) over the share ``value / vmax`` of the cell's width; none for a missing
    value. For tables a page shows without a chart library."""
    v, top = _number(value), _number(vmax)
    if v is None or not top:
        return ""
    share = max(0.0, min(100.0, 100.0 * v / top))
    return f"background: linear-gradient(90deg, {color}{alpha} {share:.1f}%, transparent {share:.1f}%)"


_BLUES = ((247, 251, 255), (8, 48, 107))  # the ends of plotly's "Blues" scale


def blues_css(value) -> str:
    """A table cell shaded like a heatmap cell of the "Blues" scale at ``value`` in [0, 1] (white
    text on the dark end); none for a missing value."""
    if (v := _number(value)) is None:
        return ""
    v = max(0.0, min(1.0, v))
    r, g, b = (round(lo + (hi - lo) * v) for lo, hi in zip(*_BLUES))
    return f"background-color: #{r:02x}{g:02x}{b:02x}; color: {'#ffffff' if v > 0.5 else '#111111'}"


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


FLOOR_COLOR = "#444444"


FLOORS_APART = 3.0  # points: two floor lines closer than this share one label (two would overlap)


def add_floor_lines(fig: go.Figure, floors: dict | None, *, row=None, col=None, of: str = "",
                    legend: bool = False) -> go.Figure:
    """Dashed horizontal lines at the chance and majority-class error (``core.report.floors``; percent).

    One line when the two coincide (a balanced test set), two otherwise, each labelled; two lines
    closer than ``FLOORS_APART`` share one label above the upper one (two labels there overlap).
    ``row``/``col``: the subplot of a panel figure; ``of``: what the majority class is of, when
    not the whole test set (e.g. " (these 500 images)"); ``legend``: the labels as legend entries
    beside a dashed line (one click shows or hides every floor line) instead of on the plot, where
    a curve that climbs to the floor (an error curve under strong noise) runs through them.
    """
    if not floors:
        return fig
    chance, major = floors.get("chance_error"), floors.get("majority_error")
    lines = []
    if chance is not None and chance == chance:
        lines.append((100 * chance, f"chance {100 * chance:.1f} %"))
    if major is not None and major == major:
        if lines and abs(100 * major - lines[0][0]) < 0.05:
            lines[0] = (lines[0][0], f"chance = majority class {lines[0][0]:.1f} %")
        else:
            lines.append((100 * major, f"majority class{of} {100 * major:.2f} %"))
    if len(lines) == 2 and abs(lines[0][0] - lines[1][0]) < FLOORS_APART:
        top, low = sorted(lines, reverse=True)
        lines = [(top[0], f"{top[1]} · {low[1]}"), (low[0], "")]
    for k, (y, text) in enumerate(lines):
        where = {"row": row, "col": col} if row is not None else {}
        line = dict(color=FLOOR_COLOR, dash="dash", width=1.2)
        if legend:
            fig.add_hline(y=y, line=line, name=text or "floor", showlegend=bool(text), legendgroup="floors", **where)
            continue
        label = dict(annotation_text=text, annotation_position="bottom right" if k else "top right",
                     annotation_font=dict(size=10, color=FLOOR_COLOR)) if text else {}
        fig.add_hline(y=y, line=line, name="floor", **label, **where)
    return fig


def first_figure() -> None:
    """Build and serialise one small figure of every kind the pages draw, thrown away: plotly loads
    the checks of each trace type and layout part on their first use (a tenth of a second or more,
    which the first chart of a server's first page pays otherwise). ``python app.py`` calls it
    before the server answers."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=("a", "b"))
    fig.add_trace(go.Heatmap(z=[[0, 1]], colorscale="Viridis", colorbar=dict(title="x")), row=1, col=1)
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines+markers", line=dict(dash="dot")), row=1, col=2)
    fig.add_trace(go.Bar(x=["a"], y=[1], marker=dict(color="#000")), row=1, col=2)
    fig.add_shape(type="rect", x0=0, x1=1, y0=0, y1=1)
    fig.add_annotation(text="a", x=0, y=0)
    fig.update_layout(height=100, margin=dict(l=0, r=0, t=0, b=0), legend=dict(orientation="h"),
                      xaxis=dict(title="x"), yaxis=dict(autorange="reversed"))
    fig.to_json()
