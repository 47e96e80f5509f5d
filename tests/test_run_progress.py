"""What a worker says between its last iteration and its end (core.runs.worker with
core.runs.progress), and the words on which weights a finished run keeps."""

from __future__ import annotations

import types

import pytest

from core.runs import progress, worker
from core.runs.store import RunStore
from tests.run_helpers import tiny


@pytest.fixture
def store(tiny_mnist_home, monkeypatch):
    monkeypatch.delenv("RIMSCOPE_MAX_CONCURRENT", raising=False)
    return RunStore()


def _recorded(monkeypatch) -> list[tuple]:
    """Every status.json the worker writes: (status, iteration, message)."""
    seen: list[tuple] = []
    real = worker.write_json

    def spy(path, doc, **kw):
        seen.append((doc.get("status"), doc.get("iteration"), doc.get("message")))
        return real(path, doc, **kw)

    monkeypatch.setattr(worker, "write_json", spy)
    return seen


def test_the_status_says_final_evaluation_after_the_last_iteration(store, monkeypatch):
    seen = _recorded(monkeypatch)
    rid = store.submit(tiny(iterations=12, eval_every=6))
    assert worker.run_worker(store.run_dir(rid)) == "completed"
    final_eval = [i for i, s in enumerate(seen) if s[2] == progress.FINAL_EVALUATION]
    assert final_eval and seen[final_eval[0]][:2] == ("running", 12)  # written with the last iteration
    assert seen[-1][0] == "completed" and seen[-1][2] != progress.FINAL_EVALUATION


def test_the_status_says_stopping_once_the_stop_is_seen(store, monkeypatch):
    import core.training.loop as loop

    seen = _recorded(monkeypatch)
    rid = store.submit(tiny(iterations=40, eval_every=20))
    real_train = loop.train

    def train(*a, callback=None, **kw):
        def cb(ev):
            callback(ev)
            if ev["kind"] == "iter" and ev["iteration"] == 5:
                (store.run_dir(rid) / "stop").touch()
        return real_train(*a, callback=cb, **kw)

    monkeypatch.setattr(loop, "train", train)
    assert worker.run_worker(store.run_dir(rid)) == "stopped"
    assert ("running", 5, progress.STOPPING) in seen
    assert seen[-1][0] == "stopped" and "resumed" in seen[-1][2]


def test_kept_weights_words_and_the_far_below_warning():
    evals = {"eval_iteration": [100, 200, 300], "test_acc": [0.80, 0.865, 0.53]}
    out = progress.kept_weights({"iterations_done": 300, "test_accuracy": 0.53}, evals)
    assert out["kept"] == "kept the final weights (iteration 300)"
    assert "33.5 points below" in out["warning"] and "86.5 % at iteration 200" in out["warning"]
    calm = progress.kept_weights({"iterations_done": 300, "test_accuracy": 0.85}, evals)
    assert calm["warning"] == ""  # 1.5 points under the best: within FAR_BELOW
    chosen = progress.kept_weights({"iterations_done": 300, "best_iteration": 200, "test_accuracy": 0.70},
                                   {"iteration": [100, 200, 300], "test_acc": [0.8, 0.865, 0.53]})
    assert chosen["kept"].startswith("kept the weights of iteration 200") and "chosen on the validation" in chosen["warning"]
    assert progress.kept_weights({}, {}) == {"kept": "", "warning": ""}


def test_progress_text():
    run = types.SimpleNamespace(status="running", iteration=300, total=300, stop_requested=False)
    assert progress.progress_text(run).startswith(progress.FINAL_EVALUATION)
    run.iteration = 299
    assert progress.progress_text(run) == "running · 299 / 300 iterations"
    run.stop_requested = True
    assert progress.progress_text(run).startswith("stopping after the current iteration")


def test_the_training_line_says_the_images_once_and_the_source_in_plain_words():
    text = progress.training_text("bundled sample (1000 MNIST train images, assets/samples)", 800)
    assert text == "training on 800 images from the bundled sample"
    assert progress.training_text("npz folder (/data/mnist)", 60000) == "training on 60,000 images from the npz folder"
