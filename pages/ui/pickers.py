"""Widgets that choose a data set or models, and keep values from a URL inside their options."""

from __future__ import annotations

import streamlit as st

from core import catalog
from core.data.datasets import DATASETS
from core.models.registry import DEFAULT_MODEL, list_models
from core.report.fmt import PROTOCOL_SWITCH_TITLES, dataset_title, method_title

PROTOCOL_KEY = "pretrained_protocol"
PROTOCOL_TITLES = PROTOCOL_SWITCH_TITLES
_PICKER_PREFIXES = ("mech_model_", "mech_cmp_", "rb_cmp_")


def keep_valid(key: str, options) -> None:
    """Drop a widget value (e.g. from a shared URL) that is not one of its options."""
    if key in st.session_state and st.session_state[key] not in list(options):
        del st.session_state[key]


def clamp_state(key: str, lo: int, hi: int) -> None:
    """Keep a number widget's value (e.g. from a shared URL) inside its range."""
    if key in st.session_state:
        try:
            st.session_state[key] = int(min(max(int(st.session_state[key]), lo), hi))
        except (TypeError, ValueError):
            del st.session_state[key]


def tab_views(key: str, views: dict) -> None:
    """Tabs ``label -> view()`` kept in ``key`` (and the URL); only the open tab's view runs."""
    labels = list(views)
    keep_valid(key, labels)
    for tab, view in zip(st.tabs(labels, key=key, on_change="rerun"), views.values()):
        if tab.open:
            with tab:
                view()


def dataset_picker(key: str = "dataset", label: str = "Data set") -> str:
    names = list(DATASETS)
    keep_valid(key, names)
    return st.selectbox(label, names, key=key, format_func=dataset_title)


def chosen_protocol() -> str:
    return st.session_state.get(PROTOCOL_KEY, catalog.DEFAULT_PROTOCOL)


def _protocol_changed() -> None:
    for k in [k for k in st.session_state if str(k).startswith(_PICKER_PREFIXES)]:
        del st.session_state[k]  # the pickers fall back to the new protocol's pretrained models


def protocol_switch(entries: list[catalog.ModelEntry]) -> str:
    """Sidebar switch between the converged and the paper-protocol pretrained models (the
    default model of every picker); shown when both are shipped."""
    have = sorted({e.protocol for e in entries if e.source == "pretrained"})
    if len(have) < 2:
        return have[0] if have else chosen_protocol()
    first = catalog.DEFAULT_PROTOCOL
    if st.session_state.get(PROTOCOL_KEY) not in have:
        st.session_state[PROTOCOL_KEY] = first if first in have else have[0]
    return st.sidebar.radio("Pretrained models", sorted(have, key=lambda p: p != first), key=PROTOCOL_KEY,
                            format_func=lambda p: PROTOCOL_TITLES.get(p, p), on_change=_protocol_changed,
                            help="Which shipped models the pages pick by default. Converged: Adam until the "
                                 "validation accuracy stops improving. Paper: the paper's 1,000 SGD iterations.")


def _preferred(candidates: list[catalog.ModelEntry]) -> catalog.ModelEntry:
    return catalog.preferred_entry(candidates, chosen_protocol())


def entries_or_stop(dataset: str) -> list[catalog.ModelEntry]:
    """The models of ``dataset`` a per-model page offers, with the protocol switch and any
    listing problems shown; stops the page (with a note) when there is none."""
    from .cache import model_entries
    from .messages import no_models_note

    entries, problems = model_entries(dataset)
    protocol_switch(entries)
    for problem in problems:
        st.warning(problem)
    if not entries:
        no_models_note(dataset)
        st.stop()
    return entries


def main_model_picker(all_entries: list[catalog.ModelEntry], key: str, prefer: str = DEFAULT_MODEL,
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
    by_method: dict[str, list] = {}
    for e in all_entries:
        by_method.setdefault(e.model, []).append(e)
    chosen = {}
    with st.expander(f"{label}: one model per method", expanded=False):
        for method in [m for m in list_models() if m in by_method]:
            cands = by_method[method]
            if main is not None and main.model == method:
                chosen[method] = main
                st.caption(f"{main.display}: the model chosen above")
                continue
            key = f"{key_prefix}_{method}"
            keys = [e.key for e in cands]
            if st.session_state.get(key) not in keys:
                st.session_state.pop(key, None)
            default = _preferred(cands).key
            if len(cands) == 1:
                chosen[method] = cands[0]
                st.caption(f"{cands[0].display}: the only one of its method")
                continue
            k = st.selectbox(method_title(method), keys, index=keys.index(default), key=key,
                             format_func=lambda kk, c=cands: next(e.display for e in c if e.key == kk))
            chosen[method] = next(e for e in cands if e.key == k)
    return chosen
