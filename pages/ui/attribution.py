"""Mechanisms, "Which pixels drive it": Integrated Gradients of the prediction (every model) and of
an LSTM's selection margin (the RIM), drawn over the input (core computes and words, this lays out)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from core.eval import interventions as ivs
from core.report import intervene as iv_text
from core.report.plots import interventions as iv_plots

from . import cache

CHART = {"displayModeBar": False}

IG_STEPS = (32, 64, 128, 256)


@st.cache_data(max_entries=64, show_spinner=False)
def _attribution(_model, model_key: str, mtime: float, image: np.ndarray, what: str, row: int, unit: int, steps: int,
                 frozen: bool, margin: bool):
    from core.eval import attribution

    if what == "prediction":
        return attribution.prediction_attribution(_model, image, steps=steps, frozen=frozen)
    return attribution.selection_attribution(_model, image, row, unit, steps=steps, frozen=frozen, margin=margin)


def attribution_view(entry, model, image: np.ndarray, unit_names: list[str], classes: list[str]) -> None:
    """Integrated Gradients of the prediction (every model) and of one LSTM's selection margin
    (or raw weight) at the timeline's current row (RIM), drawn over the input."""
    from core.eval import attribution

    T = image.shape[0]
    row = min(max(1, int(st.session_state.get("mech_t", 1))), T)
    c1, c2 = st.columns([2, 1])
    selects = ivs.supports(model)
    whats = ["prediction"] + (["selection"] if selects else [])
    if st.session_state.get("ig_what") not in whats:
        st.session_state["ig_what"] = "prediction"
    what = c1.radio("Attribute", whats, horizontal=True, key="ig_what",
                    format_func=lambda w: "the predicted class's logit" if w == "prediction"
                    else f"an LSTM's selection at row {row} (the timeline's row)")
    if st.session_state.get("ig_steps") not in IG_STEPS:
        st.session_state["ig_steps"] = attribution.STEPS
    steps = c2.select_slider("Integration points", IG_STEPS, key="ig_steps")
    unit, frozen, margin = 0, False, True
    if selects:
        st.session_state.setdefault("ig_frozen", True)
        frozen = st.toggle("Hold the image's own active mask fixed along the path", key="ig_frozen",
                           help="A smooth function of the pixels, equal to the model on the image: its shares add "
                                "up. Off: the model as it runs, whose mask switches along the path leave a gap.")
    if what == "selection":
        names = list(unit_names)
        pick = st.selectbox("LSTM", names, key="ig_unit")
        unit = names.index(pick)
        st.session_state.setdefault("ig_margin", True)
        margin = st.toggle("Its margin against its competitor (else its raw attention weight)", key="ig_margin",
                           help="The choice depends on the LSTM's rank: the margin is its weight minus that of the "
                                f"{model.config.k_active + 1}-th ranked LSTM when it is active, of the "
                                f"{model.config.k_active}-th when it is not.")
    with st.spinner("Integrated Gradients…"):
        a = _attribution(model, entry.key, cache.entry_mtime(entry), image, what, row, unit, int(steps),
                         bool(frozen), bool(margin))
    label, text = iv_text.attribution_caption(a, classes, selects, list(unit_names))
    c_img, c_txt = st.columns([3, 2])
    c_img.plotly_chart(iv_plots.overlay_figure(image, a.pixels, row, f"Integrated Gradients of {label}"),
                       key="ig_overlay", config=CHART)
    with c_txt:
        st.markdown(iv_text.attribution_path(a, int(steps)))
        st.caption(text)
