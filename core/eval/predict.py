"""One evaluation path for every model and caller: clean and noisy test error, one trace.

All functions take images as stored (uint8) or as float in [0,1], turn them into row
sequences with ``core.data.transforms.to_sequence`` and run the model in batches under
``no_grad`` through ``forward_batched``, the one inference loop (core.eval.robustness_points uses it too).
Deterministic: same model, images and seed give the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ..data.transforms import add_noise, to_sequence

# Images per forward pass. Another batch size changes RIM's and RMC's logits by about 1e-6
# (float sums in another order), so each keeps the one its recorded numbers were made with.
BATCH = 1000  # predict_logits, evaluate, noisy_accuracy: the training loop and every shipped metric
TRACE_BATCH = 500  # with the per-timestep activity kept (core.eval.robustness_points): RIM's per-image cost
#                    grows with batch size beyond this on a small CPU


def batched_outputs(model: torch.nn.Module, images, *, batch_size: int = BATCH, with_trace: bool = False):
    """The one inference loop: yields ``(logits, trace or None)`` per batch of ``images`` (uint8
    or [0, 1] floats), in evaluation mode without gradients (the model's mode is restored after)."""
    x_all = np.asarray(images)
    if len(x_all) == 0:
        raise ValueError("no images to evaluate")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    try:
        with torch.no_grad():
            for i in range(0, len(x_all), batch_size):
                x = to_sequence(x_all[i : i + batch_size]).to(device)
                yield model(x, return_trace=True) if with_trace else (model(x), None)
    finally:
        model.train(was_training)


def forward_batched(model: torch.nn.Module, images, *, batch_size: int = BATCH,
                    with_activity: bool = False) -> tuple[torch.Tensor, np.ndarray | None]:
    """Logits ``[N, C]`` (on the CPU) and, with ``with_activity``, the trace's activity
    ``[N, T, U]``, through ``batched_outputs``."""
    logits, acts = [], []
    for out, trace in batched_outputs(model, images, batch_size=batch_size, with_trace=with_activity):
        if with_activity:
            acts.append(trace["activity"].float().cpu().numpy())
        logits.append(out.cpu())
    return torch.cat(logits), (np.concatenate(acts) if with_activity else None)


def predict_logits(model: torch.nn.Module, images, batch_size: int = BATCH) -> torch.Tensor:
    """Logits ``[N, C]`` for a batch of images."""
    return forward_batched(model, images, batch_size=batch_size)[0]


def predict_proba(model, images, batch_size: int = BATCH) -> np.ndarray:
    return torch.softmax(predict_logits(model, images, batch_size), dim=-1).numpy()


@torch.no_grad()
def trace_one(model, image) -> tuple[np.ndarray, dict]:
    """Class probabilities ``[C]`` and the per-timestep trace for one image ``[H,W(,C)]``."""
    model.eval()
    logits, trace = model(to_sequence(np.asarray(image)[None]), return_trace=True)
    probs = torch.softmax(logits, -1)[0].numpy()
    return probs, {k: v[0].numpy() for k, v in trace.items()}


@dataclass
class EvalResult:
    accuracy: float
    loss: float
    n: int
    predictions: np.ndarray  # [N] predicted class
    per_class_accuracy: np.ndarray  # [C], NaN where a class has no images
    confusion: np.ndarray  # [C, C], rows = true class, columns = predicted

    @property
    def error(self) -> float:
        return 1.0 - self.accuracy

    def summary(self) -> dict:
        return {"accuracy": self.accuracy, "error": self.error, "loss": self.loss, "n": self.n,
                "per_class_accuracy": [None if np.isnan(a) else float(a) for a in self.per_class_accuracy]}


def evaluate(model, images, labels, num_classes: int | None = None, batch_size: int = BATCH) -> EvalResult:
    """Accuracy, mean cross-entropy, per-class accuracy and confusion matrix."""
    labels = np.asarray(labels, dtype=np.int64)
    logits = predict_logits(model, images, batch_size)
    C = num_classes or logits.shape[1]
    loss = float(F.cross_entropy(logits, torch.from_numpy(labels)).item())
    pred = logits.argmax(1).numpy()
    confusion = np.zeros((C, C), dtype=np.int64)
    np.add.at(confusion, (labels, pred), 1)
    counts = confusion.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_class = np.where(counts > 0, np.diag(confusion) / np.maximum(counts, 1), np.nan)
    return EvalResult(float((pred == labels).mean()), loss, len(labels), pred, per_class, confusion)


def noisy_accuracy(model, images, labels, mode: str = "gaussian", strength: float = 0.01,
                   draws: int = 10, seed: int = 0, batch_size: int = BATCH) -> np.ndarray:
    """Accuracy under ``draws`` independent noise draws (seeds ``seed .. seed+draws-1``)."""
    labels = np.asarray(labels)
    accs = []
    for d in range(draws):
        noisy = add_noise(images, mode, strength, seed=seed + d)
        pred = predict_logits(model, noisy, batch_size).argmax(1).numpy()
        accs.append(float((pred == labels).mean()))
    return np.asarray(accs)

