"""Figure builders of core.report.plots (curves, errors over seeds, parameter counts, tables): pure
functions of data, checked for trace counts, colours per method and axis titles."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from core.report import fmt
from core.report.fmt import method_title
from core.report.frames import reproduction_tables, runs_frame
from core.report.plots.comparison import ERROR_METRICS, error_bar_figure
from core.report.plots.style import method_color, method_order
from core.report.plots.training import (
    CURVE_METRICS,
    curves_from_metadata,
    curves_overlay,
    curves_small_multiples,
    run_curves_figure,
)
from core.report.stats import ema_smooth


def curve(model, seed, n=50, start=2.3, metric_scale=1.0):
    x = np.arange(1, n + 1, dtype=float)
    return {"model": model, "seed": seed, "x": x, "y": (start * np.exp(-x / 20) + 0.01 * seed) * metric_scale}


def meta(model="rim", n=30, with_evals=True):
    m = {"model": model, "seed": 3,
         "history": {"iteration": list(range(1, n + 1)), "loss": [2.0 - 0.05 * i for i in range(n)],
                     "batch_acc": [0.1 + 0.02 * i for i in range(n)]}}
    if with_evals:
        m["evals"] = {"iteration": [10, 20, 30], "test_acc": [0.3, 0.5, 0.6], "test_loss": [1.5, 1.2, 1.0]}
    return m


def summary_rows():
    rows = []
    for ds, shift in (("mnist", 0.0), ("cifar10", 0.4)):
        for model, base in (("rim", 0.03), ("parallel_lstm", 0.04), ("rmc", 0.035)):
            for seed in range(3):
                rows.append({"dataset": ds, "model": model, "seed": seed, "status": "completed",
                             "test_error": base + shift + 0.001 * seed, "noisy_test_error": base + shift + 0.01})
    rows.append({"dataset": "mnist", "model": "indrnn", "seed": 0, "status": "diverged",
                 "test_error": None, "noisy_test_error": None})
    return rows


# --- smoothing and parsing -----------------------------------------------------------------------
def test_ema_zero_weight_is_identity_and_smoothing_reduces_variance():
    y = np.random.default_rng(0).normal(size=200)
    assert np.allclose(ema_smooth(y, 0.0), y)
    s = ema_smooth(y, 0.9)
    assert s.shape == y.shape and s[1:].std() < y.std()
    assert ema_smooth([5.0, 5.0, 5.0], 0.9) == pytest.approx([5.0, 5.0, 5.0])  # debiased: no pull towards 0


def test_ema_skips_nan_and_none_but_keeps_gaps():
    s = ema_smooth([1.0, None, float("nan"), float("inf"), 1.0], 0.5)
    assert s[0] == pytest.approx(1.0) and s[4] == pytest.approx(1.0)
    assert all(math.isnan(v) for v in s[1:4])
    with pytest.raises(ValueError):
        ema_smooth([1.0], 1.0)


def test_curves_from_metadata_reads_history_and_evals():
    c = curves_from_metadata(meta())
    assert set(c) == {"loss", "batch_acc", "test_acc", "test_loss"}
    assert c["loss"]["model"] == "rim" and c["loss"]["seed"] == 3 and len(c["loss"]["x"]) == 30
    assert list(c["test_acc"]["x"]) == [10, 20, 30]


def test_curves_from_metadata_ignores_missing_or_malformed_blocks():
    assert curves_from_metadata({"model": "rim"}) == {}
    bad = {"model": "rim", "history": {"iteration": [1, 2], "loss": [1.0]}, "evals": "nonsense"}
    assert curves_from_metadata(bad) == {}
    nulls = {"model": "rim", "history": {"iteration": [1, 2], "loss": [1.0, None]}}
    assert math.isnan(curves_from_metadata(nulls)["loss"]["y"][1])  # a diverged loss stored as null


# --- overlays and small multiples ------------------------------------------------------------------
def test_overlay_one_trace_per_single_seed_method_in_its_colour():
    curves = [curve(m, 0) for m in method_order()]
    fig = curves_overlay(curves, "loss")
    assert len(fig.data) == len(method_order())
    for tr, m in zip(fig.data, method_order()):  # registry order
        assert tr.line.color == method_color(m)
        assert method_title(m) in tr.name
    assert "iteration" in fig.layout.xaxis.title.text
    assert "nats" in fig.layout.yaxis.title.text


def test_overlay_several_seeds_thin_lines_plus_one_mean_in_legend():
    curves = [curve("rim", s) for s in range(3)] + [curve("parallel_lstm", s) for s in range(3)]
    fig = curves_overlay(curves, "loss", smoothing=0.5)
    assert len(fig.data) == 2 * (3 + 1)
    shown = [tr for tr in fig.data if tr.showlegend]
    assert [tr.name for tr in shown] == [f"{method_title('rim')} (mean of 3 seeds)",
                                         f"{method_title('parallel_lstm')} (mean of 3 seeds)"]
    assert {tr.line.color for tr in fig.data[:4]} == {method_color("rim")}
    mean = fig.data[3]
    expected = np.mean([ema_smooth(c["y"], 0.5) for c in curves[:3]], axis=0)
    assert np.allclose(mean.y, expected)
    assert "smoothed" in fig.layout.title.text


def test_long_curves_are_drawn_thinned_on_the_smoothed_curve():
    from core.report.plots.training import MAX_CURVE_POINTS

    n = 4000
    long = [{"model": "rim", "seed": s, "x": np.arange(1, n + 1), "y": np.random.default_rng(s).random(n) + 1}
            for s in range(2)]
    fig = curves_overlay(long, "loss", smoothing=0.6)
    for tr, c in zip(fig.data, long):
        assert len(tr.x) <= MAX_CURVE_POINTS and tr.x[0] == 1 and tr.x[-1] == n
        assert np.allclose(tr.y, ema_smooth(c["y"], 0.6)[np.asarray(tr.x) - 1])  # points of the smoothed curve
    mean = fig.data[-1]
    assert len(mean.x) <= MAX_CURVE_POINTS and mean.x[-1] == n


def test_overlay_accuracy_in_percent_with_log_option():
    fig = curves_overlay([curve("rim", 0, metric_scale=0.3)], "test_acc")
    assert fig.layout.yaxis.title.text == CURVE_METRICS["test_acc"][1]
    assert "%" in fig.layout.yaxis.title.text
    assert max(fig.data[0].y) == pytest.approx(100 * max(curve("rim", 0, metric_scale=0.3)["y"]))
    log = curves_overlay([curve("rim", 0)], "loss", log_y=True)
    assert log.layout.yaxis.type == "log" and "log" in log.layout.yaxis.title.text
    assert log.layout.yaxis.tickformat  # readable log ticks, not bare digits


def test_overlay_empty_and_unknown_metric():
    fig = curves_overlay([], "loss")
    assert len(fig.data) == 0 and fig.layout.annotations
    with pytest.raises(ValueError):
        curves_overlay([curve("rim", 0)], "accuracy")


def test_small_multiples_one_panel_per_method_shared_axes_titled():
    methods = ["rim", "parallel_lstm", "indrnn"]
    curves = [curve(m, s) for m in methods for s in range(2)]
    fig = curves_small_multiples(curves, "batch_acc")
    titles = [a.text for a in fig.layout.annotations]
    assert titles == [method_title(m) for m in methods]
    assert len(fig.data) == 3 * (2 + 1)
    # each method's traces sit in their own panel, in the method's colour
    axes = {}
    for tr in fig.data:
        axes.setdefault(tr.xaxis, set()).add(tr.line.color)
    assert sorted(map(sorted, axes.values())) == sorted([[method_color(m)] for m in methods])
    assert "%" in fig.layout.yaxis.title.text
    # one x-axis title, under the middle panel (one under each ran into the next)
    assert [bool(fig.layout[f"xaxis{'' if i == 1 else i}"].title.text) for i in range(1, 4)] == [False, True, False]


def test_small_multiples_wraps_rows_and_log():
    curves = [curve(m, 0) for m in method_order()]
    fig = curves_small_multiples(curves, "loss", cols=2, log_y=True)
    assert len(fig.data) == 5 and fig.layout.height >= 3 * 250
    assert fig.layout.yaxis.type == "log"


def test_run_curves_figure_three_panels_and_auto_log_for_blown_up_loss():
    fig = run_curves_figure(meta("entnet"), title="x")
    assert len(fig.data) == 3
    assert {tr.line.color for tr in fig.data} == {method_color("entnet")}
    assert fig.layout.yaxis.type == "linear"
    assert "nats" in fig.layout.yaxis.title.text and "%" in fig.layout.yaxis2.title.text
    assert "%" in fig.layout.yaxis3.title.text
    blown = meta()
    blown["history"]["loss"][5] = 1e15
    assert run_curves_figure(blown).layout.yaxis.type == "log"
    assert len(run_curves_figure(meta(with_evals=False)).data) == 2
    assert len(run_curves_figure({"model": "rim"}).data) == 0


# --- errors over seeds --------------------------------------------------------------------------------
def panel_titles(fig) -> list[str]:
    """The subplot titles (the floor lines' labels are annotations too)."""
    return [a.text for a in fig.layout.annotations if not a.text.startswith(("chance", "majority", "floors above"))]


def test_error_bars_zoom_to_the_data_and_name_the_floors_above_it():
    rows = [r for r in summary_rows() if r["dataset"] == "mnist" and r.get("test_error") is not None]
    fig = error_bar_figure(rows)
    lo, hi = fig.layout.yaxis.range
    vals = [100 * r["test_error"] for r in rows]
    assert lo <= min(vals) and max(vals) <= hi < 20  # not a 0-90 % axis
    assert any(a.text.startswith("floors above the axis: chance 90.00 %") for a in fig.layout.annotations)
    assert fig.layout.xaxis.zeroline is False  # no stray vertical line at the first method


def floor_lines(fig) -> list[tuple[float, str]]:
    """(y, label) of every dashed floor line, in the order drawn."""
    ys = [s.y0 for s in fig.layout.shapes if s.line.dash == "dash"]
    labels = [a.text for a in fig.layout.annotations if a.text.startswith(("chance", "majority"))]
    return list(zip(ys, labels, strict=True))


def test_error_bars_draw_the_floors_of_each_test_set():
    from core.report.floors import floors

    rows = [dict(r, dataset="animals10") for r in summary_rows() if r["dataset"] == "mnist"] + \
        [r for r in summary_rows() if r["dataset"] == "cifar10"]
    fig = error_bar_figure(rows)
    major = 100 * floors("animals10")["majority_error"]
    assert panel_titles(fig) == ["CIFAR-10", "Animals-10"]
    assert floor_lines(fig) == [(pytest.approx(90.0), "chance = majority class 90.0 %"),  # CIFAR-10: balanced
                                (pytest.approx(90.0), "chance 90.0 %"),
                                (pytest.approx(major), f"majority class {major:.2f} %")]
    assert "dashed = chance / majority class" in fig.layout.title.text
    assert floor_lines(error_bar_figure(rows, floors=False)) == []


def test_floors_closer_than_their_labels_share_one_label():
    """MNIST's chance 90.0 % and majority class 88.65 %: two labels 1.35 points apart overlapped."""
    import plotly.graph_objects as go

    from core.report.plots.style import add_floor_lines

    fig = add_floor_lines(go.Figure(), {"chance_error": 0.9, "majority_error": 0.8865}, of=" of these 500 images")
    assert [s.y0 for s in fig.layout.shapes] == [pytest.approx(90.0), pytest.approx(88.65)]
    assert [a.text for a in fig.layout.annotations] == ["chance 90.0 % · majority class of these 500 images 88.65 %"]
    apart = add_floor_lines(go.Figure(), {"chance_error": 0.9, "majority_error": 0.8231})
    assert [a.text for a in apart.layout.annotations] == ["chance 90.0 %", "majority class 82.31 %"]


def test_error_bars_leave_unhealthy_runs_out_of_the_mean_and_mark_them():
    rows = [r for r in summary_rows() if r["dataset"] == "mnist" and r["model"] == "rim"]
    for r in rows:
        r["health"] = "healthy"
    rows[2].update(health="collapsed", test_error=0.9)
    fig = error_bar_figure(rows)
    mean = next(tr for tr in fig.data if tr.error_y.array is not None)
    assert mean.y[0] == pytest.approx(100 * (0.03 + 0.031) / 2)
    assert "1 unhealthy run(s) left out" in mean.hovertemplate
    crosses = [tr for tr in fig.data if tr.marker.symbol == "x-thin-open"]
    assert len(crosses) == 1 and list(crosses[0].y) == [pytest.approx(90.0)]
    with_all = next(tr for tr in error_bar_figure(rows, include_unhealthy=True).data if tr.error_y.array is not None)
    assert with_all.y[0] == pytest.approx(100 * (0.03 + 0.031 + 0.9) / 3)


def test_error_bars_two_traces_per_method_and_panel_with_sd():
    rows = summary_rows()
    fig = error_bar_figure(rows, "test_error")
    # 2 data sets x 3 completed methods x (seed dots + mean) + indrnn (diverged only: its mean) on MNIST
    assert len(fig.data) == 2 * 3 * 2 + 1
    means = [tr for tr in fig.data if tr.error_y and tr.error_y.array is not None]
    rim_mnist = next(tr for tr in means if tr.name == method_title("rim"))
    vals = [100 * (0.03 + 0.001 * s) for s in range(3)]
    assert rim_mnist.y[0] == pytest.approx(np.mean(vals))
    assert rim_mnist.error_y.array[0] == pytest.approx(np.std(vals, ddof=1))
    for tr in fig.data:
        m = next(m for m in method_order() if method_title(m) == tr.name)
        assert tr.marker.color == method_color(m)
    assert panel_titles(fig) == ["MNIST", "CIFAR-10"]
    assert "%" in fig.layout.yaxis.title.text and "sd" in fig.layout.yaxis.title.text
    legend = [tr.name for tr in fig.data if tr.showlegend]
    assert len(legend) == len(set(legend)) == 4  # one legend entry per method
    div = next(tr for tr in fig.data if tr.name == method_title("indrnn") and tr.error_y.array is not None)
    assert "diverged" in div.hovertemplate


def test_error_bars_wrap_into_rows_with_short_ticks():
    rows = [dict(r, dataset=ds) for ds in ("mnist", "fashion_mnist", "cifar10") for r in summary_rows()
            if r["dataset"] == "mnist"]
    fig = error_bar_figure(rows, cols=2)
    assert panel_titles(fig) == ["MNIST", "Fashion-MNIST", "CIFAR-10"]
    assert fig.layout.yaxis3.title.text  # first panel of the second row is labelled too
    assert list(fig.layout.xaxis.ticktext)[:2] == ["RIM", "Parallel<br>LSTMs"]


def test_error_bars_noisy_metric_and_dataset_filter():
    fig = error_bar_figure(summary_rows(), "noisy_test_error", datasets=["cifar10"])
    assert panel_titles(fig) == ["CIFAR-10"]
    assert len(fig.data) == 3 * 2
    assert fig.layout.yaxis.title.text.startswith("noisy test error (%")
    assert "Gaussian" in ERROR_METRICS["noisy_test_error"]
    assert len(error_bar_figure([], "test_error").data) == 0
    with pytest.raises(ValueError):
        error_bar_figure(summary_rows(), "error")


# --- bars in table cells -------------------------------------------------------------------------
def test_bar_css_fills_the_share_of_the_cell_in_the_methods_colour():
    from core.report.plots.style import bar_css

    assert bar_css(50, 200, "#D55E00") == ("background: linear-gradient(90deg, #D55E0055 25.0%, "
                                           "transparent 25.0%)")
    assert "100.0%" in bar_css(300, 200, "#000000") and " 0.0%" in bar_css(-1, 200, "#000000")
    assert bar_css(None, 200, "#000000") == bar_css(5, 0, "#000000") == bar_css(float("nan"), 1, "#000000") == ""


# --- tables ---------------------------------------------------------------------------------------------
def test_formatters():
    assert fmt.mean_sd_text(1.234, 0.5) == "1.23 ± 0.50"
    assert fmt.mean_sd_text(1.234, None) == "1.23" and fmt.mean_sd_text(None) == "n/a"
    assert fmt.gap(0.5, -0.1, 1.1) == "+0.50 [-0.10, +1.10]" and fmt.gap(0.5) == "+0.50"
    assert fmt.marked_verdict("holds").startswith("✅")
    assert fmt.marked_verdict("does not hold (the other method is better)").startswith("❌")
    assert fmt.marked_verdict("cannot tell at this number of seeds").startswith("❔")


def test_reproduction_tables_from_write_tables(tmp_path):
    import json

    from core.grid.cells import run_path
    from core.report.tables import write_tables

    rng = np.random.default_rng(0)
    for model, base in (("rim", 0.02), ("parallel_lstm", 0.05), ("entnet", 0.06), ("rmc", 0.03), ("indrnn", 0.07)):
        for seed in range(3):
            p = run_path(tmp_path, "mnist", model, seed)
            p.parent.mkdir(parents=True, exist_ok=True)
            err = base + rng.normal(0, 0.001)
            loss = (1.0 + rng.normal(0, 0.3 if model == "parallel_lstm" else 0.1, 200)).tolist()
            loss[0] = 2.5  # a healthy run: its last batch loss is below the first
            p.write_text(json.dumps({"dataset": "mnist", "model": model, "seed": seed, "status": "completed",
                                     "metrics": {"test_error": err, "noisy_test_error": err + 0.01},
                                     "train_config": {"iterations": 200}, "history": {"loss": loss}}))
    write_tables(tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    t = reproduction_tables(summary)
    assert set(t) == {"table2", "table3", "table4", "fluctuation", "init_study", "ablations", "controls", "claims"}
    assert t["table2"].loc[0, "RIM error (%)"].endswith("(3 of 3 healthy)")
    assert t["table2"].loc[0, "floors: chance / majority (%)"] == "90.00 / 88.65"
    assert t["table2"].loc[0, "p raw / Holm"].startswith("p ")
    tf = t["fluctuation"]
    assert tf.loc[0, "verdict"].startswith("✅") and tf.loc[0, "seeds"] == 3  # loss sd 0.3 vs 0.1
    assert float(tf.loc[0, "RIM"].split(" ± ")[0]) == pytest.approx(0.1, rel=0.2)
    assert float(tf.loc[0, "parallel LSTMs"].split(" ± ")[0]) == pytest.approx(0.3, rel=0.2)
    t2, t3, t4 = t["table2"], t["table3"], t["table4"]
    assert list(t2["data set"]) == ["MNIST"]
    assert t2.loc[0, "gap, paper (points)"] == "0.35"
    assert t2.loc[0, "verdict"].startswith("✅")  # RIM 3 points better with sd 0.1: holds
    assert "±" in t2.loc[0, "RIM error (%)"]
    assert t3.loc[0, "runner-up, paper"] == "RMC"
    assert t3.loc[0, "lowest-mean baseline (chosen after seeing the data)"] == "RMC"
    assert t3.loc[0, "RIM lowest (means)"] == "yes"
    assert "verdict: RIM's error grows less than RMC's" in t4.columns and t4.loc[0, "growth gap, paper"] == "0.35"
    runs = runs_frame(summary)
    assert len(runs) == 15 and "test error (%)" in runs and "test_error" not in runs
    raw = [r["test_error"] for r in summary["runs"]]
    assert list(runs["test error (%)"]) == pytest.approx([100 * e for e in raw])  # percent, not fractions
    assert set(runs["data set"]) == {"MNIST"}


def test_reproduction_tables_empty_summary():
    t = reproduction_tables({})
    assert all(isinstance(df, pd.DataFrame) and df.empty for df in t.values())
    assert runs_frame({}).empty


def test_probability_figure_names_the_true_class_in_the_axis_title_not_a_two_line_tick():
    from core.report.plots.traces import probability_figure

    rows = [{"label": "RIM", "method": "rim", "probs": [0.1] * 10}]
    fig = probability_figure(rows, list(range(10)), true_class=5)
    ticks = list(fig.layout.xaxis.ticktext)
    assert ticks[5] == "<b>5</b>" and not any("<br>" in t for t in ticks)  # one line: never turned on its side
    assert fig.layout.xaxis.tickangle == 0
    assert "true class, 5" in fig.layout.xaxis.title.text
    assert probability_figure(rows, list(range(10))).layout.xaxis.title.text == "class"


def test_mean_curve_is_the_mean_at_every_shared_iteration():
    """The mean line over seeds: at the iterations every run has, the last non-NaN value a run
    logged there (a resumed run repeats some), NaN of a diverged run skipped, NaN where every run
    is NaN; checked against the same mean computed with pandas."""
    from core.report.plots.training import _mean_curve

    rng = np.random.default_rng(0)
    curves = []
    for k in range(4):
        x = np.concatenate([np.arange(0, 300, 3), np.arange(150 + k * 3, 400, 3)])  # a resume repeats 150+
        y = rng.normal(size=len(x))
        y[rng.integers(0, len(x), 10)] = np.nan
        curves.append({"x": x[: len(x) - k * 5], "y": y[: len(x) - k * 5]})
    curves[0]["y"][curves[0]["x"] == 30] = np.nan
    for c in curves[1:]:
        c["y"][c["x"] == 30] = np.nan  # every run NaN at 30
    x, m = _mean_curve(curves)
    frames = [pd.Series(c["y"], index=c["x"]).groupby(level=0).last() for c in curves]  # last non-NaN
    ref = pd.concat(frames, axis=1, join="inner")
    assert np.array_equal(x, ref.index.to_numpy(dtype=float)) and np.all(np.diff(x) > 0)
    np.testing.assert_allclose(m, ref.mean(axis=1, skipna=True).to_numpy(dtype=float), equal_nan=True)
    assert math.isnan(m[x.tolist().index(30.0)])


def test_first_figure_loads_plotlys_checks_in_a_fresh_process():
    """``python app.py`` builds one throw-away figure before the server answers: in a fresh process
    it builds and serialises, and leaves plotly's checks (validators) of the heatmap, scatter and
    bar traces and of the layout loaded."""
    import subprocess
    import sys

    code = ("from plotly.validator_cache import ValidatorCache as V; from core.report.plots.style import first_figure; "
            "before = set(V._cache); first_figure(); new = {p for p, _ in set(V._cache) - before}; "
            "print(all(k in new for k in ('heatmap', 'scatter', 'bar', 'layout', 'layout.xaxis', 'layout.annotation')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True", out.stdout


def test_small_multiples_have_one_x_axis_title():
    """Five panels side by side: one title under each ran into the next."""
    fig = curves_small_multiples([curve(m, 0) for m in ("rim", "parallel_lstm", "entnet", "rmc", "indrnn")], "loss")
    titles = [fig.layout[f"xaxis{'' if i == 1 else i}"].title.text for i in range(1, 6)]
    assert titles == [None, None, "iteration (optimiser steps)", None, None]


def test_the_runs_table_gives_each_runs_budget_and_the_iterations_it_trained():
    """Early stopping ends most long-grid runs before their budget: the Runs tab shows both."""
    import json

    from core.paths import ROOT

    summary = json.loads((ROOT / "results" / "long" / "summary.json").read_text())
    runs = runs_frame(summary)
    assert {"budget (iterations)", "iterations trained"} <= set(runs.columns)
    assert (runs["iterations trained"] <= runs["budget (iterations)"]).all()
    assert (runs["iterations trained"] < runs["budget (iterations)"]).any()
