"""Mechanisms, "Intervene": switch LSTMs on and off on one input and see what the choice does;
knock each LSTM out across the test set (core.eval.interventions computes, this draws)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from core.eval import interventions as ivs
from core.models.rim import SELECTIONS, Intervention
from core.report.plots import interventions as iv_plots
from core.report.plots import traces

from . import cache
from .urlstate import url_bool

CHART = {"displayModeBar": False}
CELLS = "iv_cells"  # forced cells as text "row.lstm.value;..." (1-based row and LSTM, value 0/1)
URL_STATE = {CELLS: str, "iv_alpha": float, "iv_selection": str, "iv_seed": int, "iv_ko_*": url_bool, "iv_knock": url_bool,
             "iv_noise": float, "ig_what": str, "ig_steps": int}
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


KEEP_ON_RESET = ("iv_rows", "iv_knock", "iv_noise")  # the picker of rows, and the set-wide view's


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


def _intervention(T: int, n: int) -> Intervention:
    cells = {c: v for c, v in parse_cells(st.session_state.get(CELLS, "")).items() if c[0] < T and c[1] < n}
    ko = tuple(i for i in range(n) if st.session_state.get(f"iv_ko_{i + 1}"))
    selection = st.session_state.get("iv_selection", "attention")
    force = None
    if cells:
        force = ivs.force_grid(T, n, on=[c for c, v in cells.items() if v], off=[c for c, v in cells.items() if not v])
    return Intervention(force=force, knock_out=ko, alpha=st.session_state.get("iv_alpha"),
                        selection=None if selection == "attention" else selection,
                        seed=int(st.session_state.get("iv_seed", 0)) if selection == "random" else None)


@st.cache_data(max_entries=256, show_spinner=False)
def _run_one(_model, model_key: str, mtime: float, image: np.ndarray, what: str, _iv: Intervention):
    """Probabilities [C] and mask [T, n] of one image under an intervention (``what`` keys it)."""
    logits, trace = ivs.run(_model, np.asarray(image)[None], _iv, with_trace=True)
    z = logits[0] - logits[0].max()
    return np.exp(z) / np.exp(z).sum(), trace["active"][0]


def _describe(iv: Intervention) -> str:
    force = "" if iv.force is None else np.asarray(iv.force).tobytes().hex()
    return f"{force}|{iv.knock_out}|{iv.alpha}|{iv.selection}|{iv.seed}"




def _clicked(event, names: list[str]) -> None:
    """A click on a cell of the mask: a free cell is forced to the opposite of its state, a
    forced one goes back to the choice. Each selection event is handled once."""
    points = (event or {}).get("selection", {}).get("points", []) if isinstance(event, dict) else \
        getattr(getattr(event, "selection", None), "points", []) or []
    sig = str([(p.get("x"), p.get("y")) for p in points])
    if not points or st.session_state.get("_iv_click") == sig:
        return
    st.session_state["_iv_click"] = sig
    cells = parse_cells(st.session_state.get(CELLS, ""))
    after = st.session_state.get("_iv_after")
    for p in points:
        if p.get("y") not in names or p.get("x") is None:
            continue
        t, i = int(round(float(p["x"]))) - 1, names.index(p["y"])
        if (t, i) in cells:
            cells.pop((t, i))
        else:
            cells[(t, i)] = 0 if after is not None and after[t, i] > 0.5 else 1
    st.session_state[CELLS] = cells_text(cells)
    st.rerun()


def intervene_view(entry, model, image: np.ndarray, unit_names: list[str], classes: list[str]) -> None:
    """One input: force cells, knock out LSTMs, set alpha and the selection; the new prediction
    beside the original and the mask after the intervention."""
    if not ivs.supports(model):
        st.info("Interventions act on the RIM's selection of LSTMs; pick a RIM model above.")
        return
    T, n = image.shape[0], model.config.num_units
    names = list(unit_names)
    c_cells, c_run = st.columns([3, 2])
    with c_cells:
        t_now = int(st.session_state.get("mech_t", 1))
        if "iv_rows" not in st.session_state or max(st.session_state["iv_rows"]) > T:
            st.session_state["iv_rows"] = (min(t_now, T), min(t_now, T))
        st.slider("Rows to set", 1, T, key="iv_rows", help="A range of image rows (timesteps), 1-based.")
        st.multiselect("LSTMs to set", names, key="iv_units")
        b1, b2, b3 = st.columns(3)
        b1.button("Force on", key="iv_on", on_click=_set_cells, args=(1, names), use_container_width=True)
        b2.button("Force off", key="iv_off", on_click=_set_cells, args=(0, names), use_container_width=True)
        b3.button("Back to the choice", key="iv_clear", on_click=_set_cells, args=(None, names),
                  use_container_width=True)
        st.caption("Or click a cell of the mask below: a free cell is forced to the opposite of its state, a forced "
                   "one goes back to the attention's choice. A forced cell does not push another LSTM out.")
    with c_run:
        st.markdown("Knock out (never active on this input)")
        cols = st.columns(min(n, 3))
        for i in range(n):
            cols[i % len(cols)].toggle(names[i], key=f"iv_ko_{i + 1}")
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

    iv = _intervention(T, n)
    mtime = cache.entry_mtime(entry)
    p0, m0 = _run_one(model, entry.key, mtime, image, "none", None)
    p1, m1 = _run_one(model, entry.key, mtime, image, _describe(iv), iv)
    st.session_state["_iv_after"] = m1
    pinned = ivs.pinned_cells(iv, T, n)
    changed = ivs.downstream_changes(m0, m1, iv)
    y0, y1 = int(np.argmax(p0)), int(np.argmax(p1))
    st.markdown(f"**Prediction**: original **{classes[y0]}** ({p0[y0] * 100:.1f}%) → after the intervention "
                f"**{classes[y1]}** ({p1[y1] * 100:.1f}%)" + (" — changed" if y0 != y1 else " — unchanged"))
    c_p, c_m = st.columns([2, 3])
    with c_p:
        rows = [{"label": "original", "method": entry.model, "probs": p0},
                {"label": "after the intervention", "method": "parallel_lstm", "probs": p1}]
        st.plotly_chart(traces.probability_figure(rows, classes, height=300), key="iv_probs", config=CHART)
    with c_m:
        event = st.plotly_chart(iv_plots.mask_figure(m0, m1, pinned, changed, names, "active mask after the intervention"),
                                key="iv_mask", config=CHART, on_select="rerun", selection_mode="points")
    n_changed = int(changed.sum())
    moved = [names[i] for i in np.flatnonzero(changed.any(0))]
    first = int(np.flatnonzero(changed.any(1))[0]) + 1 if n_changed else None
    n_set = int(pinned.sum())
    st.caption(f"{n_set} cell{'' if n_set == 1 else 's'} set by the intervention; {n_changed} other "
               f"cell{'' if n_changed == 1 else 's'} changed downstream"
               + (f" (from row {first} on, {', '.join(moved)})" if n_changed else "")
               + f"; {int((m0 != m1).sum())} of {T * n} cells differ from the original mask. "
               f"Probability of {classes[y0]}: {p0[y0] * 100:.1f}% → {p1[y0] * 100:.1f}%.")
    _clicked(event, names)


# --------------------------------------------------------------------------- across the set


@st.cache_resource(show_spinner=False)
def _tables() -> dict:
    """Computed knock-out tables, shared by the sessions: (model, data, n, noise) -> table."""
    return {}


def _table(model, model_key: str, mtime: float, data_key: str, images, labels, classes: list[str], n: int,
           noise_var: float):
    """The table for this model and subset, computed once (with a progress bar), then cached."""
    from core.eval.robustness_points import fixed_subset

    key = (model_key, mtime, data_key, n, noise_var)
    held = _tables()
    if key not in held:
        idx = fixed_subset(len(images), n, seed=0)
        bar = st.progress(0.0, text=f"Knocking out each LSTM in turn on {len(idx)} images…")
        held[key] = ivs.knockout_table(model, images[idx], labels[idx], classes, noise_var=noise_var,
                                       progress=lambda f, what: bar.progress(f, text=f"Ran: {what}"))
        bar.empty()
        while len(held) > 8:
            held.pop(next(iter(held)))
    return held[key]


def knockout_view(entry, model, data, data_key: str, n: int, classes: list[str]) -> None:
    """Each LSTM knocked out in turn and the selection swapped, on a fixed subset of the test set."""
    import pandas as pd

    if not ivs.supports(model):
        return
    st.subheader("Knock out each LSTM (interventions)")
    if not st.toggle(f"Run each LSTM knocked out, and the selection swapped, on these {min(n, len(data))} images",
                     key="iv_knock", help="12 more runs of the model over the subset, clean and noisy; cached per "
                                          "model after the first time."):
        return
    if st.session_state.get("iv_noise") not in NOISE_LEVELS:
        st.session_state["iv_noise"] = 0.01
    noise = st.select_slider("Noise (Gaussian variance) for the second column", NOISE_LEVELS, key="iv_noise")
    table = _table(model, entry.key, cache.entry_mtime(entry), data_key, data.images, data.labels, list(classes),
                   n, float(noise))
    rows = []
    for v in table.variants:
        rec = {"variant": v.label}
        for condition, what in (("clean", "clean"), ("noisy", f"noise {noise:g}")):
            acc, lo, hi, _ = table.accuracy(v.key, condition)
            rec[f"accuracy {what} %"] = acc * 100
            rec[f"95% CI {what}"] = f"{lo * 100:.1f}–{hi * 100:.1f}"
            rec[f"drop {what} (points)"] = None if v.kind == "intact" else table.drop(v.key, condition)
        rows.append(rec)
    df = pd.DataFrame(rows)
    st.dataframe(df, hide_index=True, column_config={c: st.column_config.NumberColumn(format="%.2f")
                                                     for c in df.columns if "%" in c or "points" in c})
    st.caption(table.caption("clean"))
    st.caption(table.caption("noisy"))
    drops = table.per_class_drops("clean")
    st.plotly_chart(traces.unit_heatmap(drops.T, classes, list(table.unit_names),
                                        x_title="class", colorbar="drop (points)", diverging=True, annotate=True,
                                        title="drop per class when the LSTM is knocked out, clean (points)"),
                    key="iv_class_drops", config=CHART)


# --------------------------------------------------------------------------- which pixels drive it

IG_STEPS = (32, 64, 256)


@st.cache_data(max_entries=64, show_spinner=False)
def _attribution(_model, model_key: str, mtime: float, image: np.ndarray, what: str, row: int, unit: int, steps: int):
    from core.eval import attribution

    if what == "prediction":
        return attribution.prediction_attribution(_model, image, steps=steps)
    return attribution.selection_attribution(_model, image, row, unit, steps=steps)




def attribution_view(entry, model, image: np.ndarray, unit_names: list[str], classes: list[str]) -> None:
    """Integrated Gradients of the prediction (every model) and of one LSTM's selection score at
    the timeline's current row (RIM), drawn over the input."""
    from core.eval import attribution

    T = image.shape[0]
    row = min(max(1, int(st.session_state.get("mech_t", 1))), T)
    c1, c2 = st.columns([2, 1])
    whats = ["prediction"] + (["selection"] if ivs.supports(model) else [])
    if st.session_state.get("ig_what") not in whats:
        st.session_state["ig_what"] = "prediction"
    what = c1.radio("Attribute", whats, horizontal=True, key="ig_what",
                    format_func=lambda w: "the predicted class's logit" if w == "prediction"
                    else f"an LSTM's selection score at row {row} (the timeline's row)")
    if st.session_state.get("ig_steps") not in IG_STEPS:
        st.session_state["ig_steps"] = attribution.STEPS
    steps = c2.select_slider("Integration points", IG_STEPS, key="ig_steps")
    unit = 0
    if what == "selection":
        names = list(unit_names)
        pick = st.selectbox("LSTM", names, key="ig_unit")
        unit = names.index(pick)
    with st.spinner("Integrated Gradients…"):
        a = _attribution(model, entry.key, cache.entry_mtime(entry), image, what, row, unit, int(steps))
    label = a.target
    if what == "prediction":
        cls = int(a.target.rsplit(" ", 1)[-1])
        label = f"the logit of {classes[cls]}"
    c_img, c_txt = st.columns([3, 2])
    c_img.plotly_chart(iv_plots.overlay_figure(image, a.pixels, row, f"Integrated Gradients of {label}"), key="ig_overlay",
                       config=CHART)
    with c_txt:
        st.markdown(f"Baseline: a black image; {int(steps)} points on the straight path from it to the input. "
                    "Red pixels raise the score, blue ones lower it; the framed row is the timeline's.")
        text = a.summary()
        st.caption(text[0].upper() + text[1:] + ". " + (
            "Completeness holds within the bound." if a.complete else
            "The gap is above the bound: " + ("the attention's top-k selection switches LSTMs along the path, and "
                                              "a gradient does not see such jumps." if ivs.supports(model) and
                                              getattr(model.config, "selection", "") != "all" else
                                              "more integration points shrink it.")))
