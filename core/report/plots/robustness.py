"""Robustness figures: error against a setting, and how a selection mask shifts (Robustness page).

Errors come in as fractions and are drawn in percent.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ...models.registry import is_method
from .style import (
    CHANGE_COLORS,
    MASK_COLORS,
    TIMESTEP_AXIS,
    add_floor_lines,
    binary_scale,
    empty_figure,
    method_color,
    rgba,
)
from .traces import mark_step


def mask_shift_figure(clean, noisy, unit_names: list, *, t: int | None = None,
                      labels=("clean", "noisy")) -> go.Figure:
    """Active masks ``[T, U]`` for two inputs and the cells that changed, on one time axis."""
    a = np.asarray(clean, dtype=float)
    b = np.asarray(noisy, dtype=float)
    if a.shape != b.shape:
        return empty_figure(f"The masks have different lengths ({a.shape[0]} vs {b.shape[0]} rows).")
    changed = ((a > 0.5) != (b > 0.5)).astype(float)
    T = a.shape[0]
    frac = changed.mean() if changed.size else 0.0
    titles = [f"active mask, {labels[0]}", f"active mask, {labels[1]}",
              f"changed ({int(changed.sum())} of {changed.size} activations, {frac * 100:.1f}%)"]
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.08, subplot_titles=titles)
    x = np.arange(1, T + 1)
    for i, (z, colors, ticks) in enumerate([(a, MASK_COLORS, ("inactive", "active")),
                                            (b, MASK_COLORS, ("inactive", "active")),
                                            (changed, CHANGE_COLORS, ("same", "changed"))], start=1):
        fig.add_trace(go.Heatmap(z=z.T, x=x, y=list(unit_names), zmin=0, zmax=1, colorscale=binary_scale(colors),
                                 xgap=1, ygap=1, showscale=i != 2,
                                 colorbar=dict(tickvals=[0.25, 0.75], ticktext=list(ticks), thickness=12),
                                 hovertemplate="row %{x}, %{y}: %{z:.0f}<extra></extra>"), row=i, col=1)
        fig.update_yaxes(autorange="reversed", row=i, col=1)
    for i in (1, 3):
        dom = fig.layout[f"yaxis{i}"].domain
        fig.data[i - 1].colorbar.update(y=(dom[0] + dom[1]) / 2, len=dom[1] - dom[0], yanchor="middle")
    if t is not None:
        mark_step(fig, t)
    fig.update_xaxes(range=[0.5, T + 0.5], dtick=1 if T <= 32 else 4, tickfont_size=9)
    fig.update_xaxes(title_text=f"{TIMESTEP_AXIS} (1-{T})", row=3, col=1)
    fig.update_layout(height=3 * (24 * len(unit_names) + 40) + 100, margin=dict(l=70, r=20, t=30, b=40))
    fig.update_annotations(font_size=12)
    return fig


def error_curve_figure(curves: list[dict], *, x_title: str, current: float | None = None,
                       reference: float | None = None, reference_label: str = "paper",
                       y_title: str = "test error (%)", height: int = 380, band: bool = True,
                       floors: dict | None = None, floors_of: str = "") -> go.Figure:
    """Error (or another fraction) against a setting, one line per model coloured by method.

    ``curves``: ``{"label", "method", "x", "y"}`` plus optional ``"low"``/``"high"`` (95%
    interval, drawn as a band). Values are fractions and drawn in percent. NaN points (not
    computed yet) are left out. ``floors``: the chance and majority-class error of the scored
    images (``core.report.floors.floors_from_counts``), drawn as dashed lines; ``floors_of``: what
    their majority class is of (``style.add_floor_lines``' ``of``).
    """
    fig = go.Figure()
    if not curves:
        return empty_figure("No curve to show.")
    for c in curves:
        x = np.asarray(c["x"], dtype=float)
        y = np.asarray(c["y"], dtype=float) * 100
        color = method_color(c["method"])
        if band and c.get("low") is not None and c.get("high") is not None:
            lo = np.asarray(c["low"], dtype=float) * 100
            hi = np.asarray(c["high"], dtype=float) * 100
            ok = np.isfinite(lo) & np.isfinite(hi)
            if ok.sum() >= 2:
                fig.add_trace(go.Scatter(x=np.r_[x[ok], x[ok][::-1]], y=np.r_[hi[ok], lo[ok][::-1]], fill="toself",
                                         mode="lines",  # plotly adds vertex markers to short traces otherwise
                                         fillcolor=rgba(color, 0.12), line=dict(width=0), hoverinfo="skip",
                                         showlegend=False, legendgroup=c["label"]))
        ok = np.isfinite(y)
        fig.add_trace(go.Scatter(x=x[ok], y=y[ok], mode="lines+markers", name=c["label"], legendgroup=c["label"],
                                 line=dict(color=color, width=2.5 if is_method(c["method"]) else 1.8),
                                 marker=dict(size=5),
                                 hovertemplate=c["label"] + "<br>" + x_title + " %{x}<br>%{y:.1f}%<extra></extra>"))
    add_floor_lines(fig, floors, of=floors_of, legend=True)  # on the plot, a label lies on a curve near the floor
    if reference is not None:
        # the reference's label on the top line of the plot, the current setting's one line below
        # (mark_current): the two never overlap, even when the current setting is the reference
        fig.add_vline(x=reference, line=dict(color="#777777", dash="dot"))
        fig.add_annotation(x=reference, xref="x", y=1, yref="paper", text=reference_label, name="reference",
                           showarrow=False, xanchor="left", yanchor="top", xshift=3, font=dict(size=11, color="#555555"),
                           bgcolor="rgba(255,255,255,0.8)")
    if current is not None:
        mark_current(fig, current)
    fig.update_layout(height=height, xaxis_title=x_title, yaxis_title=y_title, hovermode="x unified",
                      legend=dict(orientation="h", y=1.02, yanchor="bottom", x=0),
                      margin=dict(l=10, r=10, t=40, b=40))
    fig.update_yaxes(rangemode="tozero")
    return fig


def mark_current(fig: go.Figure, x: float, label: str = "current") -> go.Figure:
    """Move the "current setting" line of a curve figure to ``x`` (replaces the old one).

    Cheap, so a page can keep a curve figure and only move this line when a slider moves.
    """
    fig.layout.shapes = [s for s in fig.layout.shapes if s.name != "current"]
    fig.layout.annotations = [a for a in fig.layout.annotations if a.name != "current"]
    fig.add_shape(type="line", xref="x", yref="paper", x0=x, x1=x, y0=0, y1=1, name="current",
                  line=dict(color="#000000", width=1.5))
    # a line below the reference's label (top line, with a gap), on the side of the line with room:
    # right of it in the left part of the plot, left of it near the right edge
    xs = [v for tr in fig.data for v in (tr.x if tr.x is not None else ()) if v is not None]
    right_edge = bool(xs) and x > min(xs) + 0.75 * (max(xs) - min(xs))
    fig.add_annotation(x=x, xref="x", y=1, yref="paper", text=label, name="current", showarrow=False,
                       xanchor="right" if right_edge else "left", yanchor="top", yshift=-26,
                       xshift=-3 if right_edge else 3, font=dict(size=11), bgcolor="rgba(255,255,255,0.8)")
    return fig

