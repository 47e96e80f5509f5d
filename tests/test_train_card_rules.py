"""The rules behind the Train page's form, run cards and live charts (torch-light, no page):

- a protocol's validation split on a small data set (a tenth of the training images), in the form
  and in the recorded config;
- the kept-weights note in percent (new runs, and records holding the accuracy as a fraction);
- when a stop can still end a run;
- a run's model in Models and its health verdict;
- the live charts: each run its own line, points on short traces, end points drawn whole, and
  legend names that tell runs of one name apart.
"""

from __future__ import annotations

import dataclasses
import re
import types

import pytest

from core.catalog import health_warning, legend_names
from core.report.plots.training import RUN_DASHES, live_runs_figure, run_styles
from core.training.config import PROTOCOLS, TrainConfig, configs_from_form, protocol_of
from core.training.lifecycle import (
    as_protocol_asks,
    fit_validation,
    fitted_val_images,
    kept_best_note,
    protocol_val_images,
    readable_message,
    stop_applies,
)
from tests.run_helpers import FORM as BASE_FORM
from tests.run_helpers import tiny

FORM = {**BASE_FORM, "dataset": "animals10", "iterations": 4000, "batch_size": 100, "momentum": 0.0,
        "val_images": 106, "patience": 6, "clip_on": True, "eval_every": 250, "demo": False,
        "selection": "attention", "alpha": 1.0}  # the Adam 4k preset on Animals-10


def test_the_protocol_split_is_a_tenth_of_a_small_training_set():
    assert fitted_val_images(5000, 1060) == 106  # the shipped Animals-10 runs' split
    assert fitted_val_images(5000, 60_000) == 5000 and fitted_val_images(5000, 50_000) == 5000
    assert fitted_val_images(0, 1060) == 0 and fitted_val_images(5000, 5) == 1
    for n in (5, 300, 1060, 49_999, 60_000):  # the run's own fit (at its start) says the same
        assert fit_validation(TrainConfig(val_images=5000), n).val_images == fitted_val_images(5000, n)


def test_the_forms_fitted_protocol_split_is_recorded_as_the_protocol_asks_it():
    """106 of 1,060 from the Adam preset is recorded as 5,000 (the run fits it to 106 again), so
    the run reads as that protocol; a split the user chose is recorded as it is."""
    (cfg,), problems = configs_from_form(FORM, ["rim"], [0], n_train=1060)
    assert problems == [] and cfg.val_images == 106 and protocol_of(cfg.to_dict()) == "custom"
    recorded = as_protocol_asks(cfg, "converged", 1060)
    assert recorded.val_images == PROTOCOLS["converged"]["val_images"] == 5000
    assert fit_validation(recorded, 1060).val_images == 106
    assert protocol_of(recorded.to_dict()) == "converged"
    own = dataclasses.replace(cfg, val_images=50)
    assert as_protocol_asks(own, "converged", 1060) is own
    # another protocol, no protocol, or the number of images unknown: nothing changes
    assert as_protocol_asks(cfg, "paper", 1060) is cfg and as_protocol_asks(cfg, None, 1060) is cfg
    assert as_protocol_asks(cfg, "converged", None) is cfg
    # what the run cannot hold out is still refused, in words
    _, problems = configs_from_form({**FORM, "val_images": 1060}, ["rim"], [0], n_train=1060)
    assert problems == ["Validation images (1,060) must be fewer than the training images (1,060)."]


def test_the_kept_weights_note_reads_in_percent():
    assert kept_best_note(2500, 0.98765) == "kept the weights of iteration 2,500 (validation accuracy 98.8 %)"
    old = "completed; kept the weights of iteration 100 (validation accuracy 0.2100); 1 training state write failed"
    assert readable_message(old) == ("completed; kept the weights of iteration 100 (validation accuracy 21.0 %); "
                                     "1 training state write failed")
    assert readable_message(kept_best_note(100, 0.21)) == kept_best_note(100, 0.21)  # idempotent
    assert readable_message("stopped by the user after 5 iterations") == "stopped by the user after 5 iterations"
    assert readable_message("") == ""


def test_a_trained_run_says_its_kept_weights_in_percent(tiny_mnist_home):
    from core.training.lifecycle import load_run_data
    from core.training.loop import train

    cfg, train_data, test_data, _ = load_run_data(tiny(iterations=4, eval_every=2, val_images=30, noise_draws=0))
    result = train(cfg, train_data, test_data)
    m = re.search(r"kept the weights of iteration (\d+) \(validation accuracy (\d+\.\d) %\)", result.message)
    assert m, result.message
    assert int(m.group(1)) == result.metrics["best_iteration"]
    assert m.group(2) == f"{100 * result.metrics['val_accuracy']:.1f}"


@pytest.mark.parametrize("status, iteration, total, applies", [
    ("queued", 0, 10, True), ("running", 0, 10, True), ("running", 9, 10, True),
    ("running", 10, 10, False),  # the last iteration done: the final evaluation, no more stop checks
    ("running", 3, None, True), ("completed", 10, 10, False), ("stopped", 4, 10, False),
])
def test_a_stop_applies_until_the_last_iteration(status, iteration, total, applies):
    assert stop_applies(status, iteration, total) is applies


def test_health_warning_speaks_for_broken_models_only():
    collapsed = {"health": "collapsed", "health_reasons": ["class 3 predicted for 100.0 % of the test images"]}
    assert health_warning(collapsed) == ("**This model is collapsed**: class 3 predicted for 100.0 % of the test "
                                         "images. Its predictions say little about its method.")
    assert health_warning({"health": "diverged", "health_reasons": []}).startswith("**This model is diverged**: no reason")
    assert health_warning({"health": "healthy", "health_reasons": []}) == ""
    assert health_warning({"health": "not known"}) == "" and health_warning(None) == ""


def _run(run_id, model="rim", seed=0, total=1):
    return types.SimpleNamespace(run_id=run_id, model=model, seed=seed, total=total)


def test_a_one_iteration_run_draws_its_points_whole():
    run = _run("r1")
    one = {"iteration": [1], "loss": [2.3], "eval_iteration": [1], "test_acc": [0.177]}
    loss = live_runs_figure([run], {"r1": one}, "loss")
    acc = live_runs_figure([run], {"r1": one}, "acc")
    for fig in (loss, acc):
        (trace,) = fig.data
        assert "markers" in trace.mode and trace.cliponaxis is False
        lo, hi = fig.layout.xaxis.range
        assert lo < 0 and hi > 1  # the point at the last iteration is inside the axis, not on its edge
    long = {"iteration": list(range(1, 501)), "loss": [1.0] * 500, "eval_iteration": [], "test_acc": []}
    assert live_runs_figure([_run("r1", total=500)], {"r1": long}, "loss").data[0].mode == "lines"


def test_every_run_of_a_method_draws_its_own_line_in_both_charts():
    """Two runs of RIM with seed 0 (same colour): different dashes, the same in both charts even
    when one of them has no accuracy point yet."""
    a, b, c = _run("a", total=100), _run("b", total=100), _run("c", model="parallel_lstm", total=100)
    styles = run_styles([a, b, c])
    assert styles["a"]["color"] == styles["b"]["color"] != styles["c"]["color"]
    assert styles["a"]["dash"] != styles["b"]["dash"] and styles["c"]["dash"] == RUN_DASHES[0]
    many = run_styles([_run(str(i)) for i in range(2 * len(RUN_DASHES))])
    assert len({(s["dash"], s["width"]) for s in many.values()}) == 2 * len(RUN_DASHES)
    metrics = {"a": {"iteration": [1, 2], "loss": [2.3, 2.2], "eval_iteration": [], "test_acc": []},
               "b": {"iteration": [1, 2], "loss": [2.3, 2.1], "eval_iteration": [2], "test_acc": [0.3]},
               "c": {"iteration": [1, 2], "loss": [2.3, 2.0], "eval_iteration": [2], "test_acc": [0.4]}}
    loss = live_runs_figure([a, b, c], metrics, "loss", names={"a": "A", "b": "B", "c": "C"})
    acc = live_runs_figure([a, b, c], metrics, "acc", names={"a": "A", "b": "B", "c": "C"})
    assert [t.name for t in loss.data] == ["A", "B", "C"] and [t.name for t in acc.data] == ["B", "C"]
    dash = {t.name: t.line.dash for t in loss.data}
    assert dash["A"] != dash["B"] and {t.name: t.line.dash for t in acc.data}["B"] == dash["B"]


def test_legend_names_tell_runs_of_one_name_apart(tmp_path):
    """Two RIM seed-0 runs with own settings that differ in their protocol's settings: each name
    says its own values; a run whose name is its own alone gets nothing added."""
    from core.runs.store import RunStore

    store = RunStore(root=tmp_path / "runs")
    base = dict(dataset="mnist", model="rim", seed=0, holdout_sample=False)
    a = store.submit(TrainConfig(**base, iterations=30, lr=0.05))
    b = store.submit(TrainConfig(**{**base, "dataset": "fashion_mnist"}, iterations=50, lr=0.05))
    c = store.submit(TrainConfig(**{**base, "model": "parallel_lstm"}, iterations=30))
    names = legend_names(store.list_runs())
    assert len(set(names.values())) == 3
    assert names[a].endswith(f"(run {a[-8:]}) · data set MNIST, iterations 30")
    assert names[b].endswith(f"(run {b[-8:]}) · data set Fashion-MNIST, iterations 50")
    assert names[a].startswith("RIM (paper's method) · own settings · seed 0")
    assert names[c].endswith(f"(run {c[-8:]})")  # the only parallel-LSTM run: its name alone


def test_a_protocols_split_on_a_data_set():
    assert protocol_val_images("converged", 1060) == 106 and protocol_val_images("converged-24k", 1060) == 106
    assert protocol_val_images("converged") == 5000 and protocol_val_images("converged", 60_000) == 5000
    assert protocol_val_images("paper", 1060) == 0 and protocol_val_images(None) == TrainConfig().val_images
