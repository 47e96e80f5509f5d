"""The one training loop, for every model and every caller (CLI, pages, reproduction).

Paper protocol by default: cross-entropy, plain SGD with learning rate 0.1, batch 100,
1,000 iterations. Seeded (weights and batch order), optional gradient clipping, a progress
callback, a stop signal, a record per iteration (loss, batch accuracy) and a periodic test
accuracy on a fixed test subset. A NaN or infinite loss stops the run as "diverged".

Training checkpoints (core.resume) are written every ``checkpoint_every`` iterations and at
most every ``checkpoint_every_s`` seconds when the caller names a folder; ``resume_from``
continues from one, bit-identical to the uninterrupted run.

CLI::

    python -m core.train --dataset mnist --model rim --seed 0 --out runs/mnist_rim_s0
    python -m core.train --resume runs/mnist_rim_s0.ckpt     # after a crash: continue, then save as usual
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from . import __version__
from .data import DATASETS, MNIST_SAMPLE_TRAIN_INDICES, LoadedData, get_info, load_dataset, to_sequence
from .errors import CheckpointError, ConfigError
from .evaluate import evaluate, noisy_accuracy
from .models import build_model, count_parameters, list_models, make_config

MAX_ITERATIONS = 1_000_000
MAX_EVAL_SAMPLES = 100_000  # larger than any test split here
MAX_NOISE_DRAWS = 100  # each draw is one pass over the test set
OPTIMIZERS = ("sgd", "adam")
DEVICES = ("auto", "cpu", "cuda")


def resolve_device(name: str) -> torch.device:
    """The torch device for a config's ``device``; nothing here ever needs a GPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("Device cuda was asked for, but torch sees no GPU on this machine; use cpu or auto.")
    return torch.device(name)
SCHEDULES = ("none", "cosine", "step")

# Named protocols: the paper's, and one that trains to convergence. "converged" was chosen by
# measurement (REPRODUCTION.md, "Converged protocol"): Adam with a cosine decay, weights of
# the best validation accuracy kept, the validation split carved from the training data
# (never the test set), early stopping when validation stops improving.
PROTOCOLS: dict[str, dict] = {
    "paper": dict(optimizer="sgd", lr=0.1, momentum=0.0, weight_decay=0.0, schedule="none", iterations=1000,
                  batch_size=100, val_images=0, patience=0),
    "converged": dict(optimizer="adam", lr=2e-3, momentum=0.0, weight_decay=0.0, schedule="cosine",
                      iterations=4000, batch_size=100, val_images=5000, patience=6, eval_every=250,
                      grad_clip=1.0),
}


@dataclass
class TrainConfig:
    dataset: str = "mnist"
    model: str = "rim"
    seed: int = 0
    iterations: int = 1000
    batch_size: int = 100
    lr: float = 0.1
    momentum: float = 0.0  # SGD only
    optimizer: str = "sgd"  # "sgd" (the paper's) or "adam" (torch.optim.Adam)
    weight_decay: float = 0.0
    schedule: str = "none"  # learning rate over iterations: "none", "cosine" (to 0 at the end), "step"
    step_every: int = 1000  # "step": multiply the learning rate by step_gamma every this many iterations
    step_gamma: float = 0.1
    val_images: int = 0  # hold out this many training images (fixed, seeded) for validation; 0 = none
    patience: int = 0  # with validation: stop after this many evaluations without a better one; 0 = never
    grad_clip: float | None = None  # max global gradient norm; None = no clipping
    eval_every: int = 100  # periodic test accuracy every this many iterations
    eval_samples: int = 1000  # size of the fixed test subset used for periodic accuracy
    class_weighting: str = "auto"  # "none", "balanced", or "auto" (balanced if classes are unbalanced)
    holdout_sample: bool = True  # MNIST: leave out train images 0..9,999 (the bundled sample)
    noise_var: float = 0.01  # Gaussian noise variance for the final noisy test
    noise_draws: int = 3  # noise draws averaged in the final noisy test
    threads: int | None = None  # torch threads; None = number of cores, at most 2 per run
    checkpoint_every: int = 200  # training checkpoint (to resume from) every this many iterations; 0 = not by count
    checkpoint_every_s: float = 60.0  # ... and at least every this many seconds; 0 = not by time
    model_overrides: dict = field(default_factory=dict)
    device: str = "auto"  # "auto" (CUDA when torch sees a GPU, else CPU), "cpu" or "cuda"
    data_source: str = "auto"  # "auto" (data folder, torchvision, ...) or "sample" (a labelled demo)

    def validate(self, n_train: int | None = None) -> TrainConfig:
        """Raise one ConfigError naming every out-of-range setting (one per line)."""
        problems: list[str] = []
        bad = problems.append

        if self.dataset not in DATASETS:
            bad(f"Unknown data set {self.dataset!r}; choose one of {', '.join(DATASETS)}.")
        if self.model not in list_models():
            bad(f"Unknown model {self.model!r}; choose one of {', '.join(list_models())}.")
        def number(v):  # a real number (bool is not one here)
            return isinstance(v, (int, float)) and not isinstance(v, bool)

        def whole(v):
            return isinstance(v, int) and not isinstance(v, bool)

        if not whole(self.seed) or self.seed < 0:
            bad("Seed must be a whole number >= 0.")
        if not whole(self.iterations) or not 1 <= self.iterations <= MAX_ITERATIONS:
            bad(f"Iterations must be between 1 and {MAX_ITERATIONS:,}.")
        if not whole(self.batch_size) or self.batch_size < 1:
            bad("Batch size must be at least 1.")
        if n_train is not None and whole(self.batch_size) and self.batch_size > n_train:
            bad(f"Batch size {self.batch_size} is larger than the training set ({n_train} images).")
        if not (number(self.lr) and math.isfinite(self.lr) and 0 < self.lr <= 10):
            bad("Learning rate must be a number in (0, 10].")
        if not (number(self.momentum) and math.isfinite(self.momentum) and 0 <= self.momentum < 1):
            bad("Momentum must be in [0, 1).")
        if self.optimizer not in OPTIMIZERS:
            bad(f"Optimizer must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}.")
        if self.optimizer != "sgd" and self.momentum:
            bad("Momentum applies to SGD only (Adam has its own moment estimates); set it to 0.")
        if not (number(self.weight_decay) and math.isfinite(self.weight_decay) and 0 <= self.weight_decay < 1):
            bad("Weight decay must be in [0, 1).")
        if self.schedule not in SCHEDULES:
            bad(f"Learning-rate schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}.")
        if not whole(self.step_every) or self.step_every < 1:
            bad("Step schedule: step every must be at least 1 iteration.")
        if not (number(self.step_gamma) and math.isfinite(self.step_gamma) and 0 < self.step_gamma <= 1):
            bad("Step schedule: the factor must be in (0, 1].")
        if not whole(self.val_images) or self.val_images < 0:
            bad("Validation images must be a whole number >= 0.")
        val_ok = whole(self.val_images) and self.val_images >= 0
        if n_train is not None and val_ok and self.val_images and self.val_images >= n_train:
            bad(f"Validation images ({self.val_images:,}) must be fewer than the training images ({n_train:,}).")
        if n_train is not None and val_ok and whole(self.batch_size) and self.val_images \
                and self.val_images < n_train and self.batch_size > n_train - self.val_images:
            bad(f"Batch size {self.batch_size} is larger than the training set left after validation "
                f"({n_train - self.val_images} images).")
        if not whole(self.patience) or self.patience < 0:
            bad("Patience must be a whole number >= 0.")
        if self.patience and val_ok and not self.val_images:
            bad("Early stopping (patience) needs validation images.")
        if self.grad_clip is not None and not (number(self.grad_clip) and math.isfinite(self.grad_clip) and self.grad_clip > 0):
            bad("Gradient clipping must be a positive number (or off).")
        if not whole(self.eval_every) or self.eval_every < 1:
            bad("Evaluate-every must be at least 1 iteration.")
        if not whole(self.eval_samples) or not 1 <= self.eval_samples <= MAX_EVAL_SAMPLES:
            bad(f"Evaluation samples (the live test subset) must be between 1 and {MAX_EVAL_SAMPLES:,}.")
        if self.class_weighting not in ("none", "balanced", "auto"):
            bad("Class weighting must be 'none', 'balanced' or 'auto'.")
        if not (number(self.noise_var) and math.isfinite(self.noise_var) and 0 <= self.noise_var <= 1):
            bad("Noise variance must be in [0, 1].")
        if not whole(self.noise_draws) or not 0 <= self.noise_draws <= MAX_NOISE_DRAWS:
            bad(f"Noise draws must be between 0 and {MAX_NOISE_DRAWS}.")
        if self.data_source not in ("auto", "sample"):
            bad(f"Data source must be 'auto' or 'sample', got {self.data_source!r}.")
        if self.device not in DEVICES:
            bad(f"Device must be one of {', '.join(DEVICES)}, got {self.device!r}.")
        if self.threads is not None and (not whole(self.threads) or self.threads < 1):
            bad("Threads must be at least 1.")
        if not whole(self.checkpoint_every) or self.checkpoint_every < 0:
            bad("Checkpoint every (iterations) must be a whole number >= 0 (0 = not by count).")
        if not (number(self.checkpoint_every_s) and math.isfinite(self.checkpoint_every_s)
                and self.checkpoint_every_s >= 0):
            bad("Checkpoint every (seconds) must be a number >= 0 (0 = not by time).")
        if not isinstance(self.model_overrides, dict):
            bad("Model overrides must be a mapping of config fields.")
        fixed = sorted({"input_dim", "num_classes"} & set(self.model_overrides))
        if fixed:
            bad(f"Model setting(s) {', '.join(fixed)} follow from the data set and cannot be overridden.")
        try:  # unknown, mistyped or negative model settings
            if self.model in list_models() and isinstance(self.model_overrides, dict):
                make_config(self.model, **self.model_overrides)
        except (KeyError, ValueError, TypeError) as exc:
            bad(str(exc).strip("'\""))
        if problems:
            raise ConfigError("\n".join(dict.fromkeys(problems)))
        return self

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_protocol(cls, protocol: str, **kw) -> TrainConfig:
        """A config with a named protocol's settings (``PROTOCOLS``), then ``kw`` on top."""
        if protocol not in PROTOCOLS:
            raise ConfigError(f"Unknown protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)}.")
        return cls(**{**PROTOCOLS[protocol], **kw})

    @classmethod
    def from_dict(cls, d: dict) -> TrainConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ConfigError(f"Unknown training setting(s): {', '.join(unknown)}")
        return cls(**d)


@dataclass
class TrainResult:
    status: str  # "completed", "stopped" or "diverged"
    model: torch.nn.Module
    history: dict  # per iteration: iteration, loss, batch_acc
    evals: dict  # periodic: iteration, test_acc, test_loss
    metrics: dict  # final: test_accuracy, test_error, noisy_test_accuracy, ...
    wall_time_s: float
    message: str = ""
    checkpoint: Path | None = None  # the last training checkpoint written (core.resume), if any
    resumed_from: int | None = None  # the iteration this run was resumed from


def set_threads(threads: int | None) -> int:
    n = threads or max(1, min(2, os.cpu_count() or 1))
    torch.set_num_threads(n)
    return n


def _class_weights(cfg: TrainConfig, labels: np.ndarray, num_classes: int) -> tuple[torch.Tensor | None, str]:
    counts = np.bincount(labels, minlength=num_classes).astype(np.float64)
    mode = cfg.class_weighting
    if mode == "auto":
        present = counts[counts > 0]
        mode = "balanced" if len(present) and present.max() > 2 * present.min() else "none"
    if mode == "none":
        return None, mode
    w = np.where(counts > 0, counts.sum() / (num_classes * np.maximum(counts, 1)), 0.0)
    return torch.tensor(w, dtype=torch.float32), mode


def prepare_training_data(cfg: TrainConfig, data_dir=None) -> tuple[LoadedData, LoadedData, str]:
    """Train and test data for a config, with MNIST's bundled sample held out if asked."""
    from .data import check_data_dir, mnist_holdout_applies

    if cfg.data_source == "sample":
        return _sample_split(cfg)
    if data_dir:
        check_data_dir(data_dir, cfg.dataset)
    train = load_dataset(cfg.dataset, "train", data_dir=data_dir, allow_sample=False)
    test = load_dataset(cfg.dataset, "test", data_dir=data_dir, allow_sample=False)
    note = ""
    if cfg.dataset == "mnist" and cfg.holdout_sample:
        if train.indices is None:
            note = "holdout requested but the source has no image indices; nothing held out"
        elif not mnist_holdout_applies(len(train), True):
            note = (f"nothing held out: these {len(train):,} images are not the original 60,000-image MNIST "
                    "training set, so the bundled sample is not among them")
        else:
            lo, hi = MNIST_SAMPLE_TRAIN_INDICES.start, MNIST_SAMPLE_TRAIN_INDICES.stop
            keep = (train.indices < lo) | (train.indices >= hi)
            train = dataclasses.replace(train, images=train.images[keep], labels=train.labels[keep],
                                        indices=train.indices[keep])
            note = f"train images {lo}..{hi - 1} held out (the bundled sample comes from them)"
    return train, test, note


def _to_cpu(obj):
    """A (nested) state dict with every tensor on the CPU (checkpoints are device-independent)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_cpu(v) for v in obj)
    return obj


def make_optimizer(cfg: TrainConfig, params):
    """torch.optim optimiser and (optional) per-iteration learning-rate scheduler for a config."""
    params = list(params)
    if cfg.optimizer == "adam":
        opt = torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    else:
        opt = torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    if cfg.schedule == "cosine":
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=cfg.iterations)
    elif cfg.schedule == "step":
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=cfg.step_every, gamma=cfg.step_gamma)
    else:
        sched = None
    return opt, sched


def split_validation(cfg: TrainConfig, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices (train, validation) of a training set of ``n`` images: a fixed seeded split."""
    perm = np.random.default_rng(20_000 + cfg.seed).permutation(n)
    return np.sort(perm[cfg.val_images :]), np.sort(perm[: cfg.val_images])


SAMPLE_TRAIN = 800  # demo on the bundled 1,000-image sample: 800 to train, 200 to test


def _sample_split(cfg: TrainConfig) -> tuple[LoadedData, LoadedData, str]:
    """A quick demo without any data set: the bundled sample split 800 / 200 (fixed, seeded)."""
    from .data import _from_sample

    sample = _from_sample(get_info(cfg.dataset))
    if sample is None:
        raise ConfigError(f"There is no bundled sample of {get_info(cfg.dataset).title} (only MNIST and "
                          "Fashion-MNIST ship one).")
    perm = np.random.default_rng(30_000).permutation(len(sample.labels))
    parts = []
    for idx in (np.sort(perm[:SAMPLE_TRAIN]), np.sort(perm[SAMPLE_TRAIN:])):
        parts.append(dataclasses.replace(sample, images=sample.images[idx], labels=sample.labels[idx],
                                         indices=None if sample.indices is None else sample.indices[idx]))
    note = (f"demo on the bundled sample: {SAMPLE_TRAIN} images to train, {len(perm) - SAMPLE_TRAIN} to test; "
            "not comparable with runs on the full data set")
    return parts[0], parts[1], note


def train(cfg: TrainConfig, train_data: LoadedData, test_data: LoadedData, *,
          callback: Callable[[dict], None] | None = None,
          should_stop: Callable[[], bool] | None = None,
          checkpoint_dir: str | Path | None = None,
          resume_from=None,
          checkpoint_extra: dict | None = None) -> TrainResult:
    """Train ``cfg.model`` on ``train_data``; evaluate on ``test_data``.

    ``callback`` gets a dict per iteration (``kind='iter'``) and per periodic evaluation
    (``kind='eval'``). ``should_stop()`` is polled every iteration; when it returns true the
    run ends with status "stopped" and keeps what it learned so far.

    ``checkpoint_dir``: write training checkpoints there (core.resume) every
    ``cfg.checkpoint_every`` iterations and at most every ``cfg.checkpoint_every_s`` seconds,
    and when the run is stopped; each is reported as a ``kind='checkpoint'`` event (``ok``
    false and a ``message`` when the write failed: training goes on, the earlier checkpoint
    is kept). ``checkpoint_extra`` is stored with each (the caller's notes, JSON).
    ``resume_from``: a checkpoint folder, a state file or a ``core.resume.TrainState`` to
    continue from; the result is bit-identical to the uninterrupted run (same machine and
    threads). Without it, a fresh run first clears ``checkpoint_dir``.
    """
    from . import resume as R

    cfg.validate(n_train=len(train_data))
    set_threads(cfg.threads)
    info = get_info(cfg.dataset)
    C = len(info.classes)
    x_train, y_train = train_data.images, np.asarray(train_data.labels, dtype=np.int64)
    x_val = y_val = None
    if cfg.val_images:
        tr_idx, va_idx = split_validation(cfg, len(y_train))
        x_val, y_val = x_train[va_idx], y_train[va_idx]
        x_train, y_train = x_train[tr_idx], y_train[tr_idx]
    weights, weighting = _class_weights(cfg, y_train, C)

    state = R.load_resume_source(resume_from) if resume_from is not None else None
    fingerprint = None
    if state is not None or checkpoint_dir is not None:
        fingerprint = R.data_fingerprint(train_data.images, train_data.labels)
    if state is not None:
        diff = R.config_mismatch(state, cfg.to_dict())
        if diff:
            raise CheckpointError(f"The checkpoint {state.path or ''} belongs to a run with other settings "
                                  f"({', '.join(diff)}); it cannot be resumed with these.")
        theirs = (state.extra or {}).get("data")
        if isinstance(theirs, dict) and theirs != fingerprint:
            raise CheckpointError("The checkpoint was trained on other training data "
                                  f"({theirs.get('n')} images, not these {fingerprint['n']}); it cannot be resumed "
                                  "with this data.")
    elif checkpoint_dir is not None:
        R.remove_states(checkpoint_dir)  # a fresh run: nothing of an earlier one may be resumed

    torch.manual_seed(cfg.seed)
    try:
        model = build_model(cfg.model, input_dim=info.input_dim, num_classes=C, **cfg.model_overrides)
    except (KeyError, ValueError, TypeError, ZeroDivisionError) as exc:  # e.g. k_active > num_units
        raise ConfigError(f"The model settings are not valid: {exc}") from None
    device = resolve_device(cfg.device)
    model.to(device).train()  # weights are drawn on the CPU (same numbers on every device), then moved
    if weights is not None:
        weights = weights.to(device)
    opt, sched = make_optimizer(cfg, model.parameters())
    rng = np.random.default_rng(cfg.seed)

    # fixed periodic-evaluation subset, the same for every model with this seed
    n_eval = min(cfg.eval_samples, len(test_data))
    eval_idx = np.sort(np.random.default_rng(10_000 + cfg.seed).choice(len(test_data), n_eval, replace=False))
    x_eval, y_eval = test_data.images[eval_idx], test_data.labels[eval_idx]

    history = {"iteration": [], "loss": [], "batch_acc": []}
    evals = {"iteration": [], "test_acc": [], "test_loss": []}
    if x_val is not None:
        evals.update(val_acc=[], val_loss=[])
    best = {"acc": -1.0, "iteration": 0, "state": None, "since": 0}
    status, message = "completed", ""
    order, pos = rng.permutation(len(y_train)), 0
    start, elapsed_before = 1, 0.0
    if state is not None:
        order, pos, start, elapsed_before = _restore(state, model, opt, sched, rng, history, evals, best,
                                                     len(y_train))
    t0 = time.perf_counter()
    extra = {**(checkpoint_extra or {}), "data": fingerprint}
    ckpt = {"iteration": state.iteration if state is not None else 0, "at": time.monotonic(), "path": None,
            "errors": [], "written": 0}

    def checkpoint(it: int) -> None:
        """Write the state after ``it`` iterations; a failed write is reported, not fatal."""
        t = time.perf_counter()
        st = R.TrainState(
            iteration=it, model={k: v.detach().cpu() for k, v in model.state_dict().items()},
            optimizer=_to_cpu(opt.state_dict()),
            scheduler=sched.state_dict() if sched is not None else None,
            rng={"torch": torch.get_rng_state(), "numpy": rng.bit_generator.state, "python": random.getstate()},
            order=order, pos=pos, best=best, history=history, evals=evals,
            elapsed_s=elapsed_before + t - t0, train_config=cfg.to_dict(), extra=extra)
        try:
            path = R.write_state(checkpoint_dir, st)
        except CheckpointError as exc:
            ckpt["errors"].append(str(exc))
            ckpt["at"] = time.monotonic()  # retry at the next due point, not at every iteration
            if callback:
                callback({"kind": "checkpoint", "iteration": it, "ok": False, "message": str(exc)})
            return
        ckpt.update(iteration=it, at=time.monotonic(), path=path, written=ckpt["written"] + 1)
        if callback:
            callback({"kind": "checkpoint", "iteration": it, "ok": True, "path": str(path),
                      "seconds": time.perf_counter() - t})

    def periodic_eval(it: int):
        r = evaluate(model, x_eval, y_eval, C)
        model.train()
        evals["iteration"].append(it)
        evals["test_acc"].append(r.accuracy)
        evals["test_loss"].append(r.loss)
        ev = {"kind": "eval", "iteration": it, "test_acc": r.accuracy, "test_loss": r.loss}
        if x_val is not None:  # model selection looks at validation only, never at the test set
            v = evaluate(model, x_val, y_val, C)
            model.train()
            evals["val_acc"].append(v.accuracy)
            evals["val_loss"].append(v.loss)
            ev.update(val_acc=v.accuracy, val_loss=v.loss)
            if v.accuracy > best["acc"]:
                best.update(acc=v.accuracy, iteration=it, since=0,
                            state={k: t.detach().clone() for k, t in model.state_dict().items()})
            else:
                best["since"] += 1
        if callback:
            callback(ev)

    for it in range(start, cfg.iterations + 1):
        if should_stop is not None and should_stop():
            status, message = "stopped", f"stopped by the user after {it - 1} iterations"
            if checkpoint_dir is not None and it - 1 > ckpt["iteration"]:
                checkpoint(it - 1)  # resume continues exactly here
            break
        if pos + cfg.batch_size > len(order):  # new epoch: reshuffle
            order, pos = rng.permutation(len(y_train)), 0
        idx = order[pos : pos + cfg.batch_size]
        pos += cfg.batch_size
        xb = to_sequence(x_train[idx]).to(device, non_blocking=True)
        yb = torch.from_numpy(y_train[idx]).to(device, non_blocking=True)

        logits = model(xb)
        loss = F.cross_entropy(logits, yb, weight=weights)
        loss_val = float(loss.item())
        acc = float((logits.argmax(1) == yb).float().mean().item())
        history["iteration"].append(it)
        history["loss"].append(loss_val)
        history["batch_acc"].append(acc)
        if not math.isfinite(loss_val):
            status = "diverged"
            message = f"loss became {loss_val} at iteration {it}; the run was stopped (try a smaller learning rate or gradient clipping)"
            if callback:
                callback({"kind": "iter", "iteration": it, "total": cfg.iterations, "loss": loss_val, "batch_acc": acc})
            break
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        if sched is not None:
            sched.step()
        if callback:
            callback({"kind": "iter", "iteration": it, "total": cfg.iterations, "loss": loss_val,
                      "batch_acc": acc, "elapsed_s": elapsed_before + time.perf_counter() - t0})
        if it % cfg.eval_every == 0 or it == cfg.iterations:
            periodic_eval(it)
            if cfg.patience and best["since"] >= cfg.patience:
                message = (f"early stop at iteration {it}: no better validation accuracy in {cfg.patience} "
                           f"evaluations")
                break
        if checkpoint_dir is not None and it < cfg.iterations and (
                (cfg.checkpoint_every and it % cfg.checkpoint_every == 0)
                or (cfg.checkpoint_every_s and time.monotonic() - ckpt["at"] >= cfg.checkpoint_every_s)):
            checkpoint(it)

    train_time = elapsed_before + time.perf_counter() - t0
    metrics = {"iterations_done": len(history["iteration"]), "train_time_s": train_time,
               "class_weighting": weighting, "parameters": count_parameters(model)}
    if state is not None:
        metrics["resumed_from_iteration"] = state.iteration
    if ckpt["errors"]:
        metrics["checkpoint_errors"] = len(ckpt["errors"])
        message = (message + "; " if message else "") + f"{len(ckpt['errors'])} checkpoint write(s) failed, " \
                                                         f"the last: {ckpt['errors'][-1]}"
    if best["state"] is not None and status != "diverged":
        model.load_state_dict(best["state"])  # the weights of the best validation accuracy
        metrics.update(best_iteration=best["iteration"], val_accuracy=best["acc"], val_n=len(y_val))
        message = (message + "; " if message else "") + (
            f"kept the weights of iteration {best['iteration']} (validation accuracy {best['acc']:.4f})")
    if status != "diverged":
        final = evaluate(model, test_data.images, test_data.labels, C)
        metrics.update(test_accuracy=final.accuracy, test_error=final.error, test_loss=final.loss,
                       test_n=final.n, per_class_accuracy=final.summary()["per_class_accuracy"],
                       confusion=final.confusion.tolist())
        if cfg.noise_draws > 0:
            accs = noisy_accuracy(model, test_data.images, test_data.labels, "gaussian",
                                  cfg.noise_var, draws=cfg.noise_draws, seed=1000)
            metrics.update(noise_var=cfg.noise_var, noise_draws=cfg.noise_draws,
                           noisy_test_accuracy=float(accs.mean()),
                           noisy_test_accuracy_std=float(accs.std()),
                           noisy_test_error=float(1 - accs.mean()))
    metrics["device"] = str(device)
    model.cpu()  # checkpoints and every later use are device-independent
    return TrainResult(status, model, history, evals, metrics, elapsed_before + time.perf_counter() - t0, message,
                       checkpoint=ckpt["path"], resumed_from=state.iteration if state is not None else None)


def _restore(state, model, opt, sched, rng, history: dict, evals: dict, best: dict, n_train: int):
    """Put a checkpoint's state into a freshly built run; returns (order, pos, next iteration, elapsed)."""
    try:
        model.load_state_dict(state.model, strict=True)
        opt.load_state_dict(state.optimizer)
        if (sched is None) != (state.scheduler is None):
            raise ValueError("the learning-rate schedule differs")
        if sched is not None:
            sched.load_state_dict(state.scheduler)
        torch.set_rng_state(state.rng["torch"])
        rng.bit_generator.state = state.rng["numpy"]
        if state.rng.get("python") is not None:
            py = state.rng["python"]
            random.setstate((py[0], tuple(py[1]), py[2]))
    except (RuntimeError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise CheckpointError(f"The checkpoint {state.path or ''} does not fit this run ({exc}).") from None
    order = np.asarray(state.order)
    if order.shape != (n_train,) or not 0 <= state.pos <= n_train:
        raise CheckpointError(f"The checkpoint's data order is for {order.shape[0] if order.ndim else '?'} "
                              f"images, this run has {n_train}.")
    if set(state.history) != set(history) or set(state.evals) != set(evals):
        raise CheckpointError("The checkpoint's history does not fit this run (validation on/off?).")
    history.update({k: list(v) for k, v in state.history.items()})
    evals.update({k: list(v) for k, v in state.evals.items()})
    b = dict(state.best)
    best.update(acc=float(b.get("acc", -1.0)), iteration=int(b.get("iteration", 0)), since=int(b.get("since", 0)),
                state=b.get("state"))
    return order, int(state.pos), state.iteration + 1, float(state.elapsed_s)


def run_metadata(cfg: TrainConfig, result: TrainResult, train_data: LoadedData, test_data: LoadedData,
                 note: str = "") -> dict:
    """The JSON metadata stored beside the weights of a run."""
    info = get_info(cfg.dataset)
    return {
        "model": cfg.model,
        "dataset": cfg.dataset,
        "classes": list(info.classes),
        "image_shape": list(info.image_shape),
        "seed": cfg.seed,
        "status": result.status,
        "message": result.message,
        "train_config": cfg.to_dict(),
        "data_source": {"train": train_data.source, "test": test_data.source,
                        "n_train": len(train_data), "n_test": len(test_data), "note": note},
        "metrics": result.metrics,
        "history": result.history,
        "evals": result.evals,
        "code_version": __version__,
        "torch_version": torch.__version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


# ---------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    d = TrainConfig()
    p = argparse.ArgumentParser(
        prog="python -m core.train",
        description="Train one model on one data set with the paper protocol (SGD lr 0.1, "
                    "batch 100, 1,000 iterations) and save a safetensors + JSON checkpoint.")
    p.add_argument("--dataset", default=d.dataset, choices=list(DATASETS), help="data set (default %(default)s)")
    p.add_argument("--model", default=d.model, choices=list_models(), help="model (default %(default)s)")
    p.add_argument("--seed", type=int, default=d.seed, help="seed for weights and batch order (default %(default)s)")
    p.add_argument("--iterations", type=int, default=d.iterations, help="training iterations (default %(default)s)")
    p.add_argument("--batch-size", type=int, default=d.batch_size, help="batch size (default %(default)s)")
    p.add_argument("--lr", type=float, default=d.lr, help="SGD learning rate (default %(default)s)")
    p.add_argument("--momentum", type=float, default=d.momentum, help="SGD momentum (default %(default)s, the paper's plain SGD)")
    p.add_argument("--protocol", choices=list(PROTOCOLS), default=None,
                   help="start from a named protocol's settings (paper, converged); explicit options win")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default=d.optimizer, help="optimizer (default %(default)s)")
    p.add_argument("--weight-decay", type=float, default=d.weight_decay, help="weight decay (default %(default)s)")
    p.add_argument("--schedule", choices=SCHEDULES, default=d.schedule,
                   help="learning-rate schedule over the iterations (default %(default)s)")
    p.add_argument("--step-every", type=int, default=d.step_every, help="step schedule: iterations per step (default %(default)s)")
    p.add_argument("--step-gamma", type=float, default=d.step_gamma, help="step schedule: factor per step (default %(default)s)")
    p.add_argument("--val-images", type=int, default=d.val_images,
                   help="training images held out for validation; the best-validation weights are kept (default %(default)s)")
    p.add_argument("--patience", type=int, default=d.patience,
                   help="early stop after this many evaluations without a better validation accuracy (0 = off)")
    p.add_argument("--grad-clip", type=float, default=None, help="clip the global gradient norm to this value (default: off)")
    p.add_argument("--eval-every", type=int, default=d.eval_every, help="test accuracy on a fixed subset every N iterations (default %(default)s)")
    p.add_argument("--eval-samples", type=int, default=d.eval_samples, help="size of that test subset (default %(default)s)")
    p.add_argument("--class-weighting", default=d.class_weighting, choices=["none", "balanced", "auto"],
                   help="class-weighted loss; auto = balanced when the classes are unbalanced (default %(default)s)")
    p.add_argument("--no-holdout-sample", action="store_true",
                   help="MNIST: also train on images 0..9,999 (by default they are held out because the bundled sample comes from them)")
    p.add_argument("--noise-var", type=float, default=d.noise_var, help="Gaussian noise variance of the final noisy test (default %(default)s)")
    p.add_argument("--noise-draws", type=int, default=d.noise_draws, help="noise draws averaged in the final noisy test (default %(default)s)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: cores, at most 2)")
    p.add_argument("--device", choices=DEVICES, default=d.device,
                   help="auto = CUDA when torch sees a GPU, else CPU (default %(default)s)")
    p.add_argument("--checkpoint-every", type=int, default=d.checkpoint_every,
                   help="training checkpoint (to resume from) every N iterations; 0 = not by count (default %(default)s)")
    p.add_argument("--checkpoint-every-s", type=float, default=d.checkpoint_every_s,
                   help="... and at least every S seconds; 0 = not by time (default %(default)s)")
    p.add_argument("--resume", default=None, metavar="DIR",
                   help="continue an interrupted run from its checkpoint folder (<out>.ckpt); its settings, data "
                        "folder and output path come from the checkpoint (--threads, --quiet and --out still apply)")
    p.add_argument("--keep-checkpoints", action="store_true",
                   help="keep the checkpoint folder after the run completed (default: removed)")
    p.add_argument("--data-dir", default=None, help="folder with <dataset>/{train,test}.npz (default: $RIMSCOPE_DATA_DIR or ./data)")
    p.add_argument("--out", default=None, help="checkpoint path stem (default runs/<dataset>_<model>_s<seed>)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="model config override, e.g. --set k_active=3 (repeatable)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


_CLI_FIELDS = ("device", "iterations", "batch_size", "lr", "momentum", "optimizer", "weight_decay", "schedule", "step_every",
               "step_gamma", "val_images", "patience", "grad_clip", "eval_every", "eval_samples", "class_weighting",
               "noise_var", "noise_draws", "threads", "checkpoint_every", "checkpoint_every_s")


def config_from_args(args) -> TrainConfig:
    """The TrainConfig of parsed CLI arguments: a protocol's settings, then every option given."""
    defaults = build_parser().parse_args([])
    base = dict(PROTOCOLS[args.protocol]) if args.protocol else {}
    for f in _CLI_FIELDS:  # options set away from their defaults override the protocol
        if args.protocol is None or getattr(args, f) != getattr(defaults, f):
            base[f] = getattr(args, f)
    return TrainConfig(dataset=args.dataset, model=args.model, seed=args.seed,
                       holdout_sample=not args.no_holdout_sample, model_overrides=parse_overrides(args.set),
                       **base).validate()


def parse_overrides(items: list[str]) -> dict:
    """``["k_active=3"]`` -> ``{"k_active": 3}`` (values read as JSON where they parse, else text)."""
    import json

    out = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        try:
            out[k.strip()] = json.loads(v)
        except json.JSONDecodeError:
            out[k.strip()] = v
    return out


def main(argv=None) -> int:
    from tqdm import tqdm

    from .checkpoint import save_checkpoint
    from .errors import RimscopeError
    from .resume import load_resume_source, remove_states

    args = build_parser().parse_args(argv)
    state, ckpt_dir = None, None
    try:
        if args.resume:
            ckpt_dir = Path(args.resume)
            state = load_resume_source(ckpt_dir)
            if state.path is not None and ckpt_dir.is_file():
                ckpt_dir = state.path.parent
            cfg = TrainConfig.from_dict(dict(state.train_config))
            if args.threads is not None:
                cfg = dataclasses.replace(cfg, threads=args.threads)
            cfg.validate()
            data_dir = args.data_dir or state.extra.get("data_dir")
            out = Path(args.out or state.extra.get("out") or str(ckpt_dir).removesuffix(".ckpt"))
        else:
            cfg = config_from_args(args)
            data_dir = args.data_dir
            out = Path(args.out or f"runs/{cfg.dataset}_{cfg.model}_s{cfg.seed}")
            ckpt_dir = Path(f"{out}.ckpt")
        train_data, test_data, note = prepare_training_data(cfg, data_dir)
        cfg.validate(n_train=len(train_data))
        print(f"train: {train_data.source} ({len(train_data)} images); test: {test_data.source} ({len(test_data)})",
              file=sys.stderr)
        if note:
            print(note, file=sys.stderr)
        if state is not None:
            print(f"resuming from iteration {state.iteration} ({state.path})", file=sys.stderr)
        done = state.iteration if state is not None else 0
        bar = tqdm(total=cfg.iterations, initial=done, disable=args.quiet, desc=f"{cfg.model} on {cfg.dataset}",
                   unit="it")

        def cb(ev):
            if ev["kind"] == "iter":
                bar.update(1)
                bar.set_postfix(loss=f"{ev['loss']:.3f}", acc=f"{ev['batch_acc']:.2f}")
            elif ev["kind"] == "eval":
                bar.write(f"iteration {ev['iteration']}: test accuracy {ev['test_acc']:.4f} (subset)")
            elif ev["kind"] == "checkpoint" and not ev["ok"]:
                bar.write(f"warning: {ev['message']}")

        extra = {"data_dir": str(Path(data_dir).expanduser().resolve()) if data_dir else None,
                 "out": str(out.expanduser().resolve()), "note": note}
        result = train(cfg, train_data, test_data, callback=cb, checkpoint_dir=ckpt_dir, resume_from=state,
                       checkpoint_extra=extra)
        bar.close()
    except RimscopeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        hint = f"; continue with: python -m core.train --resume {ckpt_dir}" if ckpt_dir and ckpt_dir.is_dir() else ""
        print(f"interrupted{hint}", file=sys.stderr)
        return 130
    meta = run_metadata(cfg, result, train_data, test_data, note)
    if result.status == "diverged":
        remove_states(ckpt_dir)  # nothing to continue: it would diverge again
        print(f"DIVERGED: {result.message}; no checkpoint saved", file=sys.stderr)
        return 3
    try:
        path = save_checkpoint(result.model, meta, out)
    except RimscopeError as exc:
        print(f"error: {exc}; the training checkpoint in {ckpt_dir} is kept (resume with --resume)", file=sys.stderr)
        return 2
    if result.status == "completed" and not args.keep_checkpoints:
        remove_states(ckpt_dir)
    m = result.metrics
    noisy = f", noisy error {m['noisy_test_error']:.4f} (var {cfg.noise_var}, {cfg.noise_draws} draws)" if "noisy_test_error" in m else ""
    resumed = f" (resumed from iteration {result.resumed_from})" if result.resumed_from is not None else ""
    print(f"{cfg.model} on {cfg.dataset} seed {cfg.seed}: {result.status}, {m['iterations_done']} iterations "
          f"in {result.wall_time_s:.1f} s{resumed}; test accuracy {m['test_accuracy']:.4f} (error {m['test_error']:.4f}, "
          f"n={m['test_n']}){noisy}; {m['parameters']:,} parameters; saved {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
