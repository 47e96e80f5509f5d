"""Sign-in for real: Streamlit's ``st.login`` against a local OpenID Connect provider.

The provider is ``oidc-provider-mock`` (a Flask app, run here in a thread on 127.0.0.1); the
dashboard is a server of this module's own whose secrets.toml (written to a temporary folder,
never to the checkout) configures sign-in with it. Two users sign in in two browser contexts:
alice starts a run, bob sees it read-only and has no way to stop it, whatever the URL says;
alice stops it. A third context, not signed in, can start nothing. The queue is paused
(RIMSCOPE_MAX_CONCURRENT=0): the run stays queued and nothing trains.

Under CI=true a missing provider package or browser fails the module instead of skipping it.
"""

from __future__ import annotations

import os
import secrets
import threading

import pytest

from core.runs.store import RunStore
from pages.ui.auth import owner_id
from tests.browser.helpers import poll
from tests.browser.server import browser_missing_reason, running_server

WAIT_MS = 60_000
PROVIDER_STOP_S = 10


def _require(reason: str | None) -> None:
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true: the sign-in browser test cannot run: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def provider():
    """A local OpenID Connect provider: ``{"url", "issuer"}`` (its issuer is its own URL)."""
    try:
        import oidc_provider_mock
        import werkzeug.serving
    except ImportError as exc:
        _require(f"oidc-provider-mock is not installed ({exc}); pip install -r requirements-dev.txt")
    server = werkzeug.serving.make_server("127.0.0.1", 0, oidc_provider_mock.app(), threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_port}"
    try:
        yield {"url": url, "issuer": url}
    finally:
        server.shutdown()
        thread.join(PROVIDER_STOP_S)
        server.server_close()


@pytest.fixture(scope="module")
def app_server(provider, tmp_path_factory):
    """The dashboard with sign-in through ``provider`` (overrides the shared server)."""
    _require(browser_missing_reason())
    config = "\n".join([
        "[auth]",
        'redirect_uri = "http://127.0.0.1:{port}/oauth2callback"',
        f'cookie_secret = "{secrets.token_hex(32)}"',
        'client_id = "rimscope-test"',
        f'client_secret = "{secrets.token_hex(16)}"',
        f'server_metadata_url = "{provider["url"]}/.well-known/openid-configuration"',
        "",
    ])
    with running_server(tmp_path_factory.mktemp("browser_auth"), secrets=config,
                        env_extra={"RIMSCOPE_MAX_CONCURRENT": "0"}) as server:
        yield server


def _context(browser):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    ctx.set_default_timeout(WAIT_MS)
    ctx.set_default_navigation_timeout(WAIT_MS)
    return ctx, ctx.new_page()


def _sign_in(page, app_server, sub: str) -> None:
    """Sign in as ``sub`` through the Train page's button and the provider's form."""
    page.goto(f"{app_server['url']}/train", wait_until="commit")
    page.get_by_text("Sign in to start runs").first.wait_for()
    page.locator(".st-key-train_sign_in_default button").first.click()
    page.locator("input[name=sub]").fill(sub)  # the provider's authorisation form
    page.get_by_role("button", name="Authorize", exact=True).click()
    page.wait_for_url(f"{app_server['url']}/**")
    page.get_by_text(f"Signed in as {sub}").first.wait_for()


def _train(page, app_server, query: str = "") -> None:
    page.goto(f"{app_server['url']}/train{query}", wait_until="commit")
    page.get_by_text("Your runs").first.wait_for()


@pytest.mark.slow  # a minute or more end to end: make test-slow (CI runs it)
def test_two_users_one_cannot_stop_the_others_run(browser, app_server, provider):
    store = RunStore(root=app_server["home"] / "runs", max_concurrent=0)
    ctx_a, alice = _context(browser)
    ctx_b, bob = _context(browser)
    ctx_c, nobody = _context(browser)
    try:
        # alice signs in and starts one run (Fashion-MNIST: the server's tiny data set)
        _sign_in(alice, app_server, "alice")
        _train(alice, app_server, "?train_dataset=fashion_mnist&train_models=parallel_lstm&train_iterations=100000")
        start = alice.locator(".st-key-train_start button").first
        poll(lambda: start.is_enabled() and "Start 1 run" in start.inner_text(), WAIT_MS / 1000,
             what="Start 1 run enabled")
        start.click()
        alice.get_by_text("Queued 1 run").first.wait_for()
        runs = store.list_runs()
        assert len(runs) == 1, runs
        rid = runs[0].run_id
        assert runs[0].owner == owner_id({"iss": provider["issuer"], "sub": "alice"})
        alice.locator(f".st-key-stop_{rid} button").first.wait_for()  # (a help tooltip nests a copy)

        # bob, signed in elsewhere, sees it read-only: on alice's URL, and with an owner in the URL
        _sign_in(bob, app_server, "bob")
        for query in (alice.url.split("/train", 1)[1], f"?owner={runs[0].owner}"):
            _train(bob, app_server, query)
            bob.get_by_text("No runs of yours yet").first.wait_for()
            bob.get_by_text("Runs of other users (1, read-only)").first.click()
            bob.locator(f".st-key-card_{rid}").first.wait_for()  # its card, shown read-only while it is queued
            assert bob.locator('[class*="st-key-stop_"], [class*="st-key-resume_"], [class*="st-key-del_"]').count() == 0
        assert store.get(rid).status == "queued"

        # not signed in: everything read-only, nothing to start
        _train(nobody, app_server)
        nobody.get_by_text("Sign in to start runs").first.wait_for()
        assert nobody.locator(".st-key-train_start button").first.is_disabled()
        assert nobody.locator('[class*="st-key-stop_"]').count() == 0

        # alice stops her own run
        alice.locator(f".st-key-stop_{rid} button").first.click()
        alice.get_by_text("before it started").first.wait_for()
        poll(lambda: store.get(rid).status == "stopped", WAIT_MS / 1000, what="alice's run stopped")
        # bob, after the change: still no control over it (a stopped run could be resumed or deleted)
        _train(bob, app_server)
        bob.get_by_text("Runs of other users (1, read-only)").first.wait_for()
        assert bob.locator('[class*="st-key-stop_"], [class*="st-key-resume_"], [class*="st-key-del_"]').count() == 0
    finally:
        for ctx in (ctx_a, ctx_b, ctx_c):
            ctx.close()
