"""What the page tests share (like tests/browser/helpers.py for the browser tests): a page run
through AppTest, a walk over its element tree, a second protocol's pretrained RIM beside the
fixture's, and a valid uploadable model. Fixtures stay in conftest.py; no test module
imports another."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from streamlit.testing.v1 import AppTest

PAGES = Path(__file__).resolve().parents[2] / "pages"


def page_path(name: str) -> str:
    """The file of page ``name`` ("mechanisms", "compare", ...)."""
    return str(PAGES / f"{name}.py")


def run_page(name: str, timeout: float = 120, **state) -> AppTest:
    """Page ``name`` run once, with ``state`` set in its session state first."""
    at = AppTest.from_file(page_path(name), default_timeout=timeout)
    for k, v in state.items():
        at.session_state[k] = v
    return at.run()


def walk(node):
    """Every element below ``node`` (AppTest's tree), ``node`` first."""
    yield node
    for child in getattr(node, "children", {}).values():
        yield from walk(child)


def with_converged_rim(fixture_dirs, tmp_path, monkeypatch) -> Path:
    """The fixture's pretrained models plus a 'converged' MNIST rim (other weights); returns the folder."""
    import torch

    from core.models.registry import build_model
    from core.training.weights import save_weights

    pre = tmp_path / "pretrained"
    shutil.copytree(fixture_dirs["pretrained"], pre)
    torch.manual_seed(7)
    model = build_model("rim")
    meta = json.loads((pre / "mnist" / "rim.json").read_text())
    save_weights(model, meta, pre / "converged" / "mnist" / "rim")
    manifest = json.loads((pre / "manifest.json").read_text())
    manifest["models"].append({"dataset": "mnist", "model": "rim", "seed": 0, "protocol": "converged",
                               "weights": "converged/mnist/rim.safetensors", "metadata": "converged/mnist/rim.json",
                               "test_error": 0.0151, "test_accuracy": 0.9849})
    (pre / "manifest.json").write_text(json.dumps(manifest))
    monkeypatch.setenv("RIMSCOPE_PRETRAINED_DIR", str(pre))
    return pre


def valid_weights(dataset="mnist", model="parallel_lstm", error=0.0777) -> tuple[bytes, bytes]:
    """The two files of a model that passes the upload check (untrained weights)."""
    from core.data.datasets import DATASETS
    from core.models.registry import build_model
    from core.training.weights import weights_bytes

    m = build_model(model, input_dim=DATASETS[dataset].input_dim)
    return weights_bytes(m, {"model": model, "dataset": dataset, "seed": 7,
                             "metrics": {"test_error": error, "noisy_test_error": error + 0.01},
                             "history": {"iteration": [1, 2, 3], "loss": [2.3, 2.0, 1.5],
                                         "batch_acc": [0.1, 0.2, 0.3]}})


def timeline_titles(at) -> list[str]:
    """Every text of the Mechanisms timeline (the SVG component keyed ``mech_timeline``): panel
    titles, unit names, ticks, legends."""
    import html
    import json
    import re

    svg = json.loads(next(e for e in walk(at.main) if getattr(e, "key", None) == "mech_timeline").proto.json)
    return [html.unescape(t) for t in re.findall(r"<text [^>]*>(.*?)</text>", svg)]
