"""Mechanisms: which LSTMs work on which row, for one input and across the test set."""

from __future__ import annotations

import numpy as np
import streamlit as st

from core.catalog import held_out_data
from core.data.datasets import DATASETS
from core.errors import DataUnavailableError
from core.eval import robustness_points
from core.models.registry import get_spec
from core.report.export import matrix_csv
from core.report.fmt import even_share_text, short_method_title, source_parts
from core.report.plots import style, svg, traces
from pages import ui
from pages.ui import attribution, handwriting, intervene

STATS_SIZES = (200, 500, 1000)
MISCLASSIFIED_POOL = 1000  # misclassified images are searched among this fixed test subset
PLAY_SECONDS = 0.6
CHART = {"displayModeBar": False}


# --------------------------------------------------------------------------- cached compute


@st.cache_data(max_entries=256, show_spinner=False)
def _trace(_model, model_key: str, mtime: float, image: np.ndarray):
    """Probabilities and the full per-timestep trace of one image (sliced per step later)."""
    from core.eval.predict import trace_one

    return trace_one(_model, image)


@st.cache_data(max_entries=512, show_spinner=False)
def _proba(_model, model_key: str, mtime: float, image: np.ndarray) -> np.ndarray:
    from core.eval.predict import predict_proba

    return predict_proba(_model, np.asarray(image)[None])[0]


@st.cache_data(max_entries=32, show_spinner=False)
def _subset_probs(_model, model_key: str, mtime: float, data_key: str, _images, n: int):
    idx = robustness_points.fixed_subset(len(_images), n, seed=0)
    probs, _ = robustness_points.run_batched(_model, _images[idx])
    return idx, probs


_stats = ui.cache.activation_stats  # shared with the warm-up, which fills it for the default RIM
_selection = ui.cache.selection_reports


def selection_view(dataset: str, entry, model, data, n: int) -> None:
    """How decided, how stable under noise and how class-informative the active set is."""
    with st.spinner(f"Measuring the selection on {min(n, len(data))} images (clean, noisy, random twin)…"):
        rep_, rnd = _selection(model, entry.key, ui.cache.entry_mtime(entry), _data_key(dataset, data), data.images,
                               data.labels, n)
    st.subheader("What the attention decides")
    q = rep_.margin_quantiles()
    c1, c2, c3 = st.columns(3)
    c1.metric("Median selection margin", "n/a" if np.isnan(q[0.5]) else f"{q[0.5]:.3f}",
              help=f"Input-attention weight of the {rep_.k}th-ranked LSTM minus the {rep_.k + 1}th, per row. "
                   "Near 0: the choice hinges on tiny score differences.")
    c2.metric("Rows with a changed active set under noise", f"{rep_.changed_share * 100:.1f}%",
              delta=f"{(rep_.changed_share - rnd.changed_share) * 100:+.1f} points vs random selection",
              delta_color="inverse",
              help=f"Share of (image, row) pairs whose set of active LSTMs differs between the clean and the "
                   f"noisy image (Gaussian noise, variance {rep_.noise_var}). Not the share of single activations "
                   "switched, which Robustness shows. The random twin (same weights, k drawn at random) "
                   "is the chance level.")
    c3.metric("Class information in the active set", f"{rep_.information_bits:.3f} bits",
              delta=f"{rep_.information_bits - rep_.chance_bits:+.3f} bits above shuffled labels",
              help=f"Mutual information between the class and the active set per row, averaged over rows "
                   f"(at most {rep_.max_bits:.2f} bits). Random twin: {rnd.information_bits:.3f} bits.")
    m = rep_.margins[np.isfinite(rep_.margins)]
    if len(m):
        st.plotly_chart(traces.margin_histogram(m, rep_.k, rep_.images, entry.model), key="mech_margin_hist",
                        config=CHART)
        st.caption(f"{(m < 0.01).mean() * 100:.0f}% of rows have a margin below 0.01; quartiles "
                   f"{q[0.25]:.3f} / {q[0.5]:.3f} / {q[0.75]:.3f}. Random twin: {rnd.changed_share * 100:.1f}% "
                   f"of rows with a changed active set, {rnd.information_bits:.3f} bits (shuffled labels "
                   f"{rnd.chance_bits:.3f}). On {rep_.images} {ui.explore.images_word(data)}.")
    else:
        st.caption("All LSTMs are active (k = n): there is no selection margin.")


def _data_key(dataset: str, data) -> str:
    return f"{dataset}|{data.source}|{len(data)}"


# --------------------------------------------------------------------------- input choice


def _pick_test_image(dataset: str, model, entry, data):
    """A test image chosen at random, by class, or among the model's mistakes."""
    classes = list(data.classes)
    n = len(data)
    word = "sample image" if data.is_sample else "test image"
    st.session_state.setdefault("mech_idx", 0)
    st.session_state["mech_idx"] = int(min(max(0, st.session_state["mech_idx"]), n - 1))
    ui.pickers.keep_valid("mech_how", ["Random", "By class", "Misclassified"])
    how = st.radio(f"Which {word}", ["Random", "By class", "Misclassified"], horizontal=True, key="mech_how",
                   help="Misclassified: images of a fixed test subset that the chosen model gets wrong, "
                        "the most confident mistakes first.")
    rng = np.random.default_rng()

    if how == "Random":
        st.button("Another image", key="mech_rand",
                  on_click=lambda: st.session_state.update(mech_idx=int(rng.integers(n))))
    elif how == "By class":
        cls = st.selectbox("Class", range(len(classes)), format_func=lambda c: classes[c], key="mech_cls")
        members = np.flatnonzero(data.labels == cls)
        if len(members) == 0:
            st.warning(f"No test image of class {classes[cls]} in the {source_parts(data.source)[0]}.")
            return None
        if data.labels[st.session_state["mech_idx"]] != cls:
            st.session_state["mech_idx"] = int(members[0])
        st.button(f"Another {classes[cls]}", key="mech_rand_cls",
                  on_click=lambda: st.session_state.update(mech_idx=int(rng.choice(members))))
    else:
        with st.spinner(f"Finding the mistakes of {entry.display} on {min(n, MISCLASSIFIED_POOL)} test images…"):
            idx, probs = _subset_probs(model, entry.key, ui.cache.entry_mtime(entry), _data_key(dataset, data),
                                       data.images, MISCLASSIFIED_POOL)
        wrong = idx[robustness_points.misclassified(probs, data.labels[idx])]
        if len(wrong) == 0:
            st.success(f"{entry.display} classifies all {len(idx)} images of the subset correctly.")
            return None
        k = st.number_input(f"Mistake number (1 = most confident; {len(wrong)} of {len(idx):,} "
                            f"{ui.explore.images_word(data)} are wrong)",
                            1, len(wrong), 1, key="mech_wrong")
        st.session_state["mech_idx"] = int(wrong[int(k) - 1])
    i = st.number_input(f"{word.capitalize()} number (0-{n - 1})", 0, n - 1, key="mech_idx", disabled=how == "Misclassified")
    st.caption(f"From the {source_parts(data.source)[0]}.", help=f"Read from {source_parts(data.source)[1] or data.source}.")
    return np.asarray(data.images[int(i)]), int(data.labels[int(i)]), None, ui.messages.image_name(data, int(i))


def _uploaded_image(dataset: str):
    return ui.upload.uploaded_image(dataset, "mech_upload", "Upload an image: it is cropped, scaled and centred like the "
                                                     "training images (see the preprocessing steps below the image).")


# --------------------------------------------------------------------------- per-step view


def _panels(a: ui.pair.Side, b: ui.pair.Side | None, heads: bool, cache_key: tuple) -> list[dict]:
    """The timeline's panels (one model, or two aligned), made once per input and kept per session."""
    held = st.session_state.get("_mech_panels")
    if held is not None and held[0] == cache_key:
        return held[1]
    panels = ui.pair.panels(a, b, heads)
    st.session_state["_mech_panels"] = (cache_key, panels)
    return panels


def _timestep_view(image: np.ndarray, a: ui.pair.Side, b: ui.pair.Side | None, playing: bool, cache_key: tuple,
                   downloads=None) -> None:
    """The step slider, the row's panels and the timeline; ``downloads()`` draws the exports
    under it (here, in the fragment, so what they record is the row shown now)."""
    trace, unit_names, schema = a.trace, a.unit_names, a.schema
    T = image.shape[0]
    t_now = int(st.session_state.get("mech_t", 1))
    if playing:
        t_now = t_now % T + 1
    st.session_state["mech_t"] = min(max(1, t_now), T)

    def step(d: int) -> None:
        st.session_state["mech_t"] = (int(st.session_state.get("mech_t", 1)) - 1 + d) % T + 1

    c_prev, c_slider, c_next = st.columns([1, 14, 1], vertical_alignment="bottom")
    c_prev.button("◀", key="mech_prev", on_click=step, args=(-1,))
    t = c_slider.slider("Timestep = image row", 1, T, key="mech_t")
    ui.urlstate.write_param(URL_STATE, "mech_t", t)  # this view is a fragment: the page's sync_url does not run
    c_next.button("▶", key="mech_next", on_click=step, args=(1,))

    c_img, c_comm, c_text = st.columns([2, 4, 3])  # the heatmap wide enough for its numbers at 1280 px
    c_img.image(ui.upload.framed_row(image, t), caption=f"row {t} of {T}, framed")
    if schema.has(trace, "comm_attention"):
        mask = schema.get(trace, "mask")
        with c_comm.container(key="mech_comm"):  # a 6 x 6 matrix: a shaded table, no chart library
            st.markdown(f"**Communication attention at row {t}** (%)")
            st.table(traces.comm_attention_table(schema.get(trace, "comm_attention")[t - 1], unit_names,
                                                 None if mask is None else mask[t - 1]))
            st.caption("Row: the reader (query); column: the LSTM it reads from (key/value), by number; each "
                       "reading row sums to 100. Inactive LSTMs do not read.")
        c_comm.download_button("⬇ CSV: this row's communication attention", key="mech_dl_comm", on_click="ignore",
                               data=lambda: matrix_csv(schema.get(trace, "comm_attention")[t - 1], unit_names,
                                                       unit_names, row_title="reader"),
                               file_name=f"comm_attention_row{t}.csv", mime="text/csv")
    with c_text:
        st.markdown(traces.step_text(trace, unit_names, schema, t, T))
        if b is not None:
            st.markdown(f"*{b.entry.display}*: " + traces.step_text(b.trace, b.unit_names, b.schema, t, T).split(". ", 1)[1])
        if schema.step_note:
            st.caption(schema.step_note)
        heads = schema.has(trace, "input_heads") and st.checkbox("Show each input-attention head", key="mech_heads")
    panels = _panels(a, b, heads, cache_key + (heads, b.entry.key if b else None))
    ui.svg_view.show(svg.timeline_svg(image, panels, t), key="mech_timeline")
    if downloads is not None:
        downloads()


# --------------------------------------------------------------------------- views


def input_sources(dataset: str) -> list[str]:
    """The inputs offered: a test image, a drawing (grey data sets), an upload and, for MNIST,
    other people's handwriting."""
    grey = DATASETS[dataset].channels == 1
    return ["Test image"] + (["Draw"] if grey else []) + ["Upload"] + (["Other handwriting"] if dataset == "mnist" else [])


def _set_images(dataset: str) -> str:
    """What the pickable images are: "Sample image" (the bundled sample, offline) or "Test image"."""
    try:
        return "Sample image" if ui.cache.test_data(dataset).is_sample else "Test image"
    except DataUnavailableError:
        return "Test image"


def input_source(dataset: str) -> str:
    """The input's source, one of :func:`input_sources` (the test images called sample images
    when they are the bundled sample's)."""
    grey = DATASETS[dataset].channels == 1
    sources = input_sources(dataset)
    ui.pickers.keep_valid("mech_source", sources)
    word = _set_images(dataset)
    return st.radio("Input", sources, horizontal=True, key="mech_source",
                    format_func=lambda s: word if s == "Test image" else s,
                    help=None if grey else "Drawing is offered for the grey data sets (MNIST, Fashion-MNIST).")


def _still_works(dataset: str) -> str:
    """The other inputs offered, in words: "drawing or uploading an image still works"."""
    verbs = {"Draw": "drawing", "Upload": "uploading", "Other handwriting": "reading other people's handwriting"}
    said = [verbs[s] for s in input_sources(dataset) if s in verbs]
    return (", ".join(said[:-1]) + " or " + said[-1] if len(said) > 1 else said[0]).replace(
        "uploading", "uploading an image", 1) + " still works"


def input_panel(dataset: str, entry, model, source: str) -> tuple:
    """The input from ``source`` and what the model sees of it: (image, true label or None, the
    prepared upload or None, what it is), image None while there is no usable one."""
    image = label = prepared = None
    what = ""
    if source == "Test image":
        try:
            data = ui.cache.test_data(dataset)
        except DataUnavailableError as exc:
            ui.messages.missing_data_note(dataset, exc, f"there are no test images to pick ({_still_works(dataset)})")
            data = None
        if data is not None:
            picked = _pick_test_image(dataset, model, entry, data)
            if picked is not None:
                image, label, prepared, what = picked
    elif source == "Draw":
        prepared = ui.upload.drawn_image(dataset, "mech")
        what = "your drawing"
    elif source == "Other handwriting":
        picked = handwriting.mechanisms_input()
        if picked is not None:
            prepared, label, what = picked
    else:
        prepared = _uploaded_image(dataset)
        what = "your image"
    if prepared is not None:
        image = ui.upload.usable_array(prepared, show_steps=True)
    return image, label, prepared, what


def predictions_panel(dataset: str, entry, model, compared: dict, image: np.ndarray, label, prepared,
                      what: str) -> None:
    """What the model sees and what each compared model predicts for it; the upload's preprocessing."""
    info = DATASETS[dataset]
    classes = list(info.classes)
    rows = []
    for method, e in compared.items():
        loaded = model if e.key == entry.key else ui.cache.load_or_report(e)
        if loaded is None:
            continue
        if e.key == entry.key:  # the chosen model's trace holds its probabilities too
            p = _trace(model, entry.key, ui.cache.entry_mtime(entry), image)[0]
        else:
            p = _proba(loaded[0], e.key, ui.cache.entry_mtime(e), image)
        rows.append({"label": e.display, "method": method, "probs": p})
    c_img, c_pred = st.columns([1, 2])
    with c_img:
        st.image(ui.upload.upscaled(image))
        st.caption(f"What the model sees: {what}, {info.image_shape[0]}x{info.image_shape[1]}"
                   + ("" if info.channels == 1 else " RGB") + (f", true class {classes[label]}" if label is not None else ""))
    with c_pred:
        with st.container(key="mech_probs"):  # a table of bars: no chart library on the first view
            st.markdown("**Class probabilities** (%)")  # one model per method: the method names the column
            st.table(traces.probability_table([dict(r, label=short_method_title(r["method"])) for r in rows],
                                              classes, true_class=label))
    if rows:
        st.caption(" · ".join(f"{r['label']}: **{classes[int(np.argmax(r['probs']))]}** "
                              f"({np.max(r['probs']) * 100:.0f}%)" for r in rows))
    if prepared is not None:
        ui.upload.show_preprocessing(prepared)


def trace_panel(dataset: str, entry, model, all_entries: list, image: np.ndarray, label, what: str,
                source: str) -> None:
    """Inside the model, row by row (another model beside it on request), then the set-wide views."""
    classes = list(DATASETS[dataset].classes)
    a = _side(entry, model, image)
    st.subheader(f"Inside {entry.display}, row by row")
    if a.schema.mask is None:
        st.caption(f"{get_spec(entry.model).title} has no active mask or input attention; shown is its activity: "
                   f"{a.schema.activity_label}. Pick a RIM model above to see the mechanisms.")
    c_play, c_with = st.columns(2, vertical_alignment="bottom")
    playing = c_play.toggle(f"▶ Play (one row every {PLAY_SECONDS} s)", key="mech_play")
    with c_with:
        other = ui.pair.compare_with_picker(all_entries, entry, key=f"mech_with_{dataset}")
    loaded_b = ui.cache.load_or_report(other) if other is not None else None
    b = _side(other, loaded_b[0], image) if loaded_b is not None else None
    if b is not None:
        ui.pair.predictions(a, b, classes, label)
    view = st.fragment(run_every=PLAY_SECONDS if playing else None)(_timestep_view)
    cache_key = (entry.key, ui.cache.entry_mtime(entry), image.shape, hash(image.tobytes()))
    view(image, a, b, playing, cache_key, lambda: _downloads(dataset, image, a, b, cache_key, what, label))
    here = int(st.session_state["mech_idx"]) if source == "Test image" else None
    # this input first (quick: one image), then the searched set (a model run over 1,000 or more images)
    ui.pickers.tab_views("mech_more", {
        "Intervene": lambda: intervene.intervene_view(entry, model, image, a.unit_names, classes),
        "Which pixels drive it": lambda: attribution.attribution_view(entry, model, image, a.unit_names, classes),
        "Find the same mechanisms elsewhere": lambda: ui.explore.match_view(dataset, entry, model, a.mask, a.unit_names, here),
        "What each LSTM is for": lambda: ui.explore.unit_view(dataset, entry, model, a.unit_names)})


def one_input_view(dataset: str, entry, model, compared: dict, all_entries: list) -> None:
    """One input through the models: the input (left), the predictions (right), the trace below."""
    source = input_source(dataset)
    left, right = st.columns([2, 3])
    with left:
        image, label, prepared, what = input_panel(dataset, entry, model, source)
    if image is None:
        return
    with right:
        predictions_panel(dataset, entry, model, compared, image, label, prepared, what)
    trace_panel(dataset, entry, model, all_entries, image, label, what, source)


def _side(entry, model, image: np.ndarray) -> ui.pair.Side:
    probs, trace = _trace(model, entry.key, ui.cache.entry_mtime(entry), image)
    names = list(getattr(model, "unit_names", [f"unit {i + 1}" for i in range(trace["activity"].shape[-1])]))
    return ui.pair.Side(entry, probs, trace, names, get_spec(entry.model).trace)


def _downloads(dataset: str, image: np.ndarray, a: ui.pair.Side, b: ui.pair.Side | None, cache_key: tuple, what: str,
               label) -> None:
    """PNG/HTML of the timeline, CSV of each of its heatmaps, JSON of the whole trace(s)."""
    heads = bool(st.session_state.get("mech_heads"))
    ident = cache_key + (heads, b.entry.key if b else None)
    panels = _panels(a, b, heads, ident)
    test_image = st.session_state.get("mech_source") == "Test image"
    where = {"dataset": dataset, "what": what, "true_class": label, "shape": list(image.shape),
             "test_index": st.session_state.get("mech_idx") if test_image else None, "pixels": image}
    settings = {"timestep": int(st.session_state.get("mech_t", 1)), "timestep_means": "image row (1 = top)",
                "heads_shown": heads}
    # the chart library's timeline is built only when its PNG or HTML is asked for
    ui.export.trace_downloads(lambda: traces.timeline_figure(image, panels), panels, [a] if b is None else [a, b],
                              list(DATASETS[dataset].classes), where, settings, name=f"{dataset}_{a.entry.model}_trace",
                              key="mech_dl", ident=ident)


def protocol_mask_view(dataset: str, entry, model, stats, others, data, n: int) -> None:
    """Share of rows each LSTM is active, this model beside the other protocols' pretrained ones
    (does the Adam 4k model still use its mechanism the way the paper-protocol one does?)."""
    import pandas as pd

    rows = {entry.display: stats.overall}
    for other in others:
        loaded = ui.cache.load_or_report(other)
        if loaded is None:
            continue
        o_stats = _stats(loaded[0], other.key, ui.cache.entry_mtime(other), _data_key(dataset, data), data.images,
                         data.labels, n, len(DATASETS[dataset].classes))
        rows[other.display] = o_stats.overall
    if len(rows) < 2:
        return
    units = stats.unit_names or [f"unit {i + 1}" for i in range(len(stats.overall))]
    st.subheader("Share of rows each LSTM is active, by protocol")
    df = pd.DataFrame({name: v for name, v in rows.items()}, index=units).T
    st.table(df.style.format("{:.2f}"))  # a few rows: a plain table draws at once
    spread = {name: float(np.max(v) - np.min(v)) for name, v in rows.items()}
    st.caption(even_share_text(model.config) + " "
               + "; ".join(f"{name}: from {np.min(v):.2f} to {np.max(v):.2f} (spread {spread[name]:.2f})"
                           for name, v in rows.items()) + ".")


def dataset_view(dataset: str, entry, model, all_entries=()) -> None:
    info = DATASETS[dataset]
    try:
        data = ui.cache.test_data(dataset)
    except DataUnavailableError as exc:
        ui.messages.missing_data_note(dataset, exc, "the statistics over the test set are off")
        return
    data = held_out_data(entry, data)  # a demo run: only the images it did not train on
    spec = get_spec(entry.model)
    c1, c2 = st.columns([2, 3])
    ui.pickers.keep_valid("mech_stats_n", STATS_SIZES)
    st.session_state.setdefault("mech_stats_n", min(1000, STATS_SIZES[-1]))
    n = c1.select_slider("Test images", STATS_SIZES, key="mech_stats_n")
    relative = c2.toggle("Relative to each unit's average (shows preferences)", key="mech_stats_rel", value=True)
    with st.spinner(f"Running {entry.display} on {min(n, len(data))} test images…"):
        stats = _stats(model, entry.key, ui.cache.entry_mtime(entry), _data_key(dataset, data), data.images,
                       data.labels, n, len(info.classes))
    what, short = spec.trace.mean_what, spec.trace.mean_label
    zmin, zmax = spec.trace.value_range
    st.caption(f"{stats.n} images from the {source_parts(data.source)[0]} (fixed subset, seed 0). Test error of "
               f"{entry.display}: {ui.explore.error_on_subset(1 - stats.accuracy, stats.n, data, entry)}. Colour: {what}"
               + (", minus the unit's average over all images and rows (red: more than usual)." if relative else "."))
    units = stats.unit_names or [f"unit {i + 1}" for i in range(stats.by_row.shape[1])]
    classes = list(info.classes)
    if relative:
        z, cb, div = stats.class_deviation(), f"{short} - average", True
    else:
        z, cb, div = stats.by_class, short, False
    # one above the other: the per-class heatmap's numbers need the full width (side by side they overlapped)
    left, right = st.container(), st.container()
    row_z = stats.by_row - stats.overall[None, :] if relative else stats.by_row
    rows = list(range(1, row_z.shape[0] + 1))
    for col, m, xs, axis, what in ((left, z, classes, "class", "class"), (right, row_z, rows, style.TIMESTEP_AXIS, "row")):
        fig = traces.unit_heatmap(m, xs, units, x_title=axis, colorbar=cb, diverging=div, zmin=zmin, zmax=zmax,
                                 annotate=what == "class", title=f"per {what}")
        with col:
            st.plotly_chart(fig, key=f"mech_stats_{what}", config=CHART)
            name = f"{dataset}_{entry.model}_per_{what}" + ("_relative" if relative else "")
            ui.export.figure_downloads(fig, name, key=f"mech_dl_{what}", extra=ui.export.heatmap_csvs(
                [{"name": f"per {what}", "z": m, "units": units, "row_labels": xs, "row_title": what}], name))
    prefs = stats.preferences(classes)
    if prefs:
        import pandas as pd

        df = pd.DataFrame(prefs).rename(columns={"unit": "unit", "mean": "average", "most": "most for",
                                                 "most_value": "value (most)", "least": "least for",
                                                 "least_value": "value (least)", "spread": "spread"})
        st.table(df.style.hide(axis="index").format(  # one row per unit: a plain table draws at once
            "{:.2f}", subset=["average", "value (most)", "value (least)", "spread"]))
        top = max(prefs, key=lambda p: p["spread"])
        st.caption(f"Largest class preference: {top['unit']} ({top['most']} {top['most_value']:.2f} vs "
                   f"{top['least']} {top['least_value']:.2f}). A spread near 0 for every unit means the "
                   "units do not specialise by class.")
    if spec.selects_units:
        others = [e for e in all_entries if e.source == "pretrained" and e.model == entry.model
                  and e.protocol != entry.protocol and e.key != entry.key]
        protocol_mask_view(dataset, entry, model, stats, others, data, n)
        selection_view(dataset, entry, model, data, n)
        intervene.knockout_view(entry, model, data, _data_key(dataset, data), n, classes)


# --------------------------------------------------------------------------- page

URL_STATE = {"mech_dataset": str, "mech_model_*": str, "mech_source": str, "mech_how": str, "mech_idx": int,
             "mech_t": int, "mech_tab": str, "mech_stats_n": int, "pretrained_protocol": str, "mech_with_*": str,
             "mech_cmp_*": str,
             **ui.explore.URL_STATE, handwriting.MECH_SET: str, handwriting.MECH_IDX: int,
             **intervene.URL_STATE}
ui.urlstate.restore_from_url(URL_STATE)
ui.frontend.charts_when_idle()  # no plotly chart on the first view; the other tabs have them

st.title("Mechanisms")
ui.explore.scroll_up_if_opened()
st.caption("Which of the 6 LSTMs the input attention activates at each image row, what the active ones read "
           "from each other, and whether they specialise by class or row.")

c_ds, c_model = st.columns(2)
with c_ds:
    dataset = ui.pickers.dataset_picker(key="mech_dataset")
all_entries = ui.pickers.entries_or_stop(dataset)
with c_model:
    entry = ui.pickers.main_model_picker(all_entries, key=f"mech_model_{dataset}")
compared = ui.pickers.method_models_picker(all_entries, f"mech_cmp_{dataset}", main=entry,
                                       label="Predictions compared")
loaded = ui.cache.load_or_report(entry)
if loaded is None:
    st.stop()
model, _meta = loaded

ui.pickers.tab_views("mech_tab", {"One input": lambda: one_input_view(dataset, entry, model, compared, all_entries),
                          "Across the test set": lambda: dataset_view(dataset, entry, model, all_entries)})
ui.urlstate.sync_url(URL_STATE)
