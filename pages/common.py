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


def _leave_legacy_pages_mode() -> None:
    """Run every page through app.py's ``st.navigation``, even on a deep link.

    Streamlit decides once per server, on its first script run, whether a ``pages/`` folder
    beside the main script means its old folder-based navigation. When a freshly started
    server's first request is a deep link (``/compare``), it runs ``pages/compare.py`` that
    way: no page config, no icons, and every helper module listed as a page. The flag it set
    is cleared here and the run restarted, so app.py's navigation (same URL, same page)
    takes over. Private API, hence the guards: if it moves, the old behaviour returns, and
    ``tests/browser`` (deep link on a fresh server) says so.
    """
    try:
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:  # pragma: no cover - a future Streamlit without the class
        return
    if getattr(PagesManager, "uses_pages_directory", None):
        PagesManager.uses_pages_directory = False
        st.rerun()


_leave_legacy_pages_mode()  # every page imports this module first


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


def keep_valid(key: str, options) -> None:
    """Drop a widget value (e.g. from a shared URL) that is not one of its options."""
    if key in st.session_state and st.session_state[key] not in list(options):
        del st.session_state[key]


def dataset_picker(key: str = "dataset", label: str = "Data set") -> str:
    names = list(DATASETS)
    keep_valid(key, names)
    return st.selectbox(label, names, key=key, format_func=lambda n: DATASETS[n].title)


def show_error(exc: Exception, what: str = "") -> None:
    """A clear message instead of a traceback."""
    prefix = f"{what}: " if what else ""
    if isinstance(exc, RimscopeError):
        st.error(prefix + str(exc))
    else:
        st.error(f"{prefix}unexpected problem ({type(exc).__name__}: {exc}).")


# --- helpers for the per-input pages (Mechanisms, Robustness) ---------------------------


def entry_mtime(entry: catalog.ModelEntry) -> float:
    """Modification time of an entry's weights: part of every cache key of its results."""
    path = entry.stem.with_suffix(".safetensors")
    return path.stat().st_mtime if path.is_file() else 0.0


PROTOCOL_KEY = "pretrained_protocol"
PROTOCOL_TITLES = {"converged": "converged (trained to convergence)", "paper": "paper protocol (1,000 SGD steps)"}
_PICKER_PREFIXES = ("mech_model_", "mech_cmp_", "rb_cmp_")


def chosen_protocol() -> str:
    return st.session_state.get(PROTOCOL_KEY, "converged")


def _protocol_changed() -> None:
    for k in [k for k in st.session_state if str(k).startswith(_PICKER_PREFIXES)]:
        del st.session_state[k]  # the pickers fall back to the new protocol's pretrained models


def protocol_switch(entries: list[catalog.ModelEntry]) -> str:
    """Sidebar switch between the converged and the paper-protocol pretrained models (the
    default model of every picker); shown when both are shipped."""
    have = sorted({e.protocol for e in entries if e.source == "pretrained"})
    if len(have) < 2:
        return have[0] if have else chosen_protocol()
    if st.session_state.get(PROTOCOL_KEY) not in have:
        st.session_state[PROTOCOL_KEY] = "converged" if "converged" in have else have[0]
    return st.sidebar.radio("Pretrained models", sorted(have, key=lambda p: p != "converged"), key=PROTOCOL_KEY,
                            format_func=lambda p: PROTOCOL_TITLES.get(p, p), on_change=_protocol_changed,
                            help="Which shipped models the pages pick by default. Converged: Adam until the "
                                 "validation accuracy stops improving. Paper: the paper's 1,000 SGD iterations.")


def _preferred(candidates: list[catalog.ModelEntry]) -> catalog.ModelEntry:
    pre = [e for e in candidates if e.source == "pretrained"]
    want = chosen_protocol()
    return next((e for e in pre if e.protocol == want), pre[0] if pre else candidates[0])


def main_model_picker(all_entries: list[catalog.ModelEntry], key: str, prefer: str = "rim",
                      label: str = "Model") -> catalog.ModelEntry:
    """A selectbox over ``all_entries``; the default is the pretrained ``prefer`` model."""
    preferred = [e for e in all_entries if e.model == prefer]
    default = _preferred(preferred) if preferred else all_entries[0]
    if st.session_state.get(key) not in [e.key for e in all_entries]:
        st.session_state.pop(key, None)
    by_key = {e.key: e for e in all_entries}
    chosen = st.selectbox(label, list(by_key), index=list(by_key).index(default.key), key=key,
                          format_func=lambda k: by_key[k].display)
    return by_key[chosen]


def method_models_picker(all_entries: list[catalog.ModelEntry], key_prefix: str,
                         main: catalog.ModelEntry | None = None, label: str = "Models compared") -> dict:
    """One model per method (pretrained preferred; the user may pick others in an expander).

    Returns ``{method: ModelEntry}`` in the registry's method order; ``main`` stands for its
    own method.
    """
    from core.models import list_models

    by_method: dict[str, list] = {}
    for e in all_entries:
        by_method.setdefault(e.model, []).append(e)
    chosen = {}
    with st.expander(f"{label}: one model per method", expanded=False):
        for method in [m for m in list_models() if m in by_method]:
            cands = by_method[method]
            if main is not None and main.model == method:
                chosen[method] = main
                st.caption(f"{method}: {main.display} (the model chosen above)")
                continue
            key = f"{key_prefix}_{method}"
            keys = [e.key for e in cands]
            if st.session_state.get(key) not in keys:
                st.session_state.pop(key, None)
            default = _preferred(cands).key
            if len(cands) == 1:
                chosen[method] = cands[0]
                st.caption(f"{method}: {cands[0].display}")
                continue
            k = st.selectbox(method, keys, index=keys.index(default), key=key,
                             format_func=lambda kk, c=cands: next(e.display for e in c if e.key == kk))
            chosen[method] = next(e for e in cands if e.key == k)
    return chosen


def load_or_report(entry: catalog.ModelEntry):
    """``(model, meta)`` from the cache, or ``None`` after showing why it failed."""
    try:
        return load_entry_cached(entry)
    except Exception as exc:  # a broken or vanished checkpoint must not take the page down
        show_error(exc, f"Could not load {entry.display}")
        return None


def prepare_upload(data: bytes, dataset: str):
    """Uploaded bytes -> ``PreparedImage`` for ``dataset``; raises ``InputImageError``."""
    from core.preprocess import load_image, prepare_for_dataset

    info = DATASETS[dataset]
    mode = "plain" if dataset == "fashion_mnist" else "digit"
    return prepare_for_dataset(load_image(data), info.image_shape, mode=mode)


def show_preprocessing(prepared, expanded: bool = False) -> None:
    """The intermediate images of ``core.preprocess`` in an expander."""
    with st.expander("Preprocessing steps", expanded=expanded):
        names = {"gray": "grey", "rgb": "as uploaded", "cropped": "cropped", "fitted": "fitted"}
        steps = list(prepared.steps.items())
        cols = st.columns(len(steps) + 1)
        for col, (name, arr) in zip(cols, steps):
            shown = upscaled(arr, 112) if max(arr.shape[:2]) < 112 else arr
            col.image(shown, caption=f"{names.get(name, name)} ({arr.shape[1]}x{arr.shape[0]})", width="stretch")
        cols[-1].image(upscaled(prepared.array), caption="model input", width="stretch")
        notes = []
        if prepared.inverted:
            notes.append("inverted (a light background became black, as in MNIST)")
        if prepared.warning:
            notes.append(prepared.warning)
        if notes:
            st.caption("; ".join(notes))


def upscaled(image, side: int = 168):
    """Nearest-neighbour enlargement of a small image, so pixels stay crisp on screen."""
    import numpy as np

    arr = np.asarray(image)
    f = max(1, side // max(arr.shape[:2]))
    return np.repeat(np.repeat(arr, f, axis=0), f, axis=1)


# --- Overview / Models / Compare helpers ------------------------------------------------
# Paths are read from the environment at call time (tests and deployments move them):
# RIMSCOPE_PRETRAINED_DIR (pretrained/ with manifest.json) and RIMSCOPE_RESULTS_DIR (the
# folder holding paper/ and long/ reproduction outputs; default results/).

import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
from pathlib import Path  # noqa: E402

from core.data import ROOT  # noqa: E402
from core.errors import CheckpointError  # noqa: E402

# reproduction outputs under results/ the Compare page offers: folder -> what it holds
SCHEDULES = {"paper": "equal initialisation: paper grid, ablations, init study",
             "converged": "converged protocol (Adam, early stopping on validation)",
             "unequal_init/paper": "old run, unequal initialisation (paper schedule)",
             "unequal_init/long": "old run, unequal initialisation (longer schedule)",
             "unequal_init/param_matched": "old run, unequal initialisation (parameter-matched baselines)"}
MAX_UPLOAD_MB = 20  # per file; server.maxUploadSize is 20 as well
PICKLE_SUFFIXES = (".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".bin", ".tar", ".joblib", ".npy", ".npz", ".zip")


def url_bool(text: str) -> bool:
    if text in ("1", "true", "True"):
        return True
    if text in ("0", "false", "False"):
        return False
    raise ValueError(text)


def url_list(text: str) -> list[str]:
    return [t for t in str(text).split(",") if t]


def _url_text(value) -> str | None:
    """A widget value as URL text (None: not kept in the URL)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (str, int, float)):
        return str(value)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) and "," not in v for v in value):
        return ",".join(value)
    return None


def _url_type(spec: dict, key: str):
    if key in spec:
        return spec[key]
    return next((t for k, t in spec.items() if k.endswith("*") and key.startswith(k[:-1])), None)


def restore_from_url(spec: dict) -> None:
    """Widget values from the URL for a fresh session (a reload, a shared link).

    ``spec``: widget key -> type (``str``, ``int``, ``float``); a key ending in ``*`` matches
    every key with that prefix (e.g. ``mech_model_*``). Only keys the session does not have
    yet are taken, so the URL never overrides what the user does in this session; values that
    do not parse are ignored (the widget keeps its default). Runs once per session and page."""
    flag = "_url_restored_" + "|".join(sorted(spec))
    if st.session_state.get(flag):
        return  # once per session and page: later the session's own choices rule
    st.session_state[flag] = True
    for key in st.query_params:
        typ = _url_type(spec, key)
        if typ is None or key in st.session_state:
            continue
        try:
            st.session_state[key] = typ(st.query_params[key])
        except (TypeError, ValueError):
            pass


def sync_url(spec: dict) -> None:
    """Write the current values of the ``spec`` widgets into the URL (a link to this view)."""
    want = {}
    for key, value in st.session_state.items():
        if isinstance(key, str) and _url_type(spec, key) is not None and _url_text(value) is not None:
            want[key] = _url_text(value)
    for key, value in want.items():
        if st.query_params.get(key) != value:
            st.query_params[key] = value


def clamp_state(key: str, lo: int, hi: int) -> None:
    """Keep a number widget's value (e.g. from a shared URL) inside its range."""
    if key in st.session_state:
        try:
            st.session_state[key] = int(min(max(int(st.session_state[key]), lo), hi))
        except (TypeError, ValueError):
            del st.session_state[key]


def image_name(data: LoadedData, i: int) -> str:
    """How to call image ``i`` of a loaded set: a bundled sample's images are not test images."""
    if data.is_sample:
        split = "training" if "train images" in data.source else "test"
        orig = data.indices[int(i)] if data.indices is not None and int(data.indices[int(i)]) >= 0 else None
        return f"sample image #{int(i)}" + (f" ({split} image #{int(orig)} of the original set)" if orig is not None else "")
    return f"test image #{int(i)}"


def missing_data_note(dataset: str, exc: Exception, what: str) -> None:
    """One short note for a data set that is not on this machine: what is off, how to get it,
    and the technical detail folded away."""
    from core.data import how_to_get

    st.warning(f"No {DATASETS[dataset].title} test data on this machine, so {what}.")
    st.markdown("To get it, use one of: \n" + "\n".join(f"- {w}" for w in how_to_get(dataset)))
    with st.expander("Details"):
        st.code(str(exc), language=None)


def pretrained_dir() -> Path:
    return Path(os.environ.get("RIMSCOPE_PRETRAINED_DIR") or ROOT / "pretrained")


def results_root() -> Path:
    return Path(os.environ.get("RIMSCOPE_RESULTS_DIR") or ROOT / "results")


def mtime(path) -> float:
    try:
        return Path(path).stat().st_mtime
    except OSError:
        return 0.0


def run_store():
    """The user's run store, or ``None`` while ``core.runs`` is unavailable or broken."""
    try:
        from core.runs import RunStore

        return RunStore()
    except (ImportError, AttributeError):
        return None
    except Exception:  # a broken store must not take the page down; callers say so
        return None


def session_owner() -> str:
    """This browser session's id (the Train page's convention: ``rimscope_owner`` in the session,
    ``?owner=`` in the URL so a reload keeps it). Runs are editable only by their owner."""
    import re
    import secrets

    owner = st.session_state.get("rimscope_owner")
    if not owner:
        q = st.query_params.get("owner", "")
        owner = q if re.fullmatch(r"[0-9a-f]{16}", q or "") else secrets.token_hex(8)
        st.session_state["rimscope_owner"] = owner
    if st.query_params.get("owner") != owner:
        st.query_params["owner"] = owner
    return owner


def model_entries(dataset: str | None = None) -> tuple[list[catalog.ModelEntry], list[str]]:
    """Pretrained entries plus the user's runs, and any problems met while listing them."""
    problems = []
    try:
        pre = catalog.pretrained_entries(dataset, pretrained_dir=pretrained_dir())
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


def manifest() -> dict:
    p = pretrained_dir() / "manifest.json"
    m = read_json(str(p), mtime(p))
    return m if m and isinstance(m.get("models"), list) else {"models": []}


def schedules_available() -> dict[str, Path]:
    """Reproduction outputs present, e.g. ``{"paper": results/paper, "long": results/long}``."""
    root = results_root()
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
    from core.plots import curves_from_metadata

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


def reproduce_hint(out_dir: Path | str = "results/paper") -> str:
    return (f"Produce it with `python -m core.reproduce run --seeds 0 1 2 --out {out_dir}` (trains the grid "
            f"and writes the tables), or `python -m core.reproduce tables --out {out_dir}` if the runs are "
            "already there. A longer schedule goes to `results/long` (add `--iterations 5000`).")


def fmt_pct(v) -> str:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return "n/a"
    return f"{100 * f:.2f} %" if math.isfinite(f) else "n/a"


def png_export_ready() -> bool:
    """Whether plotly can render PNGs here (kaleido plus a Chromium it can find)."""
    return _png_export_ready()


@st.cache_resource(show_spinner=False)
def _png_export_ready() -> bool:
    try:
        import kaleido  # noqa: F401
        from choreographer.browsers.chromium import Chromium

        return bool(os.environ.get("BROWSER_PATH") or Chromium.find_browser(skip_local=False))
    except Exception:
        return False


@st.cache_data(show_spinner=False, max_entries=32)
def _figure_png(fig_json: str, width: int, height: int) -> bytes:
    import plotly.io as pio

    return pio.from_json(fig_json).to_image(format="png", width=width, height=height, scale=2)


def figure_downloads(fig, name: str, key: str, width: int = 1100) -> None:
    """PNG and standalone HTML download buttons under a figure.

    Rendering a PNG (kaleido starts a headless Chromium) takes seconds, so it is made only when
    asked: "Make PNG" renders it under a spinner, then "⬇ PNG" downloads it at once. The PNG is
    kept for this figure (same content, same size) for the session; a changed figure needs a new
    one. HTML is built when its button is clicked (quick).
    """
    import hashlib

    fig_json = fig.to_json()
    height = int(fig.layout.height or 500)
    row = st.container(horizontal=True, vertical_alignment="center")
    if png_export_ready():
        digest = hashlib.sha256(f"{width}x{height}|{fig_json}".encode()).hexdigest()
        held_key = f"_png_{key}"
        held = st.session_state.get(held_key)
        png = held[1] if held and held[0] == digest else None
        slot = row.empty()  # the "Make PNG" button, replaced by the download once the PNG is made
        if png is None and slot.button("🖼 Make PNG", key=f"{key}_png_make",
                                       help="Renders the figure as a PNG with kaleido (takes a few seconds), "
                                            "then offers it for download."):
            with row, st.spinner("Rendering the PNG…"):
                try:
                    png = _figure_png(fig_json, width, height)
                except Exception as exc:  # kaleido or its browser failed: say so, HTML still works
                    st.caption(f"PNG export failed ({type(exc).__name__}); use HTML.")
                else:
                    st.session_state[held_key] = (digest, png)
        if png is not None:
            slot.download_button("⬇ PNG", data=png, file_name=f"{name}.png", mime="image/png", key=f"{key}_png",
                                 on_click="ignore", help="Rendered for this figure; downloads at once.")
    else:
        row.caption("PNG export needs kaleido and Chromium; use HTML.")

    def _html() -> bytes:
        import plotly.io as pio

        return pio.from_json(fig_json).to_html(include_plotlyjs=True, full_html=True).encode()

    row.download_button("⬇ HTML", data=_html, file_name=f"{name}.html", mime="text/html", key=f"{key}_html",
                        on_click="ignore", help="Interactive figure, opens offline in any browser.")


def check_upload(weights_name: str, weights: bytes, meta_name: str, meta: bytes,
                 expected_dataset: str | None = None) -> dict:
    """Refuse bad checkpoint uploads before anything is stored; returns the parsed metadata.

    Pickle-based files (.pt, .pth, .ckpt, …) are refused by name and never opened. Raises
    ``CheckpointError`` whose message names the problem. ``expected_dataset=None`` takes
    the data set stated in the metadata (it must be a known one).
    """
    from core.checkpoint import load_checkpoint_bytes, parse_metadata

    wn, mn = (weights_name or "").lower(), (meta_name or "").lower()
    for n, shown in ((wn, weights_name), (mn, meta_name)):
        if n.endswith(PICKLE_SUFFIXES):
            raise CheckpointError(
                f"{shown} is a pickle-based file (PyTorch .pt/.pth/.ckpt and similar). RIMscope never opens "
                "pickle files, because loading one can run arbitrary code. Save the weights with safetensors "
                "(safetensors.torch.save_file(model.state_dict(), 'model.safetensors')) and upload that "
                "together with its .json metadata.")
    if not wn.endswith(".safetensors"):
        raise CheckpointError(f"The weights file must be a .safetensors file; got {weights_name!r}.")
    if not mn.endswith(".json"):
        raise CheckpointError(f"The metadata file must be a .json file; got {meta_name!r}.")
    for data, shown in ((weights, weights_name), (meta, meta_name)):
        if len(data) > MAX_UPLOAD_MB * 1024 * 1024:
            raise CheckpointError(f"{shown} is {len(data) / 2**20:.1f} MB; the limit is {MAX_UPLOAD_MB} MB per file.")
    parsed = parse_metadata(meta)
    if expected_dataset is None:
        expected_dataset = parsed.get("dataset")
        if expected_dataset not in DATASETS:
            raise CheckpointError(f"The metadata names no known data set ({expected_dataset!r}); "
                                  f"choose the data set it was trained on ({', '.join(DATASETS)}).")
    load_checkpoint_bytes(weights, meta, expected_dataset=expected_dataset)
    return parsed
