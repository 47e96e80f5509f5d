"""Mechanisms across the test set, under the one-input view of the Mechanisms page: inputs that
use the same mechanisms (a block of the active mask matched over the set, LSTMVis's match
view) and what each unit (LSTM) is for. The numbers come from ``core.eval.match``."""

from __future__ import annotations

import numpy as np
import streamlit as st

from core.data.datasets import DATASETS
from core.errors import DataUnavailableError
from core.eval import match
from core.eval.curves import GRID
from core.report.plots import sets, style

from .cache import set_sizes, set_traces, test_data
from .messages import missing_data_note
from .pickers import clamp_state, keep_valid
from .upload import framed_row, upscaled
from .urlstate import url_list

SHOWN = 24  # match thumbnails
PER_ROW = 8
STRIP = 8  # strongest examples per unit
CHART = {"displayModeBar": False}
URL_STATE = {"mech_set_n": int, "mech_blk_t1": int, "mech_blk_t2": int, "mech_blk_units": url_list,
             "mech_blk_thr": int, "mech_unit": str, "mech_unit_noise": float, "mech_more": str}


SCROLL_UP = "_mech_scroll_up"  # set by "Open": the next run starts at the top, at the opened image
_SCROLL_JS = """<script>(() => {{ /* {n} */
  const up = () => {{ const m = document.querySelector('[data-testid="stMain"]');
    if (m) m.scrollTo({{top: 0}}); window.scrollTo(0, 0); }};
  up(); setTimeout(up, 300); setTimeout(up, 1000);
}})();</script>"""


def open_image(i: int) -> None:
    """Make test image ``i`` the page's current input (a callback: runs before the widgets); the
    page then scrolls up to it (``scroll_up_if_opened``)."""
    st.session_state.update(mech_source="Test image", mech_how="Random", mech_idx=int(i))
    st.session_state[SCROLL_UP] = st.session_state.get(SCROLL_UP, 0) + 1


def scroll_up_if_opened() -> None:
    """After "Open" on a thumbnail: back to the top of the page, where the opened image is shown."""
    n = st.session_state.pop(SCROLL_UP, None)
    if n:
        st.html(_SCROLL_JS.format(n=int(n)), unsafe_allow_javascript=True)


def _data(dataset: str):
    try:
        return test_data(dataset)
    except DataUnavailableError as exc:
        missing_data_note(dataset, exc, "there is no set to search")
        return None


def _set(dataset: str, entry, model, data, noise: float = 0.0):
    """The searched set: a fixed subset (seed 0) of the test set, its size chosen here."""
    sizes = set_sizes(len(data))
    keep_valid("mech_set_n", sizes)
    if len(sizes) > 1:
        n = st.select_slider("Images searched (fixed subset of the test set, seed 0)", sizes, key="mech_set_n",
                             help="The masks of these images are computed once per model and kept.")
    else:
        n = sizes[0]
    with st.spinner(f"Tracing {entry.display} on {n} test images (once per model)…"):
        traces = set_traces(entry, model, dataset, data, n, noise)
    return traces


def _thumbs(data, items: list[tuple[int, str, np.ndarray | None]], key: str, per_row: int = PER_ROW) -> None:
    """A grid of thumbnails ``(data index, caption, image or None)`` with an "Open" button each."""
    for start in range(0, len(items), per_row):
        cols = st.columns(per_row)
        for col, (i, caption, shown) in zip(cols, items[start : start + per_row]):
            col.image(upscaled(data.images[i], 56) if shown is None else shown, caption=caption, width="stretch")
            col.button("Open", key=f"{key}_{i}", on_click=open_image, args=(i,), width="stretch")


def match_view(dataset: str, entry, model, mask, unit_names: list, here: int | None) -> None:
    """Block of the current input's mask (rows x units) -> the nearest images of the set."""
    if mask is None:
        st.info(f"{entry.display} has no selection mask (its trace schema has none), so there is no block to "
                "match. Pick a model whose trace has an active mask.")
        return
    data = _data(dataset)
    if data is None:
        return
    T = mask.shape[0]
    t_now = int(st.session_state.get("mech_t", 1))
    mid = t_now if t_now > 3 else (T + 1) // 2  # the first rows are often blank: the same mask everywhere
    for k, default in (("mech_blk_t1", max(1, mid - 2)), ("mech_blk_t2", min(T, mid + 2))):
        clamp_state(k, 1, T)
        st.session_state.setdefault(k, default)
    st.session_state["mech_blk_units"] = [u for u in st.session_state.get("mech_blk_units", unit_names)
                                          if u in unit_names]
    c1, c2 = st.columns(2)
    t1 = c1.slider("First row", 1, T, key="mech_blk_t1")
    t2 = c2.slider("Last row", 1, T, key="mech_blk_t2")
    # a line of its own: every chosen LSTM's chip stays readable (in a third of the width they were cut)
    chosen = st.multiselect("LSTMs", unit_names, key="mech_blk_units")
    if t1 > t2:
        t1, t2 = t2, t1
        st.caption(f"The first row is after the last: rows {t1}-{t2} are searched.")
    if not chosen:
        st.info("Choose at least one LSTM: the block is rows x the chosen LSTMs.")
        return
    block = match.Block(t1, t2, tuple(unit_names.index(u) for u in chosen))
    traces = _set(dataset, entry, model, data)
    exclude = np.flatnonzero(traces.indices == here) if here is not None else ()
    found = match.find_matches(traces.mask, mask, block, exclude=exclude)
    clamp_state("mech_blk_thr", 0, block.cells)
    st.session_state.setdefault("mech_blk_thr", min(block.cells, max(0, round(0.1 * block.cells))))
    thr = st.slider(f"Threshold: at most this many of the block's {block.cells} cells differ", 0, block.cells,
                    key="mech_blk_thr")
    hits = found.within(thr)
    classes = list(DATASETS[dataset].classes)
    st.markdown(f"**{hits} of {len(found.order)} images match** rows {t1}-{t2} x {', '.join(chosen)} within "
                f"{thr} {'cell' if thr == 1 else 'cells'} (Hamming distance on the block; the current input "
                + ("left out)." if len(exclude) else "is not in the set)."))
    items = [(int(traces.indices[p]), f"{classes[traces.labels[p]]} · d={d}", None)
             for p, d in zip(found.order[: min(SHOWN, hits)], found.distance[: min(SHOWN, hits)])]
    if items:
        _thumbs(data, items, "mech_match")
        if hits > SHOWN:
            st.caption(f"The {SHOWN} nearest are shown (d = cells that differ; ties in test-set order).")
    counts = found.class_counts(traces.labels, len(classes), thr)
    st.plotly_chart(sets.class_share_figure(counts, np.bincount(traces.labels, minlength=len(classes)), classes),
                    key="mech_match_hist", config=CHART)


def unit_view(dataset: str, entry, model, unit_names: list) -> None:
    """Per unit: the images and rows that select it most, its rates per class and row, and how
    its selection shifts under noise."""
    data = _data(dataset)
    if data is None:
        return
    keep_valid("mech_unit", unit_names)
    c1, c2 = st.columns([1, 3])
    name = c1.selectbox("Unit", unit_names, key="mech_unit")
    u = unit_names.index(name)
    with c2:
        traces = _set(dataset, entry, model, data)
    classes = list(DATASETS[dataset].classes)
    where = "is selected most strongly" if traces.mask is not None else "is most active"  # no mask: nothing selects
    st.markdown(f"**Where {name} {where}** (highest {traces.score_label} on one row; the row is framed)")
    items = [(int(traces.indices[p]), f"{classes[traces.labels[p]]}, row {row}: {s:.2f}",
              framed_row(data.images[traces.indices[p]], row, side=112))
             for p, row, s in match.top_rows(traces.score, u, STRIP)]
    _thumbs(data, items, "mech_unit_open", per_row=STRIP)
    values = traces.mask if traces.mask is not None else traces.score
    what = "share of rows active" if traces.mask is not None else f"mean {traces.score_label}"
    per_class, per_row = match.unit_rates(values, traces.labels, len(classes), u)
    st.plotly_chart(sets.unit_profile_figure(per_class, per_row, classes, value_label=what,
                                              color=style.method_color(entry.model)),
                    key="mech_unit_profile", config=CHART)
    if traces.mask is None:
        return
    default = st.session_state.get("rb_strength_gaussian", 0.01)
    st.session_state.setdefault("mech_unit_noise", default if default in GRID[1:] else 0.01)
    keep_valid("mech_unit_noise", GRID[1:])
    var = st.select_slider("Gaussian noise variance", GRID[1:], key="mech_unit_noise",
                           format_func=lambda v: f"{v:.2f}" + (" (paper)" if v == 0.01 else ""),
                           help="The same seeded noise draw as on the Robustness page.")
    with st.spinner(f"Tracing {len(traces)} noisy images…"):
        noisy = set_traces(entry, model, dataset, data, len(traces), var)
    shift = match.selection_shift(traces.mask, noisy.mask)
    st.plotly_chart(sets.unit_shift_figure(shift, unit_names, level=f"noise {var:.2f}", unit=u),
                    key="mech_unit_shift", config=CHART)
    st.caption(f"{name}: active in {shift.clean[u] * 100:.1f}% of rows clean, {shift.noisy[u] * 100:.1f}% with "
               f"noise of variance {var:.2f}; {shift.switched_on[u] * 100:.1f}% of its rows switched on and "
               f"{shift.switched_off[u] * 100:.1f}% off ({len(traces)} images x {traces.mask.shape[1]} rows).")


def images_word(data) -> str:
    """What the images of ``data`` are: "sample images" (the bundled sample) or "test images"."""
    return "sample images" if getattr(data, "is_sample", False) else "test images"


def error_on_subset(error: float, n: int, data, entry=None) -> str:
    """An error measured on ``n`` images, said in the number itself, with the model's recorded
    full-test-set error beside it when known: ``"2.4 % on 1,000 sample images; full test set 1.57 %"``."""
    text = f"{error * 100:.1f} % on {n:,} {images_word(data)}"
    full = (getattr(entry, "metrics", None) or {}).get("test_error")
    if isinstance(full, (int, float)) and full == full:
        text += f"; full test set {full * 100:.2f} %"
    return text
