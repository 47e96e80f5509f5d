"""app.py under Streamlit's AppTest ends cleanly: the warm-up it starts (a daemon thread in
PyTorch) is stopped and waited for at interpreter exit, instead of the process aborting with
"terminate called without an active exception"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import time
from streamlit.testing.v1 import AppTest
at = AppTest.from_file({app!r}, default_timeout=120).run()
assert not at.exception, at.exception
time.sleep(6)  # the warm-up is in the middle of its PyTorch work when the interpreter exits
"""


def test_app_under_apptest_exits_cleanly_with_the_warmup_running(page_env, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "RIMSCOPE_WARMUP"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT.format(app=str(ROOT / "app.py"))], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert "terminate called" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == 0, proc.stderr[-2000:]
