"""``python app.py`` (``make app``) imports the heavy modules (app.py's ``PRELOAD``) and then
serves the dashboard: torch is loaded before any browser asks for a page. ``streamlit run app.py``
stays the plain way, the first page importing them itself."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/_stcore/health", timeout=5) as r:
            return r.read().strip() == b"ok"
    except OSError:
        return False


def _torch_loaded(pid: int) -> bool:
    return "libtorch_cpu" in Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/maps").is_file(), reason="reads /proc/<pid>/maps (Linux)")
def test_python_app_py_imports_torch_before_it_answers(tmp_path):
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMLIT_")}
    env.update(RIMSCOPE_WARMUP="0", RIMSCOPE_HOME=str(tmp_path))
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "app.py", "--server.port", str(port), "--server.headless", "true",
                                 "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
                                cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while not _healthy(f"http://127.0.0.1:{port}"):
            assert proc.poll() is None, f"the server exited {proc.returncode}: {log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, f"no server after 240 s: {log.read_text()[-2000:]}"
            time.sleep(0.2)
        assert _torch_loaded(proc.pid), "the server answers before torch is loaded"
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
