"""One config, three ways to train it (the CLI, the run store's worker, a grid cell): the same run.

Each path loads its data, fits the validation split to it and finishes the run through
core.training.lifecycle, so the weights, the settings, the history and the metrics they leave
are the same; here on a tiny MNIST-shaped data set where the protocol's validation split is too
large (the small-data rule shrinks it to a tenth of the training images in every path).
"""

from __future__ import annotations

import json

import pytest
from safetensors.torch import load_file

from core.grid.cells import train_cell
from core.runs.schema import WEIGHTS_STEM
from core.runs.store import RunStore
from core.runs.worker import run_worker
from core.training import cli
from core.training.config import PROTOCOLS, TrainConfig
from core.training.lifecycle import fit_validation
from tests.run_helpers import write_tiny_mnist

N_TRAIN = 300
TINY = dict(optimizer="adam", lr=2e-3, momentum=0.0, weight_decay=0.0, schedule="cosine", iterations=6,
            batch_size=20, val_images=100, patience=0, eval_every=3, grad_clip=1.0)
MODEL = {"num_units": 2, "hidden_size": 8}
SAME = dict(dataset="mnist", model="parallel_lstm", seed=1, noise_draws=1, threads=1, device="cpu")


def _run(stem):
    meta = json.loads(stem.with_suffix(".json").read_text())
    return load_file(str(stem.with_suffix(".safetensors"))), meta


def test_fit_validation_is_idempotent():
    cfg = TrainConfig(val_images=5000)
    fitted = fit_validation(cfg, 1593)
    assert fitted.val_images == 159 and cfg.val_images == 5000
    assert fit_validation(fitted, 1593) is fitted
    assert fit_validation(TrainConfig(val_images=0), 10).val_images == 0
    assert fit_validation(TrainConfig(val_images=100), 60_000).val_images == 100


@pytest.mark.slow
def test_cli_worker_and_grid_train_the_same_run(tmp_path, monkeypatch):
    data = tmp_path / "data"
    write_tiny_mnist(data, n=N_TRAIN)
    monkeypatch.setitem(PROTOCOLS, "tiny-test", TINY)

    sets = [x for k, v in MODEL.items() for x in ("--set", f"{k}={v}")]
    assert cli.main(["--protocol", "tiny-test", "--dataset", "mnist", "--model", "parallel_lstm", "--seed", "1",
                     "--noise-draws", "1", "--threads", "1", "--device", "cpu", "--data-dir", str(data),
                     "--out", str(tmp_path / "cli" / "run"), "--quiet", *sets]) == 0
    cli_w, cli_m = _run(tmp_path / "cli" / "run")

    store = RunStore(root=tmp_path / "store")
    cfg = TrainConfig.from_protocol("tiny-test", model_overrides=dict(MODEL), **SAME)
    rid = store.submit(cfg, data_dir=data)
    assert run_worker(store.run_dir(rid)) == "completed"
    work_w, work_m = _run(store.run_dir(rid) / WEIGHTS_STEM)

    cell = tmp_path / "grid" / "runs" / "mnist" / "parallel_lstm_s1.json"
    out = train_cell(dict(dataset="mnist", model="parallel_lstm", seed=1, iterations=6, eval_every=3,
                          path=str(cell), protocol="tiny-test", device="cpu", noise_draws=1,
                          data_dir=str(data), overrides=dict(MODEL), threads=1))
    assert out["status"] == "completed"
    grid_w, grid_m = _run(cell.with_suffix(""))

    assert cli_m["train_config"]["val_images"] == N_TRAIN // 10  # the small-data rule, in every path
    for w, m in ((work_w, work_m), (grid_w, grid_m)):
        assert m["train_config"] == cli_m["train_config"]
        assert m["data_source"] == cli_m["data_source"]
        assert m["history"] == cli_m["history"] and m["evals"] == cli_m["evals"]
        timeless = {k: v for k, v in m["metrics"].items() if k != "train_time_s"}
        assert timeless == {k: v for k, v in cli_m["metrics"].items() if k != "train_time_s"}
        assert w.keys() == cli_w.keys()
        assert all(w[k].equal(cli_w[k]) for k in w)
    # every path dropped its training states: the run completed
    assert not (tmp_path / "cli" / "run.ckpt").exists()
    assert not (store.run_dir(rid) / "ckpt").exists()
    assert not cell.with_suffix(".ckpt").exists()
    # a grid cell's record carries its health class as the tables' rule gives it (core.report.health)
    from core.report.health import HEALTH_KEYS, classify

    assert {k: grid_m[k] for k in HEALTH_KEYS} == classify(grid_m)
    assert list(grid_m)[list(grid_m).index("status") + 1] == "health"
