"""Every path and setting RIMscope takes from the environment, read at call time.

Tests and deployments move these folders after import (monkeypatch, a page started with
other variables), so nothing here is cached in a module constant. One place, so a reader
can see every knob at once:

==========================  =============================================================
``RIMSCOPE_DATA_DIR``       folder with ``<dataset>/{train,test}.npz`` (default ``data/``)
``RIMSCOPE_ANIMALS10_DIR``  an Animals-10 image folder in Kaggle's layout
``RIMSCOPE_HANDWRITING_DIR`` the external handwriting test sets (``semeion.npz``,
                            ``optdigits.npz``; default ``<data dir>/handwriting``)
``RIMSCOPE_HOME``           per-user state: the run store, torchvision downloads
                            (default ``~/.rimscope``)
``RIMSCOPE_PRETRAINED_DIR`` the shipped models with their ``manifest.json``
``RIMSCOPE_RESULTS_DIR``    reproduction outputs (``paper/``, ``converged/``, ...)
``RIMSCOPE_OFFLINE``        ``1``: never try to download
``RIMSCOPE_MAX_CONCURRENT`` training runs the store starts at once (0 pauses the queue)
``RIMSCOPE_WORKER_THREADS`` torch threads of a run-store worker
``RIMSCOPE_WORKER_NICE``    niceness of a run-store worker (keeps the pages responsive)
``RIMSCOPE_ROBUSTNESS_SUBSET`` test images the Robustness page scores (smaller: faster)
==========================  =============================================================
"""

from __future__ import annotations

import os
from pathlib import Path

# the repository: the package reads its shipped models, samples and results (pretrained/, assets/,
# results/) from its own checkout, so it installs editable (`pip install -e .`, as the Makefile does);
# RIMSCOPE_PRETRAINED_DIR and RIMSCOPE_RESULTS_DIR move two of them
ROOT = Path(__file__).resolve().parent.parent


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name, "").strip()
    return Path(value).expanduser() if value else None


def _env_int(name: str, default: int, minimum: int = 0) -> int:
    try:
        return max(minimum, int(os.environ.get(name, "").strip() or default))
    except ValueError:
        return default


def data_dir() -> Path | None:
    """The npz data folder, or None when neither the variable nor ``data/`` exists."""
    env = _env_path("RIMSCOPE_DATA_DIR")
    if env is not None:
        return env
    local = ROOT / "data"
    return local if local.is_dir() else None


def handwriting_dir() -> Path | None:
    """The external handwriting test sets' folder, or None when no folder is set or found."""
    env = _env_path("RIMSCOPE_HANDWRITING_DIR")
    if env is not None:
        return env
    data = data_dir()
    return data / "handwriting" if data is not None else None


def animals10_dir() -> Path | None:
    return _env_path("RIMSCOPE_ANIMALS10_DIR")


def home() -> Path:
    return _env_path("RIMSCOPE_HOME") or Path.home() / ".rimscope"


def runs_root() -> Path:
    return home() / "runs"


def torchvision_root() -> Path:
    return home() / "torchvision"


def pretrained_dir() -> Path:
    return _env_path("RIMSCOPE_PRETRAINED_DIR") or ROOT / "pretrained"


def results_dir() -> Path:
    return _env_path("RIMSCOPE_RESULTS_DIR") or ROOT / "results"


# folders of the long grid under results/ (core.grid.long trains them; core.studies reads them)
LONG_GRID = "long"  # each data set's runs at its budget, as links into the budget folders
RETRAINED = "budget-retrained"  # MNIST 12,000-iteration runs trained again to keep their weights


def long_grid_weights(ds: str, model: str = "rim", results: Path | None = None, seeds=range(10)) -> list[Path]:
    """The stems (``.../runs/<ds>/<model>_s<seed>``) of ``model``'s long-grid runs on ``ds`` whose
    weights are kept: beside the run's record (through ``results/long``'s link to the set's budget
    folder), else its retrained copy (``RETRAINED``)."""
    results = Path(results or results_dir())
    out = []
    for s in seeds:
        for folder in (LONG_GRID, RETRAINED):
            stem = results / folder / "runs" / ds / f"{model}_s{s}"
            if stem.with_suffix(".safetensors").is_file() and stem.with_suffix(".json").is_file():
                out.append(stem)
                break
    return out


def offline() -> bool:
    return os.environ.get("RIMSCOPE_OFFLINE", "").strip().lower() in ("1", "true", "yes")


def max_concurrent() -> int:
    """``RIMSCOPE_MAX_CONCURRENT`` (default 1); 0 pauses the queue (runs stay queued)."""
    return _env_int("RIMSCOPE_MAX_CONCURRENT", 1)


def worker_threads() -> int:
    return _env_int("RIMSCOPE_WORKER_THREADS", 1, minimum=1)


def worker_nice() -> int:
    return _env_int("RIMSCOPE_WORKER_NICE", 5)


def robustness_subset(default: int) -> int:
    """Test images the Robustness page scores each method on (at least 10)."""
    return _env_int("RIMSCOPE_ROBUSTNESS_SUBSET", default, minimum=10)


def settings_environment(prefix: str = "RIMSCOPE_") -> dict[str, str]:
    """Every ``RIMSCOPE_*`` variable set now (what a worker on another machine must see)."""
    return {k: v for k, v in os.environ.items() if k.startswith(prefix)}
