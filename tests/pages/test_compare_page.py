"""The Compare page through AppTest: curves per data set, errors over seeds, the three tables
with the paper's claims, the schedule toggle, downloads, and what it says when results are missing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from streamlit.testing.v1 import AppTest

from core.report.claims import CLAIM_COLUMNS
from core.report.fmt import CONVERGED_TITLE, SCHEDULE_TITLES, method_title

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "compare.py")


def run_page() -> AppTest:
    return AppTest.from_file(PAGE, default_timeout=120).run()


TABS = ["Training curves", "Final errors over seeds", "Paper's claims vs ours", "Runs"]


def open_tab(at: AppTest, label: str) -> AppTest:
    """Open one of the page's tabs (only the open tab's view runs) and run the page again."""
    at.session_state["cmp_tab"] = label
    return at.run()


def every_tab(at: AppTest) -> SimpleNamespace:
    """What the page shows over its four tabs, each opened in turn: figures by title, subheaders,
    data frames, download and button labels, captions, expanders."""
    out = SimpleNamespace(figs={}, subheaders=[], frames=[], downloads=[], buttons=[], captions=[], expanders=[])
    for label in TABS:
        open_tab(at, label)
        assert not at.exception and not at.error, label
        out.figs.update(figures(at))
        out.subheaders += [s.value for s in at.subheader]
        out.frames += [d.value for d in at.dataframe]
        out.downloads += [b.label for b in at.get("download_button")]
        out.buttons += [b.label for b in at.button]
        out.captions += [c.value for c in at.caption]
        out.expanders += [e.label for e in at.expander]
    return out


def figures(at: AppTest, gaps: bool = False) -> dict[str, dict]:
    """Plotly figures on the page by their key-less title text (without the answer's gaps figure,
    on every view, unless ``gaps``)."""
    from core.report.plots.comparison import GAPS_TITLE

    out = {}
    for el in at.get("plotly_chart"):
        spec = json.loads(el.proto.spec)
        title = spec.get("layout", {}).get("title", {})
        out[title.get("text", "") if isinstance(title, dict) else str(title)] = spec
    return out if gaps else {t: f for t, f in out.items() if t != GAPS_TITLE}


def test_compare_page_loads_with_curves_errors_tables_and_runs(page_env):
    at = run_page()
    assert not at.exception and not at.error
    assert [t.label for t in at.tabs] == ["Training curves", "Final errors over seeds", "Paper's claims vs ours", "Runs"]
    assert at.radio(key="cmp_schedule").options == [  # a radio: every experiment one click away
        SCHEDULE_TITLES["converged"], SCHEDULE_TITLES["paper"],
        "old run, unequal initialisation (longer schedule)"]
    assert at.radio(key="cmp_schedule").value == "converged"  # the default: the converged grid
    assert at.selectbox(key="cmp_curves_ds").options == ["MNIST", "Fashion-MNIST"]
    assert at.slider(key="cmp_smoothing").value == 0.6
    assert len(figures(at)) == 3  # the first tab's: loss overlay, accuracy overlay, small multiples
    assert not [s for s in at.subheader if s.value.startswith("Table")]  # the other tabs do not run
    seen = every_tab(at)
    figs = seen.figs
    assert len(figs) == 4  # loss overlay, accuracy overlay, small multiples, error bars
    loss = next(f for t, f in figs.items() if "training loss" in t and "per method" not in t)
    assert len(loss["data"]) == 5 * (3 + 1)  # 5 methods x (3 seeds + mean)
    assert "nats" in loss["layout"]["yaxis"]["title"]["text"]
    assert "iteration" in loss["layout"]["xaxis"]["title"]["text"]
    # the tables: ours beside the paper's, with verdicts
    names = seen.subheaders
    assert {"Table 2 · RIM vs parallel LSTMs", "Table 3 · RIM vs EntNet, RMC, IndRNN",
            "Table 4 · Gaussian noise (variance 0.01)"} <= set(names)
    frames = seen.frames
    t2 = next(f for f in frames if "gap, paper (points)" in f.columns and "parallel LSTMs error (%)" in f.columns)
    assert list(t2["data set"]) == ["MNIST", "Fashion-MNIST"]
    assert list(t2["gap, paper (points)"]) == ["0.35", "1.00"]
    assert t2["verdict"].str.match("^[✅❌❔]").all()
    runs = next(f for f in frames if "seed" in f.columns and "status" in f.columns)
    assert len(runs) == 2 * 5 * 3
    labels = seen.downloads
    assert {"⬇ table2 as CSV (all numbers)", "⬇ table3 as CSV (all numbers)", "⬇ table4 as CSV (all numbers)",
            "⬇ Runs as CSV", "⬇ Mean ± sd as CSV"} <= set(labels)
    # the controls' margin rule is the shown grid's (4,000 iterations: the paper's gap; the long grid: half of it)
    assert any("Equivalence: TOST; the margin is the gap the paper claims for the method" in c
               and "lies within ± the margin" in c for c in seen.captions)
    assert labels.count("⬇ HTML") == 4  # one per figure, PNG beside it when kaleido can render
    assert "⬇ PNG" not in labels  # a PNG is made only when asked (kaleido takes seconds)
    assert seen.buttons.count("🖼 Make PNG") in (0, 4)
    assert all("(the other method is better)" not in v and "at this number of seeds" not in v
               for f in frames if "verdict" in f.columns for v in f["verdict"])  # short verdicts; legend above


def test_choosing_another_dataset_changes_the_curves(page_env):
    at = run_page()
    before = [c.value for c in at.caption if "runs. Thin lines" in c.value]
    acc_before = next(f for t, f in figures(at).items() if "test accuracy" in t)
    at.selectbox(key="cmp_curves_ds").set_value("fashion_mnist").run()
    assert not at.exception
    after = [c.value for c in at.caption if "runs. Thin lines" in c.value]
    assert before[0].startswith("MNIST") and after[0].startswith("Fashion-MNIST")
    acc_after = next(f for t, f in figures(at).items() if "test accuracy" in t)
    assert acc_after["data"][-1]["y"] != acc_before["data"][-1]["y"]  # fixture: Fashion-MNIST errors are higher


def test_small_multiples_quantity_and_smoothing(page_env):
    at = run_page()
    at.radio(key="cmp_sm_metric").set_value("test_acc").run()
    sm = next(f for t, f in figures(at).items() if "per method" in t)
    assert "periodic test accuracy" in sm["layout"]["title"]["text"]
    titles = [a["text"] for a in sm["layout"]["annotations"]]
    assert titles == [method_title(m) for m in ("rim", "parallel_lstm", "entnet", "rmc", "indrnn")]
    at.slider(key="cmp_smoothing").set_value(0.0).run()
    loss = next(f for t, f in figures(at).items() if t.endswith("training loss"))
    assert "EMA" not in loss["layout"]["title"]["text"]


def test_schedule_toggle_switches_results(page_env):
    at = run_page()
    assert any("60 iterations" in c.value and "Adam lr 0.002, cosine" in c.value for c in at.caption)
    at.radio(key="cmp_schedule").set_value("paper").run()
    assert any("40 iterations" in c.value and "SGD lr 0.1" in c.value for c in at.caption)
    at.radio(key="cmp_schedule").set_value("unequal_init/long").run()
    assert not at.exception
    assert any("80 iterations" in c.value and "seeds 0, 1 " in c.value for c in at.caption)
    open_tab(at, "Runs")
    runs = next(d.value for d in at.dataframe if "status" in d.value.columns)
    assert len(runs) == 2 * 5 * 2


def test_error_bars_clean_and_noisy(page_env):
    at = open_tab(run_page(), "Final errors over seeds")
    err = next(f for t, f in figures(at).items() if t.startswith("Final"))
    assert "clean" in err["layout"]["yaxis"]["title"]["text"]
    at.radio(key="cmp_err_metric").set_value("noisy_test_error").run()
    err = next(f for t, f in figures(at).items() if t.startswith("Final"))
    assert "noisy" in err["layout"]["yaxis"]["title"]["text"]
    # 2 data sets x 5 methods x (seed dots + mean), and the collapsed MNIST IndRNN run as a cross
    assert len(err["data"]) == 2 * 5 * 2 + 1


def test_no_results_says_how_to_produce_them(empty_env):
    at = run_page()
    assert not at.exception and not at.error
    assert any("python -m core.reproduce run" in i.value for i in at.info)


def test_runs_without_summary_still_show_curves_and_explain(page_env, tmp_path, monkeypatch):
    res = tmp_path / "results"
    shutil.copytree(page_env["results"] / "paper", res / "paper")
    (res / "paper" / "summary.json").unlink()
    monkeypatch.setenv("RIMSCOPE_RESULTS_DIR", str(res))
    at = run_page()
    assert not at.exception and not at.error
    assert any("python -m core.reproduce tables" in w.value for w in at.warning)
    assert len(figures(at)) == 3  # curves only
    assert all(s.key != "cmp_schedule" for s in at.radio)  # one schedule: no toggle


def test_malformed_summary_is_reported_not_raised(page_env, tmp_path, monkeypatch):
    res = tmp_path / "results"
    shutil.copytree(page_env["results"] / "paper", res / "paper")
    (res / "paper" / "summary.json").write_text("{ this is not json")
    bad = res / "paper" / "runs" / "mnist" / "rim_s0.json"
    bad.write_text("[1, 2")  # a broken run file is skipped
    monkeypatch.setenv("RIMSCOPE_RESULTS_DIR", str(res))
    at = run_page()
    assert not at.exception and not at.error
    assert any("missing or unreadable" in w.value for w in at.warning)


def test_png_is_made_on_request_then_downloads_at_once(page_env, monkeypatch):
    import pages.ui.export as export

    made = []
    monkeypatch.setattr(export, "png_export_ready", lambda: True)
    monkeypatch.setattr(export, "_figure_png", lambda fig_json, w, h: made.append((w, h)) or b"\x89PNG fake")
    at = run_page()
    downloads = lambda: [b.label for b in at.get("download_button")]  # noqa: E731
    # the curves tab's three figures
    assert [b.label for b in at.button].count("🖼 Make PNG") == 3 and "⬇ PNG" not in downloads() and not made
    at.button(key="cmp_dl_loss_png_make").click().run()
    assert not at.exception
    assert len(made) == 1 and made[0][0] == 1100  # rendered once, for that figure only
    assert downloads().count("⬇ PNG") == 1 and [b.label for b in at.button].count("🖼 Make PNG") == 2
    at.run()  # any later rerun: the PNG is kept, not rendered again
    assert len(made) == 1 and downloads().count("⬇ PNG") == 1
    at.slider(key="cmp_smoothing").set_value(0.0).run()  # the loss figure changed: its PNG is stale
    assert downloads().count("⬇ PNG") == 0 and [b.label for b in at.button].count("🖼 Make PNG") == 3


def test_png_export_failure_is_a_message(page_env, monkeypatch):
    import pages.ui.export as export

    def broken(*_):
        raise RuntimeError("no browser")

    monkeypatch.setattr(export, "png_export_ready", lambda: True)
    monkeypatch.setattr(export, "_figure_png", broken)
    at = run_page()
    at.button(key="cmp_dl_acc_png_make").click().run()
    assert not at.exception
    assert any("PNG export failed (RuntimeError); use HTML." in c.value for c in at.caption)
    assert "⬇ PNG" not in [b.label for b in at.get("download_button")]


def test_error_bars_show_the_five_methods_not_the_variants(page_env, tmp_path, monkeypatch):
    res = tmp_path / "results"
    shutil.copytree(page_env["results"] / "paper", res / "paper")
    summary = json.loads((res / "paper" / "summary.json").read_text())
    summary["runs"].append({**summary["runs"][0], "model": "rim_random", "seed": 0})
    (res / "paper" / "summary.json").write_text(json.dumps(summary))
    monkeypatch.setenv("RIMSCOPE_RESULTS_DIR", str(res))
    at = open_tab(run_page(), "Final errors over seeds")
    assert not at.exception
    err = next(f for t, f in figures(at).items() if t.startswith("Final"))
    names = {t.get("name") for t in err["data"]}
    assert "rim_random" not in names and method_title("rim") in names
    assert any("variants are compared in their tables" in c.value for c in at.caption)


def test_converged_default_shows_health_counts_floors_and_left_out_runs(page_env):
    """The converged fixture has one collapsed run (MNIST IndRNN seed 2): counted, left out of
    every mean, listed under the tables; every table and the error chart show the floors."""
    at = run_page()
    assert not at.exception and not at.error
    assert any("29 of 30 runs healthy" in c.value for c in at.caption)
    seen = every_tab(at)
    frames = seen.frames
    spread = next(f for f in frames if "healthy" in f.columns and "clean seeds" in f.columns)
    indrnn = spread[(spread["data set"] == "MNIST") & (spread["method"] == method_title("indrnn"))].iloc[0]
    assert indrnn["healthy"] == "2 of 3 healthy" and indrnn["clean seeds"] == 2
    assert indrnn["clean error mean (%)"] < 10  # the collapsed 90 % is not averaged in
    assert indrnn["majority-class error (%)"] == 88.65 and indrnn["chance error (%)"] == 90.0
    t3 = next(f for f in frames if "gap to RMC (runner-up fixed in advance), ours (points) [Holm-step interval]"
              in f.columns)
    assert t3.loc[0, "IndRNN error (%)"].endswith("(2 of 3 healthy)")
    for f in frames:
        if "floors: chance / majority (%)" in f.columns:
            assert list(f["floors: chance / majority (%)"]) == ["90.00 / 88.65", "90.00 / 90.00"]
    assert sum("floors: chance / majority (%)" in f.columns for f in frames) == 3  # tables 2, 3 and 4
    assert all(f["p raw / Holm"].str.startswith("p ").all() for f in frames if "p raw / Holm" in f.columns)
    left_out = [label for label in seen.expanders if "unhealthy run" in label]
    assert left_out and all(label == "1 unhealthy run left out of the means" for label in left_out)
    shown = [f for f in frames if "claim" in f.columns]
    # first the table README and REPRODUCTION.md show (core.report.claims.glance_frame), then its detail
    assert list(shown[0].columns) == ["claim", "paper", "long grid", CONVERGED_TITLE, "paper protocol"]
    assert shown[0][CONVERGED_TITLE].str.match("^([✅❌❔]|not measured)").all() and len(shown[0]) >= 12
    assert shown[0]["long grid"].str.match("^([✅❌❔]|not measured)").all()
    claims = shown[1]
    assert list(claims.columns) == [t for _, t in CLAIM_COLUMNS]  # the one claims table (core.report.claims)
    assert claims["verdict"].str.match("^[✅❌❔]").all() and len(claims) == len(shown[0])
    assert "The paper's claims vs ours" in seen.subheaders
    err = next(f for t, f in seen.figs.items() if t.startswith("Final"))
    dashed = [s["y0"] for s in err["layout"]["shapes"] if s.get("line", {}).get("dash") == "dash"]
    assert dashed == pytest.approx([90.0, 88.65, 90.0])  # MNIST: chance and majority; Fashion-MNIST: both 90


def test_compare_shows_the_handwriting_generalisation_table_when_the_grid_has_one(page_env, tmp_path, monkeypatch):
    """The handwriting generalisation table (``python -m core.studies.handwriting generalisation``) on Compare,
    from the grid's ``handwriting.csv``, with intervals, Holm p-values and the one rule's verdict."""
    import numpy as np
    import pandas as pd

    from core.studies.handwriting.external import summarise

    results = tmp_path / "results"
    shutil.copytree(page_env["results"], results)
    monkeypatch.setenv("RIMSCOPE_RESULTS_DIR", str(results))
    at = open_tab(run_page(), "Paper's claims vs ours")
    assert "The paper's claims vs ours" in [s.value for s in at.subheader]
    assert "Beyond the paper: other people's handwriting" not in [s.value for s in at.subheader]  # no CSV: no table

    rng = np.random.default_rng(0)
    per_seed = pd.DataFrame([{"method": m, "seed": s, "semeion": base + rng.normal(0, 0.005),
                              "optdigits": base + 0.05 + rng.normal(0, 0.005)}
                             for m, base in (("rim", 0.88), ("parallel_lstm", 0.86), ("indrnn", 0.75))
                             for s in range(5)])
    summarise(per_seed, ["semeion", "optdigits"], ["rim", "parallel_lstm", "indrnn"]).to_csv(
        results / "converged" / "handwriting.csv", index=False)
    at = open_tab(run_page(), "Paper's claims vs ours")
    assert not at.exception and not at.error
    assert "Beyond the paper: other people's handwriting" in [s.value for s in at.subheader]
    table = next(d.value for d in at.dataframe if "accuracy % (mean ± sd)" in d.value.columns)
    assert list(table["set"]) == ["Semeion (odd half)"] * 3 + ["UCI optdigits (odd half)"] * 3
    assert list(table["method"])[:3] == [method_title("rim"), method_title("parallel_lstm"), method_title("indrnn")]
    assert list(table["verdict"])[:3] == ["(reference)", "✅ holds", "✅ holds"]
    assert table["RIM − method, points [Holm-step interval]"].iloc[2].startswith("+13.")  # 88 - 75, in points
    assert "Other handwriting as CSV (all numbers)" in " ".join(b.label for b in at.get("download_button"))
    (results / "converged" / "handwriting.csv").write_text("a,b\n1,2\n")  # someone else's CSV: said, not drawn
    at = open_tab(run_page(), "Paper's claims vs ours")
    assert not at.exception
    assert any("is not a generalisation table" in w.value for w in at.warning)


def test_the_budget_check_is_under_the_claims_when_the_longer_grid_has_written_it(page_env, tmp_path, monkeypatch):
    """Whether each verdict of Tables 2-3 stays with three times the budget: under the claims of
    the 4,000-iteration grid, from ``results/budget/check.csv`` (what ``python -m core.reproduce
    tables --out results/budget`` writes), the same cells and sentence as REPRODUCTION."""
    import pandas as pd

    from core.report import budget

    results = tmp_path / "results"
    shutil.copytree(page_env["results"], results)
    monkeypatch.setenv("RIMSCOPE_RESULTS_DIR", str(results))
    title = "Are 4,000 iterations enough? The verdicts with three times the budget (12,000 iterations)"
    at = open_tab(run_page(), "Paper's claims vs ours")
    assert not at.exception and title not in [e.label for e in at.expander]  # no check written: nothing shown
    rows = [{"seeds": "0-2", "dataset": ds, "comparison": title_, "other": other, "table_verdict": "holds",
             "at_4000": "cannot tell at this number of seeds", "gap_4000": "+0.22 [-0.36, +0.80] (98.75 %), p 0.09 / 0.18",
             "at_12000": verdict, "gap_12000": "+0.5 [+0.1, +0.9] (98.75 %), p 0.001 / 0.004",
             "stays": "stays" if verdict.startswith("cannot") else "changes", "exists": ""}
            for ds, verdict in (("mnist", "cannot tell at this number of seeds"), ("fashion_mnist", "holds"))
            for other, title_ in (("parallel_lstm", "Table 2: RIM vs parallel LSTMs"), ("entnet", "Table 3: RIM vs EntNet"))]
    (results / "budget").mkdir()
    pd.DataFrame(rows).to_csv(results / "budget" / budget.CHECK_FILE, index=False)
    at = open_tab(run_page(), "Paper's claims vs ours")
    assert not at.exception and not at.error
    assert title in [e.label for e in at.expander]
    table = next(d.value for d in at.dataframe if "stays?" in d.value.columns)
    assert list(table["data set"]) == ["MNIST", "MNIST", "Fashion-MNIST", "Fashion-MNIST"]
    assert list(table["stays?"]) == ["stays", "stays", "changes", "changes"]
    assert list(table.columns[:6]) == ["data set", "comparison", "verdict, 4,000 (all seeds)", "4,000", "12,000",
                                       "stays?"]  # the verdicts before the long gap cells
    text = " ".join(c.value for c in at.caption)
    assert ("The check decides: of the 4 verdicts of Tables 2-3 re-checked (seeds 0-2 at both budgets), 2 stay "
            "(2 cannot tell) and 2 change from 4,000 to 12,000 iterations (Fashion-MNIST, RIM vs parallel LSTMs: "
            "cannot tell → holds; Fashion-MNIST, RIM vs EntNet: cannot tell → holds).") in text
    assert "MNIST 90.00 / 88.65" in text  # the floors beside the table
    at.session_state["cmp_schedule"] = "paper"  # the paper protocol's claims: not its check
    at = open_tab(at, "Paper's claims vs ours")
    assert title not in [e.label for e in at.expander]


def test_compare_opens_with_the_answer_and_the_gaps_figure(page_env):
    """The answer in plain words (the one README shows) and RIM's gap to each method, from the same results."""
    from core.report.answer import plain_answer

    at = run_page()
    assert not at.exception and not at.error
    said = [m.value for m in at.markdown if m.value.startswith("**The answer.**")]
    assert said == [f"**The answer.** {plain_answer(page_env['results'])}"]
    from core.report.answer import budget_note

    note, captions = budget_note(page_env["results"]), [c.value for c in at.caption]  # README's note under it
    assert note in captions if note else not any(c.startswith("Why the longest budget") for c in captions)
    assert "RIM's gap to each method, every data set and protocol" in [e.label for e in at.expander]
    from core.report.plots.comparison import GAPS_TITLE

    assert GAPS_TITLE not in figures(at, gaps=True)  # closed: not drawn, so no other run of the page pays for it
    at.session_state["cmp_gaps_open"] = True
    at.run()
    gaps = figures(at, gaps=True)[GAPS_TITLE]
    assert {t["name"] for t in gaps["data"]} >= {"paper's figure", "Adam, 4,000 iterations", "paper protocol"}


def test_compare_warns_when_the_tables_changed_after_the_answer_was_written(page_env, tmp_path, monkeypatch):
    """The answer, note and gaps are stored files; tables regenerated after them (a grid's new seeds,
    `tables` without `docs`) would put two sets of numbers on one page: the page says so."""
    from core.report.answer import write_answer
    from core.report.sources import SOURCES_FILE

    res = tmp_path / "results"
    shutil.copytree(page_env["results"], res, symlinks=True)
    write_answer(res)
    monkeypatch.setenv("RIMSCOPE_RESULTS_DIR", str(res))
    at = run_page()
    assert not at.exception and not at.warning  # written beside these tables: nothing to say
    table2 = res / "converged" / "table2.csv"
    table2.write_text(table2.read_text() + "\n")
    at = run_page()
    said = [w.value for w in at.warning]
    assert len(said) == 1 and "`results/converged/table2.csv`" in said[0] and "core.reproduce docs" in said[0]
    (res / SOURCES_FILE).write_text("not json")
    assert any(SOURCES_FILE in w.value for w in run_page().warning)  # unreadable: said, not raised


def test_compare_without_results_says_so_at_the_answer(empty_env):
    at = run_page()
    assert not at.exception
    assert any(m.value.startswith("**The answer.** No results yet") for m in at.markdown)


def test_the_verdicts_by_budget_stand_under_the_claims(page_env):
    """Each verdict of Tables 2-3 at every Adam budget with runs, from the answer's numbers."""
    from core.report.answer import gap_rows, verdict_by_budget

    at = open_tab(run_page(), "Paper's claims vs ours")
    assert not at.exception and not at.error
    assert "Verdicts by training budget: 4,000 iterations and longer" in [e.label for e in at.expander]
    table = next(d.value for d in at.dataframe if "RIM vs" in d.value.columns)
    expected = verdict_by_budget(gap_rows(page_env["results"]))
    assert table.reset_index(drop=True).equals(expected.reset_index(drop=True))
    assert "Adam, 4,000 iterations" in table.columns


def test_the_longer_budgets_are_experiments_of_their_own(page_env, tmp_path, monkeypatch):
    """results/budget (12,000 iterations) and results/budget-24k are offered beside the others and open."""
    results = tmp_path / "results"
    shutil.copytree(page_env["results"], results)
    shutil.copytree(page_env["results"] / "converged", results / "budget-24k")
    monkeypatch.setenv("RIMSCOPE_RESULTS_DIR", str(results))
    from pages.ui.cache import RESULT_FOLDERS

    at = run_page()
    options = at.radio(key="cmp_schedule").options
    assert RESULT_FOLDERS["budget-24k"] in options and RESULT_FOLDERS["budget"] not in options  # only what has runs
    at.radio(key="cmp_schedule").set_value("budget-24k").run()
    assert not at.exception and not at.error
    for label in TABS:
        open_tab(at, label)
        assert not at.exception, label


def test_the_long_grids_claims_tab_gives_its_verdicts_beside_the_short_budgets(page_env, tmp_path, monkeypatch):
    """On the long grid (the default experiment where it is shipped) the claims tab opens with each
    verdict at 4,000 iterations beside the long grid's, and says where the one-row-per-claim table is."""
    from core.report.answer import gap_rows, verdict_by_budget

    results = tmp_path / "results"
    shutil.copytree(page_env["results"], results)
    shutil.copytree(page_env["results"] / "converged", results / "long")
    monkeypatch.setenv("RIMSCOPE_RESULTS_DIR", str(results))
    at = run_page()
    at.radio(key="cmp_schedule").set_value("long").run()
    at = open_tab(at, "Paper's claims vs ours")
    assert not at.exception and not at.error
    assert "The paper's claims by training budget" in [s.value for s in at.subheader]
    assert "The paper's claims vs ours" not in [s.value for s in at.subheader]
    box = next(e for e in at.expander if e.label.startswith("Verdicts by training budget"))
    assert box.proto.expanded
    table = next(d.value for d in at.dataframe if "RIM vs" in d.value.columns)
    assert table.reset_index(drop=True).equals(verdict_by_budget(gap_rows(results)).reset_index(drop=True))
    assert any("pick \"Adam, cosine, 4,000 iterations\" above" in c.value for c in at.caption)


def test_the_control_cells_still_training_are_named_at_the_controls(page_env, tmp_path, monkeypatch):
    """A long-grid control cell with fewer than its five seeds is left out of the tables and named at them."""
    results = tmp_path / "results"
    shutil.copytree(page_env["results"], results)
    monkeypatch.setenv("RIMSCOPE_RESULTS_DIR", str(results))
    path = results / "converged" / "summary.json"
    summary = json.loads(path.read_text())
    summary["runs"] += [{"dataset": "mnist", "model": "rim_random", "seed": s, "protocol": "converged-12k",
                         "status": "completed", "test_error": 0.015} for s in (0, 1)]
    path.write_text(json.dumps(summary))
    at = open_tab(run_page(), "Paper's claims vs ours")
    assert not at.exception and not at.error
    captions = [c.value for c in at.caption]
    note = "Still training, left out of the tables until all 5 seeds are in: MNIST RIM, random selection (2 of 5)."
    assert captions.count(note) == 2  # at the controls and at the ablations, whose random-selection row it also leaves out
    # the controls' caption names the controls its table holds (core.report.controls.controls_named): none here
    assert not summary["tables"].get("controls")
    said = next(c for c in captions if c.startswith("Not in the paper: ") and "gap = control" in c)
    assert said.startswith("Not in the paper: none yet; gap = control − RIM")
    assert "six parallel LSTMs of 32 and RIM's ablations" not in said


def test_the_controls_family_with_planned_tests_not_in_yet_says_so(page_env, tmp_path, monkeypatch):
    """A controls table whose Holm family counts planned tests still training says so at the table,
    with what counting only the tests in would change."""
    from core.report.controls import counted_in_only, pending_note

    results = tmp_path / "results"
    shutil.copytree(page_env["results"], results)
    monkeypatch.setenv("RIMSCOPE_RESULTS_DIR", str(results))
    path = results / "converged" / "summary.json"
    summary = json.loads(path.read_text())
    rows = json.loads((Path(__file__).resolve().parents[2] / "results" / "long" / "summary.json").read_text())
    rows = rows["tables"]["controls"]  # the shipped long grid's controls (their family has pending tests) ...
    for r in rows:  # ... or, once the grid is complete, the same table with 8 more planned
        r.update(holm_m=r["holm_m"] + 8 * (not r.get("holm_pending")), holm_pending=r.get("holm_pending") or 8)
    summary["tables"]["controls"] = rows
    path.write_text(json.dumps(summary))
    at = open_tab(run_page(), "Paper's claims vs ours")
    assert not at.exception and not at.error
    note = pending_note(rows)
    assert note.startswith("One Holm family: the ") and f"{rows[0]['holm_pending']} of them planned and not run yet" in note
    assert "counting only the" in counted_in_only(rows)
    assert f"{note} {counted_in_only(rows)}" in [c.value for c in at.caption]
