"""A test server: ``streamlit run app.py`` (or ``python app.py``) on a free port with its own home,
data and pretrained models, Chromium's path and flags, and whether the browser tests can run
here. tests/browser/conftest.py makes the fixtures of it; a test that needs a server of its own
(its secrets, its environment) uses :func:`running_server` directly."""

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
    """Freshly built MNIST RIM + parallel-LSTM models and a manifest (export_pretrained's format)."""
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
         "rebuild": "tests/browser/server.py build_tiny_pretrained"}, indent=1))
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
