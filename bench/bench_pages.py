"""Interaction latency of the dashboard, measured in a real browser.

Run from the repository root (needs Chromium and Playwright: ``scripts/install_browser.sh``)::

    .venv/bin/python -m bench.bench_pages                # about 5-10 min on 2 cores
    .venv/bin/python -m bench.bench_pages --reps 5 --gc on off

It starts ``streamlit run app.py`` on a free local port (offline, an empty run store, the
shipped pretrained models, the bundled MNIST sample unless ``RIMSCOPE_DATA_DIR`` is set) and
drives headless Chromium through the interactions users repeat:

* **timestep step**: press "▶" (next row) on the Mechanisms page;
* **noise slider**: move the Gaussian-variance slider on the Robustness page one notch to a
  variance not seen before (every method re-scored on the test subset: "cold") and back to
  one already seen ("cached");
* **new drawing**: add a stroke to the digit on the Mechanisms canvas.

Latency = from the input event to the end of the script run it causes, taken from the page
itself: a MutationObserver time-stamps every change of Streamlit's ``data-test-script-state``
attribute, so the Python side's polling adds nothing. Each setting of ``--gc`` is a separate
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
    cmd = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
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


def settle(page, timeout_s: float = 300) -> None:
    deadline, calm = time.monotonic() + timeout_s, 0
    while time.monotonic() < deadline and calm < 3:
        state = page.locator('[data-testid="stApp"]').get_attribute("data-test-script-state")
        calm = calm + 1 if state == "notRunning" else 0
        time.sleep(0.5)


SCRIPT_RUNS: list[float] = []  # the last measurement's running -> notRunning span, per call of timed()


def log(msg: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def timed(page, action, done_js: str | None = None, arg=None, timeout_s: float = 120, prepare=None) -> float:
    """Seconds from just before ``action()`` to the end of the script run it started.

    ``action`` should be the input event itself (a dispatched click, a key press, the mouse
    release that ends a stroke); what leads up to it goes in ``prepare``, run before the clock.

    With ``done_js`` (a predicate on the page, given ``arg``) the end is the first animation
    frame in which it holds instead: a very short fragment rerun can flip the script state
    to running and back within one render, so no state change is seen at all.
    """
    page.evaluate(OBSERVER_JS)
    if prepare is not None:
        prepare()
    t0 = page.evaluate("() => performance.now()")
    action()
    if done_js is not None:
        page.wait_for_function(f"(a) => {{ if (({done_js})(a)) {{ window.__done = performance.now(); return true; }}"
                               " return false; }", arg=arg, polling="raf", timeout=timeout_s * 1000)
        end = page.evaluate("() => window.__done")
        run = page.evaluate(RUN_AFTER_JS, t0)
        SCRIPT_RUNS.append((run[1] - run[0]) / 1000.0 if run else math.nan)
        return (end - t0) / 1000.0
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = page.evaluate(RUN_AFTER_JS, t0)
        if run:
            SCRIPT_RUNS.append((run[1] - run[0]) / 1000.0)
            return (run[1] - t0) / 1000.0
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
    thumb = page.locator('[data-testid="stSlider"]').filter(has_text="Gaussian noise").first \
        .locator('[role="slider"], input[type="range"]').first
    cold, cached = [], []
    for _ in range(reps):  # right: a variance not scored yet; left, right: both cached
        thumb.focus()
        cold.append(timed(page, lambda: page.keyboard.press("ArrowRight")))
        settle(page, 60)
        thumb.focus()
        cached.append(timed(page, lambda: page.keyboard.press("ArrowLeft")))
        settle(page, 60)
        thumb.focus()
        cached.append(timed(page, lambda: page.keyboard.press("ArrowRight")))
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


def _summary(samples: list[float], spans: list[float]) -> dict:
    """``samples``: input event -> end of run; ``spans``: the same runs' running -> notRunning
    (the server's script run as the page sees it; the rest is input, transport and drawing)."""
    spans_seen = [x for x in spans if not math.isnan(x)]
    return {"median_s": statistics.median(samples), "min_s": min(samples), "max_s": max(samples),
            "n": len(samples), "script_median_s": statistics.median(spans_seen) if spans_seen else math.nan,
            "samples_s": [round(x, 4) for x in samples], "script_s": [round(x, 4) for x in spans]}


def _measured(fn, *args):
    """Run a bench function; pair its samples with the script spans recorded meanwhile."""
    start = len(SCRIPT_RUNS)
    out = fn(*args)
    spans = SCRIPT_RUNS[start:]
    return out, spans


def run(gc_on: bool, reps: int) -> dict:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="rimscope-bench-pages-") as tmp:
        proc, url = start_server(gc_on, Path(tmp))
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
                page = ctx.new_page()
                page.set_default_timeout(WAIT_MS)
                steps, spans = _measured(bench_timestep, page, url, reps)
                res = {"timestep_step": _summary(steps, spans[-len(steps):])}
                (cold, cached), spans = _measured(bench_noise, page, url, reps)
                # bench_noise times right (cold), left, right (cached) in turn
                res["noise_slider_cold"] = _summary(cold, spans[0::3])
                res["noise_slider_cached"] = _summary(cached, [x for i, x in enumerate(spans) if i % 3])
                draws, spans = _measured(bench_drawing, page, url, reps)
                res["new_drawing"] = _summary(draws, spans[-len(draws):])
                browser.close()
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
    return res


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_pages", description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=8, help="measured repetitions per interaction (default 8)")
    ap.add_argument("--gc", nargs="+", choices=["on", "off"], default=["off", "on"],
                    help="Streamlit's after-run garbage collection: off (this app's config), on (default)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    if not os.access(CHROMIUM, os.X_OK):
        sys.exit(f"no Chromium at {CHROMIUM}: run scripts/install_browser.sh")
    result = {"machine": {"cores": os.cpu_count(), "platform": platform.platform(),
                          "date": datetime.now(UTC).isoformat(timespec="seconds"),
                          "load_average_start": list(os.getloadavg())},
              "reps": args.reps, "settings": {}}
    for g in args.gc:
        print(f"== runner.postScriptGC = {g == 'on'} ==", flush=True)
        res = run(g == "on", args.reps)
        result["settings"][g] = res
        for name, s in res.items():
            print(f"  {name:20s} median {s['median_s'] * 1000:7.0f} ms   "
                  f"(min {s['min_s'] * 1000:.0f}, max {s['max_s'] * 1000:.0f}, n {s['n']}; "
                  f"script run {s['script_median_s'] * 1000:.0f} ms)", flush=True)
    if {"on", "off"} <= set(result["settings"]):
        print("ratio of medians, GC on / GC off:")
        result["ratio_gc_on_over_off"] = {}
        for name, s in result["settings"]["off"].items():
            r = result["settings"]["on"][name]["median_s"] / s["median_s"]
            result["ratio_gc_on_over_off"][name] = r
            print(f"  {name:20s} x{r:.2f}")
    result["machine"]["load_average_end"] = list(os.getloadavg())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    main()
