"""Shared page helpers: cached loading of data and models, and error display.

Pages stay thin: they call these and core, and draw. Nothing heavy runs at import.
"""

from __future__ import annotations

import streamlit as st
import torch

from core import catalog
from core.data import DATASETS, LoadedData, load_dataset
from core.errors import RimscopeError

torch.set_num_threads(1)  # the server shares 2 cores with training workers


@st.cache_resource(show_spinner=False, max_entries=64)
def load_model(key: str, stem: str, dataset: str, mtime: float):
    """Model and metadata for a catalog entry; ``mtime`` invalidates a replaced file."""
    from core.checkpoint import load_checkpoint

    return load_checkpoint(stem, expected_dataset=dataset)


def load_entry_cached(entry: catalog.ModelEntry):
    path = entry.stem.with_suffix(".safetensors")
    mtime = path.stat().st_mtime if path.is_file() else 0.0
    return load_model(entry.key, str(entry.stem), entry.dataset, mtime)


@st.cache_resource(show_spinner="Loading data…", max_entries=8)
def test_data(dataset: str, data_dir: str | None = None) -> LoadedData:
    """Test split (full when available, else the bundled sample); raises RimscopeError."""
    return load_dataset(dataset, "test", data_dir=data_dir or None)


def entries(dataset: str | None = None) -> list[catalog.ModelEntry]:
    return catalog.list_entries(dataset)


def dataset_picker(key: str = "dataset", label: str = "Data set") -> str:
    names = list(DATASETS)
    return st.selectbox(label, names, key=key, format_func=lambda n: DATASETS[n].title)


def show_error(exc: Exception, what: str = "") -> None:
    """A clear message instead of a traceback."""
    prefix = f"{what}: " if what else ""
    if isinstance(exc, RimscopeError):
        st.error(prefix + str(exc))
    else:
        st.error(f"{prefix}unexpected problem ({type(exc).__name__}: {exc}).")
