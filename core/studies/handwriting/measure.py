"""How well models read the drawn-like and photo-like digits of ``core.digits.synth``.

``page_input`` passes one digit through ``core.digits.prepare`` exactly as the pages do,
``measure`` counts the share of every set each model recognises, and ``format_table`` lays
the numbers out for ``python -m core.studies.handwriting measure``.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

if TYPE_CHECKING:
    from ...digits.synth import DigitSet


# --------------------------------------------------------------------------- measuring


def page_input(style: str, image: np.ndarray, file: bytes | None = None):
    """``PreparedImage`` exactly as the pages make it for an MNIST model.

    canvas: the Mechanisms page hands the canvas's RGBA array to ``prepare_for_dataset``;
    photo: an upload's bytes go through ``load_image`` and then ``prepare_for_dataset``
    (``pages.ui.prepare_upload``). A photo without its file is sent as a PNG.
    """
    from ...data.datasets import DATASETS
    from ...digits.load import load_image
    from ...digits.prepare import prepare_for_dataset

    shape = DATASETS["mnist"].image_shape
    if style == "canvas":
        return prepare_for_dataset(image, shape, mode="digit")
    if file is None:
        buf = io.BytesIO()
        Image.fromarray(image).save(buf, "PNG")
        file = buf.getvalue()
    return prepare_for_dataset(load_image(file), shape, mode="digit")


def prepared_inputs(sets: dict[str, DigitSet]) -> dict[str, np.ndarray]:
    """The 28 x 28 model inputs of every set, ``{style: uint8 [n, 28, 28]}``."""
    out = {}
    for style, s in sets.items():
        files = s.files or [None] * len(s.images)
        out[style] = np.stack([page_input(style, im, f).array for im, f in zip(s.images, files)])
    return out


def _mnist_sample():
    path = Path(__file__).resolve().parents[2] / "assets" / "samples" / "mnist_sample.npz"
    if not path.is_file():
        return None
    with np.load(path, allow_pickle=False) as z:
        return z["x"], z["y"].astype(np.int64)


def measure(entries, sets: dict[str, DigitSet], *, reference: bool = True) -> list[dict]:
    """For each model entry, the share of every set it recognises; one dict per model.

    With ``reference`` also the shipped 1,000-image MNIST sample as is ("mnist") and after
    ``prepare_digit`` ("mnist_prep"), which shows what preprocessing costs on real MNIST.
    """
    from ...catalog import load_entry
    from ...digits.prepare import prepare_digit
    from ...eval.predict import predict_proba

    inputs = prepared_inputs(sets)
    labels = {style: s.labels for style, s in sets.items()}
    sample = _mnist_sample() if reference else None
    if sample is not None:
        inputs["mnist"], labels["mnist"] = sample
        inputs["mnist_prep"] = np.stack([prepare_digit(x).array for x in sample[0]])
        labels["mnist_prep"] = sample[1]
    rows = []
    for entry in entries:
        row = {"model": entry.model, "key": entry.key, "protocol": entry.protocol or "",
               "label": entry.display}
        try:
            model, _ = load_entry(entry)
        except Exception as exc:  # noqa: BLE001 - report, measure the others
            row["error"] = str(exc)
            rows.append(row)
            continue
        for name, x in inputs.items():
            pred = predict_proba(model, x).argmax(axis=1)
            row[name] = float((pred == labels[name]).mean())
        rows.append(row)
    return rows


def format_table(rows: list[dict], counts: dict[str, int]) -> str:
    cols = [c for c in ("photo", "canvas", "mnist", "mnist_prep") if any(c in r for r in rows)]
    head = {"photo": f"photo ({counts.get('photo', 0)})", "canvas": f"canvas ({counts.get('canvas', 0)})",
            "mnist": "MNIST sample", "mnist_prep": "MNIST sample, preprocessed"}
    names = [f"{r['model']}" + (f" [{r['protocol']}]" if r.get("protocol") else "") for r in rows]
    width = max([len("model")] + [len(n) for n in names])
    lines = ["model".ljust(width) + "  " + "  ".join(head[c].rjust(max(len(head[c]), 6)) for c in cols)]
    for name, r in zip(names, rows):
        if "error" in r:
            lines.append(name.ljust(width) + "  " + r["error"])
            continue
        lines.append(name.ljust(width) + "  " + "  ".join(
            f"{100 * r[c]:.1f}%".rjust(max(len(head[c]), 6)) for c in cols))
    return "\n".join(lines)
