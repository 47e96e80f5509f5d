"""Mechanisms, "Intervene", in a real browser: click one cell of the active mask, see the
prediction change, reset.

The cell is found beforehand with core (core.eval.interventions): on the page's default model
and one of the least decided bundled MNIST test images, a cell whose flip changes the predicted class. Runs on
the shipped pretrained models when present (else the conftest's untrained ones).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.browser.helpers import (
    BROWSER,
    SLOW_MS,
    WAIT_MS,
    WAIT_S,
    _log_tail,
    assert_no_errors,
    draw_on_canvas,
    full_screenshot,
    poll,
    settle,
)

pytestmark = BROWSER
PREDICTION = re.compile(r"Prediction: original (.+?) \([\d.]+%\) → after the intervention (.+?) \([\d.]+%\) — (\w+)")


def _flip_cell(app_server):
    """(image index, row 0-based, LSTM 0-based) of a single-cell flip that changes the prediction."""
    from core import catalog
    from core.data.datasets import load_dataset
    from core.eval.interventions import decisive_cell
    from core.training.weights import load_weights

    entries = [e for e in catalog.pretrained_entries("mnist", Path(app_server["pretrained"])) if e.model == "rim"]
    model, _ = load_weights(catalog.preferred_entry(entries).stem)
    data = load_dataset("mnist", "test", data_dir=app_server["data_dir"], download=False)
    cell = decisive_cell(model, data.images)
    assert cell is not None, "no single-cell flip changes the prediction on the 30 least decided images"
    return cell


def _prediction(page):
    for t in page.locator('[data-testid="stMarkdownContainer"]').filter(has_text="Prediction").all_inner_texts():
        m = PREDICTION.search(t.replace("**", ""))
        if m:
            return m
    return None


def _cells_caption(page) -> str:
    texts = page.get_by_text(re.compile("set by the intervention")).all_inner_texts()
    return texts[0] if texts else ""


def test_click_a_mask_cell_changes_the_prediction_then_reset(page, app_server, screenshot):
    idx, t, i = _flip_cell(app_server)
    page.goto(f"{app_server['url']}/mechanisms?mech_idx={idx}&mech_more=Intervene", wait_until="commit",
              timeout=SLOW_MS)
    before = poll(lambda: _prediction(page), WAIT_S, what=f"the prediction line; server log: {_log_tail(page)}")
    assert before.group(3) == "unchanged" and before.group(1) == before.group(2)
    settle(page)

    # click cell (row t+1, LSTM i+1) of the mask (an SVG: each cell a rect named by its cell)
    cell = page.locator(f'.st-key-iv_mask rect.cell[data-cell="{t},{i}"]')
    cell.wait_for(timeout=SLOW_MS)
    assert f"row {t + 1}, LSTM {i + 1}:" in cell.locator("title").text_content()  # its tooltip names it
    cell.scroll_into_view_if_needed()
    cell.click()
    after = poll(lambda: (m := _prediction(page)) and m.group(3) == "changed" and m, WAIT_S,
                 what=f"a changed prediction after clicking row {t + 1}, LSTM {i + 1}; caption {_cells_caption(page)!r}")
    assert after.group(1) == before.group(1) and after.group(2) != before.group(1)
    # the caption comes later in the page than the prediction line: the rerun redraws it after
    poll(lambda: _cells_caption(page).startswith("1 cell set by the intervention"), WAIT_S,
         what=f"the caption to count the clicked cell; it says {_cells_caption(page)!r}")
    settle(page)
    assert_no_errors(page, "Intervene after a click")
    full_screenshot(page, screenshot, "mechanisms-intervene")

    page.get_by_role("button", name="Reset").click()
    back = poll(lambda: (m := _prediction(page)) and m.group(3) == "unchanged" and m, WAIT_S,
                what="the original prediction after Reset")
    assert back.group(2) == before.group(2)
    poll(lambda: _cells_caption(page).startswith("0 cells set"), WAIT_S,
         what=f"the caption after Reset; it says {_cells_caption(page)!r}")
    assert_no_errors(page, "Intervene after Reset")


_THUMB_TEXTS = """(box) => [...box.querySelectorAll('[data-testid="stSliderThumbValue"]')].map(e => e.textContent.trim())"""


@pytest.mark.parametrize("width, height", ((1280, 800), (1400, 1000)))
def test_rows_to_set_on_one_row_read_as_one_row(browser, app_server, width, height):
    """Both ends of "Rows to set" on one row: the slider draws no value labels of its own (two
    equal ones sit side by side over the one thumb, "5 5"); the caption just under it says the row,
    and the range once the end moves on."""
    context = browser.new_context(viewport={"width": width, "height": height})
    context.set_default_timeout(60_000)
    pg = context.new_page()
    pg.rimscope_errors, pg.rimscope_server = [], app_server
    pg.on("pageerror", lambda exc: pg.rimscope_errors.append(str(exc)))
    try:
        pg.goto(f"{app_server['url']}/mechanisms?mech_more=Intervene&mech_t=5", wait_until="commit", timeout=SLOW_MS)
        box = pg.locator(".st-key-iv_rows")
        box.wait_for(timeout=SLOW_MS)
        settle(pg)
        box.scroll_into_view_if_needed()
        thumbs = poll(lambda: box.evaluate(_THUMB_TEXTS) or None, WAIT_S,  # the slider's thumbs drawn (under load: late)
                      what=f"{width}x{height}: the slider's two thumbs drawn")
        assert thumbs == ["", ""], f"{width}x{height}: the slider draws its own values"
        said = pg.get_by_text("Row 5 of 28", exact=True)
        said.wait_for(timeout=WAIT_MS)
        slider, caption = box.bounding_box(), said.bounding_box()
        assert 0 <= caption["y"] - (slider["y"] + slider["height"]) < 40, (slider, caption)  # just under it
        assert slider["x"] <= caption["x"] < slider["x"] + slider["width"]
        end = box.locator('[role="slider"], input[type="range"]').nth(1)
        end.focus()
        pg.keyboard.press("ArrowRight")
        pg.get_by_text("Rows 5-6 of 28", exact=True).wait_for(timeout=WAIT_MS)
        settle(pg)
        assert box.evaluate(_THUMB_TEXTS) == ["", ""]
        assert_no_errors(pg, f"Intervene rows at {width}x{height}")
    finally:
        context.close()


def test_a_drawing_as_the_donor_patches_the_mask(page, app_server):
    """Patch the whole selection mask from a drawing: until something is drawn nothing is set;
    once a stroke is on the donor canvas, every cell of the mask comes from the drawing."""
    page.goto(f"{app_server['url']}/mechanisms?mech_idx=3&mech_more=Intervene&iv_patch=1&iv_patch_from=draw"
              "&iv_patch_what=mask", wait_until="commit", timeout=SLOW_MS)
    page.get_by_text("The canvas is empty").first.wait_for(timeout=SLOW_MS)
    poll(lambda: _cells_caption(page).startswith("0 cells set"), WAIT_S,
         what=f"no cell set before the drawing; the caption says {_cells_caption(page)!r}")
    settle(page)
    draw_on_canvas(page)
    poll(lambda: _cells_caption(page).startswith("168 cells set by the intervention"), WAIT_S,
         what=f"the drawing's mask on every cell; the caption says {_cells_caption(page)!r}")
    settle(page)
    assert_no_errors(page, "Intervene with a drawn donor")


def test_attribution_overlay_and_set_wide_knockout(page, app_server, screenshot):
    """The attribution tab draws its overlay with the completeness line; the set-wide view runs
    the knock-outs (progress bar, then the table and its computed captions)."""
    page.goto(f"{app_server['url']}/mechanisms?mech_idx=0&mech_more=Which+pixels+drive+it&mech_t=14",
              wait_until="commit", timeout=SLOW_MS)
    line = page.get_by_text(re.compile("completeness gap")).first
    line.wait_for(timeout=SLOW_MS)
    assert page.locator(".st-key-ig_overlay").count() == 1
    settle(page)
    page.get_by_text("an LSTM's selection at row 14").first.click()
    page.get_by_text(re.compile(r"the selection margin of LSTM 1 at row 14")).first.wait_for(timeout=SLOW_MS)
    settle(page)
    assert_no_errors(page, "Which pixels drive it")
    full_screenshot(page, screenshot, "mechanisms-attribution")

    page.goto(f"{app_server['url']}/mechanisms?mech_tab=Across+the+test+set&mech_stats_n=200&iv_knock=1",
              wait_until="commit", timeout=SLOW_MS)
    cap = page.get_by_text(re.compile(r"On 200 images clean, .+ is right on [\d.]+% intact")).first
    cap.wait_for(timeout=SLOW_MS)
    noisy = page.get_by_text(re.compile(r"On 200 images with Gaussian noise"))
    noisy.first.wait_for(timeout=SLOW_MS)  # the same script run draws it a moment after the clean one
    assert noisy.count() == 1
    settle(page)
    assert_no_errors(page, "the set-wide knock-out view")
    full_screenshot(page, screenshot, "mechanisms-knockout")
