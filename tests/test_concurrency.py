"""Several sessions on one run store at once.

Four Streamlit sessions of four signed-in users (AppTest instances of pages/train.py; two start training, two only
read), a thread that submits through the RunStore API, a monitoring thread and a separate
process that both call pump() in a loop. Checks: each session sees its own runs first, no
run is duplicated or started twice, never more than max_concurrent (1) run at once, and
no session raises.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.runs.store import RunStore
from core.training.config import TrainConfig
from pages.ui.auth import owner_id

ROOT = Path(__file__).resolve().parents[1]
PAGE = str(ROOT / "pages" / "train.py")
RUN_ID = re.compile(r"\d{8}-\d{6}-[0-9a-f]{8}")
OWNERS = ["1" * 16, "2" * 16, "3" * 16, "4" * 16]


@pytest.fixture
def env(tiny_mnist_home, monkeypatch):
    monkeypatch.setenv("RIMSCOPE_MAX_CONCURRENT", "1")
    return tiny_mnist_home


def user(sub: str) -> dict:
    """``st.user`` of a signed-in account (sign-in configured: each session is one user)."""
    return {"is_logged_in": True, "iss": "https://id.example", "sub": sub}


def session(owner: str) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.user = user(owner)
    return at


def run_ids_in_order(at: AppTest) -> list[str]:
    """The run ids of the cards in page order, from their action buttons' keys (a card shows only
    the short id; each button's key carries the full one)."""
    ids = []
    for b in at.button:
        for rid in RUN_ID.findall(b.key or ""):
            if rid not in ids:
                ids.append(rid)
    return ids


@pytest.mark.slow
def test_sessions_share_the_store(env):
    store = RunStore()
    stop = threading.Event()
    seen = {"max_running": 0, "pids": {}, "errors": [], "rounds": 0}

    def monitor():  # a second "server thread": pumps and watches the bound
        s = RunStore()
        while not stop.is_set():
            try:
                s.pump()
                runs = s.list_runs()
                seen["max_running"] = max(seen["max_running"], sum(r.status == "running" for r in runs))
                for r in runs:
                    if r.pid:
                        seen["pids"].setdefault(r.run_id, set()).add(r.pid)
            except Exception as exc:  # noqa: BLE001
                seen["errors"].append(repr(exc))
            seen["rounds"] += 1
            time.sleep(0.03)

    def api_client():  # a session using the API directly
        s = RunStore()
        try:
            s.submit(TrainConfig(dataset="mnist", model="parallel_lstm", iterations=50, batch_size=20,
                                 holdout_sample=False, model_overrides={"num_units": 1, "hidden_size": 8}),
                     owner="thread-a")
            while not stop.is_set():
                s.pump()
                s.list_runs()
                time.sleep(0.05)
        except Exception as exc:  # noqa: BLE001
            seen["errors"].append(repr(exc))

    other_process = subprocess.Popen(  # another server process pumping the same store
        [sys.executable, "-c", "import time\nfrom core.runs.store import RunStore\ns = RunStore()\nt = time.time()\n"
         "while time.time() - t < 20:\n    s.pump()\n    time.sleep(0.05)\n"],
        cwd=str(ROOT))
    threads = [threading.Thread(target=monitor), threading.Thread(target=api_client)]
    for t in threads:
        t.start()
    try:
        ats = [session(o) for o in OWNERS]
        for at in ats:
            at.run()
        # sessions 1 and 2 start training (2 models x 1 seed each); 3 and 4 only look
        ats[0].checkbox(key="train_holdout").uncheck().run()
        ats[1].checkbox(key="train_holdout").uncheck().run()
        ats[2].selectbox(key="train_dataset").set_value("fashion_mnist").run()
        ats[1].text_input(key="train_seeds").input("1").run()
        ats[0].button(key="train_start").click().run()
        ats[1].button(key="train_start").click().run()
        ats[3].run()
        # let the pumps race for a while with a worker running: 50 rounds of the monitor's pump
        deadline = time.monotonic() + 60
        while not any(r.status == "running" for r in store.list_runs()) and time.monotonic() < deadline:
            time.sleep(0.1)
        raced = seen["rounds"] + 50
        while seen["rounds"] < raced and time.monotonic() < deadline + 60:
            time.sleep(0.1)
        for at in ats:
            at.run()
        for i, at in enumerate(ats):
            assert not at.exception, (i, [e.value for e in at.exception])

        runs = store.list_runs()
        ids = {**{o: owner_id(user(o)) for o in OWNERS}, "thread-a": "thread-a"}
        by_owner = {o: [r.run_id for r in runs if r.owner == ids[o]] for o in OWNERS + ["thread-a"]}
        assert [len(by_owner[o]) for o in OWNERS + ["thread-a"]] == [2, 2, 0, 0, 1]
        assert len(runs) == 5 and len({r.run_id for r in runs}) == 5
        assert len({(r.owner, r.model, r.seed) for r in runs}) == 5  # no double submission
        for i in (0, 1):  # the submitting sessions list their own runs first
            shown = run_ids_in_order(ats[i])
            assert set(shown[:2]) == set(by_owner[OWNERS[i]]), (i, shown)
        for i in (2, 3):  # the readers have none of their own, and see the others' read-only
            assert any("No runs of yours yet" in x.value for x in ats[i].info)
            assert not [b for b in ats[i].button if (b.key or "").startswith(("stop_", "del_"))]
            labels = [e.label for e in ats[i].expander]
            assert any(lab.startswith("Runs of other users (5") for lab in labels), labels
    finally:
        # tidy up: stop what waits, then the worker(s)
        for r in store.list_runs():
            if r.status == "queued":
                store.request_stop(r.run_id)
        for r in store.list_runs():
            if r.status == "running":
                store.request_stop(r.run_id)
                if r.pid:
                    try:
                        os.kill(r.pid, signal.SIGTERM)
                    except OSError:
                        pass
        deadline = time.monotonic() + 60
        while any(r.status == "running" for r in store.list_runs()) and time.monotonic() < deadline:
            time.sleep(0.1)
        stop.set()
        for t in threads:
            t.join(timeout=30)
        other_process.kill()
        other_process.wait()
        store.pump()

    assert not seen["errors"], seen["errors"]
    assert seen["max_running"] == 1
    assert all(len(p) == 1 for p in seen["pids"].values()), seen["pids"]
    for r in store.list_runs():
        log = store.run_dir(r.run_id) / "worker.log"
        claims = log.read_text().count("claimed") if log.exists() else 0
        assert claims <= 1, (r.run_id, log.read_text())
        assert r.status not in ("running", "queued")
