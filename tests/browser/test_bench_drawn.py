"""The bench's "everything drawn" check (bench_pages.DRAWN_JS) in a real browser, on hand-made
pages: an element still showing Streamlit's loading skeleton or a plotly chart without its SVG keeps it
false; all drawn makes it true; a page without Streamlit's app is never drawn."""

from __future__ import annotations

import pytest

from bench.bench_pages import DRAWN_JS
from tests.browser.helpers import BROWSER

pytestmark = BROWSER

CHART = '<div data-testid="stPlotlyChart">{}</div>'
PAGES = {
    "skeleton": ('<div data-testid="stSkeleton"></div>' + CHART.format('<svg class="main-svg"></svg>'), False),
    "chart without its svg": (CHART.format("<div></div>"), False),
    "all drawn": (CHART.format('<svg class="main-svg"></svg>') * 2, True),
    "no chart": ("<p>text</p>", True),
}


@pytest.mark.parametrize("name", list(PAGES))
def test_drawn_means_no_skeleton_and_every_chart_svg(browser, name):
    body, expected = PAGES[name]
    page = browser.new_page()
    try:
        page.set_content(f'<div data-testid="stApp">{body}</div>')
        assert page.evaluate(DRAWN_JS) is expected
        page.set_content(body)
        assert page.evaluate(DRAWN_JS) is False
    finally:
        page.close()
