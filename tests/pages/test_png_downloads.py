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
