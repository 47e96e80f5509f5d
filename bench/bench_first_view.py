"""First views of the dashboard in a real browser: how long a page takes the first time.

Run from the repository root (needs Chromium and Playwright: ``scripts/install_browser.sh``)::

    .venv/bin/python -m bench.bench_first_view                 # about 3-6 min on 2 cores
    RIMSCOPE_DATA_DIR=../shared/data .venv/bin/python -m bench.bench_first_view   # with the full data

It starts ``python app.py`` as ``make app`` does (bench_pages' server: offline, an empty run store, the
shipped pretrained models; the bundled samples unless ``RIMSCOPE_DATA_DIR`` is set) and measures
in headless Chromium, from the navigation to the page's last change (its main content drawn,
the script run over and everything drawn after it; the ends are time-stamped by MutationObservers
in the page, so polling adds nothing):

* **fresh server**: the very first page after the server answers its health check (what
  ``make app`` prints the URL for), then every other page in turn through the sidebar, as a
  newcomer clicks through them; then every page once more (revisits);
* **warm server**: a second browser session on the same server, every page's first view;
* **direct**: ``--direct`` (default Mechanisms) opened as the first page of a fresh server, on
  ``--direct-reps`` (5) fresh servers in turn; the median and every sample are kept.

Every figure goes to ``bench/results/first_view.json``; the machine's load average is recorded
with them (the machine may be shared: compare figures from one run only).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import tempfile
import time
from pathlib import Path

from bench import bench_pages
from bench.bench_pages import (
    CHANGE_JS,
    OBSERVER_JS,
    SETTLE_S,
    last_change,
    machine,
    open_browser,
    require_chromium,
    start_server,
    stop_server,
)

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "bench" / "results" / "first_view.json"
WAIT_MS = 300_000
CALM_S = SETTLE_S  # the page counts as settled after this long without a script run (bench_pages)

# name -> (URL path, sidebar label, its h1 heading, text shown once its main content is drawn)
PAGES = {
    "overview": ("", "Overview", "RIMscope", "Where to start"),
    "train": ("train", "Train", "Train", "Your runs"),
    "models": ("models", "Models", "Models", "Upload a model"),
    "mechanisms": ("mechanisms", "Mechanisms", "Mechanisms", re.compile(r"^Inside .+, row by row$")),
    "robustness": ("robustness", "Robustness", "Robustness", "Error against noise strength"),
    "compare": ("compare", "Compare", "Compare the methods", None),
}

# time of the last change to notRunning (ms since navigation start), or null while running or
# while no script run has started since t0 (an in-app navigation always starts one)
SETTLED_AT_JS = """([t0, needRun]) => { const s = window.__rs || []; if (!s.length) return null;
  if (needRun && !s.some(([t, st]) => t >= t0 && st === 'running')) return null;
  const last = s[s.length - 1]; return last[1] === 'notRunning' ? last[0] : null; }"""


def log(msg: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _install_observer(page) -> None:
    page.locator('[data-testid="stApp"]').first.wait_for(state="attached", timeout=WAIT_MS)
    page.evaluate(OBSERVER_JS)
    page.evaluate(CHANGE_JS)


def _settled(page, name: str, t0_ms: float, need_run: bool) -> float:
    """Seconds from ``t0_ms`` (page clock) to the last change of a settled page: its last script
    run over and everything drawn after it (``bench_pages.last_change``)."""
    _, _, heading, ready = PAGES[name]
    page.locator("h1").filter(has_text=heading).first.wait_for(timeout=WAIT_MS)
    if ready is not None:
        page.get_by_text(ready).first.wait_for(timeout=WAIT_MS)
    deadline = time.monotonic() + WAIT_MS / 1000
    while time.monotonic() < deadline:
        end = page.evaluate(SETTLED_AT_JS, [t0_ms, need_run])
        now = page.evaluate("() => performance.now()")
        state = page.locator('[data-testid="stApp"]').get_attribute("data-test-script-state")
        if end is not None and state == "notRunning" and now - end >= CALM_S * 1000:
            return ((last_change(page, t0_ms, end) if bench_pages.UNTIL_LAST_CHANGE else end) - t0_ms) / 1000.0
        time.sleep(0.05)
    raise TimeoutError(f"{name} did not settle")


def goto(page, url: str, name: str) -> float:
    """A full page load (a new browser tab opening the URL): from navigation start."""
    page.goto(f"{url}/{PAGES[name][0]}", wait_until="commit", timeout=WAIT_MS)
    _install_observer(page)
    return _settled(page, name, 0.0, False)  # performance.now() counts from the navigation start


def click_to(page, name: str) -> float:
    """In-app navigation through the sidebar link, as a person moves between pages."""
    page.evaluate("() => { window.__rs = null; }")
    page.evaluate(OBSERVER_JS)
    page.evaluate(CHANGE_JS)
    link = page.locator('[data-testid="stSidebarNav"] a').filter(has_text=PAGES[name][1]).first
    t0 = page.evaluate("() => performance.now()")
    link.dispatch_event("click")
    return _settled(page, name, t0, True)


def _server_rss_mb(proc) -> float | None:
    try:
        import psutil

        p = psutil.Process(proc.pid)
        return round(sum(q.memory_info().rss for q in [p, *p.children(recursive=True)]) / 2**20, 1)
    except Exception:
        return None


def fresh_and_warm(order: list[str]) -> dict:
    from playwright.sync_api import sync_playwright

    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="rimscope-bench-first-") as tmp:
        t_start = time.monotonic()
        proc, url = start_server(False, Path(tmp))
        out["server_ready_s"] = round(time.monotonic() - t_start, 2)
        try:
            with sync_playwright() as p:
                browser, page = open_browser(p)
                first, rest = order[0], order[1:]
                fresh = {first: goto(page, url, first)}
                log(f"fresh server, first page {first}: {fresh[first]:.2f} s")
                for name in rest:
                    fresh[name] = click_to(page, name)
                    log(f"fresh server, first view of {name}: {fresh[name]:.2f} s")
                revisit = {}
                for name in order:
                    revisit[name] = click_to(page, name)
                    log(f"revisit {name}: {revisit[name]:.2f} s")
                page.context.close()
                page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
                page.set_default_timeout(WAIT_MS)
                warm = {}
                for name in order:
                    warm[name] = goto(page, url, name)
                    log(f"warm server, new session, first view of {name}: {warm[name]:.2f} s")
                browser.close()
            out.update(fresh_server_s=fresh, revisit_s=revisit, warm_server_new_session_s=warm,
                       server_rss_mb=_server_rss_mb(proc))
        finally:
            stop_server(proc)
    return out


def direct(name: str, reps: int) -> tuple[float, list[float]]:
    """``name`` as the first page of ``reps`` fresh servers, one after the other: (median, samples)."""
    from playwright.sync_api import sync_playwright

    samples = []
    for i in range(reps):
        with tempfile.TemporaryDirectory(prefix="rimscope-bench-first-") as tmp:
            proc, url = start_server(False, Path(tmp))
            try:
                with sync_playwright() as p:
                    browser, page = open_browser(p)
                    samples.append(goto(page, url, name))
                    log(f"fresh server {i + 1} of {reps}, {name} opened directly: {samples[-1]:.2f} s")
                    browser.close()
            finally:
                stop_server(proc)
    return statistics.median(samples), samples


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_first_view", description=__doc__.split("\n\n")[0])
    ap.add_argument("--order", nargs="+", choices=list(PAGES), default=list(PAGES),
                    help="pages in the order a newcomer opens them (default: the sidebar's)")
    ap.add_argument("--direct", default="mechanisms", choices=[*PAGES, "none"],
                    help="page opened first on fresh servers of its own (default mechanisms; none: skip)")
    ap.add_argument("--direct-reps", type=int, default=5, help="fresh servers for --direct (median reported)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    if args.direct_reps < 1:
        ap.error("--direct-reps must be at least 1")
    require_chromium()
    result = {"machine": machine(),
              "data_dir": os.environ.get("RIMSCOPE_DATA_DIR") or "(empty: bundled samples)"}
    result.update(fresh_and_warm(args.order))
    if args.direct != "none":
        median, samples = direct(args.direct, args.direct_reps)
        result["direct_first_page_s"] = {args.direct: median}
        result["direct_first_page_samples_s"] = {args.direct: [round(x, 3) for x in samples]}
    result["machine"]["load_average_end"] = list(os.getloadavg())  # for the table; written again below
    print(f"{'page':12s} {'fresh':>7s} {'revisit':>8s} {'warm':>7s}   (seconds; load average "
          f"{result['machine']['load_average_start'][0]:.1f} -> {result['machine']['load_average_end'][0]:.1f}"
          f" on {os.cpu_count()} cores)")
    for name in args.order:
        print(f"{name:12s} {result['fresh_server_s'][name]:7.2f} {result['revisit_s'][name]:8.2f} "
              f"{result['warm_server_new_session_s'][name]:7.2f}")
    for name, s in result.get("direct_first_page_s", {}).items():
        got = result["direct_first_page_samples_s"][name]
        print(f"{name} as the first page of a fresh server: median {s:.2f} s of {len(got)} "
              f"({min(got):.2f} to {max(got):.2f} s)")
    print(f"server ready after {result['server_ready_s']:.1f} s; RSS {result['server_rss_mb']} MB")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    main()
