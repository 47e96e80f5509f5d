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


def session_owner() -> str:
    """The owner id recorded on the runs this session starts: the signed-in user's
    (``pages.ui.auth``), "" without sign-in, where every run is the machine owner's. The URL
    grants nothing: an old ``?owner=`` is dropped from it."""
    if "owner" in st.query_params:
        del st.query_params["owner"]
    return current_viewer().user_id
