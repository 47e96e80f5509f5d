"""Drawing on a phone: Mechanisms' canvas in a 390 x 844 touch viewport (``has_touch``,
``is_mobile``), strokes given as touch events (Chrome DevTools Protocol
``Input.dispatchTouchEvent``, as a finger gives them), and the Undo and Clear buttons that
need no hover (the canvas's own toolbar shows only under a mouse).

A stroke (a 1), the prediction; a second stroke (a bar that makes it a 7), another; Undo, the
first prediction again; Clear, the empty canvas and no prediction; the 1 drawn anew, its
prediction again.
"""

from __future__ import annotations

import pytest

from tests.browser.helpers import (
    BROWSER,
    INSIDE,
    PREDICTION,
    SLOW_MS,
    WAIT_MS,
    WAIT_S,
    assert_no_errors,
    choose_input,
    drawing_canvas,
    open_page,
    poll,
    settle,
    stable_box,
)
from tests.browser.server import SHOTS_DIR

pytestmark = BROWSER

PHONE = {"viewport": {"width": 390, "height": 844}, "has_touch": True, "is_mobile": True, "device_scale_factor": 2}
ONE = [(150, 40), (150, 250)]  # a "1"
BAR = [(50, 42), (150, 42)]  # a bar to its top left: a "7"


@pytest.fixture
def phone(browser, app_server):
    context = browser.new_context(**PHONE)
    context.set_default_timeout(WAIT_MS)
    context.set_default_navigation_timeout(WAIT_MS)
    pg = context.new_page()
    pg.rimscope_server = app_server
    pg.rimscope_errors = []  # uncaught page errors, for assert_no_errors
    pg.on("pageerror", lambda exc: pg.rimscope_errors.append(str(exc)))
    try:
        yield pg
    finally:
        try:
            SHOTS_DIR.mkdir(parents=True, exist_ok=True)
            pg.screenshot(path=str(SHOTS_DIR / "touch-last.png"), full_page=True, timeout=30_000)
        except Exception:
            pass
        context.close()


def _touch_stroke(page, cdp, points: list[tuple[int, int]]) -> None:
    """One finger stroke through ``points`` (canvas pixels, 280 x 280) as touch events."""
    canvas = drawing_canvas(page)
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    assert box and box["width"] > 100, f"canvas box {box}"
    sx, sy = box["width"] / 280, box["height"] / 280
    at = [(box["x"] + x * sx, box["y"] + y * sy) for x, y in points]
    cdp.send("Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": [{"x": at[0][0], "y": at[0][1]}]})
    for (x0, y0), (x1, y1) in zip(at, at[1:]):
        for k in range(1, 11):
            x, y = x0 + (x1 - x0) * k / 10, y0 + (y1 - y0) * k / 10
            cdp.send("Input.dispatchTouchEvent", {"type": "touchMove", "touchPoints": [{"x": x, "y": y}]})
    cdp.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})


def _prediction(page, not_this: str | None = None) -> str:
    """The first prediction caption, once it is there (and differs from ``not_this``)."""
    def caption():
        texts = [t for t in page.locator('[data-testid="stCaptionContainer"]').all_inner_texts() if PREDICTION.search(t)]
        return texts[0] if texts and texts[0] != not_this else None
    return poll(caption, WAIT_S, what="a prediction" + (" other than the last" if not_this else ""))


def _tap(page, key: str) -> None:
    button = page.locator(f".st-key-{key} button:visible").first
    poll(lambda: button.is_enabled(), WAIT_S, what=f"{key} enabled")
    button.tap()


def test_draw_undo_clear_and_redraw_by_touch(phone, app_server):
    page = phone
    cdp = page.context.new_cdp_session(page)
    open_page(page, app_server, "mechanisms")
    page.get_by_text(INSIDE).first.wait_for(timeout=SLOW_MS)
    choose_input(page, "Draw")
    page.get_by_text("The canvas is empty").wait_for()
    page.get_by_text("Draw with your finger or the mouse").first.wait_for()
    canvas = drawing_canvas(page)
    canvas.wait_for()
    canvas.scroll_into_view_if_needed()
    poll(stable_box(canvas), WAIT_S, what="the canvas to be laid out")
    settle(page)  # the script run that drew the canvas is over and the page is quiet
    # the buttons are there without any hover, disabled while there is nothing to undo or clear
    for key in ("mech_canvas_undo", "mech_canvas_clear"):
        page.locator(f".st-key-{key} button:visible").first.wait_for()
        assert page.locator(f".st-key-{key} button:visible").first.is_disabled()

    _touch_stroke(page, cdp, ONE)
    one = _prediction(page)
    page.get_by_text("What the model sees: your drawing").first.wait_for()
    settle(page)
    _touch_stroke(page, cdp, BAR)
    seven = _prediction(page, not_this=one)
    settle(page)

    _tap(page, "mech_canvas_undo")  # the bar goes: the 1's prediction returns
    poll(lambda: _prediction(page, not_this=seven) == one, WAIT_S, what="the 1's prediction after Undo")
    settle(page)

    _tap(page, "mech_canvas_clear")
    page.get_by_text("The canvas is empty").wait_for()
    poll(lambda: not [t for t in page.locator('[data-testid="stCaptionContainer"]').all_inner_texts()
                      if PREDICTION.search(t)], WAIT_S, what="no prediction on the cleared canvas")
    settle(page)

    _touch_stroke(page, cdp, ONE)  # a new drawing after clearing: its prediction
    assert _prediction(page) == one
    page.get_by_text("What the model sees: your drawing").first.wait_for()
    settle(page)
    assert_no_errors(page, "Mechanisms after touch drawing, Undo and Clear")
