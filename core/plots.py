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
#
# Curves are lists of dicts ``{"model", "seed", "x", "y"}`` (one per run, raw values as
# stored: losses in nats, accuracies as fractions); ``curves_from_metadata`` builds them from
# a checkpoint's JSON. Errors come in as fractions and are drawn in percent.

import math  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import plotly.graph_objects as go  # noqa: E402
from plotly.subplots import make_subplots  # noqa: E402

ITERATION_AXIS = "training iteration (SGD steps, batch of 100)"
# metric -> (short name, axis title with unit, scale applied to stored values)
CURVE_METRICS = {
    "loss": ("training loss", "training loss (nats)", 1.0),  # cross-entropy
    "batch_acc": ("batch accuracy", "batch accuracy (%)", 100.0),  # on the training batch
    "test_acc": ("test accuracy", "test accuracy (%)", 100.0),  # periodic, on a fixed test subset
    "test_loss": ("test loss", "test loss (nats)", 1.0),
}
ERROR_METRICS = {
    "test_error": "clean test error (%)",
    "noisy_test_error": "noisy test error (%, Gaussian var 0.01)",
}
LOG_TICKS = ".2~g"  # log axes: "0.5, 1, 2, 5, 10" instead of plotly's bare digits "5, 1, 2, 5, 1"
INPUT_SHAPES = {"28x28 (MNIST, Fashion-MNIST)": 28, "32x32x3 (CIFAR-10, Animals-10)": 96}


def _axis_title(axis: str, log: bool) -> str:
    """``"training loss (nats)"`` -> ``"training loss (nats, log scale)"`` on a log axis."""
    if not log:
        return axis
    return axis[:-1] + ", log scale)" if axis.endswith(")") else axis + " (log scale)"


def _float_array(values) -> np.ndarray:
    """Floats with None / non-numbers as NaN (diverged losses are stored as null)."""
    out = []
    for v in values if values is not None else []:
        try:
            out.append(float(v))
        except (TypeError, ValueError):
            out.append(math.nan)
    return np.asarray(out, dtype=float)


def ema_smooth(values, weight: float) -> np.ndarray:
    """TensorBoard-style exponential moving average with bias correction.

    ``weight`` in [0, 1): 0 returns the values unchanged. NaN and infinite values are skipped
    (the average carries over) but stay NaN in the output, so a diverged stretch shows a gap.
    """
    y = _float_array(values)
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"smoothing weight must be in [0, 1), got {weight}")
    if weight == 0.0 or len(y) == 0:
        return y
    out = np.full_like(y, np.nan)
    acc, norm = 0.0, 0.0
    for i, v in enumerate(y):
        if not math.isfinite(v):
            continue
        acc = weight * acc + (1.0 - weight) * v
        norm = weight * norm + (1.0 - weight)
        out[i] = acc / norm
    return out


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
        x = _float_array(data["iteration"])
        for k in keys:
            ys = data.get(k)
            if isinstance(ys, list) and len(ys) == len(x) and len(x):
                out[k] = {"model": model, "seed": seed, "x": x, "y": _float_array(ys)}
    return out


def _mean_curve(curves: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """Mean over runs at each x that every run has (NaN where a run diverged is skipped)."""
    frames = [pd.Series(c["y"], index=c["x"]).groupby(level=0).last() for c in curves]
    df = pd.concat(frames, axis=1, join="inner")
    return df.index.to_numpy(dtype=float), df.mean(axis=1, skipna=True).to_numpy(dtype=float)


def _group_by_method(curves: list[dict]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for c in curves:
        groups.setdefault(c["model"], []).append(c)
    order = {m: i for i, m in enumerate(method_order())}
    return dict(sorted(groups.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))


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
        y = ema_smooth(c["y"], smoothing) * scale
        seed = c.get("seed")
        label = c.get("label") or (f"{name}, seed {seed}" if seed is not None else name)
        traces.append(go.Scatter(
            x=c["x"], y=y, mode="lines", name=label if not several else f"seed {seed}",
            line=dict(color=color, width=1 if several else 2), opacity=0.35 if several else 1.0,
            legendgroup=legendgroup, showlegend=showlegend and not several and i == 0,
            hovertemplate=f"{label}<br>iteration %{{x:.0f}}<br>%{{y:.4g}}<extra></extra>"))
    if several:
        x, y = _mean_curve([{"x": c["x"], "y": ema_smooth(c["y"], smoothing)} for c in runs])
        traces.append(go.Scatter(
            x=x, y=y * scale, mode="lines", name=f"{name} (mean of {len(runs)} seeds)",
            line=dict(color=color, width=2.5), legendgroup=legendgroup, showlegend=showlegend,
            hovertemplate=f"{name} mean<br>iteration %{{x:.0f}}<br>%{{y:.4g}}<extra></extra>"))
    return traces


def _empty_figure(message: str, height: int = 300) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.update_layout(height=height, margin=dict(l=20, r=20, t=40, b=20))
    return fig


def curves_overlay(curves: list[dict], metric: str = "loss", *, smoothing: float = 0.0,
                   log_y: bool = False, title: str | None = None, height: int = 420) -> go.Figure:
    """Every method's curve on one chart, one colour per method (seeds thin, mean bold)."""
    if metric not in CURVE_METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose one of {', '.join(CURVE_METRICS)}")
    short, axis, _ = CURVE_METRICS[metric]
    if not curves:
        return _empty_figure(f"No {short} curves to show.", height)
    fig = go.Figure()
    for method, runs in _group_by_method(curves).items():
        for tr in _method_traces(method, runs, metric, smoothing, showlegend=True):
            fig.add_trace(tr)
    suffix = f" (smoothed, EMA {smoothing:g})" if smoothing else ""
    fig.update_layout(title=title or f"{short.capitalize()}{suffix}", height=height,
                      legend=dict(orientation="h", yanchor="top", y=-0.26, x=0),
                      margin=dict(l=60, r=20, t=50, b=40), hovermode="closest")
    fig.update_xaxes(title_text=ITERATION_AXIS)
    fig.update_yaxes(title_text=_axis_title(axis, log_y), type="log" if log_y else "linear")
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
        return _empty_figure(f"No {short} curves to show.")
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
        fig.update_yaxes(title_text=_axis_title(axis, log_y), row=r, col=1)
    for c in range(1, cols + 1):
        fig.update_xaxes(title_text="iteration (SGD steps)", row=rows, col=c)
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
        return _empty_figure("This checkpoint stores no training history.")
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[CURVE_METRICS[m][0].capitalize() for m in panels],
                        horizontal_spacing=0.08)
    color = method_color(str(meta.get("model")))
    for i, m in enumerate(panels, 1):
        c = curves[m]
        _, axis, scale = CURVE_METRICS[m]
        fig.add_trace(go.Scatter(x=c["x"], y=c["y"] * scale, mode="lines+markers" if m == "test_acc" else "lines",
                                 line=dict(color=color, width=1.5), name=CURVE_METRICS[m][0], showlegend=False,
                                 hovertemplate="iteration %{x:.0f}<br>%{y:.4g}<extra></extra>"), row=1, col=i)
        fig.update_xaxes(title_text="iteration (SGD steps)", row=1, col=i)
        log = False
        if m == "loss":
            y = c["y"][np.isfinite(c["y"]) & (c["y"] > 0)]
            log = bool(len(y) and y.max() / y.min() > 100) if log_loss is None else log_loss
        fig.update_yaxes(title_text=_axis_title(axis, log), type="log" if log else "linear",
                         tickformat=LOG_TICKS if log else None, row=1, col=i)
    fig.update_layout(title=title or None, height=360, margin=dict(l=60, r=20, t=60 if title else 40, b=50))
    return fig


def _short_tick(name: str) -> str:
    """Tick label of a method: "RIM (paper's method)" -> "RIM", "Parallel LSTMs" -> two lines."""
    return method_title(name).split(" (")[0].replace(" ", "<br>")


def error_bar_figure(rows: list[dict], metric: str = "test_error", *, datasets: list[str] | None = None,
                     cols: int = 2, height_per_row: int = 330) -> go.Figure:
    """Final test error per method with its spread over seeds, one panel per data set.

    ``rows``: the ``runs`` list of a reproduction summary (fractions). Per method: one dot per
    seed (left) and the mean with a ±1 sd error bar (right). Diverged runs are left out of
    the mean and counted in the hover text. Panels wrap after ``cols`` data sets; each has
    its own y range (errors differ a lot between data sets).
    """
    if metric not in ERROR_METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose one of {', '.join(ERROR_METRICS)}")
    from .data import DATASETS

    present = [r["dataset"] for r in rows]
    order = list(DATASETS)
    datasets = datasets or sorted(set(present), key=lambda d: order.index(d) if d in order else len(order))
    usable = [r for r in rows if r.get("dataset") in datasets]
    if not usable:
        return _empty_figure("No finished runs to show.")
    methods = [m for m in method_order() if any(r["model"] == m for r in usable)]
    methods += sorted({r["model"] for r in usable} - set(methods))
    cols = max(1, min(cols, len(datasets)))
    nrows = math.ceil(len(datasets) / cols)
    fig = make_subplots(rows=nrows, cols=cols, horizontal_spacing=0.08, vertical_spacing=0.16,
                        subplot_titles=[DATASETS[d].title if d in DATASETS else d for d in datasets])
    rng = np.random.default_rng(0)
    for k, ds in enumerate(datasets):
        row, col = k // cols + 1, k % cols + 1
        for i, m in enumerate(methods):
            sel = [r for r in usable if r["dataset"] == ds and r["model"] == m]
            ok = [r for r in sel if r.get("status", "completed") == "completed" and r.get(metric) is not None
                  and math.isfinite(float(r[metric]))]
            diverged = len(sel) - len(ok)
            if not ok and not diverged:
                continue
            vals = np.asarray([float(r[metric]) * 100 for r in ok])
            seeds = [r.get("seed") for r in ok]
            color, name = method_color(m), method_title(m)
            fig.add_trace(go.Scatter(
                x=i - 0.12 + rng.uniform(-0.05, 0.05, len(vals)), y=vals, mode="markers",
                marker=dict(color=color, size=7, opacity=0.6, line=dict(width=0)), name=name,
                legendgroup=m, showlegend=False, customdata=seeds,
                hovertemplate=f"{name}<br>seed %{{customdata}}<br>%{{y:.2f}} %<extra></extra>"), row=row, col=col)
            mean = float(vals.mean()) if len(vals) else math.nan
            sd = float(vals.std(ddof=1)) if len(vals) > 1 else 0.0
            note = f"<br>{diverged} diverged run(s) left out" if diverged else ""
            fig.add_trace(go.Scatter(
                x=[i + 0.12], y=[mean], mode="markers", name=name, legendgroup=m, showlegend=k == 0,
                marker=dict(color=color, size=11, symbol="diamond", line=dict(color="black", width=0.5)),
                error_y=dict(type="data", array=[sd], visible=True, color=color, thickness=2, width=6),
                hovertemplate=(f"{name}<br>mean %{{y:.2f}} % ± {sd:.2f} (sd, {len(vals)} seeds){note}"
                               "<extra></extra>")), row=row, col=col)
        fig.update_xaxes(tickvals=list(range(len(methods))), ticktext=[_short_tick(m) for m in methods],
                         tickangle=0, range=[-0.6, len(methods) - 0.4], row=row, col=col)
    for r in range(1, nrows + 1):
        fig.update_yaxes(title_text=ERROR_METRICS[metric].replace(" (%", " (%, mean ± sd", 1), row=r, col=1)
    height = nrows * height_per_row + 110
    fig.update_layout(height=height,  # legend below the two-line method ticks of the last row
                      legend=dict(orientation="h", yanchor="top", y=-62 / (height - 120), x=0),
                      margin=dict(l=60, r=20, t=70, b=40),
                      title=f"Final {ERROR_METRICS[metric].split(' (')[0]}: dots = seeds, diamond = mean ± sd")
    return fig


def parameter_bar_figure(counts: dict[str, dict[str, int]], height: int = 380) -> go.Figure:
    """Trainable parameters per method, one bar group per input shape.

    ``counts``: input-shape label -> ``{model: parameters}`` (as from
    ``core.models.parameter_counts``). Bars take each method's colour; the second shape is
    hatched so the two stay apart.
    """
    fig = go.Figure()
    patterns = ["", "/", ".", "x"]
    for j, (label, per_model) in enumerate(counts.items()):
        methods = [m for m in method_order() if m in per_model] + sorted(set(per_model) - set(method_order()))
        fig.add_trace(go.Bar(
            x=[method_title(m).replace(" (", "<br>(") for m in methods], y=[per_model[m] for m in methods],
            name=f"input {label}",
            marker=dict(color=[method_color(m) for m in methods], pattern_shape=patterns[j % len(patterns)],
                        line=dict(color="black", width=0.5)),
            hovertemplate="%{x}<br>%{y:,} parameters<extra>" + label + "</extra>"))
    fig.update_layout(barmode="group", height=height, title="Trainable parameters per method",
                      legend=dict(orientation="h", yanchor="top", y=-0.28, x=0),
                      margin=dict(l=60, r=20, t=50, b=40))
    fig.update_xaxes(title_text="method", tickangle=0)
    fig.update_yaxes(title_text="trainable parameters (count)", rangemode="tozero")
    return fig


# Tables of a reproduction summary (``results/<schedule>/summary.json``), formatted for
# reading: errors in percent as "mean ± sd", gaps as "+d [lo, hi]" with the paper's number
# beside ours. The raw numbers stay in the summary's own lists (for CSV downloads).
_VERDICT_MARK = {"holds": "✅", "does not hold": "❌", "cannot tell": "❔"}


def _num(v) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return math.nan
    return f


def fmt_mean_sd(m, s=None, digits: int = 2) -> str:
    m, s = _num(m), _num(s)
    if math.isnan(m):
        return "n/a"
    return f"{m:.{digits}f}" if math.isnan(s) else f"{m:.{digits}f} ± {s:.{digits}f}"


def fmt_gap(d, lo=None, hi=None, digits: int = 2) -> str:
    d, lo, hi = _num(d), _num(lo), _num(hi)
    if math.isnan(d):
        return "n/a"
    if math.isnan(lo) or math.isnan(hi):
        return f"{d:+.{digits}f}"
    return f"{d:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]"


# the verdict as shown in a table cell: the legend above the tables says what each mark means
_VERDICT_SHORT = {"does not hold (the other method is better)": "does not hold",
                  "cannot tell at this number of seeds": "cannot tell",
                  "cannot tell (fewer than 2 seeds)": "cannot tell (< 2 seeds)"}


def fmt_verdict(v) -> str:
    v = str(v or "n/a")
    for key, mark in _VERDICT_MARK.items():
        if v.startswith(key):
            return f"{mark} {_VERDICT_SHORT.get(v, v)}"
    return v


def _ds_title(ds: str) -> str:
    from .data import DATASETS

    return DATASETS[ds].title if ds in DATASETS else str(ds)


def reproduction_tables(summary: dict) -> dict[str, pd.DataFrame]:
    """The three reproduction tables as display frames (strings), ours beside the paper's.

    table2: RIM vs parallel LSTMs; table3: RIM vs EntNet/RMC/IndRNN (runner-up);
    table4: Gaussian noise; fluctuation: training-loss jitter, parallel LSTMs vs RIM. Missing
    tables give empty frames.
    """
    tables = (summary or {}).get("tables") or {}
    t2 = [{
        "data set": _ds_title(r.get("dataset")),
        "RIM error (%)": fmt_mean_sd(r.get("rim_error"), r.get("rim_sd")),
        "parallel LSTMs error (%)": fmt_mean_sd(r.get("parallel_lstm_error"), r.get("parallel_lstm_sd")),
        "gap, ours (points) [95% CI]": fmt_gap(r.get("gap"), r.get("gap_ci_low"), r.get("gap_ci_high")),
        "gap, paper (points)": fmt_mean_sd(r.get("paper_gap")),
        "verdict": fmt_verdict(r.get("verdict")),
        "seeds": r.get("seeds"),
    } for r in tables.get("table2") or []]
    t3 = []
    for r in tables.get("table3") or []:
        paper_ru = r.get("paper_runner_up")
        row = {
            "data set": _ds_title(r.get("dataset")),
            "RIM error (%)": fmt_mean_sd(r.get("rim_error"), r.get("rim_sd")),
            "runner-up, ours": method_title(r.get("runner_up")) if r.get("runner_up") else "n/a",
            "gap to runner-up, ours (points) [95% CI]": fmt_gap(r.get("gap"), r.get("gap_ci_low"), r.get("gap_ci_high")),
            "gap, paper (points)": fmt_mean_sd(r.get("paper_gap")),
            "verdict": fmt_verdict(r.get("verdict")),
            "RIM lowest (means)": "yes" if r.get("rim_lowest") else "no",
            "runner-up, paper": method_title(paper_ru) if paper_ru else "not stated",
        }
        for b in ("entnet", "rmc", "indrnn"):
            cell = fmt_mean_sd(r.get(f"{b}_error"), r.get(f"{b}_sd"))
            if r.get(f"{b}_diverged"):
                cell += f" ({r[f'{b}_diverged']} diverged)"
            row[f"{method_title(b)} error (%)"] = cell
        t3.append(row)
    t4 = []
    for r in tables.get("table4") or []:
        row = {
            "data set": _ds_title(r.get("dataset")),
            "runner-up (noisy)": method_title(r.get("runner_up")) if r.get("runner_up") else "n/a",
            "growth gap, ours [95% CI]": fmt_gap(r.get("growth_gap"), r.get("growth_gap_ci_low"), r.get("growth_gap_ci_high")),
            "growth gap, paper": fmt_mean_sd(r.get("paper_growth_gap")),
            "verdict: RIM's error grows less": fmt_verdict(r.get("growth_verdict")),
            "noisy gap, ours [95% CI]": fmt_gap(r.get("noisy_gap"), r.get("noisy_gap_ci_low"), r.get("noisy_gap_ci_high")),
            "verdict: RIM lowest under noise": fmt_verdict(r.get("noisy_verdict")),
        }
        for m in ("rim", "parallel_lstm", "entnet", "rmc", "indrnn"):
            cell = fmt_mean_sd(r.get(f"{m}_noisy_error"), r.get(f"{m}_noisy_sd"))
            ch = _num(r.get(f"{m}_change"))
            if cell != "n/a" and not math.isnan(ch):
                cell += f" ({ch:+.2f})"
            row[f"{method_title(m).split(' (')[0]} noisy error (%) (change)"] = cell
        t4.append(row)
    tf = [{
        "data set": _ds_title(r.get("dataset")),
        "RIM": fmt_mean_sd(r.get("rim_abs"), r.get("rim_abs_sd"), 3),
        "parallel LSTMs": fmt_mean_sd(r.get("parallel_lstm_abs"), r.get("parallel_lstm_abs_sd"), 3),
        "gap [95% CI]": fmt_gap(r.get("gap_abs"), r.get("gap_abs_ci_low"), r.get("gap_abs_ci_high"), 3),
        "verdict": fmt_verdict(r.get("verdict_abs")),
        "RIM (relative)": fmt_mean_sd(r.get("rim_rel"), r.get("rim_rel_sd"), 3),
        "parallel LSTMs (relative)": fmt_mean_sd(r.get("parallel_lstm_rel"), r.get("parallel_lstm_rel_sd"), 3),
        "gap (relative) [95% CI]": fmt_gap(r.get("gap_rel"), r.get("gap_rel_ci_low"), r.get("gap_rel_ci_high"), 3),
        "verdict (relative)": fmt_verdict(r.get("verdict_rel")),
        "seeds": r.get("seeds"),
    } for r in tables.get("fluctuation") or []]
    ti = [{
        "data set": _ds_title(r.get("dataset")),
        "forget bias": f"{_num(r.get('forget_bias')):g}",
        "RIM error (%)": fmt_mean_sd(r.get("rim_error"), r.get("rim_sd")),
        "parallel LSTMs error (%)": fmt_mean_sd(r.get("parallel_lstm_error"), r.get("parallel_lstm_sd")),
        "gap (parallel − RIM) [95% CI]": fmt_gap(r.get("gap"), r.get("gap_ci_low"), r.get("gap_ci_high")),
        "verdict: RIM better": fmt_verdict(r.get("verdict")),
        "effect of forget bias 0 on RIM": fmt_gap(r.get("rim_fb_effect"), r.get("rim_fb_effect_ci_low"),
                                                  r.get("rim_fb_effect_ci_high")) if "rim_fb_effect" in r else "",
        "effect on parallel LSTMs": fmt_gap(r.get("parallel_lstm_fb_effect"), r.get("parallel_lstm_fb_effect_ci_low"),
                                            r.get("parallel_lstm_fb_effect_ci_high")) if "parallel_lstm_fb_effect" in r else "",
        "seeds": r.get("seeds"),
    } for r in tables.get("init_study") or []]
    ta = [{
        "data set": _ds_title(r.get("dataset")),
        "variant": r.get("variant"),
        "what it is": r.get("what"),
        "test error (%)": fmt_mean_sd(r.get("error"), r.get("sd")),
        "gap to RIM [95% CI]": fmt_gap(r.get("gap"), r.get("gap_ci_low"), r.get("gap_ci_high")) if "gap" in r else "reference",
        "verdict": r.get("verdict", ""),
        "noisy error (%)": fmt_mean_sd(r.get("noisy_error"), r.get("noisy_sd")),
        "growth gap [95% CI]": fmt_gap(r.get("growth_gap"), r.get("growth_gap_ci_low"), r.get("growth_gap_ci_high"))
        if "growth_gap" in r else "",
        "seeds": r.get("seeds"),
    } for r in tables.get("ablations") or []]
    return {"table2": pd.DataFrame(t2), "table3": pd.DataFrame(t3), "table4": pd.DataFrame(t4),
            "fluctuation": pd.DataFrame(tf), "init_study": pd.DataFrame(ti), "ablations": pd.DataFrame(ta)}


RUN_COLUMNS = {  # summary field -> column title (errors become percent)
    "dataset": "data set", "model": "model or variant", "seed": "seed", "status": "status",
    "test_error": "test error (%)", "noisy_test_error": "noisy test error (%)", "noise_draws": "noise draws",
    "iterations": "iterations", "train_time_s": "training time (s)", "parameters": "parameters",
    "loss_fluct": "loss fluctuation", "loss_fluct_rel": "loss fluctuation (relative)",
}


def runs_frame(summary: dict) -> pd.DataFrame:
    """The per-run rows of a summary with readable column titles; errors in percent."""
    rows = (summary or {}).get("runs") or []
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    for col in ("test_error", "noisy_test_error"):
        if col in df:
            df[col] = pd.to_numeric(df[col], errors="coerce") * 100
    if "dataset" in df:
        df["dataset"] = [_ds_title(d) for d in df["dataset"]]
    return df[[c for c in RUN_COLUMNS if c in df]].rename(columns=RUN_COLUMNS)




# --- per-timestep traces and robustness (Mechanisms, Robustness pages) ------------------
#
# Shapes follow the models' traces: a panel matrix is ``[T, U]`` (timestep x unit) and is
# drawn with x = image row / timestep (1-based, as the pages number rows) and y = unit.
# Errors come in as fractions and are drawn in percent.

import numpy as np  # noqa: E402,F811
import plotly.graph_objects as go  # noqa: E402,F811
from plotly.subplots import make_subplots  # noqa: E402,F811

MASK_COLORS = ("#EDEDED", METHOD_COLORS["rim"])  # inactive, active
CHANGE_COLORS = ("#EDEDED", "#000000")  # unchanged, changed
TIMESTEP_AXIS = "image row = timestep"


def _note(message: str, height: int = 240) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_layout(height=height, xaxis_visible=False, yaxis_visible=False, margin=dict(l=10, r=10, t=10, b=10))
    return fig


def _binary_scale(colors=MASK_COLORS) -> list:
    return [[0.0, colors[0]], [0.5, colors[0]], [0.5, colors[1]], [1.0, colors[1]]]


def image_figure(image, *, row: int | None = None, title: str = "", height: int = 300,
                 hover_units: str = "pixel value (0-255)") -> go.Figure:
    """An image as the model sees it (upright), optionally with row ``row`` (1-based) framed."""
    img = np.asarray(image)
    fig = go.Figure()
    if img.ndim == 3:
        fig.add_trace(go.Image(z=img.astype(np.uint8), x0=0, dx=1, y0=1, dy=1,
                               hovertemplate="row %{y}, column %{x}<br>RGB %{z}<extra></extra>"))
    else:
        fig.add_trace(go.Heatmap(z=img.astype(float), x=np.arange(img.shape[1]), y=np.arange(1, img.shape[0] + 1),
                                 colorscale="gray", zmin=0, zmax=255 if img.dtype == np.uint8 else 1,
                                 showscale=False,
                                 hovertemplate="row %{y}, column %{x}<br>" + hover_units + " %{z:.2f}<extra></extra>"))
        fig.update_yaxes(autorange="reversed")
    if row is not None:
        fig.add_shape(type="rect", x0=-0.5, x1=img.shape[1] - 0.5, y0=row - 0.5, y1=row + 0.5,
                      line=dict(color=METHOD_COLORS["rim"], width=2))
    fig.update_xaxes(showticklabels=False, title=None, constrain="domain")
    fig.update_yaxes(title="row", scaleanchor="x", constrain="domain")
    fig.update_layout(height=height, title=title or None, margin=dict(l=40, r=10, t=30 if title else 10, b=10))
    return fig


def trace_panels(trace: dict, unit_names: list, model_name: str, activity_label: str = "",
                 *, heads: bool = False) -> list[dict]:
    """The heatmap panels to draw for one model's trace (arrays ``[T, U]``, one image).

    RIM: the active mask and the head-averaged input-attention weight on the real row (and
    each head's weight when ``heads``). Other models: their ``activity`` under its label.
    """
    panels = []
    if model_name == "rim" and "active" in trace:
        panels.append({"title": "active mask (1 = active: updates and reads from the others)",
                       "z": np.asarray(trace["active"]), "units": unit_names, "binary": True,
                       "colorbar": "state", "ticktext": ("inactive", "active")})
        # weights often sit close together (e.g. 0.49-0.52): the colour range is fitted to the
        # values so the differences that decide the top k stay visible; the bar shows the numbers
        if "input_attention" in trace:
            w = np.asarray(trace["input_attention"])
            lo, hi = _fitted_range(w)
            panels.append({"title": "input attention w on the real row (mean over heads; null row gets 1 - w); "
                                    "colours fitted to this input",
                           "z": w, "units": unit_names, "zmin": lo, "zmax": hi, "colorbar": "weight w"})
        if heads and "input_attention_heads" in trace:
            h = np.asarray(trace["input_attention_heads"])  # [T, n, Hi]
            lo, hi = _fitted_range(h)
            for i in range(h.shape[-1]):
                panels.append({"title": f"input attention, head {i + 1}", "z": h[..., i], "units": unit_names,
                               "zmin": lo, "zmax": hi, "colorbar": "weight w"})
    else:
        z = np.asarray(trace["activity"])
        binary = bool(z.size) and bool(np.isin(z, (0.0, 1.0)).all())
        label = activity_label or "activity"
        panels.append({"title": label, "z": z, "units": unit_names, "binary": binary and model_name == "rim",
                       "colorbar": label, "zmin": float(np.nanmin(z)) if z.size else 0.0,
                       "zmax": float(np.nanmax(z)) if z.size else 1.0})
    return panels


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
            kw = dict(colorscale=_binary_scale(), zmin=0, zmax=1,
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


def comm_attention_figure(attn, unit_names: list, active=None, *, t: int | None = None,
                          height: int = 320) -> go.Figure:
    """Communication attention at one step: row = reader LSTM, column = LSTM read from.

    Rows of inactive LSTMs are left blank: they do not read (their state is kept).
    """
    a = np.asarray(attn, dtype=float).copy()
    n = a.shape[0]
    labels_y = list(unit_names)
    if active is not None:
        act = np.asarray(active) > 0.5
        a[~act] = np.nan
        labels_y = [f"{u} ({'reads' if act[i] else 'inactive'})" for i, u in enumerate(unit_names)]
    text = np.where(np.isnan(a), "", np.vectorize(lambda v: f"{v:.2f}")(np.nan_to_num(a)))
    fig = go.Figure(go.Heatmap(z=a, x=list(unit_names), y=labels_y, zmin=0, zmax=1, colorscale="Blues",
                               text=text, texttemplate="%{text}", xgap=1, ygap=1,
                               colorbar=dict(title="attention weight (row sums to 1)", title_side="right"),
                               hovertemplate="%{y} reads %{x}: %{z:.3f}<extra></extra>"))
    fig.update_yaxes(autorange="reversed", title="reader (query)")
    fig.update_xaxes(title="read from (key/value)", side="bottom")
    ttl = f"communication attention at row {t}" if t is not None else "communication attention"
    fig.update_layout(height=max(height, 40 * n + 120), title=ttl, margin=dict(l=10, r=10, t=40, b=40))
    return fig


def probability_figure(rows: list[dict], classes: list, *, true_class: int | None = None,
                       height: int = 320) -> go.Figure:
    """Grouped bars: class probabilities of several models for one input.

    ``rows``: ``{"label", "method", "probs" [C]}``; bars are coloured by ``method``.
    """
    if not rows:
        return _note("No model to show.")
    fig = go.Figure()
    names = [str(c) for c in classes]
    for r in rows:
        p = np.asarray(r["probs"], dtype=float)
        fig.add_trace(go.Bar(x=names, y=p * 100, name=r["label"], marker_color=method_color(r["method"]),
                             hovertemplate=r["label"] + "<br>%{x}: %{y:.1f}%<extra></extra>"))
    if true_class is not None and 0 <= true_class < len(names):
        fig.add_vrect(x0=true_class - 0.5, x1=true_class + 0.5, fillcolor="rgba(0,0,0,0.07)", line_width=0,
                      annotation_text="true class", annotation_position="top left")
    fig.update_layout(barmode="group", height=height, yaxis=dict(title="probability (%)", range=[0, 100]),
                      xaxis=dict(title="class", type="category"),
                      legend=dict(orientation="h", y=1.02, yanchor="bottom", x=0),
                      margin=dict(l=10, r=10, t=30, b=40))
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
        kw.update(text=np.vectorize(lambda v: "" if np.isnan(v) else f"{v:.2f}")(m), texttemplate="%{text}")
    fig = go.Figure(go.Heatmap(z=m, x=[str(v) for v in x_labels], y=list(unit_names), xgap=1, ygap=1,
                               colorbar=dict(title=colorbar, title_side="right"),
                               hovertemplate=x_title + " %{x}, %{y}: %{z:.3f}<extra></extra>", **kw))
    fig.update_yaxes(autorange="reversed", title="unit")
    fig.update_xaxes(title=x_title, type="category")
    fig.update_layout(height=height or max(220, 30 * len(unit_names) + 130), title=title or None,
                      margin=dict(l=10, r=10, t=40 if title else 10, b=40))
    return fig


def mask_shift_figure(clean, noisy, unit_names: list, *, t: int | None = None,
                      labels=("clean", "noisy")) -> go.Figure:
    """Active masks ``[T, U]`` for two inputs and the cells that changed, on one time axis."""
    a = np.asarray(clean, dtype=float)
    b = np.asarray(noisy, dtype=float)
    if a.shape != b.shape:
        return _note(f"The masks have different lengths ({a.shape[0]} vs {b.shape[0]} rows).")
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
        fig.add_trace(go.Heatmap(z=z.T, x=x, y=list(unit_names), zmin=0, zmax=1, colorscale=_binary_scale(colors),
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
                       y_title: str = "test error (%)", height: int = 380, band: bool = True) -> go.Figure:
    """Error (or another fraction) against a setting, one line per model coloured by method.

    ``curves``: ``{"label", "method", "x", "y"}`` plus optional ``"low"``/``"high"`` (95%
    interval, drawn as a band). Values are fractions and drawn in percent. NaN points (not
    computed yet) are left out.
    """
    fig = go.Figure()
    if not curves:
        return _note("No curve to show.")
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
                                         fillcolor=_rgba(color, 0.12), line=dict(width=0), hoverinfo="skip",
                                         showlegend=False, legendgroup=c["label"]))
        ok = np.isfinite(y)
        fig.add_trace(go.Scatter(x=x[ok], y=y[ok], mode="lines+markers", name=c["label"], legendgroup=c["label"],
                                 line=dict(color=color, width=2.5 if c["method"] == "rim" else 1.8),
                                 marker=dict(size=5),
                                 hovertemplate=c["label"] + "<br>" + x_title + " %{x}<br>%{y:.1f}%<extra></extra>"))
    if reference is not None:
        fig.add_vline(x=reference, line=dict(color="#777777", dash="dot"),
                      annotation_text=reference_label, annotation_position="top left")
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
    # inside the plot, right of the line: the reference line's label sits left of its line,
    # so the two never overlap when the current setting is the reference (the paper's 0.01)
    fig.add_annotation(x=x, xref="x", y=1, yref="paper", text=label, name="current", showarrow=False,
                       xanchor="left", yanchor="top", xshift=3, font=dict(size=11),
                       bgcolor="rgba(255,255,255,0.8)")
    return fig


def _rgba(hex_color: str, alpha: float) -> str:
    h = hex_color.lstrip("#")
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"
