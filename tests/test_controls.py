"""The controls' equivalence margin: the paper's claimed gap on the 4,000-iteration grid, half of
it on the long grid (core.grid.long), fixed before the long grid's first control run."""
import json
from datetime import datetime
from pathlib import Path

import pytest

from core.grid.long import FOLDERS, MATCHED
from core.report.comparisons import Cells
from core.report.controls import (
    EQUIVALENCE_MARGIN,
    LONG_EQUIVALENCE_MARGIN,
    MARGIN_FIXED_AT,
    controls_margin_rule,
    controls_markdown,
    controls_table,
    equivalence_margin,
)
from core.report.paper import PAPER, controls_for
from core.report.tables import table2

ROOT = Path(__file__).resolve().parents[1]


def _rows(protocol):
    spec = {"rim": [1.5, 1.6, 1.55, 1.5, 1.6], "parallel_lstm": [1.8, 1.75, 1.78, 1.76, 1.74],
            "rim_random": [1.52, 1.58, 1.56, 1.55, 1.54]}
    return [{"dataset": "mnist", "model": m, "seed": s, "status": "completed", "health": "healthy", "protocol": protocol,
             "test_error": e / 100, "parameters": 1000} for m, errs in spec.items() for s, e in enumerate(errs)]


def test_the_long_grid_margin_is_half_the_papers_gap():
    for ds, gap in PAPER["vs_parallel_gap"].items():
        assert equivalence_margin("converged", ds) == EQUIVALENCE_MARGIN[ds] == gap
        assert equivalence_margin("converged-12k", ds) == equivalence_margin("converged-24k", ds) == gap / 2
    assert LONG_EQUIVALENCE_MARGIN["mnist"] == pytest.approx(0.175)


@pytest.mark.parametrize("protocol, margin, words", [("converged", 0.35, "the paper's claimed gap"),
                                                     ("converged-12k", 0.175, "half the paper's claimed gap")])
def test_the_controls_table_uses_its_grids_margin_and_says_which(protocol, margin, words):
    c = Cells(_rows(protocol))
    rows = controls_table(c, ["mnist"], table2(c, ["mnist"]))
    assert [r["margin"] for r in rows if r["control"] != "rim"] == pytest.approx([margin, margin])
    text = "\n".join(controls_markdown(rows))
    assert ("half the gap the paper claims" in text) == (protocol == "converged-12k")
    decided = controls_markdown(rows)[-1]  # random selection is within the margin at either budget here
    assert f"less than {words} on MNIST" in decided, decided


def test_the_long_grid_margin_was_fixed_before_its_first_control_run():
    """Every control record of the long grid (results/budget*, the variants it trains) was created
    after MARGIN_FIXED_AT: the margin could not have been chosen from them."""
    fixed = datetime.strptime(MARGIN_FIXED_AT, "%Y-%m-%dT%H:%M:%S%z")
    controls = {n for ds in MATCHED for n in controls_for(ds)} - {"parallel_lstm"}
    earlier = json.loads((ROOT / "results" / FOLDERS[12000] / "runs" / "mnist" / "rim_s0.json").read_text())
    assert datetime.strptime(earlier["created"], "%Y-%m-%dT%H:%M:%S%z") < fixed  # the check can fail
    for folder in FOLDERS.values():
        for p in (ROOT / "results" / folder / "runs").glob("*/*.json"):
            rec = json.loads(p.read_text())
            if (rec.get("variant") or rec["model"]) in controls:
                assert datetime.strptime(rec["created"], "%Y-%m-%dT%H:%M:%S%z") > fixed, p


def test_the_long_grids_controls_at_two_budgets_say_each_and_the_half_gap_margin():
    rows = _rows("converged-12k") + [{**r, "dataset": "fashion_mnist", "protocol": "converged-24k"}
                                     for r in _rows("converged-24k")]
    c = Cells(rows)
    table = controls_table(c, ["mnist", "fashion_mnist"], table2(c, ["mnist", "fashion_mnist"]))
    assert sorted({r["margin"] for r in table if r["control"] != "rim"}) == pytest.approx([0.175, 0.5])
    text = controls_markdown(table, compact=True)
    assert text[0].startswith("Long grid, Adam, cosine: MNIST at 12,000 iterations; Fashion-MNIST at 24,000 iterations.")
    assert "half the gap the paper claims" in text[0]
    assert "p raw" not in text[2] and text[2].startswith("| data set | control | seeds | test error |")
    assert "less than half the paper's claimed gap on MNIST, Fashion-MNIST" in text[-1], text[-1]
    assert controls_margin_rule(table).startswith("half the gap the paper claims")  # Compare's caption
    assert controls_margin_rule(controls_table(Cells(_rows("converged")), ["mnist"])).startswith("the gap the paper")


def test_a_long_grid_control_enters_the_tables_with_all_its_seeds():
    from core.report.controls import tabulated, training_note
    from core.report.tables import build_tables

    rows = _rows("converged-12k")
    two = [r for r in rows if r["model"] != "rim_random" or r["seed"] < 2]  # random selection: 2 of 5 seeds in
    t = build_tables(two)
    assert not t["controls"] and not [r for r in t["ablations"] if r["variant"] == "rim_random"]
    assert [r["model"] for r in tabulated(two)].count("rim_random") == 0
    assert training_note(two) == ("Still training, left out of the tables until all 5 seeds are in: MNIST "
                                  "RIM, random selection (2 of 5).")
    assert [r["control"] for r in build_tables(rows)["controls"]] == ["rim", "parallel_lstm", "rim_random"]
    from core.report.controls import controls_named  # what Compare's caption names: the table's controls only
    assert controls_named(build_tables(rows)["controls"]) == "RIM, random selection"
    assert controls_named(build_tables(two)["controls"]) == ""
    short = [r for r in _rows("converged") if r["model"] != "rim_random" or r["seed"] < 2]
    assert training_note(short) == "" and tabulated(short) == short  # other grids: every run in, as trained
    both = two + [r for r in _rows("converged") if r["model"] == "rim_random"]  # one folder, two protocols
    assert [r["protocol"] for r in tabulated(both) if r["model"] == "rim_random"] == ["converged"] * 5


def test_reproductions_controls_block_is_compact_and_names_the_full_table():
    import re

    from core.report.docs import _controls

    block = _controls(ROOT / "results")
    header = next(line for line in block.splitlines() if line.startswith("| data set |"))
    assert "p raw" not in header and "parameters" not in header
    full = re.search(r"Full table with parameters and p values: `(results/[\w/.-]+)`", block)
    assert full and (ROOT / full.group(1)).is_file()
    assert "p raw / Holm" in (ROOT / full.group(1)).read_text()  # the full table is there


def test_the_long_grids_margin_is_written_without_rounding():
    from core.report.fmt import margin

    assert [margin(m) for m in (0.175, 0.35, 0.5, 1.0)] == ["0.175", "0.35", "0.50", "1.00"]
    rows = controls_table(Cells(_rows("converged-12k")), ["mnist"], table2(Cells(_rows("converged-12k")), ["mnist"]))
    assert "±0.175: " in "\n".join(controls_markdown(rows, compact=True))


def test_the_long_grids_family_counts_its_planned_tests_not_yet_in():
    from core.report.controls import long_plan, pending_note, planned_pending
    from core.report.markdown import family_note

    rows = _rows("converged-12k")  # MNIST: RIM, the parallel LSTMs and random selection only
    c = Cells(rows)
    plan = long_plan(rows)
    assert plan == {"mnist": controls_for("mnist")}
    table = controls_table(c, ["mnist"], table2(c, ["mnist"]), plan)
    missing = [n for n in controls_for("mnist") if n not in ("parallel_lstm", "rim_random")]
    assert len(missing) == 4 and planned_pending(table, plan) == 2 * len(missing)
    tested = [r for r in table for pre in ("gap", "equiv") if f"{pre}_p_holm" in r and not r.get(f"{pre}_family")]
    assert {r["holm_m"] for r in table} == {len(tested) + 8} and {r["holm_pending"] for r in table} == {8}
    random = next(r for r in table if r["control"] == "rim_random")
    from core.report import stats
    ps = [r[f"{pre}_p"] for r in table for pre in ("gap", "equiv") if f"{pre}_p_holm" in r and not r.get(f"{pre}_family")]
    assert random["gap_p_holm"] == pytest.approx(stats.holm(ps + [1.0] * 8)[ps.index(random["gap_p"])])
    assert "8 of them planned and not run yet" in family_note(table, "difference and equivalence tests")
    assert pending_note(table).startswith(f"One Holm family: the {len(tested) + 8} difference and equivalence tests")
    # the 4,000-iteration grid is complete as it stands: nothing pending, no note
    short = controls_table(Cells(_rows("converged")), ["mnist"], plan=long_plan(_rows("converged")))
    assert long_plan(_rows("converged")) == {} and "holm_pending" not in short[0] and pending_note(short) == ""
    assert "planned" not in family_note(short)


def test_the_planned_count_says_what_counting_only_the_tests_in_would_change():
    from core.report.controls import counted_in_only
    from core.report.tables import build_tables

    rim = [1.50, 1.52, 1.49, 1.51, 1.50]
    spec = {"rim": rim, "parallel_lstm": [1.8, 1.75, 1.78, 1.76, 1.74],
            "parallel_lstm_h81": [1.30, 1.32, 1.31, 1.29, 1.33]}  # clearly better, p tiny
    rows = [{"dataset": "mnist", "model": m, "seed": s, "status": "completed", "health": "healthy",
             "protocol": "converged-12k", "test_error": e / 100, "parameters": 1000}
            for m, errs in spec.items() for s, e in enumerate(errs)]
    table = build_tables(rows)["controls"]
    matched = next(r for r in table if r["control"] == "parallel_lstm_h81")
    assert matched["gap_verdict"] == "the control better"  # decided even with the pending tests counted
    assert counted_in_only(table).endswith("counting only the 3 tests in, no verdict would change.")
    # a borderline gap: rejected among the 3 tests in, not among the 11 planned
    spec["parallel_lstm_h81"] = [1.46, 1.48, 1.46, 1.44, 1.49]
    rows = [{**r, "test_error": spec[r["model"]][r["seed"]] / 100} for r in rows]
    table = build_tables(rows)["controls"]
    matched = next(r for r in table if r["control"] == "parallel_lstm_h81")
    from core.report import stats
    assert matched["gap_p"] * 3 < stats.ALPHA < matched["gap_p_holm"], matched["gap_p"]
    assert matched["gap_verdict"] == "no measurable difference at this number of seeds"
    assert "these would read: MNIST, Parallel LSTMs 4 × 81 (parameter-matched): the control better" in counted_in_only(table)


def test_the_long_grids_ablations_count_their_planned_variants_too():
    from core.report.comparisons import ablation_table
    from core.report.controls import counted_in_only, long_plan, planned_ablations
    from core.report.tables import build_tables

    rows = [{**r, "noisy_test_error": r["test_error"] + 0.01 + 0.001 * r["seed"] * (1 + len(r["model"]) % 3)}
            for r in _rows("converged-12k")]  # RIM, the parallel LSTMs and random selection at the long budget
    assert planned_ablations(long_plan(rows)) == {"mnist": ["rim_random", "rim_all", "rim_alpha0"]}
    table = build_tables(rows)["ablations"]
    assert [r["variant"] for r in table] == ["rim", "rim_random", "parallel_lstm"]
    assert {r["holm_pending"] for r in table} == {4}  # rim_all and rim_alpha0: gap and growth gap each
    assert counted_in_only(table, "ablations").startswith("The planned count is a rule adopted")
    # other grids tabulate what ran: nothing planned, nothing pending
    assert planned_ablations(long_plan(_rows("converged"))) == {}
    # a data set whose controls are all still training is planned already: when they land, no verdict
    # given before is withdrawn
    fm = [{**r, "dataset": "fashion_mnist", "protocol": "converged-24k"} for r in rows]
    training = [r for r in fm if r["model"] != "rim_random" or r["seed"] < 2]
    assert set(long_plan(rows + training)) == {"mnist", "fashion_mnist"}
    both = build_tables(rows + training)
    assert {r["holm_pending"] for r in both["ablations"]} == {4 + 6}
    assert {r["holm_pending"] for r in both["controls"]} == {8 + 11}
    assert "holm_pending" not in build_tables(_rows("converged"))["ablations"][0]
    assert "holm_pending" not in ablation_table(Cells(rows), ["mnist"])[0]  # no plan given: the tests in


def test_the_plan_follows_the_budgets_before_any_control_runs_and_matches_the_grid():
    from core.grid.long import cells
    from core.report.controls import LONG_CONTROL_SETS, MAIN_METHODS, long_plan, read_budgets
    from core.report.tables import build_tables

    # the grid trains exactly the planned controls, on the planned sets, five seeds each
    trained = {}
    for c in cells(str(ROOT / "results")):
        if c.model not in MAIN_METHODS and not c.model.startswith("parallel_lstm_s"):
            trained.setdefault(c.dataset, set()).add((c.model, c.seed))
    assert set(trained) == set(LONG_CONTROL_SETS)
    for ds, got in trained.items():
        assert got == {(m, s) for m in controls_for(ds) if m != "parallel_lstm" for s in range(5)}, ds
    # with the budgets, a set is planned before its first control run, and only at its budget
    budgets = {"mnist": "converged-12k", "fashion_mnist": "converged-24k"}
    rim_only = [r for r in _rows("converged-12k") if r["model"] in ("rim", "parallel_lstm")]
    fm_12k = [{**r, "dataset": "fashion_mnist"} for r in rim_only]  # Fashion-MNIST's 12,000-iteration check
    assert long_plan(rim_only + fm_12k, budgets) == {"mnist": controls_for("mnist")}
    assert long_plan(rim_only + fm_12k) == {}  # without the budgets: only where a control run exists
    t = build_tables(rim_only + fm_12k, budgets=budgets)
    assert not t["controls"]  # nothing to show yet, but the plan is there when the first cell lands
    assert long_plan([{**r, "dataset": "animals10"} for r in rim_only], {"animals10": "converged-12k"}) == {}
    shipped = read_budgets(ROOT / "results")
    assert shipped and set(shipped) <= set(LONG_CONTROL_SETS) and set(shipped.values()) <= {"converged-12k", "converged-24k"}


def test_a_planned_test_without_a_p_counts_as_pending():
    from core.report.controls import long_plan, planned_pending

    rows = _rows("converged-12k")
    c = Cells(rows)
    plan = long_plan(rows)
    table = controls_table(c, ["mnist"], table2(c, ["mnist"]), plan)
    before = planned_pending(table, plan)
    for r in table:
        if r["control"] == "rim_random":
            r["gap_p"] = float("nan")  # a cell whose test could not run (too few healthy seeds)
    assert planned_pending(table, plan) == before + 1
