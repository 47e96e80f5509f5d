"""Per-timestep traces of one input (Mechanisms page).

Shapes follow the models' traces: a panel matrix is ``[T, U]`` (timestep x unit) and is
drawn with x = image row / timestep (1-based, as the pages number rows) and y = unit. Which
panels a model has comes from its trace schema (``core.models.registry.TraceSchema``).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ...models.registry import TraceSchema, trace_schema
from .style import (
    CHANGE_COLORS,
    MASK_COLORS,
    TIMESTEP_AXIS,
    bar_css,
    binary_scale,
    blues_css,
    empty_figure,
    method_color,
)


def trace_panels(trace: dict, unit_names: list, model: str | TraceSchema, *, heads: bool = False) -> list[dict]:
    """The heatmap panels to draw for one model's trace (arrays ``[T, U]``, one image).

    ``model``: a registry name or its ``TraceSchema``. A model with a selection mask: the mask
    and the head-averaged input-attention weight on the real row (and each head's weight when
    ``heads``). Other models: their ``activity`` under its label.
    """
    schema = trace_schema(model) if isinstance(model, str) else model
    panels = []
    if schema.has(trace, "mask"):
        panels.append({"title": "active mask (1 = active: updates and reads from the others)",
                       "name": "active mask", "z": np.asarray(schema.get(trace, "mask")), "units": unit_names, "binary": True,
                       "colorbar": "state", "ticktext": ("inactive", "active")})
        # weights often sit close together (e.g. 0.49-0.52): the colour range is fitted to the
        # values so the differences that decide the top k stay visible; the bar shows the numbers
        if schema.has(trace, "input_attention"):
            w = np.asarray(schema.get(trace, "input_attention"))
            lo, hi = _fitted_range(w)
            panels.append({"title": "input attention w on the real row (mean over heads; null row gets 1 - w); "
                                    "colours fitted to this input",
                           "name": "input attention", "z": w, "units": unit_names, "zmin": lo, "zmax": hi, "colorbar": "weight w"})
        if heads and schema.has(trace, "input_heads"):
            h = np.asarray(schema.get(trace, "input_heads"))  # [T, n, Hi]
            lo, hi = _fitted_range(h)
            for i in range(h.shape[-1]):
                panels.append({"title": f"input attention, head {i + 1}", "name": f"input attention head {i + 1}",
                               "z": h[..., i], "units": unit_names,
                               "zmin": lo, "zmax": hi, "colorbar": "weight w"})
    else:
        z = np.asarray(trace["activity"])
        binary = bool(z.size) and bool(np.isin(z, (0.0, 1.0)).all())
        label = schema.activity_label
        panels.append({"title": label, "name": label, "z": z, "units": unit_names, "binary": binary and schema.activity_binary,
                       "colorbar": label, "zmin": float(np.nanmin(z)) if z.size else 0.0,
                       "zmax": float(np.nanmax(z)) if z.size else 1.0})
    return panels


def pair_panels(panels_a: list[dict], panels_b: list[dict], name_a: str, name_b: str,
                mask_a=None, mask_b=None) -> list[dict]:
    """Two models' panels for one input on one time axis, with the same colour scales.

    Panels of the same kind (same title) in both get one shared colour range (the union of
    their ranges); when both models have a selection mask of one shape, a last panel marks
    the cells where the masks differ.
    """
    def rng(p):
        if p.get("binary"):
            return 0.0, 1.0
        z = np.asarray(p["z"], dtype=float)
        lo = p.get("zmin") if p.get("zmin") is not None else float(np.nanmin(z))
        hi = p.get("zmax") if p.get("zmax") is not None else float(np.nanmax(z))
        return lo, hi

    titles_b = {p["title"]: p for p in panels_b}
    shared = {}
    for p in panels_a:
        q = titles_b.get(p["title"])
        if q is not None and not p.get("binary") and not q.get("binary"):
            (a0, a1), (b0, b1) = rng(p), rng(q)
            shared[p["title"]] = (min(a0, b0), max(a1, b1))
    out = []
    for name, panels in ((name_a, panels_a), (name_b, panels_b)):
        for p in panels:
            q = dict(p, title=f"{name}: {p['title']}", name=f"{name} {p.get('name', p['title'])}")
            if p["title"] in shared:
                q["zmin"], q["zmax"] = shared[p["title"]]
                q["title"] += " (colour range shared by both models)"
            out.append(q)
    if mask_a is not None and mask_b is not None and np.shape(mask_a) == np.shape(mask_b):
        diff = (np.asarray(mask_a) > 0.5) != (np.asarray(mask_b) > 0.5)
        out.append({"title": f"where the masks differ ({int(diff.sum())} of {diff.size} cells)", "name": "masks differ",
                    "z": diff.astype(float), "units": panels_a[0]["units"], "binary": True,
                    "colors": CHANGE_COLORS, "colorbar": "masks", "ticktext": ("same", "differ")})
    return out


def _fitted_range(values, min_width: float = 0.02) -> tuple[float, float]:
    """Colour range around the values, at least ``min_width`` wide, within [0, 1]."""
    v = np.asarray(values, dtype=float)
    if not np.isfinite(v).any():
        return 0.0, 1.0
    lo, hi = float(np.nanmin(v)), float(np.nanmax(v))
    if hi - lo < min_width:
        mid = (hi + lo) / 2
        lo, hi = mid - min_width / 2, mid + min_width / 2
    return max(0.0, lo), min(1.0, hi)


def timeline_figure(image, panels: list[dict], *, t: int | None = None, title: str = "") -> go.Figure:
    """The image and per-unit heatmaps on one time axis: x = row (timestep), rows of panels.

    The image is drawn rotated (its rows run along x), so column t of every panel lines up
    with row t of the image. ``t`` (1-based) frames the current step in every panel.
    """
    img = np.asarray(image)
    T = img.shape[0]
    n_units = [len(p["units"]) for p in panels]
    heights = [4 * img.shape[1]] + [max(60, 24 * u) for u in n_units]
    fig = make_subplots(rows=1 + len(panels), cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        row_heights=heights, subplot_titles=["image, rotated: row t runs down column t"]
                        + [p["title"] for p in panels])
    x = np.arange(1, T + 1)
    rot = np.swapaxes(img, 0, 1)  # [W, T(, 3)]
    if img.ndim == 3:
        fig.add_trace(go.Image(z=rot.astype(np.uint8), x0=1, dx=1, y0=0, dy=1,
                               hovertemplate="row %{x}, column %{y}<extra></extra>"), row=1, col=1)
    else:
        fig.add_trace(go.Heatmap(z=rot.astype(float), x=x, y=np.arange(rot.shape[0]), colorscale="gray",
                                 zmin=0, zmax=255 if img.dtype == np.uint8 else 1, showscale=False,
                                 hovertemplate="row %{x}, column %{y}: %{z:.0f}<extra></extra>"), row=1, col=1)
        fig.update_yaxes(autorange="reversed", row=1, col=1)
    fig.update_yaxes(title_text="column", showticklabels=False, row=1, col=1)
    for i, p in enumerate(panels, start=2):
        z = np.asarray(p["z"], dtype=float).T  # [U, T]
        if p.get("binary"):
            kw = dict(colorscale=binary_scale(p.get("colors", MASK_COLORS)), zmin=0, zmax=1,
                      colorbar=dict(title=p.get("colorbar", ""), tickvals=[0.25, 0.75],
                                    ticktext=list(p.get("ticktext", ("0", "1")))))
        else:
            kw = dict(colorscale=p.get("colorscale", "Viridis"), zmin=p.get("zmin"), zmax=p.get("zmax"),
                      colorbar=dict(title=p.get("colorbar", "")))
        fig.add_trace(go.Heatmap(z=z, x=x, y=list(p["units"]), xgap=1, ygap=1,
                                 hovertemplate="row %{x}, %{y}: %{z:.3f}<extra></extra>", **kw), row=i, col=1)
        fig.update_yaxes(autorange="reversed", row=i, col=1)
    # each colour bar next to its own panel
    for i in range(2, 2 + len(panels)):
        dom = fig.layout[f"yaxis{i}"].domain
        fig.data[i - 1].colorbar.update(y=(dom[0] + dom[1]) / 2, len=max(0.12, dom[1] - dom[0]),
                                        yanchor="middle", thickness=12, title_side="right")
    if t is not None:
        mark_step(fig, t)
    fig.update_xaxes(title_text=f"{TIMESTEP_AXIS} (1-{T})", row=1 + len(panels), col=1)
    fig.update_xaxes(range=[0.5, T + 0.5], dtick=1 if T <= 32 else 4, tickfont_size=9)
    total = sum(heights) + 60 * (len(panels) + 1) + 40
    fig.update_layout(height=total, title=title or None, margin=dict(l=70, r=20, t=40 if title else 30, b=40),
                      showlegend=False)
    fig.update_annotations(font_size=12)
    return fig


def mark_step(fig: go.Figure, t: int) -> go.Figure:
    """Frame timestep ``t`` across all panels of a figure with x = timestep (replaces the old frame).

    Cheap: a page builds a timeline once per input and only moves this frame per step.
    """
    fig.layout.shapes = [s for s in fig.layout.shapes if s.name != "step"]
    fig.add_shape(type="rect", xref="x", yref="paper", x0=t - 0.5, x1=t + 0.5, y0=0, y1=1, name="step",
                  line=dict(color="#000000", width=2), fillcolor="rgba(0,0,0,0)")
    return fig


def comm_attention_table(attn, unit_names: list, active=None):
    """Communication attention at one step as a table shaded like a heatmap (a pandas ``Styler``):
    row = reader LSTM, column = LSTM read from, whole percent, each reading row summing to 100.
    Rows of inactive LSTMs are blank: they do not read (their state is kept)."""
    import pandas as pd

    a = np.asarray(attn, dtype=float).copy()
    labels_y = list(unit_names)
    if active is not None:
        act = np.asarray(active) > 0.5
        a[~act] = np.nan
        labels_y = [u if act[i] else f"{u} (inactive)" for i, u in enumerate(unit_names)]
    # columns by number where the names are "LSTM 1", ...: six narrow columns fit beside the row's image
    short = [str(u).removeprefix("LSTM ") for u in unit_names]
    cols = short if len(set(short)) == len(short) else list(unit_names)
    df = pd.DataFrame(a * 100, index=pd.Index(labels_y, name="reader ↓ reads →"), columns=cols)
    return (df.style.format(lambda v: "" if v != v else f"{v:.0f}")
            .map(lambda v: blues_css(v / 100)))


def probability_table(rows: list[dict], classes: list, *, true_class: int | None = None):
    """Class probabilities of several models for one input as a table (a pandas ``Styler``): a row
    per class, a column per model, each cell a bar of its method's colour (a row's ``"color"``,
    where given, instead: e.g. ``INTERVENED_COLOR`` for one model after an intervention) under
    the percentage; the true class's row in bold. The chart-free counterpart of
    ``probability_figure``."""
    import pandas as pd

    names = [str(c) for c in classes]
    index = [f"{n} (true)" if i == true_class else n for i, n in enumerate(names)]
    df = pd.DataFrame({r["label"]: np.asarray(r["probs"], dtype=float) * 100 for r in rows},
                      index=pd.Index(index, name="class"))
    styler = df.style.format("{:.1f}")
    for r in rows:
        styler = styler.map(_bar_of(r.get("color") or method_color(r["method"])), subset=[r["label"]])
    if true_class is not None and 0 <= true_class < len(names):
        styler = styler.apply(lambda row: ["font-weight: bold"] * len(row) if row.name == index[true_class]
                              else [""] * len(row), axis=1)
    return styler


def _bar_of(color: str):
    """A cell's bar of ``color`` for a percentage."""
    return lambda v: bar_css(v, 100.0, color)


HEATMAP_TEXT_PX = 11  # numbers printed in heatmap cells: fixed, so plotly never shrinks them to fit


def probability_figure(rows: list[dict], classes: list, *, true_class: int | None = None,
                       height: int = 320) -> go.Figure:
    """Grouped bars: class probabilities of several models for one input.

    ``rows``: ``{"label", "method", "probs" [C]}``; bars are coloured by ``method``.
    """
    if not rows:
        return empty_figure("No model to show.")
    fig = go.Figure()
    names = [str(c) for c in classes]
    for r in rows:
        p = np.asarray(r["probs"], dtype=float)
        fig.add_trace(go.Bar(x=names, y=p * 100, name=r["label"], marker_color=method_color(r["method"]),
                             hovertemplate=r["label"] + "<br>%{x}: %{y:.1f}%<extra></extra>"))
    ticks = list(names)
    x_title = "class"
    if true_class is not None and 0 <= true_class < len(names):
        # shaded column, its tick in bold and named in the axis title: a label inside the plot would
        # sit on the bars, a two-line tick is turned on its side (and runs into the title) in a narrow column
        fig.add_vrect(x0=true_class - 0.5, x1=true_class + 0.5, fillcolor="rgba(0,0,0,0.07)", line_width=0)
        ticks[true_class] = f"<b>{names[true_class]}</b>"
        x_title = f"class (shaded: the true class, {names[true_class]})"
    # the legend (full model names, one per line when long) under the plot, never on the bars
    fig.update_layout(barmode="group", height=height + 20 * len(rows), yaxis=dict(title="probability (%)", range=[0, 100]),
                      xaxis=dict(title=x_title, type="category", tickvals=names, ticktext=ticks, tickangle=0),
                      legend=dict(orientation="h", y=-0.25, yanchor="top", x=0),
                      margin=dict(l=10, r=10, t=10, b=40))
    return fig


def unit_heatmap(z, x_labels, unit_names: list, *, x_title: str, colorbar: str, title: str = "",
                 zmin=None, zmax=None, diverging: bool = False, height: int | None = None,
                 annotate: bool = False) -> go.Figure:
    """A ``[X, U]`` matrix drawn with x = ``x_labels`` and y = units (LSTMs)."""
    m = np.asarray(z, dtype=float).T  # [U, X]
    if diverging:
        lim = float(np.nanmax(np.abs(m))) if np.isfinite(m).any() else 1.0
        lim = lim or 1.0
        kw = dict(colorscale="RdBu_r", zmid=0, zmin=-lim, zmax=lim)
    else:
        kw = dict(colorscale="Viridis", zmin=zmin, zmax=zmax)
    if annotate:
        kw.update(text=np.vectorize(lambda v: "" if np.isnan(v) else f"{v:.2f}")(m), texttemplate="%{text}",
                  textfont=dict(size=HEATMAP_TEXT_PX))
    fig = go.Figure(go.Heatmap(z=m, x=[str(v) for v in x_labels], y=list(unit_names), xgap=1, ygap=1,
                               colorbar=dict(title=colorbar, title_side="right"),
                               hovertemplate=x_title + " %{x}, %{y}: %{z:.3f}<extra></extra>", **kw))
    fig.update_yaxes(autorange="reversed", title="unit")
    fig.update_xaxes(title=x_title, type="category")
    fig.update_layout(height=height or max(220, 30 * len(unit_names) + 130), title=title or None,
                      margin=dict(l=10, r=10, t=40 if title else 10, b=40))
    return fig



def margin_histogram(margins: np.ndarray, k: int, images: int, model: str) -> go.Figure:
    """The selection margins of ``core.eval.selection.selection_report`` (finite ones, one per
    image row): attention weight of the k-th ranked LSTM minus the (k+1)-th."""
    fig = go.Figure(go.Histogram(x=margins, nbinsx=50, marker_color=method_color(model)))
    fig.update_layout(title=f"Selection margin over {images} images x rows", height=260,
                      xaxis_title=f"attention weight of LSTM ranked {k} − ranked {k + 1}",
                      yaxis_title="rows", margin=dict(l=10, r=10, t=40, b=10))
    return fig


def step_text(trace: dict, unit_names: list, schema: TraceSchema, t: int, T: int) -> str:
    """What one step of a trace did, in words, beside the step's figures (``schema``: the model's ``TraceSchema``)."""
    if schema.has(trace, "mask") and schema.has(trace, "input_attention"):
        act = schema.get(trace, "mask")[t - 1] > 0.5
        w = schema.get(trace, "input_attention")[t - 1]
        on = ", ".join(f"{unit_names[i]} ({w[i]:.2f})" for i in np.flatnonzero(act))
        off = ", ".join(f"{unit_names[i]} ({w[i]:.2f})" for i in np.flatnonzero(~act))
        return (f"**Step {t} of {T}** (image row {t}). Active: {on}. Inactive (state kept): {off}. "
                "Numbers: input-attention weight on the row.")
    vals = trace["activity"][t - 1]
    parts = ", ".join(f"{u} {v:.2f}" for u, v in zip(unit_names, vals))
    return f"**Step {t} of {T}** (image row {t}). {schema.activity_label}: {parts}."
