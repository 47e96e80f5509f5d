"""The Mechanisms page's set-wide and two-model controls through AppTest: find the
same mechanisms elsewhere (block, threshold, thumbnails that open), what each LSTM is for,
"Compare with", and the CSV/JSON downloads.

Models: the ``page_env`` fixture (untrained models); data: the bundled MNIST sample.
Expected numbers are computed here through core (core.eval.match on the same model and images).
"""

from __future__ import annotations

import re

import numpy as np
from streamlit.testing.v1 import AppTest

from tests.pages import helpers
from tests.pages.helpers import timeline_titles, walk, with_converged_rim

PAGE = helpers.page_path("mechanisms")
FIND, UNITS = "Find the same mechanisms elsewhere", "What each LSTM is for"


def run_page(**state) -> AppTest:
    return helpers.run_page("mechanisms", **state)


def run_find(**state) -> AppTest:
    """The page with "Find the same mechanisms elsewhere" open."""
    return run_page(mech_more=FIND, **state)


def _match_line(at: AppTest) -> tuple[int, int]:
    line = next(m.value for m in at.markdown if "images match**" in m.value)
    hits, total = re.match(r"\*\*(\d+) of (\d+) images match\*\*", line).groups()
    return int(hits), int(total)


def _expected(page_env, idx: int, t1: int, t2: int, units: tuple, thr: int) -> int:
    """The count core.eval.match gives for the fixture's MNIST rim on the bundled sample."""
    from core.data.datasets import load_dataset
    from core.eval import match
    from core.eval.predict import trace_one
    from core.models.registry import trace_schema
    from core.training.weights import load_weights

    model, _ = load_weights(page_env["pretrained"] / "mnist" / "rim")
    data = load_dataset("mnist", "test")
    st = match.set_traces(model, data.images, data.labels, trace_schema("rim"))
    query = trace_one(model, data.images[idx])[1]["active"]
    found = match.find_matches(st.mask, query, match.Block(t1, t2, units), exclude=[idx])
    return found.within(thr)


def _charts(at: AppTest) -> set:
    return {getattr(e, "key", None) for e in walk(at.main)}


def test_find_view_counts_matches_like_core_and_follows_the_threshold(page_env):
    at = run_find(mech_idx=5)
    assert not at.exception
    t1, t2 = at.slider(key="mech_blk_t1"), at.slider(key="mech_blk_t2")
    assert (t1.value, t2.value) == (12, 16)  # the middle rows by default
    assert at.multiselect(key="mech_blk_units").value == [f"LSTM {i}" for i in range(1, 7)]
    thr = at.slider(key="mech_blk_thr")
    assert thr.max == 5 * 6 and thr.value == 3
    hits, total = _match_line(at)
    assert total == 999  # the sample without the current image
    at.slider(key="mech_blk_thr").set_value(1).run()
    assert "within 1 cell (" in next(m.value for m in at.markdown if "images match**" in m.value)
    at.slider(key="mech_blk_thr").set_value(3).run()
    hits, total = _match_line(at)
    assert hits == _expected(page_env, 5, 12, 16, tuple(range(6)), 3)
    assert "mech_match_hist" in _charts(at)
    assert len([b for b in at.button if b.key.startswith("mech_match_")]) == min(24, hits)

    at.multiselect(key="mech_blk_units").set_value(["LSTM 2", "LSTM 5"]).run()
    at.slider(key="mech_blk_t1").set_value(8).run()
    at.slider(key="mech_blk_thr").set_value(0).run()
    assert not at.exception
    assert at.slider(key="mech_blk_thr").max == 9 * 2
    exact = _match_line(at)[0]
    assert exact == _expected(page_env, 5, 8, 16, (1, 4), 0)
    at.slider(key="mech_blk_thr").set_value(18).run()
    assert _match_line(at)[0] == 999  # every image is within the whole block
    qp = dict(at.query_params)
    assert qp["mech_blk_t1"] in ("8", ["8"]) and qp["mech_blk_thr"] in ("18", ["18"])
    assert qp["mech_blk_units"] in ("LSTM 2,LSTM 5", ["LSTM 2,LSTM 5"])

    at.multiselect(key="mech_blk_units").set_value([]).run()
    assert not at.exception and any("at least one LSTM" in i.value for i in at.info)


def test_a_match_opens_as_the_current_input_in_one_click_and_the_url_follows(page_env):
    at = run_find(mech_idx=5, mech_source="Draw")
    at.radio(key="mech_source").set_value("Test image").run()
    first = next(b for b in at.button if b.key.startswith("mech_match_"))
    target = int(first.key.rsplit("_", 1)[1])
    assert target != 5
    first.click().run()
    assert not at.exception
    assert at.number_input(key="mech_idx").value == target and at.radio(key="mech_source").value == "Test image"
    assert dict(at.query_params)["mech_idx"] in (str(target), [str(target)])
    # the new input is now the query: it is left out of its own matches
    assert not any(b.key == f"mech_match_{target}" for b in at.button)
    # and the page scrolls back up to it (once: the next run does not jump)
    assert [h for h in at.get("html") if "scrollTo" in h.proto.body]
    at.slider(key="mech_t").set_value(4).run()
    assert not [h for h in at.get("html") if "scrollTo" in h.proto.body]


def test_a_link_restores_the_block(page_env):
    fresh = AppTest.from_file(PAGE, default_timeout=120)
    fresh.query_params.update({"mech_idx": "7", "mech_more": FIND, "mech_blk_t1": "3", "mech_blk_t2": "9", "mech_blk_thr": "4",
                               "mech_blk_units": "LSTM 1,LSTM 9,LSTM 3"})
    fresh.run()
    assert not fresh.exception
    assert fresh.slider(key="mech_blk_t1").value == 3 and fresh.slider(key="mech_blk_t2").value == 9
    assert fresh.multiselect(key="mech_blk_units").value == ["LSTM 1", "LSTM 3"]  # the unknown unit dropped
    assert _match_line(fresh)[0] == _expected(page_env, 7, 3, 9, (0, 2), 4)


def test_each_lstm_view_strip_rates_and_noise(page_env):
    at = run_page(mech_more=UNITS)
    assert not at.exception
    assert at.selectbox(key="mech_unit").value == "LSTM 1"
    assert {"mech_unit_profile", "mech_unit_shift"} <= _charts(at)
    opens = [b for b in at.button if b.key.startswith("mech_unit_open_")]
    assert len(opens) == 8
    cap = next(c.value for c in at.caption if "switched on" in c.value)
    assert "LSTM 1" in cap and "variance 0.01" in cap and "1000 images x 28 rows" in cap
    at.selectbox(key="mech_unit").set_value("LSTM 4").run()
    at.select_slider(key="mech_unit_noise").set_value(0.1).run()
    assert not at.exception
    cap = next(c.value for c in at.caption if "switched on" in c.value)
    assert cap.startswith("LSTM 4") and "variance 0.10" in cap
    target = int(next(b for b in at.button if b.key.startswith("mech_unit_open_")).key.rsplit("_", 1)[1])
    next(b for b in at.button if b.key.startswith("mech_unit_open_")).click().run()
    assert at.number_input(key="mech_idx").value == target


def test_models_without_a_mask_explain_and_still_show_their_units(page_env):
    at = run_find(mech_model_mnist="pretrained:mnist/parallel_lstm")
    assert not at.exception
    assert any("has no selection mask" in i.value for i in at.info)
    at = run_page(mech_model_mnist="pretrained:mnist/parallel_lstm", mech_more=UNITS)
    assert not at.exception
    assert "mech_unit_profile" in _charts(at) and "mech_unit_shift" not in _charts(at)
    text = " ".join(m.value for m in at.markdown)
    assert "hidden-state norm" in text
    assert "selected" not in text and "**Where LSTM 1 is most active**" in text  # parallel LSTMs select nothing


def test_compare_with_a_second_model(page_env, fixture_dirs, tmp_path, monkeypatch):
    with_converged_rim(fixture_dirs, tmp_path, monkeypatch)
    at = run_page(mech_idx=3)
    picker = at.selectbox(key="mech_with_mnist")
    assert picker.value == "" and "pretrained:mnist/rim@converged" not in picker.options  # the main model
    picker.set_value("pretrained:mnist/rim").run()  # RIM, paper protocol, beside the converged one
    assert not at.exception
    labels = [m.label for m in at.metric]
    conv, paper = "RIM (paper's method) · Adam 4k · seed 0 (pretrained)", "RIM (paper's method) · paper protocol · seed 0 (pretrained)"
    assert labels[:3] == [conv, paper, "Mask cells that differ"]  # the one display name of each model
    from streamlit.proto.Metric_pb2 import Metric

    for m in at.metric[:2]:  # the model's probability, without an arrow (it is not a change)
        assert m.delta.endswith("% probability") and m.proto.direction == Metric.MetricDirection.NONE
    assert any(m.value.startswith(f"*{paper}*: Active:") for m in at.markdown)
    titles = timeline_titles(at)
    diff = next(t for t in titles if t.startswith("where the masks differ"))
    # short subplot titles (the full names are in the pickers above): no "(pretrained)" in each
    assert any(t.startswith("RIM Adam 4k s0: ") for t in titles) and any(t.startswith("RIM paper s0: ") for t in titles)
    assert not any("(pretrained)" in t for t in titles), titles
    share = float(next(m.value for m in at.metric if m.label == "Mask cells that differ").rstrip("%"))
    n_diff = int(re.search(r"\((\d+) of 168 cells\)", diff).group(1))
    assert abs(n_diff / 168 * 100 - share) < 0.06
    at.slider(key="mech_t").set_value(9).run()  # one cursor for both
    assert any(m.value.startswith(f"*{paper}*") for m in at.markdown)
    # a model of another kind: its own panels, no cell-by-cell comparison
    at.selectbox(key="mech_with_mnist").set_value("pretrained:mnist/parallel_lstm").run()
    assert not at.exception and not any(m.label == "Mask cells that differ" for m in at.metric)
    assert any("No selection mask in Parallel LSTMs · paper protocol" in c.value for c in at.caption)
    at.selectbox(key="mech_with_mnist").set_value("").run()
    assert not any(m.label == "Mask cells that differ" for m in at.metric)


def test_downloads_offer_every_heatmap_as_csv_and_the_trace_as_json(page_env):
    at = run_page(mech_idx=2)
    labels = [b.proto.label for b in at.get("download_button")]
    assert {"⬇ HTML", "⬇ CSV: active mask", "⬇ CSV: input attention", "⬇ JSON: whole trace"} <= set(labels)
    at.checkbox(key="mech_heads").check().run()
    labels = [b.proto.label for b in at.get("download_button")]
    assert sum(label.startswith("⬇ CSV: input attention head") for label in labels) == 4
    assert not at.exception
    assert "⬇ CSV: this row's communication attention" in labels
    stats = run_page(mech_tab="Across the test set")
    labels = [b.proto.label for b in stats.get("download_button")]
    assert {"⬇ CSV: per class", "⬇ CSV: per row"} <= set(labels) and not stats.exception


def test_a_full_test_set_offers_larger_searches(page_env, tmp_path, monkeypatch):
    """With a test set on disk larger than 1000 images the size of the searched set is a control."""
    import streamlit as st

    from core.data.datasets import DATASETS

    rng = np.random.default_rng(0)
    (tmp_path / "data" / "mnist").mkdir(parents=True)
    np.savez(tmp_path / "data" / "mnist" / "test.npz", x=rng.integers(0, 256, (1500, 28, 28), dtype=np.uint8),
             y=np.arange(1500, dtype=np.int64) % 10, classes=np.array(DATASETS["mnist"].classes, dtype=str))
    monkeypatch.setenv("RIMSCOPE_DATA_DIR", str(tmp_path / "data"))
    st.cache_resource.clear()  # the test set is held per process
    try:
        at = run_find(mech_idx=4)
        assert not at.exception
        size = at.select_slider(key="mech_set_n")
        assert list(size.options) == ["1000", "1500"] and size.value == 1000
        from core.eval.robustness_points import fixed_subset

        assert _match_line(at)[1] == 1000 - int(4 in fixed_subset(1500, 1000))  # the query itself is left out
        size.set_value(1500).run()
        assert not at.exception and _match_line(at)[1] == 1499
    finally:
        st.cache_resource.clear()
