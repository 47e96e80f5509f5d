"""Downloads under a figure: a PNG rendered on request (kaleido) and standalone HTML."""

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
