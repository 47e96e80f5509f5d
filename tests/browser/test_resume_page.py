"""The Train page resumes an interrupted run, in a real browser; and CI must have that browser.

A worker training the method (a tiny rim) is killed with SIGKILL after its first training
training states, as when the machine goes down under the server; the page shows the run as
interrupted with a Resume button; pressing it continues the run from its training state to the end,
with every iteration once and the uninterrupted run's losses.

``test_browser_present_under_ci``: locally the browser tests are skipped without Chromium or
Playwright (with the reason); under ``CI=true`` a missing browser fails the run instead.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.browser.helpers import BROWSER_MISSING, SLOW_MS, WAIT_MS, WAIT_S, assert_no_errors, poll, settle
from tests.browser.server import browser_missing_reason

OWNER = "0123456789abcdef"
ITERATIONS = 60


def test_browser_present_under_ci():
    reason = browser_missing_reason()
    if reason and os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but the browser tests cannot run (every one of them was skipped): {reason}")
    if reason:
        pytest.skip(f"browser tests skipped: {reason}")


@pytest.mark.slow  # a minute or more end to end: make test-slow (CI runs it)
@pytest.mark.browser
@pytest.mark.skipif(BROWSER_MISSING is not None, reason=BROWSER_MISSING or "")
def test_train_page_resumes_an_interrupted_run(page, app_server, screenshot):
    from core.data.plan import prepare_training_data
    from core.runs.queue import worker_alive
    from core.runs.store import RunStore
    from core.training import state as R
    from core.training.config import TrainConfig
    from core.training.loop import train

    store = RunStore(root=app_server["home"] / "runs", max_concurrent=1)
    cfg = TrainConfig(dataset="fashion_mnist", model="rim", iterations=ITERATIONS, batch_size=20, eval_every=10,
                      eval_samples=50, noise_draws=1, state_every=4, state_every_s=0,
                      model_overrides={"hidden_size": 8, "num_units": 3, "k_active": 2})
    rid = store.submit(cfg, owner=OWNER, label="resume me", data_dir=app_server["data_dir"])
    assert store.pump() == [rid]
    ckpt = store.run_dir(rid) / "ckpt"
    poll(lambda: (R.last_iteration(ckpt) or 0) >= 8, WAIT_S, every=0.05, what="the first training states")
    pid = store.get(rid).pid
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while worker_alive(pid, rid) and time.monotonic() < deadline:
        time.sleep(0.05)
    saved = R.last_iteration(ckpt)
    assert saved and saved < ITERATIONS

    page.goto(f"{app_server['url']}/train", wait_until="commit", timeout=SLOW_MS)
    page.get_by_text("Your runs").first.wait_for(timeout=SLOW_MS)
    # this run's card: the shared server's other runs are the user's too (no sign-in)
    card = page.locator(f".st-key-card_{rid}")
    progress = card.locator('[data-testid="stProgress"]')
    poll(lambda: any(t.startswith("interrupted") for t in progress.all_inner_texts()), WAIT_S,
         what="the run shown as interrupted")
    card.get_by_text("ended unexpectedly").first.wait_for(timeout=WAIT_MS)
    settle(page)
    button = card.get_by_role("button", name="Resume")
    assert button.count() == 1
    button.scroll_into_view_if_needed()
    screenshot(page, "train-interrupted")
    button.click()

    seen: list[str] = []

    def finished():
        texts = progress.all_inner_texts()
        if texts and (not seen or seen[-1] != texts[0]):
            seen.append(texts[0])
        return bool(texts) and texts[0].startswith(("completed", "failed", "diverged"))

    poll(finished, 3 * WAIT_S, every=0.5, what="the resumed run to finish")
    assert seen[-1].startswith("completed") and f"{ITERATIONS} / {ITERATIONS} iterations" in seen[-1], seen
    assert any(s.startswith(("queued", "running")) for s in seen), f"no live progress after Resume: {seen}"
    card.get_by_text("final test accuracy").first.wait_for(timeout=WAIT_MS)
    assert card.get_by_role("button", name="Resume").count() == 0
    settle(page)
    assert_no_errors(page, "Train after resuming a run")
    screenshot(page, "train-resumed")

    info = store.get(rid)
    assert info.metrics["resumed_from_iteration"] == saved
    m = store.read_metrics(rid)
    assert m["iteration"] == list(range(1, ITERATIONS + 1))  # every iteration once
    tr, te, _ = prepare_training_data(cfg, app_server["data_dir"])
    ref = train(TrainConfig(**{**cfg.to_dict(), "threads": 1}), tr, te)  # the uninterrupted run, here
    assert m["loss"] == ref.history["loss"]
    assert not ckpt.exists()
    store.pump()  # reap the killed worker (a child of this process)
