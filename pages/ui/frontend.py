"""What the browser loads: the chart library starts loading with the page, not with its first chart;
a page without charts fetches it once it is idle, for the next page.

Streamlit's frontend loads plotly.js (one module of about 4.7 MB) when the first plotly chart of a
browser tab arrives, then evaluates it (about a second of the browser's main thread on 2 cores),
then draws. A page whose first chart comes at the end of a script run therefore waits for all of
that after the run. ``charts_early`` imports the same module at the start of the run, so the
download and the evaluation overlap the server's work; the chart's own import then finds it
loaded. ``charts_when_idle`` imports it once the first view is drawn (a page whose first view has
no chart, but its other views do); ``charts_later`` only fetches it (a page without charts). A
no-op where the installed Streamlit ships no such module.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import streamlit as st

KEY = "rs_charts_early"
# the module's URL is resolved against Streamlit's own entry script, so a server path prefix
# (server.baseUrlPath) and any page URL give the URL the frontend itself imports; each script below
# is this frame around its own body (``href``: the module's URL; ``__MODULE__``: its file name)
_FRAME = """<script>(() => {
  const entry = document.querySelector('script[type="module"][src*="static/js/index."]');
  if (!entry) return;
  const href = new URL(__MODULE__, entry.src).href;
__BODY__
})();</script>"""
_WHEN_IDLE = "  (window.requestIdleCallback || ((f) => setTimeout(f, 2000)))(__FN__, {timeout: 5000});"


def _script(body: str) -> str:
    return _FRAME.replace("__BODY__", body)


# now: the download and the evaluation overlap the server's script run
_JS = _script("  import(href).catch(() => {});")
# after the page is drawn and the browser idle: fetch (and let the browser compile) the module without
# running it, so a chart page opened next only evaluates it; nothing on this page waits for it
_PREFETCH_JS = _script("""  const fetchIt = () => {
    if (document.querySelector(`link[rel="modulepreload"][href="${href}"]`)) return;
    const link = document.createElement('link');
    link.rel = 'modulepreload';
    link.href = href;
    document.head.appendChild(link);
  };
""" + _WHEN_IDLE.replace("__FN__", "fetchIt"))
# after the page is drawn and the browser idle: import it (fetch, compile and run), so the page's own
# later charts (other tabs) draw without waiting for it; the first view does not wait for it either
_IDLE_IMPORT_JS = _script("  const load = () => import(href).catch(() => {});\n" + _WHEN_IDLE.replace("__FN__", "load"))
_HIDE = f"""<style>[data-testid="stLayoutWrapper"]:has(> .st-key-{KEY}), .st-key-{KEY} {{ display: none; }}</style>"""


@functools.cache
def chart_module() -> str | None:
    """File name of the frontend's plotly chart module in the installed Streamlit, or None."""
    folder = Path(st.__file__).parent / "static" / "static" / "js"
    found = sorted(p.name for p in folder.glob("PlotlyChart.*.js"))
    return found[0] if len(found) == 1 else None


def charts_early() -> None:
    """Start loading the chart library now (first thing on a page that draws plotly charts)."""
    _inject(_JS)


def charts_later() -> None:
    """On a page without plotly charts: fetch the chart library once the browser is idle, without
    running it (running it takes most of a second of the main thread on a cold browser)."""
    _inject(_PREFETCH_JS)


def charts_when_idle() -> None:
    """On a page whose first view draws no plotly chart but whose other views do (Mechanisms'
    tabs): run the chart library once the first view is drawn and the browser idle."""
    _inject(_IDLE_IMPORT_JS)


def _inject(script: str) -> None:
    name = chart_module()
    if name is None:
        return
    st.html(_HIDE)  # style only: Streamlit puts it where it takes no space
    with st.container(key=KEY):
        st.html(script.replace("__MODULE__", json.dumps(name)), unsafe_allow_javascript=True)
