"""The pages' state in the URL: a reload or a shared link shows the same view."""

from __future__ import annotations

import streamlit as st

from pages.ui.auth import current_viewer


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


def _written_key(spec: dict) -> str:
    return "_url_written_" + "|".join(sorted(spec))


def _history_key(spec: dict) -> str:
    return "_url_history_" + "|".join(sorted(spec))


HISTORY = 16  # URLs a page remembers having written (the browser may send one back late)


def _url_now(spec: dict) -> dict[str, str]:
    return {k: str(st.query_params[k]) for k in st.query_params if _url_type(spec, k) is not None}


def restore_from_url(spec: dict) -> None:
    """Widget values from the URL when it holds something this page did not write: a fresh
    session (a reload, a shared link) or a link from another page of this session (e.g.
    "Trace" on a handwriting digit opens Mechanisms with that digit).

    ``spec``: widget key -> type (``str``, ``int``, ``float``); a key ending in ``*`` matches
    every key with that prefix (e.g. ``mech_model_*``). Only the values that differ from what
    this page last wrote (``sync_url``) are taken, so the URL never undoes what the user does on
    the page; values that do not parse are ignored (the widget keeps its default). A URL equal to
    one this page wrote earlier is taken for what it is: the browser's stale copy (a rerun asked
    for before the browser showed the newer URL, as when two fields are edited in quick
    succession), never a link, so it changes nothing."""
    written = st.session_state.get(_written_key(spec), {})
    now = _url_now(spec)
    if now != written and now in st.session_state.get(_history_key(spec), []):
        return  # a URL this page wrote before, sent back by a browser that had not yet shown the newer one
    for key, text in now.items():
        if written.get(key) == text or _url_text(st.session_state.get(key)) == text:
            continue
        try:
            st.session_state[key] = _url_type(spec, key)(st.query_params[key])
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
    now = _url_now(spec)
    st.session_state[_written_key(spec)] = now
    history = [h for h in st.session_state.get(_history_key(spec), []) if h != now] + [now]
    st.session_state[_history_key(spec)] = history[-HISTORY:]


def write_param(spec: dict, key: str, value) -> None:
    """One value into the URL outside ``sync_url`` (a fragment's rerun), kept as this page's own."""
    text = _url_text(value)
    if text is not None and st.query_params.get(key) != text:
        st.query_params[key] = text
    st.session_state.setdefault(_written_key(spec), {})[key] = text


def session_owner() -> str:
    """The owner id recorded on the runs this session starts: the signed-in user's
    (``pages.ui.auth``), "" without sign-in, where every run is the machine owner's. The URL
    grants nothing: an old ``?owner=`` is dropped from it."""
    if "owner" in st.query_params:
        del st.query_params["owner"]
    return current_viewer().user_id
