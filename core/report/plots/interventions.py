"""Figures of the interventions (Mechanisms, "Intervene" and "Which pixels drive it"): the
active mask after an intervention, with the cells set and the cells changed downstream marked,
and an attribution map drawn over the input."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from . import style

_OVERLAY = [[0.0, "rgba(33,102,172,0.85)"], [0.5, "rgba(255,255,255,0)"], [1.0, "rgba(178,24,43,0.85)"]]


def mask_figure(original: np.ndarray, after: np.ndarray, pinned: np.ndarray, changed: np.ndarray,
                unit_names: list[str], title: str) -> go.Figure:
    """The mask after the intervention (x = row, y = LSTM): forced or knocked-out cells framed,
    cells that changed downstream marked with a cross. Every cell is a clickable point."""
    T, n = after.shape
    rows = np.arange(1, T + 1)
    fig = go.Figure(go.Heatmap(z=after.T, x=rows, y=unit_names, colorscale=[[0, style.MASK_COLORS[0]], [1, style.MASK_COLORS[1]]],
                               zmin=0, zmax=1, showscale=False, hoverinfo="skip"))
    tt, ii = np.meshgrid(rows, np.arange(n), indexing="ij")
    state = np.where(after > 0.5, "active", "inactive")
    was = np.where(original > 0.5, "active", "inactive")
    text = [f"row {t}, {unit_names[i]}: {state[t - 1, i]} (was {was[t - 1, i]})"
            + (", set by you" if pinned[t - 1, i] else ", changed downstream" if changed[t - 1, i] else "")
            for t, i in zip(tt.ravel(), ii.ravel())]
    fig.add_trace(go.Scatter(x=tt.ravel(), y=[unit_names[i] for i in ii.ravel()], mode="markers", text=text,
                             hoverinfo="text", marker=dict(symbol="square", size=14, opacity=0.01, color="#000"),
                             name="cells", showlegend=False))
    for mask, symbol, color, label in ((pinned, "square-open", "#1f4e99", "set by you"),
                                       (changed, "x-thin-open", "#111111", "changed downstream")):
        t_idx, i_idx = np.nonzero(mask)
        fig.add_trace(go.Scatter(x=t_idx + 1, y=[unit_names[i] for i in i_idx], mode="markers", name=label,
                                 hoverinfo="skip", marker=dict(symbol=symbol, size=14, color=color,
                                                               line=dict(width=2, color=color))))
    fig.update_layout(title=title, height=110 + 26 * n, margin=dict(l=10, r=10, t=40, b=30),
                      xaxis=dict(title="row (timestep)", dtick=2, range=[0.5, T + 0.5], fixedrange=True),
                      yaxis=dict(range=[n - 0.5, -0.5], fixedrange=True),
                      legend=dict(orientation="h", y=-0.35), clickmode="event+select", dragmode=False)
    return fig


def overlay_figure(image: np.ndarray, pixels: np.ndarray, row: int | None, title: str) -> go.Figure:
    """The input in grey with the attribution over it (red: raises the attributed score, blue:
    lowers it), the current row framed."""
    img = np.asarray(image, dtype=float)
    grey = img.mean(-1) if img.ndim == 3 else img
    attr = pixels.sum(-1) if pixels.ndim == 3 else pixels
    lim = float(np.abs(attr).max()) or 1.0
    fig = go.Figure(go.Heatmap(z=grey, colorscale="gray", showscale=False, hoverinfo="skip"))
    fig.add_trace(go.Heatmap(z=attr, colorscale=_OVERLAY, zmin=-lim, zmax=lim, zmid=0,
                             colorbar=dict(title="attribution", thickness=12),
                             hovertemplate="row %{y}, column %{x}: %{z:.4f}<extra></extra>"))
    if row is not None:
        fig.add_shape(type="rect", x0=-0.5, x1=grey.shape[1] - 0.5, y0=row - 1.5, y1=row - 0.5,
                      line=dict(color="#e8a33d", width=2))
    fig.update_layout(title=title, height=360, margin=dict(l=10, r=10, t=40, b=10),
                      yaxis=dict(autorange="reversed", scaleanchor="x", showticklabels=False),
                      xaxis=dict(showticklabels=False))
    return fig
