"""The Robustness page through AppTest, beyond the basics: the shipped curves without the test
set, the downloads of its curves and tables, and names a reader understands.

Models come from the ``page_env`` fixture (untrained models + manifest), offline.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.catalog import pretrained_entries
from core.eval import curves
from tests.pages import helpers
from tests.pages.helpers import walk

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "robustness.py")


@pytest.fixture(autouse=True)
def _small_subset(monkeypatch):
    monkeypatch.setenv("RIMSCOPE_ROBUSTNESS_SUBSET", "100")


def run_page(**state) -> AppTest:
    return helpers.run_page("robustness", 600, **state)


def _shipped_cifar(page_env, tmp_path, monkeypatch, skip: str = "") -> dict:
    """A copy of the fixture's models with curves.json points for its CIFAR-10 models (except
    ``skip``) on one subset that is not on this machine; the values encode model and level."""
    pre = tmp_path / "pretrained"
    shutil.copytree(page_env["pretrained"], pre)
    monkeypatch.setenv("RIMSCOPE_PRETRAINED_DIR", str(pre))
    points, errors = {}, {}
    for i, e in enumerate(pretrained_entries("cifar10", pretrained_dir=pre)):
        if e.model == skip:
            continue
        wh = curves.file_hash(e.stem.with_suffix(".safetensors"))
        base = 0.40 + 0.05 * i
        errors[e.model] = base
        for kind in curves.KINDS:
            for s in curves.GRID:
                what, v = curves.clean_key(kind, s)
                points[curves.point_key(wh, "fullsubset", what, v)] = [round(base + v, 4), 500]
        points[curves.point_key(wh, "fullsubset", "poisson", 1.0)] = [base, 500]
        for f in curves.FACTORS:
            points[curves.point_key(wh, "fullsubset", "stretch", float(f))] = [round(base + abs(f - 1) / 10, 4), 500]
    (pre / curves.FILE).write_text(json.dumps({"subset": 500, "seed": 0, "points": points}))
    return errors


def _error_table(at) -> dict:
    df = next(t.value for t in at.table if any(c.startswith("test error") for c in t.value.columns))
    col = next(c for c in df.columns if c.startswith("test error"))
    return {r["model"]: {**r, "test error": r[col], "column": col} for r in df.to_dict("records")}


def test_offline_cifar_shows_the_shipped_curves(page_env, tmp_path, monkeypatch):
    errors = _shipped_cifar(page_env, tmp_path, monkeypatch, skip="indrnn")
    at = run_page(rb_dataset="cifar10")
    assert not at.exception and not at.error
    warn = next(w.value for w in at.warning if "CIFAR-10" in w.value)
    assert "error curves are off" not in warn and "shipped curves" in warn and "500 test images" in warn
    rows = _error_table(at)
    rim = next(k for k in rows if k.startswith("RIM"))
    assert rows[rim]["test error"] == f"{(errors['rim'] + 0.01) * 100:.1f}%"  # Gaussian 0.01
    assert rows[rim]["column"] == "test error on 500 test images"
    assert not any(k.startswith("IndRNN") for k in rows)  # no shipped points: left out, and said so
    assert any(c.value.startswith("Not in the errors") and "IndRNN" in c.value for c in at.caption)
    assert "rb_curve" in {getattr(e, "key", None) for e in walk(at.main)}
    at.session_state["rb_tab"] = "Stretch (other sequence lengths)"  # the shipped stretch points
    at.run()
    assert not at.exception and not at.error
    rows = _error_table(at)
    assert rows[rim]["test error"] == f"{errors['rim'] * 100:.1f}%"


def test_without_shipped_points_the_curves_are_off(page_env):
    at = run_page(rb_dataset="cifar10")
    assert not at.exception
    assert any("error curves are off" in w.value for w in at.warning)


def _downloads(at) -> dict:
    """Every download button by its label (AppTest lists them as unknown elements)."""
    out = {}
    for e in walk(at.main):
        proto = getattr(e, "proto", None)
        if getattr(e, "type", None) == "download_button" or (proto is not None and hasattr(proto, "url")
                                                               and getattr(proto, "label", "").startswith("⬇")):
            out[proto.label] = proto
    return out


def test_curves_and_tables_download_as_csv_and_png(page_env):
    at = run_page()
    assert not at.exception
    labels = set(_downloads(at))
    assert {"⬇ CSV: the curves", "⬇ HTML", "⬇ CSV: this table"} <= labels, labels
    keys = {getattr(e, "key", None) for e in walk(at.main)}
    assert {"rb_dl_curve_html", "rb_dl_curve_x0", "rb_dl_table_clean"} <= keys
    at.session_state["rb_tab"] = "Stretch (other sequence lengths)"
    at.run()
    assert not at.exception
    keys = {getattr(e, "key", None) for e in walk(at.main)}
    assert {"rb_dl_s_curve_html", "rb_dl_s_curve_x0", "rb_dl_table_unstretched"} <= keys



def test_picked_models_live_in_the_url(page_env, fixture_dirs, tmp_path, monkeypatch):
    from tests.pages.helpers import with_converged_rim

    with_converged_rim(fixture_dirs, tmp_path, monkeypatch)
    at = run_page()
    assert at.selectbox(key="rb_cmp_mnist_rim").value == "pretrained:mnist/rim@converged"
    at.selectbox(key="rb_cmp_mnist_rim").set_value("pretrained:mnist/rim").run()
    qp = {k: (v[0] if isinstance(v, list) else v) for k, v in dict(at.query_params).items()}
    assert qp["rb_cmp_mnist_rim"] == "pretrained:mnist/rim"
    other = AppTest.from_file(PAGE, default_timeout=600)
    other.query_params.update(qp)
    other.run()
    assert not other.exception
    assert other.selectbox(key="rb_cmp_mnist_rim").value == "pretrained:mnist/rim"
    assert any("paper protocol" in c.value for c in other.caption if c.value.startswith("Models: RIM"))
