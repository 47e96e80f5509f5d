"""core.eval.match (mechanisms across a set: block matches, each unit's examples and rates, noise
shift), core.report.export (CSV of a matrix, JSON of a trace) and their figures in core.report.plots.

Masks are synthetic (a seeded generator) with planted patterns; models are tiny and untrained.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from core.eval import match
from core.eval.predict import trace_one
from core.models.registry import build_model, trace_schema
from core.report import export
from core.report.plots import sets, traces


@pytest.fixture(scope="module")
def masks():
    rng = np.random.default_rng(3)
    return rng.random((300, 28, 6)) < 0.5


def _brute_distance(masks, query, t1, t2, units):
    out = []
    for m in masks:
        d = 0
        for t in range(t1 - 1, t2):
            for u in units:
                d += int(bool(m[t, u]) != bool(query[t, u]))
        out.append(d)
    return np.array(out)


def test_planted_pattern_is_found_first_with_exact_distances(masks):
    masks = masks.copy()
    query = masks[0].copy()
    block = match.Block(5, 12, (1, 3, 4))  # 8 rows x 3 units = 24 cells
    assert block.cells == 24
    planted, near = 137, 42
    masks[planted, 4:12][:, [1, 3, 4]] = query[4:12][:, [1, 3, 4]]
    masks[planted, :4] = ~query[:4]  # outside the block: must not count
    masks[near, 4:12][:, [1, 3, 4]] = query[4:12][:, [1, 3, 4]]
    masks[near, 6, 3] = not query[6, 3]  # one cell off inside the block
    m = match.find_matches(masks, query, block, exclude=[0])
    assert m.order[0] == planted and m.distance[0] == 0
    assert m.order[1] == near and m.distance[1] == 1
    assert 0 not in m.order and len(m.order) == len(masks) - 1
    brute = _brute_distance(masks, query, 5, 12, (1, 3, 4))
    np.testing.assert_array_equal(m.distance, brute[m.order])  # exact, for every image
    assert np.all(np.diff(m.distance) >= 0)
    for thr in (0, 1, 5, 12, 24):
        assert m.within(thr) == int((np.delete(brute, 0) <= thr).sum())
    counts = m.class_counts(np.arange(300) % 10, 10, 1)
    assert counts.sum() == 2 and counts[planted % 10] >= 1 and counts[near % 10] >= 1


def test_ties_are_broken_by_position_and_bad_blocks_are_refused(masks):
    q = np.zeros((28, 6), dtype=bool)
    same = np.zeros((4, 28, 6), dtype=bool)
    m = match.find_matches(same, q, match.Block(1, 28, (0,)))
    np.testing.assert_array_equal(m.order, [0, 1, 2, 3])
    for bad in (match.Block(0, 3, (0,)), match.Block(5, 4, (0,)), match.Block(1, 29, (0,)),
                match.Block(1, 3, ()), match.Block(1, 3, (6,)), match.Block(1, 3, (1, 1))):
        with pytest.raises(ValueError):
            match.find_matches(masks, q, bad)
    with pytest.raises(ValueError, match="does not fit"):
        match.find_matches(masks, np.zeros((27, 6)), match.Block(1, 3, (0,)))


def test_set_traces_equal_the_per_image_traces():
    torch.manual_seed(0)
    rim = build_model("rim", input_dim=28, hidden_size=8, embed_dim=16)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (23, 28, 28), dtype=np.uint8)
    y = np.arange(23) % 10
    st = match.set_traces(rim, x, y, trace_schema("rim"), batch_size=7)
    assert st.mask.shape == (23, 28, 6) and st.mask.dtype == bool and len(st) == 23
    assert st.score_label == "input-attention weight"
    for i in (0, 9, 22):
        probs, tr = trace_one(rim, x[i])
        np.testing.assert_array_equal(st.mask[i], tr["active"] > 0.5)
        np.testing.assert_allclose(st.score[i].astype(np.float32), tr["input_attention"], atol=2e-3)
        assert st.pred[i] == int(np.argmax(probs))
    plain = build_model("parallel_lstm", input_dim=28, hidden_size=8)
    sp = match.set_traces(plain, x, y, trace_schema("parallel_lstm"))
    assert sp.mask is None and sp.score_label == "hidden-state norm" and sp.score.shape == (23, 28, 4)
    with pytest.raises(ValueError):
        match.set_traces(rim, x[:0], y[:0], trace_schema("rim"))


def test_top_rows_and_unit_rates_against_brute_force():
    rng = np.random.default_rng(1)
    score = rng.random((50, 10, 3)).astype(np.float16)
    score[17, 6, 2] = 2.0  # the strongest cell of unit 2
    top = match.top_rows(score, 2, k=5)
    assert top[0] == (17, 7, 2.0)
    assert len({i for i, _, _ in top}) == 5  # one row per image
    best = score[:, :, 2].astype(np.float32).max(1)
    assert [i for i, _, _ in top] == list(np.argsort(-best, kind="stable")[:5])
    for i, row, s in top:
        assert s == pytest.approx(float(score[i, row - 1, 2]))
    labels = np.arange(50) % 4  # class 4 has no image
    per_class, per_row = match.unit_rates(score, labels, 5, 1)
    for c in range(4):
        assert per_class[c] == pytest.approx(score[labels == c][:, :, 1].astype(float).mean())
    assert np.isnan(per_class[4])
    np.testing.assert_allclose(per_row, score[:, :, 1].astype(float).mean(0))


def test_selection_shift_counts_switches_per_unit():
    clean = np.zeros((2, 2, 3), dtype=bool)
    noisy = clean.copy()
    clean[:, :, 0] = True  # unit 0: always on; off in one of 4 cells under noise
    noisy[:, :, 0] = True
    noisy[0, 0, 0] = False
    noisy[1, 1, 2] = True  # unit 2: on in one cell under noise
    s = match.selection_shift(clean, noisy)
    np.testing.assert_allclose(s.clean, [1, 0, 0])
    np.testing.assert_allclose(s.noisy, [0.75, 0, 0.25])
    np.testing.assert_allclose(s.switched_off, [0.25, 0, 0])
    np.testing.assert_allclose(s.switched_on, [0, 0, 0.25])
    np.testing.assert_allclose(s.changed, [0.25, 0, 0.25])
    with pytest.raises(ValueError):
        match.selection_shift(clean, noisy[:1])
    fig = sets.unit_shift_figure(s, ["a", "b", "c"], level="variance 0.01", unit=2)
    assert len(fig.data) == 4 and list(fig.data[1].y) == [0.75, 0, 0.25]


def test_matrix_csv_round_trips():
    z = np.array([[0.5, 1.0, np.nan], [0.25, 0.0, 1e-7]])
    text = export.matrix_csv(z, [1, 2], ["LSTM 1", "LSTM 2", "LSTM 3"], row_title="timestep").decode()
    assert text.splitlines()[0] == "timestep,LSTM 1,LSTM 2,LSTM 3"
    back = pd.read_csv(__import__("io").StringIO(text), index_col=0)
    np.testing.assert_allclose(back.to_numpy(), z, rtol=1e-5)
    with pytest.raises(ValueError):
        export.matrix_csv(z, [1], ["a", "b", "c"])


def test_trace_json_holds_every_tensor_with_its_axes_and_what_made_it():
    torch.manual_seed(0)
    rim = build_model("rim", input_dim=28, hidden_size=8, embed_dim=16)
    img = np.random.default_rng(2).integers(0, 256, (28, 28), dtype=np.uint8)
    probs, tr = trace_one(rim, img)
    raw = export.trace_json(tr, trace_schema("rim"), rim.unit_names, model={"key": "k", "name": "rim"},
                            input={"dataset": "mnist", "index": 3}, settings={"timestep": 5}, probs=probs,
                            classes=[str(c) for c in range(10)])
    obj = json.loads(raw)
    assert obj["model"] == {"key": "k", "name": "rim"} and obj["input"]["index"] == 3
    assert obj["settings"] == {"timestep": 5} and obj["timesteps"] == 28 and obj["units"] == rim.unit_names
    assert set(obj["trace"]) == set(tr)
    assert obj["trace"]["comm_attention"]["axes"] == ["timestep", "reader unit", "read unit"]
    assert obj["trace"]["input_attention_heads"]["shape"] == list(tr["input_attention_heads"].shape)
    np.testing.assert_allclose(obj["trace"]["input_attention"]["values"], tr["input_attention"], atol=1e-6)
    assert obj["prediction"]["class"] == int(np.argmax(probs))
    assert sum(obj["prediction"]["probabilities"]) == pytest.approx(1, abs=1e-4)


def test_pair_panels_share_colour_ranges_and_mark_differences():
    rng = np.random.default_rng(0)
    units = ["LSTM 1", "LSTM 2"]
    m_a, m_b = rng.random((5, 2)) < 0.5, rng.random((5, 2)) < 0.5
    a = [{"title": "mask", "z": m_a.astype(float), "units": units, "binary": True},
         {"title": "w", "z": np.full((5, 2), 0.4), "units": units, "zmin": 0.3, "zmax": 0.5}]
    b = [{"title": "mask", "z": m_b.astype(float), "units": units, "binary": True},
         {"title": "w", "z": np.full((5, 2), 0.6), "units": units, "zmin": 0.55, "zmax": 0.7}]
    out = traces.pair_panels(a, b, "A", "B", m_a, m_b)
    assert [p["title"].split(":")[0] for p in out[:4]] == ["A", "A", "B", "B"]
    assert (out[1]["zmin"], out[1]["zmax"]) == (0.3, 0.7) == (out[3]["zmin"], out[3]["zmax"])
    assert a[1]["zmin"] == 0.3  # inputs untouched
    diff = out[-1]
    np.testing.assert_array_equal(diff["z"], (m_a != m_b).astype(float))
    assert f"{int((m_a != m_b).sum())} of 10 cells" in diff["title"]
    assert len(traces.pair_panels(a, b[1:], "A", "B", m_a, None)) == 3  # no second mask: no difference panel
    fig = traces.timeline_figure(np.zeros((5, 4), dtype=np.uint8), out)
    assert len(fig.data) == 1 + len(out)


def test_class_share_figure():
    fig = sets.class_share_figure([0, 2, 2], [10, 10, 20], ["a", "b", "c"])
    np.testing.assert_allclose(fig.data[0].y, [25, 25, 50])
    np.testing.assert_allclose(fig.data[1].y, [0, 50, 50])
    assert "No images" in sets.class_share_figure([0], [0], ["a"]).layout.annotations[0].text
