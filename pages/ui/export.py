"""Downloads under a figure: a PNG rendered on request (kaleido), standalone HTML, and the
numbers behind it (CSV of each heatmap, JSON of a trace) built when their button is clicked."""

from __future__ import annotations

import os

import streamlit as st


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


def figure_downloads(fig, name: str, key: str, width: int = 1100, extra=()) -> None:
    """PNG and standalone HTML download buttons under a figure.

    Rendering a PNG (kaleido starts a headless Chromium) takes seconds, so it is made only when
    asked: "Make PNG" renders it under a spinner, then "⬇ PNG" downloads it at once. The PNG is
    kept for this figure (same content, same size) for the session; a changed figure needs a new
    one. HTML is built when its button is clicked (quick). ``extra``: more buttons in the same
    row, ``(label, data, file_name, mime)`` each; ``data`` may be a function (called on click).
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
                    name: str, key: str) -> None:
    """``figure_downloads`` of a timeline plus a CSV per heatmap and the JSON of every model's
    whole trace (``core.report.export.trace_record``; two models: ``{"compared": [a, b]}``)."""
    def record() -> bytes:
        from core.fileio import json_bytes
        from core.report.export import trace_record

        out = [trace_record(s.trace, s.schema, s.unit_names, probs=s.probs, classes=classes, input=where,
                            settings=settings, model={"key": s.entry.key, "name": s.entry.model,
                                                      "display": s.entry.display, "source": s.entry.source,
                                                      "protocol": s.entry.protocol})
               for s in sides]
        return json_bytes(out[0] if len(out) == 1 else {"compared": out})

    figure_downloads(fig, name, key=key, extra=[*heatmap_csvs(panels, name),
                                                ("⬇ JSON: whole trace", record, f"{name}.json", "application/json")])


def _slug(text: str) -> str:
    import re

    return re.sub(r"[^0-9A-Za-z]+", "_", text).strip("_").lower() or "data"
