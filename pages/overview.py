"""Overview: what the method is, the five methods and their sizes, what is loaded, where to start."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.catalog import DEFAULT_PROTOCOL
from core.data.datasets import DATASETS, SOURCES, available_sources
from core.models.registry import DEFAULT_MODEL, config_fields, get_spec, list_models, parameter_counts
from core.paths import ROOT, results_dir
from core.report.claims import read_claims
from core.report.facts import parameter_gap_text
from core.report.fmt import PROTOCOL_SHORT, method_title, protocol_title, protocols_text, shipped_models_text
from core.report.plots.comparison import INPUT_SHAPES
from core.report.plots.style import bar_css, method_color
from pages.ui.cache import RESULT_FOLDERS, entry_metadata, manifest, model_entries, result_folders
from pages.ui.frontend import charts_later
from pages.ui.messages import show_error
from pages.ui.pickers import sidebar_protocol

DIAGRAM = ROOT / "assets" / "diagram.svg"

RIM_KNOBS = {  # setting -> (plain name, meaning); the setting names themselves only in the details
    "num_units": ("number of LSTMs (n)", "parallel LSTMs (mechanisms)"),
    "hidden_size": ("hidden units per LSTM", "size of each LSTM's state"),
    "k_active": ("active LSTMs per row (k)", "LSTMs the input attention activates for each row"),
    "embed_dim": ("row encoding size", "size of the row encoding e_t = W_e x_t + b_e (computed before attention)"),
    "input_heads": ("input-attention heads", "heads of the input attention"),
    "input_key_size": ("input-attention key size", "key/query size per input-attention head"),
    "input_value_size": ("input-attention value size", "value size per input-attention head (LSTM input = heads x this)"),
    "comm_heads": ("communication heads", "heads of the communication attention"),
    "comm_key_size": ("communication key size", "key/query size per communication head"),
    "comm_value_size": ("communication value size", "value size per communication head"),
    "alpha": ("communication share", "share of the communication read added to an active LSTM's state "
                                     "(paper: 1/10; 0 = ablation: no communication)"),
    "forget_bias": ("forget-gate bias", "starting bias of every LSTM forget gate (the same default for every method)"),
    "selection": ("who is active", "attention (the paper), random (ablation: k drawn at random), all (ablation)"),
    "impl": ("implementation", "how the recurrence runs: fused (a hand-written kernel, the default) or reference "
                               "(plain torch ops); same parameters, same results"),
}
LOADED_SOURCES = {  # "What is loaded": source -> (short header, width in px, what it is)
    "npz": ("npz folder", 90, "an npz folder: $RIMSCOPE_DATA_DIR or ./data, with <data set>/train.npz and test.npz"),
    "folder": ("image folder", 100, "an image folder (Animals-10's raw-img)"),
    "torchvision": ("torchvision", 95, "torchvision's cache or download"),
    "sample": ("sample", 75, "the bundled sample of 1,000 images"),
}
SOURCE_NAMES = {"npz": "npz folder", "folder": "image folder", "torchvision": "torchvision cache",
                "sample": "bundled sample"}


@st.cache_data(show_spinner=False)
def _parameter_counts() -> dict[str, dict[str, int]]:
    return {label: parameter_counts(input_dim=d) for label, d in INPUT_SHAPES.items()}


@st.cache_data(show_spinner="Checking data sources…", ttl=300)
def _sources(dataset: str) -> dict[str, bool]:
    return available_sources(dataset)


LINKS = [
    ("pages/compare.py", "Compare", "📊", "the paper's claims against our measurements: curves, errors over seeds, tables"),
    ("pages/mechanisms.py", "Mechanisms", "🧩", "which LSTMs switch on for each row of an image, and who reads from whom"),
    ("pages/robustness.py", "Robustness", "🌫️", "how each method's error grows with noise"),
    ("pages/models.py", "Models", "📦", "every pretrained model and your runs: curves, downloads, uploads"),
    ("pages/train.py", "Train", "🏋️", "train a model yourself with the paper's protocol"),
]

SIX_STEPS = """
1. **Read a row.** An image `[C, H, W]` scaled to [0, 1] is read row by row: `T = H` timesteps, each one
   row flattened to `W·C` numbers (28 for MNIST/Fashion-MNIST, 96 for 32x32 RGB). The row is encoded,
   `e_t = W_e x_t + b_e`, *before* attention, so an all-black row does not look like "no input".
2. **Input attention.** The encoded row is stacked with a **null row** of zeros, `X = [e_t; 0]`. Each LSTM
   asks with its own query from its previous state, `q_i = W_q,i h[t-1, i]`; keys and values are `X W_k`,
   `X W_v`. A softmax over the two rows (per head, then averaged) says how much LSTM *i* attends to the
   real row rather than to the null row.
3. **Top-k activation.** The `k = 4` LSTMs with the largest attention on the real row are **active**
   (`m[t, i] = 1`); the other two are inactive (`m[t, i] = 0`).
4. **Independent update.** An active LSTM runs its own LSTM cell on its attended input. An inactive one
   keeps its state unchanged, `h[t, i] = h[t-1, i]`, `c[t, i] = c[t-1, i]`.
5. **Communication.** Each active LSTM reads from all six through a second multi-head attention and adds
   a fixed share: `h[t, i] = h~[t, i] + 1/10 · MHA(q = h~[t, i], K = V = h~[t, :])`.
6. **Output.** After the last row, the six hidden states are concatenated and a fully connected layer
   gives the 10 logits.
"""


def intro() -> None:
    """The question, the paper's answer and what RIMscope does about it."""
    st.markdown(
        "Does a set of **small LSTMs that take turns** generalise better than plain parallel LSTMs? "
        "The paper studied here (2021, *a method for improving generalization of neural networks based on "
        "multi-head attention*, a close relative of Recurrent Independent Mechanisms) says yes: on MNIST, "
        "Fashion-MNIST, CIFAR-10 and Animals-10, read **one image row per timestep**, its method has a lower "
        "test error than parallel LSTMs, EntNet, RMC and IndRNN, and its error grows less under Gaussian noise. "
        "RIMscope lets you look inside the models and measures those claims with several seeds."
    )


def how_it_works() -> None:
    """The diagram and the six steps in words."""
    if DIAGRAM.is_file():
        st.image(str(DIAGRAM), width="stretch")
    else:
        st.info("The diagram (assets/diagram.svg) is missing from this installation.")
    with st.expander("The six steps in words", expanded=False):
        st.markdown(SIX_STEPS)


def parameter_counts_or_none() -> dict:
    """Each method's parameter count per input shape ({} when a model fails to build, said so)."""
    try:
        return _parameter_counts()
    except Exception as exc:  # a model that fails to build must not hide the rest of the page
        show_error(exc, "Could not count parameters")
        return {}


def methods_table(counts: dict) -> None:
    """One row per method: its parameters per input shape, what it is, how it starts."""
    rows = []
    for name in list_models():
        spec = get_spec(name)
        row = {"method": method_title(name)}
        for label, per_model in counts.items():
            row[f"parameters, input {label.split(' (')[0]}"] = per_model.get(name)
        row["what it is"] = spec.description
        row["initialisation"] = spec.init
        rows.append(row)
    methods_df = pd.DataFrame(rows)
    counts_cols = [c for c in methods_df.columns if c.startswith("parameters")]
    vmax = max((v for by in counts.values() for v in by.values()), default=0)
    colours = [method_color(m) for m in list_models()]
    # a static table: its long descriptions wrap instead of being cut at the cell's edge; each
    # parameter count is a bar in its method's colour, the largest count filling its cell
    st.table(methods_df.style.format(lambda v: f"{int(v):,}" if pd.notna(v) else "n/a", subset=counts_cols)
             .apply(lambda col: [bar_css(v, vmax, c) for v, c in zip(col, colours)], subset=counts_cols),
             hide_index=True)
    st.caption("Every LSTM-style forget gate (RIM's LSTMs, the parallel LSTMs, RMC's memory gate) starts from the same "
               f"forget-gate bias ({config_fields(DEFAULT_MODEL).get('forget_bias')}); LSTM weights are drawn as PyTorch's "
               "own LSTM draws them. Other differences and their reasons are listed in docs/method.md.",
               help="docs/method.md, section \"Differences between the methods\"; the setting is `forget_bias`.")


def sizes_and_colours(counts: dict) -> None:
    """The method colours and what the parameter ratio means for the comparisons."""
    legend = " ".join(
        f"<span style='color:{method_color(m)};font-size:1.3em'>■</span> {method_title(m)}&nbsp;&nbsp;"
        for m in list_models())
    st.markdown(legend, unsafe_allow_html=True)
    st.caption("These colours stand for the same method on every page; in the table above each parameter count "
               "is a bar of its method's colour, the largest count filling its cell.")
    gap = parameter_gap_text(counts or {}, read_claims(results_dir()))
    if gap:
        st.markdown(gap)


def knobs_table() -> None:
    """RIM's settings in plain words with their defaults; their names in the code on request."""
    st.markdown("**Knobs of the paper's method (defaults used everywhere here)**")
    knobs = [{"setting": RIM_KNOBS.get(k, (k, ""))[0], "default": str(v), "meaning": RIM_KNOBS.get(k, (k, ""))[1]}
             for k, v in config_fields(DEFAULT_MODEL).items() if k not in ("input_dim", "num_classes")]
    st.table(pd.DataFrame(knobs), hide_index=True)  # wraps the longer meanings
    with st.expander("Details: the settings' names in the code"):
        st.caption("For models' metadata (config) and the command line's model overrides.")
        st.table(pd.DataFrame([{"setting": RIM_KNOBS.get(k, (k, ""))[0], "name in the code": k}
                               for k in config_fields(DEFAULT_MODEL) if k not in ("input_dim", "num_classes")]),
                 hide_index=True)


def pretrained_by_dataset(man: dict) -> dict[str, dict[str, set]]:
    """Data set -> protocol -> the shipped (model, seed) pairs of the manifest."""
    # pretrained models per data set and protocol: one per method each, so "5 of 5 methods" per protocol
    out: dict[str, dict[str, set]] = {}
    for m in man["models"]:
        if isinstance(m, dict) and m.get("dataset"):
            out.setdefault(m["dataset"], {}).setdefault(str(m.get("protocol") or "paper"), set()).add(
                (str(m.get("model")), m.get("seed")))
    return out


def loaded_table(pretrained_by_ds: dict, protocols: list[str], own: list) -> None:
    """Per data set: the shipped models per protocol, the user's runs and (on request) the data sources found."""
    check_sources = st.toggle("Check which data sources are available (looks for the test files)", value=True,
                              key="check_sources")
    loaded = []
    for ds, info in DATASETS.items():
        row = {"data set": info.title}
        for proto in protocols:
            have = pretrained_by_ds.get(ds, {}).get(proto, set())
            methods = {m for m, _ in have}
            row[f"pretrained, {protocol_title(proto)}"] = (f"{len(have)} ({len(methods)} of {len(list_models())})"
                                                          if len(have) != len(methods) else f"{len(have)} of {len(list_models())}")
        row["your runs"] = sum(1 for e in own if e.dataset == ds)
        if check_sources:
            try:
                avail = _sources(ds)
            except Exception as exc:
                avail = {}
                st.warning(f"Could not check the data sources of {info.title}: {exc}")
            for src in SOURCES:
                row[SOURCE_NAMES.get(src, src)] = "✅" if avail.get(src) else "—"
        loaded.append(row)
    # every column its width and a short header, together within the 820 px a 1280 px window leaves the
    # page (nothing cut); the full names are in each header's tooltip
    loaded_df = pd.DataFrame(loaded)
    config = {"data set": st.column_config.TextColumn("data set", width=110),
              "your runs": st.column_config.NumberColumn("your runs", width=75, help="Your runs (trained or uploaded) "
                                                         "with weights, on this data set")}
    for p in protocols:  # the header: the protocol's short name ("Adam 4k"), its width fitting it
        short = "paper" if p == "paper" else PROTOCOL_SHORT.get(p, protocol_title(p))
        config[f"pretrained, {protocol_title(p)}"] = st.column_config.TextColumn(
            short, width=max(70, int(len(short) * 6.5 + 17)),
            help=f"Shipped models trained with the {protocol_title(p)}: how many of the {len(list_models())} methods")
    for src, (label, width, what) in LOADED_SOURCES.items():
        config[SOURCE_NAMES.get(src, src)] = st.column_config.TextColumn(label, width=width, help=what)
    st.caption("Per data set: the shipped models of each protocol (the first columns), your runs and the data "
               "sources found.")
    st.dataframe(loaded_df, hide_index=True, width="content", column_config=config)


def loaded_summary(man: dict, pretrained_by_ds: dict, protocols: list[str], own: list) -> None:
    """How many shipped models, own runs and reproduction results; where the data comes from."""
    m1, m2, m3 = st.columns(3)
    n_pre = sum(len(v) for by in pretrained_by_ds.values() for v in by.values())
    m1.metric("Pretrained models", n_pre,
              help=f"{n_pre} = the sum of the table's pretrained columns: one model per data set, method and protocol"
                   + (f" ({', '.join(protocol_title(p) for p in protocols)})" if protocols else "") + ".")
    m2.metric("Your runs (trained or uploaded)", len(own))
    sched = result_folders()
    m3.metric("Reproduction results", f"{len(sched)} experiment{'s' if len(sched) != 1 else ''}" if sched else "none yet",
              help="Reproduction outputs (the results folder); the Compare page shows each.")
    if sched:
        st.caption("Reproduction results, on the Compare page: " + "; ".join(RESULT_FOLDERS.get(n, n) for n in sched) + ".",
                   help="Folders: " + ", ".join(f"`results/{name}`" for name in sched))
    if not man["models"]:
        st.info("No pretrained models are installed yet. They are produced by "
                "`python -m core.reproduce run --seeds 0` followed by `python -m core.reproduce export-pretrained "
                "--seed 0` (writes `pretrained/manifest.json`).")
    elif man.get("protocols") or man.get("protocol"):
        protos = man.get("protocols") or {"paper": man["protocol"]}
        st.caption("Pretrained models, per data set and method: " + shipped_models_text(man["models"]) + ". Protocols: "
                   + protocols_text(protos) + ".")
    st.caption("Data sources, in the order they are tried: an npz folder, an "
               "image folder (Animals-10), torchvision's cache or download (MNIST, Fashion-MNIST, CIFAR-10), and a "
               "bundled sample of 1,000 images each so the per-image pages work offline (MNIST: training images that every "
               "shipped MNIST model left out of its training; Fashion-MNIST: test images).",
               help="The npz folder is `$RIMSCOPE_DATA_DIR` or `./data`, with `<data set>/train.npz` and `test.npz`.")


def animals_note(entries: list) -> None:
    """Animals-10: say honestly what it is here."""
    animals = next((e for e in entries if e.dataset == "animals10" and e.source == "pretrained"), None)
    meta = entry_metadata(animals) if animals else None
    sizes = ""
    if meta and isinstance(meta.get("data_source"), dict):
        dsrc = meta["data_source"]
        if dsrc.get("n_train") and dsrc.get("n_test"):
            sizes = f" ({dsrc['n_train']:,} training and {dsrc['n_test']:,} test images in the pretrained runs)"
    st.warning(
        f"**Animals-10 here is a small, unbalanced subset**{sizes}, not the full Kaggle set of about 26,000 photos; "
        "its classes have very different sizes, and images are resized to 32x32. Errors on it are noisy and are "
        "not comparable with the paper's Animals-10 numbers.",
        icon="⚠️",
    )


def what_is_loaded() -> None:
    """The models and data this installation has."""
    st.header("What is loaded")
    entries, problems = model_entries()
    for p in problems:
        st.warning(p)
    man = manifest()
    pretrained_by_ds = pretrained_by_dataset(man)
    protocols = sorted({p for by in pretrained_by_ds.values() for p in by}, key=lambda p: (p != DEFAULT_PROTOCOL, p))
    own = [e for e in entries if e.source != "pretrained"]
    loaded_table(pretrained_by_ds, protocols, own)
    loaded_summary(man, pretrained_by_ds, protocols, own)
    animals_note(entries)


def where_to_start() -> None:
    """A link to each page with what it shows."""
    st.header("Where to start")
    cols = st.columns(len(LINKS))
    for col, (path, label, icon, what) in zip(cols, LINKS):
        with col:
            try:
                st.page_link(path, label=label, icon=icon)
            except Exception:  # page not registered (e.g. this file run on its own)
                st.markdown(f"{icon} **{label}**")
            st.caption(what)


charts_later()  # no chart here: the chart library is fetched for the next page once idle
st.title("RIMscope")
sidebar_protocol()  # the app's one protocol switch, on every page
intro()
st.header("How the method works")
how_it_works()
st.header("The five methods")
counts = parameter_counts_or_none()
methods_table(counts)
sizes_and_colours(counts)
knobs_table()
what_is_loaded()
where_to_start()
