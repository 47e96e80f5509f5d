"""A run card's buttons, drawn in Chromium: each is there once and has a size (a button with a
tooltip was drawn twice, the second a zero-size copy that a screen reader or a click by name met).
The module's own server has the queue paused (RIMSCOPE_MAX_CONCURRENT=0): the run stays queued."""

from __future__ import annotations

import pytest

from tests.browser.helpers import BROWSER, WAIT_MS, settle
from tests.browser.server import running_server

pytestmark = BROWSER


@pytest.fixture(scope="module")
def app_server(tmp_path_factory):
    with running_server(tmp_path_factory.mktemp("run_card"), env_extra={"RIMSCOPE_MAX_CONCURRENT": "0"}) as server:
        yield server


def test_a_queued_runs_stop_button_is_there_once(page, app_server, monkeypatch):
    from core.runs.store import RunStore
    from core.training.config import TrainConfig

    monkeypatch.setenv("RIMSCOPE_HOME", str(app_server["home"]))
    rid = RunStore().submit(TrainConfig(dataset="fashion_mnist", model="parallel_lstm", seed=0, iterations=50))
    page.goto(f"{app_server['url']}/train", timeout=WAIT_MS)
    card = page.locator(f".st-key-card_{rid}")
    card.get_by_role("button", name="Stop", exact=True).first.wait_for(timeout=WAIT_MS)
    settle(page)
    buttons = card.locator("button")
    boxes = [(buttons.nth(i).inner_text().strip(), buttons.nth(i).bounding_box()) for i in range(buttons.count())]
    assert [text for text, _ in boxes] == ["Stop"], boxes
    assert all(box and box["width"] > 0 and box["height"] > 0 for _, box in boxes), boxes
