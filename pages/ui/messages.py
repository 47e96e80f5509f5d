"""How the pages say what went wrong or what is missing: a clear message, never a traceback."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from core.data.datasets import DATASETS, LoadedData
from core.errors import RimscopeError


def show_error(exc: Exception, what: str = "") -> None:
    """A clear message instead of a traceback."""
    prefix = f"{what}: " if what else ""
    if isinstance(exc, RimscopeError):
        st.error(prefix + str(exc))
    else:
        st.error(f"{prefix}unexpected problem ({type(exc).__name__}: {exc}).")


def missing_data_note(dataset: str, exc: Exception, what: str) -> None:
    """One short note for a data set that is not on this machine: what is off, how to get it,
    and the technical detail folded away."""
    from core.data.datasets import how_to_get

    st.warning(f"No {DATASETS[dataset].title} test data on this machine, so {what}.")
    st.markdown("To get it, use one of: \n" + "\n".join(f"- {w}" for w in how_to_get(dataset)))
    with st.expander("Details"):
        st.code(str(exc), language=None)


def no_models_note(dataset: str) -> None:
    """The note of a per-model page when no model of ``dataset`` exists yet."""
    st.info(f"No model for {DATASETS[dataset].title} yet. Train one on the Train page, upload one on the "
            "Models page, or install the pretrained models (pretrained/manifest.json).")


def image_name(data: LoadedData, i: int) -> str:
    """How to call image ``i`` of a loaded set: a bundled sample's images are not test images."""
    if data.is_sample:
        split = "training" if "train images" in data.source else "test"
        orig = data.indices[int(i)] if data.indices is not None and int(data.indices[int(i)]) >= 0 else None
        return f"sample image #{int(i)}" + (f" ({split} image #{int(orig)} of the original set)" if orig is not None else "")
    return f"test image #{int(i)}"


def reproduce_hint(out_dir: Path | str = "results/paper") -> str:
    return (f"Produce it with `python -m core.reproduce run --seeds 0 1 2 --out {out_dir}` (trains the grid "
            f"and writes the tables), or `python -m core.reproduce tables --out {out_dir}` if the runs are "
            "already there. A longer schedule goes to `results/long` (add `--iterations 5000`).")
