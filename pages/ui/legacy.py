"""The one use of Streamlit's private API: run every page through app.py's ``st.navigation``
(``python app.py`` makes the same patch before the server starts: app.py's ``_folder_navigation_off``)."""

from __future__ import annotations

import streamlit as st


def leave_legacy_pages_mode() -> None:
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
