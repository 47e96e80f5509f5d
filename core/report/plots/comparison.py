"""Comparisons across methods: final errors over seeds, parameter counts (Compare, Overview)."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..floors import floors as dataset_floors
from ..fmt import dataset_title, display_name, method_title
from .style import GRID_COLORS, add_floor_lines, empty_figure, method_color, method_order

ERROR_METRICS = {
    "test_error": "clean test error (%)",
    "noisy_test_error": "noisy test error (%, Gaussian var 0.01)",
}
INPUT_SHAPES = {"28x28 (MNIST, Fashion-MNIST)": 28, "32x32x3 (CIFAR-10, Animals-10)": 96}


def error_bar_figure(rows: list[dict], metric: str = "test_error", *, datasets: list[str] | None = None,
                     cols: int = 2, height_per_row: int = 330, floors: bool = True,
                     include_unhealthy: bool = False) -> go.Figure:
    """Final test error per method with its spread over seeds, one panel per data set.

    ``rows``: the ``runs`` list of a reproduction summary (fractions). Per method: one dot per
    seed (left) and the mean with a ±1 sd error bar (right). Diverged runs are left out of
    the mean and counted in the hover text; so are unhealthy runs (``health`` of a row not
    "healthy", ``core.report.health``: drawn as crosses) unless ``include_unhealthy``. Panels wrap
    after ``cols`` data sets; each has its own y range (errors differ a lot between data
    sets) and, with ``floors``, dashed lines at the chance and majority-class error of its
    test set (``core.report.floors``).
    """
    if metric not in ERROR_METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose one of {', '.join(ERROR_METRICS)}")
    from ...data.datasets import DATASETS

    present = [r["dataset"] for r in rows]
    order = list(DATASETS)
    datasets = datasets or sorted(set(present), key=lambda d: order.index(d) if d in order else len(order))
    usable = [r for r in rows if r.get("dataset") in datasets]
    if not usable:
        return empty_figure("No finished runs to show.")
    methods = [m for m in method_order() if any(r["model"] == m for r in usable)]
    methods += sorted({r["model"] for r in usable} - set(methods))
    cols = max(1, min(cols, len(datasets)))
    nrows = math.ceil(len(datasets) / cols)
    fig = make_subplots(rows=nrows, cols=cols, horizontal_spacing=0.08, vertical_spacing=0.16,
                        subplot_titles=[dataset_title(d) for d in datasets])
    rng = np.random.default_rng(0)
    for k, ds in enumerate(datasets):
        row, col = k // cols + 1, k % cols + 1
        drawn: list[float] = []
        for i, m in enumerate(methods):
            sel = [r for r in usable if r["dataset"] == ds and r["model"] == m]
            drawn += _method_points(fig, sel, m, i, metric, include_unhealthy, rng, legend=k == 0, row=row, col=col)
        if floors:
            add_floor_lines(fig, dataset_floors(ds), row=row, col=col)
        _zoom(fig, drawn, dataset_floors(ds) if floors else None, row, col)
        fig.update_xaxes(tickvals=list(range(len(methods))), ticktext=[_tick(m) for m in methods],
                         tickangle=0, range=[-0.6, len(methods) - 0.4], zeroline=False, row=row, col=col)
    for r in range(1, nrows + 1):
        fig.update_yaxes(title_text=ERROR_METRICS[metric].replace(" (%", " (%, mean ± sd", 1), row=r, col=1)
    height = nrows * height_per_row + 110
    fig.update_layout(height=height,  # legend below the two-line method ticks of the last row
                      legend=dict(orientation="h", yanchor="top", y=-62 / (height - 120), x=0),
                      margin=dict(l=60, r=20, t=70, b=40),
                      title=f"Final {ERROR_METRICS[metric].split(' (')[0]}: dots = seeds, diamond = mean ± sd"
                      + (" of the healthy runs, dashed = chance / majority class" if floors else ""))
    return fig


def _method_points(fig: go.Figure, sel: list[dict], m: str, i: int, metric: str, include_unhealthy: bool,
                   rng: np.random.Generator, *, legend: bool, row: int, col: int) -> list[float]:
    """One method's runs in one panel of :func:`error_bar_figure` at x = ``i``: a dot per seed
    (a cross when unhealthy) and the mean ± sd of the counted ones; returns the values drawn
    (for the panel's zoom), none when the method has no run there."""
    done = [r for r in sel if r.get("status", "completed") == "completed" and r.get(metric) is not None
            and math.isfinite(float(r[metric]))]
    bad = [r for r in done if not include_unhealthy and r.get("health", "healthy") != "healthy"]
    ok = [r for r in done if r not in bad]
    diverged = len(sel) - len(done)
    if not done and not diverged:
        return []
    vals = np.asarray([float(r[metric]) * 100 for r in ok])
    drawn = [float(r[metric]) * 100 for r in done]
    color, name = method_color(m), method_title(m) if m in method_order() else display_name(m)
    for group, symbol, label in ((ok, "circle", ""), (bad, "x-thin-open", " (unhealthy: left out)")):
        if not group:
            continue
        fig.add_trace(go.Scatter(
            x=i - 0.12 + rng.uniform(-0.05, 0.05, len(group)), y=[float(r[metric]) * 100 for r in group],
            mode="markers", marker=dict(color=color, size=7, opacity=0.6 if not label else 0.9, symbol=symbol,
                                        line=dict(width=0 if not label else 1.5, color=color)),
            name=name, legendgroup=m, showlegend=False,
            customdata=[[r.get("seed"), r.get("health") or "not classified"] for r in group],
            hovertemplate=f"{name}<br>seed %{{customdata[0]}}<br>%{{y:.2f}} %<br>%{{customdata[1]}}{label}"
                          "<extra></extra>"), row=row, col=col)
    mean = float(vals.mean()) if len(vals) else math.nan
    sd = float(vals.std(ddof=1)) if len(vals) > 1 else 0.0
    if len(vals):
        drawn += [mean - sd, mean + sd]
    note = (f"<br>{diverged} diverged run(s) left out" if diverged else "") + (
        f"<br>{len(bad)} unhealthy run(s) left out" if bad else "")
    fig.add_trace(go.Scatter(
        x=[i + 0.12], y=[mean], mode="markers", name=name, legendgroup=m, showlegend=legend,
        marker=dict(color=color, size=11, symbol="diamond", line=dict(color="black", width=0.5)),
        error_y=dict(type="data", array=[sd], visible=True, color=color, thickness=2, width=6),
        hovertemplate=(f"{name}<br>mean %{{y:.2f}} % ± {sd:.2f} (sd, {len(vals)} seeds){note}"
                       "<extra></extra>")), row=row, col=col)
    return drawn


def _tick(m: str) -> str:
    """A method's x tick: one word a line; a variant's name broken after its comma."""
    name = display_name(m)
    return name.replace(", ", ",<br>") if "," in name else name.replace(" ", "<br>")


def _zoom(fig: go.Figure, values: list[float], floors: dict | None, row: int, col: int) -> None:
    """A panel's y axis zoomed to its points (every drawn seed and mean ± sd); a floor far above them
    is named in the panel instead of stretching the axis (a 0-90 % axis hides every difference)."""
    v = [x for x in values if math.isfinite(x)]
    if not v:
        return
    lo, hi = min(v), max(v)
    pad = max(0.15 * (hi - lo), 0.3)
    lo, hi = max(0.0, lo - pad), hi + pad
    off = []
    f = floors or {}
    same = f.get("chance_error") is not None and f.get("chance_error") == f.get("majority_error")
    for key, label in ((("chance_error", "chance = majority class"),) if same else
                       (("chance_error", "chance"), ("majority_error", "majority class"))):
        v = f.get(key)
        if v is None or not math.isfinite(v):
            continue
        y = 100 * v
        if y <= hi + 0.5 * (hi - lo):
            hi = max(hi, y + pad)
        else:
            off.append(f"{label} {y:.2f} %")
    fig.update_yaxes(range=[lo, hi], row=row, col=col)
    if off:
        k = (row - 1) * len(fig._grid_ref[0]) + col if fig._grid_ref else 1
        axis = "" if k == 1 else str(k)
        fig.add_annotation(text="floors above the axis: " + ", ".join(dict.fromkeys(off)), showarrow=False,
                           xref=f"x{axis} domain", yref=f"y{axis} domain", x=0.01, y=0.99, xanchor="left",
                           yanchor="top", font=dict(size=10, color="#666"))


GAPS_TITLE = "RIM's gap to each method (other − RIM, test-error points)"


def gaps_figure(df, height: int = 520) -> go.Figure:
    """RIM's gap to each method (``core.report.answer.gap_rows``): one panel per data set, the
    Adam budgets above and the paper protocol below (their scales differ tenfold), each point with
    the interval its verdict uses, the paper's figure as an open diamond."""
    from ..answer import OTHERS, SHORT
    from ..paper import DATASET_ORDER

    if df is None or len(df) == 0:
        return empty_figure("No results grid with tables yet.")
    grid_rows = [[g for g in GRID_COLORS if g != "paper" and g in set(df["grid"])],
                 ["paper"] if "paper" in set(df["grid"]) else []]
    grid_rows = [r for r in grid_rows if r]
    titles = [f"{dataset_title(d)}{' (paper protocol)' if r == ['paper'] else ''}" for r in grid_rows for d in DATASET_ORDER]
    fig = make_subplots(rows=len(grid_rows), cols=len(DATASET_ORDER), subplot_titles=titles, shared_yaxes=True,
                        vertical_spacing=0.16, horizontal_spacing=0.03)
    ticks = [f"vs {display_name(o).split(' (')[0]}" for o in OTHERS]
    shown: set = set()
    for ri, grids in enumerate(grid_rows, 1):
        for ci, ds in enumerate(DATASET_ORDER, 1):
            for j, g in enumerate(grids):
                sel = df[(df["grid"] == g) & (df["dataset"] == ds)]
                if sel.empty:
                    continue
                y = [OTHERS.index(o) + (j - (len(grids) - 1) / 2) * 0.22 for o in sel["other"]]
                fig.add_trace(go.Scatter(
                    x=sel["gap"], y=y, mode="markers", name=SHORT[g], legendgroup=g, showlegend=g not in shown,
                    marker=dict(color=GRID_COLORS[g], size=7),
                    error_x=dict(type="data", symmetric=False, array=sel["ci_high"] - sel["gap"],
                                 arrayminus=sel["gap"] - sel["ci_low"], thickness=1.3, width=3),
                    customdata=list(zip(sel["other"].map(lambda o: display_name(o)), sel["verdict"],
                                        sel["magnitude"].fillna(""), sel["seeds"], strict=True)),
                    hovertemplate="%{customdata[0]}: %{x:+.2f} points<br>%{customdata[1]}<br>%{customdata[2]}"
                                  "<br>%{customdata[3]} seeds<extra>" + SHORT[g] + "</extra>"), row=ri, col=ci)
                shown.add(g)
            paper = df[(df["dataset"] == ds) & df["paper_gap"].notna()].drop_duplicates("other")
            if not paper.empty:
                fig.add_trace(go.Scatter(
                    x=paper["paper_gap"], y=[OTHERS.index(o) for o in paper["other"]], mode="markers",
                    name="paper's figure", legendgroup="paper_fig", showlegend="paper_fig" not in shown,
                    marker=dict(symbol="diamond-open", size=10, color="black"),
                    hovertemplate="paper: %{x:+.2f} points<extra></extra>"), row=ri, col=ci)
                shown.add("paper_fig")
            fig.add_vline(x=0, line_width=1, line_color="black", row=ri, col=ci)
    fig.update_yaxes(tickvals=list(range(len(OTHERS))), ticktext=ticks, autorange="reversed")
    fig.update_xaxes(title_text="other − RIM, points", row=len(grid_rows))
    fig.update_layout(title=dict(text=GAPS_TITLE, font=dict(size=14)), height=height, margin=dict(l=10, r=10, t=70, b=10),
                      legend=dict(orientation="h", y=-0.18, x=0.5, xanchor="center"))
    return fig
