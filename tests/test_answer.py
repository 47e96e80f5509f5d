"""The plain answer, the magnitude rule and the results figure (core.report.answer)."""
import json
import math
import re

import pandas as pd
import pytest

from core.paths import ROOT
from core.report import answer, figure, sources
from core.report.fmt import dataset_title
from core.report.stats import AS_LARGE, CANNOT_TELL, HOLDS, MAGNITUDE_OPEN, NOT_HOLDS, SMALLER, magnitude

RESULTS = ROOT / "results"


def test_the_magnitude_rule():
    assert magnitude(-0.1, 0.7, 1.0) == SMALLER  # wholly below the paper's 1.0, though it contains 0
    assert magnitude(-0.9, -0.2, 0.35) == SMALLER  # the other method better: smaller still
    assert magnitude(0.3, 1.3, 1.0) == AS_LARGE  # excludes 0, contains the paper's figure
    assert magnitude(1.1, 2.3, 1.0) == AS_LARGE  # above it
    assert magnitude(-0.3, 1.2, 1.0) == MAGNITUDE_OPEN  # contains 0 and the figure
    assert magnitude(0.1, 0.5, math.nan) == "" and magnitude(math.nan, 0.5, 1.0) == ""


def test_the_shipped_answer_is_short_plain_and_computed():
    text = answer.plain_answer(RESULTS)
    sentences = [s for s in re.split(r"(?<=[.])\s+(?=[A-Z])", text) if s]
    assert len(sentences) <= 3, sentences
    assert len(text.split()) <= 80, len(text.split())
    assert ";" not in text and not re.search(r"\bHolm\b|\bTOST\b|\bp [<=]", text)
    assert text.startswith("RIM (six LSTMs, attention picks four")  # RIM is said before it is used
    # the sets named as beaten are those where RIM beats the parallel LSTMs at the longest budget
    # with all its seeds (_longest), and back
    df = answer.gap_rows(RESULTS)
    from core.report.fmt import dataset_title

    beaten = [d for d in answer.DATASET_ORDER if (g := answer._longest(df, d)) and answer._verdict(df, g, d) == HOLDS]
    said = re.search(r"beats four plain LSTMs on (.*?) after [\d,]+ iterations", text)
    assert (said is None) == (not beaten)
    if said:
        assert said.group(1) == answer._names(beaten)
        assert {dataset_title(d) for d in beaten} == set(re.split(r", | and ", said.group(1)))


def _rows(spec, seeds=5):
    """gap_rows-like frame: (grid, dataset, other, verdict)."""
    return pd.DataFrame([{"grid": g, "dataset": d, "other": o, "verdict": v, "seeds": seeds} for g, d, o, v in spec])


def test_the_main_sentence_leads_with_the_longest_budget():
    claims = {"paper": {"vs_parallel_mean": {"pooled": -4.24, "verdict": NOT_HOLDS}}}
    lost = _rows([("converged", "mnist", "parallel_lstm", HOLDS), ("budget", "mnist", "parallel_lstm", CANNOT_TELL),
                  ("converged", "cifar10", "parallel_lstm", HOLDS)])
    s = answer._main_sentence(lost, claims)
    assert "beats four plain LSTMs on CIFAR-10 at a 4,000-iteration budget" in s
    assert "but not measurably on MNIST at 12,000, where it led at 4,000, and averages 4.24 points worse" in s
    two = _rows([("converged", "mnist", "parallel_lstm", HOLDS), ("budget", "mnist", "parallel_lstm", CANNOT_TELL),
                 ("converged", "fashion_mnist", "parallel_lstm", HOLDS),
                 ("budget-24k", "fashion_mnist", "parallel_lstm", CANNOT_TELL),
                 ("converged", "cifar10", "parallel_lstm", HOLDS), ("budget", "cifar10", "parallel_lstm", CANNOT_TELL),
                 ("converged", "animals10", "parallel_lstm", CANNOT_TELL)])
    s = answer._main_sentence(two, {})  # the faded leads are said once, grouped by budget
    assert s.endswith("does not beat four plain LSTMs measurably on MNIST and CIFAR-10 at 12,000-iteration budgets and "
                      "Fashion-MNIST at 24,000, where it led at 4,000, nor on Animals-10 at 4,000.")
    assert s.count("where it led") == 1
    kept = _rows([("converged", "mnist", "parallel_lstm", HOLDS), ("budget-24k", "mnist", "parallel_lstm", HOLDS)])
    s = answer._main_sentence(kept, {})
    assert "beats four plain LSTMs on MNIST at a 24,000-iteration budget" in s and "led" not in s and "worse" not in s
    partial = pd.concat([_rows([("converged", "mnist", "parallel_lstm", HOLDS)]),
                         _rows([("budget-24k", "mnist", "parallel_lstm", CANNOT_TELL)], seeds=2)])
    s = answer._main_sentence(partial, {})  # a budget still training does not speak
    assert "beats four plain LSTMs on MNIST at a 4,000-iteration budget" in s and "led" not in s
    worse = _rows([("converged", "mnist", "parallel_lstm", CANNOT_TELL), ("budget", "mnist", "parallel_lstm", NOT_HOLDS),
                   ("converged", "cifar10", "parallel_lstm", CANNOT_TELL)])
    s = answer._main_sentence(worse, {})
    assert "does not beat four plain LSTMs measurably on CIFAR-10 at a 4,000-iteration budget" in s
    assert "is measurably worse than them on MNIST at 12,000." in s
    few = _rows([("converged", "mnist", "parallel_lstm", HOLDS)], seeds=2)
    assert answer._main_sentence(few, {}).endswith("has no complete comparison with four plain LSTMs yet.")


def test_the_controls_sentence_names_only_what_the_table_decides():
    rows = [{"dataset": "mnist", "control": "parallel_lstm_h81", "gap_verdict": "the control better"},
            {"dataset": "cifar10", "control": "parallel_lstm_h60", "gap_verdict": "no measurable difference"},
            {"dataset": "mnist", "control": "rim_random", "equiv_verdict": "equivalent within the margin"},
            {"dataset": "fashion_mnist", "control": "rim_random", "equiv_verdict": "equivalence not shown"}]
    s = answer._controls_sentence(rows)
    assert s == ("On MNIST, equally large plain LSTMs beat it, and picking at random changes its error less "
                 "than the paper's gap.")
    assert answer._controls_sentence(rows[1:2]) == ""
    # the controls' training length, where their table names one protocol (they may be shorter than the grid)
    timed = [{**r, "protocol": "converged"} for r in rows]
    assert answer._controls_sentence(timed).startswith("At a 4,000-iteration budget on MNIST, equally large plain LSTMs")
    assert answer._controls_sentence([timed[0]]) == "At a 4,000-iteration budget on MNIST, equally large plain LSTMs beat it."
    # random selection measurably worse than attention's choice is said (attention helps), and one
    # measurably better too; a row that decides nothing says nothing
    worse = {"dataset": "mnist", "control": "rim_random", "protocol": "converged-12k", "gap_verdict": "RIM better",
             "equiv_verdict": "equivalence not shown"}
    assert answer._controls_sentence([{**timed[0], "protocol": "converged-12k"}, worse]) == (
        "At the same budget on MNIST, equally large plain LSTMs beat it, and picking at random makes it worse.")
    better = {**worse, "dataset": "fashion_mnist", "gap_verdict": "the control better"}
    assert answer._controls_sentence([better]).endswith("picking at random makes it better.")
    assert answer._controls_sentence([{**worse, "gap_verdict": "no measurable difference at this number of seeds"}]) == ""


def test_every_figure_row_agrees_with_its_verdict_and_the_figure_is_current():
    df = answer.gap_rows(RESULTS)
    assert not df.empty and set(df["grid"]) >= {"paper", "converged"}
    for r in df.itertuples():
        if not (math.isfinite(r.ci_low) and math.isfinite(r.ci_high)):
            continue
        excludes = r.ci_low > 0 or r.ci_high < 0
        assert excludes == (r.verdict in (HOLDS, NOT_HOLDS)), r
        assert r.magnitude == magnitude(r.ci_low, r.ci_high, r.paper_gap)
    assert figure.figure_current(ROOT), "results/gaps.csv is stale: run `python -m core.reproduce docs`"
    assert (ROOT / answer.FIGURE).is_file()


def test_the_figure_is_drawn_from_a_results_folder(tmp_path):
    (tmp_path / "results").symlink_to(RESULTS)
    out = figure.write_figure(tmp_path)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert figure.figure_current(tmp_path)
    empty = tmp_path / "empty"
    (empty / "results").mkdir(parents=True)
    with pytest.raises(ValueError, match="nothing to draw"):
        figure.write_figure(empty)


def test_every_table_row_with_a_paper_figure_has_its_magnitude():
    """Tables 2-4 and the claims table carry the magnitude rule's word for every gap the paper gives a figure for."""
    from core.report.claims import grid

    _, t = grid(RESULTS / "converged")
    for r in t["table2"]:
        assert r["gap_magnitude"] == magnitude(r["gap_ci_low"], r["gap_ci_high"], r["paper_gap"])
    for r in t["table4"]:
        assert r["growth_gap_magnitude"] == magnitude(r["growth_gap_ci_low"], r["growth_gap_ci_high"],
                                                      r["paper_growth_gap"])
    claims = {r["claim_id"]: r for r in t["claims"]}
    mean = claims["vs_parallel_mean"]
    assert mean["magnitude"] == magnitude(mean["pooled_ci_low"], mean["pooled_ci_high"], mean["paper"])
    assert all(word in (SMALLER, AS_LARGE, MAGNITUDE_OPEN) for part in claims["vs_parallel_all"]["magnitude"].split("; ")
               for word in [part.split(" on ")[0]])


def test_the_verdict_by_budget_table_has_every_budget_and_agrees_with_the_rows():
    df = answer.gap_rows(RESULTS)
    vb = answer.verdict_by_budget(df)
    assert vb.equals(answer.verdict_by_budget(answer.read_gap_rows(RESULTS)))  # the page's stored numbers
    budgets = [answer.SHORT[g] for g in answer.GRIDS if g != "paper" and g in set(df["grid"])]
    assert list(vb.columns) == ["data set", "RIM vs", *budgets]
    mnist = vb[(vb["data set"] == "MNIST") & (vb["RIM vs"] == "Parallel LSTMs")].iloc[0]
    r = df[(df["grid"] == "converged") & (df["dataset"] == "mnist") & (df["other"] == "parallel_lstm")].iloc[0]
    assert mnist["Adam, 4,000 iterations"].startswith({HOLDS: "✅", NOT_HOLDS: "❌"}.get(r["verdict"], "❔"))


def test_the_seeds_sentence_counts_the_leading_comparison_not_a_partial_cell():
    df = pd.DataFrame([{"grid": "budget", "dataset": "mnist", "other": "indrnn", "seeds": 1},
                       {"grid": "budget", "dataset": "mnist", "other": "parallel_lstm", "seeds": 5},
                       {"grid": "converged", "dataset": "animals10", "other": "parallel_lstm", "seeds": 3},
                       {"grid": "paper", "dataset": "mnist", "other": "parallel_lstm", "seeds": 2}])
    assert answer._seeds_sentence(df) == "Five seeds per method (three on Animals-10)."


def test_the_seeds_sentence_counts_the_comparisons_the_answer_reads():
    """A budget still training (one seed of CIFAR-10 at 12,000) does not lower the count."""
    df = pd.concat([_rows([("converged", d, "parallel_lstm", HOLDS) for d in ("mnist", "cifar10")]),
                    _rows([("converged", "animals10", "parallel_lstm", CANNOT_TELL)], seeds=3),
                    _rows([("budget", "cifar10", "parallel_lstm", CANNOT_TELL)], seeds=1)])
    assert answer._seeds_sentence(df) == "Five seeds per method (three on Animals-10)."
    assert answer._seeds_sentence(df, [5, 5]) == "Five seeds per method (three on Animals-10)."
    assert answer._seeds_sentence(df, [4, 5]) == "Four to five seeds (three on Animals-10)."  # a control with fewer
    assert answer._seeds_sentence(_rows([("converged", "animals10", "parallel_lstm", HOLDS)], seeds=3)) == \
        "Three seeds per method."


def test_the_seeds_sentence_gives_a_range_where_data_sets_differ():
    """Ten seeds of RIM and the parallel LSTMs on MNIST beside five on CIFAR-10 is "Five to ten", not "Five"."""
    df = pd.concat([_rows([("budget", "mnist", "parallel_lstm", CANNOT_TELL)], seeds=10),
                    _rows([("budget-24k", "cifar10", "parallel_lstm", CANNOT_TELL)], seeds=5),
                    _rows([("converged", "animals10", "parallel_lstm", CANNOT_TELL)], seeds=3)])
    assert answer._seeds_sentence(df) == "Five to ten seeds (three on Animals-10)."
    assert answer._seeds_sentence(df, [4]) == "Four to ten seeds (three on Animals-10)."


def test_the_budget_note_counts_the_runs_still_improving():
    from core.report.convergence import IMPROVING
    from core.report.tables import load_results

    text = answer.budget_note(RESULTS)
    rows = load_results(RESULTS / "converged")
    n = sum(r["convergence"] == IMPROVING for r in rows)
    assert f"at 4,000 iterations {n} of {len(rows)} runs are still improving" in text
    from core.report.controls import tabulated
    long_rows = tabulated(load_results(RESULTS / "long"))  # the runs the tables read
    n_long = sum(r['convergence'] == IMPROVING for r in long_rows)
    assert f"long budget, {n_long} of {len(long_rows)} are" in text
    from core.report.convergence import ends_before_cut
    early = [r for r in long_rows if ends_before_cut(r)]  # every one of them meets the criterion
    assert early and all(r["convergence"] != IMPROVING for r in early)
    assert (f"Of the {len(long_rows) - n_long} that meet it there, {len(early)} stopped early (validation "
            "patience) by three quarters of their schedule, which meets it by construction.") in text
    # below the bar, the note says where the runs still improving are; at or above it, it does not
    assert ("below the long grid's bar of 90% meeting the criterion" in text) == (n_long > 0.1 * len(long_rows))
    for ds in {r["dataset"] for r in long_rows if r["convergence"] == IMPROVING} if n_long > 0.1 * len(long_rows) else ():
        d = [r for r in long_rows if r["dataset"] == ds]
        assert f"{dataset_title(ds)} at {max(int(r['iterations']) for r in d):,}: " \
               f"{sum(r['convergence'] == IMPROVING for r in d)} of {len(d)}" in text
    # a set the budget rule's second step moves gets its sentence, from results/long/budgets.csv
    steps = pd.read_csv(RESULTS / "long" / "budgets.csv")
    for r in steps[steps["budget"] != steps["first_step"]].itertuples():
        said = (f"{dataset_title(r.dataset)} goes to {r.budget:,} (a rule step added after seeing its {r.first_step:,}-"
                f"iteration grid: {r.main_met_at_first} of its {r.main_runs_at_first} runs of seeds 0-4 meet the criterion)")
        assert said in text
        assert (f"read at {r.read_at:,} until those" in text) == (r.read_at != r.budget)
    assert answer.budget_note(RESULTS / "nowhere") == ""


def test_the_stored_note_is_the_computed_one(tmp_path):
    """results/answer_note.md (what Compare shows under the answer) is ``budget_note``, and
    ``read_note`` computes it where none is stored."""
    assert answer.read_note(RESULTS) == answer.budget_note(RESULTS) != ""
    assert answer.read_note(tmp_path) == ""  # no results: no note, nothing stored


def test_the_stored_answer_records_the_tables_it_was_read_beside(tmp_path):
    """``write_answer`` stores a hash per table; a table changed, added or gone afterwards is named, and
    the shipped results match theirs (``docs --check`` rewrites them otherwise)."""
    import shutil

    assert sources.stale_sources(RESULTS) == []
    assert "long/table2.csv" in sources.sources(RESULTS)
    res = tmp_path / "results"
    for folder in ("converged", "long"):
        res.joinpath(folder).mkdir(parents=True)
        for name in ("table2.csv", "claims.csv"):
            shutil.copy(RESULTS / folder / name, res / folder / name)
    assert sources.stale_sources(res) == []  # nothing stored: nothing to compare
    (res / sources.SOURCES_FILE).write_text(json.dumps(sources.sources(res)))
    assert sources.stale_sources(res) == []
    (res / "long" / "claims.csv").write_text("changed")
    (res / "converged" / "table2.csv").unlink()
    (res / "converged" / "table3.csv").write_text("new")
    assert sources.stale_sources(res) == ["converged/table2.csv", "converged/table3.csv", "long/claims.csv"]


def test_the_controls_sentence_says_each_budget_and_its_margin():
    """The long grid's controls are said at "the same budget(s)" as the first sentence's, with the long
    grid's margin (half the paper's gap) in its own words; no semicolon."""
    rows = [{"dataset": "mnist", "control": "rim_random", "protocol": "converged-12k",
             "equiv_verdict": "equivalent within the margin"},
            {"dataset": "mnist", "control": "parallel_lstm_h81", "protocol": "converged-12k",
             "gap_verdict": "no measurable difference at this number of seeds"},
            {"dataset": "fashion_mnist", "control": "parallel_lstm_h81", "protocol": "converged-24k",
             "gap_verdict": "the control better"},
            {"dataset": "fashion_mnist", "control": "rim_random", "protocol": "converged-24k",
             "equiv_verdict": "equivalent within the margin"}]
    s = answer._controls_sentence(rows)
    assert s == ("At the same budgets, equally large plain LSTMs beat it on Fashion-MNIST, and picking at random "
                 "changes its error less than half the paper's gap on MNIST and Fashion-MNIST."), s
    assert ";" not in s
    short = [{**r, "protocol": "converged"} for r in rows]
    assert answer._controls_sentence(short).startswith("At 4,000-iteration budgets, equally large plain LSTMs beat "
                                                       "it on Fashion-MNIST, and picking at random changes its error "
                                                       "less than the paper's gap on MNIST and Fashion-MNIST")


def test_the_answer_reads_the_long_grids_controls_where_its_cells_are_in(tmp_path, monkeypatch):
    short = [{"dataset": d, "control": c, "protocol": "converged"} for d in ("mnist", "fashion_mnist")
             for c in ("rim", "parallel_lstm_h81", "rim_random")]
    long_ = [{"dataset": "mnist", "control": c, "protocol": "converged-12k"} for c in ("rim", "parallel_lstm_h81", "rim_random")]
    long_ += [{"dataset": "fashion_mnist", "control": c, "protocol": "converged-24k"} for c in ("rim", "parallel_lstm_h81")]
    monkeypatch.setattr(answer, "_tables", lambda root, folder: {"controls": long_ if folder == "long" else short})
    got = {(r["dataset"], r["control"]) for r in answer.answer_controls(tmp_path)}
    # one budget: the long grid's; each control on every set where its cell is in (FMNIST: parameter-matched only)
    assert got == {("mnist", "parallel_lstm_h81"), ("mnist", "rim_random"), ("fashion_mnist", "parallel_lstm_h81")}
    monkeypatch.setattr(answer, "_tables", lambda root, folder: {"controls": [long_[0], long_[3]] if folder == "long" else short})
    assert {r["protocol"] for r in answer.answer_controls(tmp_path)} == {"converged"}  # no control at long: 4,000
