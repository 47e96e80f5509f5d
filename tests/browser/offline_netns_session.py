"""Runs INSIDE a fresh network namespace (``unshare -n``): no interface but loopback, so no
internet for real, and no RIMSCOPE_OFFLINE. Started by tests/browser/test_offline_netns.py,
which asserts on the JSON this writes (``python -m tests.browser.offline_netns_session OUT``).

In the namespace: the probe itself; the CLI asked to train MNIST; a ``streamlit run app.py``
with an empty data folder and run store, and Chromium on its Train page (what it says, whether
Start is enabled, and a click on it); then a run queued past the page (straight into the run
store, as if the network went away after the page looked) and its card on the page.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OWNER = "0ff11e0ff11e0ff1"


def _env(home: Path, data: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RIMSCOPE_", "STREAMLIT_"))}
    env.update({"RIMSCOPE_HOME": str(home), "RIMSCOPE_DATA_DIR": str(data), "RIMSCOPE_MAX_CONCURRENT": "1",
                "RIMSCOPE_WORKER_NICE": "0", "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1",
                "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"})
    return env


def _probe(out: dict) -> None:
    from core.data.online import download_reachable

    for name in ("mnist", "fashion_mnist", "cifar10"):
        t0 = time.monotonic()
        r = download_reachable(name)
        out.setdefault("probe", {})[name] = {"reachable": r.reachable, "reason": r.reason,
                                             "seconds": round(time.monotonic() - t0, 3)}


def _cli(out: dict, env: dict, tmp: Path) -> None:
    p = subprocess.run([sys.executable, "-m", "core.train", "--dataset", "mnist", "--model", "rim",
                        "--iterations", "2", "--quiet", "--out", str(tmp / "cli_run")],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    out["cli"] = {"rc": p.returncode, "stderr": p.stderr[-3000:],
                  "files": sorted(x.name for x in tmp.iterdir() if x.name.startswith("cli_run"))}


def _browser(out: dict, env: dict, home: Path, data: Path) -> None:
    from playwright.sync_api import sync_playwright

    from tests.browser.helpers import settle
    from tests.browser.server import CHROMIUM, CHROMIUM_ARGS, _free_port, _wait_healthy, stop_server

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = home / "streamlit.log"
    with open(log, "wb") as log_f:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port), "--server.headless",
             "true", "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
             "--server.fileWatcherType", "none"],
            cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=log_f, stderr=subprocess.STDOUT,
            start_new_session=True)
    try:
        _wait_healthy(url, proc, log, 240)
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            pg = b.new_page(viewport={"width": 1400, "height": 1000})
            pg.set_default_timeout(180_000)
            pg.goto(f"{url}/train?owner={OWNER}", wait_until="commit", timeout=360_000)
            pg.locator("h1").filter(has_text="Train").first.wait_for(timeout=360_000)
            pg.get_by_text("Your runs").first.wait_for(timeout=360_000)
            alert = pg.locator('[data-testid="stAlert"]').filter(has_text="No training data for MNIST")
            alert.first.wait_for(timeout=180_000)
            settle(pg, 180)
            start = pg.locator(".st-key-train_start button")
            main = pg.locator('[data-testid="stMain"]')
            res = {"alert": alert.first.inner_text(), "start_disabled": start.is_disabled(),
                   "start_label": start.inner_text().strip()}
            try:
                start.click(timeout=3_000)  # a disabled button takes no click: Playwright times out
                res["start_clicked"] = True
            except Exception:
                res["start_clicked"] = False
            settle(pg, 60)
            details = main.get_by_text("Details", exact=True)
            if details.count():
                details.first.click()
                settle(pg, 60)  # the opened expander is drawn and the page quiet
            res["text"] = main.inner_text()[:6000]
            res["demo_offered"] = pg.get_by_text("Train a quick demo on the bundled MNIST sample").count()
            res["runs_after_start"] = sorted(x.name for x in (home / "runs").glob("*") if x.is_dir())

            # a run queued past the page: its worker fails with the sentence; the card says it
            from core.runs.store import RunStore
            from core.training.config import TrainConfig

            store = RunStore(home / "runs", max_concurrent=1)
            rid = store.submit(TrainConfig(dataset="mnist", model="rim", iterations=2, batch_size=4,
                                           eval_every=1, eval_samples=4, noise_draws=1), owner=OWNER)
            store.pump()
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and store.get(rid).status not in ("failed", "completed"):
                time.sleep(1.0)
            info = store.get(rid)
            res["queued_run"] = {"status": info.status, "message": info.message, "detail": info.detail}
            pg.reload(wait_until="commit", timeout=360_000)
            pg.get_by_text("Your runs").first.wait_for(timeout=360_000)
            card = pg.get_by_text("could not be downloaded", exact=False)
            try:
                card.first.wait_for(timeout=180_000)
            except Exception:
                pass
            settle(pg, 120)
            res["card_text"] = main.inner_text()[-4000:]
            res["traceback_on_page"] = pg.get_by_text("Traceback").count()
            b.close()
        out["browser"] = res
    finally:
        stop_server(proc)
        out["server_log_tail"] = log.read_text(errors="replace")[-2000:]


def main(out_path: str) -> int:
    out: dict = {}
    try:
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True, capture_output=True)
        out["interfaces"] = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
        with tempfile.TemporaryDirectory(prefix="rimscope_netns_") as t:
            tmp = Path(t)
            home, data = tmp / "home", tmp / "data"
            home.mkdir()
            data.mkdir()
            env = _env(home, data)
            os.environ.update({k: v for k, v in env.items() if k.startswith("RIMSCOPE_")})
            os.environ.pop("RIMSCOPE_OFFLINE", None)
            _probe(out)
            _cli(out, env, tmp)
            _browser(out, env, home, data)
    except Exception:
        out["error"] = traceback.format_exc()
    Path(out_path).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
