"""Which pixels drive a choice: Integrated Gradients (Captum) with respect to the input pixels.

* ``prediction_attribution``: of the predicted (or a given) class's logit, for every model.
* ``selection_attribution``: of one LSTM's selection score at one row (the head-averaged
  input-attention weight on that row, which ranks the LSTMs), for the RIM.

Both integrate along the straight path from a baseline image (black by default) to the image.
Completeness (the attributions sum to f(image) - f(baseline)) holds up to the quadrature
error when f is continuous along the path. It does not hold for the RIM with the attention's
top-k selection: the active set jumps where two LSTMs' weights cross, the logit jumps with it,
and a gradient cannot see a jump. ``Attribution.delta`` is the gap, reported beside every map,
never hidden; tests/test_attribution.py checks completeness where it must hold.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..data.transforms import to_sequence
from ..models.rim import RIM

STEPS = 64  # points of the path integral (Gauss-Legendre, Captum's default rule) in the pages
# completeness bound where it must hold: |sum - (f(x) - f(baseline))| <= TOLERANCE * max(1, |f(x) - f(baseline)|);
# tests/test_attribution.py checks it at 512 points on the shipped MNIST models (at 64, the ReLU and
# PReLU kinks of IndRNN and EntNet leave a quadrature error of several per cent)
TOLERANCE = 0.02


@dataclass
class Attribution:
    """One attribution map with what completeness says about it."""

    pixels: np.ndarray  # [H, W] (summed over colour channels) or [H, W, C] as the image
    target: str  # what is attributed, in words
    value: float  # f(image)
    baseline_value: float  # f(baseline)

    @property
    def total(self) -> float:
        return float(self.pixels.sum())

    @property
    def delta(self) -> float:
        """Completeness gap: sum of the attributions minus (f(image) - f(baseline))."""
        return self.total - (self.value - self.baseline_value)

    @property
    def complete(self) -> bool:
        return abs(self.delta) <= TOLERANCE * max(1.0, abs(self.value - self.baseline_value))

    def summary(self) -> str:
        return (f"attributions sum to {self.total:+.3f}; {self.target} is {self.value:+.3f} on the image and "
                f"{self.baseline_value:+.3f} on the baseline (difference {self.value - self.baseline_value:+.3f}); "
                f"completeness gap {self.delta:+.3f}" + ("" if self.complete else f" (above the {TOLERANCE:.0%} bound)"))


def _ig(forward, image, baseline, steps: int) -> tuple[np.ndarray, float, float]:
    from captum.attr import IntegratedGradients

    x = to_sequence(np.asarray(image)[None]).double()
    b = torch.zeros_like(x) if baseline is None else to_sequence(np.asarray(baseline)[None]).double()
    attr = IntegratedGradients(forward).attribute(x, baselines=b, n_steps=steps, internal_batch_size=steps)
    with torch.no_grad():
        fx, fb = float(forward(x)[0]), float(forward(b)[0])
    shape = np.asarray(image).shape
    return attr[0].detach().numpy().reshape(shape), fx, fb


def _double_copy(model):
    """A float64 copy in evaluation mode (the path integral in float64: the gap is the method's)."""
    import copy

    m = copy.deepcopy(model).double().eval()
    for p in m.parameters():
        p.requires_grad_(False)
    return m


def prediction_attribution(model, image, target: int | None = None, *, baseline=None,
                           steps: int = STEPS) -> Attribution:
    """Integrated Gradients of class ``target``'s logit (default: the predicted class)."""
    m = _double_copy(model)
    if target is None:
        with torch.no_grad():
            target = int(m(to_sequence(np.asarray(image)[None]).double()).argmax(1)[0])
    pixels, fx, fb = _ig(lambda x: m(x)[:, target], image, baseline, steps)
    return Attribution(pixels, f"the logit of class {target}", fx, fb)


def selection_scores(model: RIM, x: torch.Tensor, row: int) -> torch.Tensor:
    """The head-averaged input-attention weight of every LSTM on row ``row`` (1-based) [B, n],
    differentiable with respect to x (the reference step, whichever implementation the model runs)."""
    c = model.config
    e = model.encoder(x)
    B = x.shape[0]
    h = cell = x.new_zeros(B, c.num_units, c.hidden_size)
    for t in range(row):
        h, cell, tr = model.step(e[:, t], h, cell)
    return tr["input_attention"]


def selection_attribution(model: RIM, image, row: int, unit: int, *, baseline=None,
                          steps: int = STEPS) -> Attribution:
    """Integrated Gradients of LSTM ``unit``'s (0-based) selection score at row ``row`` (1-based)."""
    if not isinstance(model, RIM):
        raise ValueError("selection scores exist for the RIM only")
    T = np.asarray(image).shape[0]
    if not 1 <= row <= T:
        raise ValueError(f"row must be in 1..{T}, got {row}")
    m = _double_copy(model)
    pixels, fx, fb = _ig(lambda x: selection_scores(m, x, row)[:, unit], image, baseline, steps)
    return Attribution(pixels, f"the selection score of {m.unit_names[unit]} at row {row}", fx, fb)
