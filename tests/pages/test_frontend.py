"""The chart library starts loading with every page whose first view draws plotly charts
(pages/ui/frontend.py): the module it imports is the installed Streamlit's own, and the page
asks for it before its title, hidden. The Overview draws no plotly chart: it only prefetches the
module once idle, without running it."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st

from pages.ui import frontend
from tests.pages.helpers import run_page, walk

CHART_PAGES = ["robustness", "compare", "models"]


def test_the_chart_module_is_the_installed_streamlits_own():
    name = frontend.chart_module()
    assert name is not None, "Streamlit ships no single PlotlyChart.*.js: charts_early would load nothing"
    assert (Path(st.__file__).parent / "static" / "static" / "js" / name).is_file()


def test_no_module_means_no_script(monkeypatch):
    monkeypatch.setattr(frontend, "chart_module", lambda: None)
    calls = []
    monkeypatch.setattr(frontend.st, "html", lambda *a, **k: calls.append(a))
    frontend.charts_early()
    frontend.charts_later()
    assert calls == []


@pytest.mark.parametrize("page", CHART_PAGES)
def test_a_chart_page_asks_for_the_chart_library_before_its_title(page, page_env):
    at = run_page(page)
    assert not at.exception
    shown = [(n.type, str(n.proto.body)) for n in walk(at._tree) if getattr(n, "type", None) in ("html", "title")]
    scripts = [i for i, (t, b) in enumerate(shown) if t == "html" and frontend.chart_module() in b and "import(" in b]
    title = next(i for i, (t, _) in enumerate(shown) if t == "title")
    assert len(scripts) == 1 and scripts[0] < title
    # hidden: the style that hides its container is on the page too (Streamlit puts a style-only
    # html element where it takes no space)
    assert any(t == "html" and f".st-key-{frontend.KEY}" in b and "display: none" in b for t, b in shown)


@pytest.mark.parametrize("page, has, lacks", [("overview", "modulepreload", "import("),
                                               ("mechanisms", "import(href)", "modulepreload")])
def test_a_page_without_charts_on_its_first_view_asks_for_the_library_once_idle(page, has, lacks, page_env):
    """No plotly chart on the Overview (it only fetches the library, for the next page) nor on
    Mechanisms' first view (tables and SVG: the timeline, the mask), which runs it once the browser
    is idle, for its other tabs' charts."""
    at = run_page(page)
    assert not at.exception
    assert not at.get("plotly_chart")
    bodies = [str(n.proto.body) for n in walk(at._tree) if getattr(n, "type", None) == "html"]
    mine = [b for b in bodies if frontend.chart_module() in b]
    assert len(mine) == 1 and "requestIdleCallback" in mine[0] and has in mine[0] and lacks not in mine[0]
