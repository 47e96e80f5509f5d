"""The page-latency benchmark runs end to end (one repetition, one setting) and writes
complete JSON. No timing assertions: the machine may be busy. It starts its own server."""

from __future__ import annotations

import json
import math

import pytest

from tests.browser.helpers import BROWSER, run_bench

pytestmark = [*BROWSER, pytest.mark.slow]  # make test-slow: a benchmark run end to end

INTERACTIONS = {"timestep_step", "noise_slider_cold", "noise_slider_cached", "new_drawing", "intervene_knockout",
                "explore_first_render",
                "explore_block_row", "explore_threshold", "explore_open_match", "explore_compare_with",
                "explore_units_first_render", "explore_unit_noise_cold"}


def test_bench_pages_one_rep(tmp_path):
    out = tmp_path / "pages.json"
    printed = run_bench("bench.bench_pages", "--reps", "1", "--gc", "off", "--out", str(out))
    data = json.loads(out.read_text())
    assert set(data["settings"]) == {"off"} and set(data["settings"]["off"]) == INTERACTIONS
    for name, s in data["settings"]["off"].items():
        assert s["n"] >= 1 and all(math.isfinite(x) and x > 0 for x in s["samples_s"]), name
        assert s["min_s"] <= s["median_s"] <= s["max_s"]
        assert name in printed
    assert data["machine"]["cores"] >= 1
