"""The one training loop, for every model and every caller (CLI, pages, reproduction).

Paper protocol by default: cross-entropy, plain SGD with learning rate 0.1, batch 100,
1,000 iterations. Seeded (weights and batch order), optional gradient clipping, a progress
callback, a stop signal, a record per iteration (loss, batch accuracy) and a periodic test
accuracy on a fixed test subset. A NaN or infinite loss stops the run as "diverged".

Two words for two formats: the *weights* (core.training.weights: a model file, safetensors +
JSON) are what a finished run leaves; the *training state* (core.training.state: weights,
optimiser, RNGs, data order, history) is written every ``checkpoint_every`` iterations and at
most every ``checkpoint_every_s`` seconds when the caller names a ``state_dir``; ``resume_from``
continues from one, bit-identical to the uninterrupted run.

The settings (``TrainConfig``, ``PROTOCOLS``) live in core.training.config, the training data
(``prepare_training_data``, the MNIST holdout, the bundled demo) in core.data.datasets, the
CLI in core.training.cli.
"""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ..data.datasets import LoadedData, get_info
from ..data.transforms import affine_augment, draw_affine_params, to_sequence
from ..errors import CheckpointError, ConfigError
from ..eval.predict import evaluate, noisy_accuracy
from ..models.registry import build_model, count_parameters
from . import state as R
from .config import (
    TrainConfig,
    resolve_device,
)

AUGMENT_SEED_OFFSET = 30_000  # the augmentation generator of seed s starts from 30,000 + s


@dataclass
class TrainResult:
    status: str  # "completed", "stopped" or "diverged"
    model: torch.nn.Module
    history: dict  # per iteration: iteration, loss, batch_acc
    evals: dict  # periodic: iteration, test_acc, test_loss
    metrics: dict  # final: test_accuracy, test_error, noisy_test_accuracy, ...
    wall_time_s: float
    message: str = ""
    state_path: Path | None = None  # the last training state written (core.training.state), if any
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


def train(cfg: TrainConfig, train_data: LoadedData, test_data: LoadedData, *,
          callback: Callable[[dict], None] | None = None,
          should_stop: Callable[[], bool] | None = None,
          state_dir: str | Path | None = None,
          resume_from=None,
          state_extra: dict | None = None) -> TrainResult:
    """Train ``cfg.model`` on ``train_data``; evaluate on ``test_data``.

    ``callback`` gets a dict per iteration (``kind='iter'``) and per periodic evaluation
    (``kind='eval'``). ``should_stop()`` is polled every iteration; when it returns true the
    run ends with status "stopped" and keeps what it learned so far.

    ``state_dir``: write the training state there (core.training.state) every
    ``cfg.checkpoint_every`` iterations and at most every ``cfg.checkpoint_every_s`` seconds,
    and when the run is stopped; each is reported as a ``kind='checkpoint'`` event (``ok``
    false and a ``message`` when the write failed: training goes on, the earlier checkpoint
    is kept). ``state_extra`` is stored with each (the caller's notes, JSON).
    ``resume_from``: a state folder, a state file or a ``core.training.state.TrainState`` to
    continue from; the result is bit-identical to the uninterrupted run (same machine and
    threads). Without it, a fresh run first clears ``state_dir``.
    """
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
    if state is not None or state_dir is not None:
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
    elif state_dir is not None:
        R.remove_states(state_dir)  # a fresh run: nothing of an earlier one may be resumed

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
    # augmentation draws come from their own generator (saved in every checkpoint), so the weights,
    # the batch order and any model randomness are those of the unaugmented run
    aug_gen = torch.Generator().manual_seed(AUGMENT_SEED_OFFSET + cfg.seed) if cfg.augment != "none" else None

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
                                                     len(y_train), aug_gen)
    t0 = time.perf_counter()
    extra = {**(state_extra or {}), "data": fingerprint}
    ckpt = {"iteration": state.iteration if state is not None else 0, "at": time.monotonic(), "path": None,
            "errors": [], "written": 0}

    def checkpoint(it: int) -> None:
        """Write the state after ``it`` iterations; a failed write is reported, not fatal."""
        t = time.perf_counter()
        st = R.TrainState(
            iteration=it, model={k: v.detach().cpu() for k, v in model.state_dict().items()},
            optimizer=_to_cpu(opt.state_dict()),
            scheduler=sched.state_dict() if sched is not None else None,
            rng={"torch": torch.get_rng_state(), "numpy": rng.bit_generator.state, "python": random.getstate(),
                 **({"augment": aug_gen.get_state()} if aug_gen is not None else {})},
            order=order, pos=pos, best=best, history=history, evals=evals,
            elapsed_s=elapsed_before + t - t0, train_config=cfg.to_dict(), extra=extra)
        try:
            path = R.write_state(state_dir, st)
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
            if state_dir is not None and it - 1 > ckpt["iteration"]:
                checkpoint(it - 1)  # resume continues exactly here
            break
        if pos + cfg.batch_size > len(order):  # new epoch: reshuffle
            order, pos = rng.permutation(len(y_train)), 0
        idx = order[pos : pos + cfg.batch_size]
        pos += cfg.batch_size
        if aug_gen is not None:  # training batch only; validation and test images are never augmented
            xb = to_sequence(affine_augment(x_train[idx], draw_affine_params(len(idx), aug_gen)))
        else:
            xb = to_sequence(x_train[idx])
        xb = xb.to(device, non_blocking=True)
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
        if state_dir is not None and it < cfg.iterations and (
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
                       state_path=ckpt["path"], resumed_from=state.iteration if state is not None else None)


def _restore(state, model, opt, sched, rng, history: dict, evals: dict, best: dict, n_train: int,
             aug_gen: torch.Generator | None = None):
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
        if aug_gen is not None:
            if state.rng.get("augment") is None:
                raise ValueError("it has no augmentation generator state")
            aug_gen.set_state(state.rng["augment"])
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


