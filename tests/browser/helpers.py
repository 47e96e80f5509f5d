"""What the browser tests share: whether Chromium is here, the waits, the pages and what each
shows when drawn, and the helpers that drive a page (settle, open, poll, press a slider, check
that no error is shown). The watching of Streamlit's script runs comes from bench/bench_pages.py,
the same code the page benchmark measures with."""

from __future__ import annotations

import os
import re
import time

import pytest

from bench.bench_pages import OBSERVER_JS, START_S, STARTED_AFTER_JS, moves_from, slider_thumb, slider_value
from bench.bench_pages import settle as bench_settle


def _browser_missing() -> str | None:
    if not os.access("/usr/bin/chromium", os.X_OK):
        return "no Chromium at /usr/bin/chromium (run scripts/install_browser.sh)"
    try:
        import playwright.sync_api  # noqa: F401
    except Exception as exc:
        return f"playwright is not importable ({type(exc).__name__}: {exc})"
    return None


BROWSER_MISSING = _browser_missing()  # why the browser tests cannot run here, or None
# a browser test module's marks: ``pytestmark = BROWSER``
BROWSER = [pytest.mark.browser, pytest.mark.skipif(BROWSER_MISSING is not None, reason=BROWSER_MISSING or "")]

WAIT_S = float(os.environ.get("RIMSCOPE_BROWSER_TIMEOUT_S", "180"))
WAIT_MS = int(WAIT_S * 1000)
SLOW_MS = 2 * WAIT_MS

# name -> (URL path Streamlit gives the st.Page file, sidebar label, heading shown by the page)
PAGES = {
    "overview": ("", "Overview", "RIMscope"),
    "train": ("train", "Train", "Train"),
    "models": ("models", "Models", "Models"),
    "mechanisms": ("mechanisms", "Mechanisms", "Mechanisms"),
    "robustness": ("robustness", "Robustness", "Robustness"),
    "compare": ("compare", "Compare", "Compare the methods"),
}
# text that appears once each page has drawn its main content (not just its title)
PAGE_READY_TEXT = {
    "overview": "Where to start",
    "train": "Your runs",
    "models": "Upload a model",
    "mechanisms": re.compile(r"^Inside .+, row by row$"),
    "robustness": "Error against noise strength",
    "compare": None,  # depends on the reproduction results present; the heading is enough
}
INSIDE = PAGE_READY_TEXT["mechanisms"]  # the per-row view under a prediction
PREDICTION = re.compile(r"\): \S.* \(\d+%\)")  # "RIM (paper's method) · Adam 4k · seed 0 (pretrained): 7 (10%) · ..."



# How long the page must stay unchanged after a script run to count as drawn: on a loaded 2-core
# machine Plotly figures and restored widgets can still be drawing 500 ms after the run, so 800 ms
# (about 40 s more per full run than 500). RIMSCOPE_TEST_SETTLE_MS overrides it.
SETTLE_QUIET_MS = int(os.environ.get("RIMSCOPE_TEST_SETTLE_MS", "800"))


def settle(page, timeout_s: float = WAIT_S, quiet_ms: int = SETTLE_QUIET_MS) -> bool:
    """Wait until the script run is over: Streamlit's ``data-test-script-state`` has stayed
    "notRunning" and the page's elements unchanged for ``quiet_ms`` (bench_pages' ``settle``,
    watched in the page, so the end of a run is seen within a frame). False if that did not
    happen within ``timeout_s``."""
    return bench_settle(page, timeout_s, quiet_ms / 1000)


def open_page(page, server: dict, name: str, timeout_ms: int = SLOW_MS) -> None:
    slug, _, heading = PAGES[name]
    page.goto(f"{server['url']}/{slug}", wait_until="commit", timeout=timeout_ms)
    page.locator("h1").filter(has_text=heading).first.wait_for(timeout=timeout_ms)


def assert_no_errors(page, where: str) -> None:
    """No exception box, no traceback text, no 'unexpected problem' message on the page."""
    exc = page.locator('[data-testid="stException"]')
    if exc.count():
        pytest.fail(f"{where}: exception shown on the page:\n" + "\n---\n".join(exc.all_inner_texts())
                    + "\n--- end of the server log ---\n" + _log_tail(page))
    tb = page.get_by_text("Traceback")
    if tb.count():
        pytest.fail(f"{where}: 'Traceback' shown on the page:\n" + "\n---\n".join(tb.all_inner_texts())
                    + "\n--- end of the server log ---\n" + _log_tail(page))
    alerts = page.locator('[data-testid="stAlert"]').all_inner_texts()
    bad = [a for a in alerts if "unexpected problem" in a]
    assert not bad, f"{where}: page reports an unexpected problem: {bad}"
    js = [e for e in page.rimscope_errors if "ResizeObserver" not in e]
    assert not js, f"{where}: uncaught JavaScript errors: {js}"


def _log_tail(page, chars: int = 4000) -> str:
    """The server log from its last traceback on (the page only says the error was redacted)."""
    try:
        text = page.rimscope_server["log"].read_text(errors="replace")
    except (AttributeError, KeyError, OSError):
        return "(no server log)"
    i = text.rfind("Traceback (most recent call last)")
    return text[i:][:chars] if i >= 0 else text[-chars:]


def full_screenshot(page, screenshot, name: str):
    """Streamlit scrolls inside <main>, so grow the viewport to the content before the shot."""
    vp = page.viewport_size or {"width": 1400, "height": 1000}
    try:
        height = page.evaluate(
            "() => { const m = document.querySelector('[data-testid=\"stMain\"]');"
            " return Math.max(m ? m.scrollHeight : 0, document.documentElement.scrollHeight); }")
        page.set_viewport_size({"width": vp["width"], "height": int(min(max(height, vp["height"]), 12_000))})
        poll(stable_box(page.locator('[data-testid="stMain"]')), 60, what="the relayout")  # charts are responsive
        settle(page, 60)
        return screenshot(page, name)
    finally:
        page.set_viewport_size(vp)


def stable_box(locator):
    """For ``poll``: a check that returns ``locator``'s bounding box once it is the same on two
    looks in a row (laid out, no longer moving), else None."""
    last = {}

    def check():
        box = locator.bounding_box()
        same = box is not None and box == last.get("box")
        last["box"] = box
        return box if same else None

    return check


def current_url(page) -> str:
    """The address bar's URL, read from the page. Not ``page.url``: Playwright's sync API updates
    that only while it handles a call, so a loop of ``page.url`` and sleeps can wait forever on a
    URL the page changed (``history.replaceState``) after the last call."""
    return page.evaluate("() => location.href")


def poll(fn, timeout_s: float, every: float = 0.25, what: str = "condition"):
    """Call ``fn`` until it returns something truthy; fail with ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
        except Exception as exc:  # elements replaced by a rerun: try again
            last = exc
        else:
            if last:
                return last
        time.sleep(every)
    pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what} (last: {last!r})")


BACK = {"ArrowRight": "ArrowLeft", "ArrowLeft": "ArrowRight", "ArrowUp": "ArrowDown", "ArrowDown": "ArrowUp"}


def _run_started(page, t0: float, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if page.evaluate(STARTED_AFTER_JS, t0):
            return True
        time.sleep(0.1)
    return False


def press_slider(page, label: str, key: str, times: int = 1, tries: int = 3) -> None:
    """Press ``key`` on slider ``label`` ``times`` times, one rerun at a time, each press confirmed
    by the slider's value (``bench.bench_pages.moves_from``, 15 s): a press that reached nothing (a
    rerun re-rendered the slider between its focus and the key) is made again, up to ``tries``
    times, as a user would. A press that moved the slider but started no script run within
    ``START_S`` (its value never reached the server) is followed by one nudge back and forth, so
    the slider ends where it should and the server hears of it."""
    def value():
        return slider_value(slider_thumb(page, label))

    for n in range(times):
        settle(page)
        before = poll(value, WAIT_S, what=f"slider {label!r}")
        for _ in range(tries):
            page.evaluate(OBSERVER_JS)
            t0 = page.evaluate("() => performance.now()")
            slider_thumb(page, label).focus()
            page.keyboard.press(key)
            if moves_from(value, before, 15):
                break
            settle(page)
        else:
            pytest.fail(f"{tries} {key} presses on slider {label!r} did not move it (press {n + 1} of {times})")
        if not _run_started(page, t0, START_S):
            print(f"slider {label!r}: press {n + 1} moved it but started no script run in {START_S:.0f} s: nudged")
            for k in (BACK[key], key):
                settle(page)
                slider_thumb(page, label).focus()
                page.keyboard.press(k)
    settle(page)


def choose_option(page, label: str, option: str | re.Pattern[str]) -> None:
    """Pick ``option`` (exact text, or a pattern) in a selectbox or multiselect. The list is opened
    again when a click did not open it (the first click after another widget's can be taken as
    focus only) or a rerun closed it before the option was clicked."""
    settle(page)
    exact = isinstance(option, str)
    for attempt in range(5):
        page.get_by_role("combobox", name=label).click()
        try:
            page.get_by_role("option").first.wait_for(timeout=5_000)
            page.get_by_role("option", name=option, exact=exact).first.click(timeout=WAIT_MS // 6)
            return
        except Exception:
            if attempt == 4:
                raise
            page.keyboard.press("Escape")
            settle(page)


def choose_input(page, label: str) -> None:
    page.locator('[data-testid="stRadio"]').filter(has_text="Input").first.get_by_text(label, exact=True).click()


def drawing_canvas(page):
    """The drawing surface of streamlit-drawable-canvas: in an iframe (v1 component) or in the
    page's (shadow) DOM (bidirectional component, as in streamlit-drawable-canvas 0.13)."""
    frames = page.locator("iframe[title*='canvas' i]")
    if frames.count():
        return page.frame_locator("iframe[title*='canvas' i]").first.locator("canvas.upper-canvas, canvas").last
    return page.locator("canvas.upper-canvas").first


SEVEN = [(50, 50), (230, 50), (200, 110), (165, 175), (135, 245)]  # a "7" on the 280 x 280 canvas


def draw_on_canvas(page, stroke=SEVEN) -> dict:
    """Draw one mouse stroke through ``stroke`` (canvas pixels, 280 x 280) on the Draw canvas, laid
    out and scrolled into view first; returns the canvas' box."""
    canvas = drawing_canvas(page)
    canvas.wait_for(timeout=WAIT_MS)
    canvas.scroll_into_view_if_needed()
    box = poll(stable_box(canvas), WAIT_S, what="the canvas to be laid out")
    assert box and box["width"] > 100 and box["height"] > 100, f"canvas box {box}"
    sx, sy = box["width"] / 280, box["height"] / 280
    page.mouse.move(box["x"] + stroke[0][0] * sx, box["y"] + stroke[0][1] * sy)
    page.mouse.down()
    for x, y in stroke[1:]:
        page.mouse.move(box["x"] + x * sx, box["y"] + y * sy, steps=10)
    page.mouse.up()
    return box


def fill_inputs(page, values, each=None) -> None:
    """Type each (label, value) into the input of that label and wait until it holds it; ``each``
    (e.g. ``settle``) runs after every field."""
    for label, value in values:
        box = page.get_by_label(label, exact=True)
        box.fill(value)
        box.press("Enter")
        poll(lambda b=box, v=value: b.input_value() == v, WAIT_S, what=f"{label} = {value}")
        if each:
            each(page)


def run_bench(module: str, *args: str) -> str:
    """``python -m <module> args`` in its own process (Playwright's sync API cannot start twice in
    one process, and the session's browser fixture may already hold it); the bundled samples, as
    on a fresh machine, with short settle waits. Returns what it printed; fails with its output when it fails."""
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k != "RIMSCOPE_DATA_DIR"}
    env["RIMSCOPE_BENCH_SETTLE_S"] = "0.3"  # short waits between actions: this checks the bench, not the times
    env["RIMSCOPE_BENCH_CHANGE_QUIET_S"] = "0.3"  # ... and a shorter stillness that ends a measurement
    proc = subprocess.run([sys.executable, "-m", module, *args], cwd=Path(__file__).resolve().parents[2], env=env, capture_output=True,
                          text=True, timeout=1200)
    assert proc.returncode == 0, f"{module} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout
