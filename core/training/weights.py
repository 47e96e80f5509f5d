"""Weights: what a finished run leaves, what is shipped and uploaded. Tensors as safetensors,
everything else as JSON; never pickle. (What resumes a run is the *training state*,
core.training.state.)

A weights file is two files side by side: ``<stem>.safetensors`` and ``<stem>.json``. The JSON
names the model and its config, so loading builds the model through the registry and then
checks that the stored tensors fit it exactly (names, shapes, dtypes, finite values).
Every problem is reported as a ``WeightsError`` whose message names it.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load as st_load_bytes
from safetensors.torch import save as st_save_bytes
from torch.overrides import TorchFunctionMode

from .. import __version__
from ..errors import WeightsError
from ..fileio import atomic_write_bytes, json_bytes, os_error_reason
from ..models.registry import build_model, get_spec, list_models, model_config_dict

FORMAT = "rimscope-checkpoint/1"
MAX_WEIGHTS_BYTES = 64 * 1024 * 1024
MAX_META_BYTES = 8 * 1024 * 1024
PICKLE_MAGIC = (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05", b"PK\x03\x04")
_SAFE_TEXT = re.compile(r"^[\w .,:;()+\-/=%'\"#\[\]!?&*<>@|~^{}]*$")


def _stem(path) -> Path:
    p = Path(path)
    return p.with_suffix("") if p.suffix in (".safetensors", ".json") else p


def weights_bytes(model: torch.nn.Module, metadata: dict) -> tuple[bytes, bytes]:
    """The two files of a model's weights as bytes (for downloads and for saving)."""
    meta = dict(metadata)
    meta.setdefault("format", FORMAT)
    meta.setdefault("model", getattr(model, "model_name", None))
    meta["config"] = model_config_dict(model)
    meta.setdefault("code_version", __version__)
    state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    weights = st_save_bytes(state, metadata={"format": FORMAT, "model": str(meta["model"])})
    meta_bytes = json_bytes(meta)
    return weights, meta_bytes


def save_weights(model: torch.nn.Module, metadata: dict, path) -> Path:
    """Save ``<stem>.safetensors`` + ``<stem>.json`` atomically; returns the weights path.

    A write that fails (disk full, read-only folder) raises WeightsError naming the cause;
    weights that were there before keep their old files (each is replaced atomically).
    """
    stem = _stem(path)
    weights, meta = weights_bytes(model, metadata)
    try:
        atomic_write_bytes(stem.with_suffix(".safetensors"), weights)
        atomic_write_bytes(stem.with_suffix(".json"), meta)
    except OSError as exc:
        raise WeightsError(f"Could not write the model {stem.name} to {stem.parent}: "
                              f"{os_error_reason(exc)}.") from None
    return stem.with_suffix(".safetensors")


def run_metadata(cfg, result, train_data, test_data, note: str = "") -> dict:
    """The JSON metadata stored beside the weights of a run (a TrainConfig, its TrainResult and data)."""
    import time

    from ..data.datasets import get_info

    info = get_info(cfg.dataset)
    return {
        "model": cfg.model,
        "dataset": cfg.dataset,
        "classes": list(info.classes),
        "image_shape": list(info.image_shape),
        "seed": cfg.seed,
        "status": result.status,
        "message": result.message,
        "train_config": cfg.to_dict(),
        "data_source": {"train": train_data.source, "test": test_data.source,
                        "n_train": len(train_data), "n_test": len(test_data), "note": note},
        "metrics": result.metrics,
        "history": result.history,
        "evals": result.evals,
        "code_version": __version__,
        "torch_version": torch.__version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def load_weights(path, *, expected_dataset: str | None = None):
    """Load ``(model, metadata)`` from ``<stem>.safetensors`` + ``<stem>.json``."""
    stem = _stem(path)
    w, m = stem.with_suffix(".safetensors"), stem.with_suffix(".json")
    if not w.is_file():
        raise WeightsError(f"Weights file {w.name} is missing.")
    if not m.is_file():
        raise WeightsError(f"Metadata file {m.name} is missing: a model needs both "
                              ".safetensors and .json.")
    return load_weights_bytes(w.read_bytes(), m.read_bytes(), expected_dataset=expected_dataset)


def is_safetensors(data: bytes) -> bool:
    """Whether ``data`` starts like a safetensors file: an 8-byte header length, then that
    many bytes of a JSON object (checked without reading any tensor)."""
    if not isinstance(data, bytes) or len(data) < 10:
        return False
    n = int.from_bytes(data[:8], "little")
    if not 2 <= n <= len(data) - 8 or data[8:9] != b"{":
        return False
    try:
        return isinstance(json.loads(data[8:8 + n].decode("utf-8")), dict)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False


def parse_metadata(meta_bytes: bytes, shown: str = "The metadata") -> dict:
    """Parse and validate the JSON beside the weights; raises WeightsError naming the problem
    (``shown``: how the messages name the file, e.g. ``"The metadata file run.json"``)."""
    if not meta_bytes:
        raise WeightsError("The metadata file is empty.")
    if len(meta_bytes) > MAX_META_BYTES:
        raise WeightsError("The metadata file is too large (over 8 MB).")
    try:
        meta = json.loads(meta_bytes.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:  # ValueError: bad JSON, or an int too long
        raise WeightsError(f"The metadata is not valid JSON ({exc}).") from None
    except RecursionError:
        raise WeightsError("The metadata is nested too deeply to be a model.") from None
    if not isinstance(meta, dict):
        raise WeightsError("The metadata must be a JSON object.")
    name = meta.get("model")
    known = ", ".join(get_spec(m).title for m in list_models())
    if name is None:
        raise WeightsError(f"{shown} does not say which model it belongs to (it has no \"model\" entry), so it "
                              f"is not a RIMscope model's metadata. RIMscope's models: {known}.")
    if not isinstance(name, str) or name not in list_models():
        raise WeightsError(f"{shown} names a model RIMscope does not have ({str(name)[:40]}). "
                              f"RIMscope's models: {known}.")
    cfg = meta.get("config")
    if not isinstance(cfg, dict):
        raise WeightsError("The metadata has no 'config' object for the model.")
    for key in ("dataset", "run_name", "title"):
        val = meta.get(key)
        if val is None:
            continue
        if not isinstance(val, str) or len(val) > 200 or ".." in val or "/" in val or "\\" in val \
                or not _SAFE_TEXT.match(val):
            raise WeightsError(f"The metadata field {key!r} holds an unsafe or malformed value "
                                  f"{str(val)[:60]!r}.")
    return meta


UPLOAD_PICKLE_SUFFIXES = (".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".bin", ".tar", ".joblib", ".npy", ".npz",
                          ".zip")


def check_upload(weights, meta, *, expected_dataset: str | None = None, weights_name: str | None = None,
                 meta_name: str | None = None, max_bytes: int | None = None):
    """Validate uploaded weights in full before anything is stored; ``(model, metadata)``.

    The one check the Models page and the run store share. File names, when given, must be
    ``.safetensors`` and ``.json`` (pickle-based names are refused and never opened);
    each file at most ``max_bytes`` (default the weights limits); the metadata and the
    weights as in :func:`load_weights_bytes`; the data set must be a known one
    (``expected_dataset=None``: the one the metadata names) and the model must fit it (row
    width, number of classes). Raises WeightsError naming the problem.
    """
    from ..data.datasets import DATASETS

    weights = bytes(weights) if isinstance(weights, (bytearray, memoryview)) else weights
    meta = bytes(meta) if isinstance(meta, (bytearray, memoryview)) else meta
    if not isinstance(weights, bytes) or not isinstance(meta, bytes):
        raise WeightsError("Upload both files: the weights (.safetensors) and the metadata (.json).")
    for name in (weights_name, meta_name):
        if name is not None and name.lower().endswith(UPLOAD_PICKLE_SUFFIXES):
            raise WeightsError(
                f"{name} is a pickle-based file (PyTorch .pt/.pth/.ckpt and similar). RIMscope never opens "
                "pickle files, because loading one can run arbitrary code. Save the weights with safetensors "
                "(safetensors.torch.save_file(model.state_dict(), 'model.safetensors')) and upload that "
                "together with its .json metadata.")
    if weights_name is not None and not weights_name.lower().endswith(".safetensors"):
        raise WeightsError(f"The weights file must be a .safetensors file; got {weights_name!r}.")
    if meta_name is not None and not meta_name.lower().endswith(".json"):
        raise WeightsError(f"The metadata file must be a .json file; got {meta_name!r}.")
    for data, shown, limit in ((weights, weights_name or "The weights file", MAX_WEIGHTS_BYTES),
                               (meta, meta_name or "The metadata file", MAX_META_BYTES)):
        limit = min(limit, max_bytes) if max_bytes else limit
        if len(data) > limit:
            raise WeightsError(f"{shown} is too large ({len(data) / 2**20:.1f} MB; the limit is "
                                  f"{limit / 2**20:g} MB per file).")
    if not weights:
        raise WeightsError(f"{weights_name or 'The weights file'} is empty.")
    if weights[:2] not in PICKLE_MAGIC and weights[:4] != b"PK\x03\x04" and not is_safetensors(weights):
        raise WeightsError(f"{weights_name or 'The weights file'} is not a safetensors file: its contents are "
                              "not in the safetensors format that RIMscope saves weights in, whatever its name says. "
                              "Upload the .safetensors file that was saved together with the metadata.")
    meta_shown = f"The metadata file {meta_name}" if meta_name else "The metadata"
    if expected_dataset is None:
        expected_dataset = parse_metadata(meta, meta_shown).get("dataset")
        if expected_dataset not in DATASETS:
            raise WeightsError(f"The metadata names no known data set ({expected_dataset!r}); add \"dataset\" "
                                  f"to the JSON or choose the data set it was trained on ({', '.join(DATASETS)}).")
    parse_metadata(meta, meta_shown)  # its problems named with the file's name
    try:
        model, meta_doc = load_weights_bytes(weights, meta, expected_dataset=expected_dataset)
    except WeightsError as exc:  # led by what the two files are where they are two models' files
        from ..models.identify import explain_refusal

        raise WeightsError(explain_refusal(str(exc), weights, meta, expected_dataset)) from None
    info = DATASETS[expected_dataset]
    cfg = getattr(model, "config", None)
    if getattr(cfg, "input_dim", info.input_dim) != info.input_dim:
        raise WeightsError(f"The model reads rows of {cfg.input_dim} values; {info.title} rows have "
                              f"{info.input_dim}.")
    if getattr(cfg, "num_classes", len(info.classes)) != len(info.classes):
        raise WeightsError(f"The model has {cfg.num_classes} outputs; {info.title} has "
                              f"{len(info.classes)} classes.")
    return model, meta_doc


def load_weights_bytes(weights: bytes, meta_bytes: bytes, *, expected_dataset: str | None = None):
    """Validate and load weights given as bytes (e.g. an upload)."""
    if not weights:
        raise WeightsError("The weights file is empty.")
    if weights[:2] in PICKLE_MAGIC or weights[:4] == b"PK\x03\x04":
        raise WeightsError("This looks like a pickle/PyTorch .pt file. RIMscope never unpickles "
                              "files (they can run code); export the weights as .safetensors.")
    if len(weights) > MAX_WEIGHTS_BYTES:
        raise WeightsError("The weights file is too large (over 64 MB).")
    meta = parse_metadata(meta_bytes)
    ds = meta.get("dataset")
    if expected_dataset is not None and ds != expected_dataset:
        raise WeightsError(f"This model was trained on {ds!r}, not on {expected_dataset!r}.")
    try:
        tensors = st_load_bytes(weights)
    except (SafetensorError, Exception) as exc:
        raise WeightsError(f"The weights are not a valid safetensors file ({exc}).") from None
    model = _build_checked(meta["model"], meta["config"])
    expected = model.state_dict()
    missing = sorted(set(expected) - set(tensors))
    extra = sorted(set(tensors) - set(expected))
    if missing:
        raise WeightsError(f"The weights lack {len(missing)} tensor(s) the model needs, e.g. {missing[0]}.")
    if extra:
        raise WeightsError(f"The weights hold {len(extra)} tensor(s) the model does not have, e.g. {extra[0]}.")
    for key, ref in expected.items():
        t = tensors[key]
        if t.shape != ref.shape:
            raise WeightsError(f"Tensor {key} has shape {list(t.shape)}, the model needs {list(ref.shape)}.")
        if t.dtype != ref.dtype:
            raise WeightsError(f"Tensor {key} has dtype {t.dtype}, the model needs {ref.dtype}.")
        if t.is_floating_point() and not torch.isfinite(t).all():
            raise WeightsError(f"Tensor {key} holds NaN or infinite values (a diverged run?).")
    model.load_state_dict(tensors, strict=True)
    model.eval()
    return model, meta


# Bounds on the model config of a model, checked before anything is allocated: a
# model's JSON is user input, and "hidden_size": 1000000 would otherwise make the loader
# try to allocate terabytes (or be killed for memory) before the weights are even compared.
MAX_CONFIG_INT = 65_536
MAX_CONFIG_FLOAT = 1e6


class _ModelTooLarge(Exception):
    pass


def _requested_elements(func, args, kwargs) -> int | None:
    """Elements a tensor factory call is about to allocate, or None for other calls."""
    try:
        if func in (torch.empty, torch.zeros, torch.ones, torch.rand, torch.randn):
            if "size" in kwargs:
                size = kwargs["size"]
            else:
                size = args[0] if len(args) == 1 and not isinstance(args[0], int) else args
        elif func is torch.full:
            size = kwargs["size"] if "size" in kwargs else args[0]
        elif func is torch.eye:
            n = args[0] if args else kwargs["n"]
            m = args[1] if len(args) > 1 else kwargs.get("m")
            size = (n, n if m is None else m)
        elif func is torch.randint:
            size = kwargs["size"] if "size" in kwargs else next(a for a in args if not isinstance(a, int))
        else:
            return None
        return math.prod(int(s) for s in size)
    except Exception:  # not a call we can size: let torch handle (or refuse) it
        return None


class _AllocationBudget(TorchFunctionMode):
    """Refuses tensor factory calls once they would allocate more than ``limit`` bytes in all,
    before the allocation happens. Building a model under it costs nothing extra."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit, self.used = limit, 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        n = _requested_elements(func, args, kwargs)
        if n is not None:
            dtype = kwargs.get("dtype") or torch.get_default_dtype()
            self.used += max(n, 0) * dtype.itemsize
            if self.used > self.limit:
                raise _ModelTooLarge(self.used)
        return func(*args, **kwargs)


def _build_checked(name: str, config: dict) -> torch.nn.Module:
    """Build the model a model's config describes, refusing configs that are malformed,
    out of range, or too large for any weights file we accept (refused before allocating),
    with a WeightsError that names the problem."""
    cfg = dict(config)
    for key, val in cfg.items():
        if isinstance(val, bool):
            continue
        if isinstance(val, int) and not 0 <= val <= MAX_CONFIG_INT:
            raise WeightsError(f"The model config value {key}={val} is out of range "
                                  f"(0..{MAX_CONFIG_INT}).")
        if isinstance(val, float) and not (math.isfinite(val) and abs(val) <= MAX_CONFIG_FLOAT):
            raise WeightsError(f"The model config value {key}={val} is not a finite number "
                                  "in a sane range.")
    try:
        input_dim = cfg.pop("input_dim")
        num_classes = cfg.pop("num_classes")
    except KeyError as exc:
        raise WeightsError(f"The model config in the metadata lacks {exc}.") from None
    too_large = ("The model config describes a model larger than any model accepted "
                 f"({MAX_WEIGHTS_BYTES // 2**20} MB of weights).")
    try:
        with _AllocationBudget(MAX_WEIGHTS_BYTES):
            model = build_model(name, input_dim=input_dim, num_classes=num_classes, **cfg)
    except _ModelTooLarge:
        raise WeightsError(too_large) from None
    except Exception as exc:  # a model constructor refusing the config, in whatever way
        raise WeightsError(f"The model config in the metadata is not valid ({exc}).") from None
    # belt and braces: allocations the budget could not see are caught here (after the fact)
    if sum(t.numel() * t.element_size() for t in model.state_dict().values()) > MAX_WEIGHTS_BYTES:
        raise WeightsError(too_large)
    return model
