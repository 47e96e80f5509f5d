"""Integrated Gradients (core.eval.attribution): completeness where it must hold, the gap
reported where it cannot (the RIM's top-k selection jumps), and maps of the right shape."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from core.eval import attribution
from core.models.registry import build_model, list_models
from core.report import intervene as iv_text
from core.training.weights import load_weights

pytest.importorskip("captum")
PRETRAINED = Path(__file__).resolve().parent.parent / "pretrained" / "converged" / "mnist"
STEPS = 512  # kinks (ReLU, PReLU) converge slowly: 128 points leave up to 6% on EntNet and IndRNN


def _image(seed=0):
    """A digit-like image: a bright bar on black (deterministic)."""
    img = np.zeros((28, 28), dtype=np.uint8)
    rng = np.random.default_rng(seed)
    img[6:22, 12:16] = 255
    img[6:9, 8:20] = 200
    return np.clip(img.astype(int) + rng.integers(0, 30, img.shape), 0, 255).astype(np.uint8)


def _shipped_or_built(name):
    stem = PRETRAINED / name
    if stem.with_suffix(".safetensors").is_file():
        return load_weights(stem)[0]
    torch.manual_seed(0)
    return build_model(name)


def _rim_all(model):
    """The same weights with every LSTM active: the logit is continuous along the path."""
    twin = build_model("rim", **{**dataclasses.asdict(model.config), "selection": "all"})
    twin.load_state_dict(model.state_dict())
    return twin


@pytest.mark.parametrize("name", [n for n in list_models() if n != "rim"] + ["rim-all"])
def test_completeness_of_the_prediction_attribution(name):
    model = _rim_all(_shipped_or_built("rim")) if name == "rim-all" else _shipped_or_built(name)
    a = attribution.prediction_attribution(model, _image(), steps=STEPS)
    assert a.pixels.shape == (28, 28)
    diff = a.value - a.baseline_value
    assert abs(diff) > 0.5  # not vacuous: the logit moves from the black baseline to the image
    assert abs(a.total - diff) <= attribution.TOLERANCE * max(1.0, abs(diff)), a.delta
    assert a.complete


def test_rim_with_attention_reports_its_gap():
    """With the top-k selection the path crosses mask switches: the gap is whatever it is, and
    it is the exact difference between the sum and the logit difference (never hidden)."""
    model = _shipped_or_built("rim")
    a = attribution.prediction_attribution(model, _image(), steps=32, frozen=False)
    assert not a.frozen and a.delta == pytest.approx(a.pixels.sum() - (a.value - a.baseline_value), abs=1e-12)
    label = iv_text.attribution_target(a, model.unit_names)
    assert label == f"the logit of class {a.target_class}"
    assert f"{a.delta:+.3f}" in iv_text.attribution_summary(a, label)


def test_selection_attribution_matches_the_trace():
    """The attributed selection score at (row, LSTM) is the trace's input attention there."""
    model = _shipped_or_built("rim").eval()
    img = _image(1)
    row, unit = 12, 2
    a = attribution.selection_attribution(model, img, row, unit, steps=16, margin=False)
    from core.eval.predict import trace_one

    _, tr = trace_one(model, img)
    assert a.value == pytest.approx(float(tr["input_attention"][row - 1, unit]), abs=1e-5)
    assert a.pixels.shape == (28, 28)
    assert np.abs(a.pixels[row:]).max() == 0  # rows after the scored row cannot matter
    assert np.abs(a.pixels[:row]).max() > 0
    with pytest.raises(ValueError, match="row must be"):
        attribution.selection_attribution(model, img, 0, unit)
    with pytest.raises(ValueError, match="RIM only"):
        attribution.selection_attribution(_shipped_or_built("parallel_lstm"), img, 3, 0)


@pytest.mark.slow  # a minute or more end to end: make test-slow (CI runs it)
def test_frozen_mask_attributions_are_complete_on_50_images():
    """With the image's own active mask held fixed the attributed logit is smooth along the
    path: completeness holds within the bound on 50 images of the bundled MNIST sample with the
    pages' default MNIST RIM (the long grid's median), from the pages' default number of points
    (doubled where the quadrature error is above the bound); the unfrozen model misses it on
    some of them."""
    from core.data.datasets import SAMPLES_DIR

    stem = PRETRAINED.parents[1] / "long" / "mnist" / "rim"
    if not stem.with_suffix(".safetensors").is_file():
        pytest.fail("the shipped long-grid MNIST RIM is missing")
    model = load_weights(stem)[0]
    images = np.load(SAMPLES_DIR / "mnist_sample.npz")["x"][:50]
    gaps, steps = [], []
    for img in images:
        a = attribution.prediction_attribution(model, img)
        assert a.frozen and a.target_class is not None
        gaps.append(a.relative_gap)
        steps.append(a.steps)
    misses = sum(not attribution.prediction_attribution(model, img, frozen=False).complete for img in images[:5])
    assert max(gaps) <= attribution.TOLERANCE, sorted(gaps)[-5:]
    assert min(steps) == attribution.STEPS and max(steps) <= attribution.MAX_STEPS
    assert misses > 0  # the check is not vacuous: without the frozen mask the gap shows


def test_the_points_double_only_for_a_smooth_function(monkeypatch):
    """The frozen function's points double until its gap is within the bound, and never past
    MAX_STEPS; the unfrozen one keeps the points asked for (its gap is the mask switches', which
    more points do not close)."""
    model = _shipped_or_built("rim")
    monkeypatch.setattr(attribution, "MAX_STEPS", 64)  # the doubling rule, at a few points
    real, calls, exact_from = attribution._ig, [], [None]
    def ig(forward, image, baseline, steps):  # exact (complete) from ``exact_from`` points on, else off by a lot
        pixels, fx, fb = real(forward, image, baseline, steps)
        calls.append(steps)
        if exact_from[0] is not None and steps >= exact_from[0]:
            return pixels + (fx - fb - pixels.sum()) / pixels.size, fx, fb
        return pixels + 1.0, fx, fb
    monkeypatch.setattr(attribution, "_ig", ig)
    exact_from[0] = 32  # the gap closes at 32 points: the doubling stops there, below the cap
    a = attribution.prediction_attribution(model, _image(), steps=16)
    assert calls == [16, 32] and a.steps == 32 and a.complete
    calls.clear()
    exact_from[0] = None  # the gap never closes: the doubling stops at the cap
    c = attribution.prediction_attribution(model, _image(), steps=16)
    assert calls == [16, 32, 64] and c.steps == 64 and not c.complete
    calls.clear()
    b = attribution.prediction_attribution(model, _image(), steps=16, frozen=False)
    assert calls == [16] and b.steps == 16 and not b.complete


def test_selection_margin_against_the_competitor():
    """The margin is the LSTM's weight minus that of the LSTM it competes with on the image (the
    (k+1)-th when it is active, the k-th when not); with the frozen mask its shares add up."""
    model = _shipped_or_built("rim").eval()
    img = _image(2)
    row = 14
    from core.eval.predict import trace_one

    _, tr = trace_one(model, img)
    w = np.asarray(tr["input_attention"][row - 1], dtype=float)
    order = list(np.argsort(-w, kind="stable"))
    k = model.config.k_active
    for unit in (order[0], order[-1]):
        a = attribution.selection_attribution(model, img, row, int(unit), steps=32)
        j = order[k] if order.index(unit) < k else order[k - 1]
        assert a.value == pytest.approx(w[unit] - w[j], abs=1e-5)
        assert a.frozen and a.complete, a.delta
        assert (a.kind, a.unit, a.competitor, a.row) == ("margin", int(unit), int(j), row)
        assert iv_text.attribution_target(a, model.unit_names).startswith(
            f"the selection margin of {model.unit_names[unit]} at row {row} ({model.unit_names[unit]}'s attention "
            f"weight minus {model.unit_names[j]}'s")
    assert attribution.competitor(model, w, order[0]) == order[k]
    assert attribution.competitor(model, w, order[-1]) == order[k - 1]
