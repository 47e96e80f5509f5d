"""Cached loading for the pages: models, test data, JSON files, reproduction outputs.

Every cache key holds what makes a result stale (a file's modification time), and paths come
from ``core.paths`` at call time (tests and deployments move them).
"""

from __future__ import annotations

import json
from pathlib import Path

import streamlit as st
import torch

from core import catalog, paths
from core.data.datasets import LoadedData, load_dataset

from .messages import show_error

torch.set_num_threads(1)  # the server shares 2 cores with training workers

# reproduction outputs under results/ the Compare page offers: folder -> what it holds
# the first present is the Compare page's default: the converged grid, where runs are stable
SCHEDULES = {"converged": "converged protocol (Adam, early stopping on validation)",
             "paper": "the paper's short schedule (1,000 SGD iterations): paper grid, ablations, init study",
             "unequal_init/paper": "old run, unequal initialisation (paper schedule)",
             "unequal_init/long": "old run, unequal initialisation (longer schedule)",
             "unequal_init/param_matched": "old run, unequal initialisation (parameter-matched baselines)"}


def mtime(path) -> float:
    try:
        return Path(path).stat().st_mtime
    except OSError:
        return 0.0


def entry_mtime(entry: catalog.ModelEntry) -> float:
    """Modification time of an entry's weights: part of every cache key of its results."""
    return entry.weights_mtime


@st.cache_resource(show_spinner=False, max_entries=64)
def _load_model(key: str, stem: str, mtime_: float, _entry: catalog.ModelEntry):
    """Model and metadata for a catalog entry; ``mtime_`` invalidates a replaced file."""
    return catalog.load_entry(_entry)


def load_entry_cached(entry: catalog.ModelEntry):
    return _load_model(entry.key, str(entry.stem), entry.weights_mtime, entry)


def load_or_report(entry: catalog.ModelEntry):
    """``(model, meta)`` from the cache, or ``None`` after showing why it failed."""
    try:
        return load_entry_cached(entry)
    except Exception as exc:  # a broken or vanished checkpoint must not take the page down
        show_error(exc, f"Could not load {entry.display}")
        return None


@st.cache_resource(show_spinner="Loading data…", max_entries=8)
def test_data(dataset: str, data_dir: str | None = None) -> LoadedData:
    """Test split (full when available, else the bundled sample); raises RimscopeError."""
    return load_dataset(dataset, "test", data_dir=data_dir or None)


def run_store():
    """The user's run store, or ``None`` while ``core.runs`` is unavailable or broken."""
    try:
        from core.runs.store import RunStore

        return RunStore()
    except (ImportError, AttributeError):
        return None
    except Exception:  # a broken store must not take the page down; callers say so
        return None


def model_entries(dataset: str | None = None) -> tuple[list[catalog.ModelEntry], list[str]]:
    """Pretrained entries plus the user's runs, and any problems met while listing them."""
    problems = []
    try:
        pre = catalog.pretrained_entries(dataset)
    except Exception as exc:  # malformed manifest rows
        pre, _ = [], problems.append(f"pretrained/manifest.json could not be read ({type(exc).__name__}: {exc})")
    runs = []
    store = run_store()
    if store is not None:
        try:
            runs = catalog.run_entries(dataset, store)
        except Exception as exc:
            problems.append(f"your runs could not be listed ({type(exc).__name__}: {exc})")
    return pre + runs, problems


@st.cache_data(show_spinner=False, max_entries=256)
def read_json(path: str, mtime_: float) -> dict | None:
    """A JSON file as a dict, or None when missing or malformed; ``mtime_`` keys the cache."""
    try:
        obj = json.loads(Path(path).read_text())
    except (OSError, ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def entry_metadata(entry: catalog.ModelEntry) -> dict | None:
    p = Path(entry.stem).with_suffix(".json")
    return read_json(str(p), mtime(p))


@st.cache_data(show_spinner=False, max_entries=8)
def _manifest(path: str, mtime_: float) -> dict:
    return catalog.read_manifest(Path(path).parent)


def manifest() -> dict:
    """The pretrained folder's manifest (``catalog.read_manifest``), cached by its file time."""
    p = catalog.manifest_path()
    return _manifest(str(p), mtime(p))


def schedules_available() -> dict[str, Path]:
    """Reproduction outputs present, e.g. ``{"paper": results/paper, "long": results/long}``."""
    root = paths.results_dir()
    out = {}
    for name in SCHEDULES:
        d = root / name
        if (d / "summary.json").is_file() or any((d / "runs").glob("*/*.json")):
            out[name] = d
    return out


def load_summary(out_dir: Path) -> dict | None:
    p = Path(out_dir) / "summary.json"
    return read_json(str(p), mtime(p))


def _runs_signature(out_dir: Path) -> tuple:
    return tuple(sorted((str(p), mtime(p)) for p in (Path(out_dir) / "runs").glob("*/*.json")))


@st.cache_data(show_spinner="Reading training curves…", max_entries=8)
def _load_curves(out_dir: str, signature: tuple) -> dict:
    from core.report.plots.training import curves_from_metadata

    out: dict = {}
    for path, _ in signature:
        meta = read_json(path, mtime(path))
        if not meta or "dataset" not in meta or meta.get("variant"):
            continue  # ablation variants are compared in the tables, not drawn as curves
        for metric, curve in curves_from_metadata(meta).items():
            out.setdefault(str(meta["dataset"]), {}).setdefault(metric, []).append(curve)
    return out


def load_curves(out_dir: Path) -> dict:
    """``{dataset: {metric: [curve, ...]}}`` from every run JSON of a reproduction output."""
    return _load_curves(str(out_dir), _runs_signature(out_dir))
