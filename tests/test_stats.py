"""The statistics every table uses (core.report.stats) and how the tables apply them (core.report.tables):
Holm against a hand example, the one verdict rule, the pooled gap, the paired test, and the
exclusion of unhealthy runs."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st_h
from scipy import stats as st

from core.grid.cells import run_path
from core.report import stats
from core.report.tables import write_tables


def test_holm_against_a_hand_example():
    # sorted: 0.005 x4 = 0.02; 0.01 x3 = 0.03; 0.03 x2 = 0.06; 0.04 x1 = 0.04 -> kept at 0.06 (monotone)
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])  # capped at 1
    adj = stats.holm([0.01, math.nan, None, 0.02])  # missing tests do not count in m
    assert adj[0] == pytest.approx(0.02) and adj[3] == pytest.approx(0.02) and np.isnan(adj[1]) and np.isnan(adj[2])
    assert len(stats.holm([])) == 0


def test_holm_counts_pending_tests_as_never_rejected():
    # pending tests are tests with p = 1 at the end of the order: the same adjusted p and levels
    ps = [0.001, 0.02, 0.004]
    assert stats.holm(ps, pending=3) == pytest.approx(stats.holm(ps + [1.0] * 3)[:3])
    assert stats.holm_levels(ps, pending=3) == pytest.approx(stats.holm_levels(ps + [1.0] * 3)[:3])
    assert stats.holm([0.01], pending=4)[0] == pytest.approx(0.05)  # m = 5
    assert stats.holm_levels([0.001, 0.002], pending=2) == pytest.approx([1 - 0.05 / 4, 1 - 0.05 / 3])


@settings(max_examples=200, deadline=None)
@given(st_h.lists(st_h.floats(1e-6, 1.0), min_size=1, max_size=12), st_h.lists(st_h.floats(1e-6, 1.0), max_size=12))
def test_a_test_rejected_with_pending_ones_stays_rejected_whatever_they_bring(now, later):
    # Holm is monotone in every p value: what is rejected while some tests are pending (p = 1) is
    # rejected again once their real p values are in, and interval level and verdict agree
    before = stats.holm(now, pending=len(later)) < stats.ALPHA
    after = stats.holm(now + later)[: len(now)] < stats.ALPHA
    assert not (before & ~after).any()
    levels = stats.holm_levels(now, pending=len(later))
    for p, lev, rejected in zip(now, levels, before, strict=True):  # p below its step's alpha exactly when rejected
        assert (p < 1 - lev) == rejected or math.isclose(p, 1 - lev, rel_tol=1e-9)  # (a tie: float rounding)


def test_the_verdict_rule():
    assert stats.verdict(1.0, 0.049) == stats.HOLDS
    assert stats.verdict(-1.0, 0.049) == stats.NOT_HOLDS
    assert stats.verdict(1.0, 0.05) == stats.CANNOT_TELL  # not below alpha
    assert stats.verdict(0.0, 0.0) == stats.CANNOT_TELL
    assert stats.verdict(1.0, math.nan) == stats.TOO_FEW
    assert stats.verdict(1.0, 0.01, "up", "down", "flat") == "up"
    assert stats.verdict(-1.0, 0.3, "up", "down", "flat") == "flat"


def test_a_claim_over_all_sets_holds_only_when_it_holds_on_each():
    four = ["a", "b", "c", "d"]
    h, n, c = stats.HOLDS, stats.NOT_HOLDS, stats.CANNOT_TELL
    assert stats.verdict_all(dict.fromkeys(four, h), four)[0] == h
    v, groups = stats.verdict_all({"a": h, "b": h, "c": h, "d": c}, four)
    assert v == c and groups["cannot tell"] == ["d"]
    assert stats.verdict_all({"a": h, "b": h, "c": h}, four)[0] == c  # a set without a test cannot hold
    assert stats.verdict_all({"a": h, "b": n, "c": c, "d": h}, four)[0] == n  # one measurable failure
    assert stats.verdict_all({"a": stats.TOO_FEW, "b": h, "c": h, "d": h}, four)[0] == c


def test_welch_test_p_value_matches_scipy_and_agrees_with_the_interval():
    a, b = [1.0, 2.0, 3.5, 4.0], [2.0, 3.0, 5.0, 6.0, 7.0]
    d, lo, hi, p = stats.welch_test(a, b)
    assert p == pytest.approx(st.ttest_ind(a, b, equal_var=False).pvalue)
    assert (lo < 0 < hi) == (p >= 0.05)
    assert stats.welch_test([1.0, 1.0], [0.5, 0.5]) == (0.5, 0.5, 0.5, 0.0)  # no spread: exact
    assert np.isnan(stats.welch_test([1.0], [0.5, 0.7])[3])


def test_paired_test_by_hand():
    a = {0: 3.0, 1: 5.0, 2: 4.0}
    b = {0: 1.0, 1: 2.0, 2: 2.0, 3: 9.0}  # seed 3 has no partner: left out
    d, lo, hi, p, n = stats.paired_test(a, b)
    # differences 2, 3, 2: mean 7/3, sd sqrt(1/3), se 1/3, t = 7 with 2 degrees of freedom
    assert n == 3 and d == pytest.approx(7 / 3)
    q = st.t.ppf(0.975, 2)
    assert (lo, hi) == pytest.approx((7 / 3 - q / 3, 7 / 3 + q / 3))
    assert p == pytest.approx(2 * st.t.sf(7.0, 2))
    assert np.isnan(stats.paired_test({0: 1.0}, {0: 0.0})[3])


def test_pooled_gap_by_hand_and_one_set_is_welch():
    a1, b1 = [1.0, 2.0, 3.0], [0.0, 0.0, 3.0]  # gap 1; var/n: 1/3 and 1
    a2, b2 = [5.0, 7.0], [2.0, 4.0]  # gap 3; var/n: 1 and 1
    est, lo, hi, p = stats.pooled_gap([(a1, b1), (a2, b2)])
    se = math.sqrt((1 / 3 + 1 + 1 + 1) / 4)
    df = (10 / 3) ** 2 / ((1 / 3) ** 2 / 2 + 1 / 2 + 1 / 1 + 1 / 1)
    assert df == pytest.approx(100 / 23)
    q = st.t.ppf(0.975, df)
    assert (est, lo, hi) == pytest.approx((2.0, 2.0 - q * se, 2.0 + q * se))
    assert p == pytest.approx(2 * st.t.sf(2.0 / se, df))
    assert stats.pooled_gap([(a1, b1)]) == pytest.approx(stats.welch_test(a1, b1))
    assert all(np.isnan(stats.pooled_gap([])))


def _run(root, ds, model, seed, err, confusion=None):
    p = run_path(root, ds, model, seed)
    p.parent.mkdir(parents=True, exist_ok=True)
    loss = np.linspace(2.3, 0.5, 100).tolist()
    p.write_text(json.dumps({"dataset": ds, "model": model, "seed": seed, "status": "completed",
                             "train_config": {"iterations": 100}, "history": {"loss": loss},
                             "metrics": {"test_error": err, "noisy_test_error": err + 0.01, "confusion": confusion}}))


def _collapsed():
    c = np.zeros((10, 10), int)
    c[:, 4] = 100
    return c.tolist()


def test_unhealthy_runs_are_counted_excluded_and_listed(tmp_path):
    for seed, e in enumerate([0.10, 0.11, 0.12]):
        _run(tmp_path, "mnist", "rim", seed, e)
        _run(tmp_path, "mnist", "parallel_lstm", seed, e + 0.05)
    _run(tmp_path, "mnist", "rim", 3, 0.90, _collapsed())  # a constant predictor
    t = write_tables(tmp_path)
    row = t["table2"][0]
    assert row["rim_error"] == pytest.approx(11.0) and (row["rim_healthy"], row["rim_runs"]) == (3, 4)
    md = (tmp_path / "tables.md").read_text()
    assert "11.00 ± 1.00 (3 of 4 healthy)" in md
    assert "MNIST rim seed 3 (90.00 %): collapsed: balanced accuracy 10.00 %" in md
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [(e["model"], e["seed"]) for e in summary["excluded"]["table2"]] == [("rim", 3)]
    assert summary["floors"]["mnist"]["majority_error"] == pytest.approx(1 - 1135 / 10000)
    assert "| 90.00 / 88.65 |" in md
    t_all = write_tables(tmp_path, include_unhealthy=True)
    assert t_all["table2"][0]["rim_error"] == pytest.approx(100 * (0.10 + 0.11 + 0.12 + 0.90) / 4)
    assert "included in the means" in (tmp_path / "tables.md").read_text()


def test_table_is_one_holm_family_and_the_claims_follow_the_rule(tmp_path):
    """Four sets, RIM better on each by the same clear margin but one set with a small one:
    the claim over all four sets cannot be told; the pooled gap holds."""
    rng = np.random.default_rng(0)
    margins = {"mnist": 5.0, "fashion_mnist": 5.0, "cifar10": 5.0, "animals10": 0.3}
    for ds, gap in margins.items():
        for seed in range(3):
            base = 0.3 + rng.normal(0, 0.005)
            _run(tmp_path, ds, "rim", seed, base)
            _run(tmp_path, ds, "parallel_lstm", seed, base + gap / 100 + rng.normal(0, 0.005))
    t = write_tables(tmp_path)
    rows = {r["dataset"]: r for r in t["table2"]}
    raw = [rows[d]["gap_p"] for d in margins]
    assert [rows[d]["gap_p_holm"] for d in margins] == pytest.approx(list(stats.holm(raw)))
    assert rows["mnist"]["holm_m"] == 4
    assert [rows[d]["verdict"] for d in ("mnist", "fashion_mnist", "cifar10")] == [stats.HOLDS] * 3
    assert rows["animals10"]["verdict"] == stats.CANNOT_TELL
    claims = {c["claim_id"]: c for c in t["claims"]}
    assert claims["vs_parallel_all"]["verdict"] == stats.CANNOT_TELL
    assert claims["vs_parallel_all"]["detail"] == "holds on: MNIST, Fashion-MNIST, CIFAR-10; cannot tell on: Animals-10"
    pooled = claims["vs_parallel_mean"]
    assert pooled["pooled"] == pytest.approx(np.mean([rows[d]["gap"] for d in margins]))
    assert pooled["verdict"] == stats.HOLDS and pooled["pooled_ci_low"] > 0
    assert "### The paper's claims, one by one" in (tmp_path / "tables.md").read_text()
