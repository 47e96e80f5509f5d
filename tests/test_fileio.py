"""The per-process memo of what the reports derive from run records (``core.fileio.derived_from_json``)."""

from __future__ import annotations

import json
import os

from core.fileio import derived_from_json, write_json
from core.report import compute, tables


def test_a_derived_value_is_remembered_until_the_file_changes(tmp_path):
    path, calls = tmp_path / "run.json", []
    def derive(record):
        calls.append(record["n"])
        return record["n"] * 2
    write_json(path, {"n": 1})
    assert derived_from_json(path, derive, "double") == 2
    assert derived_from_json(path, derive, "double") == 2 and calls == [1]  # read once
    assert derived_from_json(path, lambda r: r["n"], "same") == 1  # another name, its own value
    write_json(path, {"n": 21})  # a new file (rename): the value follows it
    assert derived_from_json(path, derive, "double") == 42 and calls == [1, 21]
    stat = path.stat()
    path.write_text(json.dumps({"n": 31}))  # rewritten in place, same size, a later time
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert derived_from_json(path, derive, "double") == 62
    stat = path.stat()
    path.write_text(json.dumps({"n": 4}))  # in place, the same time, another size
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert derived_from_json(path, derive, "double") == 8
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"n": 5}))  # another file (inode), the same size and time, moved in
    os.utime(other, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    other.replace(path)
    assert path.stat().st_mtime_ns == stat.st_mtime_ns and path.stat().st_size == len('{"n": 4}')
    assert derived_from_json(path, derive, "double") == 10
    n = len(calls)
    assert derived_from_json(tmp_path / "." / "run.json", derive, "double") == 10 and len(calls) == n  # one file, one entry
    assert derived_from_json(path, lambda r: 0, "double") == 0  # another derivation under the name: its own value
    assert derived_from_json(path, derive, "double") == 10 and len(calls) == n
    path.write_text("{not json")
    assert derived_from_json(path, derive, "double") is None
    path.write_text("[1, 2]")  # JSON, not an object
    assert derived_from_json(path, derive, "double") is None
    path.unlink()
    assert derived_from_json(path, derive, "double") is None


def _run(ds="mnist", model="rim", seed=0, err=0.02, seconds=10.0):
    return {"dataset": ds, "model": model, "seed": seed, "status": "completed", "protocol": "converged",
            "metrics": {"test_error": err, "train_time_s": seconds, "iterations_done": 100},
            "train_config": {"iterations": 100, "threads": 1}, "history": {"loss": [1.0] * 10},
            "torch_version": "2.14.1+cpu"}


def test_the_tables_and_the_compute_table_follow_a_changed_record(tmp_path):
    runs = tmp_path / "grid" / "runs" / "mnist"
    write_json(runs / "rim_s0.json", _run())
    write_json(runs / "rim_s1.json", _run(seed=1, err=0.03))
    (runs / "notes.json").write_text('{"no": "dataset"}')
    rows = tables.load_results(tmp_path / "grid")
    assert [r["test_error"] for r in rows] == [0.02, 0.03]
    rows[0]["test_error"] = 0.5  # a caller's change stays in the caller's copy
    assert tables.load_results(tmp_path / "grid")[0]["test_error"] == 0.02
    assert compute.collect(tmp_path)["grid"]["seconds"] == 20.0
    write_json(runs / "rim_s1.json", _run(seed=1, err=0.04, seconds=30.0))
    assert [r["test_error"] for r in tables.load_results(tmp_path / "grid")] == [0.02, 0.04]
    assert compute.collect(tmp_path)["grid"]["seconds"] == 40.0
    (runs / "rim_s0.json").unlink()
    assert [r["seed"] for r in tables.load_results(tmp_path / "grid")] == [1]
    assert compute.collect(tmp_path)["grid"]["runs"] == 1
