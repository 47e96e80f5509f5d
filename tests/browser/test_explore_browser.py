"""Mechanisms in a real browser: select a block of the active mask, get the inputs
that match it, open one as the current input, and put a second model beside the first.

Runs on the shipped pretrained models when present (else the conftest's untrained ones) and
the bundled MNIST sample. Its own server (the ``app_server`` fixture is per module).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

from tests.browser.helpers import (
    BROWSER,
    INSIDE,
    SLOW_MS,
    WAIT_MS,
    WAIT_S,
    _log_tail,
    assert_no_errors,
    current_url,
    full_screenshot,
    poll,
    press_slider,
    settle,
)

pytestmark = BROWSER
MATCH_LINE = re.compile(r"(\d+) of (\d+) images match rows (\d+)-(\d+) x (.+) within (\d+) cells")


def _match_line(page):
    texts = page.locator('[data-testid="stMarkdownContainer"]').filter(has_text="images match").all_inner_texts()
    for t in texts:
        m = MATCH_LINE.search(t)
        if m:
            return m
    return None


def _open_options(page, label: str):
    """The options of selectbox ``label``, its list opened (again, if a late rerun closed it)."""
    box = page.locator('[data-testid="stSelectbox"]').filter(has_text=label).first
    options = page.locator('[role="option"]')

    def opened():
        if not options.first.is_visible():
            box.get_by_role("button", name="Open").click()
            options.first.wait_for(timeout=3_000)
        return options.first.is_visible()

    poll(opened, WAIT_S, every=0.3, what=f"the options of {label!r}")
    return options


def _idx_in_url(page) -> int | None:
    v = parse_qs(urlparse(current_url(page)).query).get("mech_idx")
    return int(v[0]) if v else None


def test_block_matches_open_one_and_compare_two_models(page, app_server, screenshot):
    page.goto(f"{app_server['url']}/mechanisms?mech_idx=3&mech_more=Find+the+same+mechanisms+elsewhere", wait_until="commit", timeout=SLOW_MS)
    page.get_by_text(INSIDE).first.wait_for(timeout=SLOW_MS)
    first = poll(lambda: _match_line(page), WAIT_S, what="the match count")
    settle(page)
    assert (first.group(3), first.group(4)) == ("12", "16") and first.group(5).endswith("LSTM 6")

    # the block: rows 10-16 (first row two steps back) x LSTM 1-5 (LSTM 6 removed)
    press_slider(page, "First row", "ArrowLeft", 2)
    page.get_by_role("button", name="Remove LSTM 6").click()
    settle(page)
    m = poll(lambda: (x := _match_line(page)) and x.group(3) == "10" and "LSTM 6" not in x.group(5) and x,
             WAIT_S, what="the match count for rows 10-16 x LSTM 1-5")
    assert m.group(5) == "LSTM 1, LSTM 2, LSTM 3, LSTM 4, LSTM 5"
    hits = int(m.group(1))
    press_slider(page, "Threshold", "ArrowRight", 3)  # a looser threshold: at least as many matches
    looser = poll(lambda: (x := _match_line(page)) and int(x.group(6)) == int(m.group(6)) + 3 and x, WAIT_S,
                  what="the count after moving the threshold")
    assert int(looser.group(1)) >= hits and int(looser.group(1)) > 0
    assert_no_errors(page, "Mechanisms after selecting a block")

    # open the nearest match as the current input: the URL follows
    assert _idx_in_url(page) == 3
    nearest = page.locator('[class*="st-key-mech_match_"]').filter(has=page.get_by_role("button", name="Open")).first
    key = next(c for c in nearest.get_attribute("class").split() if c.startswith("st-key-mech_match_"))
    target = int(key.rsplit("_", 1)[1])
    settle(page)
    nearest.get_by_role("button", name="Open").click()
    settle(page)
    new = poll(lambda: _idx_in_url(page) == target and target, WAIT_S,
               what=f"mech_idx={target} in the URL; server log: {_log_tail(page)}")
    settle(page)
    shown = page.locator('[data-testid="stNumberInput"]').filter(has_text=re.compile(r"(Test|Sample) image number")).locator("input")
    assert int(shown.input_value()) == new

    # a second model beside the first: both predictions, the masks' difference
    options = _open_options(page, "Compare with")
    names = options.all_inner_texts()
    rim = next((o for o in names if o.startswith("RIM (paper's method) · paper protocol")), None)
    assert rim is not None, f"no second RIM to compare with: {names}"
    options.filter(has_text=re.compile("^" + re.escape(rim) + "$")).first.click()
    page.get_by_text("Mask cells that differ").first.wait_for(timeout=WAIT_MS)
    settle(page)
    metrics = page.locator('[data-testid="stMetric"]').all_inner_texts()
    assert any(t.startswith(rim) for t in metrics), metrics
    assert page.get_by_text(re.compile(r"^where the masks differ \(\d+ of \d+ cells\)")).count() >= 1
    assert_no_errors(page, "Mechanisms comparing two models")
    full_screenshot(page, screenshot, "mechanisms-explore")
