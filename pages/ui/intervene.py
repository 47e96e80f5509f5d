"""Mechanisms, "Intervene": switch LSTMs on and off on one input, take them out, patch from a donor
and see what the choice does; the same across the test set (core computes and words, this lays out)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from core.data.datasets import DATASETS
from core.errors import RimscopeError
from core.eval import interventions as ivs
from core.eval import patching
from core.models.rim import SELECTIONS, Intervention
from core.paths import results_dir
from core.report import intervene as iv_text
from core.report import interventions as iv_words
from core.report.plots import svg, traces
from core.report.plots.style import INTERVENED_COLOR

from . import cache, svg_view, upload
from .urlstate import url_bool

CHART = {"displayModeBar": False}
CELLS = "iv_cells"  # forced cells as text "row.lstm.value;..." (1-based row and LSTM, value 0/1)
URL_STATE = {CELLS: str, "iv_alpha": float, "iv_selection": str, "iv_seed": int, "iv_ko_*": url_bool, "iv_knock": url_bool,
             "iv_noise": float, "iv_mode": str, "iv_isolate": url_bool, "iv_fill": str, "iv_patch": url_bool,
             "iv_donor": int, "iv_patch_what": str, "iv_patch_from": str, "iv_set_isolate": url_bool, "iv_set_fill": str,
             "iv_class_mode": str, "iv_patch_set": url_bool, "iv_pairing": str, "ig_what": str, "ig_steps": int,
             "ig_frozen": url_bool, "ig_margin": url_bool}
FILLS = {"zeros": "zeros", "mean": "its mean over training images"}
PATCH_WHAT = {"state": "state (h, c) of the chosen LSTMs", "mask": "whole selection mask"}
PATCH_FROM = {"test": "a test image", "draw": "a drawing", "upload": "an image file",
              "clean": "this input, clean, into its noisy copy"}
NOISE_LEVELS = (0.005, 0.01, 0.02, 0.05)


def parse_cells(text: str) -> dict[tuple[int, int], int]:
    """``"3.2.1;4.2.0"`` -> {(row 2, LSTM 1): 1, (row 3, LSTM 1): 0} (0-based keys)."""
    out = {}
    for part in str(text or "").split(";"):
        try:
            t, i, v = (int(p) for p in part.split("."))
        except ValueError:
            continue
        if t >= 1 and i >= 1 and v in (0, 1):
            out[(t - 1, i - 1)] = v
    return out


def cells_text(cells: dict[tuple[int, int], int]) -> str:
    return ";".join(f"{t + 1}.{i + 1}.{v}" for (t, i), v in sorted(cells.items()))


def _keys() -> list[str]:
    return [k for k in st.session_state if isinstance(k, str) and k.startswith("iv_")]


KEEP_ON_RESET = ("iv_rows", "iv_knock", "iv_noise", "iv_set_isolate", "iv_set_fill", "iv_class_mode", "iv_patch_set",
                 "iv_pairing")  # the picker of rows, and the set-wide view's


def _reset() -> None:
    """Back to the model as trained: no forced cell, no knock-out, its alpha and selection."""
    for key in _keys():
        if key not in KEEP_ON_RESET:
            del st.session_state[key]
    for key in [k for k in st.query_params if k.startswith("iv_") and k not in KEEP_ON_RESET]:
        del st.query_params[key]
    st.session_state.pop("_iv_click", None)


def _set_cells(value: int | None, names: list[str]) -> None:
    """Force the picked rows x LSTMs on (1), off (0), or back to the choice (None)."""
    cells = parse_cells(st.session_state.get(CELLS, ""))
    lo, hi = st.session_state.get("iv_rows", (1, 1))
    for name in st.session_state.get("iv_units", []):
        i = names.index(name)
        for t in range(int(lo) - 1, int(hi)):
            if value is None:
                cells.pop((t, i), None)
            else:
                cells[(t, i)] = value
    st.session_state[CELLS] = cells_text(cells)


@st.cache_data(max_entries=16, show_spinner=False)
def _mean_state(_model, model_key: str, mtime: float, dataset: str):
    """The read-out-only knock-out's replacement: each LSTM's mean final state over up to 1,000
    training images (the bundled sample offline), and where they come from."""
    from core.data.datasets import load_dataset

    train = load_dataset(dataset, "train", allow_sample=True)
    images = train.images[:1000]
    return ivs.mean_final_state(_model, images), f"{len(images):,} training images ({train.source})"


@st.cache_data(max_entries=64, show_spinner=False)
def _donor(_model, model_key: str, mtime: float, image: np.ndarray):
    """Donor states (h, c) [T, n, H] and mask [T, n] of one image."""
    _, trace = ivs.run(_model, np.asarray(image)[None], with_states=True)
    return trace["h"][0], trace["c"][0], trace["active"][0]


def _patch(entry, model, image: np.ndarray, data, T: int, names: list[str]) -> dict | None:
    """The donor and what to patch from it, from the widgets (None: no patching, or no usable
    donor yet: the controls say why)."""
    if not st.session_state.get("iv_patch"):
        return None
    recipient, source = image, st.session_state.get("iv_patch_from")
    if source == "clean":
        donor, idx, recipient = image, "clean", ivs.noisy_copy(image)
    elif source in ("draw", "upload"):
        donor = st.session_state.get("_iv_donor_image")
        if donor is None:
            return None
        idx = f"{source}:{hash(np.asarray(donor).tobytes())}"
    elif data is not None:
        idx = int(st.session_state.get("iv_donor", 0)) % len(data.images)
        donor = np.asarray(data.images[idx])
    else:
        return None
    if donor.shape != image.shape:
        st.warning(f"The donor is {donor.shape}, this input {image.shape}: a donor must be the same size.")
        return None
    h, c, mask = _donor(model, entry.key, cache.entry_mtime(entry), donor)
    lo, hi = st.session_state.get("iv_patch_rows", (1, T))
    units = [names.index(u) for u in st.session_state.get("iv_patch_units", []) if u in names]
    return {"what": st.session_state.get("iv_patch_what", "state"), "units": units, "rows": (int(lo), min(int(hi), T)),
            "h": h, "c": c, "mask": mask, "donor": idx, "recipient": recipient}


def _intervention(model, T: int, n: int, mean_state, patch) -> Intervention:
    cells = {c: v for c, v in parse_cells(st.session_state.get(CELLS, "")).items() if c[0] < T and c[1] < n}
    ko = tuple(i for i in range(n) if st.session_state.get(f"iv_ko_{i + 1}"))
    selection = st.session_state.get("iv_selection", "attention")
    return ivs.one_input(model, T, cells=cells, knock_out=ko, mode=st.session_state.get("iv_mode", ivs.KNOCKOUTS[0]),
                         isolate=bool(st.session_state.get("iv_isolate")), mean_state=mean_state,
                         alpha=st.session_state.get("iv_alpha"),
                         selection=None if selection == "attention" else selection,
                         seed=int(st.session_state.get("iv_seed", 0)) if selection == "random" else None, patch=patch)


@st.cache_data(max_entries=256, show_spinner=False)
def _run_one(_model, model_key: str, mtime: float, image: np.ndarray, what: str, _iv: Intervention):
    """Probabilities [C] and mask [T, n] of one image under an intervention (``what`` keys it)."""
    logits, trace = ivs.run(_model, np.asarray(image)[None], _iv, with_trace=True)
    return ivs.probabilities(logits[0]), trace["active"][0]


def _describe(iv: Intervention, patch: dict | None) -> str:
    def b(a):
        return "" if a is None else np.asarray(a).tobytes().hex()

    donor = "" if patch is None else f"{patch['donor']}|{patch['what']}|{patch['units']}|{patch['rows']}"
    return f"{b(iv.force)}|{iv.knock_out}|{iv.remove}|{iv.isolate}|{b(iv.readout)}|{iv.alpha}|{iv.selection}|" \
           f"{iv.seed}|{donor}"


def _clicked(cell: str | None, names: list[str]) -> None:
    """A click on a cell of the mask (``"t,i"``, 0-based): a free cell is forced to the opposite of
    its state, a forced one goes back to the choice. The component reports each click once."""
    try:
        t, i = (int(v) for v in str(cell).split(","))
    except ValueError:
        return
    after = st.session_state.get("_iv_after")
    if i >= len(names) or after is None or t >= after.shape[0]:
        return
    cells = parse_cells(st.session_state.get(CELLS, ""))
    if (t, i) in cells:
        cells.pop((t, i))
    else:
        cells[(t, i)] = 0 if after[t, i] > 0.5 else 1
    st.session_state[CELLS] = cells_text(cells)
    st.rerun()


def _knockout_controls(n: int, names: list[str], k: int) -> None:
    st.markdown("Take out (for the whole input)")
    cols = st.columns(min(n, 3))
    for i in range(n):
        cols[i % len(cols)].toggle(names[i], key=f"iv_ko_{i + 1}")
    if st.session_state.get("iv_mode") not in ivs.KNOCKOUTS:
        st.session_state["iv_mode"] = ivs.KNOCKOUTS[0]
    mode = st.radio("How", list(ivs.KNOCKOUTS), horizontal=True, key="iv_mode",
                    format_func=lambda m: iv_words.MODE_SHORT[m],
                    help=" ".join(iv_text.knockout_help(m, k) for m in ivs.KNOCKOUTS))
    if mode == "readout":
        if st.session_state.get("iv_fill") not in FILLS:
            st.session_state["iv_fill"] = "zeros"
        st.radio("Final state replaced by", list(FILLS), horizontal=True, key="iv_fill", format_func=FILLS.get)
    else:
        st.toggle("Out of the communication too", key="iv_isolate",
                  help="No reader attends to the taken-out LSTM: its key leaves every communication softmax.")


def patch_sources(dataset: str, has_test: bool) -> list[str]:
    """The donors offered: a test image (when the test set is there), a drawing (grey data sets),
    an image file, and this input's clean copy into its noisy one."""
    grey = DATASETS[dataset].channels == 1
    return [k for k in PATCH_FROM if (k != "test" or has_test) and (k != "draw" or grey)]


def _rows_slider(label: str, key: str, T: int, help: str | None = None) -> tuple[int, int]:
    """A range slider over the image rows, the rows it holds said in words under it ("Rows 3-7 of
    28", "Row 5 of 28"): its own value labels are blank (``format``), since both ends on one row
    draw two labels side by side over one thumb."""
    lo, hi = st.slider(label, 1, T, key=key, format=" ", help=help)
    st.caption(f"Row {lo} of {T}" if lo == hi else f"Rows {lo}-{hi} of {T}")
    return lo, hi


def _patch_controls(dataset: str, T: int, names: list[str], n_test: int) -> None:
    with st.expander("Patch from a donor input", expanded=bool(st.session_state.get("iv_patch"))):
        st.toggle("Patch", key="iv_patch", help="Replace, on the chosen rows, one LSTM's state or the whole "
                                                 "selection mask with what the donor image had there.")
        sources = patch_sources(dataset, n_test > 0)
        if st.session_state.get("iv_patch_from") not in sources:
            st.session_state["iv_patch_from"] = sources[0]
        source = st.radio("Donor", sources, horizontal=True, key="iv_patch_from", format_func=PATCH_FROM.get,
                          help="Clean into noisy: the input with Gaussian noise (variance "
                               f"{ivs.NOISE_VAR:g}) runs, with states or mask from the clean input.")
        if source == "test":
            st.session_state.setdefault("iv_donor", 0)
            st.number_input(f"Donor: test image (0-{n_test - 1})", 0, max(n_test - 1, 0), key="iv_donor")
        elif source == "draw":
            st.session_state["_iv_donor_image"] = upload.usable_array(
                upload.drawn_image(dataset, "iv_donor", side=200), show_steps=True)
        elif source == "upload":
            st.session_state["_iv_donor_image"] = upload.usable_array(
                upload.uploaded_image(dataset, "iv_donor_upload", "Upload the donor image: it is prepared like the "
                                                                  "input (cropped, scaled and centred)."),
                show_steps=True)
        if st.session_state.get("iv_patch_what") not in PATCH_WHAT:
            st.session_state["iv_patch_what"] = "state"
        what = st.radio("What", list(PATCH_WHAT), horizontal=True, key="iv_patch_what", format_func=PATCH_WHAT.get)
        if "iv_patch_rows" not in st.session_state or max(st.session_state["iv_patch_rows"]) > T:
            st.session_state["iv_patch_rows"] = (1, T)
        _rows_slider("Rows to patch", "iv_patch_rows", T)
        if what == "state":
            st.multiselect("LSTMs to patch", names, key="iv_patch_units")


def intervene_view(entry, model, image: np.ndarray, unit_names: list[str], classes: list[str]) -> None:
    """One input: force cells, take LSTMs out (three ways), set alpha and the selection, patch
    from a donor; the new prediction beside the original and the mask after the intervention."""
    if not ivs.supports(model):
        st.info("Interventions act on the RIM's selection of LSTMs; pick a RIM model above.")
        return
    T, n, k = image.shape[0], model.config.num_units, model.config.k_active
    names = list(unit_names)
    try:
        data = cache.test_data(entry.dataset)
    except RimscopeError:  # no test set to take a donor from: everything else still works
        data = None
    c_cells, c_run = st.columns([3, 2])
    with c_cells:
        t_now = int(st.session_state.get("mech_t", 1))
        if "iv_rows" not in st.session_state or max(st.session_state["iv_rows"]) > T:
            st.session_state["iv_rows"] = (min(t_now, T), min(t_now, T))
        _rows_slider("Rows to set", "iv_rows", T, help="A range of image rows (timesteps), 1-based.")
        st.multiselect("LSTMs to set", names, key="iv_units")
        b1, b2, b3 = st.columns(3)
        b1.button("Force on", key="iv_on", on_click=_set_cells, args=(1, names), use_container_width=True)
        b2.button("Force off", key="iv_off", on_click=_set_cells, args=(0, names), use_container_width=True)
        b3.button("Back to the choice", key="iv_clear", on_click=_set_cells, args=(None, names),
                  use_container_width=True)
        st.caption("Or click a cell of the mask below: a free cell is forced to the opposite of its state, a forced "
                   "one goes back to the attention's choice. A forced cell does not push another LSTM out.")
        _patch_controls(entry.dataset, T, names, 0 if data is None else len(data.images))
    with c_run:
        _knockout_controls(n, names, k)
        st.session_state.setdefault("iv_alpha", float(model.config.alpha))
        st.slider("Communication share alpha", 0.0, 1.0, step=0.05, key="iv_alpha",
                  help=f"Trained with alpha = {model.config.alpha:g}.")
        if st.session_state.get("iv_selection") not in SELECTIONS:
            st.session_state["iv_selection"] = "attention"
        sel = st.radio("Selection", list(SELECTIONS), horizontal=True, key="iv_selection",
                       help="The same weights with another rule for who is active: the attention's top k, k drawn at "
                            "random (seeded) or all.")
        if sel == "random":
            st.session_state.setdefault("iv_seed", 0)
            st.number_input("Seed of the random selection", 0, 10_000, key="iv_seed")
        st.button("Reset", key="iv_reset", on_click=_reset, type="primary")

    mtime = cache.entry_mtime(entry)
    mean_state = None
    if st.session_state.get("iv_mode") == "readout" and st.session_state.get("iv_fill") == "mean":
        mean_state, _ = _mean_state(model, entry.key, mtime, entry.dataset)
    patch = _patch(entry, model, image, data, T, names)
    iv = _intervention(model, T, n, mean_state, patch)
    recipient = image if patch is None else patch["recipient"]
    p0, m0 = _run_one(model, entry.key, mtime, recipient, "none", None)
    p1, m1 = _run_one(model, entry.key, mtime, recipient, _describe(iv, patch), iv)
    if recipient is not image:
        st.caption(iv_text.recipient_note(ivs.NOISE_VAR))
    st.session_state["_iv_after"] = m1
    pinned = ivs.pinned_cells(iv, T, n)
    changed = ivs.downstream_changes(m0, m1, iv)
    st.markdown(iv_text.prediction_line(classes, p0, p1))
    c_p, c_m = st.columns([2, 3])
    with c_p:
        if np.array_equal(p0, p1) and np.array_equal(m0, m1):  # one chart less on the page's first view
            set_ = (bool(pinned.any()) or patch is not None or bool(iv.knock_out) or bool(iv.remove)
                    or iv.readout is not None or iv.selection is not None
                    or float(st.session_state["iv_alpha"]) != float(model.config.alpha))
            st.caption(iv_text.unchanged_note(set_))
        else:
            rows = [{"label": "original", "method": entry.model, "probs": p0},
                    {"label": "after the intervention", "method": entry.model, "color": INTERVENED_COLOR,
                     "probs": p1}]
            with st.container(key="iv_probs"):
                st.markdown("**Class probabilities** (%)")
                st.table(traces.probability_table(rows, classes))
    with c_m:
        clicked = svg_view.clickable(svg.mask_svg(m0, m1, pinned, changed, names, "active mask after the intervention"),
                                     key="iv_mask")
    st.caption(iv_text.change_caption(classes, p0, p1, m0, m1, pinned, changed, names))
    if clicked:
        _clicked(clicked, names)


# --------------------------------------------------------------------------- across the set


@st.cache_resource(show_spinner=False)
def _tables() -> dict:
    """Computed knock-out and patching tables, shared by the sessions: key -> table."""
    return {}


def _held(key: tuple, compute, what: str):
    """A table computed once (with a progress bar), then cached (eight at most)."""
    held = _tables()
    if key not in held:
        bar = st.progress(0.0, text=what)
        held[key] = compute(lambda f, done: bar.progress(f, text=f"Ran: {done}"))
        bar.empty()
        while len(held) > 8:
            held.pop(next(iter(held)))
    return held[key]


def _subset(images, labels, n: int):
    from core.eval.robustness_points import fixed_subset

    idx = fixed_subset(len(images), n, seed=0)
    return images[idx], labels[idx]


def _patching_view(entry, model, images, labels, key: tuple) -> None:
    """Patching across the subset: the share of predictions that move to the donor's."""
    if not st.toggle("Patch each LSTM's state, and the mask, from a donor across these images", key="iv_patch_set",
                     help=f"{len(model.unit_names) * len(patching.BANDS) + len(patching.BANDS)} runs of the model over the "
                          "pairs; cached per model after the first time."):
        return
    pairings = {"class": "donor of another class", "noise": "clean donor into its noisy self"}
    if st.session_state.get("iv_pairing") not in pairings:
        st.session_state["iv_pairing"] = "class"
    pairing = st.radio("Pairs", list(pairings), horizontal=True, key="iv_pairing", format_func=pairings.get)
    rec, don = patching.pairs(images, labels, pairing)
    pt = _held((*key, "patch", pairing), lambda progress: patching.patching_table(model, rec, don, pairing=pairing,
                                                                             progress=progress),
               f"Patching on {len(images)} pairs…")
    st.dataframe(iv_text.patch_frame(pt), hide_index=True)
    st.caption(iv_text.patch_caption(pt))


def _class_views(table, classes: list[str]) -> None:
    """Per-class drops: a total effect (removed or switched off) beside the direct one (read-out only)."""
    totals = [m for m in table.modes if m != "readout"]
    if st.session_state.get("iv_class_mode") not in totals:
        st.session_state["iv_class_mode"] = totals[0]
    mode = st.radio("Per class, left", totals, horizontal=True, key="iv_class_mode",
                    format_func=lambda m: iv_words.MODE_SHORT[m],
                    help="Left the total effect of taking the LSTM out, right its direct effect (read-out only).")
    cols = st.columns(2)
    for col, m in zip(cols, [mode, "readout"], strict=True):
        drops = table.per_class_drops(m, "clean")
        col.plotly_chart(traces.unit_heatmap(drops.T, classes, list(table.unit_names), x_title="class",
                                             colorbar="drop (points)", diverging=True, annotate=True,
                                             title=f"drop per class, LSTM {iv_words.MODE_SHORT[m]}, clean (points)"),
                         key=f"iv_class_drops_{m if m == 'readout' else 'total'}", config=CHART)


def _study_view() -> None:
    """The shipped study over several trained networks per set (results/interventions), read from
    its tables: what holds across networks, beside this one model's table below."""
    from core.report.interventions_block import interventions_markdown

    path = results_dir() / "interventions" / "knockout.csv"
    if path.is_file():
        with st.expander("Across several trained networks per data set (the shipped study, full test sets)"):
            st.markdown(interventions_markdown(results_dir(), link=False))


def knockout_view(entry, model, data, data_key: str, n: int, classes: list[str]) -> None:
    """Each LSTM taken out in turn (three ways) and the selection swapped, on a fixed subset of
    the test set; then patching across the subset."""
    if not ivs.supports(model):
        return
    st.subheader("Take out each LSTM (interventions)")
    _study_view()
    variants = len(ivs.variants_of(model))
    if not st.toggle(f"Run each LSTM taken out, and the selection swapped, on these {min(n, len(data))} images",
                     key="iv_knock", help=iv_text.runs_text(variants) + "; cached per model after the first time."):
        return
    if st.session_state.get("iv_noise") not in NOISE_LEVELS:
        st.session_state["iv_noise"] = 0.01
    c1, c2, c3 = st.columns(3)
    noise = c1.select_slider("Noise (Gaussian variance) for the second column", NOISE_LEVELS, key="iv_noise")
    if st.session_state.get("iv_set_fill") not in FILLS:
        st.session_state["iv_set_fill"] = "zeros"
    fill = c2.radio("Read-out only: final state replaced by", list(FILLS), key="iv_set_fill", format_func=FILLS.get)
    isolate = c3.toggle("Taken-out LSTMs also leave the communication", key="iv_set_isolate")
    mtime = cache.entry_mtime(entry)
    mean_state = _mean_state(model, entry.key, mtime, entry.dataset)[0] if fill == "mean" else None
    images, labels = _subset(data.images, data.labels, n)
    key = (entry.key, mtime, data_key, n)
    table = _held((*key, float(noise), fill, bool(isolate)),
                  lambda progress: ivs.knockout_table(model, images, labels, list(classes), noise_var=float(noise),
                                                      isolate=bool(isolate), mean_state=mean_state, progress=progress),
                  f"Taking out each LSTM in turn on {len(images)} images…")
    df = iv_words.frame(table)
    st.dataframe(df, hide_index=True, column_config={c: st.column_config.NumberColumn(format="%.2f")
                                                     for c in df.columns if "%" in c or "points" in c})
    network = f"{entry.display} (one trained network)"
    control = iv_words.no_communication_control(results_dir(), entry.dataset)
    st.caption(iv_words.caption(table, "clean", network=network, control=control))
    st.caption(iv_words.caption(table, "noisy", network=network, control=control))
    _class_views(table, classes)
    _patching_view(entry, model, images, labels, key)
