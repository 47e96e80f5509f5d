"""Mechanisms across a set of images (Mechanisms page): matches of a mask block, what each unit is for."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .style import CHANGE_COLORS, MASK_COLORS, TIMESTEP_AXIS, empty_figure


def class_share_figure(match_counts, set_counts, classes: list, *, height: int = 280) -> go.Figure:
    """Share of each class among the matches beside its share in the whole set searched."""
    m = np.asarray(match_counts, dtype=float)
    s = np.asarray(set_counts, dtype=float)
    if s.sum() == 0:
        return empty_figure("No images searched.", height)
    names = [str(c) for c in classes]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=names, y=s / s.sum() * 100, name=f"whole set ({int(s.sum())})", marker_color="#BBBBBB",
                         hovertemplate="%{x}: %{y:.1f}% of the set<extra></extra>"))
    fig.add_trace(go.Bar(x=names, y=(m / m.sum() * 100) if m.sum() else m, name=f"matches ({int(m.sum())})",
                         marker_color=MASK_COLORS[1], customdata=m,
                         hovertemplate="%{x}: %{y:.1f}% of the matches (%{customdata:.0f})<extra></extra>"))
    fig.update_layout(barmode="group", height=height, yaxis_title="share (%)", xaxis=dict(title="class", type="category"),
                      legend=dict(orientation="h", y=1.02, yanchor="bottom", x=0), margin=dict(l=10, r=10, t=30, b=40))
    return fig


def unit_profile_figure(per_class, per_row, classes: list, *, value_label: str, color: str,
                        height: int = 260) -> go.Figure:
    """One unit's mean value per class (left) and per row (right)."""
    fig = make_subplots(rows=1, cols=2, column_widths=[0.4, 0.6], subplot_titles=["per class", "per row"])
    fig.add_trace(go.Bar(x=[str(c) for c in classes], y=np.asarray(per_class, dtype=float), marker_color=color,
                         hovertemplate="%{x}: %{y:.3f}<extra></extra>"), row=1, col=1)
    rows = np.arange(1, len(per_row) + 1)
    fig.add_trace(go.Bar(x=rows, y=np.asarray(per_row, dtype=float), marker_color=color,
                         hovertemplate="row %{x}: %{y:.3f}<extra></extra>"), row=1, col=2)
    fig.update_xaxes(type="category", title_text="class", row=1, col=1)
    fig.update_xaxes(title_text=TIMESTEP_AXIS, dtick=1 if len(rows) <= 32 else 4, row=1, col=2)
    fig.update_yaxes(title_text=value_label, row=1, col=1)
    fig.update_layout(height=height, showlegend=False, margin=dict(l=10, r=10, t=30, b=40))
    fig.update_annotations(font_size=12)
    return fig


def unit_shift_figure(shift, unit_names: list, *, level: str, unit: int | None = None,
                      height: int = 280) -> go.Figure:
    """Per unit: active share clean vs noisy (left) and the share of cells that switched on
    or off (right); ``unit``'s bars are outlined."""
    names = list(unit_names)
    line = [3 if i == unit else 0 for i in range(len(names))]
    fig = make_subplots(rows=1, cols=2, subplot_titles=["share of rows active", f"switched under {level}"])
    fig.add_trace(go.Bar(x=names, y=shift.clean, name="clean", marker_color=MASK_COLORS[1], opacity=0.5,
                         marker_line_width=line, marker_line_color="#000000"), row=1, col=1)
    fig.add_trace(go.Bar(x=names, y=shift.noisy, name=level, marker_color=MASK_COLORS[1],
                         marker_line_width=line, marker_line_color="#000000"), row=1, col=1)
    fig.add_trace(go.Bar(x=names, y=shift.switched_on, name="switched on", marker_color=CHANGE_COLORS[1]),
                  row=1, col=2)
    fig.add_trace(go.Bar(x=names, y=shift.switched_off, name="switched off", marker_color="#999999"), row=1, col=2)
    fig.update_layout(barmode="group", height=height, legend=dict(orientation="h", y=1.1, yanchor="bottom", x=0),
                      margin=dict(l=10, r=10, t=50, b=40))
    fig.update_yaxes(range=[0, 1], row=1, col=1)
    fig.update_annotations(font_size=12)
    return fig
