"""Cached loading for the pages: models, test data, JSON files, reproduction outputs, the
Robustness scorer's points; and the warm-up that fills the shared ones at server start.

Every cache key holds what makes a result stale (a file's modification time), and paths come
from ``core.paths`` at call time (tests and deployments move them). The caches here are
process-wide (shared by every session), so what is the same for everyone is computed once:
``start_warmup`` (app.py calls it on the server's first script run) computes the defaults
in a background thread once that first page is drawn.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
import time
from pathlib import Path

import numpy as np
import streamlit as st
import torch

from core import catalog, paths
from core.data.datasets import DATASETS, LoadedData, load_dataset
from core.eval import curves
from core.eval.robustness_points import EvalPoint, fixed_subset, noisy_eval, stretch_eval
from core.eval.scorer import Scorer
from core.report.fmt import LONG_GRID_TITLE, SCHEDULE_TITLES

from .messages import show_error

torch.set_num_threads(1)  # the server shares 2 cores with training workers

# reproduction outputs under results/ the Compare page offers: result folder -> what it holds
# the Compare page shows the sidebar protocol's folder first, else the first present (the long grid)
RESULT_FOLDERS = {"long": LONG_GRID_TITLE, **SCHEDULE_TITLES,
             "budget": "Adam, cosine, 12,000 iterations: the budget check and the long grid's 12,000-iteration cells",
             "budget-24k": "Adam, cosine, 24,000 iterations: the long grid's 24,000-iteration cells",
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
    except Exception as exc:  # a broken or vanished model must not take the page down
        show_error(exc, f"Could not load {entry.display}")
        return None


@st.cache_resource(show_spinner="Loading data…", max_entries=8)
def test_data(dataset: str, data_dir: str | None = None) -> LoadedData:
    """Test split (full when available, else the bundled sample); raises RimscopeError."""
    return load_dataset(dataset, "test", data_dir=data_dir or None)


def run_store():
    """The user's run store, or ``None`` while it is broken (an unreadable folder, ...)."""
    from core.runs.store import RunStore

    try:
        return RunStore()
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


@st.cache_data(show_spinner=False, max_entries=16)
def _read_csv(path: str, mtime_: float):
    import pandas as pd

    try:
        return pd.read_csv(path)
    except (OSError, ValueError):
        return None


def load_handwriting(out_dir: Path):
    """``handwriting.csv`` of a results folder (``python -m core.studies.handwriting generalisation``) as a
    DataFrame, None when missing or unreadable."""
    p = Path(out_dir) / "handwriting.csv"
    return _read_csv(str(p), mtime(p)) if p.is_file() else None


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


def result_folders() -> dict[str, Path]:
    """Reproduction outputs present, e.g. ``{"paper": results/paper, "long": results/long}``."""
    root = paths.results_dir()
    out = {}
    for name in RESULT_FOLDERS:
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


def data_key(dataset: str, data: LoadedData) -> str:
    """Identifies a loaded test set in cache keys (its source and size)."""
    return f"{dataset}|{data.source}|{len(data)}"


@st.cache_resource(show_spinner=False, max_entries=16)
def _set_traces(key: str, mtime_: float, data_key_: str, n: int, noise: float, name: str, _model,
                _data: LoadedData):
    from core.data.transforms import add_noise
    from core.eval import match
    from core.eval.curves import SEED
    from core.eval.robustness_points import fixed_subset
    from core.models.registry import trace_schema

    idx = fixed_subset(len(_data), n, seed=0)
    images = _data.images[idx] if noise == 0 else add_noise(_data.images[idx], "gaussian", noise, seed=SEED)
    return match.set_traces(_model, images, _data.labels[idx], trace_schema(name), indices=idx)


SET_SIZES = (1000, 2000, 5000, 10000)  # images Mechanisms' match view searches: the fixed subset (seed 0) of this size


def set_sizes(n_images: int) -> list[int]:
    """The searched-set sizes offered for a test set of ``n_images`` (the first is the default)."""
    return [s for s in SET_SIZES if s < n_images] + [n_images]


def set_traces(entry: catalog.ModelEntry, model, dataset: str, data: LoadedData, n: int, noise: float = 0.0):
    """``core.eval.match.SetTraces`` of ``model`` on the fixed subset of ``n`` test images (seed 0),
    under Gaussian noise of variance ``noise`` (0: clean); computed once per model, set and
    noise level, held in memory (read-only)."""
    return _set_traces(entry.key, entry_mtime(entry), data_key(dataset, data), int(n), float(noise), entry.model,
                       model, data)


@st.cache_data(max_entries=32, show_spinner=False)
def activation_stats(_model, model_key: str, mtime_: float, data_key_: str, _images, _labels, n: int,
                     num_classes: int):
    """``core.eval.robustness_points.activation_stats`` on the fixed subset of ``n`` images (seed 0)."""
    from core.eval import robustness_points as points

    idx = fixed_subset(len(_images), n, seed=0)
    return points.activation_stats(_model, _images[idx], _labels[idx], num_classes)


@st.cache_data(max_entries=16, show_spinner=False)
def selection_reports(_model, model_key: str, mtime_: float, data_key_: str, _images, _labels, n: int):
    """What the attention does (core.eval.selection) for the model and its random-selection twin."""
    from core.eval import selection

    idx = fixed_subset(len(_images), n, seed=0)
    return (selection.selection_report(_model, _images[idx], _labels[idx]),
            selection.selection_report(selection.random_twin(_model), _images[idx], _labels[idx]))


# --------------------------------------------------------------------------- Robustness scorer


@st.cache_resource(show_spinner=False, max_entries=4)
def _shipped(path: str, mtime_: float) -> curves.ShippedCurves:
    """The curves computed for the shipped models at build time (pretrained/curves.json)."""
    return curves.ShippedCurves.load(Path(path))


@st.cache_data(show_spinner=False, max_entries=256)
def _weights_hash(path: str, mtime_: float) -> str:
    return curves.file_hash(path)


# cache_resource: results are read-only, and handing out the same object (no copy) keeps a
# slider move cheap even when the curve needs 21 points x 5 models from the cache
# ``ident`` (model key, weights mtime, data key; Scorer.ident) is what the cache keys on: the
# model and the images themselves are not hashed (leading underscore)
@st.cache_resource(max_entries=4000, show_spinner=False)
def _noise_point(ident: tuple, _model, _images, _labels, kind: str, strength: float, with_activity: bool,
                 seed: int) -> EvalPoint:
    return noisy_eval(_model, _images, _labels, kind, strength, seed, with_activity=with_activity)


@st.cache_resource(max_entries=1000, show_spinner=False)
def _stretch_point(ident: tuple, _model, _images, _labels, factor: float) -> EvalPoint:
    return stretch_eval(_model, _images, _labels, factor)


@st.cache_resource(max_entries=8, show_spinner=False)
def _subset(data_key: str, _data, n: int) -> tuple[np.ndarray, np.ndarray]:
    idx = fixed_subset(len(_data), n, seed=0)
    return np.ascontiguousarray(_data.images[idx]), np.ascontiguousarray(_data.labels[idx])


def robustness_scorer(dataset: str, data: LoadedData, models: dict) -> Scorer:
    """``core.eval.scorer.Scorer`` over these process-wide caches: every point once per server."""
    n = paths.robustness_subset(curves.SUBSET)
    key = f"{dataset}|{data.source}|{len(data)}|{n}"
    images, labels = _subset(key, data, n)
    pre = paths.pretrained_dir()
    return Scorer(key, images, labels, models, shipped=_shipped(str(pre), mtime(pre / curves.FILE)),
                  seed=curves.SEED, noise_fn=_noise_point, stretch_fn=_stretch_point, weights_hash=_weights_hash)


def shipped_scorer(dataset: str, models: dict):
    """Without the test set: ``core.eval.scorer.shipped_only`` over the shipped curves, i.e.
    ``(ShippedScorer or None, methods without shipped points)``."""
    from core.eval.scorer import shipped_only

    pre = paths.pretrained_dir()
    return shipped_only(f"{dataset}|shipped", models, _shipped(str(pre), mtime(pre / curves.FILE)),
                        seed=curves.SEED, weights_hash=_weights_hash)


# --------------------------------------------------------------------------- warm-up

WARMUP_THREADS = "rimscope-"  # the names of the warm-up's threads start so (app.py's and start_warmup's)


class _NoContextOnPurpose(logging.Filter):
    """The warm-up's threads read the shared caches outside any script run, on purpose: Streamlit's
    "missing ScriptRunContext!" warning (one per cache read, seven at a server's start) is dropped
    for them; any other thread still gets it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (threading.current_thread().name.startswith(WARMUP_THREADS)
                    and "missing ScriptRunContext" in record.getMessage())


_CONTEXT_LOGGER = logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context")
if not any(isinstance(f, _NoContextOnPurpose) for f in _CONTEXT_LOGGER.filters):
    _CONTEXT_LOGGER.addFilter(_NoContextOnPurpose())

WARMUP: dict = {"state": "not started", "steps": {}, "error": None,  # what the warm-up did, for benches/tests
                "before_first_page": {}}  # the steps of warm_before_first_page, in seconds
_FIRST_RUN_OVER = threading.Event()
FIRST_RUN_WAIT_S = 60.0  # the warm-up starts when the first script run is over, or after this long
_STOP = threading.Event()  # the interpreter is exiting: the warm-up ends after its current step
EXIT_WAIT_S = 120.0  # at exit, the longest the warm-up's current step is waited for


_RUNNING = [0]  # script runs of app.py in progress, every session together
_RUNNING_LOCK = threading.Lock()
_LAST_RUN_OVER = [-1e9]  # time.monotonic() at the end of the last script run, every session together
YIELD_MAX_S = 3.0  # the longest the warm-up waits for the pages before its next point
# the warm-up's later steps (other noise kinds, protocols and data sets, the PNG renderer's browser:
# most of its 40 s of work) wait until no script run has happened for this long, so they never share
# the machine with someone clicking through the pages
IDLE_S = 10.0


def script_run_started() -> None:
    """app.py, before each script run: the warm-up pauses between its points while a page is
    drawn (its Python work would otherwise share the interpreter with that page's)."""
    with _RUNNING_LOCK:
        _RUNNING[0] += 1


def script_run_over() -> None:
    """app.py, after each script run: the warm-up may start (it waits for the first page, so it
    does not slow exactly that page down on a busy machine) and goes on where it paused."""
    with _RUNNING_LOCK:
        _RUNNING[0] = max(0, _RUNNING[0] - 1)
        _LAST_RUN_OVER[0] = time.monotonic()
    _FIRST_RUN_OVER.set()


def _idle() -> bool:
    """No script run in progress, and none for ``IDLE_S``."""
    return _RUNNING[0] == 0 and time.monotonic() - _LAST_RUN_OVER[0] >= IDLE_S


def _yield_to_pages(idle: bool = False) -> None:
    """Before the warm-up's next point: wait while a page is being computed, at most
    ``YIELD_MAX_S`` (a point in progress is finished first: a page that needs it waits for it,
    not twice); with ``idle``, until the server has been idle for ``IDLE_S`` (or is stopping)."""
    deadline = time.monotonic() + YIELD_MAX_S
    while not _STOP.is_set() and (not _idle() if idle else _RUNNING[0] > 0 and time.monotonic() < deadline):
        time.sleep(0.02)


def default_models(dataset: str, protocol: str = catalog.DEFAULT_PROTOCOL) -> dict:
    """``{method: (entry, model)}``: what a per-model page compares by default (the pretrained
    model of each method, of ``protocol``), loaded through the shared cache."""
    entries, _ = model_entries(dataset)
    by_method: dict[str, list] = {}
    for e in entries:
        by_method.setdefault(e.model, []).append(e)
    out = {}
    for method, cands in by_method.items():
        entry = catalog.preferred_entry(cands, protocol)
        out[method] = (entry, load_entry_cached(entry)[0])
    return out


def _warm_imports() -> None:
    import plotly.subplots  # noqa: F401
    import scipy.stats  # noqa: F401

    import core.report.plots.comparison  # noqa: F401
    import core.report.plots.training  # noqa: F401
    import core.report.stats  # noqa: F401
    import core.runs.store  # noqa: F401
    import core.training.loop  # noqa: F401
    from core.data.online import download_reachable

    download_reachable(next(iter(DATASETS)))  # the Train page's probe, cached for a minute


def _warm_robustness(dataset: str, kinds=("gaussian",), protocol: str = catalog.DEFAULT_PROTOCOL,
                     idle: bool = False) -> None:
    """The Robustness page's points for the default models of ``protocol``: every level of the
    error curves (mostly shipped points) and of the mask-shift curves (computed), per noise kind."""
    from core.models.registry import trace_schema

    models = default_models(dataset, protocol)
    scorer = robustness_scorer(dataset, test_data(dataset), models)
    for kind in kinds:
        levels = (1.0,) if kind == "poisson" else curves.GRID
        for method in models:
            for s in levels:
                _yield_to_pages(idle)
                scorer.curve_noise(method, kind, s)
        for method, (entry, _) in models.items():
            if trace_schema(entry.model).activity_binary:
                scorer.noise(method, "gaussian", 0.0)
                for s in levels:
                    _yield_to_pages(idle)
                    scorer.noise(method, kind, s)


LATE_STEPS = ("noise kinds", "fashion_mnist", "protocols", "protocols, other kinds", "png")  # run when the server is idle (IDLE_S)
OTHER_KINDS = ("salt_pepper", "speckle", "poisson")  # the Robustness page's noise kinds after Gaussian
ALL_KINDS = ("gaussian", *OTHER_KINDS)


def _other_protocols(dataset: str) -> list[str]:
    entries, _ = model_entries(dataset)
    return sorted({e.protocol for e in entries if e.source == "pretrained"} - {catalog.DEFAULT_PROTOCOL})


def _default_rim(dataset: str):
    """``(entry, model, test data)`` of the default pretrained RIM of ``dataset`` (what Mechanisms
    opens with), or None where none is shipped."""
    from core.models.registry import DEFAULT_MODEL

    models = default_models(dataset)
    if DEFAULT_MODEL not in models:
        return None
    entry, model = models[DEFAULT_MODEL]
    return entry, model, test_data(dataset)


def _warm_mechanisms_set(dataset: str) -> None:
    """Mechanisms' "Across the test set" for the default RIM: the statistics of the default
    subset (the page's own cache: ``activation_stats`` / ``selection_reports``)."""
    if (rim := _default_rim(dataset)) is None:
        return
    entry, model, data = rim
    n = 1000  # the page's default size ("Test images")
    activation_stats(model, entry.key, entry.weights_mtime, data_key(dataset, data), data.images, data.labels, n,
                     len(DATASETS[dataset].classes))
    selection_reports(model, entry.key, entry.weights_mtime, data_key(dataset, data), data.images, data.labels, n)


def _warm_match_set(dataset: str) -> None:
    """Mechanisms' set-wide tabs: the default RIM's traces over the searched set of its default size
    ("Find the same mechanisms elsewhere" matches the input's block in them), ready before they open."""
    if (rim := _default_rim(dataset)) is not None:
        entry, model, data = rim
        set_traces(entry, model, dataset, data, set_sizes(len(data))[0])


def _warm_compare() -> None:
    """Compare's tabs: each grid's summary and curves, and the claims table's two grids (read from
    every run record: a second or more, paid here instead of on the first open of that tab)."""
    from core.report.claims import grid

    for out_dir in result_folders().values():
        load_summary(out_dir)
        load_curves(out_dir)
    for name in ("converged", "paper"):
        grid(paths.results_dir() / name)


def _warm_png() -> None:
    """Open the PNG renderer's browser and render a tiny figure: the first "Make PNG" is quick too."""
    from .export import warm_png

    warm_png()


def _warm() -> None:
    # not at a lower priority: a session that needs a point being warmed waits for it (the
    # caches lock per key), so a starved warm-up would slow exactly the pages it is for
    WARMUP["state"] = "waiting for the first page"
    _FIRST_RUN_OVER.wait(FIRST_RUN_WAIT_S)
    dataset = next(iter(DATASETS))  # every picker's default data set
    steps = [("imports", _warm_imports), *_first_steps(dataset), ("match set", lambda: _warm_match_set(dataset)),
             ("robustness", lambda: _warm_robustness(dataset)),
             ("compare", _warm_compare),
             # then what a newcomer does next: the test-set view of Mechanisms, the other
             # noise kinds, the other grey data set, the other protocols' models (Gaussian
             # noise, what a switch shows first), then those under the other kinds
             ("mechanisms set", lambda: _warm_mechanisms_set(dataset)),
             ("noise kinds", lambda: _warm_robustness(dataset, OTHER_KINDS, idle=True)),
             ("fashion_mnist", lambda: _warm_robustness("fashion_mnist", ALL_KINDS, idle=True)
              if "fashion_mnist" in DATASETS else None),
             ("protocols", lambda: [_warm_robustness(dataset, ("gaussian",), p, idle=True)
                                    for p in _other_protocols(dataset)]),
             ("protocols, other kinds", lambda: [_warm_robustness(dataset, OTHER_KINDS, p, idle=True)
                                                 for p in _other_protocols(dataset)]),
             ("png", _warm_png)]
    WARMUP["state"] = "running"
    for name, fn in steps:
        _yield_to_pages(idle=name in LATE_STEPS)
        if _STOP.is_set():
            WARMUP["state"] = "stopped at exit"
            return
        _step(name, fn, WARMUP["steps"])
    WARMUP["state"] = "done"


def _first_steps(dataset: str) -> list[tuple]:
    """What every first page reads: the manifest, the default models, the test data."""
    return [("manifest", manifest), ("models", lambda: default_models(dataset)), ("test data", lambda: test_data(dataset))]


def _step(name: str, fn, record: dict, what: str = "") -> bool:
    """Run one warm-up step, its seconds into ``record``; False (the error kept in ``WARMUP``) when it failed."""
    t0 = time.perf_counter()
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - a page shows the problem when it gets there
        WARMUP["error"] = f"{what}{name}: {type(exc).__name__}: {exc}"
        return False
    finally:
        record[name] = round(time.perf_counter() - t0, 3)
    return True


def _warmup_off() -> bool:
    return os.environ.get("RIMSCOPE_WARMUP", "1").strip() == "0"


def warm_before_first_page() -> None:
    """What ``python app.py`` does as soon as the server is up, before any browser asks for a page
    (a browser then loads Streamlit's JavaScript for most of a second): the default data set's
    pretrained models and test data into the shared caches, so a newcomer's first page, whichever
    it is, finds them (a few tenths of a second). The warm-up proper (``start_warmup``) waits for
    that first page; ``RIMSCOPE_WARMUP=0`` switches both off."""
    if _warmup_off():
        return
    for name, fn in _first_steps(next(iter(DATASETS))):
        if _STOP.is_set() or not _step(name, fn, WARMUP["before_first_page"], "before the first page, "):
            return


def stop_at_exit(thread: threading.Thread) -> None:
    """At interpreter exit, end the warm-up ``thread`` after its current step and wait for it: a
    daemon thread still in PyTorch when the interpreter goes down aborts the process ("terminate
    called without an active exception"), e.g. at the end of a test of app.py."""
    def stop() -> None:
        _STOP.set()
        _FIRST_RUN_OVER.set()  # a warm-up still waiting for the first page goes on to its end
        thread.join(EXIT_WAIT_S)

    atexit.register(stop)


@st.cache_resource(show_spinner=False)
def start_warmup() -> threading.Thread | None:
    """Once per server process: fill the shared caches with what every newcomer's first views
    need (``RIMSCOPE_WARMUP=0`` switches it off)."""
    if _warmup_off():
        WARMUP["state"] = "off"
        return None
    t = threading.Thread(target=_warm, name="rimscope-warmup", daemon=True)
    t.start()
    stop_at_exit(t)
    return t
