"""The benchmark suite runs end to end with tiny settings and writes complete JSON.

No timing assertions: the machine may be busy. Only that every section ran for every model
and produced positive numbers.
"""

from __future__ import annotations

import json
import math

from bench.bench_models import SHAPES, main
from core.models.registry import list_models


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def test_bench_quick_writes_complete_json(tmp_path, capsys):
    out = tmp_path / "bench.json"
    main(["--quick", "--protocol-iterations", "3", "--threads", "1", "--reps", "1", "--out", str(out)])
    printed = capsys.readouterr().out
    assert "SHORTENED: 3 iterations" in printed
    data = json.loads(out.read_text())

    assert data["machine"]["torch"] and data["machine"]["cores"] >= 1 and data["machine"]["note"]
    assert data["settings"]["protocol_shortened"] is True
    (run,) = data["runs"]
    assert run["threads"] == 1
    models = set(list_models())

    steps = run["steps"]
    assert {(r["shape"], r["model"]) for r in steps} == {(s, m) for s in SHAPES for m in models}
    for r in steps:
        for part in ("train", "infer"):
            for key in ("model_ms", "ref_ms", "ratio", "ratio_of_minima"):
                assert _positive(r[part][key]), (r["model"], r["shape"], part, key, r[part][key])

    assert {r["model"] for r in run["protocol"]} == models
    for r in run["protocol"]:
        assert r["iterations"] == 3 and r["iterations_done"] >= 1
        assert _positive(r["wall_s"]) and _positive(r["ms_per_iteration"])

    assert {r["model"] for r in run["trace"]} == models
    assert all(_positive(r["median_ms"]) for r in run["trace"])
    assert {r["model"] for r in run["noise"]} == models
    assert all(_positive(r["seconds"]) and r["images"] > 0 for r in run["noise"])
