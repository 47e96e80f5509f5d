"""An offline machine told the truth, with the network REALLY absent (not a flag).

The server, the CLI and Chromium run together inside a fresh network namespace (``unshare -n``:
only a loopback, brought up there), with no ``RIMSCOPE_OFFLINE`` and no data folder contents.
What happens in there is recorded by tests/browser/offline_netns_session.py; here we assert:
the probe answers "unreachable" within its 2 s, the CLI prints one sentence and exits non-zero
without a traceback, the Train page disables Start with the reason and the ways to get data,
no run gets queued, and a run queued past the page fails with the sentence on its card and the
raw reason under "Details".

Needs root (or unprivileged user namespaces) for ``unshare -n``; skipped with the reason when it
cannot run, except under CI=true, where that is a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.browser.helpers import BROWSER

pytestmark = [*BROWSER, pytest.mark.slow]  # a minute or more in its namespace: make test-slow (CI runs it)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SENTENCE = "MNIST could not be downloaded: this machine has no internet connection."


def _netns_cmd() -> list[str]:
    for cmd in (["unshare", "-n"], ["unshare", "-rn"]):  # root, else an unprivileged user namespace
        try:
            if subprocess.run(cmd + ["ip", "link", "set", "lo", "up"], capture_output=True, timeout=30).returncode == 0:
                return cmd
        except (OSError, subprocess.TimeoutExpired):
            pass
    msg = "cannot create a network namespace here (unshare -n / -rn with ip): the real-offline test cannot run"
    if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes"):
        pytest.fail(msg, pytrace=False)
    pytest.skip(msg)


@pytest.fixture(scope="module")
def offline_session(tmp_path_factory):
    out = tmp_path_factory.mktemp("netns") / "result.json"
    cmd = _netns_cmd() + [sys.executable, "-m", "tests.browser.offline_netns_session", str(out)]
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=1500)
    assert out.is_file(), f"the namespace session wrote nothing (rc {p.returncode}):\n{p.stderr[-3000:]}"
    res = json.loads(out.read_text())
    assert "error" not in res, res["error"] + "\n--- server log ---\n" + res.get("server_log_tail", "")
    return res


def test_the_namespace_has_no_network(offline_session):
    links = offline_session["interfaces"].strip().splitlines()
    assert len(links) == 1 and ": lo:" in links[0], links


def test_the_probe_says_unreachable_within_its_timeout(offline_session):
    for name, r in offline_session["probe"].items():
        assert r["reachable"] is False, (name, r)
        assert r["seconds"] <= 2.5, (name, r)
        assert "OFFLINE" not in r["reason"], r  # detected, not set


def test_the_cli_prints_one_sentence_and_exits_nonzero(offline_session):
    cli = offline_session["cli"]
    assert cli["rc"] == 2, cli
    assert SENTENCE in cli["stderr"] and "Traceback" not in cli["stderr"], cli["stderr"]
    assert "RIMSCOPE_DATA_DIR" in cli["stderr"] and "reason:" in cli["stderr"]
    assert cli["files"] == [], cli  # nothing written: no training state, no training state


def test_the_train_page_disables_start_and_queues_nothing(offline_session):
    b = offline_session["browser"]
    assert SENTENCE in b["alert"], b["alert"]
    assert b["start_disabled"] and not b["start_clicked"], b
    assert b["runs_after_start"] == [], b["runs_after_start"]
    assert "RIMSCOPE_DATA_DIR" in b["text"] and b["demo_offered"] >= 1, b["text"][:3000]
    assert "did not answer" in b["text"], "the raw reason under Details"


def test_a_run_queued_anyway_fails_with_the_sentence_on_its_card(offline_session):
    b = offline_session["browser"]
    q = b["queued_run"]
    assert q["status"] == "failed" and q["message"].startswith(SENTENCE), q
    assert q["detail"] and "did not answer" in q["detail"], q
    assert SENTENCE in b["card_text"] and b["traceback_on_page"] == 0, b["card_text"]
