"""The load benchmark runs end to end (shortest settings) and writes complete JSON. No timing
assertions: the machine may be busy. It starts its own server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.browser.helpers import BROWSER, run_bench

pytestmark = [*BROWSER, pytest.mark.slow]  # make test-slow: a benchmark run end to end
REPO = Path(__file__).resolve().parents[2]


def test_bench_load_two_sessions(tmp_path):
    from bench.bench_load import ACTIONS

    out = tmp_path / "load.json"
    printed = run_bench("bench.bench_load", "--sessions", "2", "--out", str(out))
    (ph,) = json.loads(out.read_text())["phases"]
    assert ph["sessions"] == 2 and ph["error_count"] == 0, ph["errors"]
    counts = {"open_mechanisms": 2, "next_timestep": 8, "open_robustness": 2, "noise_step": 6}
    assert {a: ph["per_action"][a]["n"] for a in ACTIONS} == counts
    for a in ACTIONS:
        s = ph["per_action"][a]
        assert 0 < s["p50_s"] <= s["p95_s"] <= s["max_s"], (a, s)
    assert ph["server_cpu_s"] > 0 and ph["server_peak_rss_mb"] > 100
    assert "noise_step" in printed
