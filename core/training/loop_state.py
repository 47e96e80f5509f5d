"""What a training run changes as it goes (``LoopState``, with the validation bookkeeping
``Best``) and ``StateWriter``, which saves it as a training state (core.training.state) when due.
The loop that drives them is core.training.loop.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..errors import WeightsError
from .config import TrainConfig
from .state import TrainState, write_state


def _to_cpu(obj):
    """A (nested) state dict with every tensor on the CPU (training states are device-independent)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_cpu(v) for v in obj)
    return obj


@dataclass
class Best:
    """Model selection on the validation split: the best accuracy so far and its weights."""

    acc: float = -1.0
    iteration: int = 0
    state: dict | None = None  # the weights of that iteration (None until a validation run evaluates)
    since: int = 0  # evaluations since the last improvement (early stopping counts these)

    def as_dict(self) -> dict:  # the training state's format
        return {"acc": self.acc, "iteration": self.iteration, "state": self.state, "since": self.since}


@dataclass
class LoopState:
    """Everything a run changes as it goes; a training state (core.training.state) is a copy of it."""

    model: torch.nn.Module
    opt: torch.optim.Optimizer
    sched: object | None  # a torch.optim.lr_scheduler, or None
    rng: np.random.Generator  # the batch order
    aug_gen: torch.Generator | None  # the augmentation draws (augment="affine")
    device: torch.device
    order: np.ndarray  # this epoch's permutation of the training images
    pos: int = 0  # the next batch starts here in ``order``
    history: dict = field(default_factory=lambda: {"iteration": [], "loss": [], "batch_acc": []})
    evals: dict = field(default_factory=lambda: {"iteration": [], "test_acc": [], "test_loss": []})
    best: Best = field(default_factory=Best)
    start: int = 1  # the first iteration this call runs
    elapsed_before: float = 0.0  # seconds of training before a resume
    t0: float = field(default_factory=time.perf_counter)
    status: str = "completed"
    message: str = ""

    def elapsed(self) -> float:
        return self.elapsed_before + time.perf_counter() - self.t0

    def note(self, text: str) -> None:
        self.message = (self.message + "; " if self.message else "") + text

    def snapshot(self, cfg: TrainConfig, iteration: int, extra: dict) -> TrainState:
        return TrainState(
            iteration=iteration, model={k: v.detach().cpu() for k, v in self.model.state_dict().items()},
            optimizer=_to_cpu(self.opt.state_dict()),
            scheduler=self.sched.state_dict() if self.sched is not None else None,
            rng={"torch": torch.get_rng_state(), "numpy": self.rng.bit_generator.state, "python": random.getstate(),
                 **({"augment": self.aug_gen.get_state()} if self.aug_gen is not None else {})},
            order=self.order, pos=self.pos, best=self.best.as_dict(), history=self.history, evals=self.evals,
            elapsed_s=self.elapsed(), train_config=cfg.to_dict(), extra=extra)

    def restore(self, state: TrainState, n_train: int) -> None:
        """Put a training state into this freshly set-up run (WeightsError when it does not fit)."""
        try:
            self.model.load_state_dict(state.model, strict=True)
            self.opt.load_state_dict(state.optimizer)
            if (self.sched is None) != (state.scheduler is None):
                raise ValueError("the learning-rate schedule differs")
            if self.sched is not None:
                self.sched.load_state_dict(state.scheduler)
            torch.set_rng_state(state.rng["torch"])
            self.rng.bit_generator.state = state.rng["numpy"]
            if self.aug_gen is not None:
                if state.rng.get("augment") is None:
                    raise ValueError("it has no augmentation generator state")
                self.aug_gen.set_state(state.rng["augment"])
            if state.rng.get("python") is not None:
                py = state.rng["python"]
                random.setstate((py[0], tuple(py[1]), py[2]))
        except (RuntimeError, ValueError, KeyError, TypeError, IndexError) as exc:
            raise WeightsError(f"The training state {state.path or ''} does not fit this run ({exc}).") from None
        order = np.asarray(state.order)
        if order.shape != (n_train,) or not 0 <= state.pos <= n_train:
            raise WeightsError(f"The training state's data order is for {order.shape[0] if order.ndim else '?'} "
                                  f"images, this run has {n_train}.")
        if set(state.history) != set(self.history) or set(state.evals) != set(self.evals):
            raise WeightsError("The training state's history does not fit this run (validation on/off?).")
        self.history.update({k: list(v) for k, v in state.history.items()})
        self.evals.update({k: list(v) for k, v in state.evals.items()})
        b = dict(state.best)
        self.best = Best(acc=float(b.get("acc", -1.0)), iteration=int(b.get("iteration", 0)), state=b.get("state"),
                        since=int(b.get("since", 0)))
        self.order, self.pos, self.start, self.elapsed_before = order, int(state.pos), state.iteration + 1, float(state.elapsed_s)


class StateWriter:
    """Writes the training state into ``folder`` when it is due; a failed write is reported
    (a ``kind='state'`` event with ``ok`` false) and retried at the next due point, not fatal."""

    def __init__(self, folder, cfg: TrainConfig, extra: dict, callback, last_iteration: int):
        self.folder, self.cfg, self.extra, self.callback = folder, cfg, extra, callback
        self.iteration = last_iteration  # the last iteration saved (or resumed from)
        self.at = time.monotonic()
        self.path: Path | None = None
        self.errors: list[str] = []

    def due(self, it: int) -> bool:
        every, every_s = self.cfg.state_every, self.cfg.state_every_s
        return it < self.cfg.iterations and bool(
            (every and it % every == 0) or (every_s and time.monotonic() - self.at >= every_s))

    def write(self, run: LoopState, it: int) -> None:
        t = time.perf_counter()
        try:
            path = write_state(self.folder, run.snapshot(self.cfg, it, self.extra))
        except WeightsError as exc:
            self.errors.append(str(exc))
            self.at = time.monotonic()
            if self.callback:
                self.callback({"kind": "state", "iteration": it, "ok": False, "message": str(exc)})
            return
        self.iteration, self.at, self.path = it, time.monotonic(), path
        if self.callback:
            self.callback({"kind": "state", "iteration": it, "ok": True, "path": str(path),
                           "seconds": time.perf_counter() - t})
