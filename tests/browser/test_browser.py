"""The dashboard in a real browser: every page renders, and the main interactions work.

One ``streamlit run app.py`` serves every browser module (the session-wide fixture ``app_server`` in conftest.py)
and one headless Chromium drives it through Playwright; each test gets its own browser
context, i.e. its own Streamlit session. The machine may be busy (training runs share its
cores), so waits are long: ``RIMSCOPE_BROWSER_TIMEOUT_S`` (default 180 s) per wait, twice
that for the known slow steps (first page load, scoring every noise level, a training run).

Screenshots go to ``test-artifacts/screenshots/<name>.png`` (the documents' screenshots come from
``make screenshots``).

    .venv/bin/python -m pytest tests/browser -q -m browser
"""

from __future__ import annotations

import json
import pickle

import pytest

from tests.browser.helpers import (
    BROWSER,
    INSIDE,
    PAGE_READY_TEXT,
    PAGES,
    PREDICTION,
    SLOW_MS,
    WAIT_MS,
    WAIT_S,
    assert_no_errors,
    choose_input,
    choose_option,
    current_url,
    draw_on_canvas,
    fill_inputs,
    full_screenshot,
    open_page,
    poll,
    press_slider,
    settle,
)

pytestmark = BROWSER


# ------------------------------------------------------------------------------ every page


@pytest.mark.parametrize("name", list(PAGES))
def test_page_renders(page, app_server, screenshot, name):
    open_page(page, app_server, name)
    ready = PAGE_READY_TEXT[name]
    if ready:
        page.get_by_text(ready, exact=isinstance(ready, str)).first.wait_for(timeout=SLOW_MS)
    settle(page, SLOW_MS / 1000)
    assert page.title(), "the browser tab has no title"
    assert_no_errors(page, f"page {name}")
    # every button is drawn once, with a size (a button with a tooltip was also drawn as a zero-size
    # copy); buttons inside a closed expander or a hidden tab do not count
    ghosts = page.evaluate("""() => [...document.querySelectorAll('button')].filter(b => {
        const r = b.getBoundingClientRect();
        return (r.width === 0 || r.height === 0) && !b.closest('details:not([open]), [hidden]')
            && getComputedStyle(b).display !== 'none'; }).map(b => b.innerText || b.getAttribute('aria-label'))""")
    assert not ghosts, f"page {name}: zero-size buttons {ghosts}"
    path = full_screenshot(page, screenshot, name)
    assert path.stat().st_size > 10_000


def test_sidebar_links(page, app_server):
    """The sidebar lists the six pages under their URL paths, and a link opens its page."""
    open_page(page, app_server, "overview")
    links = page.locator('[data-testid="stSidebarNav"] a')
    links.first.wait_for(timeout=WAIT_MS)
    pairs = links.evaluate_all("els => els.map(e => [e.innerText, e.href])")
    hrefs = {text.strip().splitlines()[-1].strip(): href for text, href in pairs}
    expected = {label: f"{app_server['url']}/{slug}" for slug, label, _ in PAGES.values()}
    assert {k: hrefs.get(k, "").rstrip("/") for k in expected} == {k: v.rstrip("/") for k, v in expected.items()}, \
        f"sidebar links: {pairs}"
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Models").click()
    page.locator("h1").filter(has_text="Models").first.wait_for(timeout=WAIT_MS)
    assert "/models" in current_url(page)
    settle(page)
    assert_no_errors(page, "Models (via the sidebar)")


# ------------------------------------------------------------------------------ Mechanisms


def _expect_prediction(page, screenshot, what: str, shot: str) -> None:
    """After an input: the model's view of ``what``, every method's prediction, the per-row
    view, no error on the page; then a screenshot named ``shot``."""
    page.get_by_text(f"What the model sees: {what}").wait_for(timeout=WAIT_MS)
    caption = poll(lambda: [t for t in page.locator('[data-testid="stCaptionContainer"]').all_inner_texts()
                            if PREDICTION.search(t)], WAIT_S, what="the prediction caption")
    assert "%" in caption[0]
    page.get_by_text(INSIDE).first.wait_for(timeout=WAIT_MS)
    settle(page)
    assert_no_errors(page, f"Mechanisms after {what}")
    full_screenshot(page, screenshot, shot)


def test_mechanisms_draw_digit(page, app_server, screenshot):
    open_page(page, app_server, "mechanisms")
    page.get_by_text(INSIDE).first.wait_for(timeout=SLOW_MS)
    choose_input(page, "Draw")
    page.get_by_text("The canvas is empty").wait_for(timeout=WAIT_MS)
    draw_on_canvas(page)
    _expect_prediction(page, screenshot, "your drawing", "mechanisms-draw")


def test_mechanisms_upload_image(page, app_server, screenshot, tmp_path):
    from PIL import Image, ImageDraw

    png = tmp_path / "seven.png"
    im = Image.new("L", (200, 200), 255)  # dark ink on white paper, as photographed
    ImageDraw.Draw(im).line([(40, 40), (160, 40), (90, 170)], fill=0, width=18)
    im.save(png)

    open_page(page, app_server, "mechanisms")
    page.get_by_text(INSIDE).first.wait_for(timeout=SLOW_MS)
    choose_input(page, "Upload")
    uploader = page.locator('[data-testid="stFileUploader"]').first
    uploader.wait_for(timeout=WAIT_MS)
    uploader.locator('input[type="file"]').set_input_files(str(png))
    _expect_prediction(page, screenshot, "your image", "mechanisms-upload")


# ------------------------------------------------------------------------------ Robustness


def test_robustness_noise_slider(page, app_server, screenshot):
    open_page(page, app_server, "robustness")
    page.get_by_text("Test error at Gaussian variance 0.01").wait_for(timeout=SLOW_MS)
    page.get_by_text("Error against noise strength").wait_for(timeout=SLOW_MS)
    settle(page, SLOW_MS / 1000)
    metrics = page.locator('[data-testid="stTable"]').filter(has_text="95% interval")  # every model's error
    before = poll(lambda: metrics.all_inner_texts(), WAIT_S, what="the error table")

    press_slider(page, "Gaussian noise", "ArrowRight", 4)  # 0.01 -> 0.05
    page.get_by_text("Test error at Gaussian variance 0.05").wait_for(timeout=SLOW_MS)
    after = poll(lambda: (t := metrics.all_inner_texts()) != before and t, SLOW_MS / 1000,
                 what="the error numbers to change")
    assert after != before
    page.get_by_text("Error against noise strength").wait_for(timeout=SLOW_MS)
    settle(page, SLOW_MS / 1000)
    assert_no_errors(page, "Robustness after moving the noise slider")
    full_screenshot(page, screenshot, "robustness-noise")


# ------------------------------------------------------------------------------ Train


def test_train_short_run(page, app_server, screenshot):
    open_page(page, app_server, "train")
    # MNIST: no training data offline with an empty data folder -> the page says so
    page.get_by_text("No training data for MNIST").wait_for(timeout=SLOW_MS)
    start = page.locator('[data-testid="stButton"] button').filter(has_text="Start").first
    assert start.is_disabled(), "Start must be disabled without training data"

    # Fashion-MNIST: the tiny npz set in RIMSCOPE_DATA_DIR
    choose_option(page, "Data set", "Fashion-MNIST")
    page.get_by_text("Training data: npz folder").wait_for(timeout=WAIT_MS)
    page.get_by_role("button", name="Remove Parallel LSTMs").click()
    page.get_by_role("button", name="Start 1 run").wait_for(timeout=WAIT_MS)
    fill_inputs(page, (("Iterations", "20"), ("Test accuracy every (iterations)", "5")))
    settle(page)
    button = page.get_by_role("button", name="Start 1 run")
    poll(button.is_enabled, WAIT_S, what="an enabled Start button")
    from core.runs.store import RunStore

    store = RunStore(root=app_server["home"] / "runs", max_concurrent=1)
    before = {r.run_id for r in store.list_runs()}
    button.click()
    # its card: the shared server's other runs are the user's too (no sign-in), with cards of their own
    rid = poll(lambda: next((r.run_id for r in store.list_runs() if r.run_id not in before), None), WAIT_S,
               what="the new run in the store")
    card = page.locator(f".st-key-card_{rid}")

    seen: list[str] = []

    def progress_done():
        texts = card.locator('[data-testid="stProgress"]').all_inner_texts()
        if texts and (not seen or seen[-1] != texts[0]):
            seen.append(texts[0])
        return any(t.startswith(("completed", "failed", "diverged", "interrupted")) for t in texts)

    poll(progress_done, 3 * WAIT_S, every=0.5, what="the run to finish")
    assert seen[-1].startswith("completed"), f"run did not complete: {seen}"
    assert "20 / 20 iterations" in seen[-1], seen
    assert len(seen) >= 2 and any(s.startswith(("queued", "running")) for s in seen), \
        f"no live progress seen before completion: {seen}"
    card.get_by_text("final test accuracy").first.wait_for(timeout=WAIT_MS)
    settle(page)
    assert_no_errors(page, "Train after a short run")
    full_screenshot(page, screenshot, "train-run")


# ------------------------------------------------------------------------------ Models


def test_models_refuses_bad_upload(page, app_server, screenshot, tmp_path):
    fake_pt = tmp_path / "model.pt"
    fake_pt.write_bytes(pickle.dumps({"state_dict": {"w": [1.0, 2.0]}}, protocol=2))
    disguised = tmp_path / "weights.safetensors"  # pickle bytes under a safetensors name
    disguised.write_bytes(fake_pt.read_bytes())
    meta = tmp_path / "model.json"
    meta.write_text(json.dumps({"model": "rim", "dataset": "mnist", "config": {}}))

    open_page(page, app_server, "models")
    page.get_by_text("Upload a model").wait_for(timeout=WAIT_MS)
    settle(page)
    uploaders = page.locator('[data-testid="stFileUploader"]')

    def upload_to(label: str, path) -> None:
        """Set the file on the uploader; once more if a rerun swallowed the first try."""
        for attempt in range(2):
            uploaders.filter(has_text=label).locator('input[type="file"]').set_input_files(str(path))
            try:
                uploaders.filter(has_text=label).get_by_text(path.name).first.wait_for(
                    timeout=WAIT_MS // 2 if attempt == 0 else WAIT_MS)
                break
            except Exception:
                if attempt:
                    raise
                settle(page)
        settle(page)

    upload_to("Metadata", meta)
    button = page.get_by_role("button", name="Check and import")

    for upload, expected in ((fake_pt, "model.pt is a pickle-based file"),
                             (disguised, "This looks like a pickle/PyTorch .pt file")):
        upload_to("Weights", upload)
        poll(button.is_enabled, WAIT_S, what="an enabled 'Check and import' button")
        button.click()
        alert = page.locator('[data-testid="stAlert"]').filter(has_text="Upload refused")
        alert.first.wait_for(timeout=WAIT_MS)
        text = poll(lambda e=expected, a=alert: [t for t in a.all_inner_texts() if e in t], WAIT_S,
                    what=f"the message {expected!r}")
        assert "never" in text[0]  # it says why: pickle files are never opened / unpickled
    settle(page)
    assert_no_errors(page, "Models after a refused upload")
    assert page.get_by_text("Imported").count() == 0, "a bad model was imported"
    full_screenshot(page, screenshot, "models-bad-upload")
