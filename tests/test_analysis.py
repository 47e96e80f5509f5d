"""core.eval.robustness_points (activation statistics, noisy / stretched error, activation changes) and the
figure builders of the Mechanisms and Robustness pages in core.report.plots.

Models are tiny and freshly built (never trained); images are synthetic.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest
import torch

from core import intervals
from core.eval import robustness_points
from core.eval.predict import trace_one
from core.eval.scorer import Scorer
from core.models.registry import build_model, get_spec, list_models
from core.report.plots import robustness, style, traces


@pytest.fixture(scope="module")
def rim():
    torch.manual_seed(0)
    return build_model("rim", input_dim=28, hidden_size=8, embed_dim=16)


@pytest.fixture(scope="module")
def plstm():
    torch.manual_seed(0)
    return build_model("parallel_lstm", input_dim=28, hidden_size=8)


@pytest.fixture(scope="module")
def images():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (60, 28, 28), dtype=np.uint8)
    y = np.arange(60) % 10
    return x, y


# --------------------------------------------------------------------------- basics


def test_fixed_subset_is_seeded_sorted_and_bounded():
    a = robustness_points.fixed_subset(1000, 500, seed=0)
    assert len(a) == 500 and len(np.unique(a)) == 500
    assert np.all(np.diff(a) > 0) and a.min() >= 0 and a.max() < 1000
    np.testing.assert_array_equal(a, robustness_points.fixed_subset(1000, 500, seed=0))
    assert not np.array_equal(a, robustness_points.fixed_subset(1000, 500, seed=1))
    np.testing.assert_array_equal(robustness_points.fixed_subset(300, 500), np.arange(300))
    assert len(robustness_points.fixed_subset(0, 10)) == 0
    with pytest.raises(ValueError):
        robustness_points.fixed_subset(-1, 3)


def test_run_batched_matches_unbatched_and_restores_mode(rim, images):
    x, _ = images
    rim.train()
    p_small, act = robustness_points.run_batched(rim, x, with_activity=True, batch_size=7)
    assert rim.training  # mode restored
    rim.eval()
    p_big, _ = robustness_points.run_batched(rim, x, batch_size=1000)
    np.testing.assert_allclose(p_small, p_big, atol=1e-5)
    np.testing.assert_allclose(p_small.sum(1), 1, atol=1e-5)
    assert act.shape == (60, 28, 6)
    assert set(np.unique(act)) <= {0.0, 1.0}
    np.testing.assert_array_equal(act.sum(-1), 4)  # k = 4 of n = 6 active at every step
    with pytest.raises(ValueError):
        robustness_points.run_batched(rim, x[:0])


def test_error_interval_wilson():
    lo, hi = robustness_points.error_interval(0, 100)
    assert lo == 0 and 0 < hi < 0.05
    lo, hi = robustness_points.error_interval(50, 100)
    assert lo < 0.5 < hi and hi - lo == pytest.approx(0.19, abs=0.01)
    assert all(np.isnan(robustness_points.error_interval(0, 0)))


# the hand-written formulas these replaced (z = 1.96, t quantile from scipy.stats.t): the
# scipy.stats results must agree within rounding (the Wilson z is 1.959964 there)
WILSON_KNOWN = {(50, 100): (0.40382983, 0.59617017), (3, 40): (0.02583556, 0.19864530),
                (0, 500): (0.0, 0.00762462), (37, 500): (0.05416087, 0.10033530)}
WELCH_KNOWN = [(([1.2, 0.8, 1.5], [2.1, 2.9, 2.4, 2.2]), (-1.23333333, -1.95111604, -0.51555063)),
               (([3.1, 3.4, 2.9], [3.0, 3.05, 2.95]), (0.13333333, -0.46143454, 0.72810121))]


@pytest.mark.parametrize("kn", list(WILSON_KNOWN))
def test_wilson_interval_matches_the_old_formula(kn):

    assert intervals.wilson_interval(*kn) == pytest.approx(WILSON_KNOWN[kn], abs=1e-5)
    assert robustness_points.error_interval(*kn) == intervals.wilson_interval(*kn)


@pytest.mark.parametrize("ab,known", WELCH_KNOWN)
def test_welch_interval_matches_the_old_formula(ab, known):
    from core.report import stats

    assert stats.welch_test(*ab)[:3] == pytest.approx(known, abs=1e-7)
    d, lo, hi, _ = stats.welch_test([1.0, 1.0], [0.5, 0.5])  # no spread: the difference is exact
    assert (d, lo, hi) == (0.5, 0.5, 0.5)
    assert all(np.isnan(stats.welch_test([1.0], [0.5, 0.7])[1:3]))


def test_misclassified_most_confident_first():
    probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.4, 0.6], [0.7, 0.3]])
    labels = np.array([0, 0, 0, 1])
    np.testing.assert_array_equal(robustness_points.misclassified(probs, labels), [1, 3, 2])
    assert len(robustness_points.misclassified(probs, probs.argmax(1))) == 0


# --------------------------------------------------------------------------- mechanisms


def test_activation_stats_against_a_direct_computation(rim, images):
    x, y = images
    stats = robustness_points.activation_stats(rim, x, y, num_classes=10)
    _, act = robustness_points.run_batched(rim, x, with_activity=True)
    assert stats.by_class_row.shape == (10, 28, 6)
    np.testing.assert_allclose(stats.by_class_row[3], act[y == 3].mean(0), atol=1e-6)
    np.testing.assert_allclose(stats.by_row, act.mean(0), atol=1e-6)
    np.testing.assert_allclose(stats.by_class[3], act[y == 3].mean((0, 1)), atol=1e-6)
    np.testing.assert_allclose(stats.overall.sum(), 4, atol=1e-6)  # 4 active of 6 on average
    np.testing.assert_array_equal(stats.counts, np.bincount(y, minlength=10))
    assert stats.unit_names == [f"LSTM {i}" for i in range(1, 7)]
    dev = stats.class_deviation()
    assert dev.shape == (10, 6)
    prefs = stats.preferences([str(c) for c in range(10)])
    assert len(prefs) == 6 and all(p["spread"] >= 0 for p in prefs)
    assert all(p["most_value"] >= p["least_value"] for p in prefs)


def test_activation_stats_deterministic_and_missing_classes_are_nan(rim, images):
    x, y = images
    keep = y < 5
    a = robustness_points.activation_stats(rim, x[keep], y[keep], num_classes=10)
    b = robustness_points.activation_stats(rim, x[keep], y[keep], num_classes=10)
    np.testing.assert_array_equal(a.by_class_row, b.by_class_row)
    assert np.isnan(a.by_class_row[7]).all() and a.counts[7] == 0
    assert np.isfinite(a.by_row).all()
    assert {p["most"] for p in a.preferences([str(c) for c in range(10)])} <= {"0", "1", "2", "3", "4"}


def test_activation_stats_for_a_baseline_uses_its_activity(plstm, images):
    x, y = images
    stats = robustness_points.activation_stats(plstm, x, y, num_classes=10)
    assert stats.by_class_row.shape == (10, 28, 4)
    assert (stats.by_row >= 0).all()  # hidden-state norms


# --------------------------------------------------------------------------- robustness


def test_noisy_eval_zero_is_clean_and_noise_is_shared(rim, plstm, images):
    x, y = images
    clean = robustness_points.noisy_eval(rim, x, y, "gaussian", 0.0)
    probs, _ = robustness_points.run_batched(rim, x)
    assert clean.error == pytest.approx(float((probs.argmax(1) != y).mean()))
    assert clean.n == 60 and clean.activity is None
    a = robustness_points.noisy_eval(rim, x, y, "gaussian", 0.1, seed=3, with_activity=True)
    b = robustness_points.noisy_eval(rim, x, y, "gaussian", 0.1, seed=3, with_activity=True)
    np.testing.assert_array_equal(a.predictions, b.predictions)  # deterministic
    assert a.activity.shape == (60, 28, 6) and a.activity.dtype == np.float16
    lo, hi = a.interval
    assert lo <= a.error <= hi
    for mode in ("salt_pepper", "speckle", "poisson"):
        p = robustness_points.noisy_eval(plstm, x, y, mode, 0.05)
        assert 0 <= p.error <= 1 and 0 <= p.true_prob <= 1


def test_stretch_eval_changes_the_sequence_length(rim, images):
    x, y = images
    same = robustness_points.stretch_eval(rim, x, y, 1.0)
    base = robustness_points.noisy_eval(rim, x, y, "gaussian", 0.0)
    np.testing.assert_array_equal(same.predictions, base.predictions)
    half = robustness_points.stretch_eval(rim, x, y, 0.5, with_activity=True)
    assert half.activity.shape == (60, 14, 6)
    double = robustness_points.stretch_eval(rim, x, y, 2.0, with_activity=True)
    assert double.activity.shape == (60, 56, 6)


def test_activation_change():
    a = np.zeros((4, 3))
    b = a.copy()
    b[1, 2] = 1
    b[3, 0] = 1
    ch = robustness_points.activation_change(a, b)
    assert ch.fraction == pytest.approx(2 / 12)
    np.testing.assert_allclose(ch.per_row, [0, 1 / 3, 0, 1 / 3])
    np.testing.assert_allclose(ch.per_unit, [1 / 4, 0, 1 / 4])
    batch = robustness_points.activation_change(np.stack([a, a]), np.stack([a, b]))
    assert batch.fraction == pytest.approx(1 / 12) and batch.changed.shape == (2, 4, 3)
    assert robustness_points.activation_change(a, a).fraction == 0
    with pytest.raises(ValueError):
        robustness_points.activation_change(a, np.zeros((5, 3)))


def _entry(tmp_path, model: str, source: str = "trained"):
    from core.catalog import ModelEntry

    return ModelEntry(f"{source}:{model}", "mnist", model, source, tmp_path / model)


def test_scorer_curves_flips_and_its_point_functions(rim, plstm, images, tmp_path):
    x, y = images
    calls = []

    def noise_fn(ident, model, images, labels, kind, strength, with_activity, seed):
        calls.append((ident, kind, strength, with_activity))
        return robustness_points.noisy_eval(model, images, labels, kind, strength, seed, with_activity=with_activity)

    models = {"rim": (_entry(tmp_path, "rim"), rim), "parallel_lstm": (_entry(tmp_path, "parallel_lstm"), plstm)}
    scorer = Scorer("k", x[:20], y[:20], models, noise_fn=noise_fn)
    curve = scorer.noise_curve("rim", "gaussian", [0.0, 0.05, 0.2], flips=True)
    assert curve.error.shape == (3,) and (curve.low <= curve.error).all() and (curve.error <= curve.high).all()
    assert curve.flips[0] == 0 and curve.flips[2] > 0
    assert (("trained:rim", 0.0, "k"), "gaussian", 0.2, True) in calls  # the binary mask's model keeps its activity
    # the identity a page's cache keys on: the model's key, its weights' time, the data subset
    assert scorer.ident("parallel_lstm") == ("trained:parallel_lstm", 0.0, "k")
    assert scorer.noise_curve("parallel_lstm", "gaussian", [0.0, 0.1], flips=True).flips is None
    assert (("trained:parallel_lstm", 0.0, "k"), "gaussian", 0.1, False) in calls
    s = scorer.stretch_curve("rim", [0.5, 1.0])
    assert s.flips is None and s.x.tolist() == [0.5, 1.0]
    assert scorer.signature("stretch")[2][0] == ("rim", "trained:rim", 0.0)


def test_scorer_takes_shipped_points_of_pretrained_weights_only(rim, images, tmp_path):
    from core.eval import curves

    x, y = images
    sub = curves.subset_hash(x[:10], y[:10])
    shipped = curves.ShippedCurves({curves.point_key("w", sub, "gaussian", 0.05): [0.125, 10]})
    pre = {"rim": (_entry(tmp_path, "rim", "pretrained"), rim)}
    scorer = Scorer("k", x[:10], y[:10], pre, shipped=shipped, weights_hash=lambda path, mtime: "w")
    assert scorer.curve_noise("rim", "gaussian", 0.05).error == 0.125  # from the file, not computed
    assert scorer.curve_noise("rim", "gaussian", 0.1).n == 10  # not shipped: computed
    assert scorer.noise("rim", "gaussian", 0.05).predictions.shape == (10,)  # noise() always computes
    own = Scorer("k", x[:10], y[:10], {"rim": (_entry(tmp_path, "rim"), rim)}, shipped=shipped,
                          weights_hash=lambda path, mtime: "w")
    assert own.curve_noise("rim", "gaussian", 0.05).predictions.shape == (10,)  # a user's model: computed
    assert robustness_points.is_binary_mask(np.array([[0.0, 1.0]])) and not robustness_points.is_binary_mask(np.array([0.5]))


# --------------------------------------------------------------------------- figures


def _heatmaps(fig):
    return [t for t in fig.data if isinstance(t, go.Heatmap)]


@pytest.mark.parametrize("name", list_models())
def test_trace_schema_names_what_the_model_traces(name, images):
    """Every trace key a model's schema names is in its trace, with the shape the pages draw."""
    x, _ = images
    model = build_model(name)
    _, tr = trace_one(model, x[0])
    schema = get_spec(name).trace
    T, U = tr["activity"].shape
    for panel in ("mask", "input_attention", "input_heads", "comm_attention"):
        if getattr(schema, panel) is not None:
            assert schema.has(tr, panel), f"{name}: {panel} -> {getattr(schema, panel)!r} not in the trace"
            assert schema.get(tr, panel).shape[:2] == (T, U)
    if schema.activity_binary:
        assert robustness_points.is_binary_mask(tr["activity"]) and schema.value_range == (0.0, 1.0)
        assert schema.mean_label == "share active"
    else:
        assert schema.value_range == (None, None) and schema.mean_what == f"mean {schema.activity_label}"
    assert sum(get_spec(n).is_method for n in list_models()) == 1


def test_pages_and_figures_never_branch_on_a_model_name():
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    names = "|".join(list_models())
    pattern = re.compile(rf"""[!=]=\s*["']({names})["']|["']({names})["']\s*[!=]=|["']({names})["']\s+(not\s+)?in\b""")
    files = [root / "app.py", *sorted((root / "pages").rglob("*.py")), *sorted((root / "core" / "report" / "plots").glob("*.py"))]
    hits = [f"{f.relative_to(root)}:{i}" for f in files for i, line in enumerate(f.read_text().splitlines(), 1)
            if pattern.search(line)]
    assert len(files) > 10 and not hits, hits


def test_trace_panels_rim_and_baseline(rim, plstm, images):
    x, _ = images
    _, tr = trace_one(rim, x[0])
    panels = traces.trace_panels(tr, rim.unit_names, "rim")
    assert [p.get("binary", False) for p in panels] == [True, False]
    assert panels[0]["z"].shape == (28, 6)
    with_heads = traces.trace_panels(tr, rim.unit_names, "rim", heads=True)
    assert len(with_heads) == 2 + rim.config.input_heads
    _, tr2 = trace_one(plstm, x[0])
    p2 = traces.trace_panels(tr2, plstm.unit_names, get_spec("parallel_lstm").trace)
    assert len(p2) == 1 and p2[0]["title"] == "hidden-state norm" and p2[0]["colorbar"] == "hidden-state norm"


def test_timeline_figure_axes_and_step_marker(rim, images):
    x, _ = images
    _, tr = trace_one(rim, x[0])
    panels = traces.trace_panels(tr, rim.unit_names, "rim")
    fig = traces.timeline_figure(x[0], panels, t=5)
    hm = _heatmaps(fig)
    assert len(hm) == 3  # rotated image + mask + attention
    assert hm[1].z.shape == (6, 28) and list(hm[1].y) == rim.unit_names
    assert list(hm[1].x) == list(range(1, 29))
    assert "timestep" in fig.layout.xaxis3.title.text
    assert hm[1].colorbar.title.text == "state" and hm[2].colorbar.title.text == "weight w"
    w = tr["input_attention"]  # colour range fitted to the weights (at least 0.02 wide)
    assert hm[2].zmin <= w.min() and hm[2].zmax >= w.max() and hm[2].zmax - hm[2].zmin >= 0.02 - 1e-9
    steps = [s for s in fig.layout.shapes if s.name == "step"]
    assert len(steps) == 1 and steps[0].x0 == 4.5
    traces.mark_step(fig, 9)
    steps = [s for s in fig.layout.shapes if s.name == "step"]
    assert len(steps) == 1 and steps[0].x0 == 8.5


def test_timeline_figure_rgb(images):
    rgb = np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    panels = [{"title": "activity", "z": np.random.rand(32, 4), "units": list("abcd"), "colorbar": "x"}]
    fig = traces.timeline_figure(rgb, panels, t=32)
    assert isinstance(fig.data[0], go.Image) and fig.data[0].z.shape == (32, 32, 3)


def test_comm_attention_table_blanks_inactive_readers_and_shades_like_blues():
    attn = np.array([[0.6, 0.3, 0.1], [1 / 3, 1 / 3, 1 / 3], [0.0, 0.0, 1.0]])
    sty = traces.comm_attention_table(attn, ["A", "B", "C"], active=np.array([1, 0, 1]))
    df = sty.data
    assert list(df.columns) == ["A", "B", "C"] and df.index.name.startswith("reader")
    assert list(df.index) == ["A", "B (inactive)", "C"]
    numbered = traces.comm_attention_table(attn, ["LSTM 1", "LSTM 2", "LSTM 3"]).data
    assert list(numbered.columns) == ["1", "2", "3"] and list(numbered.index) == ["LSTM 1", "LSTM 2", "LSTM 3"]
    assert np.isnan(df.iloc[1]).all() and df.iloc[0].tolist() == pytest.approx([60, 30, 10])
    html = sty.to_html()
    assert ">60<" in html and ">100<" in html and ">33<" not in html  # whole percent; the inactive row blank
    assert style.blues_css(0) == "background-color: #f7fbff; color: #111111"
    assert style.blues_css(1) == "background-color: #08306b; color: #ffffff"
    assert "#08306b" in html and "#f7fbff" in html and style.blues_css(float("nan")) == ""


def test_probability_figure_colours_by_method():
    rows = [{"label": "RIM", "method": "rim", "probs": np.full(10, 0.1)},
            {"label": "PL", "method": "parallel_lstm", "probs": np.eye(10)[3]}]
    fig = traces.probability_figure(rows, [str(i) for i in range(10)], true_class=3)
    assert [t.marker.color for t in fig.data] == [style.method_color("rim"), style.method_color("parallel_lstm")]
    assert fig.data[1].y[3] == pytest.approx(100)
    assert fig.layout.yaxis.title.text == "probability (%)"
    assert traces.probability_figure([], ["a"]).data == ()


def test_unit_heatmap_and_mask_shift():
    z = np.random.rand(10, 6)
    fig = traces.unit_heatmap(z, list("abcdefghij"), [f"LSTM {i}" for i in range(6)], x_title="class",
                             colorbar="share active")
    assert fig.data[0].z.shape == (6, 10) and fig.layout.xaxis.title.text == "class"
    div = traces.unit_heatmap(z - 0.5, range(10), list("uvwxyz"), x_title="row", colorbar="d", diverging=True)
    assert div.data[0].zmid == 0
    a = np.zeros((28, 6))
    b = a.copy()
    b[3, 1] = 1
    fig = robustness.mask_shift_figure(a, b, list("uvwxyz"), t=2)
    assert len(fig.data) == 3 and float(np.asarray(fig.data[2].z).sum()) == 1
    assert "1 of 168" in fig.layout.annotations[2].text
    short = robustness.mask_shift_figure(a, np.zeros((14, 6)), list("uvwxyz"))
    assert "different lengths" in short.layout.annotations[0].text


def test_error_curve_figure():
    x = np.array([0.0, 0.01, 0.02])
    curves = [{"label": "RIM", "method": "rim", "x": x, "y": np.array([0.1, 0.12, np.nan]),
               "low": np.array([0.08, 0.1, np.nan]), "high": np.array([0.12, 0.14, np.nan])},
              {"label": "IndRNN", "method": "indrnn", "x": x, "y": np.array([0.2, 0.25, 0.3])}]
    fig = robustness.error_curve_figure(curves, x_title="variance", current=0.02, reference=0.01)
    bands = [t for t in fig.data if t.fill == "toself"]
    assert len(bands) == 1 and bands[0].mode == "lines"  # no stray vertex markers on the band
    lines = [t for t in fig.data if t.mode == "lines+markers"]
    assert [t.name for t in lines] == ["RIM", "IndRNN"]
    assert list(lines[0].y) == pytest.approx([10, 12])  # NaN (not computed yet) left out
    assert lines[0].line.color == style.method_color("rim")
    assert fig.layout.yaxis.title.text == "test error (%)"
    assert len(fig.layout.shapes) == 2  # current and paper markers
    robustness.mark_current(fig, 0.015)
    cur = [s for s in fig.layout.shapes if s.name == "current"]
    assert len(cur) == 1 and cur[0].x0 == 0.015 and len(fig.layout.shapes) == 2
    assert [a.x for a in fig.layout.annotations if a.name == "current"] == [0.015]
    with_floors = robustness.error_curve_figure(curves, x_title="variance", current=0.02,
                                                floors={"chance_error": 0.9, "majority_error": 1 - 46 / 260})
    dashed = [s for s in with_floors.layout.shapes if s.line.dash == "dash"]
    assert [round(s.y0, 2) for s in dashed] == [90.0, 82.31]
    robustness.mark_current(with_floors, 0.01)  # moving the current line keeps the floors
    assert len([s for s in with_floors.layout.shapes if s.line.dash == "dash"]) == 2
    # the floors' labels are legend entries, not text on the plot (a curve near the floor runs through it)
    assert not [a for a in with_floors.layout.annotations if "chance" in a.text or "majority" in a.text]
    assert [(s.name, s.showlegend, s.legendgroup) for s in dashed] == [
        ("chance 90.0 %", True, "floors"), ("majority class 82.31 %", True, "floors")]
