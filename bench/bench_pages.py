"""Interaction latency of the dashboard, measured in a real browser.

Run from the repository root (needs Chromium and Playwright: ``scripts/install_browser.sh``)::

    .venv/bin/python -m bench.bench_pages                # about 5-10 min on 2 cores
    .venv/bin/python -m bench.bench_pages --reps 5 --gc on off
    .venv/bin/python -m bench.bench_pages --sections slow --reps 3 --gc off --out bench/results/pages_slow.json

It starts ``python app.py`` (as ``make app`` does) on a free local port (offline, an empty run store, the
shipped pretrained models, the bundled MNIST sample unless ``RIMSCOPE_DATA_DIR`` is set) and
drives headless Chromium through the interactions users repeat:

* **timestep step**: press "▶" (next row) on the Mechanisms page;
* **noise slider**: move the Gaussian-variance slider on the Robustness page one notch to a
  variance not seen before (every method re-scored on the test subset: "cold") and back to
  one already seen ("cached");
* **new drawing**: add a stroke to the digit on the Mechanisms canvas;
* **intervene**: take one LSTM out on Mechanisms' Intervene tab (a toggle), until the new
  prediction and mask are drawn;
* **explore** (Mechanisms): the first render of the page with its "Find the same
  mechanisms elsewhere" view (a fresh session; the first one also traces the searched set),
  a step of the block's first row and of the match threshold, opening a match as the current
  input, picking a second model ("Compare with"), the first render of "What each LSTM is for",
  a step of its noise level (a level not seen before: the set traced again under noise);
* **slow** (the interactions a newcomer found slow): another noise kind and the protocol switch
  on Robustness, Fashion-MNIST there, "Make PNG" under its error curve (until "⬇ PNG" is
  there), Mechanisms' "Find the same mechanisms elsewhere" and "Across the test set"; each in a
  fresh session, after the server's warm-up had ``RIMSCOPE_BENCH_WARM_WAIT_S`` (180) seconds.

Latency = from the input event to the page's last change it causes (the script run over and
everything it drew: no element still a loading skeleton, every plotly chart's SVG there and
every image decoded, the page then unchanged for ``RIMSCOPE_BENCH_CHANGE_QUIET_S``, 0.75 s), taken
from the page itself: MutationObservers time-stamp every change of Streamlit's
``data-test-script-state`` attribute and of the app's DOM, so the Python side's polling adds
nothing; the end of the script run is kept beside it (``script_end_s``). Each setting of ``--gc`` is a separate
server: ``on`` is Streamlit's default (a full ``gc.collect(2)`` after every script run),
``off`` is this app's ``.streamlit/config.toml`` (``runner.postScriptGC = false``). Medians,
ratios (on / off) and every sample go to ``bench/results/pages.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

from core.catalog import DEFAULT_PROTOCOL
from core.report.fmt import PROTOCOL_SWITCH_TITLES

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "bench" / "results" / "pages.json"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
WAIT_MS = 300_000

# records (time, state) of every script-state change; performance.now() is in ms
OBSERVER_JS = """() => {
  if (window.__rs) return;
  window.__rs = [];
  const app = document.querySelector('[data-testid="stApp"]');
  const log = () => window.__rs.push([performance.now(), app.getAttribute('data-test-script-state')]);
  new MutationObserver(log).observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
  log();
}"""
# the first completed run that started after t0: [start, end] in ms, or null
RUN_AFTER_JS = """(t0) => {
  const s = window.__rs; let start = null;
  for (const [t, st] of s) {
    if (t < t0) continue;
    if (st === 'running' && start === null) start = t;
    if (st === 'notRunning' && start !== null) return [start, t];
  }
  return null;
}"""
# no script run in progress
IDLE_JS = """() => { const a = document.querySelector('[data-testid="stApp"]');
  return a !== null && a.getAttribute('data-test-script-state') !== 'running'; }"""
# whether a script run started after t0
STARTED_AFTER_JS = "(t0) => window.__rs.some(([t, st]) => t >= t0 && st === 'running')"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(gc_on: bool, home: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMLIT_")}
    env.update({"RIMSCOPE_HOME": str(home), "RIMSCOPE_OFFLINE": "1", "PYTHONUNBUFFERED": "1"})
    if "RIMSCOPE_DATA_DIR" not in os.environ:
        (home / "data").mkdir(exist_ok=True)
        env["RIMSCOPE_DATA_DIR"] = str(home / "data")  # empty: the bundled samples
    cmd = [sys.executable, "app.py", "--server.port", str(port),  # as `make app` starts it
           "--server.headless", "true", "--server.address", "127.0.0.1",
           "--runner.postScriptGC", "true" if gc_on else "false"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=open(home / "server.log", "wb"),
                            stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=5) as r:
                if r.read().strip() == b"ok":
                    return proc, url
        except OSError:
            time.sleep(1)
    proc.kill()
    raise RuntimeError("streamlit did not start; log: " + (home / "server.log").read_text()[-2000:])


def require_chromium() -> None:
    if not os.access(CHROMIUM, os.X_OK):
        sys.exit(f"no Chromium at {CHROMIUM}: run scripts/install_browser.sh")


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()


def machine() -> dict:
    """What the figures were measured on, with the load average at the start (the machine may be shared)."""
    return {"cores": os.cpu_count(), "platform": platform.platform(),
            "date": datetime.now(UTC).isoformat(timespec="seconds"), "load_average_start": list(os.getloadavg())}


def write_result(result: dict, out: Path) -> None:
    result["machine"]["load_average_end"] = list(os.getloadavg())
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"wrote {out}")


def open_browser(p, timeout_ms: int = WAIT_MS):
    """``(browser, page)``: headless Chromium with one 1400x1000 page (``p``: sync_playwright())."""
    browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    page.set_default_timeout(timeout_ms)
    return browser, page


# how long the page must stay without a script run to count as settled before the next action
# (seconds; the smoke tests set RIMSCOPE_BENCH_SETTLE_S lower: they check the bench, not the times)
SETTLE_S = float(os.environ.get("RIMSCOPE_BENCH_SETTLE_S", "1.0"))
# in the page: whether Streamlit's script state has been "notRunning" for ``quiet`` ms and the page
# has not changed meanwhile (no element added, removed or re-texted: figures drawn after the run
# ends move what is below them). A MutationObserver per document keeps the time of the last change.
QUIET_JS = """(quiet) => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app) return false;
  if (window.__rsApp !== app) {
    window.__rsApp = app;
    window.__rsLast = performance.now();
    const seen = () => { window.__rsLast = performance.now(); };
    new MutationObserver(seen).observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
    new MutationObserver(seen).observe(app, {childList: true, subtree: true, characterData: true});
  }
  return app.getAttribute('data-test-script-state') === 'notRunning' && performance.now() - window.__rsLast >= quiet;
}"""


def settle(page, timeout_s: float = 300, quiet_s: float | None = None) -> bool:
    """Wait until the page has been without a script run for ``quiet_s`` (default ``SETTLE_S``),
    watched in the page itself; False when that did not happen within ``timeout_s``."""
    quiet_ms = 1000 * (SETTLE_S if quiet_s is None else quiet_s)
    deadline = time.monotonic() + timeout_s
    while (left_ms := (deadline - time.monotonic()) * 1000) > 0:
        try:
            page.wait_for_function(QUIET_JS, arg=quiet_ms, polling=50, timeout=left_ms)
            return True
        except Exception as exc:  # noqa: BLE001 - a navigation replaced the document: watch the new one
            if "Timeout" in type(exc).__name__:
                return False
            time.sleep(0.05)
    return False


SCRIPT_RUNS: list[float] = []  # the last measurement's running -> notRunning span, per call of timed()
SCRIPT_ENDS: list[float] = []  # the same measurement's input event -> end of the script run (s)

# every change of the app's DOM (an element added, removed, re-texted or re-attributed) stamps
# window.__ch: what a person sees change, figures drawn after the script run included
CHANGE_JS = """() => { const app = document.querySelector('[data-testid="stApp"]');
  if (!app || window.__chApp === app) return; window.__chApp = app; window.__ch = performance.now();
  new MutationObserver(() => { window.__ch = performance.now(); })
    .observe(app, {childList: true, subtree: true, characterData: true, attributes: true}); }"""
CHANGE_QUIET_S = float(os.environ.get("RIMSCOPE_BENCH_CHANGE_QUIET_S", "0.75"))  # unchanged this long: done
CHANGE_WAIT_S = 15.0  # a page that never stays unchanged this long is measured to its script end
UNTIL_LAST_CHANGE = True  # timed() ends at the page's last change; False: at the end of the script run (bench_load)


# whether everything the page draws after its elements arrive is drawn: no element still shows
# Streamlit's loading skeleton (a chart's module is fetched when its element arrives, and the
# element is a skeleton until then), every plotly chart has its SVG (plotly.js is evaluated and
# draws after the script run; a long task of the browser's main thread can look like stillness
# from outside) and every image is decoded
DRAWN_JS = """() => { const app = document.querySelector('[data-testid="stApp"]'); if (!app) return false;
  if (app.querySelector('[data-testid="stSkeleton"]')) return false;
  for (const c of app.querySelectorAll('[data-testid="stPlotlyChart"]')) if (!c.querySelector('.main-svg')) return false;
  for (const i of app.querySelectorAll('img')) if (!i.complete) return false;
  return true; }"""
CHANGE_STATE_JS = f"() => [window.__ch || 0, performance.now(), ({DRAWN_JS})()]"


def last_change(page, t0_ms: float, after_ms: float) -> float:
    """Milliseconds (page clock) of the page's last change at or after ``after_ms`` once every chart
    and image is drawn (``DRAWN_JS``) and the page has stayed unchanged for ``CHANGE_QUIET_S``;
    the last change seen when that does not happen within ``CHANGE_WAIT_S`` (a page that redraws
    by itself), ``after_ms`` when nothing changed after it."""
    deadline = time.monotonic() + CHANGE_WAIT_S
    ch = after_ms
    while time.monotonic() < deadline:
        ch, now, drawn = page.evaluate(CHANGE_STATE_JS)
        if drawn and now - max(ch, after_ms) >= CHANGE_QUIET_S * 1000:
            return max(ch, after_ms)
        time.sleep(0.05)
    return max(ch, after_ms)


def log(msg: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class LostInput(RuntimeError):
    """The input event reached nothing (the focused element was re-rendered away first): no script run will come."""


def timed(page, action, done_js: str | None = None, arg=None, timeout_s: float = 120, prepare=None,
          confirm=None, start_within_s: float | None = None) -> float:
    """Seconds from just before ``action()`` to the end of the script run it started.

    ``action`` should be the input event itself (a dispatched click, a key press, the mouse
    release that ends a stroke); what leads up to it goes in ``prepare``, run before the clock.

    With ``done_js`` (a predicate on the page, given ``arg``) the end is the first animation
    frame in which it holds instead: a very short fragment rerun can flip the script state
    to running and back within one render, so no state change is seen at all.

    ``confirm()``, called after the action, says whether the action took effect (False:
    ``LostInput``, so the caller can act again rather than wait for a run that never comes).
    With ``start_within_s``, an action that starts no script run within that many seconds is
    ``LostInput`` too (seen under load: a slider moved by its key, its value never sent).
    """
    page.evaluate(OBSERVER_JS)
    page.evaluate(CHANGE_JS)
    if prepare is not None:
        prepare()
    t0 = page.evaluate("() => performance.now()")
    action()
    if confirm is not None and not confirm():
        raise LostInput("the action had no effect on the page")
    if done_js is not None:
        page.wait_for_function(f"(a) => {{ if (({done_js})(a)) {{ window.__done = performance.now(); return true; }}"
                               " return false; }", arg=arg, polling="raf", timeout=timeout_s * 1000)
        end = page.evaluate("() => window.__done")
        run = page.evaluate(RUN_AFTER_JS, t0)
        SCRIPT_RUNS.append((run[1] - run[0]) / 1000.0 if run else math.nan)
        SCRIPT_ENDS.append((end - t0) / 1000.0)
        return ((last_change(page, t0, end) if UNTIL_LAST_CHANGE else end) - t0) / 1000.0
    acted = time.monotonic()
    deadline = acted + timeout_s
    started = start_within_s is None
    while time.monotonic() < deadline:
        run = page.evaluate(RUN_AFTER_JS, t0)
        if run:
            SCRIPT_RUNS.append((run[1] - run[0]) / 1000.0)
            SCRIPT_ENDS.append((run[1] - t0) / 1000.0)
            return ((last_change(page, t0, run[1]) if UNTIL_LAST_CHANGE else run[1]) - t0) / 1000.0
        if not started:
            started = page.evaluate(STARTED_AFTER_JS, t0)
            if not started and time.monotonic() - acted > start_within_s:
                raise LostInput(f"the action started no script run within {start_within_s:.0f} s")
        time.sleep(0.05)
    raise TimeoutError(f"no script run finished within {timeout_s:.0f} s of the action (t0 {t0:.0f} ms; "
                       f"state changes: {page.evaluate('() => window.__rs.slice(-8)')})")


# the Mechanisms page's "Step t of T" line (bold), as [t, T]
STEP_JS = """() => { for (const e of document.querySelectorAll('strong')) {
  const m = /^Step (\\d+) of (\\d+)$/.exec(e.textContent.trim()); if (m) return [+m[1], +m[2]]; }
  return null; }"""
STEP_IS_JS = f"(want) => {{ const s = ({STEP_JS})(); return s !== null && s[0] === want; }}"


def bench_timestep(page, url: str, reps: int) -> list[float]:
    log("Mechanisms: timestep steps")
    page.goto(url + "/mechanisms", wait_until="commit", timeout=WAIT_MS)
    page.get_by_text("row by row").first.wait_for(timeout=WAIT_MS)
    settle(page)
    nxt = page.get_by_role("button", name="▶", exact=True)
    out = []
    for i in range(reps + 2):  # two warm-up steps: the first ones build the cached figure
        settle(page, 60)
        t, T = page.evaluate(STEP_JS)
        took = timed(page, lambda: nxt.dispatch_event("click"), STEP_IS_JS, t % T + 1)
        if i >= 2:
            out.append(took)
    return out


def bench_noise(page, url: str, reps: int) -> tuple[list[float], list[float]]:
    log("Robustness: noise slider (the first load scores the whole error curve)")
    page.goto(url + "/robustness", wait_until="commit", timeout=WAIT_MS)
    page.get_by_text("Error against noise strength").first.wait_for(timeout=WAIT_MS)
    settle(page)
    thumb = slider_thumb(page, "Gaussian noise")
    cold, cached = [], []
    for _ in range(reps):  # right: a variance not scored yet; left, right: both cached
        cold.append(timed_key(page, thumb, "ArrowRight"))
        settle(page, 60)
        cached.append(timed_key(page, thumb, "ArrowLeft"))
        settle(page, 60)
        cached.append(timed_key(page, thumb, "ArrowRight"))
        settle(page, 60)
    return cold, cached


def bench_drawing(page, url: str, reps: int) -> list[float]:
    log("Mechanisms: new strokes on the canvas")
    page.goto(url + "/mechanisms", wait_until="commit", timeout=WAIT_MS)
    page.get_by_text("row by row").first.wait_for(timeout=WAIT_MS)
    settle(page)
    page.locator('[data-testid="stRadio"]').filter(has_text="Input").first.get_by_text("Draw", exact=True).click()
    page.get_by_text("The canvas is empty").wait_for(timeout=WAIT_MS)
    settle(page)
    frames = page.locator("iframe[title*='canvas' i]")
    canvas = (page.frame_locator("iframe[title*='canvas' i]").first.locator("canvas").last if frames.count()
              else page.locator("canvas.upper-canvas").first)
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    s = box["width"] / 280

    def stroke(i: int):
        y = 40 + (i % 8) * 28

        def draw():
            page.mouse.move(box["x"] + 60 * s, box["y"] + y * s)
            page.mouse.down()
            page.mouse.move(box["x"] + 220 * s, box["y"] + (y + 10) * s, steps=8)

        return {"prepare": draw, "action": page.mouse.up}

    timed(page, **stroke(0))  # the first drawing: models' first prediction on it
    settle(page)
    out = []
    for i in range(1, reps + 1):
        out.append(timed(page, **stroke(i)))
        settle(page, 60)
    return out


# the Intervene tab's prediction line ("**Prediction**: original ... → after the intervention ...")
PREDICTION_JS = """() => { for (const e of document.querySelectorAll('[data-testid="stMarkdownContainer"]')) {
  const t = e.textContent; if (t.startsWith('Prediction: original')) return t; } return null; }"""


def bench_intervene(page, url: str, reps: int) -> list[float]:
    """Mechanisms' Intervene tab: take one LSTM out (the "removed" knock-out, a toggle) and wait for
    the new prediction; between samples it is put back (not timed). A new LSTM each time, so each
    sample runs the model on the intervention afresh."""
    log("Mechanisms, Intervene: one LSTM taken out")
    page.goto(url + "/mechanisms?mech_more=Intervene", wait_until="commit", timeout=WAIT_MS)
    page.get_by_text("Take out (for the whole input)").first.wait_for(timeout=WAIT_MS)
    settle(page)
    out = []
    for i in range(reps + 1):  # the first sample: the tab's first intervention, not kept
        toggle = page.locator(f".st-key-iv_ko_{i % 6 + 1} label").first
        toggle.scroll_into_view_if_needed()
        before = page.evaluate(PREDICTION_JS)
        took = timed(page, toggle.click, confirm=lambda b=before: _changes(page, b))
        if i:
            out.append(took)
        settle(page, 60)
        after = page.evaluate(PREDICTION_JS)
        toggle.click()  # back to the model as trained (not timed)
        _changes(page, after)
        settle(page, 60)
    return out


def _changes(page, before: str | None, within_s: float = 30.0) -> bool:
    """Whether the Intervene tab's prediction line changes from ``before`` within ``within_s``."""
    return moves_from(lambda: page.evaluate(PREDICTION_JS), before, within_s)


MATCH_JS = """() => [...document.querySelectorAll('[data-testid="stMarkdownContainer"]')]
  .some(e => / images match rows /.test(e.textContent))"""


def slider_thumb(page, label: str):
    """The focusable part of slider ``label`` (its thumb, or Streamlit's hidden range input)."""
    return page.locator('[data-testid="stSlider"]').filter(has_text=label).first \
        .locator('[role="slider"], input[type="range"]').first


def slider_value(slider) -> str | None:
    """The slider's value as the page shows it (``aria-valuenow``, else the range input's value);
    None while it is being re-rendered."""
    try:
        return slider.get_attribute("aria-valuenow", timeout=5_000) or slider.input_value(timeout=5_000)
    except Exception:  # noqa: BLE001 - re-rendered while read: no value this instant
        return None


def moves_from(read, before: str | None, within_s: float) -> bool:
    """Whether ``read()`` gives a value other than ``before`` within ``within_s`` seconds: a key
    press on a slider moves its value as it lands, before any script run (so a press that reached
    nothing shows as no move)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        now = read()
        if now is not None and now != before:
            return True
        time.sleep(0.05)
    return False


CONFIRM_S = 5.0  # how long a key press has to move its slider before it counts as lost
START_S = 60.0  # how long a slider moved by its key has to start a script run before the press counts as lost


def _timed_key_once(page, slider, key: str, timeout_s: float, turn_at_ends: bool) -> float:
    chosen, before = [key], [None]

    def prepare():
        slider.focus()
        now, lo, hi = (slider.get_attribute(a) for a in ("aria-valuenow", "aria-valuemin", "aria-valuemax"))
        before[0] = now
        if turn_at_ends and None not in (now, lo, hi):
            if chosen[0] == "ArrowRight" and float(now) >= float(hi):
                chosen[0] = "ArrowLeft"
            elif chosen[0] == "ArrowLeft" and float(now) <= float(lo):
                chosen[0] = "ArrowRight"

    def confirm():
        if before[0] is None:  # a slider without aria-valuenow: nothing to confirm by
            return True
        return moves_from(lambda: slider_value(slider), before[0], CONFIRM_S)

    return timed(page, lambda: page.keyboard.press(chosen[0]), timeout_s=timeout_s, prepare=prepare, confirm=confirm,
                 start_within_s=min(START_S, timeout_s))


def timed_key(page, slider, key: str, timeout_s: float = 120, tries: int = 3, turn_at_ends: bool = False) -> float:
    """``timed()`` of one key press on a slider (a locator), the press confirmed by the slider's value.

    On a loaded machine a rerun can re-render the slider between its focus and the press, so the
    press reaches nothing and no script run follows (value unchanged after ``CONFIRM_S``), or the
    slider moves but its new value never reaches the server (no script run starts within
    ``START_S``): such a press is made again, up to ``tries`` times, each with its own clock, and
    said in the log. With ``turn_at_ends`` a key that would not move the slider (at that end) is
    turned around, since it would start no run either."""
    for attempt in range(1, tries + 1):
        try:
            return _timed_key_once(page, slider, key, timeout_s, turn_at_ends)
        except LostInput as exc:
            log(f"  a key press was lost ({exc}; try {attempt} of {tries}): pressed again")
            settle(page, 60)
    raise LostInput(f"{tries} {key} presses in a row were lost (no move, or no script run)")


def _key_steps(page, label: str, keys: list[str]) -> list[float]:
    """One timed key press on the slider per key, turned around at the slider's ends."""
    out = []
    for key in keys:
        settle(page, 60)
        out.append(timed_key(page, slider_thumb(page, label), key, turn_at_ends=True))
    return out


def bench_explore(page, url: str, reps: int) -> dict[str, list[float]]:
    """The set-wide and two-model views of Mechanisms (first renders, then interactions)."""
    log("Mechanisms: find the same mechanisms, each LSTM, compare with")
    out: dict[str, list[float]] = {"explore_first_render": [], "explore_block_row": [], "explore_threshold": [],
                                   "explore_open_match": [], "explore_compare_with": [],
                                   "explore_units_first_render": [], "explore_unit_noise_cold": []}
    for i in range(reps + 1):  # a fresh session each time; the first also traces the set (cold)
        t0 = time.monotonic()
        page.goto(url + "/mechanisms?mech_more=Find+the+same+mechanisms+elsewhere", wait_until="commit",
                  timeout=WAIT_MS)
        page.wait_for_function(MATCH_JS, polling="raf", timeout=WAIT_MS)
        took = time.monotonic() - t0
        out["explore_first_render"].append(took)
        if i == 0:
            log(f"  first session (cold caches): {took:.1f} s")
        settle(page)
    out["explore_first_render"] = out["explore_first_render"][1:]
    out["explore_block_row"] = _key_steps(page, "First row", ["ArrowLeft", "ArrowRight"] * ((reps + 1) // 2))[:reps]
    out["explore_threshold"] = _key_steps(page, "Threshold", ["ArrowRight", "ArrowLeft"] * ((reps + 1) // 2))[:reps]
    for _ in range(reps):
        settle(page, 60)
        btn = page.locator('[class*="st-key-mech_match_"]').get_by_role("button", name="Open").first
        out["explore_open_match"].append(timed(page, lambda b=btn: b.dispatch_event("click")))
    box = page.locator('[data-testid="stSelectbox"]').filter(has_text="Compare with").first
    options = page.locator('[role="option"]')
    for i in range(reps):
        settle(page, 60)
        deadline = time.monotonic() + WAIT_MS / 1000
        while not options.first.is_visible():  # a late rerun may close the list: open it again
            if time.monotonic() > deadline:
                raise TimeoutError("the options of 'Compare with' never opened")
            box.get_by_role("button", name="Open").click()
            try:
                options.first.wait_for(timeout=10_000)
            except Exception:  # noqa: BLE001 - closed again by a rerun; retry until the deadline
                settle(page, 60)
        pick = options.nth(1 + i % max(1, options.count() - 1))  # 0 is "no second model"
        out["explore_compare_with"].append(timed(page, lambda p=pick: p.click()))
    settle(page, 60)
    tab = page.get_by_role("tab", name="What each LSTM is for")
    out["explore_units_first_render"].append(timed(page, lambda: tab.dispatch_event("click")))
    out["explore_unit_noise_cold"] = _key_steps(page, "Gaussian noise variance", ["ArrowRight"] * reps)
    return out


def _pick_option(page, key: str, option: str) -> float:
    """``timed()`` choice of ``option`` in selectbox ``key``: the list is opened before the clock
    (again if a late rerun closed it) and the clock starts when no script run is in progress, so
    the click cannot fold into a run that started before it (seen on a loaded machine)."""
    box = page.locator(f".st-key-{key}").first
    opt = page.get_by_role("option", name=option, exact=True)

    def open_list() -> None:
        for _ in range(5):
            settle(page, 60)
            if not opt.is_visible():
                box.get_by_role("combobox").click()
            try:
                opt.wait_for(timeout=10_000)
                page.wait_for_function(IDLE_JS, timeout=WAIT_MS)
                if opt.is_visible():
                    return
            except Exception:  # noqa: BLE001 - closed by a late rerun: open it again
                pass
            page.keyboard.press("Escape")
        raise TimeoutError(f"the options of {key} never stayed open")

    return timed(page, lambda: opt.click(), prepare=open_list)


PNG_MAKE = "rb_dl_curve"  # the Robustness page's error curve: its "Make PNG" and "⬇ PNG" keys start with this
PNG_READY_JS = f"() => document.querySelector('.st-key-{PNG_MAKE}_png button') !== null"
KINDS = ("Salt & pepper", "Speckle", "Poisson")


def _make_png(page, view: tuple, rendered: set, out: list) -> None:
    """Click "Make PNG" under the error curve and stop the clock when "⬇ PNG" is there, once per
    ``view`` (data set, noise kind): PNGs are cached per figure for the whole server, so a view
    seen before would time the cache. Poisson noise has no strength, hence no curve: no sample."""
    settle(page)
    make = page.locator(f".st-key-{PNG_MAKE}_png_make button").first
    if view in rendered or not make.count():
        return
    log(f"  Make PNG ({', '.join(view)})")
    rendered.add(view)
    out.append(timed(page, lambda: make.dispatch_event("click"), PNG_READY_JS))


def bench_slow(page, url: str, reps: int) -> dict[str, list[float]]:
    """The interactions a newcomer found slow: another noise kind, the protocol switch, another
    data set on Robustness, "Make PNG" under its error curve, Mechanisms' "Find the same mechanisms
    elsewhere" and "Across the test set" tabs.
    The server's warm-up gets ``SLOW_WARM_WAIT_S`` after the first page (it fills the caches
    these read, and opens the PNG renderer's browser).

    "Make PNG" is timed on each (data set, noise kind) curve the first time the bench meets it
    (``_make_png``): with three kinds (Poisson has no curve) up to four samples in all."""
    log(f"Slow list: first page, then {SLOW_WARM_WAIT_S:.0f} s for the warm-up")
    out: dict[str, list[float]] = {"noise_kind": [], "protocol_switch": [], "robustness_fashion_mnist": [],
                                   "make_png": [], "find_the_same_mechanisms": [], "across_the_test_set": []}
    page.goto(url + "/robustness", wait_until="commit", timeout=WAIT_MS)
    page.get_by_text("Error against noise strength").first.wait_for(timeout=WAIT_MS)
    time.sleep(SLOW_WARM_WAIT_S)
    rendered: set = set()  # (data set, kind) views whose PNG is made
    for i in range(reps):  # a fresh session each rep: what a newcomer meets
        if i:
            log("  " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in out.items() if v))
        log(f"  rep {i + 1} of {reps}")
        page.goto(url + "/robustness", wait_until="commit", timeout=WAIT_MS)
        page.get_by_text("Error against noise strength").first.wait_for(timeout=WAIT_MS)
        settle(page)
        kind = KINDS[i % len(KINDS)]
        out["noise_kind"].append(_pick_option(page, "rb_kind", kind))
        _make_png(page, ("MNIST", kind), rendered, out["make_png"])
        settle(page)
        log("  protocol switch")
        radio = page.locator('[data-testid="stSidebar"]').get_by_text(PROTOCOL_SWITCH_TITLES["paper"])
        out["protocol_switch"].append(timed(page, lambda r=radio: r.click()))
        settle(page)
        # back to the default protocol (the shipped default models), as before the switch
        page.locator('[data-testid="stSidebar"]').get_by_text(PROTOCOL_SWITCH_TITLES[DEFAULT_PROTOCOL]).click()
        settle(page)
        log("  Fashion-MNIST")
        out["robustness_fashion_mnist"].append(_pick_option(page, "rb_dataset", "Fashion-MNIST"))
        _make_png(page, ("Fashion-MNIST", kind), rendered, out["make_png"])
        settle(page)
        page.goto(url + "/mechanisms", wait_until="commit", timeout=WAIT_MS)
        page.get_by_text("row by row").first.wait_for(timeout=WAIT_MS)
        settle(page)
        tab = page.get_by_role("tab", name="Find the same mechanisms elsewhere")
        out["find_the_same_mechanisms"].append(timed(page, lambda t=tab: t.dispatch_event("click")))
        settle(page)
        tab = page.get_by_role("tab", name="Across the test set")
        out["across_the_test_set"].append(timed(page, lambda t=tab: t.dispatch_event("click")))
    return out


def _summary(samples: list[float], spans: list[float], ends: list[float] | None = None) -> dict:
    """``samples``: input event -> the page's last change (the script run over and everything it
    drew); ``spans``: the same runs' running -> notRunning (the server's script run as the page
    sees it); ``ends``: input event -> end of the script run."""
    spans_seen = [x for x in spans if not math.isnan(x)]
    ends = ends or []
    return {"median_s": statistics.median(samples), "min_s": min(samples), "max_s": max(samples),
            "n": len(samples), "script_median_s": statistics.median(spans_seen) if spans_seen else math.nan,
            "script_end_median_s": statistics.median(ends) if ends else math.nan,
            "samples_s": [round(x, 4) for x in samples], "script_s": [round(x, 4) for x in spans],
            "script_end_s": [round(x, 4) for x in ends]}


def _measured(fn, *args):
    """Run a bench function; pair its samples with the script spans and ends recorded meanwhile."""
    start, start_end = len(SCRIPT_RUNS), len(SCRIPT_ENDS)
    out = fn(*args)
    return out, SCRIPT_RUNS[start:], SCRIPT_ENDS[start_end:]


SECTIONS = ("timestep", "noise", "drawing", "intervene", "explore", "slow")
SLOW_WARM_WAIT_S = float(os.environ.get("RIMSCOPE_BENCH_WARM_WAIT_S", "180"))  # the warm-up's time after the first page


def cpu_profile(reps: int, data_dir: str | None = None) -> dict:
    """CPU seconds of the Mechanisms script per view and interaction (Streamlit's AppTest, no
    browser, shipped models): ``time.process_time`` around each run, so a busy machine changes
    it far less than wall time. Cold = the first run in this process (empty caches)."""
    from streamlit.testing.v1 import AppTest

    if data_dir:
        os.environ["RIMSCOPE_DATA_DIR"] = data_dir
    page = str(REPO / "pages" / "mechanisms.py")

    def cpu(fn) -> float:
        t0 = time.process_time()
        fn()
        return time.process_time() - t0

    def fresh(**state) -> AppTest:
        at = AppTest.from_file(page, default_timeout=600)
        for k, v in state.items():
            at.session_state[k] = v
        return at

    out: dict[str, list[float]] = {}
    find = "Find the same mechanisms elsewhere"
    at = fresh(mech_idx=3, mech_more=find)
    out["first_render_cold"] = [cpu(at.run)]
    out["first_render_warm"] = [cpu((a := fresh(mech_idx=3 + i, mech_more=find)).run) for i in range(reps)]
    for name, widget, key, values in (("block_row", "slider", "mech_blk_t1", [10, 11]),
                                      ("threshold", "slider", "mech_blk_thr", [4, 3]),
                                      ("units", "multiselect", "mech_blk_units", [["LSTM 1", "LSTM 2"], ["LSTM 3"]]),
                                      ("timestep", "slider", "mech_t", [5, 6])):
        out[name] = [cpu(getattr(a, widget)(key=key).set_value(values[i % 2]).run) for i in range(reps)]
    out["open_match"] = [cpu(next(b for b in a.button if b.key.startswith("mech_match_")).click().run)
                         for _ in range(reps)]
    others = a.selectbox(key="mech_with_mnist").options[1:]
    out["compare_with"] = [cpu(a.selectbox(key="mech_with_mnist").set_value(others[i % len(others)]).run)
                           for i in range(reps)]
    a.selectbox(key="mech_with_mnist").set_value("").run()
    u = fresh(mech_idx=3, mech_more="What each LSTM is for")
    out["units_first_render"] = [cpu(u.run)]
    grid = [0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09, 0.11, 0.12]
    out["unit_noise_cold"] = [cpu(u.select_slider(key="mech_unit_noise").set_value(grid[i]).run)
                              for i in range(min(reps, len(grid)))]
    out["unit_change"] = [cpu(u.selectbox(key="mech_unit").set_value(f"LSTM {2 + i % 5}").run) for i in range(reps)]
    problems = [str(e.value) for e in (*a.exception, *u.exception)]
    if problems:
        raise RuntimeError(f"the page failed during the profile: {problems}")
    return {k: {"median_cpu_s": statistics.median(v), "max_cpu_s": max(v), "n": len(v),
                "samples_cpu_s": [round(x, 4) for x in v]} for k, v in out.items()}


def run(gc_on: bool, reps: int, sections=SECTIONS) -> dict:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="rimscope-bench-pages-") as tmp:
        proc, url = start_server(gc_on, Path(tmp))
        try:
            with sync_playwright() as p:
                browser, page = open_browser(p)
                res = {}
                if "timestep" in sections:
                    steps, spans, ends = _measured(bench_timestep, page, url, reps)
                    res["timestep_step"] = _summary(steps, spans[-len(steps):], ends[-len(steps):])
                if "noise" in sections:
                    (cold, cached), spans, ends = _measured(bench_noise, page, url, reps)
                    # bench_noise times right (cold), left, right (cached) in turn
                    res["noise_slider_cold"] = _summary(cold, spans[0::3], ends[0::3])
                    res["noise_slider_cached"] = _summary(cached, [x for i, x in enumerate(spans) if i % 3],
                                                          [x for i, x in enumerate(ends) if i % 3])
                if "drawing" in sections:
                    draws, spans, ends = _measured(bench_drawing, page, url, reps)
                    res["new_drawing"] = _summary(draws, spans[-len(draws):], ends[-len(draws):])
                if "intervene" in sections:
                    takes, spans, ends = _measured(bench_intervene, page, url, reps)
                    res["intervene_knockout"] = _summary(takes, spans[-len(takes):], ends[-len(takes):])
                if "explore" in sections:
                    for name, samples in bench_explore(page, url, reps).items():
                        res[name] = _summary(samples, [math.nan] * len(samples))  # page-side times only
                if "slow" in sections:
                    for name, samples in bench_slow(page, url, reps).items():
                        res[name] = _summary(samples, [math.nan] * len(samples))  # page-side times only
                browser.close()
        finally:
            stop_server(proc)
    return res


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_pages", description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=8, help="measured repetitions per interaction (default 8)")
    ap.add_argument("--gc", nargs="+", choices=["on", "off"], default=["off", "on"],
                    help="Streamlit's after-run garbage collection: off (this app's config), on (default)")
    ap.add_argument("--sections", nargs="+", choices=SECTIONS, default=[x for x in SECTIONS if x != "slow"],
                    help="which interactions to measure (default: all but 'slow', which waits for the warm-up; "
                         "run it with --sections slow)")
    ap.add_argument("--cpu-profile", action="store_true",
                    help="instead: CPU seconds per Mechanisms view and interaction (AppTest, no browser)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    if args.cpu_profile:
        import torch

        torch.set_num_threads(1)
        load0 = list(os.getloadavg())
        prof = cpu_profile(args.reps)
        for name, r in prof.items():
            print(f"  {name:20s} median {r['median_cpu_s'] * 1000:7.0f} ms CPU (max {r['max_cpu_s'] * 1000:.0f}, "
                  f"n {r['n']})", flush=True)
        out = {"machine": {"cores": os.cpu_count(), "date": datetime.now(UTC).isoformat(timespec="seconds"),
                           "load_average_start": load0, "load_average_end": list(os.getloadavg())},
               "what": "CPU seconds of the Mechanisms script (AppTest), shipped models", "profile": prof}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1))
        print(f"wrote {args.out}")
        return out
    require_chromium()
    result = {"machine": machine(), "reps": args.reps, "sections": args.sections, "settings": {}}
    for g in args.gc:
        print(f"== runner.postScriptGC = {g == 'on'} ==", flush=True)
        res = run(g == "on", args.reps, args.sections)
        result["settings"][g] = res
        for name, s in res.items():
            print(f"  {name:26s} median {s['median_s'] * 1000:7.0f} ms   "
                  f"(min {s['min_s'] * 1000:.0f}, max {s['max_s'] * 1000:.0f}, n {s['n']}; "
                  f"script run {s['script_median_s'] * 1000:.0f} ms)", flush=True)
    if {"on", "off"} <= set(result["settings"]):
        print("ratio of medians, GC on / GC off:")
        result["ratio_gc_on_over_off"] = {}
        for name, s in result["settings"]["off"].items():
            r = result["settings"]["on"][name]["median_s"] / s["median_s"]
            result["ratio_gc_on_over_off"][name] = r
            print(f"  {name:20s} x{r:.2f}")
    write_result(result, args.out)
    return result


if __name__ == "__main__":
    main()
