"""The page-latency benchmark's slow section runs end to end (one repetition) and writes complete
JSON. No timing assertions: the machine may be busy. It starts its own server. (A file of its own,
so the test run's two workers can take it and tests/browser/test_bench_pages.py at once.)"""

from __future__ import annotations

import json
import math

import pytest

from tests.browser.helpers import BROWSER, run_bench

pytestmark = [*BROWSER, pytest.mark.slow]  # make test-slow: a benchmark run end to end


def test_bench_pages_slow_section_one_rep(tmp_path, monkeypatch):
    """The slow list, with a short wait for the warm-up: every interaction, "Make PNG" included,
    is found on the page (its sidebar labels are the app's own) and timed."""
    monkeypatch.setenv("RIMSCOPE_BENCH_WARM_WAIT_S", "20")
    out = tmp_path / "pages_slow.json"
    printed = run_bench("bench.bench_pages", "--sections", "slow", "--reps", "1", "--gc", "off", "--out", str(out))
    data = json.loads(out.read_text())
    assert set(data["settings"]["off"]) == {"noise_kind", "protocol_switch", "robustness_fashion_mnist", "make_png",
                                            "find_the_same_mechanisms", "across_the_test_set"}
    for name, s in data["settings"]["off"].items():
        assert s["n"] == (2 if name == "make_png" else 1), name  # make_png: the MNIST and Fashion-MNIST curves
        assert all(math.isfinite(x) and x > 0 for x in s["samples_s"]), name
        assert name in printed
