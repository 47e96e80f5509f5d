"""The chart library loads with the page (pages/ui/frontend.py), in a real browser: on a page that
draws plotly charts the browser fetches Streamlit's plotly module, the charts draw, and the
hidden element that asks for it takes no space (the title sits where it sits on a page without it)."""

from __future__ import annotations

import pytest

from pages.ui.frontend import KEY, chart_module
from tests.browser.helpers import BROWSER, SLOW_MS, assert_no_errors, open_page, settle

pytestmark = BROWSER


def test_the_chart_library_loads_early_and_takes_no_space(page, app_server):
    name = chart_module()
    assert name is not None
    open_page(page, app_server, "train")  # no charts_early here
    settle(page)
    top_plain = page.evaluate("() => document.querySelector('h1').getBoundingClientRect().top")
    fetched = []
    page.on("request", lambda r: fetched.append(r.url) if name in r.url else None)
    open_page(page, app_server, "compare")
    page.locator('[data-testid="stPlotlyChart"] .main-svg').first.wait_for(timeout=SLOW_MS)
    settle(page)
    assert_no_errors(page, "Compare")
    box = page.evaluate(f"() => {{ const e = document.querySelector('.st-key-{KEY}'); "
                        "return e && [e.getBoundingClientRect().height, getComputedStyle(e).display]; }")
    assert box == [0, "none"]
    assert page.evaluate("() => document.querySelector('h1').getBoundingClientRect().top") == top_plain
    # the module is the frontend's own: fetched (or already in the browser's cache from an
    # earlier test of the session: then Performance lists it)
    listed = page.evaluate(f"() => performance.getEntriesByType('resource').some(e => e.name.includes({name!r}))")
    assert fetched or listed


@pytest.mark.parametrize("which", ["overview", "mechanisms"])
def test_a_page_without_charts_prefetches_the_chart_library_once_idle(page, app_server, which):
    """No plotly chart on the Overview nor on Mechanisms' first view (its timeline and mask are
    SVG): the module is fetched after the page is drawn (the Overview: a modulepreload link, so
    the browser does not run it there; Mechanisms imports it, for its other tabs), and the title
    sits where it sits elsewhere."""
    name = chart_module()
    open_page(page, app_server, "train")
    settle(page)
    top_plain = page.evaluate("() => document.querySelector('h1').getBoundingClientRect().top")
    open_page(page, app_server, which)
    settle(page)
    assert_no_errors(page, which)
    assert page.locator('[data-testid="stPlotlyChart"]').count() == 0
    if which == "mechanisms":  # drawn without it: the timeline's cells and the mask's clickable cells
        # (waited for: under load the page can go quiet for settle's half second before the timeline is
        # sent; a locator, since the timeline draws in its component's shadow root, out of querySelector's reach)
        page.locator(".st-key-mech_timeline svg rect").nth(28 * 6).wait_for(state="attached", timeout=SLOW_MS)
        assert page.locator(".st-key-mech_timeline svg rect").count() > 28 * 6
        assert page.locator(".st-key-iv_mask rect.cell").count() == 28 * 6
    if which == "overview":
        page.wait_for_function(f"() => [...document.querySelectorAll('link[rel=modulepreload]')]"
                               f".some(l => l.href.includes({name!r}))", timeout=SLOW_MS)
    page.wait_for_function(f"() => performance.getEntriesByType('resource').some(e => e.name.includes({name!r}))",
                           timeout=SLOW_MS)
    assert page.evaluate("() => document.querySelector('h1').getBoundingClientRect().top") == top_plain
