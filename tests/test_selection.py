"""core.eval.selection: margins, stability and class information of the unit selection."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core.eval import selection
from core.models.registry import build_model


def test_margins_are_kth_minus_next():
    att = np.array([[[0.9, 0.1, 0.5, 0.52]]])  # sorted: .9 .52 .5 .1
    assert selection.selection_margins(att, 2)[0, 0] == pytest.approx(0.02)
    assert selection.selection_margins(att, 1)[0, 0] == pytest.approx(0.38)
    assert np.isnan(selection.selection_margins(att, 4)).all()


def test_mutual_information_known_values():
    y = np.array([0, 0, 1, 1] * 25)
    assert selection.mutual_information(y, y) == pytest.approx(1.0)  # a perfect copy: 1 bit
    assert selection.mutual_information(y, np.zeros_like(y)) == pytest.approx(0.0)
    assert selection.mutual_information(y, np.array([0, 1] * 50)) == pytest.approx(0.0)  # independent


def test_set_codes_distinguish_sets():
    act = np.array([[[1, 1, 0], [0, 1, 1], [1, 1, 0]]], bool)
    codes = selection.set_codes(act)
    assert codes[0, 0] == codes[0, 2] != codes[0, 1]


def test_report_random_ablation_carries_no_class_information():
    """The random mask ignores the input: its information sits at the chance level and the
    attention variant, whose mask is a function of the input, is not below it."""
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 300)
    images = np.zeros((300, 10, 12), np.uint8)
    images[np.arange(300), labels * 3 + 1, :] = 255  # class = which row is bright
    torch.manual_seed(0)
    rim = build_model("rim", input_dim=12, num_classes=3, num_units=4, hidden_size=8, k_active=2, embed_dim=8,
                      input_heads=2, input_key_size=4, input_value_size=4, comm_heads=2, comm_key_size=4,
                      comm_value_size=4)
    rnd = build_model("rim", input_dim=12, num_classes=3, num_units=4, hidden_size=8, k_active=2, embed_dim=8,
                      input_heads=2, input_key_size=4, input_value_size=4, comm_heads=2, comm_key_size=4,
                      comm_value_size=4, selection="random")
    rnd.load_state_dict(rim.state_dict())
    r_att = selection.selection_report(rim, images, labels)
    r_rnd = selection.selection_report(rnd, images, labels)
    assert r_att.margins.shape == (300 * 10,) and (r_att.margins >= 0).all()
    # the attention mask is a deterministic function of the image: images of one class are
    # identical here, so the mask carries (almost) all of its entropy as class information
    assert r_att.information_bits > r_att.chance_bits + 0.05
    # random masks: information at chance (both small), and most sets change between two runs
    assert r_rnd.information_bits < r_att.information_bits
    assert abs(r_rnd.information_bits - r_rnd.chance_bits) < 0.1
    assert r_rnd.changed_share > 0.5
    assert 0.0 <= r_att.changed_share <= 1.0 and r_att.max_bits == pytest.approx(np.log2(3))
