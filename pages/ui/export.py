"""Downloads under a figure: a PNG rendered on request (kaleido), standalone HTML, and the
numbers behind it (CSV of each heatmap, JSON of a trace) built when their button is clicked.

PNGs come from one headless Chromium per server process (``PngRenderer``), opened at the first
render (or by the warm-up, pages/ui/cache.py) and kept open, so a render takes a fraction of a
second instead of the seconds a browser start costs; renders from every session go through it
one at a time. When it cannot start, each PNG is made by kaleido's one-shot path (its own
browser per render), and the page says so under the button.
"""

from __future__ import annotations

import atexit
import os
import threading
import time

import streamlit as st

START_TIMEOUT_S = 60.0  # opening the browser (seconds; a busy 2-core machine needs a few)
RENDER_TIMEOUT_S = 60.0  # one render, including the wait for a render in progress
# the smallest figure kaleido draws: what the warm-up renders to open the browser and load plotly.js
TINY_FIGURE = {"data": [{"type": "scatter", "x": [0, 1], "y": [0, 1]}], "layout": {"width": 40, "height": 40}}


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


def _kaleido_options() -> dict:
    """What ``plotly.io.to_image`` hands kaleido as ``kopts`` (plotly.js, MathJax, HTTP headers),
    given to the persistent browser when it opens (a render through it takes no ``kopts``)."""
    import plotly.io as pio

    d = pio.defaults
    return {k: v for k, v in (("plotlyjs", d.plotlyjs), ("mathjax", d.mathjax),
                              ("headers", getattr(d, "headers", None))) if v}


class PngRenderer:
    """One headless Chromium (``kaleido.Kaleido``) kept open on an event loop of its own.

    ``render`` opens it on first use (under a lock: several sessions may click at once) and
    runs one render at a time through it. A browser that cannot open is not tried again: the
    reason is kept in ``problem`` and every render takes kaleido's one-shot path
    (``plotly.io.to_image``: a browser per render). A render that fails in the open browser is
    tried once more the one-shot way; when that works the browser is closed, and the next
    render opens a new one. ``close`` (registered with ``atexit`` once open) ends the browser.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop = None
        self._thread: threading.Thread | None = None
        self._kaleido = None
        self.problem: str | None = None  # why the browser could not open (then: one-shot renders)
        self._atexit = False

    @property
    def running(self) -> bool:
        return self._kaleido is not None

    def _run(self, coro, timeout: float):
        import asyncio

        fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return fut.result(timeout)
        except BaseException:
            fut.cancel()
            raise

    def _open(self) -> None:
        import asyncio

        import kaleido

        opts = _kaleido_options()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="rimscope-png", daemon=True)
        self._thread.start()

        async def open_browser():
            k = kaleido.Kaleido(n=1, timeout=RENDER_TIMEOUT_S, **opts)
            await k.open()
            return k

        try:
            self._kaleido = self._run(open_browser(), START_TIMEOUT_S)
        except BaseException:
            self._stop_loop()
            raise
        if not self._atexit:
            atexit.register(self.close)
            self._atexit = True

    def _stop_loop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not None:
                self._thread.join(10)
            if not self._loop.is_running():
                self._loop.close()
        self._loop = self._thread = None

    def _close_locked(self) -> None:
        k, self._kaleido = self._kaleido, None
        if k is not None:
            try:
                self._run(k.close(), 20)
            except BaseException:  # noqa: BLE001 - a browser already gone: nothing left to close
                pass
        self._stop_loop()

    def close(self) -> None:
        """End the browser (at exit; a later render opens a new one)."""
        with self._lock:
            self._close_locked()

    def start(self) -> bool:
        """Open the browser now unless open (or known not to open); whether it is open."""
        with self._lock:
            self._ensure_locked()
            return self.running

    def _ensure_locked(self) -> None:
        if self._kaleido is None and self.problem is None:
            try:
                self._open()
            except Exception as exc:  # noqa: BLE001 - no browser, or it died while opening: one-shot renders
                self.problem = f"{type(exc).__name__}: {exc}".strip()[:300]

    def render(self, fig: dict, width: int, height: int, scale: float = 2) -> bytes:
        """PNG bytes of plotly figure ``fig`` (a dict) at ``width`` x ``height`` layout pixels."""
        opts = {"format": "png", "width": width, "height": height, "scale": scale}
        if not self._lock.acquire(timeout=RENDER_TIMEOUT_S):
            raise TimeoutError(f"another PNG render took over {RENDER_TIMEOUT_S:.0f} s")
        try:
            self._ensure_locked()
            if self._kaleido is None:
                return _one_shot(fig, opts)
            for attempt in range(2):  # a fresh tab may not have loaded kaleido's scripts yet: once more
                try:
                    return self._run(self._kaleido.calc_fig(fig, opts=opts), RENDER_TIMEOUT_S)
                except Exception:  # noqa: BLE001 - the figure or the browser: the one-shot path tells which
                    if attempt == 0:
                        time.sleep(0.5)
            png = _one_shot(fig, opts)  # raises when the figure is at fault
            self._close_locked()  # the figure renders elsewhere: the open browser is broken
            return png
        finally:
            self._lock.release()


def _one_shot(fig: dict, opts: dict) -> bytes:
    import plotly.io as pio

    return pio.to_image(fig, format=opts["format"], width=opts["width"], height=opts["height"], scale=opts["scale"],
                        validate=False)


ONE_SHOT_NOTE = ("The PNG renderer's browser could not be kept open on this server, so every PNG starts a "
                 "browser of its own (a few seconds each).")
RENDERER = PngRenderer()  # process-wide: every session's renders go through one browser


def warm_png() -> None:
    """The warm-up's step: open the browser and render a tiny figure (plotly.js loaded), so
    even the first "Make PNG" of the server is quick. Nothing when PNGs cannot be made here."""
    if png_export_ready():
        RENDERER.render(TINY_FIGURE, 40, 40, scale=1)


@st.cache_data(show_spinner=False, max_entries=32)
def _figure_png(fig_json: str, width: int, height: int) -> bytes:
    import json

    return RENDERER.render(json.loads(fig_json), width, height, scale=2)


def figure_downloads(fig, name: str, key: str, width: int = 1100, extra=(), ident=None) -> None:
    """PNG and standalone HTML download buttons under a figure.

    A PNG is made only when asked: "Make PNG" renders it under a spinner (through the server's
    kept browser, ``RENDERER``: a fraction of a second), then "⬇ PNG" downloads it at once. The
    PNG is kept for this figure (same content, same size) for the session; a changed figure
    needs a new one. HTML is built when its button is clicked (quick). ``extra``: more buttons
    in the same row, ``(label, data, file_name, mime)`` each; ``data`` may be a function (called
    on click).

    ``fig`` may be a function returning the figure, with ``ident`` (any hashable that changes
    exactly when the figure does): then the figure is built only when its PNG or HTML is asked
    for, and a script run that only shows the buttons builds nothing. A figure given as it is is
    serialised only where a PNG of it is held or asked for.
    """
    import hashlib

    lazy = callable(fig)
    if lazy and ident is None:
        raise ValueError("figure_downloads: a figure builder needs an ident")
    built: dict = {}

    def figure():
        if "fig" not in built:
            built["fig"] = fig() if lazy else fig
            built["json"] = built["fig"].to_json()
        return built["fig"], built["json"]

    row = st.container(horizontal=True, vertical_alignment="center")
    if png_export_ready():
        def digest() -> str:  # the figure's JSON only where a PNG is held or asked for
            content = repr(ident) if lazy else figure()[1]
            return hashlib.sha256(f"{width}|{content}".encode()).hexdigest()

        held_key = f"_png_{key}"
        held = st.session_state.get(held_key)
        png = held[1] if held and held[0] == digest() else None
        slot = row.empty()  # the "Make PNG" button, replaced by the download once the PNG is made
        if png is None and slot.button("🖼 Make PNG", key=f"{key}_png_make"):
            with row, st.spinner("Rendering the PNG…"):
                try:
                    f, fig_json = figure()
                    png = _figure_png(fig_json, width, int(f.layout.height or 500))
                except Exception as exc:  # kaleido or its browser failed: say so, HTML still works
                    st.caption(f"PNG export failed ({type(exc).__name__}); use HTML.")
                else:
                    st.session_state[held_key] = (digest(), png)
                if RENDERER.problem:
                    st.caption(ONE_SHOT_NOTE)
        if png is not None:
            slot.download_button("⬇ PNG", data=png, file_name=f"{name}.png", mime="image/png", key=f"{key}_png",
                                 on_click="ignore")
    else:
        row.caption("PNG export needs kaleido and Chromium; use HTML.")

    def _html() -> bytes:
        return figure()[0].to_html(include_plotlyjs=True, full_html=True).encode()

    row.download_button("⬇ HTML", data=_html, file_name=f"{name}.html", mime="text/html", key=f"{key}_html",
                        on_click="ignore")
    for i, (label, data, file_name, mime) in enumerate(extra):
        row.download_button(label, data=data, file_name=file_name, mime=mime, key=f"{key}_x{i}", on_click="ignore")


def heatmap_csvs(panels: list[dict], name: str, row_title: str = "timestep") -> list[tuple]:
    """``figure_downloads`` extras: one CSV per heatmap panel (rows = ``row_labels`` or 1..T)."""
    from core.report.export import matrix_csv

    out = []
    for p in panels:
        z = p["z"]
        rows = p.get("row_labels") or list(range(1, len(z) + 1))
        rt = p.get("row_title", row_title)

        def data(z=z, rows=rows, units=p["units"], rt=rt) -> bytes:
            return matrix_csv(z, rows, units, row_title=rt)

        label = p.get("name") or p["title"].split(" (")[0]  # panels of plots.trace_panels have both
        out.append((f"⬇ CSV: {label}", data, f"{name}_{_slug(label)}.csv", "text/csv"))
    return out


def trace_downloads(fig, panels: list[dict], sides: list, classes: list, where: dict, settings: dict, *,
                    name: str, key: str, ident=None) -> None:
    """``figure_downloads`` of a timeline (a figure, or its builder with ``ident``) plus a CSV per
    heatmap and the JSON of every model's whole trace (``core.report.export.trace_record``; two
    models: ``{"compared": [a, b]}``)."""
    def record() -> bytes:
        from core.fileio import json_bytes
        from core.report.export import trace_record

        out = [trace_record(s.trace, s.schema, s.unit_names, probs=s.probs, classes=classes, input=where,
                            settings=settings, model={"key": s.entry.key, "name": s.entry.model,
                                                      "display": s.entry.display, "source": s.entry.source,
                                                      "protocol": s.entry.protocol})
               for s in sides]
        return json_bytes(out[0] if len(out) == 1 else {"compared": out})

    figure_downloads(fig, name, key=key, ident=ident, extra=[*heatmap_csvs(panels, name),
                                                ("⬇ JSON: whole trace", record, f"{name}.json", "application/json")])


def _slug(text: str) -> str:
    import re

    return re.sub(r"[^0-9A-Za-z]+", "_", text).strip("_").lower() or "data"
