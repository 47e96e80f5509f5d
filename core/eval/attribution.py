"""Which pixels drive a choice: Integrated Gradients (Captum) with respect to the input pixels.

* ``prediction_attribution``: of the predicted (or a given) class's logit, for every model.
* ``selection_attribution``: for the RIM, of one LSTM's selection *margin* at one row (its
  head-averaged input-attention weight minus that of the LSTM it competes with for a place:
  the (k+1)-th ranked on the image when it is among the top k, else the k-th), or of its raw
  weight (``margin=False``).

Both integrate along the straight path from a baseline image (black by default) to the image.
Completeness (the attributions sum to f(image) - f(baseline)) holds up to the quadrature
error when f is smooth along the path; for a smooth f the points double from ``steps`` until
that error is within ``TOLERANCE`` (at most ``MAX_STEPS``). For the RIM the attention's top-k selection makes the
logit jump where two LSTMs' weights cross, and a gradient cannot see a jump; so by default
(``frozen=True``) the attributed function runs every row with **the input's own active mask
held fixed** (``Intervention(force=mask)``): a smooth function of the pixels, equal to the
model's output on the image itself, for which completeness holds (tests/test_attribution.py,
50 images). With ``frozen=False`` the function is the model as it runs, mask switches and all;
``Attribution.delta`` is then the gap the switches leave, reported beside every map, never
hidden. The comparator of the margin is fixed on the image (which LSTM ranks k-th or (k+1)-th
there), so the margin is smooth along the path too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..data.transforms import to_sequence
from ..models.rim import RIM, Intervention

STEPS = 128  # points of the path integral (Gauss-Legendre, Captum's default rule) in the pages; with the
# frozen mask the points double (up to MAX_STEPS) until the quadrature error is within the bound: on a few
# images a logit changes steeply somewhere along the path (e.g. 4.2 % at 128 points, 1.5 % at 512, 0.05 % at 1,024)
MAX_STEPS = 1024
# completeness bound where it must hold: |sum - (f(x) - f(baseline))| <= TOLERANCE * max(1, |f(x) - f(baseline)|);
# tests/test_attribution.py checks it at 512 points on the shipped MNIST models (at 64, the ReLU and
# PReLU kinks of IndRNN and EntNet leave a quadrature error of several per cent)
TOLERANCE = 0.02


@dataclass
class Attribution:
    """One attribution map with what completeness says about it (in words:
    ``core.report.intervene.attribution_caption``)."""

    pixels: np.ndarray  # [H, W] (summed over colour channels) or [H, W, C] as the image
    kind: str  # the function attributed: "logit" (a class's), "margin" or "score" (an LSTM's selection)
    value: float  # f(image)
    baseline_value: float  # f(baseline)
    target_class: int | None = None  # the class whose logit is attributed ("logit")
    frozen: bool = False  # the function held the input's own active mask fixed along the path
    unit: int | None = None  # the LSTM whose selection is attributed (0-based; "margin", "score")
    competitor: int | None = None  # the LSTM its margin is taken against ("margin")
    row: int | None = None  # the row of the selection (1-based; "margin", "score")
    steps: int = 0  # points of the path integral used

    @property
    def total(self) -> float:
        return float(self.pixels.sum())

    @property
    def delta(self) -> float:
        """Completeness gap: sum of the attributions minus (f(image) - f(baseline))."""
        return self.total - (self.value - self.baseline_value)

    @property
    def relative_gap(self) -> float:
        """|delta| over max(1, |f(image) - f(baseline)|): what ``complete`` compares with ``TOLERANCE``."""
        return abs(self.delta) / max(1.0, abs(self.value - self.baseline_value))

    @property
    def complete(self) -> bool:
        return self.relative_gap <= TOLERANCE


def _ig(forward, image, baseline, steps: int) -> tuple[np.ndarray, float, float]:
    from captum.attr import IntegratedGradients

    x = to_sequence(np.asarray(image)[None]).double()
    b = torch.zeros_like(x) if baseline is None else to_sequence(np.asarray(baseline)[None]).double()
    attr = IntegratedGradients(forward).attribute(x, baselines=b, n_steps=steps, internal_batch_size=steps)
    with torch.no_grad():
        fx, fb = float(forward(x)[0]), float(forward(b)[0])
    shape = np.asarray(image).shape
    return attr[0].detach().numpy().reshape(shape), fx, fb


def _integrate(forward, image, baseline, steps: int, adaptive: bool) -> tuple[np.ndarray, float, float, int]:
    """``_ig`` at ``steps`` points; with ``adaptive`` (a smooth function: its gap is quadrature
    error) the points double until completeness holds or ``MAX_STEPS`` is reached."""
    while True:
        pixels, fx, fb = _ig(forward, image, baseline, steps)
        gap = abs(float(pixels.sum()) - (fx - fb)) / max(1.0, abs(fx - fb))
        if not adaptive or gap <= TOLERANCE or steps >= MAX_STEPS:
            return pixels, fx, fb, steps
        steps = min(2 * steps, MAX_STEPS)


def _double_copy(model):
    """A float64 copy in evaluation mode (the path integral in float64: the gap is the method's)."""
    import copy

    m = copy.deepcopy(model).double().eval()
    for p in m.parameters():
        p.requires_grad_(False)
    return m


def own_mask(model, x: torch.Tensor) -> torch.Tensor | None:
    """The active mask [T, n] of one input ``x`` [1, T, D] (None for a model without one)."""
    if not isinstance(model, RIM):
        return None
    with torch.no_grad():
        _, trace = model(x, return_trace=True)
    return trace["active"][0]


def prediction_attribution(model, image, target: int | None = None, *, baseline=None,
                           steps: int = STEPS, frozen: bool = True) -> Attribution:
    """Integrated Gradients of class ``target``'s logit (default: the predicted class). For the
    RIM with ``frozen`` the function holds the image's own active mask fixed along the path."""
    m = _double_copy(model)
    x = to_sequence(np.asarray(image)[None]).double()
    mask = own_mask(m, x) if frozen else None
    iv = None if mask is None else Intervention(force=mask)
    if target is None:
        with torch.no_grad():
            target = int(m(x).argmax(1)[0])
    pixels, fx, fb, used = _integrate(lambda x: m(x, intervention=iv)[:, target] if iv is not None else
                                      m(x)[:, target], image, baseline, steps,
                                      adaptive=iv is not None or not isinstance(m, RIM))
    return Attribution(pixels, "logit", fx, fb, target_class=target, frozen=iv is not None, steps=used)


def selection_scores(model: RIM, x: torch.Tensor, row: int, mask: torch.Tensor | None = None) -> torch.Tensor:
    """The head-averaged input-attention weight of every LSTM on row ``row`` (1-based) [B, n],
    differentiable with respect to x (the reference step, whichever implementation the model
    runs). ``mask`` [T, n]: the active mask of the earlier rows held fixed (None: the top-k)."""
    c = model.config
    e = model.encoder(x)
    B = x.shape[0]
    h = cell = x.new_zeros(B, c.num_units, c.hidden_size)
    for t in range(row):
        active = None if mask is None else mask[t].expand(B, c.num_units)
        h, cell, tr = model.step(e[:, t], h, cell, active)
    return tr["input_attention"]


def competitor(model: RIM, weights, unit: int) -> int:
    """The LSTM that ``unit`` competes with for a place, from the weights [n] of one row: the
    (k+1)-th ranked when ``unit`` is among the top k (the first left out), else the k-th (the
    last let in)."""
    k = model.config.k_active
    order = [int(i) for i in np.argsort(-np.asarray(weights), kind="stable")]
    rank = order.index(int(unit))
    if rank < k:
        return order[k] if k < len(order) else order[k - 1]
    return order[k - 1]


def selection_attribution(model: RIM, image, row: int, unit: int, *, baseline=None, steps: int = STEPS,
                          margin: bool = True, frozen: bool = True) -> Attribution:
    """Integrated Gradients of LSTM ``unit``'s (0-based) selection margin at row ``row``
    (1-based), or of its raw weight (``margin=False``); ``frozen``: the earlier rows run with
    the image's own active mask held fixed."""
    if not isinstance(model, RIM):
        raise ValueError("selection scores exist for the RIM only")
    T = np.asarray(image).shape[0]
    if not 1 <= row <= T:
        raise ValueError(f"row must be in 1..{T}, got {row}")
    m = _double_copy(model)
    x = to_sequence(np.asarray(image)[None]).double()
    mask = own_mask(m, x) if frozen else None
    with torch.no_grad():
        w0 = selection_scores(m, x, row, mask)[0].numpy()
    j = competitor(m, w0, unit) if margin else None

    def f(x):
        w = selection_scores(m, x, row, mask)
        return w[:, unit] - w[:, j] if margin else w[:, unit]

    pixels, fx, fb, used = _integrate(f, image, baseline, steps, adaptive=mask is not None)
    return Attribution(pixels, "margin" if margin else "score", fx, fb, frozen=mask is not None, unit=int(unit),
                       competitor=j, row=int(row), steps=used)
