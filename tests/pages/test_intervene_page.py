"""The "Intervene" tab of Mechanisms and its set-wide knock-out view, through AppTest.

Models come from the ``page_env`` fixture (untrained models + manifest); data are the
bundled MNIST sample (offline). Each control changes what the view computes: the numbers
shown are compared with core.eval.interventions run directly.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from streamlit.testing.v1 import AppTest

from core.report.plots.style import INTERVENED_COLOR, METHOD_COLORS, UPLOAD_COLOR
from tests.pages.helpers import walk

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "mechanisms.py")


def run_page(**state) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=180)
    for k, v in state.items():
        at.session_state[k] = v
    return at.run()


def prediction(at: AppTest) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("**Prediction**"))


def caption(at: AppTest) -> str:
    return next(c.value for c in at.caption if "set by the intervention" in c.value)


def test_intervene_tab_controls_force_knock_out_and_reset(page_env):
    at = run_page(mech_more="Intervene")
    assert not at.exception, at.exception
    assert "unchanged" in prediction(at) and caption(at).startswith("0 cells set by the intervention; 0 other")
    # force two LSTMs off on rows 1-28
    at.slider(key="iv_rows").set_value((1, 28)).run()
    at.multiselect(key="iv_units").set_value(["LSTM 1", "LSTM 2"]).run()
    at.button(key="iv_off").click().run()
    assert not at.exception, at.exception
    assert at.session_state["iv_cells"].count(";") == 2 * 28 - 1
    assert caption(at).startswith("56 cells set by the intervention")
    # back to the choice on those cells
    at.button(key="iv_clear").click().run()
    assert at.session_state["iv_cells"] == "" and caption(at).startswith("0 cells set")
    # knock-out toggle, alpha, selection
    at.toggle(key="iv_ko_3").set_value(True).run()
    assert caption(at).startswith("28 cells set by the intervention")
    at.slider(key="iv_alpha").set_value(0.0).run()
    at.radio(key="iv_selection").set_value("random").run()
    assert at.number_input(key="iv_seed").value == 0
    at.radio(key="iv_selection").set_value("all").run()
    assert not at.exception, at.exception
    assert "28 cells set" in caption(at)
    at.button(key="iv_reset").click().run()
    assert not at.exception
    assert at.toggle(key="iv_ko_3").value is False and at.radio(key="iv_selection").value == "attention"
    assert at.slider(key="iv_alpha").value == 0.1 and caption(at).startswith("0 cells set")


def test_row_ranges_are_said_in_words_under_their_sliders(page_env):
    """Each row slider (rows to set, rows to patch) draws no value labels of its own (``format``
    blank: with both ends on one row, Streamlit's labels read "1" "1" side by side over one thumb); the caption under it
    says the rows: "Row 5 of 28", "Rows 3-9 of 28". Force acts on exactly those rows."""
    at = run_page(mech_more="Intervene", mech_t=5)
    assert not at.exception, at.exception
    rows, patch_rows = at.slider(key="iv_rows"), at.slider(key="iv_patch_rows")
    assert rows.value == (5, 5) and rows.proto.format.strip() == "" and patch_rows.proto.format.strip() == ""
    texts = [c.value for c in at.caption]
    assert "Row 5 of 28" in texts and "Rows 1-28 of 28" in texts  # the rows to set; the rows to patch
    at.slider(key="iv_rows").set_value((3, 9)).run()
    assert "Rows 3-9 of 28" in [c.value for c in at.caption] and "Row 5 of 28" not in [c.value for c in at.caption]
    at.slider(key="iv_patch_rows").set_value((12, 12)).run()
    assert "Row 12 of 28" in [c.value for c in at.caption]
    at.slider(key="iv_rows").set_value((4, 4)).run()
    at.multiselect(key="iv_units").set_value(["LSTM 3"]).run()
    at.button(key="iv_off").click().run()
    assert not at.exception, at.exception
    assert at.session_state["iv_cells"] == "4.3.0"  # row 4 of LSTM 3, off


def _chart_keys(at: AppTest) -> set[str]:
    """What the run drew: the before/after bars (a table in the container keyed ``iv_probs``) and
    the mask editor (an SVG component, keyed ``iv_mask``)."""
    bars = {"iv_probs"} if any(getattr(e, "key", None) == "iv_probs" for e in walk(at.main)) else set()
    return bars | ({"iv_mask"} if mask_svg(at) else set())


def mask_svg(at: AppTest) -> str | None:
    """The SVG the mask editor draws (the component's data), None where there is none."""
    el = next((e for e in walk(at.main) if getattr(e, "key", None) == "iv_mask"), None)
    return None if el is None else json.loads(el.proto.json)


def test_before_and_after_bars_appear_once_something_changes(page_env):
    """With nothing changed the bars would repeat the prediction above: a note stands in their
    place (one chart less on the first view); any intervention brings them, the mask editor
    is there throughout."""
    at = run_page(mech_more="Intervene")
    assert not at.exception, at.exception
    assert _chart_keys(at) == {"iv_mask"}
    assert any(c.value.startswith("Nothing is changed yet") for c in at.caption)
    at.slider(key="iv_rows").set_value((1, 28)).run()
    at.multiselect(key="iv_units").set_value(["LSTM 1", "LSTM 2"]).run()
    at.button(key="iv_on").click().run()
    assert not at.exception, at.exception
    assert _chart_keys(at) == {"iv_probs", "iv_mask"}
    assert not any(c.value.startswith("Nothing is changed yet") for c in at.caption)
    bars = next(t.value for t in at.table if list(t.value.columns) == ["original", "after the intervention"])
    assert bars.shape == (10, 2) and ((bars.sum() - 100).abs() < 1e-3).all()  # percent, each column the whole
    # the colours stand for one method on every page: "original" in the RIM's, "after the intervention"
    # in a neutral grey, never another method's colour (the parallel LSTMs' blue, ...)
    styles = next(t for t in at.table if list(t.value.columns) == ["original", "after the intervention"]
                  ).proto.arrow_data.styler.styles
    used = {c.upper() for c in re.findall(r"(#[0-9A-Fa-f]{6})[0-9A-Fa-f]{2} ", styles)}
    assert used == {METHOD_COLORS["rim"].upper(), INTERVENED_COLOR.upper()}, used
    assert re.search(rf"_col1 {{ background: linear-gradient\(90deg, {INTERVENED_COLOR}55 ", styles)
    others = {c.upper() for m, c in METHOD_COLORS.items() if m != "rim"} | {UPLOAD_COLOR.upper()}
    assert INTERVENED_COLOR.upper() not in others | {METHOD_COLORS["rim"].upper()}
    # the mask editor frames the 56 forced cells (rows 1-28 of LSTMs 1 and 2), each clickable by its cell
    drawn = mask_svg(at)
    assert drawn.count('stroke="#1f4e99" stroke-width="2" pointer-events="none"') == 56
    assert drawn.count('class="cell" data-cell=') == 28 * 6 and 'data-cell="27,1"' in drawn


def test_intervention_shown_equals_core(page_env):
    """The prediction line quotes what core.eval.interventions computes for the same cells."""
    import numpy as np

    from core.eval import interventions as ivs
    from core.models.rim import Intervention
    from core.training.weights import load_weights

    at = run_page(mech_more="Intervene", iv_cells="1.1.1;2.1.1;3.1.1", iv_ko_2=True, mech_idx=3)
    assert not at.exception, at.exception
    from pages.ui import cache as ui_cache

    data = ui_cache.test_data("mnist")
    model, _ = load_weights(Path(page_env["pretrained"]) / "mnist" / "rim")
    force = ivs.force_grid(28, 6, on=[(0, 0), (1, 0), (2, 0)])
    for mode, iv in (("removed", Intervention(force=force, remove=(1,))),
                     ("off", Intervention(force=force, knock_out=(1,))),
                     ("readout", ivs.knockout(model, "readout", 1, force=force))):
        at.radio(key="iv_mode").set_value(mode).run()
        assert not at.exception, at.exception
        logits, _ = ivs.run(model, data.images[3:4], iv)
        p = np.exp(logits[0] - logits[0].max())
        p /= p.sum()
        y = int(p.argmax())
        assert f"after the intervention **{data.classes[y]}** ({p[y] * 100:.1f}%)" in prediction(at), mode


def test_patching_from_a_donor_on_the_tab(page_env):
    """Patching every LSTM's state on the last row from a donor gives the donor's prediction."""

    from core.eval import interventions as ivs
    from core.training.weights import load_weights
    from pages.ui import cache as ui_cache

    at = run_page(mech_more="Intervene", mech_idx=3, iv_patch=True, iv_donor=7, iv_patch_what="state",
                  iv_patch_rows=(28, 28), iv_patch_units=[f"LSTM {i}" for i in range(1, 7)])
    assert not at.exception, at.exception
    data = ui_cache.test_data("mnist")
    model, _ = load_weights(Path(page_env["pretrained"]) / "mnist" / "rim")
    p = ivs.probabilities(ivs.run(model, data.images[7:8])[0][0])
    y = int(p.argmax())
    assert f"after the intervention **{data.classes[y]}** ({p[y] * 100:.1f}%)" in prediction(at)
    # clean into noisy: the final states of the clean input give the clean input's prediction
    at.radio(key="iv_patch_from").set_value("clean").run()
    assert not at.exception, at.exception
    clean = ivs.probabilities(ivs.run(model, data.images[3:4])[0][0])
    noisy = ivs.probabilities(ivs.run(model, ivs.noisy_copy(data.images[3])[None])[0][0])
    y, y0 = int(clean.argmax()), int(noisy.argmax())
    assert (f"original **{data.classes[y0]}** ({noisy[y0] * 100:.1f}%) → after the intervention "
            f"**{data.classes[y]}** ({clean[y] * 100:.1f}%)") in prediction(at)
    assert any(c.value.startswith("Clean into noisy") for c in at.caption)
    at.radio(key="iv_patch_from").set_value("test").run()
    at.radio(key="iv_patch_what").set_value("mask").run()
    assert not at.exception, at.exception
    assert caption(at).startswith("6 cells set by the intervention")  # the donor's mask on row 28


def test_a_drawing_or_an_image_file_as_the_donor(page_env, monkeypatch):
    """The donor can be a drawing (a fake canvas here: AppTest cannot draw) or an uploaded image:
    patching every LSTM's state on the last row from it gives the prediction of the drawing as
    prepared; an empty canvas patches nothing and says so."""
    import sys
    import types

    import numpy as np
    from PIL import Image, ImageDraw

    from core.eval import interventions as ivs
    from core.training.weights import load_weights
    from pages.ui import upload

    drawn = Image.new("RGBA", (200, 200), (0, 0, 0, 255))
    ImageDraw.Draw(drawn).line([(40, 40), (160, 40), (90, 180)], fill=(255, 255, 255, 255), width=14)
    canvases = []

    def fake_canvas(**kwargs):
        canvases.append(kwargs["key"])
        empty = kwargs["key"] != "iv_donor_canvas_mnist"
        return types.SimpleNamespace(json_data={"objects": [] if empty else [{"type": "path"}]},
                                     image_data=None if empty else np.asarray(drawn))

    monkeypatch.setitem(sys.modules, "streamlit_drawable_canvas", types.SimpleNamespace(st_canvas=fake_canvas))
    model, _ = load_weights(Path(page_env["pretrained"]) / "mnist" / "rim")
    donor = upload.prepare_pixels(np.asarray(drawn), "mnist", drawn=True).array
    p = ivs.probabilities(ivs.run(model, donor[None])[0][0])
    y = int(p.argmax())
    at = run_page(mech_more="Intervene", mech_idx=3, iv_patch=True, iv_patch_from="draw", iv_patch_what="state",
                  iv_patch_rows=(28, 28), iv_patch_units=[f"LSTM {i}" for i in range(1, 7)])
    assert not at.exception, at.exception
    assert "iv_donor_canvas_mnist" in canvases and at.radio(key="iv_patch_from").options == [
        "a test image", "a drawing", "an image file", "this input, clean, into its noisy copy"]
    assert f"after the intervention **{y}** ({p[y] * 100:.1f}%)" in prediction(at)
    # an image file: until one is given, the uploader asks for it and nothing is patched
    at.radio(key="iv_patch_from").set_value("upload").run()
    assert not at.exception and any("Upload the donor image" in i.value for i in at.info)
    assert prediction(at).endswith("— unchanged")


def test_non_rim_model_gets_a_note(page_env):
    at = run_page(mech_more="Intervene", mech_model_mnist="pretrained:mnist/parallel_lstm")
    assert not at.exception
    assert any("Interventions act on the RIM" in i.value for i in at.info)


def test_knockout_view_across_the_test_set(page_env):
    at = run_page(mech_tab="Across the test set", mech_stats_n=200)
    assert not at.exception, at.exception
    assert not any("the intact model is right on" in c.value for c in at.caption)  # off until asked
    at.toggle(key="iv_knock").set_value(True).run()
    assert not at.exception, at.exception
    cap = next(c.value for c in at.caption if "intact (a property of these weights" in c.value)
    assert "images clean" in cap and "At inference with the same weights" in cap
    assert "Holm-adjusted over the table's" in cap and "needed" not in cap and "necessary" not in cap
    assert "direct effect" in cap
    df = next(d.value for d in at.dataframe if "variant" in d.value.columns)
    assert len(df) == 1 + 3 * 6 + 3 + 2 and df["variant"].iloc[0] == "intact (attention)"
    assert set(df["how"]) == {"", "removed", "switched off", "read-out only"}
    assert at.toggle(key="iv_knock").help.startswith(f"{2 * len(df)} runs")
    assert at.radio(key="iv_class_mode").options == ["removed", "switched off"]
    at.radio(key="iv_class_mode").set_value("off").run()
    assert not at.exception, at.exception
    at.toggle(key="iv_patch_set").set_value(True).run()
    assert not at.exception, at.exception
    pf = next(d.value for d in at.dataframe if "patched" in d.value.columns)
    assert len(pf) == 7 and list(pf.columns)[1:] == ["rows 1-7", "rows 8-14", "rows 15-21", "rows 22-28"]
    assert any("share of predictions that become the donor's" in c.value for c in at.caption)


def test_attribution_tab_prediction_and_selection(page_env):
    at = run_page(mech_more="Which pixels drive it", ig_steps=32, mech_t=9)
    assert not at.exception, at.exception
    cap = next(c.value for c in at.caption if "completeness gap" in c.value)
    assert "Attributions sum to" in cap
    at.radio(key="ig_what").set_value("selection").run()
    at.selectbox(key="ig_unit").set_value("LSTM 2").run()
    assert not at.exception, at.exception
    cap = next(c.value for c in at.caption if "completeness gap" in c.value)
    assert "the selection margin of LSTM 2 at row 9" in cap and "own mask held fixed" in cap
    at.toggle(key="ig_margin").set_value(False).run()
    at.toggle(key="ig_frozen").set_value(False).run()
    cap = next(c.value for c in at.caption if "completeness gap" in c.value)
    assert "the selection score of LSTM 2 at row 9" in cap and "own mask" not in cap


def test_attribution_tab_for_a_baseline_model(page_env):
    at = run_page(mech_more="Which pixels drive it", ig_steps=32, mech_model_mnist="pretrained:mnist/parallel_lstm")
    assert not at.exception, at.exception
    assert at.radio(key="ig_what").options == ["the predicted class's logit"]


def test_the_shipped_study_across_networks_is_beside_the_set_wide_view(page_env, tmp_path, monkeypatch):
    """The set-wide view opens with the shipped study's table over several networks per set (read
    from results/interventions), without a link that would not resolve on the page."""
    import shutil

    results = tmp_path / "results"
    shutil.copytree(page_env["results"], results)
    shutil.copytree(Path(__file__).resolve().parents[2] / "results" / "interventions", results / "interventions")
    monkeypatch.setenv("RIMSCOPE_RESULTS_DIR", str(results))
    at = run_page(mech_tab="Across the test set", mech_stats_n=200)
    assert not at.exception, at.exception
    exp = next(e for e in at.expander if e.label.startswith("Across several trained networks"))
    md = " ".join(m.value for m in exp.markdown)
    assert "| LSTM removed |" in md and "Holm" in md and "](results/" not in md
