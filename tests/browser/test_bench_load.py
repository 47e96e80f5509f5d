"""The first-view and load benchmarks run end to end (shortest settings) and write complete
JSON. No timing assertions: the machine may be busy. Each starts its own server."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.browser.helpers import BROWSER, run_bench

pytestmark = BROWSER
REPO = Path(__file__).resolve().parents[2]


def test_bench_first_view(tmp_path):
    out = tmp_path / "first_view.json"
    printed = run_bench("bench.bench_first_view", "--order", "overview", "mechanisms", "--direct", "train",
                        "--direct-reps", "2", "--out", str(out))
    data = json.loads(out.read_text())
    for part in ("fresh_server_s", "revisit_s", "warm_server_new_session_s"):
        assert set(data[part]) == {"overview", "mechanisms"}, part
        assert all(math.isfinite(v) and v > 0 for v in data[part].values()), (part, data[part])
    assert "mechanisms" in printed
    # the direct first page: one sample per fresh server, their median reported
    samples = data["direct_first_page_samples_s"]["train"]
    assert len(samples) == 2 and all(math.isfinite(v) and v > 0 for v in samples)
    assert data["direct_first_page_s"]["train"] == pytest.approx(sum(samples) / 2, abs=1e-3)
    assert "train as the first page of a fresh server: median" in printed


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
