"""The Mechanisms page through AppTest: inputs (test image, drawing, upload), the per-timestep
view, the data-set view, and clear messages for missing data, bad files and missing models.

Models come from the ``page_env`` fixture (untrained models + manifest); data are the
bundled MNIST sample (RIMSCOPE_DATA_DIR is an empty folder, offline).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw
from streamlit.testing.v1 import AppTest

from tests.pages import helpers
from tests.pages.helpers import walk, with_converged_rim

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "mechanisms.py")


def run_page(**state) -> AppTest:
    return helpers.run_page("mechanisms", **state)


def step_text(at: AppTest) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("**Step "))


def png_digit() -> bytes:
    im = Image.new("L", (120, 120), 255)
    ImageDraw.Draw(im).line([(30, 20), (90, 20), (50, 100)], fill=0, width=12)
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return buf.getvalue()


def test_page_loads_with_rim_by_default(page_env):
    at = run_page()
    assert not at.exception
    assert at.selectbox(key="mech_dataset").value == "mnist"
    assert at.selectbox(key="mech_model_mnist").value == "pretrained:mnist/rim"
    # offline the pickable images are the bundled sample's: called so, in the radio and beside the number
    assert at.radio(key="mech_source").options == ["Sample image", "Draw", "Upload", "Other handwriting"]
    assert at.radio(key="mech_source").value == "Test image"
    assert at.radio(key="mech_how").label == "Which sample image"
    assert at.number_input(key="mech_idx").label.startswith("Sample image number")
    assert at.radio(key="mech_how").value == "Random"
    assert at.slider(key="mech_t").value == 1 and at.slider(key="mech_t").max == 28
    assert step_text(at).startswith("**Step 1 of 28**") and "Active:" in step_text(at)
    assert at.toggle(key="mech_play").value is False
    charts = {getattr(e, "key", None) for e in walk(at.main)}
    assert {"mech_probs", "mech_timeline", "mech_comm"} <= charts
    # the communication attention at the row: a shaded 6 x 6 table, each reading row summing to 100
    comm = next(t.value for t in at.table if str(t.value.index.name).startswith("reader"))
    assert comm.shape == (6, 6)
    reading = comm.dropna()
    assert len(reading) == 4 and ((reading.sum(axis=1) - 100).abs() < 1e-3).all()
    assert not at.error


def test_the_first_view_opens_this_inputs_tab_and_traces_no_set(page_env, monkeypatch):
    """Below the timeline the first open tab acts on this input alone (one image through the
    model); the set-wide tabs (a model run over 1,000 or more images) run when opened."""
    from core.eval import match
    from pages.ui import cache

    cache._set_traces.clear()
    traced = []
    real = match.set_traces
    monkeypatch.setattr(match, "set_traces", lambda *a, **k: traced.append(1) or real(*a, **k))
    at = run_page()
    assert not at.exception
    more = ["Intervene", "Which pixels drive it", "Find the same mechanisms elsewhere", "What each LSTM is for"]
    assert [t.label for t in at.tabs if t.label in more] == more
    assert at.slider(key="iv_rows") is not None  # the open tab: Intervene
    assert traced == [], "the first view traced the searched set"
    at = run_page(mech_more="Find the same mechanisms elsewhere")
    assert not at.exception and traced == [1]  # opened: traced once


def test_timestep_slider_and_buttons_change_the_displayed_step(page_env):
    at = run_page()
    first = step_text(at)
    at.slider(key="mech_t").set_value(10).run()
    assert not at.exception
    assert step_text(at).startswith("**Step 10 of 28**") and step_text(at) != first
    at.button(key="mech_next").click().run()
    assert step_text(at).startswith("**Step 11 of 28**")
    at.button(key="mech_prev").click().run()
    at.button(key="mech_prev").click().run()
    assert step_text(at).startswith("**Step 9 of 28**")
    at.slider(key="mech_t").set_value(28).run()
    at.button(key="mech_next").click().run()  # wraps around
    assert step_text(at).startswith("**Step 1 of 28**")


def test_picking_test_images_by_class_and_mistakes(page_env):
    at = run_page()
    at.radio(key="mech_how").set_value("By class").run()
    at.selectbox(key="mech_cls").set_value(3).run()
    assert not at.exception
    assert any("true class 3" in c.value for c in at.caption)
    idx = at.number_input(key="mech_idx").value
    at.button(key="mech_rand_cls").click().run()
    assert any("true class 3" in c.value for c in at.caption)
    at.radio(key="mech_how").set_value("Misclassified").run()
    assert not at.exception
    # an untrained model gets most images wrong; the page lists them, most confident first
    assert at.number_input(key="mech_wrong").value == 1
    assert "images are wrong" in at.number_input(key="mech_wrong").label
    assert at.number_input(key="mech_idx").disabled
    at.number_input(key="mech_wrong").set_value(2).run()
    assert not at.exception
    assert isinstance(idx, int)


def test_drawing_canvas_is_present_and_empty_drawing_explains(page_env):
    at = run_page()
    at.radio(key="mech_source").set_value("Draw").run()
    assert not at.exception
    assert any("canvas is empty" in i.value for i in at.info)
    # the canvas is a custom component: AppTest shows it as an unknown element
    assert any(type(e).__name__ == "UnknownElement" for e in walk(at.main))
    assert not [m for m in at.markdown if m.value.startswith("**Step ")]


def test_upload_good_and_bad_images(page_env):
    at = run_page()
    at.radio(key="mech_source").set_value("Upload").run()
    assert any("Upload an image" in i.value for i in at.info)
    at.file_uploader(key="mech_upload").upload("seven.png", png_digit(), "image/png").run()
    assert not at.exception and not at.error
    assert step_text(at).startswith("**Step 1 of 28**")
    assert any("your image" in c.value for c in at.caption)
    assert any(e.label == "Preprocessing steps" for e in at.expander)

    at.file_uploader(key="mech_upload").upload("notes.png", b"this is not an image", "image/png").run()
    assert not at.exception
    assert any("not an image in a supported format" in e.value for e in at.error)

    blank = io.BytesIO()
    Image.new("L", (50, 50), 255).save(blank, format="PNG")
    at.file_uploader(key="mech_upload").upload("blank.png", blank.getvalue(), "image/png").run()
    assert not at.exception
    assert any("empty" in i.value for i in at.info)


def test_dataset_view_shows_class_and_row_heatmaps(page_env):
    at = run_page(mech_tab="Across the test set")
    assert not at.exception
    assert at.select_slider(key="mech_stats_n").value == 1000
    cap = next(c.value for c in at.caption if "fixed subset, seed 0" in c.value)
    assert "1000 images from the bundled sample (fixed subset" in cap and "fraction of rows active" in cap
    # an estimate on a subset says so in the number, with the full test set's figure beside it
    import re

    assert re.search(r"Test error of RIM [^:]*: \d+\.\d % on 1,000 sample images; full test set 3\.12 %", cap), cap
    charts = {getattr(e, "key", None) for e in walk(at.main)}
    assert {"mech_stats_class", "mech_stats_row"} <= charts
    prefs = [t.value for t in at.table if "most for" in t.value.columns]  # a plain table: few rows
    assert len(prefs) == 1 and len(prefs[0]) == 6  # one row per LSTM
    at.select_slider(key="mech_stats_n").set_value(200).run()
    assert any("200 images" in c.value for c in at.caption)
    at.toggle(key="mech_stats_rel").set_value(False).run()
    assert not at.exception


def test_dataset_view_measures_the_selection(page_env):
    """rim: selection margin, stability under noise and class information beside the random twin."""
    at = run_page(mech_tab="Across the test set")
    assert not at.exception
    labels = {m.label: m for m in at.metric}
    assert {"Median selection margin", "Rows with a changed active set under noise",
            "Class information in the active set"} <= set(labels)
    share = float(labels["Rows with a changed active set under noise"].value.rstrip("%"))
    assert 0.0 <= share <= 100.0
    assert "vs random selection" in labels["Rows with a changed active set under noise"].delta
    assert any(getattr(e, "key", None) == "mech_margin_hist" for e in walk(at.main))
    assert any("Random twin" in c.value for c in at.caption)
    # a model without a selection shows none of it
    at.selectbox(key="mech_model_mnist").set_value("pretrained:mnist/parallel_lstm").run()
    assert not at.exception and not any(m.label == "Median selection margin" for m in at.metric)


def test_baseline_model_shows_its_activity(page_env):
    at = run_page()
    at.selectbox(key="mech_model_mnist").set_value("pretrained:mnist/parallel_lstm").run()
    assert not at.exception
    assert any("hidden-state norm" in c.value for c in at.caption)
    assert "hidden-state norm" in step_text(at)
    assert not any(getattr(e, "key", None) == "mech_comm" for e in walk(at.main))


def test_colour_data_set_without_data_says_how_to_get_it(page_env):
    at = run_page()
    at.selectbox(key="mech_dataset").set_value("cifar10").run()
    assert not at.exception
    assert at.radio(key="mech_source").options == ["Test image", "Upload"]
    warning = " ".join(w.value for w in at.warning)
    assert "No CIFAR-10 test data on this machine" in warning
    assert "(uploading an image still works)" in warning and "draw" not in warning.lower()  # no Draw here
    how = " ".join(m.value for m in at.markdown)
    assert "RIMSCOPE_DATA_DIR=/path/to/folder make app" in how and "torchvision downloads" in how
    assert len([w for w in at.warning if "CIFAR-10" in w.value]) == 1  # said once, not repeated
    # uploading still works without the data set
    at.radio(key="mech_source").set_value("Upload").run()
    rgb = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (40, 60, 3), dtype=np.uint8)).save(rgb, format="PNG")
    at.file_uploader(key="mech_upload").upload("photo.png", rgb.getvalue(), "image/png").run()
    assert not at.exception and not at.error
    assert step_text(at).startswith("**Step 1 of 32**")


def test_no_models_explains_what_to_do(empty_env):
    at = run_page()
    assert not at.exception
    assert any("No model for MNIST yet" in i.value for i in at.info)


def test_play_advances_one_row_per_run(page_env):
    at = run_page()
    at.toggle(key="mech_play").set_value(True).run()
    assert not at.exception
    s1 = step_text(at)
    at.run()
    assert step_text(at) != s1


def test_converged_models_are_the_default_with_a_switch(page_env, fixture_dirs, tmp_path, monkeypatch):
    with_converged_rim(fixture_dirs, tmp_path, monkeypatch)
    at = run_page()
    assert not at.exception
    sw = at.sidebar.radio(key="pretrained_protocol")
    assert sw.value == "converged" and sw.options[0].startswith("Adam, cosine, 4,000 iterations")
    assert at.selectbox(key="mech_model_mnist").value == "pretrained:mnist/rim@converged"
    sw.set_value("paper").run()
    assert not at.exception
    assert at.selectbox(key="mech_model_mnist").value == "pretrained:mnist/rim"


def test_mask_statistics_side_by_side_for_both_protocols(page_env, fixture_dirs, tmp_path, monkeypatch):
    with_converged_rim(fixture_dirs, tmp_path, monkeypatch)
    at = run_page(mech_tab="Across the test set")
    assert not at.exception
    table = next(t.value for t in at.table if "LSTM 1" in t.value.columns)
    assert list(table.index) == ["RIM (paper's method) · Adam 4k · seed 0 (pretrained)",
                                 "RIM (paper's method) · paper protocol · seed 0 (pretrained)"]
    assert ((table.to_numpy() >= 0) & (table.to_numpy() <= 1)).all()
    assert abs(table.to_numpy().sum(axis=1) - 4).max() < 1e-6  # 4 of 6 active in every row
    assert any("spread" in c.value for c in at.caption)
    assert any(c.value.startswith("With k = 4 of 6 every LSTM would be active in 0.67 of the rows") for c in at.caption)


def test_view_state_lives_in_the_url_and_a_link_restores_it(page_env):
    """Every setting of the view goes into the URL; a fresh session opened on that URL shows the
    same view; values that do not fit (out of range, unknown) fall back instead of failing."""
    at = run_page()
    at.number_input(key="mech_idx").set_value(17).run()
    at.slider(key="mech_t").set_value(9).run()
    qp = dict(at.query_params)
    assert qp["mech_idx"] in ("17", ["17"]) and qp["mech_t"] in ("9", ["9"]) and "mech_dataset" in qp
    other = AppTest.from_file(PAGE, default_timeout=120)
    for k, v in qp.items():
        other.query_params[k] = v[0] if isinstance(v, list) else v
    other.run()
    assert not other.exception
    assert other.number_input(key="mech_idx").value == 17 and other.slider(key="mech_t").value == 9
    assert step_text(other) == step_text(at)
    bad = AppTest.from_file(PAGE, default_timeout=120)
    bad.query_params.update({"mech_idx": "99999", "mech_dataset": "nope", "mech_t": "x", "mech_tab": "??"})
    bad.run()
    assert not bad.exception
    assert bad.selectbox(key="mech_dataset").value == "mnist" and bad.number_input(key="mech_idx").value == 999


def test_a_link_from_another_page_opens_its_view_in_the_same_session(page_env):
    """A link into Mechanisms ("Trace" on a handwriting digit) carries its view in the URL; a
    session that has been on Mechanisms before must show that view, not its old one; and the
    URL never undoes what the user then changes on the page."""
    from core.studies.handwriting import external as de

    at = run_page()
    at.number_input(key="mech_idx").set_value(7).run()
    idx = int(de.load_external("semeion", sample=True).index[4])
    at.query_params.update({"mech_source": "Other handwriting", "mech_hw_set": "semeion", "mech_hw_idx": str(idx)})
    at.run()
    assert not at.exception
    assert at.radio(key="mech_source").value == "Other handwriting"
    assert any(f"semeion digit #{idx}" in c.value for c in at.caption)
    at.radio(key="mech_source").set_value("Test image").run()  # the user's change sticks
    assert at.radio(key="mech_source").value == "Test image"
    at.slider(key="mech_t").set_value(5).run()
    assert at.radio(key="mech_source").value == "Test image"


def test_a_subplot_title_names_the_protocol_as_the_pickers_do():
    """Two models on one input: each subplot title gives the protocol's short name ("Adam 4k"),
    never its key."""
    from core import catalog
    from pages.ui.pair import short_name

    titles = {e.protocol: short_name(e) for e in catalog.pretrained_entries("mnist") if e.model == "rim"}
    assert titles["converged"].startswith("RIM Adam 4k s") and "converged" not in titles["converged"]
    assert titles["paper"].startswith("RIM paper s")


def test_a_drawn_seven_keeps_black_rows_under_its_foot_and_the_caption_is_under_the_canvas(page_env, monkeypatch):
    """The canvas (a fake here, as AppTest cannot draw) sends a 7; what the model sees keeps two
    black rows under its foot. The drawing's caption is under the canvas and its buttons, where
    the canvas's own hover toolbar (above it) cannot cover it."""
    import sys
    import types

    from PIL import ImageDraw as Draw

    from pages.ui import upload

    drawn = Image.new("RGBA", (280, 280), (0, 0, 0, 255))
    Draw.Draw(drawn).line([(60, 50), (220, 50), (120, 250)], fill=(255, 255, 255, 255), width=18)
    result = types.SimpleNamespace(json_data={"objects": [{"type": "path"}]}, image_data=np.asarray(drawn))

    def fake_canvas(**kwargs):
        import streamlit as st

        st.markdown("FAKE CANVAS")
        return result

    monkeypatch.setitem(sys.modules, "streamlit_drawable_canvas", types.SimpleNamespace(st_canvas=fake_canvas))
    seen = []
    real = upload.prepare_pixels
    monkeypatch.setattr(upload, "prepare_pixels", lambda *a, **k: seen.append(real(*a, **k)) or seen[-1])
    at = run_page(mech_source="Draw")
    assert not at.exception and not at.error
    a = seen[-1].array
    assert a.max() == 255 and not a[-2:].any() and not a[:2].any()
    order = [getattr(e, "value", None) for e in walk(at.main)]
    canvas = order.index("FAKE CANVAS")
    caption = next(i for i, v in enumerate(order) if isinstance(v, str) and v.startswith("Draw with your finger"))
    assert caption > canvas


def test_the_timelines_chart_is_built_only_for_its_png_or_html(page_env, monkeypatch):
    """The page draws the timeline as SVG; the chart library's figure behind "Make PNG" and "⬇ HTML"
    is built only when one is asked for, once per input: a step change keeps the PNG, a new input
    needs a new one."""
    import pages.ui.export as export
    from core.report.plots import traces

    built, rendered = [], []
    real = traces.timeline_figure
    monkeypatch.setattr(traces, "timeline_figure", lambda *a, **k: built.append(1) or real(*a, **k))
    monkeypatch.setattr(export, "png_export_ready", lambda: True)
    monkeypatch.setattr(export, "_figure_png", lambda fig_json, w, h: rendered.append((fig_json, h)) or b"\x89PNG")
    at = run_page()
    at.slider(key="mech_t").set_value(5).run()
    assert not at.exception and not built  # two script runs, no chart figure
    at.button(key="mech_dl_png_make").click().run()
    assert not at.exception and len(built) == 1 and len(rendered) == 1
    assert '"heatmap"' in rendered[0][0] and rendered[0][1] > 100  # the timeline's figure at its own height
    assert "⬇ PNG" in [b.label for b in at.get("download_button")]
    at.slider(key="mech_t").set_value(9).run()  # same input: the PNG is kept, nothing rebuilt
    assert "⬇ PNG" in [b.label for b in at.get("download_button")] and len(built) == 1
    at.number_input(key="mech_idx").set_value(3).run()  # another input: its PNG is made on request
    assert not at.exception and "⬇ PNG" not in [b.label for b in at.get("download_button")]
    assert len(built) == 1


def test_the_model_label_follows_files_replaced_during_a_session(page_env, tmp_path, monkeypatch):
    """The shipped files of the picked model are replaced on disk (another seed) while the page is
    open: the picker keeps the user's choice and the browser is sent its new label (a selectbox's
    choice is its label there, redrawn only when a value is sent); later runs send nothing."""
    import json
    import shutil

    import torch

    from core.models.registry import build_model
    from core.training.weights import save_weights

    pre = tmp_path / "pretrained"
    shutil.copytree(page_env["pretrained"], pre)
    monkeypatch.setenv("RIMSCOPE_PRETRAINED_DIR", str(pre))
    at = run_page()
    at.selectbox(key="mech_model_mnist").set_value("pretrained:mnist/parallel_lstm").run()
    box = at.selectbox(key="mech_model_mnist")
    old = next(o for o in box.options if "Parallel LSTMs" in o)
    assert "seed 0" in old and box.value == "pretrained:mnist/parallel_lstm"
    # the files of that model replaced: seed 6, other weights
    torch.manual_seed(6)
    meta = json.loads((pre / "mnist" / "parallel_lstm.json").read_text()) | {"seed": 6}
    save_weights(build_model("parallel_lstm"), meta, pre / "mnist" / "parallel_lstm")
    man = json.loads((pre / "manifest.json").read_text())
    for m in man["models"]:
        if (m["dataset"], m["model"]) == ("mnist", "parallel_lstm"):
            m["seed"] = 6
    (pre / "manifest.json").write_text(json.dumps(man))
    at.run()
    assert not at.exception, at.exception
    box = at.selectbox(key="mech_model_mnist")
    new = old.replace("seed 0", "seed 6")
    assert box.value == "pretrained:mnist/parallel_lstm" and new in box.options and old not in box.options
    assert box.proto.set_value and box.proto.raw_value == new  # the browser redraws its label
    at.run()
    box = at.selectbox(key="mech_model_mnist")
    assert box.value == "pretrained:mnist/parallel_lstm" and not box.proto.set_value  # nothing more to send
