"""Shared test setup: no network, no /work/shared, no user caches.

Every test runs with ``RIMSCOPE_OFFLINE=1`` and with ``RIMSCOPE_DATA_DIR`` and
``RIMSCOPE_HOME`` pointing at fresh temporary folders, so data come only from what a test
writes itself or from the bundled samples in ``assets/samples``.
"""

from __future__ import annotations

import os
import sys

import pytest

from tests.threads import TEST_THREADS  # why one thread: there

os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(TEST_THREADS)

from tests.run_helpers import write_tiny_mnist  # noqa: E402  (after the thread setting above)


@pytest.fixture(autouse=True)
def _isolated_data_env(tmp_path_factory, monkeypatch):
    data_dir = tmp_path_factory.mktemp("rimscope_data")
    home = tmp_path_factory.mktemp("rimscope_home")
    monkeypatch.setenv("RIMSCOPE_OFFLINE", "1")
    monkeypatch.setenv("RIMSCOPE_DATA_DIR", str(data_dir))
    monkeypatch.setenv("RIMSCOPE_HOME", str(home))
    monkeypatch.delenv("RIMSCOPE_ANIMALS10_DIR", raising=False)
    try:  # loaded data sets are cached per process; start every test with an empty cache
        from core.data import datasets

        datasets._CACHE.clear()
        from core.data import online

        online.clear_cache()  # the download probe's answers too
    except ImportError:
        pass
    yield data_dir


def _reset_threads() -> None:
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(TEST_THREADS)


@pytest.fixture(autouse=True)
def _test_threads():
    """Every test starts and leaves with TEST_THREADS torch threads, whatever a test sets (after
    a test too, so the next module's module-scoped fixtures start from it)."""
    _reset_threads()
    yield
    _reset_threads()


@pytest.fixture
def tiny_mnist_home(tmp_path, monkeypatch):
    """``tmp_path`` holding a tiny MNIST-shaped data set in ``data/`` (tests/run_helpers.py):
    RIMSCOPE_DATA_DIR points at it, RIMSCOPE_HOME at ``home/``, offline, and workers start at
    normal priority (RIMSCOPE_WORKER_NICE=0)."""
    write_tiny_mnist(tmp_path / "data")
    monkeypatch.setenv("RIMSCOPE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RIMSCOPE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RIMSCOPE_OFFLINE", "1")
    monkeypatch.setenv("RIMSCOPE_WORKER_NICE", "0")
    return tmp_path


def _has_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def pytest_report_header(config):
    return "cuda tests: run (torch sees a GPU)" if _has_gpu() else \
        "cuda tests: DESELECTED (torch sees no GPU on this machine; they run on a GPU machine)"


def pytest_collection_modifyitems(config, items):
    """Tests marked ``cuda`` need a GPU: without one they are deselected, visibly (header and
    the deselected count), not skipped one by one."""
    if _has_gpu():
        return
    keep, drop = [], []
    for item in items:
        (drop if item.get_closest_marker("cuda") else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
