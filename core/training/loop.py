"""The one training loop, for every model and every caller (CLI, pages, reproduction).

Paper protocol by default: cross-entropy, plain SGD with learning rate 0.1, batch 100,
1,000 iterations. Seeded (weights and batch order), optional gradient clipping, a progress
callback, a stop signal, a record per iteration (loss, batch accuracy) and a periodic test
accuracy on a fixed test subset. A NaN or infinite loss stops the run as "diverged".

Two words for two formats: the *weights* (core.training.weights: a model file, safetensors +
JSON) are what a finished run leaves; the *training state* (core.training.state: weights,
optimiser, RNGs, data order, history) is written every ``state_every`` iterations and at
most every ``state_every_s`` seconds when the caller names a ``state_dir``; ``resume_from``
continues from one, bit-identical to the uninterrupted run.

``train()`` reads top to bottom as its steps: prepare the data, check what is resumed, set up
(model, optimiser, generators), then per iteration one training step, the periodic evaluation
and the training state when due, and finally the final evaluation. What changes while it runs
is one ``LoopState``; writing the training state is ``StateWriter``'s job.

The settings (``TrainConfig``, ``PROTOCOLS``, the table of derived seeds ``SEEDS``) live in
core.training.config, the training data (``prepare_training_data``, the MNIST holdout, the
bundled demo) in core.data.plan, the CLI in core.training.cli.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ..data.datasets import LoadedData, get_info
from ..data.transforms import affine_augment, draw_affine_params, draw_scan_params, scan_augment, to_sequence
from ..errors import ConfigError, WeightsError
from ..eval.predict import evaluate, noisy_accuracy
from ..models.registry import build_model, count_parameters
from ..seeds import SEEDS
from .config import TrainConfig, resolve_device
from .lifecycle import kept_best_note
from .loop_state import LoopState, StateWriter
from .state import TrainState, config_mismatch, data_fingerprint, load_resume_source, remove_states


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


def default_threads() -> int:
    """Torch threads for a run that names none: ``OMP_NUM_THREADS`` where the environment sets
    it (as torch itself reads it; a shared machine or a test session sets 1), else the number of
    cores, at most 2 (past that, row-by-row RNN steps gain little)."""
    env = os.environ.get("OMP_NUM_THREADS", "").strip()
    if env.isdigit() and int(env) >= 1:
        return int(env)
    return max(1, min(2, os.cpu_count() or 1))


def set_threads(threads: int | None) -> int:
    n = threads or default_threads()
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
    perm = np.random.default_rng(SEEDS.of("validation", cfg.seed)).permutation(n)
    return np.sort(perm[cfg.val_images :]), np.sort(perm[: cfg.val_images])


# --------------------------------------------------------------------------- what a run works on


@dataclass
class RunData:
    """The images of one run: training (less the validation split), validation, the fixed subset
    of the periodic evaluation, the whole test set, and the loss's class weights."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray | None
    y_val: np.ndarray | None
    x_eval: np.ndarray
    y_eval: np.ndarray
    test: LoadedData
    num_classes: int
    input_dim: int
    class_weights: torch.Tensor | None
    weighting: str  # the class weighting used: "none" or "balanced"


def prepare_data(cfg: TrainConfig, train_data: LoadedData, test_data: LoadedData) -> RunData:
    info = get_info(cfg.dataset)
    C = len(info.classes)
    x_train, y_train = train_data.images, np.asarray(train_data.labels, dtype=np.int64)
    x_val = y_val = None
    if cfg.val_images:
        tr_idx, va_idx = split_validation(cfg, len(y_train))
        x_val, y_val = x_train[va_idx], y_train[va_idx]
        x_train, y_train = x_train[tr_idx], y_train[tr_idx]
    weights, weighting = _class_weights(cfg, y_train, C)
    # fixed periodic-evaluation subset, the same for every model with this seed
    n_eval = min(cfg.eval_samples, len(test_data))
    eval_idx = np.sort(np.random.default_rng(SEEDS.of("eval_subset", cfg.seed))
                       .choice(len(test_data), n_eval, replace=False))
    return RunData(x_train, y_train, x_val, y_val, test_data.images[eval_idx], test_data.labels[eval_idx],
                   test_data, C, info.input_dim, weights, weighting)


# --------------------------------------------------------------------------- the loop


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
    ``cfg.state_every`` iterations and at most every ``cfg.state_every_s`` seconds,
    and when the run is stopped; each is reported as a ``kind='state'`` event (``ok``
    false and a ``message`` when the write failed: training goes on, the earlier training state
    is kept). ``state_extra`` is stored with each (the caller's notes, JSON).
    ``resume_from``: a state folder, a state file or a ``core.training.state.TrainState`` to
    continue from; the result is bit-identical to the uninterrupted run (same machine and
    threads). Without it, a fresh run first clears ``state_dir``.
    """
    cfg.validate(n_train=len(train_data))
    set_threads(cfg.threads)
    data = prepare_data(cfg, train_data, test_data)
    resumed, fingerprint = check_resume(cfg, train_data, state_dir, resume_from)
    run = set_up(cfg, data, resumed)
    writer = None
    if state_dir is not None:
        writer = StateWriter(state_dir, cfg, {**(state_extra or {}), "data": fingerprint}, callback,
                             resumed.iteration if resumed is not None else 0)

    for it in range(run.start, cfg.iterations + 1):
        if should_stop is not None and should_stop():
            run.status, run.message = "stopped", f"stopped by the user after {it - 1} iterations"
            if writer is not None and it - 1 > writer.iteration:
                writer.write(run, it - 1)  # resume continues exactly here
            break
        if not train_step(cfg, run, data, it, callback):
            break  # diverged
        if it % cfg.eval_every == 0 or it == cfg.iterations:
            periodic_eval(run, data, it, callback)
            if cfg.patience and run.best.since >= cfg.patience:
                run.message = (f"early stop at iteration {it}: no better validation accuracy in {cfg.patience} "
                               f"evaluations")
                break
        if writer is not None and writer.due(it):
            writer.write(run, it)

    return finish(cfg, run, data, writer, resumed)


def check_resume(cfg: TrainConfig, train_data: LoadedData, state_dir, resume_from):
    """The training state to resume (or None) and the training data's fingerprint (None when no
    state is read or written); a state of other settings or other data is refused. A fresh run
    with a ``state_dir`` clears it."""
    resumed = load_resume_source(resume_from) if resume_from is not None else None
    fingerprint = None
    if resumed is not None or state_dir is not None:
        fingerprint = data_fingerprint(train_data.images, train_data.labels)
    if resumed is not None:
        diff = config_mismatch(resumed, cfg.to_dict())
        if diff:
            raise WeightsError(f"The training state {resumed.path or ''} belongs to a run with other settings "
                                  f"({', '.join(diff)}); it cannot be resumed with these.")
        theirs = (resumed.extra or {}).get("data")
        if isinstance(theirs, dict) and theirs != fingerprint:
            raise WeightsError("The training state was trained on other training data "
                                  f"({theirs.get('n')} images, not these {fingerprint['n']}); it cannot be resumed "
                                  "with this data.")
    elif state_dir is not None:
        remove_states(state_dir)  # a fresh run: nothing of an earlier one may be resumed
    return resumed, fingerprint


def set_up(cfg: TrainConfig, data: RunData, resumed: TrainState | None) -> LoopState:
    """The seeded model, optimiser and generators (core.training.config.SEEDS), or a resumed state."""
    torch.manual_seed(SEEDS.of("weights", cfg.seed))
    try:
        model = build_model(cfg.model, input_dim=data.input_dim, num_classes=data.num_classes,
                            **cfg.model_overrides)
    except (KeyError, ValueError, TypeError, ZeroDivisionError) as exc:  # e.g. k_active > num_units
        raise ConfigError(f"The model settings are not valid: {exc}") from None
    device = resolve_device(cfg.device)
    model.to(device).train()  # weights are drawn on the CPU (same numbers on every device), then moved
    if data.class_weights is not None:
        data.class_weights = data.class_weights.to(device)
    opt, sched = make_optimizer(cfg, model.parameters())
    rng = np.random.default_rng(SEEDS.of("order", cfg.seed))
    # augmentation draws come from their own generator (saved in every training state), so the weights,
    # the batch order and any model randomness are those of the unaugmented run
    aug_gen = torch.Generator().manual_seed(SEEDS.of("augment", cfg.seed)) if cfg.augment != "none" else None
    run = LoopState(model, opt, sched, rng, aug_gen, device, order=rng.permutation(len(data.y_train)))
    if data.x_val is not None:
        run.evals.update(val_acc=[], val_loss=[])
    if resumed is not None:
        run.restore(resumed, len(data.y_train))
    run.t0 = time.perf_counter()
    return run


def train_step(cfg: TrainConfig, run: LoopState, data: RunData, it: int, callback) -> bool:
    """One optimiser step on the next batch; False (status "diverged") when the loss is not finite."""
    if run.pos + cfg.batch_size > len(run.order):  # new epoch: reshuffle
        run.order, run.pos = run.rng.permutation(len(data.y_train)), 0
    idx = run.order[run.pos : run.pos + cfg.batch_size]
    run.pos += cfg.batch_size
    if run.aug_gen is not None:  # training batch only; validation and test images are never augmented
        if cfg.augment == "scan":
            xb = to_sequence(scan_augment(data.x_train[idx], draw_scan_params(len(idx), run.aug_gen)))
        else:
            xb = to_sequence(affine_augment(data.x_train[idx], draw_affine_params(len(idx), run.aug_gen)))
    else:
        xb = to_sequence(data.x_train[idx])
    xb = xb.to(run.device, non_blocking=True)
    yb = torch.from_numpy(data.y_train[idx]).to(run.device, non_blocking=True)

    logits = run.model(xb)
    loss = F.cross_entropy(logits, yb, weight=data.class_weights)
    loss_val = float(loss.item())
    acc = float((logits.argmax(1) == yb).float().mean().item())
    run.history["iteration"].append(it)
    run.history["loss"].append(loss_val)
    run.history["batch_acc"].append(acc)
    event = {"kind": "iter", "iteration": it, "total": cfg.iterations, "loss": loss_val, "batch_acc": acc}
    if not math.isfinite(loss_val):
        run.status = "diverged"
        run.message = (f"loss became {loss_val} at iteration {it}; the run was stopped (try a smaller learning rate "
                       "or gradient clipping)")
        if callback:
            callback(event)
        return False
    run.opt.zero_grad(set_to_none=True)
    loss.backward()
    if cfg.grad_clip is not None:
        torch.nn.utils.clip_grad_norm_(run.model.parameters(), cfg.grad_clip)
    run.opt.step()
    if run.sched is not None:
        run.sched.step()
    if callback:
        callback({**event, "elapsed_s": run.elapsed()})
    return True


def periodic_eval(run: LoopState, data: RunData, it: int, callback) -> None:
    """Test accuracy on the fixed subset; with a validation split also model selection (``run.best``),
    which looks at validation only, never at the test set."""
    r = evaluate(run.model, data.x_eval, data.y_eval, data.num_classes)
    run.model.train()
    run.evals["iteration"].append(it)
    run.evals["test_acc"].append(r.accuracy)
    run.evals["test_loss"].append(r.loss)
    ev = {"kind": "eval", "iteration": it, "test_acc": r.accuracy, "test_loss": r.loss}
    if data.x_val is not None:
        v = evaluate(run.model, data.x_val, data.y_val, data.num_classes)
        run.model.train()
        run.evals["val_acc"].append(v.accuracy)
        run.evals["val_loss"].append(v.loss)
        ev.update(val_acc=v.accuracy, val_loss=v.loss)
        best = run.best
        if v.accuracy > best.acc:
            best.acc, best.iteration, best.since = v.accuracy, it, 0
            best.state = {k: t.detach().clone() for k, t in run.model.state_dict().items()}
        else:
            best.since += 1
    if callback:
        callback(ev)


def finish(cfg: TrainConfig, run: LoopState, data: RunData, writer: StateWriter | None,
           resumed: TrainState | None) -> TrainResult:
    """Keep the best validation weights, evaluate on the whole test set (and under noise), and
    gather the metrics."""
    model, best = run.model, run.best
    metrics = {"iterations_done": len(run.history["iteration"]), "train_time_s": run.elapsed(),
               "class_weighting": data.weighting, "parameters": count_parameters(model)}
    if resumed is not None:
        metrics["resumed_from_iteration"] = resumed.iteration
    if writer is not None and writer.errors:
        metrics["state_write_errors"] = len(writer.errors)
        run.note(f"{len(writer.errors)} training state write(s) failed, the last: {writer.errors[-1]}")
    if best.state is not None and run.status != "diverged":
        model.load_state_dict(best.state)  # the weights of the best validation accuracy
        metrics.update(best_iteration=best.iteration, val_accuracy=best.acc, val_n=len(data.y_val))
        run.note(kept_best_note(best.iteration, best.acc))
    if run.status != "diverged":
        test = data.test
        final = evaluate(model, test.images, test.labels, data.num_classes)
        metrics.update(test_accuracy=final.accuracy, test_error=final.error, test_loss=final.loss,
                       test_n=final.n, per_class_accuracy=final.summary()["per_class_accuracy"],
                       confusion=final.confusion.tolist())
        if cfg.noise_draws > 0:
            accs = noisy_accuracy(model, test.images, test.labels, "gaussian", cfg.noise_var,
                                  draws=cfg.noise_draws, seed=SEEDS.fixed_final_noise)
            metrics.update(noise_var=cfg.noise_var, noise_draws=cfg.noise_draws,
                           noisy_test_accuracy=float(accs.mean()),
                           noisy_test_accuracy_std=float(accs.std()),
                           noisy_test_error=float(1 - accs.mean()))
    metrics["device"] = str(run.device)
    metrics["threads"] = torch.get_num_threads()  # what the run used (its config may say None: the default)
    model.cpu()  # training states and every later use are device-independent
    return TrainResult(run.status, model, run.history, run.evals, metrics, run.elapsed(), run.message,
                       state_path=writer.path if writer is not None else None,
                       resumed_from=resumed.iteration if resumed is not None else None)
