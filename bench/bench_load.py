"""Many people on one server: the dashboard's latency with N browser sessions at once.

Run from the repository root (needs Chromium and Playwright: ``scripts/install_browser.sh``)::

    .venv/bin/python -m bench.bench_load                    # N=1 then N=8; about 5-10 min on 2 cores
    .venv/bin/python -m bench.bench_load --sessions 1 4 8

It starts one server (``python app.py``, bench_pages' settings: offline, an empty run
store, the shipped models, the bundled samples unless ``RIMSCOPE_DATA_DIR`` is set), lets one
session open Mechanisms and Robustness once (a server that has been up a while), then, for each
N, starts N client processes at the same moment, each with its own headless Chromium, each
doing the action mix of a class following a demo:

    open Mechanisms (a new tab), 4 x next timestep, open Robustness (sidebar), 3 x noise step

Each action is timed from its input event (or the navigation) to the end of the script run it
causes (bench_pages' in-page MutationObserver). Reported per N and action: p50, p95, max,
errors; the server's CPU seconds (its process and children, from psutil) over the phase and per
action, and its peak RSS. The clients' Chromium run on the same machine: the latencies include
their CPU use, the server CPU seconds do not. Everything goes to ``bench/results/load.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "bench" / "results" / "load.json"
ACTIONS = ("open_mechanisms", "next_timestep", "open_robustness", "noise_step")
MIX = "open Mechanisms, 4 x next timestep, open Robustness, 3 x noise step"


# ------------------------------------------------------------------------------ one client


def client(url: str, go: Path, out: Path) -> None:
    """One session's action mix; writes ``[[action, seconds or null, error or null], ...]``.

    Once its Chromium is up it writes ``<out>.ready`` and waits for the file ``go``: the parent
    writes it when every client is ready, so all sessions start at once."""
    from playwright.sync_api import sync_playwright

    from bench import bench_pages
    from bench.bench_first_view import click_to, goto
    from bench.bench_pages import STEP_IS_JS, STEP_JS, open_browser, settle, slider_thumb, timed, timed_key

    bench_pages.UNTIL_LAST_CHANGE = False  # this bench times each action to the end of its script run (above)

    rows: list = []

    def act(name: str, fn) -> None:
        try:
            rows.append([name, round(fn(), 4), None])
        except Exception as exc:  # noqa: BLE001 - counted as an error of this action
            rows.append([name, None, f"{type(exc).__name__}: {str(exc)[:300]}"])

    with sync_playwright() as p:
        browser, page = open_browser(p, 300_000)
        out.with_name(out.name + ".ready").touch()
        deadline = time.monotonic() + 600
        while not go.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        act("open_mechanisms", lambda: goto(page, url, "mechanisms"))
        nxt = page.get_by_role("button", name="▶", exact=True)
        for _ in range(4):
            def step():
                t, T = page.evaluate(STEP_JS)
                return timed(page, lambda: nxt.dispatch_event("click"), STEP_IS_JS, t % T + 1, timeout_s=300)
            act("next_timestep", step)
            settle(page, 120)
        act("open_robustness", lambda: click_to(page, "robustness"))
        thumb = slider_thumb(page, "Gaussian noise")
        for _ in range(3):
            act("noise_step", lambda: timed_key(page, thumb, "ArrowRight", timeout_s=300))
            settle(page, 120)
        browser.close()
    out.write_text(json.dumps(rows))


# ------------------------------------------------------------------------------ the server side


class ServerWatch:
    """Peak RSS and CPU seconds of the server process and its children, sampled in a thread."""

    def __init__(self, pid: int):
        import psutil

        self.proc = psutil.Process(pid)
        self.peak_rss = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _procs(self):
        return [self.proc, *self.proc.children(recursive=True)]

    def cpu_s(self) -> float:
        total = 0.0
        for q in self._procs():
            try:
                t = q.cpu_times()
                total += t.user + t.system
            except Exception:
                pass
        return total

    def rss(self) -> int:
        total = 0
        for q in self._procs():
            try:
                total += q.memory_info().rss
            except Exception:
                pass
        return total

    def _run(self):
        while not self._stop.wait(0.25):
            self.peak_rss = max(self.peak_rss, self.rss())

    def __enter__(self):
        self.peak_rss = self.rss()
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join(5)


def _fmt(v) -> str:
    return f"{v:6.2f}" if v is not None else "     -"


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def phase(url: str, n: int, watch: ServerWatch, tmp: Path) -> dict:
    outs = [tmp / f"client_{n}_{i}.json" for i in range(n)]
    go = tmp / f"go_{n}"
    procs = [subprocess.Popen([sys.executable, "-m", "bench.bench_load", "--client", url, "--go", str(go),
                               "--client-out", str(o)], cwd=REPO, stdout=subprocess.DEVNULL,
                              stderr=open(tmp / f"client_{n}_{i}.log", "wb"))
             for i, o in enumerate(outs)]
    deadline = time.monotonic() + 300  # every client's Chromium up (a client that died counts as up)
    while time.monotonic() < deadline and not all(o.with_name(o.name + ".ready").exists() or p.poll() is not None
                                                   for o, p in zip(outs, procs)):
        time.sleep(0.05)
    go.touch()
    cpu0, t0, load0 = watch.cpu_s(), time.monotonic(), os.getloadavg()[0]
    watch.peak_rss = watch.rss()
    for p in procs:
        p.wait(timeout=3600)
    wall, cpu = time.monotonic() - t0, watch.cpu_s() - cpu0
    rows = []
    for i, o in enumerate(outs):
        if o.is_file():
            rows += json.loads(o.read_text())
        else:
            rows.append(["client", None, f"client {i} wrote nothing: "
                         + (tmp / f"client_{n}_{i}.log").read_text(errors="replace")[-300:]])
    per = {}
    for name in ACTIONS:
        ok = [r[1] for r in rows if r[0] == name and r[1] is not None]
        per[name] = {"n": len(ok), "errors": sum(1 for r in rows if r[0] == name and r[2]),
                     "p50_s": statistics.median(ok) if ok else None, "p95_s": _pct(ok, 0.95) if ok else None,
                     "max_s": max(ok) if ok else None}
    actions = sum(1 for r in rows if r[0] in ACTIONS)
    return {"sessions": n, "per_action": per, "errors": [r for r in rows if r[2]][:20],
            "error_count": sum(1 for r in rows if r[2]), "actions": actions, "wall_s": round(wall, 1),
            "server_cpu_s": round(cpu, 1), "server_cpu_s_per_action": round(cpu / actions, 3) if actions else None,
            "server_peak_rss_mb": round(watch.peak_rss / 2**20, 1), "load_average_at_start": load0,
            "samples": rows}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_load", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, nargs="+", default=[1, 8], help="N for each phase (default 1 8)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--client", help=argparse.SUPPRESS)
    ap.add_argument("--go", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--client-out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.client:
        client(args.client, args.go, args.client_out)
        return {}
    from playwright.sync_api import sync_playwright

    from bench.bench_first_view import click_to, goto
    from bench.bench_pages import machine, open_browser, require_chromium, start_server, stop_server, write_result

    require_chromium()
    result = {"machine": machine(),
              "mix": MIX,
              "data_dir": os.environ.get("RIMSCOPE_DATA_DIR") or "(empty: bundled samples)", "phases": []}
    with tempfile.TemporaryDirectory(prefix="rimscope-bench-load-") as tmp:
        proc, url = start_server(False, Path(tmp))
        try:
            with sync_playwright() as p:  # a server that has been up a while: one visit of each page
                browser, page = open_browser(p, 300_000)
                result["first_visit_s"] = {"mechanisms": goto(page, url, "mechanisms"),
                                           "robustness": click_to(page, "robustness")}
                browser.close()
            with ServerWatch(proc.pid) as watch:
                result["server_rss_mb_before"] = round(watch.rss() / 2**20, 1)
                for n in args.sessions:
                    print(f"== {n} session(s) at once: {MIX}", flush=True)
                    ph = phase(url, n, watch, Path(tmp))
                    result["phases"].append(ph)
                    write_result(result, args.out)  # after every phase: a cut-short run keeps what it measured
                    for name, s in ph["per_action"].items():
                        print(f"  {name:16s} p50 {_fmt(s['p50_s'])} s  p95 {_fmt(s['p95_s'])} s  max {_fmt(s['max_s'])} s"
                              f"  (n {s['n']}, errors {s['errors']})", flush=True)
                    print(f"  server: {ph['server_cpu_s']} CPU s for {ph['actions']} actions "
                          f"({ph['server_cpu_s_per_action']} s each) in {ph['wall_s']} s; peak RSS "
                          f"{ph['server_peak_rss_mb']} MB; errors {ph['error_count']}; load average "
                          f"{ph['load_average_at_start']:.1f}", flush=True)
        finally:
            stop_server(proc)
    write_result(result, args.out)
    return result


if __name__ == "__main__":
    main()
