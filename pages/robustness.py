"""Robustness: test error under input noise (the paper's test) and under vertical stretching."""

from __future__ import annotations

import os

import numpy as np
import streamlit as st

from core import analysis, curves, plots
from core.data import DATASETS, add_noise, stretch_rows
from core.errors import DataUnavailableError, InputImageError
from pages import common

# test images every method is scored on (fixed subset, seed 0); smaller on a slow machine
SUBSET = max(10, int(os.environ.get("RIMSCOPE_ROBUSTNESS_SUBSET", str(curves.SUBSET)) or curves.SUBSET))
SEED = curves.SEED  # one noise draw, shared by all methods
PAPER_VAR = 0.01
GRID = curves.GRID  # slider positions = curve points: 0 .. 0.20
NOISES = {
    "gaussian": ("Gaussian", "variance", "mean 0, variance σ² added to every pixel (the paper's test)"),
    "salt_pepper": ("Salt & pepper", "fraction of pixels", "that fraction of pixels set to 0 or 1"),
    "speckle": ("Speckle", "variance", "multiplicative: x + x·n, n ~ N(0, σ²)"),
    "poisson": ("Poisson", None, "shot noise from the pixel values; no strength parameter"),
}
FACTORS = curves.FACTORS
CHART = {"displayModeBar": False}


# --------------------------------------------------------------------------- cached compute


_clean_key = curves.clean_key


@st.cache_resource(show_spinner=False, max_entries=4)
def _shipped(path: str, mtime: float) -> curves.ShippedCurves:
    """The curves computed for the shipped models at build time (pretrained/curves.json)."""
    from pathlib import Path

    return curves.ShippedCurves.load(Path(path))


@st.cache_data(show_spinner=False, max_entries=256)
def _weights_hash(path: str, mtime: float) -> str:
    return curves.file_hash(path)


# cache_resource: results are read-only, and handing out the same object (no copy) keeps a
# slider move cheap even when the curve needs 21 points x 5 models from the cache
@st.cache_resource(max_entries=4000, show_spinner=False)
def _noise_point(_model, model_key: str, mtime: float, data_key: str, _images, _labels, kind: str,
                 strength: float, with_activity: bool) -> analysis.EvalPoint:
    return analysis.noisy_eval(_model, _images, _labels, kind, strength, SEED, with_activity=with_activity)


@st.cache_resource(max_entries=1000, show_spinner=False)
def _stretch_point(_model, model_key: str, mtime: float, data_key: str, _images, _labels,
                   factor: float) -> analysis.EvalPoint:
    return analysis.stretch_eval(_model, _images, _labels, factor)


@st.cache_data(max_entries=512, show_spinner=False)
def _one(_model, model_key: str, mtime: float, image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Class probabilities and per-timestep activity of one image: one forward pass for both."""
    from core.evaluate import trace_one

    probs, trace = trace_one(_model, image)
    return probs, trace["activity"]


def _proba(model, model_key: str, mtime: float, image: np.ndarray) -> np.ndarray:
    return _one(model, model_key, mtime, image)[0]


def _active(model, model_key: str, mtime: float, image: np.ndarray) -> np.ndarray:
    return _one(model, model_key, mtime, image)[1]


@st.cache_resource(max_entries=8, show_spinner=False)
def _subset(data_key: str, _data) -> tuple[np.ndarray, np.ndarray]:
    idx = analysis.fixed_subset(len(_data), SUBSET, seed=0)
    return np.ascontiguousarray(_data.images[idx]), np.ascontiguousarray(_data.labels[idx])


class Scorer:
    """Errors of the compared models on the fixed test subset, cached point by point."""

    def __init__(self, dataset: str, data, models: dict):
        self.key = f"{dataset}|{data.source}|{len(data)}|{SUBSET}"
        self.images, self.labels = _subset(self.key, data)
        self.models = models  # method -> (entry, model)
        self.subset_hash = curves.subset_hash(self.images, self.labels)
        pre = common.pretrained_dir()
        self.shipped = _shipped(str(pre), common.mtime(pre / curves.FILE))

    def _from_shipped(self, method: str, what: str, value: float) -> analysis.EvalPoint | None:
        entry, _ = self.models[method]
        if entry.source != "pretrained" or not self.shipped.points:
            return None
        path = entry.stem.with_suffix(".safetensors")
        return self.shipped.get(_weights_hash(str(path), common.entry_mtime(entry)), self.subset_hash, what, value)

    def curve_noise(self, method: str, kind: str, strength: float) -> analysis.EvalPoint:
        """A curve point: from the shipped curves when they hold it, else computed (cached)."""
        k = _clean_key(kind, strength)
        return self._from_shipped(method, *k) or self.noise(method, kind, strength)

    def curve_stretch(self, method: str, factor: float) -> analysis.EvalPoint:
        return self._from_shipped(method, "stretch", float(factor)) or self.stretch(method, factor)

    def signature(self, what: str) -> tuple:
        """Identifies a curve: the data subset, what varies, and every model with its file's time."""
        return (self.key, what, tuple((m, e.key, common.entry_mtime(e)) for m, (e, _) in self.models.items()))

    def noise(self, method: str, kind: str, strength: float) -> analysis.EvalPoint:
        entry, model = self.models[method]
        kind, strength = _clean_key(kind, strength)
        return _noise_point(model, entry.key, common.entry_mtime(entry), self.key, self.images, self.labels,
                            kind, strength, method == "rim")

    def stretch(self, method: str, factor: float) -> analysis.EvalPoint:
        entry, model = self.models[method]
        return _stretch_point(model, entry.key, common.entry_mtime(entry), self.key, self.images, self.labels,
                              float(factor))

    def fill(self, jobs: list, label: str) -> None:
        """Compute (or fetch) ``jobs`` = [(callable, args)]; a progress bar appears once one is slow."""
        import time

        bar = None
        for i, (fn, args) in enumerate(jobs):
            t0 = time.perf_counter()
            fn(*args)
            if bar is None and time.perf_counter() - t0 > 0.05:  # not cached: show progress
                bar = st.progress(0.0, text=label)
            if bar is not None:
                bar.progress((i + 1) / len(jobs), text=f"{label} ({i + 1}/{len(jobs)})")
        if bar is not None:
            bar.empty()


def _zoom(image: np.ndarray, px: int = 6) -> np.ndarray:
    """Each pixel as a ``px`` x ``px`` block (5 for 32-pixel images): crisp, same scale for all."""
    f = px if image.shape[1] <= 28 else 5
    return np.repeat(np.repeat(image, f, axis=0), f, axis=1)


def _memo(name: str, key: tuple, build):
    """A per-session memo: ``build()`` once per ``key`` (e.g. a curve figure; sliders move its marker)."""
    held = st.session_state.get(name)
    if held is not None and held[0] == key:
        return held[1]
    value = build()
    st.session_state[name] = (key, value)
    return value


# --------------------------------------------------------------------------- widgets


def _pick_image(dataset: str, data, key: str):
    """A test image (by number or at random) or an uploaded one: ``(image, label, caption)``."""
    common.keep_valid(f"{key}_src", ["Test image", "Upload"])
    src = st.radio("Image", ["Test image", "Upload"], horizontal=True, key=f"{key}_src") if data is not None else "Upload"
    if src == "Upload":
        up = st.file_uploader("Image (PNG, JPEG, GIF, BMP or WebP)", key=f"{key}_upload",
                              type=["png", "jpg", "jpeg", "gif", "bmp", "webp"])
        if up is None:
            st.info("Upload an image to see it with noise.")
            return None
        try:
            prepared = common.prepare_upload(up.getvalue(), dataset)
        except InputImageError as exc:
            common.show_error(exc, f"{up.name} cannot be used")
            return None
        except Exception as exc:
            common.show_error(exc, f"{up.name} cannot be used")
            return None
        if prepared.warning:
            st.info(prepared.warning)
            return None
        return prepared.array, None, "your image"
    n = len(data)
    st.session_state.setdefault(f"{key}_idx", 0)
    common.clamp_state(f"{key}_idx", 0, n - 1)
    rng = np.random.default_rng()
    c1, c2 = st.columns([3, 2], vertical_alignment="bottom")
    i = c1.number_input(f"Test image number (0-{n - 1})", 0, n - 1, key=f"{key}_idx")
    c2.button("Random", key=f"{key}_rand", help="a random test image",
              on_click=lambda: st.session_state.update({f"{key}_idx": int(rng.integers(n))}))
    return np.asarray(data.images[int(i)]), int(data.labels[int(i)]), common.image_name(data, int(i))


def _prediction_table(rows_clean: list, rows_other: list, classes: list, what: str, base: str = "clean"):
    import pandas as pd

    out = []
    for rc, ro in zip(rows_clean, rows_other):
        pc, po = int(np.argmax(rc["probs"])), int(np.argmax(ro["probs"]))
        out.append({"model": rc["label"], base: f"{classes[pc]} ({rc['probs'][pc] * 100:.0f}%)",
                    what: f"{classes[po]} ({ro['probs'][po] * 100:.0f}%)",
                    "changed": "yes" if pc != po else ""})
    df = pd.DataFrame(out)
    st.dataframe(df, hide_index=True)


def _error_metrics(points: dict, clean: dict, names: dict, suffix: str, versus: str = "clean") -> None:
    cols = st.columns(max(1, len(points)))
    for col, (method, p) in zip(cols, points.items()):
        lo, hi = p.interval
        d = (p.error - clean[method].error) * 100
        col.metric(names[method], f"{p.error * 100:.1f}%",
                   delta=f"{d:+.1f} pts vs {versus}" if round(d, 1) else f"±0.0 pts vs {versus}",
                   delta_color="inverse" if round(d, 1) else "off",
                   help=f"95% interval {lo * 100:.1f}-{hi * 100:.1f}% ({p.n} images){suffix}")


# --------------------------------------------------------------------------- noise tab


def noise_view(dataset: str, data, scorer: Scorer | None, models: dict) -> None:
    info = DATASETS[dataset]
    classes = list(info.classes)
    c_kind, c_level, c_btn = st.columns([1, 3, 1], vertical_alignment="bottom")
    common.keep_valid("rb_kind", list(NOISES))
    kind = c_kind.selectbox("Noise", list(NOISES), key="rb_kind", format_func=lambda k: NOISES[k][0])
    title, param, desc = NOISES[kind]
    if param is None:
        strength = 1.0
        c_level.caption(f"{title}: {desc}.")
    else:
        skey = f"rb_strength_{kind}"
        common.keep_valid(skey, GRID)
        st.session_state.setdefault(skey, PAPER_VAR)
        strength = c_level.select_slider(f"{title} noise: {param}", GRID, key=skey,
                                         format_func=lambda v: f"{v:.2f}" + (" (paper)" if v == PAPER_VAR else ""),
                                         help=f"{desc}. 0.01 (Gaussian variance) is the paper's noise test. "
                                              "Images are in [0, 1] and clipped after the noise.")

        def to_paper() -> None:
            st.session_state["rb_kind"] = "gaussian"
            st.session_state["rb_strength_gaussian"] = PAPER_VAR

        c_btn.button("Paper's test", key="rb_paper", on_click=to_paper,
                     help="Back to the paper's noise test: Gaussian, variance 0.01")
    level = f"{title} {param} {strength:.2f}" if param else title

    # one image, clean and noisy
    st.subheader("One image")
    left, right = st.columns([1, 2])
    with left:
        picked = _pick_image(dataset, data, "rb_img")
    if picked is not None:
        image, label, what = picked
        noisy = add_noise(image[None], kind, strength, seed=SEED)[0]
        with right:
            c1, c2 = st.columns(2)
            c1.image(_zoom(image))
            c1.caption(f"clean: {what}")
            c2.image(_zoom((noisy * 255).round().astype(np.uint8)))
            c2.caption(f"noisy: {level} (seed {SEED})")
        rows_c, rows_n = [], []
        for method, (entry, model) in models.items():
            rows_c.append({"label": entry.display, "method": method, "probs": _proba(model, entry.key,
                           common.entry_mtime(entry), image)})
            rows_n.append({"label": entry.display, "method": method, "probs": _proba(model, entry.key,
                           common.entry_mtime(entry), noisy)})
        pc, pt = st.columns([3, 2])
        pc.plotly_chart(plots.probability_figure(rows_n, classes, true_class=label, height=280),
                        key="rb_probs", config=CHART)
        with pt:
            st.caption("Prediction per model, clean → noisy" + (f" (true class: {classes[label]})"
                                                                 if label is not None else ""))
            _prediction_table(rows_c, rows_n, classes, "noisy")

    if scorer is None:
        st.info("Test errors need the test set; " + _data_message(dataset))
        return

    # test error at this level
    st.subheader(f"Test error at {level}")
    names = {m: e.display for m, (e, _) in models.items()}
    with st.spinner("Scoring the models at this noise level…"):
        clean = {m: scorer.curve_noise(m, "gaussian", 0.0) for m in models}  # shipped where possible
        here = {m: scorer.curve_noise(m, kind, strength) for m in models}
    _error_metrics(here, clean, names, f"; one noise draw (seed {SEED}) shared by all models")
    st.caption(f"{scorer.images.shape[0]} test images (fixed subset, seed 0) from {data.source}. One noise draw; "
               "the Compare page reports means over seeds and draws.")

    # curve
    if param is not None:
        st.subheader("Error against noise strength")

        def build():
            scorer.fill([(scorer.curve_noise, (m, kind, s)) for s in GRID for m in models],
                        f"Scoring {len(models)} models at {len(GRID)} noise levels")
            lines = []
            for m, (e, _) in models.items():
                c = analysis.curve_from_points(GRID, [scorer.curve_noise(m, kind, s) for s in GRID])
                lines.append({"label": e.display, "method": m, "x": c.x, "y": c.error, "low": c.low,
                              "high": c.high})
            return plots.error_curve_figure(lines, x_title=f"{title} noise {param}",
                                            reference=PAPER_VAR if kind == "gaussian" else None,
                                            reference_label="paper (0.01)")

        fig = _memo("_rb_noise_curve", scorer.signature(kind), build)
        st.plotly_chart(plots.mark_current(fig, strength), key="rb_curve", config=CHART)
        st.caption("Bands: 95% intervals (Wilson) of each error on this subset.")

    # RIM's activation pattern
    if "rim" in models:
        _rim_shift(scorer, models["rim"], picked, kind, strength, param, level)


def _rim_shift(scorer, rim, picked, kind, strength, param, level) -> None:
    entry, model = rim
    st.subheader("How RIM's active mask shifts under noise")
    mt = common.entry_mtime(entry)
    clean_pt = scorer.noise("rim", "gaussian", 0.0)
    here_pt = scorer.noise("rim", kind, strength)
    subset_change = analysis.activation_change(clean_pt.activity, here_pt.activity)
    c1, c2 = st.columns([3, 1])
    with c2:
        if picked is not None:
            image = picked[0]
            noisy = add_noise(image[None], kind, strength, seed=SEED)[0]
            a_clean = _active(model, entry.key, mt, image)
            a_noisy = _active(model, entry.key, mt, noisy)
            one = analysis.activation_change(a_clean, a_noisy)
            st.metric("Changed on this image", f"{one.fraction * 100:.1f}%",
                      help="share of (row, LSTM) activations that differ between clean and noisy input")
        st.metric(f"Changed over {here_pt.n} test images", f"{subset_change.fraction * 100:.1f}%",
                  help="share of (image, row, LSTM) activations that differ from the clean run")
        worst = int(np.argmax(subset_change.per_row)) + 1
        st.caption(f"Most changes at row {worst} ({subset_change.per_row[worst - 1] * 100:.0f}% of activations).")
    with c1:
        if picked is not None:
            st.plotly_chart(plots.mask_shift_figure(a_clean, a_noisy, list(model.unit_names),
                                                    labels=("clean", level)), key="rb_mask", config=CHART)
    if param is not None:
        def build():
            c = analysis.curve_from_points(GRID, [scorer.noise("rim", kind, s) for s in GRID], reference=clean_pt)
            if c.flips is None:
                return None
            return plots.error_curve_figure(
                [{"label": f"{entry.display}: activations changed", "method": "rim", "x": c.x, "y": c.flips}],
                x_title=f"noise {param}", y_title="activations changed vs clean (%)",
                reference=PAPER_VAR if kind == "gaussian" else None, reference_label="paper (0.01)", height=280)

        fig = _memo("_rb_flip_curve", scorer.signature(kind), build)
        if fig is not None:
            st.plotly_chart(plots.mark_current(fig, strength), key="rb_flips", config=CHART)


# --------------------------------------------------------------------------- stretch tab


def stretch_view(dataset: str, data, scorer: Scorer | None, models: dict) -> None:
    info = DATASETS[dataset]
    classes = list(info.classes)
    H = info.image_shape[0]
    st.caption(f"Beyond the paper: the models were trained on {H} rows; stretching the image vertically changes "
               "the number of timesteps (T) without changing the row width.")
    common.keep_valid("rb_factor", FACTORS)
    st.session_state.setdefault("rb_factor", 1.0)
    factor = st.select_slider("Vertical stretch factor", FACTORS, key="rb_factor",
                              format_func=lambda f: f"{f:g}× ({max(1, round(H * f))} rows)")
    left, right = st.columns([1, 2])
    with left:
        picked = _pick_image(dataset, data, "rb_simg")
    if picked is not None:
        image, label, what = picked
        stretched = stretch_rows(image[None], factor)[0]
        shown = (stretched * 255).round().astype(np.uint8)
        with right:
            c1, c2 = st.columns(2)
            c1.image(_zoom(image))
            c1.caption(f"original ({H} rows)")
            c2.image(_zoom(shown))
            c2.caption(f"stretched ×{factor:g} ({shown.shape[0]} rows, same scale)")
        rows_o, rows_s = [], []
        for method, (entry, model) in models.items():
            mt = common.entry_mtime(entry)
            rows_o.append({"label": entry.display, "method": method, "probs": _proba(model, entry.key, mt, image)})
            rows_s.append({"label": entry.display, "method": method, "probs": _proba(model, entry.key, mt, stretched)})
        pc, pt = st.columns([3, 2])
        pc.plotly_chart(plots.probability_figure(rows_s, classes, true_class=label, height=280), key="rb_s_probs",
                        config=CHART)
        with pt:
            st.caption("Prediction per model, original → stretched")
            _prediction_table(rows_o, rows_s, classes, "stretched", base="original")
    if scorer is None:
        st.info("Test errors need the test set; " + _data_message(dataset))
        return
    st.subheader(f"Test error at stretch ×{factor:g}")
    names = {m: e.display for m, (e, _) in models.items()}
    with st.spinner("Scoring the models at this stretch…"):
        base = {m: scorer.stretch(m, 1.0) for m in models}
        here = {m: scorer.stretch(m, factor) for m in models}
    _error_metrics(here, base, names, "", versus="unstretched")
    st.subheader("Error against stretch factor")

    def build():
        scorer.fill([(scorer.curve_stretch, (m, f)) for f in FACTORS for m in models],
                    f"Scoring {len(models)} models at {len(FACTORS)} stretch factors")
        lines = []
        for m, (e, _) in models.items():
            c = analysis.curve_from_points(FACTORS, [scorer.curve_stretch(m, f) for f in FACTORS])
            lines.append({"label": e.display, "method": m, "x": c.x, "y": c.error, "low": c.low, "high": c.high})
        return plots.error_curve_figure(lines, x_title="vertical stretch factor (1 = training length)",
                                        reference=1.0, reference_label="training length")

    fig = _memo("_rb_stretch_curve", scorer.signature("stretch"), build)
    st.plotly_chart(plots.mark_current(fig, factor), key="rb_s_curve", config=CHART)


def _data_message(dataset: str) -> str:
    return "see the note above on how to get it."


# --------------------------------------------------------------------------- page

URL_STATE = {"rb_dataset": str, "rb_kind": str, "rb_strength_*": float, "rb_tab": str, "rb_img_src": str,
             "rb_img_idx": int, "rb_factor": float, "pretrained_protocol": str}
common.restore_from_url(URL_STATE)

st.title("Robustness")
st.caption("The paper's noise test, live: Gaussian noise on the test images only (training unchanged), and, beyond "
           "the paper, images stretched to other numbers of rows. Every method is scored on the same test images "
           "and the same noise draw.")

dataset = common.dataset_picker(key="rb_dataset")
all_entries, problems = common.model_entries(dataset)
common.protocol_switch(all_entries)
for problem in problems:
    st.warning(problem)
if not all_entries:
    st.info(f"No model for {DATASETS[dataset].title} yet. Train one on the Train page, upload one on the "
            "Models page, or install the pretrained models (pretrained/manifest.json).")
    st.stop()
chosen = common.method_models_picker(all_entries, f"rb_cmp_{dataset}")
models = {}
for method, entry in chosen.items():
    loaded = common.load_or_report(entry)
    if loaded is not None:
        models[method] = (entry, loaded[0])
if not models:
    st.stop()
st.caption("Models: " + ", ".join(f"{e.display}" for e, _ in models.values()) + ".")

try:
    data = common.test_data(dataset)
except DataUnavailableError as exc:
    common.missing_data_note(dataset, exc, "the error curves are off (uploading an image still works)")
    data = None
scorer = Scorer(dataset, data, models) if data is not None else None

common.keep_valid("rb_tab", ["Noise", "Stretch (other sequence lengths)"])
tab_noise, tab_stretch = st.tabs(["Noise", "Stretch (other sequence lengths)"], key="rb_tab", on_change="rerun")
if tab_noise.open:
    with tab_noise:
        noise_view(dataset, data, scorer, models)
if tab_stretch.open:
    with tab_stretch:
        stretch_view(dataset, data, scorer, models)
common.sync_url(URL_STATE)
