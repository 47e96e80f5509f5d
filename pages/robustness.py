"""Robustness: test error under input noise (the paper's test) and under vertical stretching."""

from __future__ import annotations

import numpy as np
import streamlit as st

from core import paths
from core.catalog import held_out_data
from core.data.datasets import DATASETS
from core.data.transforms import add_noise, stretch_rows
from core.errors import DataUnavailableError
from core.eval import curves
from core.eval.robustness_points import activation_change
from core.eval.scorer import Scorer
from core.models.registry import is_method, trace_schema
from core.report.floors import floors_from_counts
from core.report.fmt import short_method_title, source_parts
from core.report.frames import ErrorAt, error_change_frames
from core.report.plots import robustness, traces
from pages import ui
from pages.ui.handwriting import URL_STATE as HANDWRITING_URL_STATE
from pages.ui.handwriting import handwriting_view

# test images every method is scored on (fixed subset, seed 0); smaller on a slow machine
SUBSET = paths.robustness_subset(curves.SUBSET)
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


@st.cache_data(max_entries=512, show_spinner=False)
def _prediction_and_activity(_model, model_key: str, mtime: float, image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Class probabilities and per-timestep activity of one image: one forward pass for both."""
    from core.eval.predict import trace_one

    probs, trace = trace_one(_model, image)
    return probs, trace["activity"]


def _proba(model, model_key: str, mtime: float, image: np.ndarray) -> np.ndarray:
    return _prediction_and_activity(model, model_key, mtime, image)[0]


def _active(model, model_key: str, mtime: float, image: np.ndarray) -> np.ndarray:
    return _prediction_and_activity(model, model_key, mtime, image)[1]


def make_scorer(dataset: str, data, models: dict) -> Scorer:
    """``core.eval.scorer.Scorer`` over the shared caches (pages/ui/cache.py): points computed
    once per server, the defaults already after the first page (the warm-up)."""
    return ui.cache.robustness_scorer(dataset, data, models)


def compute_points(jobs: list, label: str) -> None:
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


def _session_memo(name: str, key: tuple, build):
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
    ui.pickers.keep_valid(f"{key}_src", ["Test image", "Upload"])
    word = "sample image" if data is not None and data.is_sample else "test image"
    src = st.radio("Image", ["Test image", "Upload"], horizontal=True, key=f"{key}_src",
                   format_func=lambda s: word.capitalize() if s == "Test image" else s) if data is not None else "Upload"
    if src == "Upload":
        image = ui.upload.usable_array(ui.upload.uploaded_image(dataset, f"{key}_upload", "Upload an image to see it with noise."))
        return None if image is None else (image, None, "your image")
    n = len(data)
    st.session_state.setdefault(f"{key}_idx", 0)
    ui.pickers.clamp_state(f"{key}_idx", 0, n - 1)
    rng = np.random.default_rng()
    c1, c2 = st.columns([3, 2], vertical_alignment="bottom")
    i = c1.number_input(f"{word.capitalize()} number (0-{n - 1})", 0, n - 1, key=f"{key}_idx")
    c2.button("Random", key=f"{key}_rand",
              on_click=lambda: st.session_state.update({f"{key}_idx": int(rng.integers(n))}))
    return np.asarray(data.images[int(i)]), int(data.labels[int(i)]), ui.messages.image_name(data, int(i))


def _prediction_table(rows_clean: list, rows_other: list, classes: list, what: str, base: str = "clean"):
    import pandas as pd

    out = []
    for rc, ro in zip(rows_clean, rows_other):
        pc, po = int(np.argmax(rc["probs"])), int(np.argmax(ro["probs"]))
        out.append({"model": rc["label"], base: f"{classes[pc]} {rc['probs'][pc] * 100:.0f}%",
                    what: f"{classes[po]} {ro['probs'][po] * 100:.0f}%",
                    "prediction changed": "yes" if pc != po else ""})
    # a static table: long model and class names wrap instead of being cut at a cell's edge
    st.table(pd.DataFrame(out), hide_index=True)


def _predictions(models: dict, classes: list, image, changed, label, *, key: str, what: str, base: str,
                 caption: str) -> None:
    """Every model's class probabilities on the changed image, and its prediction before → after."""
    rows_b, rows_c = [], []
    for method, (entry, model) in models.items():
        mt = ui.cache.entry_mtime(entry)
        rows_b.append({"label": entry.display, "method": method, "probs": _proba(model, entry.key, mt, image)})
        rows_c.append({"label": entry.display, "method": method, "probs": _proba(model, entry.key, mt, changed)})
    pc, pt = st.columns([3, 2])
    pc.plotly_chart(traces.probability_figure(rows_c, classes, true_class=label, height=280), key=key, config=CHART)
    with pt:
        st.caption(caption)
        _prediction_table(rows_b, rows_c, classes, what, base=base)


def _error_metrics(scorer: Scorer | None, dataset: str, heading: str, spinner: str, base_of, here_of,
                   suffix: str, versus: str = "clean") -> bool:
    """Each model's test error here (``here_of(method)``) against ``base_of(method)``; False
    (after saying so) when there is no test set to score on."""
    if scorer is None:
        st.info("Test errors need the test set; see the note above on how to get it.")
        return False
    st.subheader(heading)
    with st.spinner(spinner):
        base = {m: base_of(m) for m in scorer.models}
        points = {m: here_of(m) for m in scorer.models}
    rows = [ErrorAt(scorer.models[m][0].display, p.error, *p.interval, p.n, base[m].error, _full_error(scorer.models[m][0]))
            for m, p in points.items()]
    shown, numbers = error_change_frames(rows, _images_word(scorer), heading.removeprefix("Test error at "), versus)
    # a static table (not one metric per model): every model's full name fits, nothing is cut
    st.table(shown, hide_index=True)
    c_note, c_dl = st.columns([4, 1], vertical_alignment="center")
    c_note.caption(f"95% intervals: Wilson, over the {next(iter(points.values())).n} {_images_word(scorer)}{suffix}. "
                   f"Change vs {versus}: the error here minus the {versus} error on the same images. The last "
                   "column is the clean error on the full test set, recorded when the model was trained (other "
                   "images, so it does not enter the change).",
                   help="A 95% interval is the range the error would fall in for 95 of 100 other sets of this many "
                        "images of the same kind: the narrower, the surer the figure. Two models whose intervals "
                        "overlap much may not differ at all.")
    c_dl.download_button("⬇ CSV: this table", numbers.to_csv(index=False).encode(),
                         file_name=f"{dataset}_test_error_{_slug(heading)}.csv", mime="text/csv",
                         key=f"rb_dl_table_{versus}", on_click="ignore")
    return True


def _full_error(entry) -> float | None:
    """The clean error on the full test set that a model's metadata records, if any."""
    full = (entry.metrics or {}).get("test_error")
    return float(full) if isinstance(full, (int, float)) else None


def _images_word(scorer: Scorer) -> str:
    """"sample images" when the scored images come from the bundled sample, else "test images"."""
    return "sample images" if "sample" in scorer.key.split("|")[1] else "test images"


def _slug(text: str) -> str:
    import re

    return re.sub(r"[^0-9A-Za-z.]+", "_", text).strip("_").lower()


def _lines_csv(lines: list[dict], x_name: str) -> bytes:
    """The curves' numbers: one row per model and x, errors and 95% intervals in percent."""
    import pandas as pd

    rows = [{"model": ln["label"], x_name: float(x), "test error (%)": round(float(y) * 100, 4),
             "95% low (%)": round(float(lo) * 100, 4), "95% high (%)": round(float(hi) * 100, 4)}
            for ln in lines for x, y, lo, hi in zip(ln["x"], ln["y"], ln["low"], ln["high"])]
    return pd.DataFrame(rows).to_csv(index=False).encode()


# --------------------------------------------------------------------------- noise tab


def noise_picker() -> tuple[str, float, str, str | None, str]:
    """The noise kind and strength (a button back to the paper's test): (kind, strength, title,
    the strength's name or None, the level in words)."""
    c_kind, c_level, c_btn = st.columns([1, 3, 1], vertical_alignment="bottom")
    ui.pickers.keep_valid("rb_kind", list(NOISES))
    kind = c_kind.selectbox("Noise", list(NOISES), key="rb_kind", format_func=lambda k: NOISES[k][0])
    title, param, desc = NOISES[kind]
    if param is None:
        strength = 1.0
        c_level.caption(f"{title}: {desc}.")
    else:
        skey = f"rb_strength_{kind}"
        paper_kind = kind == "gaussian"  # the paper's test is Gaussian noise of variance 0.01, nothing else
        ui.pickers.keep_valid(skey, GRID)
        st.session_state.setdefault(skey, PAPER_VAR)
        strength = c_level.select_slider(f"{title} noise: {param}", GRID, key=skey,
                                         format_func=lambda v: f"{v:.2f}" + (" (paper)" if paper_kind and v == PAPER_VAR
                                                                             else ""),
                                         help=f"{desc}. 0.01 (Gaussian variance) is the paper's noise test. "
                                              "Images are in [0, 1] and clipped after the noise.")

        def to_paper() -> None:
            st.session_state["rb_kind"] = "gaussian"
            st.session_state["rb_strength_gaussian"] = PAPER_VAR

        c_btn.button("Paper's test", key="rb_paper", on_click=to_paper)
    level = f"{title} {param} {strength:.2f}" if param else title
    return kind, strength, title, param, level


def noise_image(dataset: str, data, models: dict, kind: str, strength: float, level: str):
    """One image, clean and noisy, and each model's prediction on both; returns the picked image."""
    classes = list(DATASETS[dataset].classes)
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
        _predictions(models, classes, image, noisy, label, key="rb_probs", what="noisy", base="clean",
                     caption="Prediction per model, clean → noisy" + (f" (true class: {classes[label]})"
                                                                      if label is not None else ""))
    return picked


def noise_curve(dataset: str, scorer: Scorer, kind: str, strength: float, title: str, param: str) -> None:
    """Each model's error against the noise strength, this strength marked."""
    st.subheader("Error against noise strength")

    def build():
        compute_points([(scorer.curve_noise, (m, kind, s)) for s in GRID for m in scorer.models],
             f"Scoring {len(scorer.models)} models at {len(GRID)} noise levels")
        lines = _error_lines(scorer, lambda m: scorer.noise_curve(m, kind, GRID))
        fig = robustness.error_curve_figure(lines, x_title=f"{title} noise {param}",
                                            reference=PAPER_VAR if kind == "gaussian" else None,
                                            reference_label="paper (0.01)", floors=_floors(scorer),
                                            floors_of=_floors_of(scorer))
        return fig, lines

    fig, lines = _session_memo("_rb_noise_curve", scorer.signature(kind), build)
    st.plotly_chart(robustness.mark_current(fig, strength), key="rb_curve", config=CHART)
    name = f"{dataset}_robustness_{kind}"
    ui.export.figure_downloads(fig, name, key="rb_dl_curve", extra=[
        ("⬇ CSV: the curves", lambda: _lines_csv(lines, f"{title} noise {param}"), f"{name}.csv", "text/csv")])
    st.caption("Bands: 95% intervals (Wilson) of each error on this subset. Dashed: the error of guessing at "
               "random (chance) and of always answering the subset's most frequent class (majority class).")


def noise_view(dataset: str, data, scorer: Scorer | None, models: dict) -> None:
    """The noise tab: the noise, one image, the test error at this level, the curve, the mask shift."""
    kind, strength, title, param, level = noise_picker()
    picked = noise_image(dataset, data, models, kind, strength, level)
    # test error at this level (shipped points where possible)
    if not _error_metrics(scorer, dataset, f"Test error at {level}", "Scoring the models at this noise level…",
                          lambda m: scorer.curve_noise(m, "gaussian", 0.0), lambda m: scorer.curve_noise(m, kind, strength),
                          f"; one noise draw (seed {SEED}) shared by all models"):
        return
    if data is not None:
        src, where = source_parts(data.source)
        st.caption(f"{scorer.images.shape[0]} {_images_word(scorer)} (fixed subset, seed 0) from the {src}. One noise draw; "
                   "the Compare page reports means over seeds and draws.", help=f"Read from {where}." if where else None)
    else:
        st.caption(f"Shipped curves: {scorer.n} test images (fixed subset, seed 0), scored when the models were "
                   "built. One noise draw; the Compare page reports means over seeds and draws.")
    if param is not None:
        noise_curve(dataset, scorer, kind, strength, title, param)
    # how a selection mask shifts (the models whose activity is a binary mask)
    for method in [m for m in scorer.models if trace_schema(m).activity_binary and scorer.images is not None]:
        _mask_shift(scorer, method, picked, kind, strength, param, level)


def _mask_shift(scorer: Scorer, method: str, picked, kind, strength, param, level) -> None:
    entry, model = scorer.models[method]
    suffix = "" if is_method(method) else f"_{method}"  # widget keys: the method's keep their old names
    st.subheader(f"How {short_method_title(method)}'s active mask shifts under noise")
    mt = ui.cache.entry_mtime(entry)
    clean_pt = scorer.noise(method, "gaussian", 0.0)
    here_pt = scorer.noise(method, kind, strength)
    subset_change = activation_change(clean_pt.activity, here_pt.activity)
    c1, c2 = st.columns([3, 1])
    with c2:
        st.markdown("**Activations switched**")  # one term, Robustness' own; the labels say on what
        if picked is not None:
            image = picked[0]
            noisy = add_noise(image[None], kind, strength, seed=SEED)[0]
            a_clean = _active(model, entry.key, mt, image)
            a_noisy = _active(model, entry.key, mt, noisy)
            one = activation_change(a_clean, a_noisy)
            st.metric("this image", f"{one.fraction * 100:.1f}%",
                      help="Share of (row, LSTM) activations switched on or off between the clean and the noisy "
                           "input. Not the share of rows whose active set changes (Mechanisms), which counts a row "
                           "once however many of its LSTMs switch.")
        st.metric(f"{here_pt.n} {_images_word(scorer)}", f"{subset_change.fraction * 100:.1f}%",
                  help="Share of (image, row, LSTM) activations switched on or off against the clean run.")
        worst = int(np.argmax(subset_change.per_row)) + 1
        st.caption(f"Most switches at row {worst} ({subset_change.per_row[worst - 1] * 100:.0f}% of its activations).")
    with c1:
        if picked is not None:
            st.plotly_chart(robustness.mask_shift_figure(a_clean, a_noisy, list(model.unit_names),
                                                    labels=("clean", level)), key="rb_mask" + suffix, config=CHART)
    if param is not None:
        def build():
            compute_points([(scorer.noise, (method, kind, s)) for s in GRID],
                 f"Scoring {short_method_title(method)}'s mask at {len(GRID)} noise levels")
            c = scorer.noise_curve(method, kind, GRID, shipped=False, flips=True)
            if c.flips is None:
                return None
            return robustness.error_curve_figure(
                [{"label": f"{entry.display}: activations switched", "method": method, "x": c.x, "y": c.flips}],
                x_title=f"noise {param}", y_title="activations switched vs clean (%)",
                reference=PAPER_VAR if kind == "gaussian" else None, reference_label="paper (0.01)", height=280)

        fig = _session_memo("_rb_flip_curve" + suffix, scorer.signature(kind), build)
        if fig is not None:
            st.plotly_chart(robustness.mark_current(fig, strength), key="rb_flips", config=CHART)


# --------------------------------------------------------------------------- stretch tab


def stretch_view(dataset: str, data, scorer: Scorer | None, models: dict) -> None:
    info = DATASETS[dataset]
    classes = list(info.classes)
    H = info.image_shape[0]
    st.caption(f"Beyond the paper: the models were trained on {H} rows; stretching the image vertically changes "
               "the number of timesteps (T) without changing the row width.")
    ui.pickers.keep_valid("rb_factor", FACTORS)
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
        _predictions(models, classes, image, stretched, label, key="rb_s_probs", what="stretched", base="original",
                     caption="Prediction per model, original → stretched")
    if not _error_metrics(scorer, dataset, f"Test error at stretch ×{factor:g}", "Scoring the models at this stretch…",
                          lambda m: scorer.curve_stretch(m, 1.0), lambda m: scorer.curve_stretch(m, factor), "",
                          versus="unstretched"):
        return
    st.subheader("Error against stretch factor")

    def build():
        compute_points([(scorer.curve_stretch, (m, f)) for f in FACTORS for m in scorer.models],
             f"Scoring {len(scorer.models)} models at {len(FACTORS)} stretch factors")
        lines = _error_lines(scorer, lambda m: scorer.stretch_curve(m, FACTORS))
        fig = robustness.error_curve_figure(lines, x_title="vertical stretch factor (1 = training length)",
                                            reference=1.0, reference_label="training length",
                                            floors=_floors(scorer), floors_of=_floors_of(scorer))
        return fig, lines

    fig, lines = _session_memo("_rb_stretch_curve", scorer.signature("stretch"), build)
    st.plotly_chart(robustness.mark_current(fig, factor), key="rb_s_curve", config=CHART)
    name = f"{dataset}_robustness_stretch"
    ui.export.figure_downloads(fig, name, key="rb_dl_s_curve", extra=[
        ("⬇ CSV: the curves", lambda: _lines_csv(lines, "vertical stretch factor"), f"{name}.csv", "text/csv")])


def _floors_of(scorer: Scorer) -> str:
    """What the curves' majority class is of: the scored images, not the whole test set."""
    return "" if scorer.labels is None else f" of these {len(scorer.labels):,} {_images_word(scorer)}"


def _floors(scorer: Scorer) -> dict:
    """Chance and majority-class error of the images the scorer scores (dashed lines on the curves)."""
    if scorer.labels is None:  # the shipped curves alone: the images' classes are not here
        return {}
    info = DATASETS.get(scorer.key.split("|")[0])  # the key starts with the data set (make_scorer)
    counts = np.bincount(np.asarray(scorer.labels, dtype=np.int64), minlength=len(info.classes) if info else 0)
    return floors_from_counts(counts)


def _error_lines(scorer: Scorer, curve_of) -> list[dict]:
    """One error line (with its 95% band) per compared model; ``curve_of(method)`` gives its curve."""
    lines = []
    for m, (e, _) in scorer.models.items():
        c = curve_of(m)
        lines.append({"label": e.display, "method": m, "x": c.x, "y": c.error, "low": c.low, "high": c.high})
    return lines


# --------------------------------------------------------------------------- page

URL_STATE = {"rb_dataset": str, "rb_kind": str, "rb_strength_*": float, "rb_tab": str, "rb_img_src": str,
             "rb_img_idx": int, "rb_factor": float, "pretrained_protocol": str, "rb_cmp_*": str,
             **HANDWRITING_URL_STATE}
ui.urlstate.restore_from_url(URL_STATE)

ui.frontend.charts_early()
st.title("Robustness")
st.caption("The paper's noise test, live: Gaussian noise on the test images only (training unchanged), and, beyond "
           "the paper, images stretched to other numbers of rows. Every method is scored on the same test images "
           "and the same noise draw.")

dataset = ui.pickers.dataset_picker(key="rb_dataset")
all_entries = ui.pickers.entries_or_stop(dataset)
chosen = ui.pickers.method_models_picker(all_entries, f"rb_cmp_{dataset}")
models = {}
for method, entry in chosen.items():
    loaded = ui.cache.load_or_report(entry)
    if loaded is not None:
        models[method] = (entry, loaded[0])
if not models:
    st.stop()
st.caption("Models: " + ", ".join(f"{e.display}" for e, _ in models.values()) + ".")

try:
    data = ui.cache.test_data(dataset)
except DataUnavailableError as exc:
    data = None
    scorer, left_out = ui.cache.shipped_scorer(dataset, models)
    if scorer is None:
        ui.messages.missing_data_note(dataset, exc, "the error curves are off (uploading an image still works)")
    else:
        ui.messages.missing_data_note(
            dataset, exc, f"the errors shown are the shipped curves, computed when the models were built on "
                          f"{scorer.n} test images (fixed subset, seed 0); nothing else can be scored here "
                          "(uploading an image still works)")
        if left_out:
            st.caption("Not in the errors (no shipped curves, no test set to compute them): "
                       + ", ".join(models[m][0].display for m in left_out) + ".")
else:
    for e, _ in models.values():  # a demo run: every model on the images the demo did not train on
        data = held_out_data(e, data)
    scorer = make_scorer(dataset, data, models)

ui.pickers.tab_views("rb_tab", {"Noise": lambda: noise_view(dataset, data, scorer, models),
                        "Stretch (other sequence lengths)": lambda: stretch_view(dataset, data, scorer, models),
                        "Other handwriting": lambda: handwriting_view(dataset, models)})
ui.urlstate.sync_url(URL_STATE)
