"""Fixtures for the browser tests: one ``streamlit run app.py`` and one Chromium for the session.

Writing a browser test (the fixtures below; nothing to set up in the test module):

* ``page``: a fresh browser context (own Streamlit session) on the shared server; take it with
  ``app_server`` for the server's ``{"url", "home", "data_dir", "pretrained", "log"}``, e.g.
  ``def test_x(page, app_server): page.goto(f"{app_server['url']}/train")``.
* ``app_server`` is SESSION-wide: every browser module shares one server (starting one costs
  half a minute to minutes on 2 busy cores). Its run store (``home``) and its Streamlit caches
  are shared too, so a test that adds runs gives them a label and never assumes an empty store
  or that it runs first (no sign-in: every run on the server is the browser's, in every tab).
* A module that needs a server of its own (its first request, a changed environment) overrides
  ``app_server`` with the module-scoped ``fresh_app_server``, as tests/browser/test_deep_link.py
  does::

      @pytest.fixture(scope="module")
      def app_server(fresh_app_server):
          return fresh_app_server

* ``browser`` (session-wide Chromium) for a second context; ``screenshot(page, name)``.

Every server is isolated from the user's files:

* ``RIMSCOPE_HOME`` is a fresh temporary folder (empty run store, no torchvision cache);
* ``RIMSCOPE_OFFLINE=1`` (no download attempts);
* ``RIMSCOPE_DATA_DIR`` is a temporary folder holding only a tiny generated Fashion-MNIST
  (``fashion_mnist/{train,test}.npz``) so the Train page can run a short training run. MNIST has
  no folder there, so MNIST test images come from the bundled sample (``assets/samples``) and
  MNIST has no training data (the Train page must say so);
* ``RIMSCOPE_PRETRAINED_DIR``: the shipped ``pretrained/`` when it has a ``manifest.json``,
  otherwise (or with ``RIMSCOPE_BROWSER_TINY_PRETRAINED=1``) freshly built, untrained models
  for MNIST RIM and parallel LSTMs with a manifest written like
  ``core.grid.export.export_pretrained`` writes it;
* ``RIMSCOPE_MAX_CONCURRENT=1``;
* the shared server's warm-up is off (``RIMSCOPE_WARMUP=0``; see ``app_server``);
* its secrets are ``<root>/secrets.toml`` only (``--secrets.files``): empty, so no sign-in,
  unless ``running_server(root, secrets=...)`` writes one (tests/browser/test_auth.py); a
  developer's own ``.streamlit/secrets.toml`` never reaches a test server.

The server listens on 127.0.0.1 only. Chromium is the Debian build at /usr/bin/chromium driven
by Playwright; tests are skipped (with the reason) when either is missing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.server import (
    CHROMIUM,
    CHROMIUM_ARGS,
    SHOTS_DIR,
    browser_missing_reason,
    running_server,
)


def _serve(tmp_path_factory, name: str, launcher: str = "streamlit", env_extra: dict | None = None):
    reason = browser_missing_reason()
    if reason:
        pytest.skip(reason)
    with running_server(tmp_path_factory.mktemp(name), launcher=launcher, env_extra=env_extra) as server:
        yield server


@pytest.fixture(scope="session")
def app_server(tmp_path_factory):
    """The session's shared server: ``{"url", "home", "data_dir", "pretrained", "log"}``, its
    warm-up off (``RIMSCOPE_WARMUP=0``): it fills caches for views no test opens, about 45
    CPU-seconds per server on a suite that is CPU-bound, and each test opens its pages itself.
    The fresh servers (``fresh_app_server``: the deep links, the run card, sign-in) run it as
    ``make app`` does; tests/pages/test_warmup.py tests what it does."""
    yield from _serve(tmp_path_factory, "browser_app", env_extra={"RIMSCOPE_WARMUP": "0"})


@pytest.fixture(scope="module")
def fresh_app_server(tmp_path_factory):
    """A server of the module's own, started for it (override ``app_server`` with it)."""
    yield from _serve(tmp_path_factory, "browser_app_fresh")


@pytest.fixture(scope="module")
def fresh_python_app_server(tmp_path_factory):
    """As ``fresh_app_server``, started as ``make app`` starts it: ``python app.py``."""
    yield from _serve(tmp_path_factory, "browser_app_fresh_python", launcher="python")


@pytest.fixture(scope="session")
def browser():
    reason = browser_missing_reason()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the item, so the ``page`` fixture knows whether the test failed."""
    outcome = yield
    rep = outcome.get_result()
    setattr(item, f"rep_{rep.when}", rep)


@pytest.fixture
def page(browser, app_server, request):
    """A fresh browser context (own Streamlit session) per test, 60 s default timeouts.

    On failure a screenshot goes to test-artifacts/screenshots/FAILED-<test>.png.
    """
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(60_000)
    context.set_default_navigation_timeout(60_000)
    pg = context.new_page()
    pg.rimscope_errors = []  # uncaught page errors, for failure messages
    pg.rimscope_server = app_server
    pg.on("pageerror", lambda exc: pg.rimscope_errors.append(str(exc)))
    try:
        yield pg
    finally:
        rep = getattr(request.node, "rep_call", None)
        if rep is not None and rep.failed:
            try:
                SHOTS_DIR.mkdir(parents=True, exist_ok=True)
                safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in request.node.name)
                pg.screenshot(path=str(SHOTS_DIR / f"FAILED-{safe}.png"), full_page=True, timeout=60_000)
            except Exception:
                pass
        context.close()


@pytest.fixture
def screenshot():
    """``screenshot(page, name)`` -> the saved path (see ``save_screenshot``)."""
    return save_screenshot


def save_screenshot(page, name: str) -> Path:
    """Full-page PNG in test-artifacts/screenshots/ (a record of the test; the documents'
    screenshots come from ``make screenshots``, scripts/screenshots.py)."""
    SHOTS_DIR.mkdir(parents=True, exist_ok=True)
    path = SHOTS_DIR / f"{name}.png"
    page.screenshot(path=str(path), full_page=True, animations="disabled", timeout=60_000)
    return path
