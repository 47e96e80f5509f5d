"""The first-view benchmark runs end to end (shortest settings) and writes complete JSON. No timing
assertions: the machine may be busy. It starts its own servers. (A file of its own, so the test
run's two workers can take it and tests/browser/test_bench_load.py at once.)"""

from __future__ import annotations

import json
import math

import pytest

from tests.browser.helpers import BROWSER, run_bench

pytestmark = [*BROWSER, pytest.mark.slow]  # make test-slow: a benchmark run end to end


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
