"""Tests for core.training: the training loop, its settings, MNIST holdout and the CLI.

Training runs on tiny synthetic data (``LoadedData`` built here, or npz files written to a
temporary folder) with a tiny RIM, for a handful of iterations.
"""

from __future__ import annotations

import dataclasses
import math
import os
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from core.data import plan
from core.data.datasets import LoadedData
from core.data.plan import prepare_training_data, training_data_plan
from core.errors import ConfigError, DataUnavailableError
from core.eval.predict import evaluate
from core.models.registry import count_parameters
from core.training import cli, config, loop
from core.training.config import TrainConfig
from core.training.loop import train
from core.training.weights import load_weights
from tests.run_helpers import FORM

ROOT = Path(__file__).resolve().parent.parent
TINY_RIM = {"hidden_size": 8, "num_units": 3, "k_active": 2}


def synth(n: int, seed: int, labels=None, shape=(28, 28)) -> LoadedData:
    r = np.random.default_rng(seed)
    y = np.asarray(labels, dtype=np.int64) if labels is not None else r.integers(0, 10, n).astype(np.int64)
    x = r.integers(0, 256, (len(y), *shape), dtype=np.uint8)
    return LoadedData(x, y, [str(i) for i in range(10)], "synthetic", np.arange(len(y)))


def cfg(**kw) -> TrainConfig:
    base = dict(dataset="mnist", model="rim", iterations=5, batch_size=8, lr=0.1, eval_every=2,
                eval_samples=10, noise_draws=1, threads=1, model_overrides=dict(TINY_RIM))
    base.update(kw)
    return TrainConfig(**base)


@pytest.fixture(scope="module")
def data():
    return synth(48, 0), synth(20, 1)


# --------------------------------------------------------------------------- the loop


def test_history_evals_and_metrics(data):
    tr, te = data
    r = train(cfg(), tr, te)
    assert r.status == "completed" and r.message == ""
    assert r.history["iteration"] == [1, 2, 3, 4, 5]
    assert len(r.history["loss"]) == len(r.history["batch_acc"]) == 5
    assert all(math.isfinite(v) and v > 0 for v in r.history["loss"])
    assert all(0 <= a <= 1 for a in r.history["batch_acc"])
    assert r.evals["iteration"] == [2, 4, 5]  # every eval_every, and at the end
    assert len(r.evals["test_acc"]) == len(r.evals["test_loss"]) == 3
    m = r.metrics
    assert m["iterations_done"] == 5 and m["test_n"] == 20
    assert m["test_error"] == pytest.approx(1 - m["test_accuracy"])
    assert m["parameters"] == count_parameters(r.model) > 0
    assert len(m["per_class_accuracy"]) == 10 and np.sum(m["confusion"]) == 20
    assert m["noise_draws"] == 1 and 0 <= m["noisy_test_accuracy"] <= 1
    # the final accuracy is that of the returned model
    assert evaluate(r.model, te.images, te.labels, 10).accuracy == m["test_accuracy"]
    assert r.model.config.hidden_size == 8


def test_training_changes_the_weights_and_lowers_the_loss():
    """A learnable task (label = brightest row band) on the real loop: the loss must fall."""
    r = np.random.default_rng(3)
    y = r.integers(0, 4, 64)
    x = r.integers(0, 60, (64, 28, 28)).astype(np.uint8)
    for i, label in enumerate(y):
        x[i, 7 * label : 7 * label + 7] = 255
    tr = LoadedData(x, y.astype(np.int64), [str(i) for i in range(10)], "synthetic")
    res = train(cfg(model="parallel_lstm", model_overrides={"hidden_size": 8, "num_units": 2}, iterations=40,
                    batch_size=16, lr=0.5, eval_every=40, noise_draws=0), tr, tr)
    first, last = np.mean(res.history["loss"][:5]), np.mean(res.history["loss"][-5:])
    assert last < 0.8 * first, (first, last)


def test_callback_events(data):
    tr, te = data
    events = []
    r = train(cfg(), tr, te, callback=events.append)
    iters = [e for e in events if e["kind"] == "iter"]
    evals = [e for e in events if e["kind"] == "eval"]
    assert len(iters) + len(evals) == len(events)
    assert [e["iteration"] for e in iters] == [1, 2, 3, 4, 5]
    assert all(e["total"] == 5 and e["elapsed_s"] >= 0 for e in iters)
    assert [e["loss"] for e in iters] == r.history["loss"]
    assert [e["iteration"] for e in evals] == [2, 4, 5]
    assert [e["test_acc"] for e in evals] == r.evals["test_acc"]
    # an eval event comes right after the iteration it belongs to
    for i, e in enumerate(events):
        if e["kind"] == "eval":
            assert events[i - 1]["kind"] == "iter" and events[i - 1]["iteration"] == e["iteration"]


def test_should_stop_keeps_partial_history(data):
    tr, te = data
    polls = []

    def stop():
        polls.append(1)
        return len(polls) > 3

    r = train(cfg(iterations=50), tr, te, should_stop=stop)
    assert r.status == "stopped" and "3 iterations" in r.message
    assert r.history["iteration"] == [1, 2, 3] and r.metrics["iterations_done"] == 3
    assert r.evals["iteration"] == [2]
    assert "test_accuracy" in r.metrics  # what it learned so far is still evaluated


def test_stop_before_the_first_iteration(data):
    tr, te = data
    r = train(cfg(), tr, te, should_stop=lambda: True)
    assert r.status == "stopped" and r.history["loss"] == [] and r.metrics["iterations_done"] == 0


def test_real_divergence_is_reported(data):
    """SGD with lr 10 and momentum 0.9 blows a RIM up within a few dozen iterations."""
    tr, te = data
    events = []
    r = train(cfg(iterations=60, lr=10, momentum=0.9, batch_size=16, eval_every=5), tr, te,
              callback=events.append)
    assert r.status == "diverged"
    assert "iteration" in r.message and ("nan" in r.message or "inf" in r.message)
    assert "learning rate" in r.message
    assert not math.isfinite(r.history["loss"][-1])
    assert all(math.isfinite(v) for v in r.history["loss"][:-1])
    assert len(r.history["loss"]) < 60
    for key in ("test_accuracy", "test_error", "noisy_test_accuracy", "confusion"):
        assert key not in r.metrics
    assert r.metrics["iterations_done"] == len(r.history["loss"])
    assert events[-1]["kind"] == "iter" and not math.isfinite(events[-1]["loss"])
    # the same settings with a small learning rate do not diverge
    assert train(cfg(iterations=5, lr=0.1, momentum=0.9, batch_size=16), tr, te).status == "completed"


def test_seeded_runs_are_deterministic(data):
    tr, te = data
    a, b = train(cfg(seed=3), tr, te), train(cfg(seed=3), tr, te)
    c = train(cfg(seed=4), tr, te)
    assert a.history == b.history and a.evals == b.evals
    for k, v in a.model.state_dict().items():
        assert torch.equal(v, b.model.state_dict()[k]), k
    assert a.history["loss"] != c.history["loss"]


def test_final_noisy_accuracy_averages_every_draw(data):
    """The final noisy test is the mean over all ``noise_draws`` draws (seeds 1000, 1001, ...):
    checked against a mean computed here, draw by draw, on draws that give different accuracies,
    so averaging only the first draw (in core.eval.predict.noisy_accuracy or in train) fails."""
    from core.data.transforms import add_noise
    from core.eval.predict import noisy_accuracy, predict_logits

    tr, _ = data
    te = synth(300, 9)
    r = train(cfg(iterations=8, noise_draws=4, noise_var=0.2), tr, te)
    manual = []
    for d in range(4):
        pred = predict_logits(r.model, add_noise(te.images, "gaussian", 0.2, seed=1000 + d)).argmax(1).numpy()
        manual.append(float((pred == te.labels).mean()))
    # the draws differ: the mean of all four is not the mean of any shorter prefix (first draw only, ...)
    assert all(abs(np.mean(manual) - np.mean(manual[:k])) > 1 / 300 for k in (1, 2, 3)), manual
    assert r.metrics["noise_draws"] == 4
    assert r.metrics["noisy_test_accuracy"] == pytest.approx(np.mean(manual), abs=1e-12)
    assert r.metrics["noisy_test_accuracy_std"] == pytest.approx(np.std(manual), abs=1e-12)
    assert r.metrics["noisy_test_error"] == pytest.approx(1 - np.mean(manual), abs=1e-12)
    assert noisy_accuracy(r.model, te.images, te.labels, "gaussian", 0.2, draws=4, seed=1000).tolist() == manual


def test_default_threads_follow_omp_num_threads(monkeypatch):
    """A run that names no thread count takes OMP_NUM_THREADS where it is a positive whole
    number, else the cores (at most 2)."""
    monkeypatch.setattr(loop.os, "cpu_count", lambda: 8)
    for env, want in (("3", 3), ("1", 1), (" 2 ", 2), ("0", 2), ("two", 2), ("", 2)):
        monkeypatch.setenv("OMP_NUM_THREADS", env)
        assert loop.default_threads() == want, env
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert loop.default_threads() == 2
    monkeypatch.setattr(loop.os, "cpu_count", lambda: 1)
    assert loop.default_threads() == 1


def test_the_test_session_runs_one_torch_thread_and_passes_it_on():
    """tests/conftest.py (with tests/threads.py): this process and what it starts use TEST_THREADS threads (1), so two
    test processes on 2 cores do not fight over them; a run that names none takes it too."""
    from tests.threads import TEST_THREADS

    assert torch.get_num_threads() == TEST_THREADS
    assert os.environ["OMP_NUM_THREADS"] == os.environ["MKL_NUM_THREADS"] == str(TEST_THREADS)
    assert loop.default_threads() == TEST_THREADS
    child = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
                           capture_output=True, text=True, timeout=120, check=True)
    assert child.stdout.strip() == str(TEST_THREADS)


def test_threads_setting_is_applied(data):
    """Each run sets the thread count it asks for, whatever the process had before (a no-op
    set_threads fails here: the count is moved away from the target first, both ways)."""
    tr, te = data
    for before, wanted in ((2, 1), (1, 2), (3, 2)):
        torch.set_num_threads(before)
        assert torch.get_num_threads() == before
        result = train(cfg(iterations=1, threads=wanted, noise_draws=0), tr, te)
        assert torch.get_num_threads() == wanted == result.metrics["threads"]
    # a run that names none records the count it used (the default), not None
    assert train(cfg(iterations=1, threads=None, noise_draws=0), tr, te).metrics["threads"] == loop.default_threads()


# --------------------------------------------------------------------------- class weighting


def test_class_weighting_auto_is_balanced_on_unbalanced_labels():
    unbalanced = synth(0, 5, labels=[0] * 40 + [1] * 5 + [2] * 3)
    balanced = synth(0, 6, labels=list(range(10)) * 4)
    te = synth(10, 7)
    assert train(cfg(iterations=1, noise_draws=0), unbalanced, te).metrics["class_weighting"] == "balanced"
    assert train(cfg(iterations=1, noise_draws=0), balanced, te).metrics["class_weighting"] == "none"
    assert train(cfg(iterations=1, noise_draws=0, class_weighting="none"), unbalanced,
                 te).metrics["class_weighting"] == "none"
    # the weights are used: the very first loss differs
    w = train(cfg(iterations=1, noise_draws=0, class_weighting="balanced"), unbalanced, te)
    n = train(cfg(iterations=1, noise_draws=0, class_weighting="none"), unbalanced, te)
    assert w.history["loss"][0] != n.history["loss"][0]


def test_class_weights_are_inverse_frequency():
    labels = np.array([0] * 60 + [1] * 30 + [2] * 10)
    w, mode = loop._class_weights(cfg(class_weighting="balanced"), labels, 4)
    assert mode == "balanced"
    np.testing.assert_allclose(w.numpy(), [100 / (4 * 60), 100 / (4 * 30), 100 / (4 * 10), 0.0], rtol=1e-6)
    assert loop._class_weights(cfg(class_weighting="auto"), np.array([0, 0, 1, 1, 2]), 3) == (None, "none")


# --------------------------------------------------------------------------- validation


BAD_SETTINGS = [
    ({"lr": -0.1}, "Learning rate"),
    ({"lr": 0}, "Learning rate"),
    ({"lr": float("nan")}, "Learning rate"),
    ({"lr": 100.0}, "Learning rate"),
    ({"lr": "0.1"}, "Learning rate"),
    ({"iterations": 0}, "Iterations"),
    ({"iterations": -5}, "Iterations"),
    ({"iterations": 2.5}, "Iterations"),
    ({"iterations": config.MAX_ITERATIONS + 1}, "Iterations"),
    ({"batch_size": 0}, "Batch size"),
    ({"model": "gpt"}, "Unknown model"),
    ({"dataset": "imagenet"}, "Unknown data set"),
    ({"seed": -1}, "Seed"),
    ({"seed": 1.5}, "Seed"),
    ({"momentum": 1.0}, "Momentum"),
    ({"momentum": -0.5}, "Momentum"),
    ({"momentum": "0.5"}, "Momentum"),
    ({"grad_clip": 0.0}, "clipping"),
    ({"grad_clip": float("inf")}, "clipping"),
    ({"eval_every": 0}, "Evaluate-every"),
    ({"eval_samples": 0}, "Evaluation samples"),
    ({"class_weighting": "inverse"}, "Class weighting"),
    ({"noise_var": -0.01}, "Noise variance"),
    ({"noise_var": 2.0}, "Noise variance"),
    ({"noise_draws": -1}, "Noise draws"),
    ({"threads": 0}, "Threads"),
    ({"model_overrides": [("hidden_size", 8)]}, "overrides"),
    ({"model_overrides": {"hidden_units": 8}}, "hidden_units"),
    ({"model_overrides": {"hidden_size": -8}}, "hidden_size"),
    ({"model_overrides": {"hidden_size": "big"}}, "hidden_size"),
    ({"model_overrides": {"input_dim": 96}}, "input_dim"),
]


@pytest.mark.parametrize("settings, words", BAD_SETTINGS,
                         ids=[" ".join(f"{k}={v!r}" for k, v in s.items()) for s, _ in BAD_SETTINGS])
def test_validate_refuses_bad_settings(settings, words):
    with pytest.raises(ConfigError) as err:
        cfg(**settings).validate()
    assert words in str(err.value)


def test_validate_accepts_the_paper_protocol_and_checks_batch_against_data():
    paper = TrainConfig()
    assert paper.validate() is paper
    assert (paper.lr, paper.batch_size, paper.iterations, paper.momentum) == (0.1, 100, 1000, 0.0)
    paper.validate(n_train=100)
    with pytest.raises(ConfigError, match="larger than the training set"):
        paper.validate(n_train=99)


def test_train_refuses_batch_larger_than_data_and_impossible_models(data):
    tr, te = data
    with pytest.raises(ConfigError, match="larger than the training set"):
        train(cfg(batch_size=49), tr, te)
    with pytest.raises(ConfigError, match="k_active"):
        train(cfg(model_overrides={"num_units": 3, "k_active": 5}), tr, te)


def test_config_round_trips_through_a_dict():
    c = cfg(seed=7, grad_clip=1.0)
    assert TrainConfig.from_dict(c.to_dict()) == c
    with pytest.raises(ConfigError, match="learning_rate"):
        TrainConfig.from_dict({**c.to_dict(), "learning_rate": 0.1})


# --------------------------------------------------------------------------- MNIST holdout


def write_split(root: Path, name: str, split: str, n: int, shape=(28, 28)):
    x = np.empty((n, *shape), dtype=np.uint8)
    x[:] = (np.arange(n) % 251).reshape(-1, *[1] * len(shape))  # image i is filled with i % 251
    y = (np.arange(n) % 10).astype(np.int64)
    (root / name).mkdir(parents=True, exist_ok=True)
    np.savez(root / name / f"{split}.npz", x=x, y=y)


def test_mnist_holdout_removes_train_images_0_to_9999(tmp_path):
    """The original 60,000-image training set loses images 0..9,999 (the sample's source)."""
    write_split(tmp_path, "mnist", "train", 60_000)
    write_split(tmp_path, "mnist", "test", 20)
    tr, te, note = prepare_training_data(cfg(holdout_sample=True), tmp_path)
    assert len(tr) == 50_000 and len(te) == 20
    np.testing.assert_array_equal(tr.indices, np.arange(10_000, 60_000))
    np.testing.assert_array_equal(tr.images[:, 0, 0], np.arange(10_000, 60_000) % 251)
    np.testing.assert_array_equal(tr.labels, np.arange(10_000, 60_000) % 10)
    assert "0 to 9,999 held out" in note and "(" not in note
    full, _, note = prepare_training_data(cfg(holdout_sample=False), tmp_path)
    assert len(full) == 60_000 and note == ""


def test_holdout_never_empties_a_users_own_training_set(tmp_path):
    """An 800-image npz is not the original MNIST order: nothing is held out, and the note says why."""
    write_split(tmp_path, "mnist", "train", 800)
    write_split(tmp_path, "mnist", "test", 20)
    tr, _, note = prepare_training_data(cfg(holdout_sample=True), tmp_path)
    assert len(tr) == 800 and "nothing held out" in note and "not the original 60,000-image" in note


@pytest.mark.parametrize("folder, words", [
    ("/nonexistent/folder", "does not exist"), ("/etc/passwd", "is a file, not a folder"),
    ("EMPTY", "has no mnist/train.npz and mnist/test.npz")])
def test_a_wrong_data_folder_is_an_error_not_a_silent_fallback(tmp_path, folder, words):
    path = tmp_path if folder == "EMPTY" else folder
    with pytest.raises(DataUnavailableError, match=words):
        prepare_training_data(cfg(), path)
    with pytest.raises(DataUnavailableError, match=words):
        training_data_plan("mnist", path)


def test_demo_on_the_bundled_sample_is_labelled_and_disjoint():
    tr, te, note = prepare_training_data(cfg(data_source="sample"), None)
    assert (len(tr), len(te)) == (800, 200) and "demo on the bundled sample" in note and "not comparable" in note
    assert not set(tr.indices.tolist()) & set(te.indices.tolist())
    with pytest.raises(ConfigError, match="no bundled sample of CIFAR-10"):
        prepare_training_data(cfg(dataset="cifar10", data_source="sample"), None)


def test_every_bad_setting_is_reported_at_once():
    with pytest.raises(ConfigError) as e:
        cfg(lr=-1.0, iterations=0, noise_draws=100_000, eval_samples=10**9).validate()
    lines = str(e.value).splitlines()
    assert len(lines) == 4 and any("Noise draws must be between 0 and 100" in x for x in lines)
    assert any("Evaluation samples" in x and "100,000" in x for x in lines)


def test_holdout_only_for_mnist_and_only_with_indices(tmp_path, monkeypatch):
    write_split(tmp_path, "fashion_mnist", "train", 10_005)
    write_split(tmp_path, "fashion_mnist", "test", 5)
    tr, _, note = prepare_training_data(cfg(dataset="fashion_mnist"), tmp_path)
    assert len(tr) == 10_005 and note == ""

    def no_indices(name, split, **kw):
        return dataclasses.replace(synth(12_000 if split == "train" else 5, 0), indices=None)

    monkeypatch.setattr(plan, "load_dataset", no_indices)
    tr, _, note = prepare_training_data(cfg(), None)
    assert len(tr) == 12_000 and "no image indices" in note


def test_training_data_never_comes_from_the_sample():
    with pytest.raises(DataUnavailableError):  # nothing in the data folder, offline
        prepare_training_data(cfg(), None)


# --------------------------------------------------------------------------- CLI


@pytest.mark.filterwarnings("ignore:.*found in sys.modules:RuntimeWarning")
def test_cli_help_runs_as_a_module(monkeypatch, capsys):
    """``python -m core.train --help``, run in this process (a new interpreter would spend
    seconds importing torch): runpy executes the module as __main__ exactly as -m does."""
    monkeypatch.setattr(sys, "argv", ["python -m core.train", "--help"])
    with pytest.raises(SystemExit) as exc:
        runpy.run_module("core.train", run_name="__main__")
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "usage: python -m core.train" in out
    for flag in ("--dataset", "--model", "--seed", "--lr", "--set", "--out"):
        assert flag in out


def test_cli_help_in_process(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0 and "--iterations" in capsys.readouterr().out


@pytest.fixture
def npz_dir(tmp_path):
    write_split(tmp_path / "data", "mnist", "train", 40)
    write_split(tmp_path / "data", "mnist", "test", 20)
    return tmp_path / "data"


def cli_args(data_dir, out, *extra):
    return ["--dataset", "mnist", "--model", "rim", "--iterations", "3", "--batch-size", "8", "--eval-every", "2",
            "--eval-samples", "10", "--noise-draws", "1", "--no-holdout-sample", "--threads", "1", "--quiet",
            "--data-dir", str(data_dir), "--out", str(out), "--set", "hidden_size=8", "--set", "num_units=3",
            "--set", "k_active=2", *extra]


def test_cli_trains_and_writes_a_loadable_model(npz_dir, tmp_path, capsys):
    out = tmp_path / "runs" / "tiny"
    assert cli.main(cli_args(npz_dir, out, "--seed", "2")) == 0
    assert "saved" in capsys.readouterr().out
    assert (out.with_suffix(".safetensors")).is_file() and (out.with_suffix(".json")).is_file()
    model, meta = load_weights(out, expected_dataset="mnist")
    assert meta["model"] == "rim" and meta["status"] == "completed" and meta["seed"] == 2
    assert meta["config"]["hidden_size"] == 8 and meta["train_config"]["iterations"] == 3
    assert meta["data_source"]["n_train"] == 40 and meta["metrics"]["test_n"] == 20
    assert len(meta["history"]["loss"]) == 3 and meta["evals"]["iteration"] == [2, 3]
    # the saved weights reproduce the reported test accuracy
    x = np.empty((20, 28, 28), np.uint8)
    x[:] = (np.arange(20) % 251)[:, None, None]
    assert evaluate(model, x, np.arange(20) % 10, 10).accuracy == meta["metrics"]["test_accuracy"]


@pytest.mark.parametrize("extra, words", [
    (["--lr", "-1"], "Learning rate"),
    (["--iterations", "0"], "Iterations"),
    (["--batch-size", "41"], "larger than the training set"),
    (["--set", "hidden_size=-3"], "hidden_size"),
    (["--set", "k_active=9"], "k_active"),
    (["--set", "wings=2"], "wings"),
    (["--set", "novalue"], "KEY=VALUE"),
])
def test_cli_invalid_settings_exit_2_with_a_message(npz_dir, tmp_path, capsys, extra, words):
    out = tmp_path / "bad"
    assert cli.main(cli_args(npz_dir, out, *extra)) == 2
    err = capsys.readouterr().err
    assert "error:" in err and words in err and "Traceback" not in err
    assert not out.with_suffix(".safetensors").exists()


def test_cli_argparse_errors_exit_2(npz_dir, tmp_path, capsys):
    for extra in (["--model", "gpt"], ["--lr", "fast"]):
        with pytest.raises(SystemExit) as exc:
            cli.main(cli_args(npz_dir, tmp_path / "x", *extra))
        assert exc.value.code == 2
        assert "invalid" in capsys.readouterr().err


def test_cli_missing_data_exits_2(tmp_path, capsys):
    assert cli.main(cli_args(tmp_path / "empty", tmp_path / "x")) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "RIMSCOPE_DATA_DIR" in err


def test_cli_diverged_run_saves_nothing(npz_dir, tmp_path, capsys):
    out = tmp_path / "div"
    args = cli_args(npz_dir, out, "--lr", "10", "--momentum", "0.9", "--iterations", "60", "--batch-size", "16",
                    "--noise-draws", "0")
    assert cli.main(args) == 3
    assert "DIVERGED" in capsys.readouterr().err
    assert not out.with_suffix(".safetensors").exists() and not out.with_suffix(".json").exists()




def test_config_from_form_follows_the_form():
    """The Train form's values become a TrainConfig: momentum only for SGD, patience only with a
    validation split, no clipping unless asked, the demo on the sample, and each model only the
    settings it has that differ from its defaults."""
    rim = config.config_from_form(FORM, "rim", 3)
    assert (rim.model, rim.seed, rim.iterations, rim.optimizer, rim.device) == ("rim", 3, 500, "adam", "cpu")
    assert rim.momentum == 0.0 and rim.patience == 0 and rim.grad_clip is None and rim.data_source == "sample"
    assert rim.model_overrides == {"selection": "random", "alpha": 0.5}
    assert config.config_from_form(FORM, "parallel_lstm", 0).model_overrides == {}
    sgd = config.config_from_form({**FORM, "optimizer": "sgd", "val_images": 100, "clip_on": True, "demo": False},
                                  "rim", 0)
    assert sgd.momentum == 0.9 and sgd.patience == 4 and sgd.grad_clip == 1.0 and sgd.data_source == "auto"


def test_configs_from_form_validates_every_run():
    configs, problems = config.configs_from_form(FORM, ["rim", "parallel_lstm"], [0, 1])
    assert problems == [] and [(c.model, c.seed) for c in configs] == [
        ("rim", 0), ("rim", 1), ("parallel_lstm", 0), ("parallel_lstm", 1)]
    configs, problems = config.configs_from_form({**FORM, "lr": 0.0}, ["rim", "parallel_lstm"], [0, 1])
    assert configs == [] and problems == ["Learning rate must be a number in (0, 10]."]
