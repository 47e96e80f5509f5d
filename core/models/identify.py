"""Which registered model a set of weights belongs to, read from the tensor names alone: an
upload whose weights and metadata describe two different models is refused with what the two
files are, not only with the tensors that do not fit."""

from __future__ import annotations

import json
import re

from ..data.datasets import DATASETS
from .registry import build_model, get_spec, list_models

MAX_HEADER_BYTES = 16 * 2**20  # a safetensors header longer than this is not one of ours

_INDEX = re.compile(r"(?<=\.)\d+(?=\.|$)")  # "lstms.3.weight_hh_l0", "u.1": the index of a repeated part


def tensor_names(weights: bytes) -> set[str] | None:
    """The tensor names in a safetensors file's header (no tensor is read), or None when
    ``weights`` has no readable safetensors header."""
    if not isinstance(weights, bytes) or len(weights) < 10:
        return None
    n = int.from_bytes(weights[:8], "little")
    if not 2 <= n <= min(len(weights) - 8, MAX_HEADER_BYTES):
        return None
    try:
        header = json.loads(weights[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return {k for k in header if k != "__metadata__"} if isinstance(header, dict) else None


def _shape(names) -> frozenset[str]:
    """Tensor names with the indices of repeated parts left out: the same model with more or
    fewer LSTMs (layers) has the same shape of names."""
    return frozenset(_INDEX.sub("#", n) for n in names)


def model_of_names(names: set[str], dataset: str = "mnist") -> str | None:
    """The registered model (built with its defaults for ``dataset``) whose tensor names are
    ``names``, up to the number of repeated parts; None when no model's are."""
    info = DATASETS.get(dataset) or DATASETS["mnist"]
    wanted = _shape(names)
    for name in list_models():
        if _shape(build_model(name, input_dim=info.input_dim, num_classes=len(info.classes)).state_dict()) == wanted:
            return name
    return None


def _title(name: str) -> str:
    return get_spec(name).title.split(" (")[0]


def mismatch_note(weights: bytes, meta: bytes, expected_dataset: str | None = None) -> str | None:
    """What the two files of an upload are, when the weights are another registered model's
    than the one the metadata names ("The metadata describes RIM (MNIST, seed 6) but the weights
    look like IndRNN's: ..."); None when they agree, or when either file is unreadable (the
    upload check names that problem itself)."""
    names = tensor_names(weights)
    try:
        doc = json.loads(meta.decode("utf-8")) if isinstance(meta, bytes) else None
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not names or not isinstance(doc, dict) or doc.get("model") not in list_models():
        return None
    dataset = expected_dataset or doc.get("dataset")
    dataset = dataset if dataset in DATASETS else "mnist"
    found = model_of_names(names, dataset)
    if found is None or found == doc["model"]:
        return None
    about = [DATASETS[doc["dataset"]].title] if doc.get("dataset") in DATASETS else []
    seed = doc.get("seed")
    if isinstance(seed, int) and not isinstance(seed, bool):
        about.append(f"seed {seed}")
    described = _title(doc["model"]) + (f" ({', '.join(about)})" if about else "")
    owner = _title(found) + ("'" if _title(found).endswith("s") else "'s")
    return (f"The metadata describes {described} but the weights look like {owner}: upload the metadata file "
            "that came with these weights.")


def explain_refusal(reason: str, weights: bytes, meta: bytes, expected_dataset: str | None = None) -> str:
    """A refused upload's ``reason`` with, first, what the two files are where the weights belong
    to another model than the metadata's (``mismatch_note``); ``reason`` as it is otherwise."""
    note = mismatch_note(weights, meta, expected_dataset)
    return f"{note} {reason}" if note else reason
