"""Shipped robustness curves (core.eval.curves): built points equal live ones, and the Robustness
page uses them only for the very weights and images they were computed on."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from core.catalog import load_entry, pretrained_entries
from core.data.datasets import load_dataset
from core.eval import curves, robustness_points
from core.grid.curves import build as build_curves

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "robustness.py")


@pytest.fixture
def shipped(page_env, tmp_path, monkeypatch):
    """A copy of the page fixture's pretrained models with curves built on the MNIST sample."""
    pre = tmp_path / "pretrained"
    shutil.copytree(page_env["pretrained"], pre)
    monkeypatch.setenv("RIMSCOPE_PRETRAINED_DIR", str(pre))
    monkeypatch.setenv("RIMSCOPE_ROBUSTNESS_SUBSET", "40")
    out = build_curves(pre, [], log=lambda s: None, subset=40)
    return pre, out


def test_built_points_equal_live_evaluation(shipped):
    pre, out = shipped
    entry = next(e for e in pretrained_entries("mnist", pretrained_dir=pre) if e.model == "rim")
    model, _ = load_entry(entry)
    data = load_dataset("mnist", "test")
    idx = robustness_points.fixed_subset(len(data), 40, seed=0)
    x, y = data.images[idx], data.labels[idx]
    view = curves.ShippedCurves.load(pre)
    wh, sh = curves.file_hash(entry.stem.with_suffix(".safetensors")), curves.subset_hash(x, y)
    for kind, s in (("gaussian", 0.05), ("salt_pepper", 0.2), ("gaussian", 0.0)):
        live = robustness_points.noisy_eval(model, x, y, kind, s, curves.SEED)
        assert view.get(wh, sh, *curves.clean_key(kind, s)).error == live.error
    live = robustness_points.stretch_eval(model, x, y, 1.5)
    assert view.get(wh, sh, "stretch", 1.5).error == live.error
    # every MNIST model x (3 kinds x 20 strengths + clean + poisson + 7 stretches); no CIFAR sample here
    n_mnist = len(pretrained_entries("mnist", pretrained_dir=pre))
    assert len(out["points"]) == n_mnist * (3 * 20 + 1 + 1 + 7)


def _curve_ys(at) -> list[float]:
    el = next(e for e in at.get("plotly_chart") if "Gaussian noise variance" in e.proto.spec)
    spec = json.loads(el.proto.spec)
    out = []
    for tr in spec["data"]:
        if tr.get("mode") != "lines+markers":  # the curves, not their interval bands
            continue
        y = tr.get("y")
        if isinstance(y, dict) and "bdata" in y:  # plotly's binary array encoding
            import base64
            y = np.frombuffer(base64.b64decode(y["bdata"]), dtype=np.dtype(y["dtype"])).tolist()
        out += [v for v in (y or []) if v is not None and np.isfinite(v)]
    return out


def test_page_reads_shipped_points_and_only_for_the_same_weights(shipped):
    pre, out = shipped
    fake = {**out, "points": {k: [0.999, 40] for k in out["points"]}}  # recognisable values
    (pre / curves.FILE).write_text(json.dumps(fake))
    at = AppTest.from_file(PAGE, default_timeout=300).run()
    assert not at.exception
    ys = _curve_ys(at)
    assert ys and all(y == pytest.approx(99.9) for y in ys)  # every curve point came from the file
    # other weights under the same name: their hash differs, the page computes live values
    rim = pre / "mnist" / "rim.safetensors"
    from safetensors.torch import load_file, save_file
    tensors = load_file(str(rim))
    tensors = {k: v + 0.01 for k, v in tensors.items()}
    save_file(tensors, str(rim), metadata={"format": "pt"})
    at = AppTest.from_file(PAGE, default_timeout=300).run()
    assert not at.exception
    ys = _curve_ys(at)
    assert any(y != pytest.approx(99.9) for y in ys)
