"""The SVG heatmaps (core/report/plots/svg.py): every cell drawn once with its value in its tooltip,
the colours on the panel's scale, the step framed, the mask's cells clickable by position."""

from __future__ import annotations

import re
from html import unescape

import numpy as np
import pytest
from plotly.colors import get_colorscale

from core.report.plots import svg
from core.report.plots.style import MASK_COLORS


def _panels(T=5, U=3):
    rng = np.random.default_rng(0)
    mask = (rng.random((T, U)) > 0.5).astype(float)
    w = rng.random((T, U))
    return [{"title": "active mask <1 = active>", "z": mask, "units": [f"LSTM {i + 1}" for i in range(U)], "binary": True,
             "colorbar": "state", "ticktext": ("inactive", "active")},
            {"title": "input attention", "z": w, "units": [f"LSTM {i + 1}" for i in range(U)], "zmin": 0.0, "zmax": 1.0,
             "colorbar": "weight w"}], mask, w


def _cells(text: str) -> list[tuple[str, str]]:
    """(fill, tooltip) of every rect that has a tooltip (the heatmaps' cells)."""
    return [(f, unescape(t)) for f, t in re.findall(r'<rect [^>]*fill="([^"]+)"><title>([^<]*)</title></rect>', text)]


def test_every_cell_of_every_panel_once_with_its_value():
    panels, mask, w = _panels()
    out = svg.timeline_svg(np.zeros((5, 4), np.uint8), panels)
    cells = _cells(out)
    assert len(cells) == 2 * 5 * 3
    tips = [t for _, t in cells]
    assert "row 2, LSTM 3: " + ("active" if mask[1, 2] > 0.5 else "inactive") in tips
    assert f"row 4, LSTM 1: {w[3, 0]:.3f}" in tips
    # the binary panel in the mask colours, the other on Viridis between its zmin and zmax
    fills = dict((t, f) for f, t in cells)
    assert {fills[t] for t in tips if t.endswith("active")} <= set(MASK_COLORS)
    assert "active mask &lt;1 = active&gt;" in out  # titles escaped


def test_colours_run_along_the_scale_and_a_missing_value_is_white():
    ends = svg.colours([0.0, 1.0, float("nan")], "Viridis", 0.0, 1.0)
    scale = get_colorscale("Viridis")

    def to_rgb(h: str) -> str:
        return f"rgb({int(h[1:3], 16)}, {int(h[3:5], 16)}, {int(h[5:7], 16)})"

    assert ends[0] == to_rgb(scale[0][1]) and ends[1] == to_rgb(scale[-1][1]) and ends[2] == svg.NAN_FILL
    assert svg.colours([5.0], "Viridis", 0.0, 1.0) == [ends[1]]  # clipped to the range


@pytest.mark.parametrize("t", [1, 3, 5])
def test_the_step_is_framed_in_the_image_and_every_panel(t):
    panels, _, _ = _panels()
    out = svg.timeline_svg(np.zeros((5, 4), np.uint8), panels, t)
    xs = set(re.findall(r'<rect class="step" x="([0-9.]+)"', out))
    assert len(re.findall(r'class="step"', out)) == 1 + len(panels) and len(xs) == 1
    cw = svg.column_width(5)
    assert float(xs.pop()) == pytest.approx(svg.LABEL_W + (t - 1) * cw)
    assert 'class="step"' not in svg.timeline_svg(np.zeros((5, 4), np.uint8), panels)


def test_a_colour_image_goes_in_as_a_png():
    panels, _, _ = _panels()
    out = svg.timeline_svg(np.zeros((5, 4, 3), np.uint8), panels)
    assert out.count('href="data:image/png;base64,') == 1


def test_mask_cells_are_clickable_by_position_and_marked():
    T, n = 6, 4
    before = np.zeros((T, n))
    after = before.copy()
    after[2, 1] = 1
    pinned = np.zeros((T, n), bool)
    pinned[2, 1] = True
    changed = np.zeros((T, n), bool)
    changed[4, 3] = True
    names = [f"LSTM {i + 1}" for i in range(n)]
    out = svg.mask_svg(before, after, pinned, changed, names, "after")
    cells = re.findall(r'data-cell="(\d+),(\d+)"', out)
    assert sorted((int(t), int(i)) for t, i in cells) == [(t, i) for t in range(T) for i in range(n)]
    tips = [t for _, t in _cells(out)]
    assert "row 3, LSTM 2: active (was inactive), set by you" in tips
    assert "row 5, LSTM 4: inactive (was inactive), changed downstream" in tips
    assert out.count('stroke="#1f4e99" stroke-width="2" pointer-events="none"') == 1  # one framed cell
    assert out.count('pointer-events="none"/>') == 2  # its frame and one cross: neither takes the click
