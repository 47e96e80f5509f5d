"""The Makefile's ``test`` target installs and checks the test browser once, not on every run.

``scripts/install_browser.sh`` may call ``sudo apt-get``; ``make test`` runs it only while its
stamp (``$(VENV)/.browser-installed``) is missing or older than the script. Checked with
``make -n`` on a stand-in virtual environment whose set-up stamps are current, so nothing is
installed and no test runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INSTALL = "bash scripts/install_browser.sh"


def _dry_run(venv: Path) -> str:
    out = subprocess.run(["make", "-n", "--no-print-directory", f"VENV={venv}", "test"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _touch_after_sources(*stamps: Path) -> None:
    newest = max(p.stat().st_mtime for p in (ROOT / "requirements.txt", ROOT / "requirements-dev.txt",
                                             ROOT / "pyproject.toml", ROOT / "scripts" / "install_browser.sh"))
    for i, stamp in enumerate(stamps, 1):
        stamp.touch()
        os.utime(stamp, (newest + i, newest + i))


@pytest.mark.skipif(shutil.which("make") is None and os.environ.get("CI") != "true",
                    reason="no make on this machine (under CI=true the test runs and fails)")
def test_make_test_installs_the_browser_only_while_its_stamp_is_missing(tmp_path):
    venv = tmp_path / "venv"
    venv.mkdir()
    _touch_after_sources(venv / ".app-installed", venv / ".dev-installed")
    first = _dry_run(venv)
    assert INSTALL in first, f"no browser stamp yet: make test must install the browser:\n{first}"
    _touch_after_sources(venv / ".app-installed", venv / ".dev-installed", venv / ".browser-installed")
    again = _dry_run(venv)
    assert INSTALL not in again, f"make test checks the browser again although its stamp is current:\n{again}"
    assert "-m pytest" in again
    os.utime(venv / ".browser-installed", (0, 0))  # older than the script: installed by an older script
    assert INSTALL in _dry_run(venv)
