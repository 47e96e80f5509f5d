"""core.runs.compare: a run of the run store as Compare shows it beside the shipped methods:
its curves, its table row and why it is not on an equal footing with the shipped runs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from core.report.plots.training import curves_overlay
from core.runs.compare import (
    NO_HISTORY,
    OwnRun,
    ShippedProtocol,
    compare_view,
    offer_reason,
    option_name,
    own_run,
    shipped_protocol,
)
from core.runs.schema import RunConfig, RunInfo, RunStatus
from core.training.config import TrainConfig

CONVERGED_ROWS = [{"dataset": "mnist", "model": m, "seed": s, "protocol": "converged", "iterations": 4000}
                  for m in ("rim", "parallel_lstm") for s in (0, 1)]


def info(status="completed", iteration=4000, config=None, run_id="20261201-120000-abcdef12") -> RunInfo:
    tc = config if config is not None else TrainConfig.from_protocol("converged", model="rim").to_dict()
    return RunInfo.of(run_id, RunConfig(run_id=run_id, dataset="mnist", model="rim", train_config=tc),
                      RunStatus(status=status, iteration=iteration))


def meta(n=4000, loss=None, test_error=0.0123, **extra) -> dict:
    its = list(range(1, n + 1))
    loss = loss if loss is not None else np.linspace(2.3, 0.1, n).tolist()
    return {"model": "rim", "dataset": "mnist", "history": {"iteration": its, "loss": loss, "batch_acc": [0.5] * n},
            "evals": {"iteration": its[249::250], "test_acc": [0.9] * len(its[249::250]),
                      "test_loss": [0.3] * len(its[249::250])},
            "metrics": {"test_error": test_error, "test_n": 10000},
            "data_source": {"test": "npz folder (/data/mnist/test.npz)", "n_test": 10000}, **extra}


def test_shipped_protocol_is_read_from_the_summary_rows():
    p = shipped_protocol(CONVERGED_ROWS, "mnist")
    assert p.name == "converged" and p.settings["optimizer"] == "adam" and p.settings["iterations"] == 4000
    assert p.text == "Adam, cosine, 4,000 iterations"
    # rows without a protocol take the fallback; their iterations count
    rows = [{"dataset": "mnist", "model": "rim", "iterations": 80}]
    assert shipped_protocol(rows, "mnist", fallback="paper").text == "SGD, constant rate, 80 iterations"
    assert shipped_protocol([], "mnist", fallback="paper").text == "SGD, constant rate, 1,000 iterations"
    unknown = shipped_protocol([], "mnist")
    assert unknown.settings == {} and unknown.text == "settings not recorded"


def test_a_run_trained_like_the_shipped_ones_is_on_an_equal_footing():
    view = compare_view(OwnRun(info(), meta()), "RIM · Adam 4k · seed 0 (trained, run abcdef12)",
                        shipped_protocol(CONVERGED_ROWS, "mnist"))
    assert view.footing == [] and view.warning == ""
    row = view.row
    assert row == {"your run": "RIM · Adam 4k · seed 0 (trained, run abcdef12)", "test error (%)": 1.23,
                   "tested on": "10,000 test images", "health": "healthy", "state": "completed",
                   "budget": "4,000 iterations · Adam lr 0.002 · cosine"}
    assert set(view.curves) == {"loss", "batch_acc", "test_acc", "test_loss"}
    loss = view.curves["loss"]
    assert loss["label"] == row["your run"] and loss["run_id"] == "20261201-120000-abcdef12"
    assert loss["model"] == "rim" and list(loss["x"][[0, -1]]) == [1, 4000]


def test_another_budget_a_stop_a_demo_and_changed_model_settings_are_each_said():
    tc = TrainConfig(model="rim", iterations=1000, data_source="sample", model_overrides={"alpha": 0.0}).to_dict()
    rec = OwnRun(info(status="stopped", iteration=300, config=tc), meta(n=300, test_error=0.175) | {
        "metrics": {"test_error": 0.175, "test_n": 200}, "data_source": {"test": "bundled sample", "n_test": 200}})
    view = compare_view(rec, "RIM (demo)", shipped_protocol(CONVERGED_ROWS, "mnist"))
    assert view.footing == [
        "trained for 1,000 iterations with SGD lr 0.1, constant rate; the shipped curves: Adam, cosine, 4,000 "
        "iterations (also another validation split, early stopping, gradient clipping)",
        "stopped early, at iteration 300 of 1,000",
        "a demo: trained on 800 images of the bundled sample and tested on the other 200; the shipped runs train "
        "on the whole training split and are tested on the whole test split",
        "model settings changed (alpha 0.0)"]
    assert view.warning.startswith("**RIM (demo)** is not on an equal footing with the shipped curves: trained for")
    assert view.row["state"] == "stopped at 300 of 1,000"
    assert view.row["budget"] == "300 iterations · SGD lr 0.1 · constant rate"
    assert view.row["tested on"] == "200 held-out (demo)" and view.row["test error (%)"] == 17.5


def test_a_diverged_or_collapsed_run_is_named_so():
    blown = [2.3] * 10 + [50.0] * 3990  # above 10x the first loss: diverged
    view = compare_view(OwnRun(info(), meta(loss=blown)), "RIM", shipped_protocol(CONVERGED_ROWS, "mnist"))
    assert view.row["health"] == "diverged"
    assert view.footing == [] and view.warning.startswith("It is **diverged** (")
    confusion = np.zeros((10, 10), int)
    confusion[:, 3] = 10  # one class for every test image
    collapsed = meta() | {"metrics": {"test_error": 0.9, "confusion": confusion.tolist()}}
    view = compare_view(OwnRun(info(), collapsed), "RIM", shipped_protocol(CONVERGED_ROWS, "mnist"))
    assert view.row["health"] == "collapsed" and "It is **collapsed** (" in view.warning


@pytest.mark.parametrize("status, message, reason", [
    ("queued", "", "waiting to train"), ("running", "", "still training"),
    ("failed", "No MNIST train data found", "failed: No MNIST train data found"),
    ("interrupted", "", "interrupted before the end of its schedule (resume it on the Train page)"),
    ("diverged", "", "stopped on a non-finite loss, so it has no weights and no final test error")])
def test_runs_without_weights_are_not_offered_and_say_why(status, message, reason):
    run = info(status=status)
    run.message = message
    assert offer_reason(run, None) == reason


def test_a_model_without_history_is_not_offered_and_one_takes_its_curves_from_the_store(tmp_path):
    from core.models.registry import build_model
    from core.runs.store import RunStore
    from core.training.weights import weights_bytes

    store = RunStore(root=tmp_path / "runs")
    w, j = weights_bytes(build_model("rim", input_dim=28), {"model": "rim", "dataset": "mnist", "seed": 0,
                                                             "metrics": {"test_error": 0.1}})
    rid = store.import_weights(w, j, "mnist")
    rec = own_run(store, store.get(rid))
    assert not rec.offered and rec.reason == NO_HISTORY
    assert offer_reason(store.get(rid), None) == "its model's metadata is missing or unreadable"
    with open(store.run_dir(rid) / "metrics.jsonl", "w") as f:  # what a worker writes as it trains
        for i in (1, 2, 3):
            f.write(json.dumps({"kind": "iter", "iteration": i, "loss": 2.0 / i, "batch_acc": 0.1 * i}) + "\n")
        f.write(json.dumps({"kind": "eval", "iteration": 3, "test_acc": 0.4, "test_loss": 1.2}) + "\n")
    rec = own_run(store, store.get(rid))
    assert rec.offered and rec.meta["history"]["iteration"] == [1, 2, 3] and rec.iterations_done == 3
    view = compare_view(rec, "RIM (uploaded)", ShippedProtocol(""))
    assert list(view.curves["test_acc"]["y"]) == [0.4]
    assert view.row["budget"] == "3 iterations · settings not recorded"
    assert view.footing == ["its training settings are not recorded"]


def test_own_runs_are_dashed_lines_of_their_own_and_never_in_a_mean():
    shipped = [{"model": "rim", "seed": s, "x": np.arange(1, 5.0), "y": np.full(4, 1.0 + s)} for s in (0, 1)]
    own = {"model": "rim", "seed": 0, "x": np.arange(1, 5.0), "y": np.full(4, 9.0), "label": "RIM (trained, run x)"}
    alone = curves_overlay(shipped, "loss")
    fig = curves_overlay(shipped, "loss", own=[own])
    assert len(fig.data) == len(alone.data) + 1
    mean = next(t for t in fig.data if "mean of 2 seeds" in t.name)
    assert list(mean.y) == [1.5] * 4  # the seeds' mean, without the user's run
    mine = fig.data[-1]
    assert mine.name == "RIM (trained, run x)" and mine.line.dash == "dash" and list(mine.y) == [9.0] * 4
    assert mine.legendgrouptitle.text == "Your runs"
    assert len(curves_overlay([], "loss", own=[own]).data) == 1  # drawn even with no shipped curves


def test_a_picker_names_an_unhealthy_run_by_its_health():
    blown = [2.3] * 10 + [50.0] * 3990
    assert option_name(OwnRun(info(), meta(loss=blown)), "RIM (trained, run x)") == "RIM (trained, run x) · diverged"
    assert option_name(OwnRun(info(), meta()), "RIM (trained, run x)") == "RIM (trained, run x)"


def test_the_settings_compared_are_those_that_tell_the_protocols_apart():
    from core.runs.compare import SETTING_NAMES
    from core.training.config import _PROTOCOL_KEYS

    assert set(SETTING_NAMES) == set(_PROTOCOL_KEYS)
