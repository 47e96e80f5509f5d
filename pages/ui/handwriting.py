"""Robustness's "Other handwriting" view and the Mechanisms input that opens one of its digits.

Real digits from outside MNIST (``core.digit_external``: Semeion, optdigits), each sent through
the upload path as a PNG of dark ink on white paper: every method's accuracy on the chosen
set beside its MNIST test accuracy, and a grid of the digits some method misreads, each with
what every method said and a link that opens it on Mechanisms with its trace.
"""

from __future__ import annotations

from urllib.parse import urlencode

import numpy as np
import pandas as pd
import streamlit as st

from core.report import fmt
from core.report.fmt import short_method_title
from core.studies.handwriting import external as de

from .cache import entry_mtime
from .pickers import keep_valid
from .upload import upscaled

GRID_COLUMNS = 6
GRID_MAX = 24  # misread digits shown at once
SET_KEY = "rb_hw_set"
URL_STATE = {SET_KEY: str, "rb_hw_page": int}
MECH_SET, MECH_IDX = "mech_hw_set", "mech_hw_idx"  # the Mechanisms input's URL keys


@st.cache_data(show_spinner=False, max_entries=4)
def _set(name: str, folder: str) -> de.ExternalSet:
    return de.load_external(name)


@st.cache_data(show_spinner=False, max_entries=4)
def _inputs(name: str, source: str, n: int, _data: de.ExternalSet) -> np.ndarray:
    return de.upload_inputs(_data.x)


@st.cache_data(show_spinner=False, max_entries=64)
def _preds(key: str, mtime: float, name: str, source: str, n: int, _model, _inputs) -> np.ndarray:
    return de.predictions(_model, _inputs)


def load_set(name: str) -> de.ExternalSet:
    from core import paths

    return _set(name, str(paths.handwriting_dir()))


def _pick_set(key: str) -> de.ExternalSet | None:
    """A set picker (radio under ``key``) and the chosen set, or None with the reason shown."""
    keep_valid(key, list(de.SETS))
    name = st.radio("Handwriting set", list(de.SETS), key=key, horizontal=True, format_func=lambda s: de.SETS[s].title)
    try:
        return load_set(name)
    except (OSError, ValueError) as exc:
        st.error(f"The {name} digits cannot be read: {exc}")
        return None


def _source_note(data: de.ExternalSet) -> None:
    if data.full:
        st.caption(f"{len(data.y)} digits from {data.source}. Tuning of the upload path used the even-indexed "
                   "half only; the odd half is the independent check.")
    else:
        st.info(f"Showing the bundled sample: {len(data.y)} digits (20 per digit, all from the odd half). "
                + de.where_to_put(data.name))


def _mnist_accuracy(entry) -> str:
    acc = (entry.metrics or {}).get("test_accuracy")
    return fmt.pct(acc, 1) if isinstance(acc, (int, float)) else "–"


def mechanisms_link(name: str, index: int, entry) -> dict:
    """The query parameters that open this digit on Mechanisms with ``entry``'s trace."""
    return {"mech_dataset": "mnist", "mech_model_mnist": entry.key, "mech_source": "Other handwriting",
            MECH_SET: name, MECH_IDX: str(int(index)), "mech_tab": "One input"}


def handwriting_view(dataset: str, models: dict) -> None:
    """``models``: method -> (entry, loaded model), as the Robustness page picked them."""
    if dataset != "mnist":
        st.info("Other people's handwriting is a test of MNIST models: pick MNIST above.")
        return
    data = _pick_set(SET_KEY)
    if data is None:
        return
    name = data.name
    _source_note(data)
    with st.spinner(f"Sending {len(data.y)} digits through the upload path…"):
        inputs = _inputs(name, data.source, len(data.y), data)
    preds, rows = {}, []
    title = de.SETS[name].title.split(" (")[0]
    halves = {w: int(data.half(w).sum()) for w in ("odd", "even")}
    for method, (entry, model) in models.items():
        p = _preds(entry.key, entry_mtime(entry), name, data.source, len(data.y), model, inputs)
        preds[method] = p
        acc = de.half_accuracies(p, data)
        row = {"model": entry.display}
        if data.full:
            row.update({f"{title}: odd half ({halves['odd']} digits)": fmt.pct(acc["odd"], 1),
                        f"{title}: even half ({halves['even']} digits)": fmt.pct(acc["even"], 1),
                        f"{title}: all {len(data.y)} digits": fmt.pct(acc["all"], 1)})
        else:  # the sample is odd-half digits only: one figure, named as the sample it is
            row[f"{title}: {len(data.y)}-digit sample (odd half)"] = fmt.pct(acc["all"], 1)
        row["MNIST test set (full)"] = _mnist_accuracy(entry)
        rows.append(row)
    st.dataframe(pd.DataFrame(rows), hide_index=True)
    st.caption("Accuracy: share of digits read right. Each digit is rendered as dark ink on white paper at "
               f"{de.RENDER_SIDE} px and read through the Mechanisms upload path (a PNG file). The Compare page's "
               "figures are over seeds and the full sets" + (
                   "; a 200-digit sample differs from them by a few points by chance alone." if not data.full
                   else "."))
    _misread_grid(name, data, inputs, preds, models)


def _misread_grid(name: str, data: de.ExternalSet, inputs: np.ndarray, preds: dict, models: dict) -> None:
    wrong = de.misreads(data, preds)
    st.subheader(f"Misread digits ({len(wrong)} of {len(data.y)})")
    if not wrong:
        st.success("Every chosen method reads every digit of this set correctly.")
        return
    pages = max(1, -(-len(wrong) // GRID_MAX))
    page = int(st.number_input(f"Page (1-{pages}, most-misread first)", 1, pages, 1, key="rb_hw_page")) \
        if pages > 1 else 1
    shown = wrong[(page - 1) * GRID_MAX : page * GRID_MAX]
    first = next(iter(models.values()))[0]
    for start in range(0, len(shown), GRID_COLUMNS):
        cols = st.columns(GRID_COLUMNS)
        for col, item in zip(cols, shown[start : start + GRID_COLUMNS]):
            with col:
                st.image(upscaled(data.x[item["row"]], 84), caption=f"#{item['index']}, true {item['true']}")
                st.caption(" · ".join(f"{short_method_title(m)}: **{d}**" if d != item["true"]
                                      else f"{short_method_title(m)}: {d}" for m, d in item["said"].items()))
                _link(mechanisms_link(name, item["index"], first))


def _link(query: dict) -> None:
    """A link to Mechanisms with ``query`` (a plain URL link when the page is not registered, as
    when this page runs on its own)."""
    try:
        # a short label: six digits a row leave too little width for "Open on Mechanisms" (it was cut)
        st.page_link("pages/mechanisms.py", label="Trace", icon="🧩", query_params=query,
                     help="Open this digit on Mechanisms, with the model's trace row by row")
    except Exception:  # noqa: BLE001 - StreamlitPageNotFoundError outside st.navigation
        st.markdown(f"[🧩 Trace](mechanisms?{urlencode(query)})")


def _numbers_text(numbers: list[int]) -> str:
    """``"200 digits: odd numbers 1-559"`` or ``"1593 digits: 0-1592"``."""
    lo, hi = numbers[0], numbers[-1]
    if len(numbers) == hi - lo + 1:
        return f"{len(numbers)} digits: {lo}-{hi}"
    if all(n % 2 for n in numbers):
        return f"{len(numbers)} digits: odd numbers between {lo} and {hi}"
    return f"{len(numbers)} digits between {lo} and {hi}"


def mechanisms_input():
    """The Mechanisms input "Other handwriting": one digit of a set through the upload path.

    Returns ``(PreparedImage, true label, description)`` or None (with the reason shown)."""
    from .upload import prepare_upload

    data = _pick_set(MECH_SET)
    if data is None:
        return None
    name = data.name
    if not data.full:
        st.caption("The bundled sample. " + de.where_to_put(name))
    numbers = sorted(int(i) for i in data.index)
    st.session_state.setdefault(MECH_IDX, numbers[0])
    asked = st.session_state[MECH_IDX]
    if asked not in numbers:  # a number the loaded set lacks (an even one in the sample, a typo in a link)
        try:
            near = min(numbers, key=lambda n: (abs(n - int(asked)), n))
        except (TypeError, ValueError):
            near = numbers[0]
        st.session_state[MECH_IDX] = near
        st.caption(f"Digit #{asked} is not in the {data.source}; shown is the nearest it holds, #{near}.")
    def step(d: int) -> None:
        i = numbers.index(st.session_state[MECH_IDX]) if st.session_state.get(MECH_IDX) in numbers else 0
        st.session_state[MECH_IDX] = numbers[(i + d) % len(numbers)]

    c_prev, c_box, c_next = st.columns([1, 8, 1], vertical_alignment="bottom")
    c_prev.button("◀", key="mech_hw_prev", on_click=step, args=(-1,))
    idx = int(c_box.selectbox(f"Digit number in the set ({_numbers_text(numbers)})", numbers, key=MECH_IDX,
                              help="The digit's position in the full set. The bundled sample holds only "
                                   "odd-numbered digits (the half never used to tune the upload path)."
                              if not data.full else "The digit's position in the full set."))
    c_next.button("▶", key="mech_hw_next", on_click=step, args=(1,))
    row = de.find_row(data, idx)
    prepared = prepare_upload(de.upload_bytes(data.x[row]), "mnist")
    return prepared, int(data.y[row]), f"{name} digit #{idx} (uploaded as a {de.RENDER_SIDE} px PNG)"
