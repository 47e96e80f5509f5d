"""The Robustness page through AppTest: the live noise slider, the error curve, RIM's mask
shift, other noise kinds, the stretch view, and messages for missing data or models.

Models come from the ``page_env`` fixture (untrained models + manifest); data are the
bundled MNIST sample. Results are cached per (model, kind, strength), so later tests reuse
what the first one computed.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from streamlit.testing.v1 import AppTest

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "robustness.py")
METHODS = ("RIM (paper's method) · paper protocol · seed 0 (pretrained)",
           "Parallel LSTMs · paper protocol · seed 0 (pretrained)", "IndRNN · paper protocol · seed 0 (pretrained)")


@pytest.fixture(autouse=True)
def _small_subset(monkeypatch):
    # the page scores 500 test images by default; 100 keep these tests quick on 2 cores
    monkeypatch.setenv("RIMSCOPE_ROBUSTNESS_SUBSET", "100")


def run_page(**state) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=600)
    for k, v in state.items():
        at.session_state[k] = v
    return at.run()


def tables(at: AppTest) -> list:
    return [t.value for t in at.table]


def error_rows(at: AppTest) -> dict[str, dict]:
    """The test-error table's rows by model name."""
    df = next(t for t in tables(at) if any(c.startswith("test error") for c in t.columns))
    col = next(c for c in df.columns if c.startswith("test error"))
    return {r["model"]: {**r, "test error": r[col]} for r in df.to_dict("records")}


def metrics(at: AppTest) -> dict[str, str]:
    """Every metric by label, and every model's test error by its full name."""
    out = {m.label: m.value for m in at.metric}
    out.update({name: r["test error"] for name, r in error_rows(at).items()})
    return out


def walk(node):
    yield node
    for child in getattr(node, "children", {}).values():
        yield from walk(child)


def captions(at: AppTest) -> list[str]:
    return [c.value for c in at.caption]


def chart_keys(at: AppTest) -> set:
    return {getattr(e, "key", None) for e in walk(at.main)}


def test_page_loads_with_the_paper_noise_level(page_env):
    at = run_page()
    assert not at.exception and not at.error
    assert at.selectbox(key="rb_dataset").value == "mnist"
    assert at.selectbox(key="rb_kind").value == "gaussian"
    slider = at.select_slider(key="rb_strength_gaussian")
    assert slider.value == 0.01
    assert slider.options[0] == "0.00" and slider.options[-1] == "0.20" and "0.01 (paper)" in slider.options
    assert slider.value == 0.01
    m = metrics(at)
    assert set(METHODS) <= set(m)
    assert all(m[k].endswith("%") for k in METHODS)
    assert "100 sample images" in m and "this image" in m
    assert any(md.value == "**Activations switched**" for md in at.markdown)  # the term over both numbers
    # the subset is in the number's name, the full test set beside it (one name per number)
    df = next(t for t in tables(at) if "clean, full test set" in t.columns)
    assert "test error on 100 sample images" in df.columns
    assert df["clean, full test set"].iloc[0] == "3.12%"  # the fixture's MNIST rim records 0.0312
    assert {"rb_probs", "rb_curve", "rb_mask", "rb_flips"} <= chart_keys(at)
    assert "noisy: Gaussian variance 0.01 (seed 0)" in captions(at) and "clean: sample image #0 (training image #0 of the original set)" in captions(at)
    assert any("100 sample images (fixed subset, seed 0) from the bundled sample" in c.value for c in at.caption)
    predictions = next(t for t in tables(at) if "prediction changed" in t.columns)
    assert list(predictions["model"]) == list(METHODS)
    assert not at.dataframe  # static tables only: a grid cell cuts long names ("elephant (", "stre…")
    # the error curve's floors: chance and the most frequent class of the scored images
    import json

    curve = next(e for e in walk(at.main) if getattr(e, "key", None) == "rb_curve")
    layout = json.loads(curve.proto.spec)["layout"]
    floors = [s for s in layout["shapes"] if s.get("line", {}).get("dash") == "dash"]
    dashed = [s["y0"] for s in floors]
    assert dashed[0] == pytest.approx(90.0) and len(dashed) == 2 and 0 < dashed[1] < 90  # the sample is not balanced
    # the floors' labels are legend entries (one group: a click shows or hides both lines), not text
    # on the plot, where a label at the line's right end lies on RIM's curve under strong noise
    assert not [a["text"] for a in layout["annotations"] if a["text"].startswith(("chance", "majority"))]
    labels = [s["name"] for s in floors if s.get("showlegend")]
    assert {s.get("legendgroup") for s in floors} == {"floors"}
    # the majority class is of the scored images (not the test set's, said elsewhere); two floors
    # closer than FLOORS_APART share one label, two labels apart otherwise
    from core.report.plots.style import FLOORS_APART

    majority = f"majority class of these 100 sample images {dashed[1]:.2f} %"
    if 90 - dashed[1] < FLOORS_APART:
        assert labels == [f"chance 90.0 % · {majority}"]
    else:
        assert labels == ["chance 90.0 %", majority]
    assert any("Dashed: the error of guessing at random" in c for c in captions(at))


def test_the_change_vs_clean_adds_up_with_the_clean_error_on_the_same_images(page_env):
    """The change is measured against the clean error on the scored subset, which stands beside it;
    the full test set's clean error is apart (other images)."""
    at = run_page()
    at.select_slider(key="rb_strength_gaussian").set_value(0.2).run()
    assert not at.exception
    df = next(t for t in tables(at) if "change vs clean" in t.columns)
    cols = list(df.columns)
    assert cols.index("clean, same 100 sample images") == cols.index("change vs clean") - 1
    assert cols[-1] == "clean, full test set"
    for r in df.to_dict("records"):
        noisy, clean = (float(r[c].rstrip("%")) for c in ("test error on 100 sample images", "clean, same 100 sample images"))
        change = r["change vs clean"].split()[0].replace("±", "")
        assert float(change) == pytest.approx(noisy - clean, abs=1e-9)


def test_moving_the_noise_slider_changes_the_errors(page_env):
    at = run_page()
    before = metrics(at)
    at.select_slider(key="rb_strength_gaussian").set_value(0.2).run()
    assert not at.exception
    after = metrics(at)
    assert after != before
    assert [after[k] for k in METHODS] != [before[k] for k in METHODS]
    changed = lambda m: float(m["100 sample images"].rstrip("%"))  # noqa: E731
    assert changed(after) > changed(before) > 0
    assert any("Test error at Gaussian variance 0.20" in h.value for h in at.subheader)
    # back to the paper's value with the button
    at.button(key="rb_paper").click().run()
    assert at.select_slider(key="rb_strength_gaussian").value == 0.01
    assert metrics(at) == before


def test_zero_noise_equals_clean(page_env):
    at = run_page()
    at.select_slider(key="rb_strength_gaussian").set_value(0.0).run()
    assert not at.exception
    rows = error_rows(at)
    assert set(METHODS) <= set(rows)
    assert all(rows[k]["change vs clean"] == "±0.0 points" for k in METHODS)
    assert metrics(at)["100 sample images"] == "0.0%"


def test_other_noise_kinds(page_env):
    at = run_page()
    at.selectbox(key="rb_kind").set_value("salt_pepper").run()
    assert not at.exception
    sp = at.select_slider(key="rb_strength_salt_pepper")
    assert sp.value == 0.01
    # the paper's test is Gaussian noise of variance 0.01: no "(paper)" marker on another noise's 0.01
    assert "0.01" in sp.options and not any("paper" in o for o in sp.options)
    at.select_slider(key="rb_strength_salt_pepper").set_value(0.1).run()
    assert not at.exception and set(METHODS) <= set(metrics(at))
    at.selectbox(key="rb_kind").set_value("poisson").run()
    assert not at.exception
    assert not at.select_slider  # Poisson noise has no strength
    assert set(METHODS) <= set(metrics(at))
    assert "rb_curve" not in chart_keys(at)


def test_stretch_view(page_env):
    at = run_page(rb_tab="Stretch (other sequence lengths)")
    assert not at.exception
    assert at.select_slider(key="rb_factor").value == 1.0
    base = metrics(at)
    assert all(base[k].endswith("%") for k in METHODS)
    at.select_slider(key="rb_factor").set_value(2.0).run()
    assert not at.exception
    assert any("Test error at stretch ×2" in h.value for h in at.subheader)
    assert {"rb_s_probs", "rb_s_curve"} <= chart_keys(at)
    assert "stretched ×2 (56 rows, same scale)" in captions(at)
    assert metrics(at) != base


def test_random_image_and_upload(page_env):
    at = run_page()
    assert at.radio(key="rb_img_src").options == ["Sample image", "Upload"]  # offline: the bundled sample's
    assert at.number_input(key="rb_img_idx").label.startswith("Sample image number")
    at.number_input(key="rb_img_idx").set_value(5).run()
    assert not at.exception
    at.radio(key="rb_img_src").set_value("Upload").run()
    assert any("Upload an image" in i.value for i in at.info)
    img = Image.new("L", (64, 64), 0)
    img.paste(255, (20, 10, 40, 50))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    at.file_uploader(key="rb_img_upload").upload("bar.png", buf.getvalue(), "image/png").run()
    assert not at.exception and not at.error
    assert any(c.startswith("noisy:") for c in captions(at)) and "clean: your image" in captions(at)
    at.file_uploader(key="rb_img_upload").upload("bad.jpg", b"\xff\xd8\xff garbage", "image/jpeg").run()
    assert not at.exception
    assert at.error and "not an image in a supported format" in at.error[0].value


def test_colour_data_set_without_data(page_env):
    at = run_page()
    at.selectbox(key="rb_dataset").set_value("cifar10").run()
    assert not at.exception
    warnings = [w.value for w in at.warning if "CIFAR-10" in w.value]
    assert len(warnings) == 1 and "No CIFAR-10 test data on this machine" in warnings[0]  # once, short
    assert any("RIMSCOPE_DATA_DIR=/path/to/folder make app" in m.value for m in at.markdown)
    assert any("Test errors need the test set; see the note above" in i.value for i in at.info)
    assert not [r for r in at.radio if r.key == "rb_img_src"]  # no radio with a single choice
    rgb = io.BytesIO()
    Image.fromarray(np.random.default_rng(1).integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(rgb, format="PNG")
    at.file_uploader(key="rb_img_upload").upload("x.png", rgb.getvalue(), "image/png").run()
    assert not at.exception and not at.error
    assert "clean: your image" in captions(at)


def test_no_models_explains_what_to_do(empty_env):
    at = run_page()
    assert not at.exception
    assert any("No model for MNIST yet" in i.value for i in at.info)
