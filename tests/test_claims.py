"""The claims table, interval-verdict agreement, the controls, the budget check and the generated
document blocks (core.report.claims / stats / budget / docs)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from core.report import docs, stats
from core.report.claims import CLAIM_COLUMNS, claims_frame, claims_markdown
from core.report.comparisons import Cells, table2
from core.report.controls import controls_table

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "results"

NEUTRAL = ("cannot tell", "no measurable", "equivalence not shown")
NEGATIVE = ("does not hold", "the control better", "removing it helps", "forget bias 0 lowers",
            "the other method reads", "not equivalent")


def _kind(verdict: str) -> str:
    v = verdict.strip().lower()
    if v.startswith(NEUTRAL):
        return "neutral"
    return "negative" if v.startswith(NEGATIVE) else "positive"


def contradictions(df: pd.DataFrame) -> list[str]:
    """Rows where a printed interval and its verdict disagree (every ``X_verdict`` with ``X_ci_low``/
    ``X_ci_high``; ``verdict`` with ``ci_low``/``ci_high``)."""
    bad = []
    for col in df.columns:
        if not col.endswith("verdict"):
            continue
        pre = col[: -len("verdict")]
        lo, hi = f"{pre}ci_low", f"{pre}ci_high"
        if lo not in df.columns or hi not in df.columns:
            continue
        for i, r in df.iterrows():
            v = r[col]
            if not isinstance(v, str) or not v:
                continue
            a, b = float(r[lo]), float(r[hi])
            if math.isnan(a) or math.isnan(b):
                if _kind(v) != "neutral":
                    bad.append(f"row {i}: {col} {v!r} without an interval")
                continue
            if pre.startswith("equiv"):
                m = float(r["margin"])
                inside = -m < a and b < m
                if inside != (_kind(v) == "positive"):
                    bad.append(f"row {i}: {col} {v!r} with interval [{a}, {b}] and margin {m}")
                continue
            want = "positive" if a > 0 else "negative" if b < 0 else "neutral"
            if _kind(v) != want:
                bad.append(f"row {i}: {col} {v!r} beside [{a:+.4f}, {b:+.4f}]")
    return bad


def test_every_results_csv_prints_intervals_that_agree_with_their_verdicts():
    csvs = [p for p in RESULTS.rglob("*.csv") if "runs" not in p.parent.parts[len(RESULTS.parts):]]
    checked = 0
    problems = []
    for p in csvs:
        try:
            df = pd.read_csv(p)
        except (pd.errors.EmptyDataError, pd.errors.ParserError):
            continue
        if any(c.endswith("verdict") for c in df.columns):
            checked += 1
        problems += [f"{p.relative_to(REPO)} {b}" for b in contradictions(df)]
    assert checked >= 10
    assert not problems, "\n".join(problems)


def test_the_walker_catches_a_contradiction():
    df = pd.DataFrame([{"gap": -0.39, "gap_ci_low": -0.68, "gap_ci_high": -0.10,
                        "gap_verdict": "cannot tell at this number of seeds"}])
    assert contradictions(df)


@pytest.mark.parametrize("seed", range(20))
def test_holm_step_interval_excludes_zero_exactly_when_the_verdict_rejects(seed):
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(rng.integers(2, 9)):
        a, b = rng.normal(rng.normal(0, 0.6), 1, 5), rng.normal(0, 1, 5)
        d, _, _, p = stats.welch_test(a, b)
        se, df = stats.welch_se_df(a, b)
        rows.append((d, se, df, p))
    ps = [r[3] for r in rows]
    for (d, se, df, _), q, lev in zip(rows, stats.holm(ps), stats.holm_levels(ps), strict=True):
        lo, hi = stats.t_interval(d, se, df, lev)
        assert (lo > 0 or hi < 0) == (q < stats.ALPHA)
        assert stats.verdict(d, q) != stats.CANNOT_TELL or lo <= 0 <= hi


def test_holm_levels_are_the_steps_levels():
    lev = stats.holm_levels([0.001, 0.04, 0.01, float("nan")])
    # ranks 0, 2, 1 of 3 finite tests; rank 0 rejected (0.003 < 0.05), rank 1 (0.02 < 0.05/2) too,
    # rank 2 (0.04 > 0.05): stops there
    assert lev[0] == pytest.approx(1 - 0.05 / 3) and lev[2] == pytest.approx(1 - 0.05 / 2)
    assert lev[1] == pytest.approx(1 - 0.05 / 1) and math.isnan(lev[3])


def test_tost_decides_equivalence_within_the_margin():
    assert stats.tost(0.01, 0.05, 8, 0.35) < 0.01
    assert stats.tost(0.30, 0.05, 8, 0.35) > 0.05
    assert math.isnan(stats.tost(0.1, math.nan, 8, 0.35))


def _rows(spec):
    out = []
    for model, errs in spec.items():
        for s, e in enumerate(errs):
            out.append({"dataset": "mnist", "model": model, "seed": s, "status": "completed", "health": "healthy",
                        "test_error": e / 100, "parameters": 1000})
    return out


def test_controls_table_reuses_table2_for_the_parallel_lstms_and_counts_seeds():
    rows = _rows({"rim": [1.5, 1.6, 1.55, 1.5, 1.6], "parallel_lstm": [1.8, 1.75, 1.78, 1.76, 1.74],
                  "rim_random": [1.52, 1.58, 1.56], "parallel_lstm_h81": [1.3]})
    c = Cells(rows)
    t2 = table2(c, ["mnist"])
    ctl = {r["control"]: r for r in controls_table(c, ["mnist"], t2)}
    assert ctl["parallel_lstm"]["gap_p_holm"] == t2[0]["gap_p_holm"]  # one comparison, one p
    assert ctl["parallel_lstm"]["gap_family"] == "Table 2"
    assert ctl["parallel_lstm"]["gap_verdict"] == "RIM better"
    assert ctl["rim_random"]["seeds"] == 3 and ctl["parallel_lstm_h81"]["seeds"] == 1
    assert ctl["parallel_lstm_h81"]["gap_verdict"].startswith("cannot tell (fewer")
    assert ctl["rim_random"]["margin"] == pytest.approx(0.35)
    assert not contradictions(pd.DataFrame(list(ctl.values())))


def test_claims_frame_and_markdown_share_one_column_spec():
    rows = [{"claim": "a | b", "paper": "1.39", "converged": "x", "paper_protocol": "y", "verdict": "✅ holds"}]
    df = claims_frame(rows)
    assert list(df.columns) == [t for _, t in CLAIM_COLUMNS]
    md = claims_markdown(rows)
    assert md.splitlines()[0] == "| " + " | ".join(t for _, t in CLAIM_COLUMNS) + " |"
    assert "a \\| b" in md and "Floors" in md and "Holm step" in md


def test_docs_blocks_rewrite_check_and_refuse_an_unknown_name(tmp_path):
    doc = tmp_path / "doc.md"
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "note.md").write_text("included text\n")
    doc.write_text("# x\n<!-- generated:include:results/note.md -->\nold\n<!-- /generated:include:results/note.md -->\n"
                   "kept\n")
    changed, errors = docs.run(tmp_path, ["doc.md"], check=True)
    assert changed and not errors
    docs.run(tmp_path, ["doc.md"])
    assert "included text" in doc.read_text() and "kept" in doc.read_text() and "old" not in doc.read_text()
    assert docs.run(tmp_path, ["doc.md"], check=True) == ([], [])
    doc.write_text("<!-- generated:nonsense -->\n<!-- /generated:nonsense -->\n")
    _, errors = docs.run(tmp_path, ["doc.md"])
    assert errors and "unknown generated block 'nonsense'" in errors[0] and "doc.md:1" in errors[0]
    doc.write_text("<!-- generated:include:../etc/passwd.md -->\n<!-- /generated:include:../etc/passwd.md -->\n")
    assert "only a Markdown file under results/" in docs.run(tmp_path, ["doc.md"])[1][0]
    doc.write_text("<!-- generated:include:results/later.md -->\n<!-- /generated:include:results/later.md -->\n")
    docs.run(tmp_path, ["doc.md"])
    assert "Not in results/ yet: `results/later.md`" in doc.read_text()


def test_every_block_name_renders_from_the_shipped_results(tmp_path):
    names = [n for n in docs.RENDERERS]
    doc = tmp_path / "all.md"
    doc.write_text("".join(f"<!-- generated:{n} -->\n<!-- /generated:{n} -->\n" for n in names))
    changed, errors = docs.run(REPO, [str(doc)], results="results")
    assert not errors and changed
    text = doc.read_text()
    assert "Floors (chance / majority-class error, %)" in text and "Holm step" in text
    assert docs.run(REPO, [str(doc)], check=True) == ([], [])


def test_repository_documents_are_up_to_date():
    changed, errors = docs.run(REPO, check=True)
    assert not errors, errors
    assert not changed, f"out of date: {changed} (run `python -m core.reproduce docs`)"


def _write_run(root: Path, grid: str, ds: str, model: str, seed: int, err: float, iterations: int,
               best: int | None = None, done: int | None = None) -> None:
    import json

    p = root / grid / "runs" / ds / f"{model}_s{seed}.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps({
        "dataset": ds, "model": model, "seed": seed, "status": "completed", "protocol": "converged",
        "metrics": {"test_error": err, "iterations_done": done or iterations, "best_iteration": best or iterations},
        "train_config": {"iterations": iterations}, "evals": {"iteration": [iterations // 2, done or iterations]},
        "history": {"loss": [2.5] + [1.0] * 10}}))


def test_budget_says_not_yet_run_with_what_exists_then_whether_each_verdict_stays(tmp_path):
    from core.report import budget

    rng = np.random.default_rng(1)
    for ds in ("mnist", "fashion_mnist"):
        for seed in range(3):
            for m, e in (("rim", 0.015), ("parallel_lstm", 0.030), ("entnet", 0.0152)):
                _write_run(tmp_path, "converged", ds, m, seed, e + rng.normal(0, 0.0005), 4000,
                           best=2000 if m == "rim" else None)
    _write_run(tmp_path, "budget", "mnist", "rim", 0, 0.014, 12000, best=8000, done=9500)
    rows = budget.budget_rows(tmp_path)
    assert len(rows) == 4 and all(r["at_12000"] == "not yet run" for r in rows)
    assert rows[0]["stays"] == "not yet run" and rows[0]["exists"] == "RIM seeds 0; Parallel LSTMs none"
    # the single run is described beside the 4,000-iteration run of its seed, never tested
    (same,) = budget.same_seed_rows(tmp_path)
    short = json.loads((tmp_path / "converged" / "runs" / "mnist" / "rim_s0.json").read_text())
    assert (same["dataset"], same["model"], same["seed"]) == ("mnist", "rim", 0)
    assert same["change"] == pytest.approx(100 * (0.014 - short["metrics"]["test_error"]))
    table = "\n".join(budget.same_seed_markdown(tmp_path))  # in results/budget/tables.md
    assert "| MNIST | RIM | 0 | " in table and "| 8,000 / 9,500 |" in table
    from core.grid.cli import main

    main(["tables", "--out", str(tmp_path / "budget")])  # python -m core.reproduce tables
    assert table in (tmp_path / "budget" / "tables.md").read_text()
    text = budget.budget_markdown(tmp_path)  # REPRODUCTION: the counts in one line, the table's place named
    assert "| MNIST | RIM | 0 | " not in text and "`results/budget/tables.md`" in text
    for part in (text, table):
        assert "1 of 1 have a lower test error with the longer budget" in part
        assert "1 of 1 stopped early under it" in part and "their best validation at iteration 8,000" in part
    assert "No verdict is checked yet" in text
    sentence = budget.budget_sentence(tmp_path)
    assert "1 of 1 single runs end with a lower test error than their seed's 4,000-iteration run" in sentence
    assert "and 1 of 1 have their best validation accuracy after iteration 4,000;" in sentence
    assert sentence.endswith("no verdict is checked yet (that needs seeds 0-2 of both methods).")
    for ds in ("mnist", "fashion_mnist"):
        for seed in range(3):
            for m, e in (("rim", 0.014), ("parallel_lstm", 0.029), ("entnet", 0.0141)):
                _write_run(tmp_path, "budget", ds, m, seed, e + rng.normal(0, 0.0005), 12000)
    rows = {(r["dataset"], r["other"]): r for r in budget.budget_rows(tmp_path)}
    assert rows[("mnist", "parallel_lstm")]["stays"] == "stays"
    assert rows[("mnist", "parallel_lstm")]["at_12000"] == "holds"
    assert "The check decides: of the 4 verdicts of Tables 2-3 re-checked (seeds 0-2 at both budgets), 4 stay " \
        "(2 holds, 2 cannot tell)." in budget.budget_markdown(tmp_path)
    assert budget.budget_sentence(tmp_path).endswith("(seeds 0-2 at both budgets), 4 stay (2 holds, 2 cannot tell).")
    facts = budget.stopping_facts(tmp_path / "converged")
    assert facts["runs"] == 18 and facts["early_stops"] == 0 and facts["best_at_last"] == 12
    # a run past seed 2 brings the seeds 0-4 check (as many seeds as Tables 2-3), not yet run until complete
    for seed in (3, 4):
        for m, e in (("rim", 0.015), ("parallel_lstm", 0.030), ("entnet", 0.0152)):
            _write_run(tmp_path, "converged", "mnist", m, seed, e + rng.normal(0, 0.0005), 4000)
            _write_run(tmp_path, "converged", "fashion_mnist", m, seed, e + rng.normal(0, 0.0005), 4000)
    _write_run(tmp_path, "budget", "mnist", "rim", 3, 0.014, 12000)
    wide = [r for r in budget.budget_rows(tmp_path) if r["seeds"] == "0-4"]
    assert len(wide) == 4 and all(r["stays"] == "not yet run" for r in wide)
    assert "not yet run (RIM seeds 0, 1, 2, 3; Parallel LSTMs seeds 0, 1, 2)" in budget.budget_table(wide)
    # complete: MNIST's EntNet gets measurably worse than RIM with the longer budget, a changed verdict named
    for seed in (3, 4):
        for m, e in (("rim", 0.014), ("parallel_lstm", 0.029), ("entnet", 0.0141)):
            _write_run(tmp_path, "budget", "fashion_mnist", m, seed, e + rng.normal(0, 0.0005), 12000)
            _write_run(tmp_path, "budget", "mnist", m, seed, e + rng.normal(0, 0.0005), 12000)
    for seed in range(5):
        _write_run(tmp_path, "budget", "mnist", "entnet", seed, 0.03 + rng.normal(0, 0.0005), 12000)
    rows = {(r["seeds"], r["dataset"], r["other"]): r for r in budget.budget_rows(tmp_path)}
    assert rows[("0-4", "mnist", "entnet")]["stays"] == "changes"
    assert rows[("0-4", "mnist", "entnet")]["at_4000"].startswith("cannot tell")
    assert rows[("0-4", "mnist", "entnet")]["at_12000"] == "holds"
    assert budget.budget_sentence(tmp_path).endswith(
        "(seeds 0-4 at both budgets), 3 stay (2 holds, 1 cannot tell) and 1 changes from 4,000 to 12,000 iterations "
        "(MNIST, RIM vs EntNet: cannot tell → holds).")
    # REPRODUCTION shows the deciding seed set and one line for the other; results/budget/tables.md every set
    text = budget.budget_markdown(tmp_path)
    assert "| MNIST | Table 2: RIM vs parallel LSTMs |" in text and "| 0-2 |" not in text
    assert "The check decides: of the 4 verdicts of Tables 2-3 re-checked (seeds 0-4 at both budgets)" in text
    assert "the check at every seed set: `results/budget/tables.md`" in text
    main(["tables", "--out", str(tmp_path / "budget")])
    full = (tmp_path / "budget" / "tables.md").read_text()
    assert "| 0-4 | MNIST |" in full and "| 0-2 | MNIST |" in full and "| MNIST | EntNet | 4 | " in full


def test_shipped_results_facts_count_the_audited_numbers():
    from core.report import budget, facts

    s = budget.stopping_facts(RESULTS / "converged", ["mnist", "fashion_mnist", "cifar10"])
    assert s["runs"] >= 87 and s["early_stops"] == 0
    h = facts.health_facts(RESULTS / "paper")
    assert h["runs"] == 118 and h["classes"].get("diverged") == 12 and h["diverged_and_collapsed"] == 5
    text = facts.facts_markdown(RESULTS, REPO / "pretrained")
    assert "1,320-image subset" in text and "majority-class floor 82.31 %" in text


def test_readme_and_reproduction_show_one_answer_and_reproduction_the_claims_table():
    """README and REPRODUCTION.md carry the same generated answer; REPRODUCTION the claims table
    (Compare shows both from the same functions)."""
    import re

    from core.paths import ROOT

    def block(name, f):
        m = re.search(rf"<!-- generated:{name} -->\n(.*?)<!-- /generated:{name} -->", (ROOT / f).read_text(), re.S)
        return m and m.group(1)

    assert block("answer", "README.md") and block("answer", "README.md") == block("answer", "REPRODUCTION.md")
    assert "| claim | paper |" in block("glance", "REPRODUCTION.md")


def test_the_glance_shows_the_long_grids_verdict_of_each_claim_first():
    """The long grid (the default experiment) has its column beside the paper's figure: each claim's
    verdict from results/long's own claims, "not measured" where the long grid has none yet."""
    from core.report import fmt
    from core.report.claims import _control_claims, _handwriting_claim, claims_rows, glance_frame, grid

    rows = claims_rows(RESULTS)
    df = glance_frame(rows, RESULTS)
    assert list(df.columns)[:3] == ["claim", "paper", "long grid"]
    _, long = grid(RESULTS / "long")
    by_id = {r["claim_id"]: r for r in long["claims"]}
    assert len(by_id) >= 8
    by_id.update({r["claim_id"]: r for r in _control_claims(long.get("controls") or [])})  # its controls, as they land
    hw = _handwriting_claim(RESULTS / "long")  # the long grid's handwriting table (results/long/handwriting.csv)
    assert hw is not None
    by_id["handwriting"] = hw
    for row, cell in zip(rows, df["long grid"]):
        r = by_id.get(row["claim_id"])
        if r is None:
            assert cell == "not measured" and row["long_verdict"] is None
        else:
            assert row["long_verdict"] == r["verdict"] and cell.startswith(fmt.marked_verdict(r["verdict"]))


def test_controls_decision_names_every_measured_verdict_and_nothing_else():
    """The "why" sentence: a control measurably better than RIM, RIM measurably better, an
    equivalence by TOST, each with its sets; a "no measurable difference" decides nothing."""
    from core.report.controls import CONTROL_WORDS, EQUIV_WORDS, controls_decision

    def row(ds, control, verdict, equiv=EQUIV_WORDS[2]):
        return {"dataset": ds, "control": control, "gap_verdict": verdict, "equiv_verdict": equiv, "seeds": 5,
                "margin": 0.35}

    rows = [{"dataset": "mnist", "control": "rim", "seeds": 5},
            row("mnist", "parallel_lstm_h81", CONTROL_WORDS[1]), row("cifar10", "parallel_lstm_h60", CONTROL_WORDS[2]),
            row("cifar10", "parallel_lstm_6", CONTROL_WORDS[0]),
            row("mnist", "rim_random", CONTROL_WORDS[2], EQUIV_WORDS[0]),
            row("mnist", "rim_all", CONTROL_WORDS[2]), row("mnist", "parallel_lstm", CONTROL_WORDS[0])]
    text = controls_decision(rows)
    assert "parameter-matched parallel LSTMs beat RIM on MNIST" in text
    assert "CIFAR-10" in text and "RIM beats six parallel LSTMs of 32 units on CIFAR-10" in text
    assert "at random" in text and "less than the paper's claimed gap on MNIST" in text
    assert "all 6 active" not in text  # no measurable difference, not equivalent: nothing decided
    assert "RIM beats parallel LSTMs on" not in text  # Table 2's comparison is the answer's, not repeated
    assert "5 seeds each" in text
    # the parameter-matched baselines of different sets (4 x 81, 4 x 60) decide in one clause, sets in order
    both = [rows[0], row("cifar10", "parallel_lstm_h60", CONTROL_WORDS[1]), row("mnist", "parallel_lstm_h81", CONTROL_WORDS[1])]
    assert controls_decision(both).startswith("The controls of why decide: parameter-matched parallel LSTMs beat RIM on "
                                              "MNIST, CIFAR-10 (5 seeds each;")
    none = controls_decision([rows[0], row("mnist", "rim_all", CONTROL_WORDS[2])])
    assert none == "The controls of why decide nothing yet beyond the per-set verdicts above."


def test_the_shipped_budget_check_is_what_its_runs_give():
    """``results/budget/check.csv`` (what Compare shows) equals the check recomputed from the runs."""
    from core.report import budget

    stored = budget.read_check(RESULTS)
    assert stored, "results/budget/check.csv is missing: python -m core.reproduce tables --out results/budget"
    fresh = [{k: str(r.get(k, "")) for k in stored[0]} for r in budget.budget_rows(RESULTS)]
    assert stored == fresh


def test_a_control_claim_holds_only_where_rim_is_measurably_better_on_every_set():
    """``_control_claims`` from fixed controls rows (not from the code that makes them): RIM better
    on both sets holds; the control better on one does not hold; a set without a measurable
    difference leaves it open; the detail names each set's verdict, equivalence and seeds."""
    from core.report.claims import _control_claims
    from core.report.stats import CANNOT_TELL, HOLDS, NOT_HOLDS

    def row(ds, control, verdict, equiv="equivalence not shown"):
        return {"dataset": ds, "control": control, "gap_verdict": verdict, "equiv_verdict": equiv,
                "margin": 0.175 if ds == "mnist" else 0.5, "seeds": 5}

    rows = [row("mnist", "rim", ""), row("mnist", "parallel_lstm", "RIM better"),
            row("mnist", "rim_random", "RIM better"), row("fashion_mnist", "rim_random", "RIM better"),
            row("mnist", "parallel_lstm_h81", "the control better"),
            row("fashion_mnist", "parallel_lstm_h81", "RIM better"),
            row("mnist", "rim_all", "RIM better"),
            row("fashion_mnist", "rim_all", "no measurable difference at this number of seeds",
                "equivalent within the margin")]
    got = {r["claim_id"]: r for r in _control_claims(rows)}
    assert set(got) == {"control_rim_random", "control_parallel_lstm_h81", "control_rim_all"}  # not RIM, not Table 2's
    assert got["control_rim_random"]["verdict"] == HOLDS
    assert got["control_parallel_lstm_h81"]["verdict"].startswith(NOT_HOLDS)
    assert got["control_rim_all"]["verdict"] == CANNOT_TELL
    assert got["control_rim_all"]["detail"] == ("MNIST RIM better, 5 seeds; Fashion-MNIST no measurable difference, "
                                                "equivalent ±0.50, 5 seeds")


def test_each_family_note_names_the_verdicts_its_tables_give_when_nothing_is_shown():
    """A table's note says its interval excludes 0 exactly when the verdict is not one of the words
    it names: every undecided difference verdict in the shipped tables is one of the words its note
    in ``tables.md`` names (the controls' note also reads the equivalence intervals against the
    margin)."""
    import re

    from core.report.markdown import family_note
    from core.report.tables import UNDECIDED

    checked = 0
    for summary in sorted(RESULTS.rglob("summary.json")):
        s = json.loads(summary.read_text())
        text = (summary.parent / "tables.md").read_text()  # current: the test below
        for name, rows in (s.get("tables") or {}).items():
            if name == "claims" or not rows:
                continue
            if name == "controls":
                note = next(ln for ln in text[text.index("### The controls of why"):].splitlines()
                            if ln.startswith("One Holm-Bonferroni family: "))
                assert "lies within ± the margin exactly when its verdict is" in note
            else:
                note = family_note(rows, undecided=UNDECIDED.get(name, ("cannot tell",)))
                assert note in text, f"{summary.parent.name}/{name}: its note"
            quoted = re.search(r'excludes 0 exactly when (?:its|the) verdict is not ((?:"[^"]+"(?: or )?)+)', note)
            words = tuple(re.findall(r'"([^"]+)"', quoted.group(1)))
            for v in {v for r in rows for k, v in r.items() if k.endswith("verdict") and not k.startswith("equiv")
                      and isinstance(v, str) and _kind(v) == "neutral"}:
                assert v.startswith(words), f"{summary.parent.name}/{name}: {v!r} is not one of {words}"
                checked += 1
            if name == "controls":  # fewer than 2 seeds: "cannot tell (fewer than 2 seeds)", no interval
                assert stats.TOO_FEW.startswith(words), words
    assert checked >= 10


def test_every_shipped_tables_md_is_what_the_code_writes_from_its_runs():
    from core.report.tables import rendered_tables

    folders = sorted(p.parent for p in RESULTS.rglob("summary.json") if (p.parent / "runs").is_dir())
    assert len(folders) >= 8
    stale = []
    for folder in folders:
        summary = json.loads((folder / "summary.json").read_text())
        text, shipped = rendered_tables(folder, summary.get("include_unhealthy", False))[2], (folder / "tables.md").read_text()
        # the budget grid's check follows its tables (core.report.budget.write_check)
        if not (shipped.startswith(text) if folder.name == "budget" else shipped == text):
            stale.append(str(folder.relative_to(REPO)))
    assert not stale, f"out of date (python -m core.reproduce tables --out <folder>): {stale}"
