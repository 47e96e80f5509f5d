"""Fixtures for the page tests: tiny pretrained models and tiny reproduction outputs.

Everything is built here, in temporary folders: models through
``core.training.weights.save_weights`` plus a ``manifest.json``, and reproduction summaries
through ``core.report.tables.write_tables`` on fabricated run JSONs. Nothing is trained.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

PAGES = Path(__file__).resolve().parents[2] / "pages"

# (data set, model) -> clean test error of the fabricated pretrained model: all distinct,
# so a test can tell which model a page shows.
PRETRAINED_ERRORS = {
    ("mnist", "rim"): 0.0312, ("mnist", "parallel_lstm"): 0.0447, ("mnist", "indrnn"): 0.0581,
    ("cifar10", "rim"): 0.5523, ("cifar10", "parallel_lstm"): 0.5761, ("cifar10", "indrnn"): 0.6102,
}
RESULT_MODELS = ("rim", "parallel_lstm", "entnet", "rmc", "indrnn")
BASE_ERROR = {"rim": 0.030, "parallel_lstm": 0.034, "entnet": 0.045, "rmc": 0.036, "indrnn": 0.050}


def fake_history(iterations: int, final_error: float, seed: int, eval_every: int = 10) -> tuple[dict, dict]:
    rng = np.random.default_rng(seed)
    it = list(range(1, iterations + 1))
    loss = (2.3 * np.exp(-np.arange(iterations) / (iterations / 4)) + 0.1 + rng.uniform(0, 0.1, iterations)).tolist()
    acc = np.clip(1 - np.asarray(loss) / 2.5, 0, 1).tolist()
    ev = list(range(eval_every, iterations + 1, eval_every))
    test_acc = np.linspace(0.2, 1 - final_error, len(ev)).tolist()
    return ({"iteration": it, "loss": loss, "batch_acc": acc},
            {"iteration": ev, "test_acc": test_acc, "test_loss": [1.0] * len(ev)})


def fake_meta(dataset: str, model: str, seed: int, error: float, iterations: int = 40, status: str = "completed",
              parameters: int = 1000) -> dict:
    history, evals = fake_history(iterations, error, seed)
    return {
        "model": model, "dataset": dataset, "seed": seed, "status": status, "message": "",
        "train_config": {"dataset": dataset, "model": model, "seed": seed, "iterations": iterations,
                         "batch_size": 100, "lr": 0.1},
        "data_source": {"train": "fixture", "test": "fixture", "n_train": 500, "n_test": 100, "note": ""},
        "metrics": {"parameters": parameters, "test_accuracy": 1 - error, "test_error": error,
                    "noisy_test_error": error + 0.01, "noise_var": 0.01, "train_time_s": 1.0},
        "history": history, "evals": evals, "created": "2026-01-02T03:04:05+0000",
    }


def build_pretrained(dest: Path) -> Path:
    import torch

    from core.data.datasets import DATASETS
    from core.models.registry import build_model, count_parameters
    from core.training.weights import save_weights

    models = []
    for (ds, name), err in PRETRAINED_ERRORS.items():
        torch.manual_seed(0)
        model = build_model(name, input_dim=DATASETS[ds].input_dim)
        meta = fake_meta(ds, name, 0, err, parameters=count_parameters(model))
        save_weights(model, meta, dest / ds / name)
        models.append({"dataset": ds, "model": name, "seed": 0, "weights": f"{ds}/{name}.safetensors",
                       "metadata": f"{ds}/{name}.json", "parameters": count_parameters(model),
                       "test_accuracy": 1 - err, "test_error": err, "noisy_test_error": err + 0.01,
                       "iterations": 40})
    (dest / "manifest.json").write_text(json.dumps({"models": models, "protocol": "fixture"}))
    return dest


COLLAPSED_RUN = ("mnist", "indrnn", 2)  # in the converged fixture: one class for every test image


def build_results(out: Path, datasets=("mnist", "fashion_mnist"), seeds=(0, 1, 2), offset: float = 0.0,
                  iterations: int = 40, protocol: str | None = None, collapsed=()) -> Path:
    """Fabricated run JSONs for every data set x model x seed, then the tables. ``collapsed``:
    (data set, model, seed) cells that predict one class for every test image (unhealthy)."""
    from core.grid.cells import run_path
    from core.report.tables import write_tables

    rng = np.random.default_rng(1)
    for d_i, ds in enumerate(datasets):
        for model in RESULT_MODELS:
            for seed in seeds:
                err = BASE_ERROR[model] + 0.1 * d_i + offset + rng.normal(0, 0.002)
                meta = fake_meta(ds, model, seed, err, iterations)
                if protocol:
                    meta["protocol"] = protocol
                if (ds, model, seed) in collapsed:
                    confusion = np.zeros((10, 10), int)
                    confusion[:, 1] = 10
                    meta["metrics"].update(test_error=0.9, noisy_test_error=0.9, confusion=confusion.tolist())
                p = run_path(out, ds, model, seed)
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(json.dumps(meta))
    write_tables(out)
    return out


@pytest.fixture(scope="session")
def fixture_dirs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("page_fixtures")
    pre = build_pretrained(root / "pretrained")
    results = root / "results"
    build_results(results / "paper")
    build_results(results / "converged", offset=-0.005, iterations=60, protocol="converged",
                  collapsed=(COLLAPSED_RUN,))
    build_results(results / "unequal_init" / "long", seeds=(0, 1), offset=-0.01, iterations=80)
    empty = root / "empty"
    (empty / "pretrained").mkdir(parents=True)
    (empty / "results").mkdir()
    return {"pretrained": pre, "results": results, "empty_pretrained": empty / "pretrained",
            "empty_results": empty / "results"}


def _pages_read(monkeypatch, pretrained: Path, results: Path, home: Path) -> None:
    """Pages read these pretrained models and results and the run store under ``home``;
    offline, and the queue paused (nothing trains)."""
    monkeypatch.setenv("RIMSCOPE_PRETRAINED_DIR", str(pretrained))
    monkeypatch.setenv("RIMSCOPE_RESULTS_DIR", str(results))
    monkeypatch.setenv("RIMSCOPE_HOME", str(home))
    monkeypatch.setenv("RIMSCOPE_OFFLINE", "1")
    monkeypatch.setenv("RIMSCOPE_MAX_CONCURRENT", "0")


@pytest.fixture
def page_env(fixture_dirs, tmp_path, monkeypatch) -> dict[str, Path]:
    """Pages see the fixture's pretrained models and results, and an empty run store."""
    _pages_read(monkeypatch, fixture_dirs["pretrained"], fixture_dirs["results"], tmp_path / "home")
    return {**fixture_dirs, "home": tmp_path / "home"}


@pytest.fixture
def empty_env(fixture_dirs, tmp_path, monkeypatch) -> dict[str, Path]:
    """No pretrained models, no results, no runs: pages must explain how to get them."""
    _pages_read(monkeypatch, fixture_dirs["empty_pretrained"], fixture_dirs["empty_results"], tmp_path / "home")
    return fixture_dirs
