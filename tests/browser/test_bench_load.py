"""The first-view and load benchmarks run end to end (shortest settings) and write complete
JSON. No timing assertions: the machine may be busy. Each starts its own server."""

from __future__ import annotations

import json
import math

import pytest

from tests.browser.test_browser import _MISSING

pytestmark = [pytest.mark.browser, pytest.mark.skipif(_MISSING is not None, reason=_MISSING or "")]


def test_bench_first_view(tmp_path, capsys, monkeypatch):
    from bench.bench_first_view import main

    monkeypatch.delenv("RIMSCOPE_DATA_DIR", raising=False)  # the bundled samples
    out = tmp_path / "first_view.json"
    main(["--order", "overview", "mechanisms", "--direct", "none", "--out", str(out)])
    data = json.loads(out.read_text())
    for part in ("fresh_server_s", "revisit_s", "warm_server_new_session_s"):
        assert set(data[part]) == {"overview", "mechanisms"}, part
        assert all(math.isfinite(v) and v > 0 for v in data[part].values()), (part, data[part])
    assert "mechanisms" in capsys.readouterr().out


def test_bench_load_two_sessions(tmp_path, capsys, monkeypatch):
    from bench.bench_load import ACTIONS, main

    monkeypatch.delenv("RIMSCOPE_DATA_DIR", raising=False)
    out = tmp_path / "load.json"
    main(["--sessions", "2", "--out", str(out)])
    (ph,) = json.loads(out.read_text())["phases"]
    assert ph["sessions"] == 2 and ph["error_count"] == 0, ph["errors"]
    counts = {"open_mechanisms": 2, "next_timestep": 8, "open_robustness": 2, "noise_step": 6}
    assert {a: ph["per_action"][a]["n"] for a in ACTIONS} == counts
    for a in ACTIONS:
        s = ph["per_action"][a]
        assert 0 < s["p50_s"] <= s["p95_s"] <= s["max_s"], (a, s)
    assert ph["server_cpu_s"] > 0 and ph["server_peak_rss_mb"] > 100
    assert "noise_step" in capsys.readouterr().out
