"""A new user's first hour, in a real browser: what a person sees in Chromium.

* the Train page offline without training data: it says so and how to get it, Start is
  disabled, and MNIST offers a labelled quick demo on the bundled sample that enables Start;
* a reload keeps the Train form (its settings live in the URL);
* a Mechanisms URL opened in a second browser context shows the same image, step and prediction;
* "Open in Models" on a finished run lands on the Models page with that run and its data set.

The module uses the session's shared server (``app_server``, tests/browser/conftest.py):
offline, a data folder with only a tiny Fashion-MNIST; its runs belong to ``OWNER``.
"""

from __future__ import annotations

import re
import time
from urllib.parse import parse_qs, urlparse

import pytest

from tests.browser.helpers import (
    BROWSER,
    INSIDE,
    PREDICTION,
    SLOW_MS,
    WAIT_MS,
    WAIT_S,
    assert_no_errors,
    choose_option,
    current_url,
    poll,
    settle,
)

pytestmark = BROWSER

OWNER = "f1a57f1a57f1a57f"  # the Train page's session owner, given in the URL


def _goto(page, server: dict, path: str, heading: str, ready: str | re.Pattern | None = None) -> None:
    page.goto(f"{server['url']}/{path}", wait_until="commit", timeout=SLOW_MS)
    page.locator("h1").filter(has_text=heading).first.wait_for(timeout=SLOW_MS)
    if ready is not None:
        page.get_by_text(ready).first.wait_for(timeout=SLOW_MS)
    settle(page, SLOW_MS / 1000)


def _selected(page, key: str) -> str:
    """What a selectbox shows as chosen (the text of its combobox input)."""
    return page.locator(f".st-key-{key} input").first.input_value()


def _query(page) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlparse(current_url(page)).query).items()}


def _start_button(page):
    return page.locator(".st-key-train_start button")


# ------------------------------------------------------------------------------ Train offline


def test_offline_train_page_without_data(page, app_server, screenshot):
    _goto(page, app_server, "train", "Train", "Your runs")
    alert = page.locator('[data-testid="stAlert"]').filter(has_text="No training data for MNIST")
    alert.first.wait_for(timeout=WAIT_MS)
    main = page.locator('[data-testid="stMain"]')
    text = main.inner_text()
    assert "Ways to get it" in text and "RIMSCOPE_DATA_DIR" in text and "torchvision" in text, text[:3000]
    assert _start_button(page).is_disabled(), "Start must be disabled without training data"
    demo = page.get_by_text("Train a quick demo on the bundled MNIST sample")
    assert demo.count() == 1, "no demo checkbox for MNIST"
    screenshot(page, "first-hour-train-offline")

    demo.click()
    page.get_by_text("Training data: bundled sample (demo)").wait_for(timeout=WAIT_MS)
    poll(lambda: _start_button(page).is_enabled(), WAIT_S, what="Start enabled by the demo checkbox")
    assert _start_button(page).inner_text().strip() == "Start 2 runs"

    choose_option(page, "Data set", "CIFAR-10")  # no bundled sample: no demo, Start disabled
    page.get_by_text("No training data for CIFAR-10").first.wait_for(timeout=WAIT_MS)
    settle(page)
    assert page.get_by_text("Train a quick demo on the bundled").count() == 0
    assert _start_button(page).is_disabled()
    assert_no_errors(page, "Train offline without data")


# ------------------------------------------------------------------------------ Train reload


def test_reload_keeps_the_train_form(page, app_server):
    _goto(page, app_server, "train", "Train", "Your runs")
    box = page.get_by_label("Iterations", exact=True)
    box.fill("3000")
    box.press("Enter")
    settle(page)
    page.get_by_role("button", name="Remove Parallel LSTMs").click()
    settle(page)
    choose_option(page, "Models", "EntNet")
    page.locator("h1").filter(has_text="Train").first.click()  # close the list, as a person clicks away
    settle(page)
    chosen = page.locator(".st-key-train_models").inner_text()
    assert "EntNet" in chosen and "Parallel LSTMs" not in chosen, chosen
    poll(lambda: _query(page).get("train_iterations") == "3000" and _query(page).get("train_models") == "rim,entnet",
         WAIT_S, what=f"the form in the URL (now {current_url(page)})")

    page.reload(wait_until="commit", timeout=SLOW_MS)
    page.get_by_text("Your runs").first.wait_for(timeout=SLOW_MS)
    settle(page)
    # the restored value (on a busy machine the first render after the reload can still be drawing:
    # seen once as "0" in a full two-process run), so wait for it instead of reading it once
    poll(lambda: page.get_by_label("Iterations", exact=True).input_value() == "3000", WAIT_S,
         what="the iterations restored from the URL after the reload")
    chosen = page.locator(".st-key-train_models").inner_text()
    assert "RIM (paper's method)" in chosen and "EntNet" in chosen and "Parallel LSTMs" not in chosen, chosen
    assert page.get_by_role("button", name="Remove Parallel LSTMs").count() == 0
    assert_no_errors(page, "Train after a reload")


# ------------------------------------------------------------------------------ Mechanisms link


def _step_text(pg) -> str:
    texts = pg.get_by_text(re.compile(r"^Step \d+ of \d+")).all_inner_texts()
    return texts[0] if texts else ""


def _prediction(pg) -> str:
    found = [t for t in pg.locator('[data-testid="stCaptionContainer"]').all_inner_texts() if PREDICTION.search(t)]
    return found[0] if found else ""


def _pick_image(page, number: int) -> None:
    box = page.get_by_label(re.compile(r"^(Test|Sample) image number"))
    box.fill(str(number))
    box.press("Enter")
    page.get_by_text(re.compile(rf"^What the model sees: sample image #{number}\b")).first.wait_for(timeout=WAIT_MS)
    settle(page)


def _pick_step(page, t: int) -> None:
    thumb = page.locator('.st-key-mech_t input[type="range"]')  # the slider's (visually hidden) input
    for _ in range(4):  # arrow keys until the slider says t (a rerun may swallow a press)
        now = int(thumb.input_value())
        if now == t:
            break
        thumb.focus()
        for _ in range(abs(t - now)):
            page.keyboard.press("ArrowRight" if now < t else "ArrowLeft")
            time.sleep(0.2)
        settle(page)
    poll(lambda: _step_text(page).startswith(f"Step {t} of 28"), WAIT_S, what=f"step {t} of 28")
    settle(page)


@pytest.mark.parametrize("order", [
    "step_last",  # the slider lives in a fragment: it writes mech_t into the URL itself
    "step_first",  # a full rerun (the image number) after the slider writes mech_t into the URL
])
def test_shared_mechanisms_url_opens_the_same_view(page, browser, app_server, order):
    _goto(page, app_server, "mechanisms", "Mechanisms", INSIDE)
    if order == "step_first":
        _pick_step(page, 9)
    _pick_image(page, 17)
    if order == "step_last":
        _pick_step(page, 9)
    step, pred = _step_text(page), _prediction(page)
    assert step.startswith("Step 9 of 28") and pred, (step, pred)
    poll(lambda: "mech_idx=17" in current_url(page), WAIT_S, what="the image number in the URL")
    url = current_url(page)  # what a person copies from the address bar

    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        ctx.set_default_timeout(60_000)
        other = ctx.new_page()
        other.rimscope_errors, other.rimscope_server = [], app_server
        other.on("pageerror", lambda exc: other.rimscope_errors.append(str(exc)))
        other.goto(url, wait_until="commit", timeout=SLOW_MS)
        other.get_by_text(INSIDE).first.wait_for(timeout=SLOW_MS)
        settle(other, SLOW_MS / 1000)
        box = other.get_by_label(re.compile(r"^(Test|Sample) image number"))
        poll(lambda: box.input_value() == "17", WAIT_S, what="image 17 in the second browser")  # a busy machine
        settle(other)
        assert other.get_by_text(re.compile(r"^What the model sees: sample image #17\b")).count() == 1
        assert _step_text(other) == step, f"{url} opens another step"
        assert _prediction(other) == pred
        assert_no_errors(other, "Mechanisms opened from a shared URL")
    finally:
        ctx.close()


# ------------------------------------------------------------------------------ Open in Models


def test_open_in_models_selects_the_run(page, app_server, screenshot):
    from core.runs.store import RunStore
    from core.training.config import TrainConfig

    store = RunStore(root=app_server["home"] / "runs", max_concurrent=1)
    cfg = TrainConfig(dataset="fashion_mnist", model="rim", iterations=10, batch_size=20, eval_every=5,
                      eval_samples=50, noise_draws=1,
                      model_overrides={"hidden_size": 8, "num_units": 3, "k_active": 2})
    rid = store.submit(cfg, owner=OWNER, label="open me", data_dir=app_server["data_dir"])
    store.pump()
    poll(lambda: store.get(rid).status in ("completed", "failed", "diverged", "interrupted"), 3 * WAIT_S,
         what="the tiny run to finish")
    assert store.get(rid).status == "completed", store.get(rid).message
    # a newer run of the same session: the Models page would open on it by itself
    stem = app_server["pretrained"] / "mnist" / "parallel_lstm"
    newer = store.import_weights(stem.with_suffix(".safetensors").read_bytes(),
                                    stem.with_suffix(".json").read_bytes(), "mnist", owner=OWNER, label="newer")
    store.pump()  # reap the finished worker

    _goto(page, app_server, f"train?owner={OWNER}", "Train", "Your runs")
    button = page.locator(f".st-key-open_{rid} button")
    button.wait_for(timeout=WAIT_MS)
    assert page.locator(f".st-key-open_{newer} button").count() == 1
    button.scroll_into_view_if_needed()
    button.click()

    page.locator("h1").filter(has_text="Models").first.wait_for(timeout=SLOW_MS)
    page.get_by_text("Inspect a model").first.wait_for(timeout=SLOW_MS)
    settle(page)
    assert "/models" in current_url(page)
    picked = _selected(page, "models_pick")
    # the picker shows the run's display name, with the short id (the last 8 characters)
    assert rid[-8:] in picked and "Fashion-MNIST" in picked and newer[-8:] not in picked, picked
    ds = _selected(page, "models_ds")
    assert "Fashion-MNIST" in ds and "All data sets" not in ds, ds
    assert_no_errors(page, "Models opened from a Train card")
    screenshot(page, "first-hour-open-in-models")


# ------------------------------------------------------------------------------ PNG export


# records when "Rendering the PNG…" and the PNG download first appear (performance.now(), ms)
PNG_PROGRESS_JS = """() => {
  window.__png = {spinner: null, download: null};
  const look = () => {
    const now = performance.now();
    if (window.__png.spinner === null && document.body.textContent.includes('Rendering the PNG…'))
      window.__png.spinner = now;
    if (window.__png.download === null && document.querySelector('.st-key-cmp_dl_loss_png button'))
      window.__png.download = now;
  };
  new MutationObserver(look).observe(document.body, {childList: true, subtree: true, characterData: true});
}"""
PNG_SPINNER_BY_S = 1.0  # Streamlit's spinner delay (0.5 s) plus a script run's slack


def test_compare_png_is_made_with_visible_progress_then_downloads(page, app_server):
    from pages.ui.export import png_export_ready

    if not png_export_ready():
        pytest.skip("PNG export needs kaleido and a Chromium it can find")
    _goto(page, app_server, "compare", "Compare the methods")
    make = page.locator(".st-key-cmp_dl_loss_png_make button").first  # (a help tooltip nests a second copy)
    make.wait_for(timeout=SLOW_MS)
    settle(page)  # the first run's stale copy gone
    assert make.inner_text().strip() == "🖼 Make PNG"
    assert page.locator(".st-key-cmp_dl_loss_png").count() == 0, "no PNG download before one is made"
    page.evaluate(PNG_PROGRESS_JS)  # time-stamps, in the page, the spinner and the download appearing
    clicked = page.evaluate("() => performance.now()")
    make.click()
    download = page.locator(".st-key-cmp_dl_loss_png button").first
    download.wait_for(timeout=WAIT_MS)
    seen = page.evaluate("() => window.__png")
    waited_s = (seen["download"] - clicked) / 1000
    # Streamlit shows a spinner only once its block has run 0.5 s (no flicker on quick work): a
    # wait past a second must have shown it.
    if waited_s > PNG_SPINNER_BY_S:
        assert seen["spinner"] is not None, f"no visible progress during a {waited_s:.1f} s wait for the PNG"
    if seen["spinner"] is not None:
        assert clicked <= seen["spinner"] <= seen["download"], "the progress shows while the PNG is made"
    assert page.locator(".st-key-cmp_dl_loss_png_make").count() == 0  # the download took the button's place
    with page.expect_download(timeout=WAIT_MS) as info:
        download.click()
    path = info.value.path()
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert info.value.suggested_filename.endswith("_loss_overlay.png")
    assert_no_errors(page, "Compare after a PNG export")
