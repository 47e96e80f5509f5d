""""Make PNG" under a figure (pages/ui/export.py) through AppTest on the Compare page: a PNG made
the one-shot way (the kept browser could not open) says so under the button."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "compare.py")


def _page_with_renderer(monkeypatch, renderer):
    import pages.ui.export as export

    monkeypatch.setattr(export, "png_export_ready", lambda: True)
    monkeypatch.setattr(export, "RENDERER", renderer)
    export._figure_png.clear()
    return AppTest.from_file(PAGE, default_timeout=120).run()


def test_a_one_shot_png_says_why_it_was_slow(page_env, monkeypatch):
    import pages.ui.export as export

    class NoBrowser(export.PngRenderer):
        def _open(self):
            raise RuntimeError("no browser")

    monkeypatch.setattr(export, "_one_shot", lambda fig, opts: b"\x89PNG one-shot")
    at = _page_with_renderer(monkeypatch, NoBrowser())
    at.button(key="cmp_dl_loss_png_make").click().run()
    assert not at.exception
    assert "⬇ PNG" in [b.label for b in at.get("download_button")]
    assert export.ONE_SHOT_NOTE in [c.value for c in at.caption]


def test_a_png_from_the_kept_browser_has_no_note(page_env, monkeypatch):
    import pages.ui.export as export

    class Kept(export.PngRenderer):
        def render(self, fig, width, height, scale=2):
            return b"\x89PNG kept"

    at = _page_with_renderer(monkeypatch, Kept())
    at.button(key="cmp_dl_loss_png_make").click().run()
    assert not at.exception and "⬇ PNG" in [b.label for b in at.get("download_button")]
    assert export.ONE_SHOT_NOTE not in [c.value for c in at.caption]


def _figure_script():
    import plotly.graph_objects as go
    import streamlit as st

    import pages.ui.export as export

    export.png_export_ready = lambda: True
    export._figure_png = lambda fig_json, width, height: b"\x89PNG " + fig_json.encode()[:20]
    y = st.number_input("y", value=1, key="y")
    fig = go.Figure(go.Scatter(x=[0, 1], y=[0, y]))
    calls = st.session_state.setdefault("to_json_calls", [0])
    real = fig.to_json

    def counted(*a, **k):
        calls[0] += 1
        return real(*a, **k)

    fig.to_json = counted
    export.figure_downloads(fig, "f", key="f")


def test_a_figure_is_serialised_only_for_its_png_and_a_changed_figure_needs_a_new_one():
    """A figure given as it is: a script run that only shows the buttons does not serialise it; a PNG
    made of it is offered while the figure stays the same, and a changed figure asks for a new one."""
    at = AppTest.from_function(_figure_script, default_timeout=60).run()
    assert not at.exception
    assert at.session_state["to_json_calls"] == [0]  # nothing held, nothing asked: no JSON
    at.button(key="f_png_make").click().run()
    assert "⬇ PNG" in [b.label for b in at.get("download_button")]
    at.run()  # the same figure: the PNG is still offered
    assert "⬇ PNG" in [b.label for b in at.get("download_button")]
    assert not [b for b in at.button if b.key == "f_png_make"]
    at.number_input(key="y").set_value(2).run()  # a changed figure
    assert "⬇ PNG" not in [b.label for b in at.get("download_button")]
    assert [b for b in at.button if b.key == "f_png_make"]
