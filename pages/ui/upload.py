"""What users upload: images (prepared like the training images) and models (checked
before anything is stored; pickle files are refused and never opened)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from core.data.datasets import DATASETS
from core.errors import InputImageError

from .messages import show_error

MAX_UPLOAD_MB = 20  # per file; server.maxUploadSize is 20 as well
IMAGE_TYPES = ["png", "jpg", "jpeg", "gif", "bmp", "webp"]


def prepare_upload(data: bytes, dataset: str):
    """Uploaded bytes -> ``PreparedImage`` for ``dataset``; raises ``InputImageError``."""
    from core.digits.load import load_image

    return prepare_pixels(load_image(data), dataset)


def prepare_pixels(pixels, dataset: str, drawn: bool = False):
    """An image array (an upload, a drawing: ``drawn``) -> ``PreparedImage`` for ``dataset``."""
    from core.digits.prepare import DRAWN_EDGE_KEEP, prepare_for_dataset

    mode = "plain" if dataset == "fashion_mnist" else "digit"
    return prepare_for_dataset(pixels, DATASETS[dataset].image_shape, mode=mode,
                               edge_keep=DRAWN_EDGE_KEEP if drawn else 0)


def uploaded_image(dataset: str, key: str, prompt: str):
    """An image file uploader: the prepared image, or None (with ``prompt`` or the reason shown)."""
    up = st.file_uploader("Image (PNG, JPEG, GIF, BMP or WebP)", type=IMAGE_TYPES, key=key)
    if up is None:
        st.info(prompt)
        return None
    try:
        return prepare_upload(up.getvalue(), dataset)
    except InputImageError as exc:
        show_error(exc, f"{up.name} cannot be used")
    except Exception as exc:  # anything else: a message, not a traceback
        show_error(exc, f"{up.name} cannot be used")
    return None


def _canvas_edit(dataset: str, prefix: str, action: str) -> None:
    """Undo (the last stroke) or Clear, by buttons that need no hover (the canvas's own toolbar
    shows only under a mouse): the canvas reloads the drawing that is left and sends it back,
    so the prediction follows."""
    objects = list((st.session_state.get(f"{prefix}_canvas_json_{dataset}") or {}).get("objects") or [])
    rev = int(st.session_state.get(f"{prefix}_canvas_rev_{dataset}", 0)) + 1  # a new drawing each time
    keep = objects[:-1] if action == "undo" else []
    st.session_state[f"{prefix}_canvas_rev_{dataset}"] = rev
    st.session_state[f"{prefix}_canvas_init_{dataset}"] = {"objects": keep, "rimscope_rev": rev}
    st.session_state[f"{prefix}_canvas_json_{dataset}"] = {"objects": keep}


def drawn_image(dataset: str, prefix: str, side: int = 280):
    """A drawing canvas (white on black, like MNIST) with Undo and Clear: the prepared drawing, or
    None (with why). ``prefix`` keys its widgets (``<prefix>_canvas_<dataset>``, ...), so a page
    can hold more than one."""
    try:
        from streamlit_drawable_canvas import st_canvas
    except Exception as exc:  # the optional canvas package is missing or broken
        st.error(f"The drawing canvas is not available ({type(exc).__name__}); upload an image instead.")
        return None
    canvas = st_canvas(stroke_width=18, stroke_color="#FFFFFF", background_color="#000000", height=side, width=side,
                       drawing_mode="freedraw", return_image_data=True, key=f"{prefix}_canvas_{dataset}",
                       initial_drawing=st.session_state.get(f"{prefix}_canvas_init_{dataset}"))
    objects = (canvas.json_data or {}).get("objects", []) if canvas is not None else []
    st.session_state[f"{prefix}_canvas_json_{dataset}"] = {"objects": list(objects)}
    edit = st.container(horizontal=True)
    edit.button("Undo", key=f"{prefix}_canvas_undo", icon=":material/undo:", on_click=_canvas_edit, args=(dataset, prefix, "undo"),
                disabled=not objects)
    edit.button("Clear", key=f"{prefix}_canvas_clear", icon=":material/delete:", on_click=_canvas_edit,
                args=(dataset, prefix, "clear"), disabled=not objects)
    # under the canvas: above it, the canvas's own toolbar (shown on hover, in the component's
    # isolated styles, so it cannot be hidden) would cover it
    st.caption("Draw with your finger or the mouse, white on black like MNIST; Undo takes back the last stroke.")
    pixels = canvas.image_data if canvas is not None and objects else None
    if pixels is None:
        st.info("The canvas is empty: draw a " + ("digit" if dataset == "mnist" else "piece of clothing") + ".")
        return None
    try:
        return prepare_pixels(pixels, dataset, drawn=True)
    except InputImageError as exc:
        show_error(exc, "The drawing cannot be used")
    return None


def usable_array(prepared, show_steps: bool = False):
    """The model input of a prepared upload or drawing, or None: nothing given, or (said in words,
    with the preprocessing steps when ``show_steps``) an image the preparation warns about."""
    if prepared is None:
        return None
    if prepared.warning:
        st.info(prepared.warning)
        if show_steps:
            show_preprocessing(prepared)
        return None
    return prepared.array


def upscaled(image, side: int = 168):
    """Nearest-neighbour enlargement of a small image, so pixels stay crisp on screen."""
    arr = np.asarray(image)
    f = max(1, side // max(arr.shape[:2]))
    return np.repeat(np.repeat(arr, f, axis=0), f, axis=1)


def framed_row(image: np.ndarray, row: int, side: int = 224) -> np.ndarray:
    """The image enlarged (nearest neighbour) with row ``row`` (1-based) framed in orange."""
    big = upscaled(image, side)
    f = big.shape[0] // image.shape[0]
    out = np.repeat(big[..., None], 3, axis=2) if big.ndim == 2 else big.copy()
    top, bottom = (row - 1) * f, row * f - 1
    colour = np.array([213, 94, 0], dtype=np.uint8)  # the RIM orange
    w = max(1, f // 4)
    out[max(0, top - w) : top + w, :] = colour
    out[bottom - w + 1 : bottom + w + 1, :] = colour
    out[max(0, top - w) : bottom + w + 1, :w] = colour
    out[max(0, top - w) : bottom + w + 1, -w:] = colour
    return out


def show_preprocessing(prepared, expanded: bool = False) -> None:
    """The intermediate images of ``core.digits.prepare`` in an expander."""
    with st.expander("Preprocessing steps", expanded=expanded):
        names = {"gray": "grey", "rgb": "as uploaded", "cropped": "cropped", "narrowed": "narrowed", "fitted": "fitted"}
        steps = list(prepared.steps.items())
        cols = st.columns(len(steps) + 1)
        for col, (name, arr) in zip(cols, steps):
            shown = upscaled(arr, 112) if max(arr.shape[:2]) < 112 else arr
            col.image(shown, caption=f"{names.get(name, name)} ({arr.shape[1]}x{arr.shape[0]})", width="stretch")
        cols[-1].image(upscaled(prepared.array), caption="model input", width="stretch")
        notes = []
        if prepared.inverted:
            notes.append("inverted (a light background became black, as in MNIST)")
        notes.extend(prepared.notes)
        if prepared.warning:
            notes.append(prepared.warning)
        if notes:
            st.caption("; ".join(notes))


def check_upload(weights: bytes, meta: bytes, *, weights_name: str, meta_name: str,
                 expected_dataset: str | None = None) -> dict:
    """Refuse bad model uploads before anything is stored; returns the parsed metadata.

    The check itself is ``core.training.weights.check_upload``, with its argument order (the run
    store uses the same one):
    pickle-based files are refused by name and never opened; raises ``WeightsError``.
    """
    from core.training.weights import check_upload as check

    return check(weights, meta, weights_name=weights_name, meta_name=meta_name,
                 expected_dataset=expected_dataset, max_bytes=MAX_UPLOAD_MB * 2**20)[1]
