"""bench_interventions runs end to end on a small subset and writes its figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import bench_interventions

SHIPPED = Path(__file__).resolve().parents[1] / "pretrained" / "long" / "mnist" / "rim.safetensors"


def test_bench_interventions_small(tmp_path, capsys):
    if not SHIPPED.is_file():
        pytest.fail(f"the pages' default MNIST RIM is not shipped: {SHIPPED}")
    out = tmp_path / "iv.json"
    assert bench_interventions.main(["--n", "40", "--repeats", "1", "--out", str(out)]) == 0
    figures = json.loads(out.read_text())
    runs = 2 * (1 + 3 * 6 + 3 + 2)  # intact, each LSTM three ways, three random draws, all, alpha 0; clean and noisy
    assert figures["knockout_images"] == 40 and figures["knockout_runs"] == runs
    assert set(figures["one_input_by_kind"]) == {"removed", "off", "readout", "patch state", "patch mask"}
    assert 0 < figures["one_input_s"]["median"] and 0 < figures["knockout_table_s"]
    assert figures["patching_runs"] == 6 * 4 + 4 and figures["set_wide_s"] >= figures["knockout_table_s"]
    assert figures["model"] == "pretrained/long/mnist/rim" and figures["attribution_steps"] >= 128
    out = capsys.readouterr().out
    assert f"knock-out table, 40 images, {runs} runs" in out and "one input, patch state" in out
