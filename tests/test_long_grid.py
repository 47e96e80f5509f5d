"""The long grid's budget rule and order (core.grid.long), fixed before its first run."""
import json

import pytest

from core.grid.cells import run_path
from core.grid.long import FOLDERS, budget, cells, job


def _write(results, ds, model, seed, gains_late: bool, iterations=12000):
    vals = [0.9, 0.95, 0.96, 0.97] + ([0.975, 0.98] if gains_late else [0.97, 0.9705])  # cut at 9,000
    rec = {"train_config": {"iterations": iterations, "val_images": 5000},
           "evals": {"iteration": [3000, 6000, 8000, 9000, 10500, 12000][: len(vals)], "val_acc": vals}}
    p = run_path(results / FOLDERS[iterations], ds, model, seed)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(rec))


def test_mnist_keeps_12000_when_90_percent_meet_the_criterion_else_24000(tmp_path):
    for m in ("rim", "parallel_lstm", "entnet"):
        for s in range(5):
            _write(tmp_path, "mnist", m, s, gains_late=(m, s) == ("entnet", 0))  # 14 of 15 meet it
            _write(tmp_path, "fashion_mnist", m, s, gains_late=m == "parallel_lstm" and s < 2)  # 13 of 15
    assert budget("mnist", tmp_path) == 12000
    assert budget("fashion_mnist", tmp_path) == 24000
    with pytest.raises(ValueError, match="0 of the 15"):
        budget("mnist", tmp_path / "elsewhere")


def test_cifar10_waits_for_its_pilot_then_keeps_12000_only_when_both_meet_it(tmp_path):
    assert budget("cifar10", tmp_path) is None
    _write(tmp_path, "cifar10", "rim", 0, gains_late=False)
    assert budget("cifar10", tmp_path) is None
    _write(tmp_path, "cifar10", "parallel_lstm", 0, gains_late=True)
    assert budget("cifar10", tmp_path) == 24000
    _write(tmp_path, "cifar10", "parallel_lstm", 0, gains_late=False)
    assert budget("cifar10", tmp_path) == 12000


def test_the_order_and_the_jobs():
    order = cells()
    assert order[0] == ("mnist", "rim", 0, None)
    pilot = order.index(("cifar10", "rim", 0, 12000))
    assert all(c[0] == "mnist" for c in order[:pilot])  # MNIST first, then the CIFAR-10 pilot, ...
    assert order.index(("fashion_mnist", "rim", 0, None)) > pilot
    assert order.index(("mnist", "rim", 5, None)) > order.index(("cifar10", "indrnn", 4, None))  # seeds 5-9 after
    assert order[-1][1] in ("parallel_lstm_6", "rim_all", "rim_alpha0")  # the controls last
    assert len(order) == len(set(order))
    j = job("mnist", "rmc", 3, 12000, None, "res")
    assert j["protocol"] == "converged-12k" and j["threads"] == 1 and j["path"].endswith("res/budget/runs/mnist/rmc_s3.json")
