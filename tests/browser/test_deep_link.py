"""A deep link is the first request a freshly started server sees.

Streamlit decides on its first script run whether the ``pages/`` folder means its old
folder-based navigation. Without ``pages.ui.legacy`` a fresh server's
first request to ``/compare`` ran ``pages/compare.py`` on its own: a sidebar listing every
file in ``pages/`` (``common`` included) and none of app.py's page titles. This module has
its own server (``app_server`` is the module's ``fresh_app_server`` here, not the session's
shared one), so its first request is the link.
"""

from __future__ import annotations

import pytest

from tests.browser.helpers import BROWSER, PAGES, WAIT_MS, assert_no_errors, current_url, settle

pytestmark = BROWSER


@pytest.fixture(scope="module", params=["streamlit run app.py", "python app.py"])
def app_server(request):
    """A fresh server of its own per way to start it: ``streamlit run`` (the patch in
    ``pages.ui.legacy`` restarts the first run) and ``python app.py`` (the same patch made before
    the server starts: the first run is the app's own)."""
    fixture = "fresh_app_server" if request.param.startswith("streamlit") else "fresh_python_app_server"
    return request.getfixturevalue(fixture)


def test_deep_link_on_fresh_server_uses_app_navigation(page, app_server):
    page.goto(f"{app_server['url']}/compare", wait_until="commit", timeout=2 * WAIT_MS)
    page.locator("h1").filter(has_text="Compare the methods").first.wait_for(timeout=2 * WAIT_MS)
    settle(page)
    links = page.locator('[data-testid="stSidebarNav"] a')
    links.first.wait_for(timeout=WAIT_MS)
    labels = [t.strip().splitlines()[-1].strip() for t in links.all_inner_texts()]
    assert labels == [label for _, label, _ in PAGES.values()], f"sidebar shows {labels}"
    from urllib.parse import urlparse

    assert urlparse(current_url(page)).path.rstrip("/").endswith("/compare")  # the view's settings follow as ?query
    assert "RIMscope" in page.title(), f"app.py's page config did not apply (title {page.title()!r})"
    assert_no_errors(page, "Compare opened by a deep link")
