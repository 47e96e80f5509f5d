"""Training curves (Overview, Models, Compare pages; the Train page's live view).

Curves are lists of dicts ``{"model", "seed", "x", "y"}`` (one per run, raw values as
stored: losses in nats, accuracies as fractions); ``curves_from_metadata`` builds them from
a model's JSON.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..fmt import method_title
from ..stats import ema_smooth, float_array
from .style import LOG_TICKS, axis_title, empty_figure, method_color, method_order

ITERATION_AXIS = "training iteration (optimiser steps, batch of 100)"
# metric -> (short name, axis title with unit, scale applied to stored values)
CURVE_METRICS = {
    "loss": ("training loss", "training loss (nats)", 1.0),  # cross-entropy
    "batch_acc": ("batch accuracy", "batch accuracy (%)", 100.0),  # on the training batch
    "test_acc": ("test accuracy", "test accuracy (%)", 100.0),  # periodic, on a fixed test subset
    "test_loss": ("test loss", "test loss (nats)", 1.0),
}
def curves_from_metadata(meta: dict, seed=None) -> dict[str, dict]:
    """Curves of one run from its JSON metadata: metric -> ``{"model","seed","x","y"}``.

    ``history`` (per iteration: loss, batch_acc) and ``evals`` (periodic: test_acc,
    test_loss). Metrics the metadata lacks are left out; malformed lists are ignored.
    """
    model = str(meta.get("model", "?"))
    seed = meta.get("seed") if seed is None else seed
    out = {}
    for block, keys in (("history", ("loss", "batch_acc")), ("evals", ("test_acc", "test_loss"))):
        data = meta.get(block)
        if not isinstance(data, dict) or not isinstance(data.get("iteration"), list):
            continue
        x = float_array(data["iteration"])
        for k in keys:
            ys = data.get(k)
            if isinstance(ys, list) and len(ys) == len(x) and len(x):
                out[k] = {"model": model, "seed": seed, "x": x, "y": float_array(ys)}
    return out


def _last_per_x(x, y) -> tuple[np.ndarray, np.ndarray]:
    """A curve's x values sorted and unique, each with its last non-NaN y (NaN where it has none;
    a resumed run repeats iterations)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ux = np.unique(x)
    ok = ~np.isnan(y)
    xs, first_in_reversed = np.unique(x[ok][::-1], return_index=True)
    out = np.full(len(ux), np.nan)
    out[np.searchsorted(ux, xs)] = y[ok][::-1][first_in_reversed]
    return ux, out


def _mean_curve(curves: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """Mean over runs at each x that every run has (NaN where a run diverged is skipped; NaN
    where every run is NaN)."""
    per_run = [_last_per_x(c["x"], c["y"]) for c in curves]
    common = per_run[0][0]
    for ux, _ in per_run[1:]:
        common = np.intersect1d(common, ux, assume_unique=True)
    ys = np.vstack([uy[np.searchsorted(ux, common)] for ux, uy in per_run])
    counts = np.sum(~np.isnan(ys), axis=0)
    sums = np.nansum(ys, axis=0)
    mean = np.divide(sums, counts, out=np.full(len(common), np.nan), where=counts > 0)
    return common, mean


def _group_by_method(curves: list[dict]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for c in curves:
        groups.setdefault(c["model"], []).append(c)
    order = {m: i for i, m in enumerate(method_order())}
    return dict(sorted(groups.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))


MAX_CURVE_POINTS = 600  # per drawn line: a 4,000-iteration run is drawn at every ~7th iteration


def thin(x, y, max_points: int = MAX_CURVE_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """At most ``max_points`` evenly spaced points of a curve, the first and last kept: a
    lighter figure (payload and drawing in the browser) that looks the same at chart size.
    Smooth first, then thin, so the drawn points lie on the smoothed curve."""
    x, y = np.asarray(x), np.asarray(y)
    if len(x) <= max_points:
        return x, y
    idx = np.unique(np.linspace(0, len(x) - 1, max_points).round().astype(int))
    return x[idx], y[idx]


def _method_traces(method: str, runs: list[dict], metric: str, smoothing: float, showlegend: bool,
                   legendgroup: str | None = None) -> list[go.Scatter]:
    """Thin per-seed lines, plus a bold mean line when there are several seeds."""
    _, _, scale = CURVE_METRICS[metric]
    color, name = method_color(method), method_title(method)
    legendgroup = legendgroup or method
    several = len(runs) > 1
    traces = []
    runs = sorted(runs, key=lambda c: (c.get("seed") is None, c.get("seed") or 0))
    for i, c in enumerate(runs):
        x, y = thin(c["x"], ema_smooth(c["y"], smoothing) * scale)
        seed = c.get("seed")
        label = c.get("label") or (f"{name}, seed {seed}" if seed is not None else name)
        traces.append(go.Scatter(
            x=x, y=y, mode="lines", name=label if not several else f"seed {seed}",
            line=dict(color=color, width=1 if several else 2), opacity=0.35 if several else 1.0,
            legendgroup=legendgroup, showlegend=showlegend and not several and i == 0,
            hovertemplate=f"{label}<br>iteration %{{x:.0f}}<br>%{{y:.4g}}<extra></extra>"))
    if several:
        x, y = thin(*_mean_curve([{"x": c["x"], "y": ema_smooth(c["y"], smoothing)} for c in runs]))
        traces.append(go.Scatter(
            x=x, y=y * scale, mode="lines", name=f"{name} (mean of {len(runs)} seeds)",
            line=dict(color=color, width=2.5), legendgroup=legendgroup, showlegend=showlegend,
            hovertemplate=f"{name} mean<br>iteration %{{x:.0f}}<br>%{{y:.4g}}<extra></extra>"))
    return traces

OWN_GROUP = "Your runs"  # the legend group of the user's runs drawn beside the shipped ones


def _own_trace(c: dict, metric: str, smoothing: float) -> go.Scatter:
    """One of the user's runs: its own dashed line in its method's colour, named by run."""
    _, _, scale = CURVE_METRICS[metric]
    x, y = thin(c["x"], ema_smooth(c["y"], smoothing) * scale)
    label = c.get("label") or method_title(c["model"])
    return go.Scatter(x=x, y=y, mode="lines", name=label, legendgroup="own", legendgrouptitle_text=OWN_GROUP,
                      line=dict(color=method_color(c["model"]), width=2.5, dash="dash"),
                      hovertemplate=f"{label} (your run)<br>iteration %{{x:.0f}}<br>%{{y:.4g}}<extra></extra>")


def curves_overlay(curves: list[dict], metric: str = "loss", *, smoothing: float = 0.0,
                   log_y: bool = False, title: str | None = None, height: int = 420,
                   own: list[dict] = ()) -> go.Figure:
    """Every method's curve on one chart, one colour per method (seeds thin, mean bold).

    ``own``: the user's runs (curves with a ``label``), each a dashed line of its own after the
    shipped ones, in the legend group "Your runs"; never part of a method's mean."""
    if metric not in CURVE_METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose one of {', '.join(CURVE_METRICS)}")
    short, axis, _ = CURVE_METRICS[metric]
    if not curves and not own:
        return empty_figure(f"No {short} curves to show.", height)
    fig = go.Figure()
    for method, runs in _group_by_method(curves).items():
        for tr in _method_traces(method, runs, metric, smoothing, showlegend=True):
            fig.add_trace(tr)
    for c in own:
        fig.add_trace(_own_trace(c, metric, smoothing))
    suffix = f" (smoothed, EMA {smoothing:g})" if smoothing else ""
    fig.update_layout(title=title or f"{short.capitalize()}{suffix}", height=height,
                      legend=dict(orientation="h", yanchor="top", y=-0.26, x=0),
                      margin=dict(l=60, r=20, t=50, b=40), hovermode="closest")
    fig.update_xaxes(title_text=ITERATION_AXIS)
    fig.update_yaxes(title_text=axis_title(axis, log_y), type="log" if log_y else "linear")
    if log_y:
        fig.update_yaxes(tickformat=LOG_TICKS)
    return fig


def curves_small_multiples(curves: list[dict], metric: str = "loss", *, smoothing: float = 0.0,
                           log_y: bool = False, cols: int | None = None, title: str | None = None,
                           height_per_row: int = 280) -> go.Figure:
    """One panel per method (shared axes), so each method's curve and spread is seen alone."""
    if metric not in CURVE_METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose one of {', '.join(CURVE_METRICS)}")
    short, axis, _ = CURVE_METRICS[metric]
    groups = _group_by_method(curves)
    if not groups:
        return empty_figure(f"No {short} curves to show.")
    n = len(groups)
    cols = cols or min(n, 5)
    rows = math.ceil(n / cols)
    fig = make_subplots(rows=rows, cols=cols, shared_xaxes=True, shared_yaxes=True,
                        subplot_titles=[method_title(m) for m in groups],
                        horizontal_spacing=0.03, vertical_spacing=0.12)
    for i, (method, runs) in enumerate(groups.items()):
        r, c = divmod(i, cols)
        for tr in _method_traces(method, runs, metric, smoothing, showlegend=False):
            fig.add_trace(tr, row=r + 1, col=c + 1)
    for r in range(1, rows + 1):
        fig.update_yaxes(title_text=axis_title(axis, log_y), row=r, col=1)
    # one x-axis title, under the middle panel: one under each ran into the next at a laptop's width
    fig.update_xaxes(title_text="iteration (optimiser steps)", row=rows, col=(cols + 1) // 2)
    if log_y:
        fig.update_yaxes(type="log", tickformat=LOG_TICKS)
    suffix = f" (smoothed, EMA {smoothing:g})" if smoothing else ""
    fig.update_layout(title=title or f"{short.capitalize()} per method{suffix}",
                      height=max(300, rows * height_per_row + 80), showlegend=False,
                      margin=dict(l=60, r=20, t=70, b=50))
    return fig


def run_curves_figure(meta: dict, title: str = "", log_loss: bool | None = None) -> go.Figure:
    """Training curves of one run: loss, batch accuracy per iteration, periodic test accuracy.

    ``log_loss=None`` picks a log loss axis when the loss spans over two orders of magnitude
    (a run that blew up), linear otherwise.
    """
    curves = curves_from_metadata(meta)
    panels = [m for m in ("loss", "batch_acc", "test_acc") if m in curves]
    if not panels:
        return empty_figure("This model stores no training history.")
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[CURVE_METRICS[m][0].capitalize() for m in panels],
                        horizontal_spacing=0.08)
    color = method_color(str(meta.get("model")))
    for i, m in enumerate(panels, 1):
        c = curves[m]
        _, axis, scale = CURVE_METRICS[m]
        tx, ty = thin(c["x"], c["y"] * scale)
        fig.add_trace(go.Scatter(x=tx, y=ty, mode="lines+markers" if m == "test_acc" else "lines",
                                 line=dict(color=color, width=1.5), name=CURVE_METRICS[m][0], showlegend=False,
                                 hovertemplate="iteration %{x:.0f}<br>%{y:.4g}<extra></extra>"), row=1, col=i)
        fig.update_xaxes(title_text="iteration (optimiser steps)", row=1, col=i)
        log = False
        if m == "loss":
            y = c["y"][np.isfinite(c["y"]) & (c["y"] > 0)]
            log = bool(len(y) and y.max() / y.min() > 100) if log_loss is None else log_loss
        fig.update_yaxes(title_text=axis_title(axis, log), type="log" if log else "linear",
                         tickformat=LOG_TICKS if log else None, row=1, col=i)
    fig.update_layout(title=title or None, height=360, margin=dict(l=60, r=20, t=60 if title else 40, b=50))
    return fig


# --- the live view of the Train page: runs of the run store as they train -----------------
LIVE_MAX_POINTS = 1500  # per loss curve (longer ones are thinned)
RUN_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")  # the runs of one method, in turn
RUN_WIDTHS = (2.0, 3.5)  # after every dash is taken, the next runs of a method draw thicker
MARKED_POINTS = 20  # a trace with at most this many points shows its points (one point draws no line)
X_PAD = 0.02  # share of the schedule added at both ends of the x axis: end points are drawn whole


def _thin(x: list, y: list, most: int = LIVE_MAX_POINTS) -> tuple[list, list]:
    if len(x) <= most:
        return x, y
    step = -(-len(x) // most)
    return x[::step] + x[-1:], y[::step] + y[-1:]


def has_points(metrics: dict, kind: str) -> bool:
    """Whether a run's metrics (``RunStore.read_metrics``) have anything to draw for ``kind``
    ("loss" or "acc"): a run that failed before its first iteration draws no empty chart."""
    return any(v is not None for v in metrics.get("loss" if kind == "loss" else "test_acc") or [])


def run_styles(runs: list) -> dict[str, dict]:
    """The line of each run (``RunInfo``) by run id: its method's colour, and a dash (then a
    width) of its own among the runs of that method, in the order given; so two runs of one
    method never draw alike, and a run draws alike in every chart given the same ``runs``."""
    styles, count = {}, {}
    for r in runs:
        i = count[r.model] = count.get(r.model, -1) + 1
        styles[r.run_id] = {"color": method_color(r.model), "dash": RUN_DASHES[i % len(RUN_DASHES)],
                            "width": RUN_WIDTHS[(i // len(RUN_DASHES)) % len(RUN_WIDTHS)]}
    return styles


def live_runs_figure(runs: list, metrics: dict, kind: str, names: dict | None = None) -> go.Figure:
    """Training loss (``kind="loss"``) or periodic test accuracy (``"acc"``) of run-store runs
    (``RunInfo``: run_id, model, seed, total), ``metrics`` by run id; each run its own line
    (:func:`run_styles`: colour per method, a dash of its own within it); a run without points
    for ``kind`` draws nothing. ``names``: the legend name of each run id (the page's names).
    Short traces show their points; the x axis spans the whole schedule with a margin at both ends."""
    fig = go.Figure()
    styles = run_styles(runs)
    drawn = 0
    for r in runs:
        m = metrics[r.run_id]
        if not has_points(m, kind):
            continue
        if kind == "loss":
            x, y = _thin(m["iteration"], m["loss"])
        else:
            x, y = m["eval_iteration"], [None if a is None else 100 * a for a in m["test_acc"]]
        few = sum(v is not None for v in y) <= MARKED_POINTS
        fig.add_trace(go.Scatter(
            x=x, y=y, mode="lines+markers" if kind == "acc" or few else "lines", cliponaxis=False,
            name=(names or {}).get(r.run_id) or f"{r.model} s{r.seed} · {r.run_id[-8:]}", legendgroup=r.model,
            line=styles[r.run_id], marker={"size": 7 if few else 5}))
        drawn += 1
    if kind == "loss":
        fig.update_layout(title="Training loss", xaxis_title="Iteration (optimiser steps)",
                          yaxis_title="Cross-entropy loss (nats, per batch)")
    else:
        fig.update_layout(title="Test accuracy (fixed test subset)", xaxis_title="Iteration (optimiser steps)",
                          yaxis_title="Test accuracy (%)", yaxis_range=[0, 100])
    # the legend (one full run name per line) under the plot: long names never squeeze it
    fig.update_layout(height=330 + 22 * drawn, margin={"l": 10, "r": 10, "t": 40, "b": 10},
                      legend={"orientation": "h", "yanchor": "top", "y": -0.2, "x": 0, "title_text": ""})
    # the whole schedule on the x axis (one early point is not drawn at 99..101), with a margin so a
    # point at iteration 0 or at the last iteration is drawn whole; losses from 0
    total = max([r.total or 1 for r in runs] + [1])
    fig.update_xaxes(range=[-X_PAD * total, (1 + X_PAD) * total])
    if kind == "loss":
        fig.update_yaxes(rangemode="tozero")
    return fig
