"""Run health (core.report.health), the floors (core.report.floors) and the in-place classifier script, on
crafted histories and confusion matrices and on the stored runs the issue names."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core.report.floors import TEST_CLASS_COUNTS, counts_from_confusion, floors, floors_from_counts
from core.report.health import (
    COLLAPSED,
    DIVERGED,
    HEALTHY,
    balanced_accuracy,
    classify,
    health_of,
    loss_problems,
    summary_text,
)

ROOT = Path(__file__).resolve().parents[1]


def falling(n=200, start=2.3, end=0.3, seed=0):
    rng = np.random.default_rng(seed)
    return (start * np.exp(-np.arange(n) / (n / 4)) + end + rng.uniform(0, 0.05, n)).tolist()


def good_confusion():
    c = np.full((10, 10), 2)  # 82 of 100 right per class, 2 to each other class
    np.fill_diagonal(c, 82)
    return c.tolist()


def meta(loss=None, confusion=None, status="completed", per_class=None):
    m = {"status": status, "message": "", "classes": [str(i) for i in range(10)],
         "metrics": {} if status == "diverged" else {"confusion": confusion}, "history": {}}
    if per_class is not None:
        m["metrics"] = {"per_class_accuracy": per_class}
    if loss is not None:
        m["history"] = {"iteration": list(range(1, len(loss) + 1)), "loss": loss}
    return m


def test_a_run_that_learns_is_healthy():
    h = classify(meta(falling(), good_confusion()))
    assert h["health"] == HEALTHY and h["health_reasons"] == []
    assert h["health_checked"] == ["loss", "balanced_accuracy", "predicted_share"]
    assert h["health_measures"]["balanced_accuracy"] == pytest.approx(0.82)
    assert summary_text(h) == "healthy"


@pytest.mark.parametrize("change, words", [
    (lambda L: L[:50] + [math.nan] + L[51:], "not finite at iteration 51"),
    (lambda L: L[:50] + [None] + L[51:], "not finite at iteration 51"),  # how JSON stores a NaN
    (lambda L: L[:100] + [10.01 * L[0]] + L[101:], "above 10x its first value"),
    (lambda L: L[:-1] + [L[0] + 0.01], "final batch loss"),
])
def test_crafted_diverged_histories(change, words):
    h = classify(meta(change(falling()), good_confusion()))
    assert h["health"] == DIVERGED, h
    assert any(words in r for r in h["health_reasons"]), h["health_reasons"]


def test_the_thresholds_are_strict():
    L = falling()
    L[100] = 10 * L[0]  # exactly 10x: not above
    assert loss_problems(L)[0] == []
    L[-1] = L[0]  # equal to the first: not above
    assert loss_problems(L)[0] == []


def test_a_running_median_keeps_lasting_blowups_and_drops_one_batch_spikes():
    spike = falling()
    spike[5] = 50 * spike[0]  # one batch, recovered
    assert loss_problems(spike)[0]  # the rule as stated: any single batch counts
    assert loss_problems(spike, window=11)[0] == []
    lasting = falling()
    lasting[5:20] = [30 * lasting[0]] * 15
    reasons = loss_problems(lasting, window=11)[0]
    assert len(reasons) == 1 and reasons[0].startswith("running median (11 iterations)")
    nan_run = falling()
    nan_run[5:12] = [None] * 7  # non-finite stretches count as infinitely high
    assert any("running median" in r for r in loss_problems(nan_run, window=11)[0])


def test_a_run_stopped_on_a_nonfinite_loss_is_diverged_without_a_confusion():
    h = classify({"status": "diverged", "message": "loss became nan at iteration 7", "metrics": {},
                  "history": {"loss": [2.3, 2.2, None]}})
    assert h["health"] == DIVERGED
    assert h["health_checked"] == ["loss"]  # no test predictions of a diverged run
    assert "training stopped" in h["health_reasons"][0]


def test_collapse_by_balanced_accuracy():
    c = np.zeros((10, 10), int)
    c[:, 3] = 100  # every image called 3: balanced accuracy 0.10
    h = classify(meta(falling(), c.tolist()))
    assert h["health"] == COLLAPSED
    assert any("balanced accuracy 10.00 %" in r for r in h["health_reasons"])
    assert any("class 3 predicted for 100.0 %" in r for r in h["health_reasons"])
    # 12 % balanced accuracy is not above chance + 2 points; a hair above it is
    c = np.full((10, 10), 0)
    for i in range(10):
        c[i, i], c[i, (i + 1) % 10] = 12, 88
    assert classify(meta(falling(), c.tolist()))["health"] == COLLAPSED
    c[0, 0], c[0, 1] = 13, 87
    assert classify(meta(falling(), c.tolist()))["health"] == HEALTHY


def test_collapse_by_one_predicted_class():
    c = np.zeros((10, 10), int)
    c[:, 0] = 91
    for i in range(10):
        c[i, i] += 9
    # class 0 is predicted for 910 + 9 = 919 of 1000; balanced accuracy ~0.18 (above chance + 2)
    assert balanced_accuracy(c) > 0.12
    h = classify(meta(falling(), c.tolist()))
    assert h["health"] == COLLAPSED and len(h["health_reasons"]) == 1
    assert "91.9 %" in h["health_reasons"][0]


def test_diverged_wins_over_collapsed_and_both_reasons_are_listed():
    c = np.zeros((10, 10), int)
    c[:, 5] = 100
    L = falling()
    L[20] = 1e5
    h = classify(meta(L, c.tolist()))
    assert h["health"] == DIVERGED and len(h["health_reasons"]) == 3


def test_without_a_confusion_matrix_the_share_is_not_checked():
    h = classify(meta(falling(), per_class=[0.1] * 10))
    assert h["health"] == COLLAPSED
    assert h["health_checked"] == ["loss", "balanced_accuracy"]
    h = classify(meta(falling(), per_class=[0.9] * 10))
    assert summary_text(h) == "healthy (not checked: predicted_share)"


def test_stored_health_is_used_as_stored():
    m = meta(falling(), good_confusion())
    m.update(health=COLLAPSED, health_reasons=["x"], health_checked=["loss"], health_measures={})
    assert health_of(m)["health"] == COLLAPSED
    del m["health"]
    assert health_of(m)["health"] == HEALTHY


# the five failed runs the issue names (equal-initialisation paper grid)
NAMED = [("cifar10", "rmc", 0), ("cifar10", "rmc", 1), ("cifar10", "indrnn", 1), ("animals10", "indrnn", 0),
         ("animals10", "indrnn", 1)]


@pytest.mark.parametrize("ds, model, seed", NAMED)
def test_the_runs_named_in_the_issue_are_unhealthy(ds, model, seed):
    m = json.loads((ROOT / "results" / "paper" / "runs" / ds / f"{model}_s{seed}.json").read_text())
    fresh = {k: v for k, v in m.items() if not k.startswith("health")}
    h = classify(fresh)
    assert h["health"] in (DIVERGED, COLLAPSED)
    assert h["health_measures"]["max_predicted_share"] > 0.9  # one class for (nearly) every image
    assert h["health"] == m.get("health", h["health"])  # the stored classification agrees


def test_a_good_stored_run_is_healthy():
    m = json.loads((ROOT / "results" / "paper" / "runs" / "mnist" / "rim_s0.json").read_text())
    assert classify({k: v for k, v in m.items() if not k.startswith("health")})["health"] == HEALTHY


def test_floors():
    f = floors("animals10")
    assert f["majority_error"] == pytest.approx(1 - 46 / 260) and f["chance_error"] == pytest.approx(0.9)
    assert floors("mnist")["majority_error"] == pytest.approx(1 - 1135 / 10000)
    assert floors("cifar10")["majority_error"] == pytest.approx(0.9)
    assert math.isnan(floors("no_such")["chance_error"])
    assert floors_from_counts([3, 1])["majority_error"] == pytest.approx(0.25)


@pytest.mark.parametrize("ds", sorted(TEST_CLASS_COUNTS))
def test_recorded_counts_are_the_stored_runs_test_sets(ds):
    """The counts in core are those of the test split every stored run was scored on."""
    for p in sorted((ROOT / "results" / "paper" / "runs" / ds).glob("*.json"))[:5]:
        conf = json.loads(p.read_text())["metrics"]["confusion"]
        assert counts_from_confusion(conf) == TEST_CLASS_COUNTS[ds], p


def test_script_writes_health_in_place_and_keeps_everything_else(tmp_path):
    runs = tmp_path / "runs" / "mnist"
    runs.mkdir(parents=True)
    bad = np.zeros((10, 10), int)
    bad[:, 1] = 10
    (runs / "rim_s0.json").write_text(json.dumps({"model": "rim", "status": "completed", "x": 1,
                                                  **meta(falling(), good_confusion())}))
    (runs / "rmc_s0.json").write_text(json.dumps({"model": "rmc", **meta(falling(), bad.tolist())}))
    (tmp_path / "summary.json").write_text(json.dumps({"tables": {}}))
    out = subprocess.run([sys.executable, "-m", "scripts.classify_health", str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert "1 collapsed, 1 healthy" in out and "rmc_s0.json: collapsed" in out
    good = json.loads((runs / "rim_s0.json").read_text())
    assert good["health"] == HEALTHY and good["x"] == 1
    assert list(good)[list(good).index("status") + 1] == "health"
    assert json.loads((tmp_path / "summary.json").read_text()) == {"tables": {}}  # not a run: untouched


def test_every_stored_run_record_carries_its_health_class_as_the_rule_gives_it():
    """REPRODUCTION ("The health rule"): the class is stored in every run record under results/, and it is
    the one the rule computes from the record's own numbers."""
    records = [p for p in (ROOT / "results").rglob("runs/**/*.json") if not p.is_symlink()
               and not any(q.is_symlink() for q in p.parents if q != ROOT)]
    seen = 0
    for p in records:
        m = json.loads(p.read_text())
        if "status" not in m or "metrics" not in m:
            continue  # not a run record (a list, a summary)
        seen += 1
        assert "health" in m, f"{p.relative_to(ROOT)} has no stored health class"
        assert m["health"] == classify({k: v for k, v in m.items() if not k.startswith("health")})["health"], p
    assert seen > 500
