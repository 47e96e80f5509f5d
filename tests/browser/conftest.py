"""Fixtures for the browser tests: one ``streamlit run app.py`` and one Chromium for the session.

Writing a browser test (the fixtures below; nothing to set up in the test module):

* ``page``: a fresh browser context (own Streamlit session) on the shared server; take it with
  ``app_server`` for the server's ``{"url", "home", "data_dir", "pretrained", "log"}``, e.g.
  ``def test_x(page, app_server): page.goto(f"{app_server['url']}/train")``.
* ``app_server`` is SESSION-wide: every browser module shares one server (starting one costs
  half a minute to minutes on 2 busy cores). Its run store (``home``) and its Streamlit caches
  are shared too, so a test that adds runs gives them a label and never assumes an empty store
  or that it runs first (no sign-in: every run on the server is the browser's, in every tab).
* A module that needs a server of its own (its first request, a changed environment) overrides
  ``app_server`` with the module-scoped ``fresh_app_server``, as tests/browser/test_deep_link.py
  does::

      @pytest.fixture(scope="module")
      def app_server(fresh_app_server):
          return fresh_app_server

* ``browser`` (session-wide Chromium) for a second context; ``screenshot(page, name)``.

Every server is isolated from the user's files:

* ``RIMSCOPE_HOME`` is a fresh temporary folder (empty run store, no torchvision cache);
* ``RIMSCOPE_OFFLINE=1`` (no download attempts);
* ``RIMSCOPE_DATA_DIR`` is a temporary folder holding only a tiny generated Fashion-MNIST
  (``fashion_mnist/{train,test}.npz``) so the Train page can run a short training run. MNIST has
  no folder there, so MNIST test images come from the bundled sample (``assets/samples``) and
  MNIST has no training data (the Train page must say so);
* ``RIMSCOPE_PRETRAINED_DIR``: the shipped ``pretrained/`` when it has a ``manifest.json``,
  otherwise (or with ``RIMSCOPE_BROWSER_TINY_PRETRAINED=1``) freshly built, untrained checkpoints
  for MNIST RIM and parallel LSTMs with a manifest written like
  ``core.grid.export.export_pretrained`` writes it;
* ``RIMSCOPE_MAX_CONCURRENT=1``;
* its secrets are ``<root>/secrets.toml`` only (``--secrets.files``): empty, so no sign-in,
  unless ``running_server(root, secrets=...)`` writes one (tests/browser/test_auth.py); a
  developer's own ``.streamlit/secrets.toml`` never reaches a test server.

The server listens on 127.0.0.1 only. Chromium is the Debian build at /usr/bin/chromium driven
by Playwright; tests are skipped (with the reason) when either is missing.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
SHOTS_DIR = REPO / "test-artifacts" / "screenshots"
SERVER_START_TIMEOUT_S = 240  # 2 busy cores: importing torch + streamlit can take a while
TINY_FASHION = {"train": 400, "test": 200}


def browser_missing_reason() -> str | None:
    if not Path(CHROMIUM).is_file() or not os.access(CHROMIUM, os.X_OK):
        return f"no Chromium at {CHROMIUM} (run scripts/install_browser.sh)"
    try:
        import playwright.sync_api  # noqa: F401
    except Exception as exc:  # not installed, or broken
        return f"playwright is not importable ({type(exc).__name__}: {exc}); pip install -r requirements-dev.txt"
    return None


# ------------------------------------------------------------------------------ test data


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_tiny_fashion(data_dir: Path) -> Path:
    """``fashion_mnist/{train,test}.npz`` with a few hundred random 28x28 images."""
    from core.data.datasets import DATASETS

    classes = np.array(DATASETS["fashion_mnist"].classes, dtype=str)
    rng = np.random.default_rng(0)
    out = data_dir / "fashion_mnist"
    out.mkdir(parents=True, exist_ok=True)
    for split, n in TINY_FASHION.items():
        y = (np.arange(n) % len(classes)).astype(np.int64)
        x = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        x[np.arange(n), y * 2 + 4, :] = 255  # a class-dependent bright row: learnable in a few steps
        np.savez(out / f"{split}.npz", x=x, y=y, classes=classes)
    return out


def build_tiny_pretrained(dest: Path) -> Path:
    """Freshly built MNIST RIM + parallel-LSTM checkpoints and a manifest (export_pretrained's format)."""
    import torch

    from core.data.datasets import DATASETS
    from core.models.registry import build_model, count_parameters
    from core.training.weights import save_weights

    errors = {"rim": 0.0312, "parallel_lstm": 0.0447}
    models = []
    for name, err in errors.items():
        torch.manual_seed(0)
        model = build_model(name, input_dim=DATASETS["mnist"].input_dim, num_classes=10)
        params = count_parameters(model)
        its = list(range(1, 21))
        meta = {
            "model": name, "dataset": "mnist", "seed": 0, "status": "completed", "message": "",
            "train_config": {"dataset": "mnist", "model": name, "seed": 0, "iterations": 20,
                             "batch_size": 100, "lr": 0.1},
            "data_source": {"train": "browser-test fixture (untrained)", "test": "bundled sample",
                            "n_train": 0, "n_test": 0, "note": ""},
            "metrics": {"parameters": params, "test_accuracy": 1 - err, "test_error": err,
                        "noisy_test_error": err + 0.01, "noise_var": 0.01, "train_time_s": 0.0},
            "history": {"iteration": its, "loss": [2.3 - 0.05 * i for i in range(20)],
                        "batch_acc": [0.1 + 0.02 * i for i in range(20)]},
            "evals": {"iteration": [10, 20], "test_acc": [0.2, 0.3], "test_loss": [2.0, 1.8]},
            "created": "2026-01-02T03:04:05+0000",
        }
        save_weights(model, meta, dest / "mnist" / name)
        models.append({
            "dataset": "mnist", "model": name, "seed": 0,
            "weights": f"mnist/{name}.safetensors", "metadata": f"mnist/{name}.json",
            "parameters": params, "test_accuracy": 1 - err, "test_error": err,
            "noisy_test_error": err + 0.01, "noise_var": 0.01, "iterations": 20,
            "data_source": "browser-test fixture (untrained)", "class_weighting": None, "holdout": "",
        })
    (dest / "manifest.json").write_text(json.dumps(
        {"models": models, "protocol": "browser-test fixture: untrained weights",
         "rebuild": "tests/browser/conftest.py build_tiny_pretrained"}, indent=1))
    return dest


# ------------------------------------------------------------------------------ server


def _stop_workers(runs_root: Path) -> None:
    """Stop training workers the server started for this module (each leads its own session)."""
    try:
        from core.runs.queue import worker_alive
        from core.runs.store import RunStore

        runs = RunStore(runs_root).list_runs()
    except Exception:
        return
    for r in runs:
        if r.pid and worker_alive(r.pid, r.run_id):
            try:
                os.killpg(r.pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pass


def _wait_healthy(url: str, proc: subprocess.Popen, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=5) as resp:
                if resp.status == 200 and resp.read().strip() == b"ok":
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"streamlit not healthy after {timeout:.0f} s:\n{log.read_text()[-4000:]}")


def stop_server(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's process group, SIGKILL after 30 s."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)


@contextlib.contextmanager
def running_server(root: Path, secrets: str = "", env_extra: dict | None = None, launcher: str = "streamlit"):
    """A ``streamlit run app.py`` on a free port with its own home and data under ``root``;
    yields ``{"url", "home", "data_dir", "pretrained", "log"}`` and stops it (and the training
    workers it started) afterwards. ``secrets``: the text of its secrets.toml (``{port}`` is
    its port); ``env_extra``: environment variables set on top of the test server's; ``launcher``:
    ``"python"`` starts it as ``make app`` does (``python app.py``, its preload first)."""
    home, data_dir = root / "home", root / "data"
    home.mkdir()
    data_dir.mkdir()
    write_tiny_fashion(data_dir)
    shipped = REPO / "pretrained"
    force_tiny = os.environ.get("RIMSCOPE_BROWSER_TINY_PRETRAINED") == "1"
    if (shipped / "manifest.json").is_file() and not force_tiny:
        pretrained = shipped
    else:
        pretrained = build_tiny_pretrained(root / "pretrained")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    secrets_file = root / "secrets.toml"
    secrets_file.write_text(secrets.replace("{port}", str(port)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RIMSCOPE_", "STREAMLIT_"))}
    env.update({
        "RIMSCOPE_HOME": str(home), "RIMSCOPE_OFFLINE": "1", "RIMSCOPE_DATA_DIR": str(data_dir),
        "RIMSCOPE_PRETRAINED_DIR": str(pretrained), "RIMSCOPE_MAX_CONCURRENT": "1",
        "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false", "PYTHONUNBUFFERED": "1",
    })
    env.update(env_extra or {})
    log = root / "streamlit.log"
    with open(log, "wb") as log_f:
        proc = subprocess.Popen(
            [sys.executable, *(["app.py"] if launcher == "python" else ["-m", "streamlit", "run", "app.py"]),
             "--server.port", str(port),
             "--server.headless", "true", "--server.address", "127.0.0.1",
             "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
             "--secrets.files", str(secrets_file)],
            cwd=str(REPO), env=env, stdin=subprocess.DEVNULL, stdout=log_f, stderr=subprocess.STDOUT,
            start_new_session=True)
    try:
        _wait_healthy(url, proc, log, SERVER_START_TIMEOUT_S)
        yield {"url": url, "home": home, "data_dir": data_dir, "pretrained": pretrained, "log": log}
    finally:
        _stop_workers(home / "runs")
        stop_server(proc)


def _serve(tmp_path_factory, name: str, launcher: str = "streamlit"):
    reason = browser_missing_reason()
    if reason:
        pytest.skip(reason)
    with running_server(tmp_path_factory.mktemp(name), launcher=launcher) as server:
        yield server


@pytest.fixture(scope="session")
def app_server(tmp_path_factory):
    """The session's shared server: ``{"url", "home", "data_dir", "pretrained", "log"}``."""
    yield from _serve(tmp_path_factory, "browser_app")


@pytest.fixture(scope="module")
def fresh_app_server(tmp_path_factory):
    """A server of the module's own, started for it (override ``app_server`` with it)."""
    yield from _serve(tmp_path_factory, "browser_app_fresh")


@pytest.fixture(scope="module")
def fresh_python_app_server(tmp_path_factory):
    """As ``fresh_app_server``, started as ``make app`` starts it: ``python app.py``."""
    yield from _serve(tmp_path_factory, "browser_app_fresh_python", launcher="python")


@pytest.fixture(scope="session")
def browser():
    reason = browser_missing_reason()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the item, so the ``page`` fixture knows whether the test failed."""
    outcome = yield
    rep = outcome.get_result()
    setattr(item, f"rep_{rep.when}", rep)


@pytest.fixture
def page(browser, app_server, request):
    """A fresh browser context (own Streamlit session) per test, 60 s default timeouts.

    On failure a screenshot goes to test-artifacts/screenshots/FAILED-<test>.png.
    """
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(60_000)
    context.set_default_navigation_timeout(60_000)
    pg = context.new_page()
    pg.rimscope_errors = []  # uncaught page errors, for failure messages
    pg.rimscope_server = app_server
    pg.on("pageerror", lambda exc: pg.rimscope_errors.append(str(exc)))
    try:
        yield pg
    finally:
        rep = getattr(request.node, "rep_call", None)
        if rep is not None and rep.failed:
            try:
                SHOTS_DIR.mkdir(parents=True, exist_ok=True)
                safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in request.node.name)
                pg.screenshot(path=str(SHOTS_DIR / f"FAILED-{safe}.png"), full_page=True, timeout=60_000)
            except Exception:
                pass
        context.close()


@pytest.fixture
def screenshot():
    """``screenshot(page, name)`` -> the saved path (see ``save_screenshot``)."""
    return save_screenshot


def save_screenshot(page, name: str) -> Path:
    """Full-page PNG in test-artifacts/screenshots/ (a record of the test; the documents'
    screenshots come from ``make screenshots``, scripts/screenshots.py)."""
    SHOTS_DIR.mkdir(parents=True, exist_ok=True)
    path = SHOTS_DIR / f"{name}.png"
    page.screenshot(path=str(path), full_page=True, animations="disabled", timeout=60_000)
    return path
