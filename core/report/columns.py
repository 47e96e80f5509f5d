"""One column spec per result table, rendered three ways: as a DataFrame for the pages
(``frame``), as Markdown for ``results/<grid>/tables.md`` (``markdown``) and as the compact
Markdown table of the generated blocks in README.md / REPRODUCTION.md (``compact_markdown``,
``core.report.docs``).

A column names its title on the page and in the document (None: not shown there) and its cell
from a row of ``summary.json``'s ``tables``; where the document writes a cell otherwise (the gap
with its p in one cell, the verdict without its mark, the paper's figure as a bare number), the
column says so with ``doc_cell``. ``compact`` says whether the column is in the compact table
(True: under its document title; a string: under that title) and ``compact_cell`` how it writes
the cell there where that differs from the document (the healthy seeds as a bare count, the
verdict with its mark). The page shows the verdicts first (``pages/compare.py``), so a column's
place is the document's order.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from .comparisons import NOISE_OTHERS
from .fmt import (
    CI,
    cell,
    dataset_title,
    display_name,
    floors_cell,
    gap,
    gap_test,
    health_count,
    marked_verdict,
    mean_sd_text,
    num,
    p_pair,
    params,
    raw_interval,
)
from .fmt import (
    margin as fmt_margin,
)
from .markdown import md_table
from .paper import BASELINES

Cell = Callable[[dict], object]


@dataclass(frozen=True)
class Column:
    page: str | None  # title on the page; None: not on the page
    doc: str | None  # title in tables.md; None: not in the document
    cell: Cell  # the cell of one row
    doc_cell: Cell | None = None  # the document's cell where it differs from the page's
    compact: str | bool = False  # in the compact table: True under the title ``doc``, a string under that title
    compact_cell: Cell | None = None  # the compact table's cell where it differs from the document's


def frame(columns: list[Column], rows: list[dict]) -> pd.DataFrame:
    """The page's table: one row per row, the columns with a page title."""
    return pd.DataFrame([{c.page: c.cell(r) for c in columns if c.page is not None} for r in rows])


def markdown(columns: list[Column], rows: list[dict]) -> list[str]:
    """The document's table: the columns with a document title, as Markdown lines."""
    shown = [c for c in columns if c.doc is not None]
    return md_table([c.doc for c in shown], [[(c.doc_cell or c.cell)(r) for c in shown] for r in rows])


def compact_columns(columns: list[Column]) -> list[Column]:
    """The columns of the compact table, in the spec's order."""
    return [c for c in columns if c.compact]


def compact_title(c: Column) -> str:
    if c.compact is True:
        if c.doc is None:
            raise ValueError(f"column {c.page!r}: compact=True names the document's title, and it has none")
        return c.doc
    return str(c.compact)


def compact_markdown(columns: list[Column], rows: list[dict]) -> list[str]:
    """The compact table of a generated block (``core.report.docs``), as Markdown lines."""
    shown = compact_columns(columns)
    return md_table([compact_title(c) for c in shown],
                    [[(c.compact_cell or c.doc_cell or c.cell)(r) for c in shown] for r in rows])


# --- cells shared by several tables ----------------------------------------------------------
def _ci(key: str, digits: int = 2) -> Cell:
    """The gap with its interval at the Holm step's level, no p."""
    return lambda r: gap(r.get(key), r.get(f"{key}_ci_low"), r.get(f"{key}_ci_high"), digits)


def _p(key: str) -> Cell:
    return lambda r: p_pair(r.get(f"{key}_p"), r.get(f"{key}_p_holm"))


def _test(key: str, digits: int = 2, paired: bool = False) -> Cell:
    """The gap, its interval, level and p in one cell."""
    return lambda r: gap_test(r, key, digits, paired=paired)


def _test_or(key: str, missing: str, digits: int = 2) -> Cell:
    return lambda r: gap_test(r, key, digits) if key in r else missing


def _marked(key: str) -> Cell:
    return lambda r: marked_verdict(r.get(key))


def _plain(key: str, missing: str | None = None) -> Cell:
    return (lambda r: r[key]) if missing is None else (lambda r: r.get(key, missing))


def _number(key: str) -> Cell:
    return lambda r: f"{r[key]:.2f}"


def seeds_cell(r: dict, name: str, digits: int = 2) -> str:
    """The compact tables' method cell: ``"1.55 ± 0.09 (5)"``, mean ± sd and the healthy seeds,
    ``"(3 of 5 healthy)"`` where runs were left out."""
    text = mean_sd_text(r.get(f"{name}_error"), r.get(f"{name}_sd"), digits)
    h, n = num(r.get(f"{name}_healthy")), num(r.get(f"{name}_runs"))
    if not math.isfinite(n) or n == 0:
        return text
    return f"{text} ({int(h)})" if h == n else f"{text} ({health_count(h, n)})"


def _seeds(name: str) -> Cell:
    return lambda r: seeds_cell(r, name)


DATASET = Column("data set", "data set", lambda r: dataset_title(r.get("dataset")), compact=True)
FLOORS = Column("floors: chance / majority (%)", "floors (chance / majority)", floors_cell, compact="floors (%)")
SEEDS = Column("seeds", None, lambda r: r.get("seeds"))


def _method(name: str, page: str, doc: str) -> Column:
    """A method's error; in the compact table with its healthy seeds as a bare count."""
    return Column(page, doc, lambda r: cell(r, name), compact=True, compact_cell=_seeds(name))


def _noisy_change(m: str, method_cell: Callable[[dict, str], str] = cell) -> Cell:
    """A method's noisy error and, in brackets, its change from the clean error (the page's cell;
    ``method_cell=seeds_cell``: the compact table's)."""
    def one(r: dict) -> str:
        c, ch = method_cell(r, f"{m}_noisy"), num(r.get(f"{m}_change"))
        return c + (f" ({ch:+.2f})" if not c.startswith("n/a") and not math.isnan(ch) else "")
    return one


def _noisy_change_doc(m: str) -> Cell:
    return lambda r: cell(r, f"{m}_noisy") + (f" ({r[f'{m}_change']:+.2f})" if not math.isnan(r[f"{m}_change"]) else "")


def _baseline_cell(b: str) -> Cell:
    return lambda r: cell(r, b) if f"{b}_runs" in r else "n/a"


def _paper_runner_up(r: dict) -> str:
    return f"{r['paper_gap']:.2f}" + (f" ({display_name(r['paper_runner_up'])})" if r["paper_runner_up"] else "")


def _posthoc_growth(r: dict) -> str:
    post = r["runner_up_posthoc"]
    return (f"{display_name(post)}: " + gap_test(r, "growth_gap_posthoc")) if post else "n/a"


def _abs(m: str) -> Cell:
    return lambda r: mean_sd_text(r.get(f"{m}_abs"), r.get(f"{m}_abs_sd"), 3)


def _abs_with_health(m: str) -> Cell:
    return lambda r: (mean_sd_text(r[f"{m}_abs"], r[f"{m}_abs_sd"], digits=3)
                      + f" ({health_count(r[f'{m}_healthy'], r[f'{m}_runs'])})")


def _ablation_error(r: dict) -> str:
    return mean_sd_text(r.get("error"), r.get("sd")) + (
        f" ({health_count(r.get('healthy'), r.get('runs'))})" if r.get("runs") else "")


def _reference(r: dict) -> bool:
    return r["control"] == "rim"


def _equivalence_interval(r: dict) -> str:
    """The controls' TOST: the margin, the interval at its level and its p (nothing for RIM itself)."""
    if _reference(r):
        return ""
    return (f"±{fmt_margin(r['margin'])}: " + gap(r["gap"], r.get("equiv_ci_low"), r.get("equiv_ci_high"))
            + (f", p {p_pair(r.get('equiv_p'), r.get('equiv_p_holm'))[2:]}" if math.isfinite(num(r.get("equiv_p"))) else ""))


def _equivalence(r: dict) -> str:
    return f"{marked_verdict(r.get('equiv_verdict'))} (±{fmt_margin(num(r.get('margin')))})" if "equiv_verdict" in r else ""


# --- the tables ------------------------------------------------------------------------------
TABLE2 = [
    DATASET,
    _method("rim", "RIM error (%)", "RIM"),
    _method("parallel_lstm", "parallel LSTMs error (%)", "parallel LSTMs"),
    Column(f"gap, ours (points) {CI}", None, _ci("gap")),
    Column("p raw / Holm", None, _p("gap")),
    Column(None, "gap (ours) [Holm-step interval] (level), p raw / Holm", _test("gap"),
           compact="gap [interval] (level), p raw / Holm"),
    Column("gap [unadjusted 95 %]", "unadjusted 95 % interval", lambda r: raw_interval(r, "gap")),
    Column("paired gap [unadjusted 95 %]", "paired gap [95 %]", _ci("gap_paired"), _test("gap", paired=True)),
    Column("gap, paper (points)", "paper's gap", lambda r: mean_sd_text(r.get("paper_gap")), _number("paper_gap"),
           compact="paper"),
    Column("ours vs the paper's gap", "ours vs the paper's gap", _plain("gap_magnitude", ""), compact="vs paper"),
    FLOORS,
    Column("verdict", "verdict", _marked("verdict"), _plain("verdict"), compact=True, compact_cell=_marked("verdict")),
    SEEDS,
]

TABLE3 = [
    DATASET,
    _method("rim", "RIM error (%)", "RIM"),
    Column(f"gap to RMC (runner-up fixed in advance), ours (points) {CI}", None, _ci("gap")),
    *[Column(f"{display_name(b)} error (%)", display_name(b), _baseline_cell(b), compact=True,
             compact_cell=_seeds(b)) for b in BASELINES],
    *[Column(f"gap {display_name(b)} {CI}, p raw / Holm", f"gap {display_name(b)} [Holm-step interval], p",
             _test(f"gap_{b}"), _test_or(f"gap_{b}", "n/a"),
             compact=f"gap {display_name(b)}" + (" (runner-up fixed in advance)" if b == "rmc" else "") + ", p")
      for b in BASELINES],
    Column("lowest-mean baseline (chosen after seeing the data)", "lowest-mean baseline (chosen after seeing the data)",
           lambda r: display_name(r.get("runner_up_posthoc")) if r.get("runner_up_posthoc") else "n/a"),
    Column("gap, paper (points)", "paper's gap to its runner-up", lambda r: mean_sd_text(r.get("paper_gap")),
           _paper_runner_up, compact="paper's gap", compact_cell=_number("paper_gap")),
    Column("gap to RMC vs the paper's gap", "gap to RMC vs the paper's gap", _plain("gap_magnitude", ""),
           compact="vs paper"),
    Column("runner-up, paper", None,
           lambda r: display_name(r.get("paper_runner_up")) if r.get("paper_runner_up") else "not stated"),
    Column("RIM lowest (means)", None, lambda r: "yes" if r.get("rim_lowest") else "no"),
    FLOORS,
    Column("verdict", "verdict", _marked("verdict"), lambda r: f"{r['verdict']} ({r['verdict_detail']})",
           compact="verdict: RIM lowest", compact_cell=lambda r: f"{marked_verdict(r['verdict'])} ({r['verdict_detail']})"),
    Column("per baseline", None, lambda r: r.get("verdict_detail")),
]

TABLE4 = [
    DATASET,
    *[Column(f"{display_name(m)} noisy error (%) (change)", f"{display_name(m)} noisy (change)", _noisy_change(m),
             _noisy_change_doc(m), compact=True, compact_cell=_noisy_change(m, seeds_cell))
      for m in ["rim"] + NOISE_OTHERS],
    *[Column(None, f"noisy gap {display_name(m)}, p", _test_or(f"noisy_gap_{m}", "n/a")) for m in NOISE_OTHERS],
    Column("verdict: RIM lowest under noise", "verdict: RIM lowest under noise", _marked("noisy_verdict"),
           lambda r: f"{r['noisy_verdict']} ({r['noisy_verdict_detail']})", compact=True,
           compact_cell=_marked("noisy_verdict")),
    Column("per method (noisy)", None, lambda r: r.get("noisy_verdict_detail")),
    Column(f"growth gap to RMC (runner-up fixed in advance) {CI}, p raw / Holm", "growth gap RMC (fixed runner-up), p",
           _test("growth_gap"), _test_or("growth_gap", "n/a"), compact=True),
    Column("verdict: RIM's error grows less than RMC's", "verdict (growth, RMC)", _marked("growth_gap_verdict"),
           _plain("growth_gap_verdict", "n/a"), compact="verdict", compact_cell=_marked("growth_gap_verdict")),
    Column("growth gap vs the paper's", "growth gap vs the paper's", _plain("growth_gap_magnitude", ""),
           compact="vs paper"),
    Column("runner-up chosen after seeing the data (lowest noisy error)", None,
           lambda r: display_name(r.get("runner_up_posthoc")) if r.get("runner_up_posthoc") else "n/a"),
    Column(f"growth gap to it {CI}, p raw / Holm", "growth gap, runner-up chosen after seeing the data, p",
           lambda r: gap_test(r, "growth_gap_posthoc") if r.get("runner_up_posthoc") else "", _posthoc_growth),
    Column(None, "verdict (growth, post hoc)", _plain("growth_gap_posthoc_verdict", "n/a")),
    Column(f"growth gap to the parallel LSTMs {CI}, p raw / Holm", "growth gap parallel LSTMs, p",
           _test("growth_gap_parallel_lstm"), _test_or("growth_gap_parallel_lstm", "n/a"), compact=True),
    Column("verdict: RIM's error grows less than the parallel LSTMs'", "verdict (growth, parallel LSTMs)",
           _marked("growth_gap_parallel_lstm_verdict"), _plain("growth_gap_parallel_lstm_verdict", "n/a"),
           compact="verdict", compact_cell=_marked("growth_gap_parallel_lstm_verdict")),
    Column("growth gap, paper", "paper's growth gap", lambda r: mean_sd_text(r.get("paper_growth_gap")),
           _number("paper_growth_gap"), compact=True),
    FLOORS,
]

FLUCTUATION = [
    DATASET,
    Column("RIM", "RIM", _abs("rim"), _abs_with_health("rim"), compact=True, compact_cell=_abs("rim")),
    Column("parallel LSTMs", "parallel LSTMs", _abs("parallel_lstm"), _abs_with_health("parallel_lstm"), compact=True,
           compact_cell=_abs("parallel_lstm")),
    Column(f"gap {CI}", "gap [Holm-step interval], p", _ci("gap_abs", 3), _test("gap_abs", 3), compact="gap, p"),
    Column("p raw / Holm", None, _p("gap_abs")),
    Column("gap [unadjusted 95 %]", None, lambda r: raw_interval(r, "gap_abs", 3)),
    Column("paired gap [unadjusted 95 %]", "paired gap [95 %]", _ci("gap_abs_paired", 3),
           _test("gap_abs", 3, paired=True)),
    Column("verdict", "verdict", _marked("gap_abs_verdict"), _plain("gap_abs_verdict"), compact=True,
           compact_cell=_marked("gap_abs_verdict")),
    Column("healthy runs (RIM, parallel)", None,
           lambda r: f"{health_count(r.get('rim_healthy'), r.get('rim_runs'))}, "
                     f"{health_count(r.get('parallel_lstm_healthy'), r.get('parallel_lstm_runs'))}"),
    Column(None, "RIM (relative, post hoc)", lambda r: mean_sd_text(r["rim_rel"], r["rim_rel_sd"], digits=3)),
    Column(None, "parallel LSTMs (relative, post hoc)",
           lambda r: mean_sd_text(r["parallel_lstm_rel"], r["parallel_lstm_rel_sd"], digits=3)),
    Column(f"gap (relative, chosen after seeing the data) {CI}", "gap (relative, post hoc), p", _ci("gap_rel", 3),
           _test("gap_rel", 3), compact=True),
    Column("p raw / Holm (relative)", None, _p("gap_rel")),
    Column("verdict (relative, post hoc)", "verdict (relative, post hoc)", _marked("gap_rel_verdict"),
           _plain("gap_rel_verdict"), compact="verdict (post hoc)", compact_cell=_marked("gap_rel_verdict")),
    SEEDS,
]

INIT_STUDY = [
    DATASET,
    Column("forget bias", "forget bias", lambda r: f"{num(r.get('forget_bias')):g}"),
    _method("rim", "RIM error (%)", "RIM"),
    _method("parallel_lstm", "parallel LSTMs error (%)", "parallel LSTMs"),
    Column(f"gap (parallel − RIM) {CI}", "gap [Holm-step interval], p", _ci("gap"), _test("gap")),
    Column("p raw / Holm", None, _p("gap")),
    Column(None, "paired gap [95 %]", _test("gap", paired=True)),
    Column("verdict: RIM better", "verdict", _marked("verdict"), _plain("verdict")),
    Column("effect of forget bias 0 on RIM", "effect on RIM, p", _test_or("rim_fb_effect", "")),
    Column("effect on parallel LSTMs", "effect on parallel LSTMs, p", _test_or("parallel_lstm_fb_effect", "")),
    Column(None, "floors (chance / majority)", floors_cell),
    SEEDS,
]

ABLATIONS = [
    DATASET,
    Column("variant", "variant", lambda r: display_name(r.get("variant"))),
    Column("what it is", "what it is", lambda r: r.get("what")),
    Column("test error (%)", "test error", _ablation_error,
           lambda r: mean_sd_text(r["error"], r["sd"]) + f" ({health_count(r['healthy'], r['runs'])})"),
    Column("noisy error (%)", "noisy error (growth)", lambda r: mean_sd_text(r.get("noisy_error"), r.get("noisy_sd")),
           lambda r: f"{mean_sd_text(r['noisy_error'], r['noisy_sd'])} ({r['growth']:+.2f})"),
    Column(f"gap to RIM {CI}, p raw / Holm", "gap to RIM [Holm-step interval], p", _test_or("gap", "reference"),
           _test_or("gap", "(reference)")),
    Column("verdict", "verdict", _plain("gap_verdict", "")),
    Column(f"growth gap {CI}, p raw / Holm", "growth gap, p", _test_or("growth_gap", "")),
    Column(None, "verdict (growth)", _plain("growth_gap_verdict", "")),
    FLOORS,
    SEEDS,
]

CONTROLS = [
    DATASET,
    Column("control", "control", lambda r: display_name(r.get("control")), compact=True),
    Column("parameters", "parameters", lambda r: params(r.get("parameters"))),
    Column("n seeds (healthy of runs)", "seeds",
           lambda r: f"{r.get('seeds')} ({health_count(r.get('healthy'), r.get('runs'))})",
           lambda r: f"{r['seeds']}" + ("" if r["healthy"] == r["runs"] else f" ({health_count(r['healthy'], r['runs'])})"),
           compact=True),
    Column("test error (%)", "test error", lambda r: mean_sd_text(r.get("error"), r.get("sd")), compact=True),
    Column(f"gap to RIM {CI}, p raw / Holm", "gap [interval] (level), p raw / Holm", _test_or("gap", "reference"),
           lambda r: "(reference)" if _reference(r) else gap_test(r, "gap"), compact="gap [Holm-step interval]",
           compact_cell=lambda r: "(reference)" if _reference(r) else _ci("gap")(r)),
    Column("verdict", "verdict", lambda r: marked_verdict(r.get("gap_verdict")) if "gap" in r else "",
           lambda r: "" if _reference(r) else marked_verdict(r.get("gap_verdict", "")), compact=True),
    Column(None, "margin: equivalence interval, p raw / Holm", _equivalence_interval,
           compact="margin: equivalence interval", compact_cell=lambda r: "" if _reference(r) else (
               f"±{fmt_margin(r['margin'])}: " + gap(r["gap"], r.get("equiv_ci_low"), r.get("equiv_ci_high")))),
    Column("equivalence (TOST, margin ±)", "equivalence", _equivalence,
           lambda r: "" if _reference(r) else r.get("equiv_verdict", ""), compact=True),
    Column("what it is", None, lambda r: r.get("what")),
    Column(FLOORS.page, None, floors_cell),  # the document gives the floors in a line below
]  # the document's sentences around it: core.report.controls.controls_markdown

CLAIMS = [
    Column("claim", "claim", lambda r: r.get("claim")),
    Column("verdict", None, _marked("verdict")),
    Column("paper (points)", "paper", lambda r: mean_sd_text(r.get("paper")) if r.get("paper") is not None else "",
           lambda r: f"{r['paper']:.2f}" if "paper" in r else ""),
    Column(f"ours: pooled gap {CI}, p raw / Holm", "ours [Holm-step interval] (level), p raw / Holm",
           _test_or("pooled", "")),
    Column(None, "verdict", _plain("verdict")),
    Column("detail", "detail", lambda r: r.get("detail")),
]

TABLES: dict[str, list[Column]] = {"table2": TABLE2, "table3": TABLE3, "table4": TABLE4, "fluctuation": FLUCTUATION,
                                   "init_study": INIT_STUDY, "ablations": ABLATIONS, "controls": CONTROLS,
                                   "claims": CLAIMS}
