"""Robustness's "Other handwriting" view in a real browser: a deep link opens it on the bundled
Semeion sample (no full set on the test server), the misread grid appears, and one click on a
digit's link opens it on Mechanisms with its trace, the digit's set and number in the URL."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

from tests.browser.helpers import (
    BROWSER,
    INSIDE,
    SLOW_MS,
    WAIT_MS,
    assert_no_errors,
    current_url,
    full_screenshot,
    settle,
)

pytestmark = BROWSER


def test_other_handwriting_view_opens_a_misread_digit_on_mechanisms(page, app_server, screenshot):
    page.goto(f"{app_server['url']}/robustness?rb_tab=Other+handwriting&rb_hw_set=semeion",
              wait_until="commit", timeout=SLOW_MS)
    page.get_by_text(re.compile(r"^Misread digits \(\d+ of 200\)$")).wait_for(timeout=SLOW_MS)
    page.get_by_text("Showing the bundled sample").first.wait_for(timeout=WAIT_MS)
    page.locator('[data-testid="stDataFrame"]').first.wait_for(timeout=WAIT_MS)  # the accuracy table (a canvas grid)
    settle(page)
    assert_no_errors(page, "Robustness, Other handwriting")
    full_screenshot(page, screenshot, "robustness-handwriting")

    link = page.get_by_role("link", name=re.compile(r"Trace$")).first  # "🧩 Trace": open on Mechanisms
    link.scroll_into_view_if_needed()
    link.click()
    page.get_by_text(INSIDE).first.wait_for(timeout=SLOW_MS)
    page.get_by_text(re.compile(r"What the model sees: semeion digit #\d+")).first.wait_for(timeout=WAIT_MS)
    settle(page)
    query = parse_qs(urlparse(current_url(page)).query)
    assert urlparse(current_url(page)).path.endswith("/mechanisms")
    assert query.get("mech_source") == ["Other handwriting"] and query.get("mech_hw_set") == ["semeion"]
    assert int(query["mech_hw_idx"][0]) % 2 == 1  # the bundled sample is all odd-half digits
    assert_no_errors(page, "Mechanisms, a handwriting digit")
