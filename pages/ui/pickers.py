"""Widgets that choose a data set or models, and keep values from a URL inside their options."""

from __future__ import annotations

import streamlit as st

from core import catalog
from core.data.datasets import DATASETS
from core.models.registry import DEFAULT_MODEL, list_models
from core.report.fmt import PROTOCOL_SWITCH_TITLES, dataset_title, long_budgets, method_title

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


# --------------------------------------------------------------------------- the picks' one owner
#
# Streamlit drops a widget's value when a script run does not draw the widget (another page, a
# closed tab), and a widget whose key was deleted keeps showing (and sending back) its old value
# in the browser. So the protocol and every model pick live here, in one plain session-state
# dict that no widget owns; each picker's widget is seeded from it when the widget has no value
# and writes its choice back. The URL holds the same values (pages' ``URL_STATE``), so a reload
# or a shared link restores them.

PICKS_KEY = "_rimscope_picks"  # {"protocol": str, "models": {"<data set>/<slot>": entry key}}


def _picks() -> dict:
    picks = st.session_state.get(PICKS_KEY)
    if not isinstance(picks, dict):
        picks = {"protocol": None, "models": {}}
        st.session_state[PICKS_KEY] = picks
    return picks


def chosen_protocol() -> str:
    """The pretrained models' protocol every page uses (the sidebar switch's value)."""
    return _picks().get("protocol") or st.session_state.get(PROTOCOL_KEY) or catalog.DEFAULT_PROTOCOL


def picked(dataset: str, slot: str) -> str | None:
    """The entry key picked for ``slot`` (a method, or ``"main"``) of ``dataset``, if any."""
    return _picks()["models"].get(f"{dataset}/{slot}")


def remember(dataset: str, slot: str, entry_key: str) -> None:
    _picks()["models"][f"{dataset}/{slot}"] = entry_key


def _seed(key: str, options: list, stored, default) -> None:
    """Give widget ``key`` a value before it is drawn: its own (if valid), else the stored pick,
    else ``default``. Set through session state, so the browser shows exactly this value."""
    if st.session_state.get(key) in options:
        return
    st.session_state[key] = stored if stored in options else default


def _relabel(key: str, label: str) -> None:
    """Keep the browser's label of selectbox ``key`` that of the entry its value stands for now.

    The browser holds a selectbox's choice as its label and redraws it only when sent a value; an
    entry whose files are replaced on disk keeps its key but gets another label (another seed),
    so the value is set again (the same entry, its new label sent) when its label is not the one
    last shown for it."""
    shown = f"_shown_{key}"
    value = st.session_state.get(key)
    before = st.session_state.get(shown)
    if isinstance(before, tuple) and before[0] == value and before[1] != label:
        st.session_state[key] = value
    st.session_state[shown] = (value, label)


def _protocol_changed() -> None:
    picks = _picks()
    picks["protocol"] = st.session_state.get(PROTOCOL_KEY)
    picks["models"].clear()  # every picker falls back to the new protocol's pretrained models
    for k in [k for k in st.session_state if str(k).startswith(_PICKER_PREFIXES)]:
        del st.session_state[k]


def protocol_switch(entries: list[catalog.ModelEntry]) -> str:
    """Sidebar switch between the shipped protocols' pretrained models (the long grid's, Adam 4k,
    the paper protocol's: the default model of every picker); shown when more than one is shipped."""
    have = sorted({e.protocol for e in entries if e.source == "pretrained"})
    if len(have) < 2:
        return have[0] if have else chosen_protocol()
    first = catalog.DEFAULT_PROTOCOL
    picks = _picks()
    if st.session_state.get(PROTOCOL_KEY) in have:  # the widget's (or the URL's) value
        picks["protocol"] = st.session_state[PROTOCOL_KEY]
    _seed(PROTOCOL_KEY, have, picks.get("protocol"), first if first in have else have[0])
    picks["protocol"] = st.session_state[PROTOCOL_KEY]
    return st.sidebar.radio("Pretrained models", sorted(have, key=lambda p: p != first), key=PROTOCOL_KEY,
                            format_func=lambda p: PROTOCOL_TITLES.get(p, p), on_change=_protocol_changed,
                            help="Which shipped models the pages pick by default, each the median seed of its "
                                 "data set and method. Long grid: Adam and a cosine decay over each data set's own "
                                 f"budget ({long_budgets(entries)}), fixed before its runs by a rule on when runs stop improving. Adam, "
                                 "cosine, 4,000 iterations: the short budget, the weights of the best validation "
                                 "accuracy within it. Paper: the paper's 1,000 SGD iterations.")


def sidebar_protocol() -> str | None:
    """The sidebar's switch over every shipped model, drawn by every page: the protocol the whole
    app follows, or None when only one protocol is shipped (no switch)."""
    try:
        entries = catalog.pretrained_entries(None)
    except Exception:  # a malformed manifest: the page that lists the models says so
        entries = []
    protocol_switch(entries)
    return chosen_protocol() if len({e.protocol for e in entries}) > 1 else None


def _preferred(candidates: list[catalog.ModelEntry]) -> catalog.ModelEntry:
    return catalog.preferred_entry(candidates, chosen_protocol())


def entries_or_stop(dataset: str) -> list[catalog.ModelEntry]:
    """The models of ``dataset`` a per-model page offers, with the protocol switch and any
    listing problems shown; stops the page (with a note) when there is none."""
    from .cache import model_entries
    from .messages import no_models_note

    entries, problems = model_entries(dataset)
    sidebar_protocol()
    for problem in problems:
        st.warning(problem)
    if not entries:
        no_models_note(dataset)
        st.stop()
    return entries


def main_model_picker(all_entries: list[catalog.ModelEntry], key: str, prefer: str = DEFAULT_MODEL,
                      label: str = "Model") -> catalog.ModelEntry:
    """A selectbox over ``all_entries``; the default is the pretrained ``prefer`` model. The pick
    is kept per data set (``picked(dataset, "main")``) across pages and reruns."""
    preferred = [e for e in all_entries if e.model == prefer]
    default = _preferred(preferred) if preferred else all_entries[0]
    by_key = {e.key: e for e in all_entries}
    dataset = all_entries[0].dataset
    _seed(key, list(by_key), picked(dataset, "main"), default.key)
    _relabel(key, by_key[st.session_state[key]].display)
    chosen = st.selectbox(label, list(by_key), key=key, format_func=lambda k: by_key[k].display)
    remember(dataset, "main", chosen)
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
            dataset = cands[0].dataset
            if len(cands) == 1:
                chosen[method] = cands[0]
                st.caption(f"{cands[0].display}: the only one of its method")
                continue
            _seed(key, keys, picked(dataset, method), _preferred(cands).key)
            _relabel(key, next(e.display for e in cands if e.key == st.session_state[key]))
            k = st.selectbox(method_title(method), keys, key=key,
                             format_func=lambda kk, c=cands: next(e.display for e in c if e.key == kk))
            remember(dataset, method, k)
            chosen[method] = next(e for e in cands if e.key == k)
    return chosen


def kept_multiselect(key: str, slot: str, options: list[str], label: str, **kwargs) -> list[str]:
    """A multiselect whose choice is kept in the picks (``slot``: its name there) across reruns,
    pages and changes of ``options``: the picks hold every value chosen under any options (e.g.
    runs on every data set), the widget shows those among ``options``. A value the widget sends
    (the user's, or the URL's through ``urlstate.restore_from_url``) replaces the picks among
    ``options``; the others stay. ``kwargs`` go to ``st.multiselect``."""
    lists = _picks().setdefault("lists", {})
    stored = [v for v in lists.get(slot, []) if isinstance(v, str)]
    shown_key = f"_kept_{key}"  # what this picker last gave the widget
    current = st.session_state.get(key)
    if isinstance(current, list) and current != st.session_state.get(shown_key):
        stored = [v for v in stored if v not in options] + [v for v in current if v in options]
    lists[slot] = stored
    value = [v for v in stored if v in options]
    st.session_state[key] = st.session_state[shown_key] = value
    return st.multiselect(label, options, key=key, **kwargs)
