"""State that sticks, in a real browser: the sidebar's protocol switch and the models picked on
Robustness hold across interactions and across pages (``pages.ui.pickers`` owns them).

* choosing "paper protocol" on Mechanisms shows the paper models, and they stay after "Another
  image", on Robustness, and after a noise step there;
* a model picked on Robustness is still picked after a visit to another page.

The module uses the session's shared server with the shipped ``pretrained/`` (both protocols);
without both protocols there is no switch to test, and the tests fail in CI (skip elsewhere).
"""

from __future__ import annotations

import json
import os
import re

import pytest

from core.catalog import DEFAULT_PROTOCOL
from core.report.fmt import PROTOCOL_SHORT, PROTOCOL_SWITCH_TITLES
from tests.browser.helpers import (
    BROWSER,
    INSIDE,
    SLOW_MS,
    WAIT_MS,
    WAIT_S,
    assert_no_errors,
    choose_option,
    poll,
    settle,
)

pytestmark = BROWSER

PAPER = PROTOCOL_SWITCH_TITLES["paper"]  # the sidebar label


@pytest.fixture(autouse=True)
def _two_protocols(app_server):
    manifest = json.loads((app_server["pretrained"] / "manifest.json").read_text())
    have = {m.get("protocol", "paper") for m in manifest["models"] if m["dataset"] == "mnist"}
    if not {"paper", "converged"} <= have:
        msg = f"the server's pretrained models hold the protocols {sorted(have)}: no switch to test"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)


def _goto(page, server: dict, path: str, heading: str, ready) -> None:
    page.goto(f"{server['url']}/{path}", wait_until="commit", timeout=SLOW_MS)
    page.locator("h1").filter(has_text=heading).first.wait_for(timeout=SLOW_MS)
    page.get_by_text(ready).first.wait_for(timeout=SLOW_MS)
    settle(page, SLOW_MS / 1000)


def _nav(page, label: str, ready, heading: str | None = None) -> None:
    """Another page through the sidebar (the same session, as a person clicks)."""
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text=label).first.click()
    page.locator("h1").filter(has_text=heading or label).first.wait_for(timeout=SLOW_MS)
    page.get_by_text(ready).first.wait_for(timeout=SLOW_MS)
    settle(page, SLOW_MS / 1000)


def _selected(page, key: str) -> str:
    return page.locator(f".st-key-{key} input").first.input_value()


def _protocol_shown(page) -> str:
    return page.locator('[data-testid="stSidebar"] [role="radiogroup"] input:checked').first.evaluate(
        "el => el.closest('label').innerText")


def _mech_predictions(page) -> str:
    found = [t for t in page.locator('[data-testid="stCaptionContainer"]').all_inner_texts()
             if re.search(r"\(pretrained\): \S", t)]
    return found[0] if found else ""


def _rb_models(page) -> str:
    found = [t for t in page.locator('[data-testid="stCaptionContainer"]').all_inner_texts() if t.startswith("Models: ")]
    return found[0] if found else ""


def _all_paper(text: str) -> bool:
    return bool(text) and "paper protocol" in text and "converged" not in text


def _step_noise(page) -> None:
    thumb = page.locator('.st-key-rb_strength_gaussian input[type="range"]').first  # the hidden range input
    before = thumb.input_value()
    thumb.focus()
    page.keyboard.press("ArrowRight")
    poll(lambda: thumb.input_value() != before, WAIT_S, what="the noise slider to move")
    settle(page)


def test_paper_protocol_sticks_across_clicks_and_pages(page, app_server):
    _goto(page, app_server, "mechanisms", "Mechanisms", INSIDE)
    assert PROTOCOL_SHORT[DEFAULT_PROTOCOL] in _selected(page, "mech_model_mnist")  # the shipped default
    page.locator('[data-testid="stSidebar"]').get_by_text(PAPER).click()
    settle(page)
    poll(lambda: "paper protocol" in _selected(page, "mech_model_mnist"), WAIT_S, what="the paper RIM picked")
    poll(lambda: _all_paper(_mech_predictions(page)), WAIT_S, what="paper models' predictions")

    page.get_by_role("button", name="Another image").click()
    settle(page)
    assert PAPER in _protocol_shown(page)
    assert "paper protocol" in _selected(page, "mech_model_mnist"), "the model reverted after Another image"
    assert _all_paper(_mech_predictions(page)), _mech_predictions(page)

    _nav(page, "Robustness", "Error against noise strength")
    assert PAPER in _protocol_shown(page), "the protocol was lost on another page"
    assert _all_paper(_rb_models(page)), _rb_models(page)
    _step_noise(page)
    assert PAPER in _protocol_shown(page)
    assert _all_paper(_rb_models(page)), "the models reverted after a noise step: " + _rb_models(page)
    assert "pretrained_protocol=paper" in page.evaluate("() => location.href")
    assert_no_errors(page, "the protocol switch")


def test_robustness_keeps_the_picked_models_across_pages(page, app_server):
    _goto(page, app_server, "robustness", "Robustness", "Error against noise strength")
    page.get_by_text("Models compared: one model per method").first.click()
    page.get_by_role("combobox", name="RIM (paper's method)").wait_for(timeout=WAIT_MS)
    choose_option(page, "RIM (paper's method)", re.compile(r"^RIM .*paper protocol"))
    settle(page)
    poll(lambda: re.search(r"RIM [^,]*paper protocol", _rb_models(page)), WAIT_S, what="the paper RIM picked")
    picked = _rb_models(page)

    _nav(page, "Overview", "Where to start", heading="RIMscope")
    _nav(page, "Robustness", "Error against noise strength")
    poll(lambda: _rb_models(page) == picked, WAIT_S, what=f"the picked models back ({picked!r}), "
                                                           f"now {_rb_models(page)!r}")
    assert_no_errors(page, "Robustness after a visit to Overview")


def _pick_step(page, t: int) -> None:
    thumb = page.locator('.st-key-mech_t input[type="range"]').first  # the slider's hidden range input
    for _ in range(4):  # arrow keys until the slider says t (a rerun may swallow a press)
        now = int(thumb.input_value())
        if now == t:
            break
        thumb.focus()
        for _ in range(abs(t - now)):
            page.keyboard.press("ArrowRight" if now < t else "ArrowLeft")
        settle(page)
    poll(lambda: page.get_by_text(re.compile(rf"^Step {t} of 28")).count() > 0, WAIT_S, what=f"step {t} shown")
    settle(page)


def test_trace_json_records_the_row_shown(page, app_server):
    """The step slider reruns only its fragment: the JSON export must still record the row shown."""
    _goto(page, app_server, "mechanisms", "Mechanisms", INSIDE)
    _pick_step(page, 10)
    button = page.get_by_role("button", name="⬇ JSON: whole trace")
    button.scroll_into_view_if_needed()
    with page.expect_download(timeout=WAIT_MS) as info:
        button.click()
    with open(info.value.path()) as f:
        record = json.load(f)
    assert record["settings"]["timestep"] == 10, record["settings"]


def test_a_link_from_another_page_opens_its_view(page, app_server):
    """Mechanisms first (its default view), then Robustness -> Other handwriting -> "Trace" on a
    misread digit: Mechanisms must show that digit, though this session has been there before."""
    _goto(page, app_server, "mechanisms", "Mechanisms", INSIDE)
    _nav(page, "Robustness", "Error against noise strength")
    page.get_by_role("tab", name="Other handwriting").click()
    page.get_by_text(re.compile(r"^Misread digits \(\d+ of \d+\)$")).wait_for(timeout=SLOW_MS)
    settle(page)
    link = page.get_by_role("link", name=re.compile(r"Trace$")).first
    link.scroll_into_view_if_needed()
    link.click()
    page.get_by_text(re.compile(r"What the model sees: \w+ digit #\d+")).first.wait_for(timeout=SLOW_MS)
    settle(page)
    assert_no_errors(page, "Mechanisms opened from a handwriting digit")
