"""Helpers shared by the tests that queue and run training: a tiny data set, worker clean-up."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np


def write_tiny_mnist(data_dir: Path, n: int = 300, seed: int = 0) -> None:
    """An MNIST-shaped npz data set under ``data_dir/mnist``: ``n`` random 28x28 images per split."""
    rng = np.random.default_rng(seed)
    (data_dir / "mnist").mkdir(parents=True, exist_ok=True)
    for split in ("train", "test"):
        np.savez(data_dir / "mnist" / f"{split}.npz", x=rng.integers(0, 256, (n, 28, 28), dtype=np.uint8),
                 y=rng.integers(0, 10, n).astype(np.int64), classes=np.array([str(i) for i in range(10)]))


def kill_running_workers(store) -> None:
    """SIGKILL every worker the store lists as running (never this test process), then pump it:
    a test never leaves a worker behind."""
    for r in store.list_runs():
        if r.status == "running" and r.pid and r.pid != os.getpid():
            try:
                os.kill(r.pid, signal.SIGKILL)
            except OSError:
                pass
    store.pump()


# Small settings per model: fast, but every mechanism (heads, slots, layers) still present.
SMALL = {
    "rim": dict(num_units=5, hidden_size=8, k_active=3, embed_dim=12, input_heads=2, input_key_size=4,
                input_value_size=4, comm_heads=2, comm_key_size=4, comm_value_size=4),
    "parallel_lstm": dict(num_units=3, hidden_size=8),
    "entnet": dict(num_slots=4, slot_size=12),
    "rmc": dict(num_slots=3, slot_size=16, num_heads=2),
    "indrnn": dict(hidden_size=16, trace_groups=4),
}


TINY = {"parallel_lstm": {"num_units": 1, "hidden_size": 8},
        "rim": {"num_units": 2, "k_active": 1, "hidden_size": 8}}


def tiny(model: str = "parallel_lstm", **kw):
    """A TrainConfig of a few seconds on the tiny MNIST: ``model`` at a tiny size (``TINY``), ``kw`` on top."""
    from core.training.config import TrainConfig

    base = dict(dataset="mnist", model=model, iterations=30, batch_size=20, eval_every=10, eval_samples=50,
                noise_draws=1, holdout_sample=False, model_overrides=dict(TINY.get(model, {})))
    base.update(kw)
    return TrainConfig(**base)


# the Train form's values (pages/train.py) as core.training.config.config_from_form reads them
FORM = dict(dataset="mnist", iterations=500.0, batch_size=50, optimizer="adam", lr=0.002, momentum=0.9,
            schedule="cosine", val_images=0, patience=4, clip_on=False, grad_clip=1.0, eval_every=100,
            class_weighting="auto", augment="none", holdout_sample=True, eval_samples=1000, noise_var=0.01,
            noise_draws=3, weight_decay=0.0, step_every=1000, step_gamma=0.1, device="cpu", demo=True,
            forget_bias=1.0, selection="random", k_active=4, alpha=0.5)
