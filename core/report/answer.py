"""The answer a person reads in one minute, and the one results figure, from ``results/``.

``gap_rows``: for every results grid with tables (the paper protocol, Adam 4k, and the longer
budgets where they have runs), RIM's gap to each other method per data set (other − RIM, in
test-error points: positive means RIM is better), with the interval at the level of the Holm
step that decides its verdict, the verdict, the paper's figure where the paper gives one and
the magnitude verdict against it (``core.report.stats.magnitude``). ``plain_answer`` words what
those rows and the controls decide in at most three sentences; ``write_figure`` draws the rows
as one PNG for README (matplotlib: a static image needs no browser); the pages draw the same
rows with plotly (``core.report.plots.comparison.gaps_figure``).
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from . import fmt
from .paper import BASELINES, DATASET_ORDER, PAPER, PARAM_MATCHED
from .sources import write_sources
from .stats import HOLDS, NOT_HOLDS, magnitude

# the grids the figure and the answer read, in the order they are drawn: folder -> protocol title
GRIDS = {"paper": "paper protocol (SGD, 1,000 iterations)", "converged": fmt.PROTOCOL_NAMES["converged"],
         "budget": fmt.PROTOCOL_NAMES["converged-12k"], "budget-24k": fmt.PROTOCOL_NAMES["converged-24k"]}
SHORT = {"paper": "paper protocol", "converged": "Adam, 4,000 iterations", "budget": "Adam, 12,000 iterations",
         "budget-24k": "Adam, 24,000 iterations"}
ITERATIONS = {"converged": "4,000", "budget": "12,000", "budget-24k": "24,000"}
OTHERS = ["parallel_lstm", *BASELINES]
FIGURE = "docs/figures/gaps.png"  # relative to the repository root
FIGURE_DATA = "gaps.csv"  # results/gaps.csv, the figure's numbers: `python -m core.reproduce docs --check` compares them
GAP_COLUMNS = ["grid", "protocol", "dataset", "other", "gap", "ci_low", "ci_high", "level", "verdict", "seeds",
               "paper_gap", "magnitude"]


def _tables(root: Path, folder: str) -> dict:
    from .claims import grid

    p = root / folder
    if not (p / "runs").is_dir():
        return {}
    return grid(p)[1]


def _paper_gap(ds: str, other: str) -> float:
    if other == "parallel_lstm":
        return float(PAPER["vs_parallel_gap"].get(ds, math.nan))
    if other == "rmc":  # the runner-up the claims fix in advance (the paper names it on MNIST)
        return float(PAPER["vs_runner_up_gap"].get(ds, math.nan))
    return math.nan


def gap_rows(root="results") -> pd.DataFrame:
    """One row per grid x data set x other method (see the module docstring)."""
    root = Path(root)
    rows = []
    for folder, title in GRIDS.items():
        t = _tables(root, folder)
        t2 = {r["dataset"]: r for r in t.get("table2") or []}
        t3 = {r["dataset"]: r for r in t.get("table3") or []}
        for ds in DATASET_ORDER:
            for other in OTHERS:
                r, key = (t2.get(ds), "gap") if other == "parallel_lstm" else (t3.get(ds), f"gap_{other}")
                if not r or not math.isfinite(fmt.num(r.get(key))):
                    continue
                lo, hi = fmt.num(r.get(f"{key}_ci_low")), fmt.num(r.get(f"{key}_ci_high"))
                paper = _paper_gap(ds, other)
                rows.append({"grid": folder, "protocol": title, "dataset": ds, "other": other,
                             "gap": fmt.num(r[key]), "ci_low": lo, "ci_high": hi,
                             "level": fmt.num(r.get(f"{key}_level")), "verdict": r.get(f"{key}_verdict", ""),
                             "seeds": int(min(fmt.num(r.get("rim_healthy")), fmt.num(r.get(f"{other}_healthy")))),
                             "paper_gap": paper, "magnitude": magnitude(lo, hi, paper)})
    return pd.DataFrame(rows, columns=GAP_COLUMNS)


def _names(sets) -> str:
    titles = [fmt.dataset_title(d) for d in sets]
    return titles[0] if len(titles) == 1 else ", ".join(titles[:-1]) + " and " + titles[-1]


def _sets(df: pd.DataFrame, grid: str, other: str, verdict: str) -> list[str]:
    sel = df[(df["grid"] == grid) & (df["other"] == other) & (df["verdict"] == verdict)]
    return [d for d in DATASET_ORDER if d in set(sel["dataset"])]


FULL_SEEDS = {"animals10": 3}  # the seeds a comparison needs before the answer reads it (5 elsewhere)


def _longest(df: pd.DataFrame, ds: str) -> str | None:
    """The longest Adam budget whose RIM-vs-parallel-LSTMs test on ``ds`` has all its seeds (a
    budget still training does not speak for the set)."""
    for g in ("budget-24k", "budget", "converged"):
        sel = df[(df["grid"] == g) & (df["dataset"] == ds) & (df["other"] == "parallel_lstm")]
        if not sel.empty and int(sel["seeds"].min()) >= FULL_SEEDS.get(ds, 5):
            return g
    return None


def _verdict(df: pd.DataFrame, grid: str, ds: str) -> str:
    sel = df[(df["grid"] == grid) & (df["dataset"] == ds) & (df["other"] == "parallel_lstm")]
    return str(sel["verdict"].iloc[0]) if not sel.empty else ""


def _at(sets: list[str], longest: dict, faded: list[str], said: list[bool], joiner: str = ", and on ") -> str:
    """``sets`` with the longest budget each was trained at ("MNIST and CIFAR-10 at 12,000-iteration
    budgets and Fashion-MNIST at 24,000": a budget, since a run stops early once its validation
    accuracy stops improving; "-iteration budgets" only the first time in the sentence: ``said``).
    The sets where RIM's 4,000-iteration lead did not last (``faded``) come first, once, followed by
    "where it led at 4,000"; the others after ``joiner``."""
    chunks = []
    for led in (True, False):
        part = [d for d in sets if (d in faded) == led]
        if not part:
            continue
        groups: dict[str, list[str]] = {}
        for d in part:
            groups.setdefault(longest[d], []).append(d)
        frags = []
        for g, ds in groups.items():
            frags.append(f"{_names(ds)} at " + (ITERATIONS[g] if said[0] else _budgets(ITERATIONS[g], len(ds))))
            said[0] = True
        text = frags[0] if len(frags) == 1 else ", ".join(frags[:-1]) + " and " + frags[-1]
        chunks.append(text + (", where it led at 4,000" if led else ""))
    return joiner.join(chunks)


def _budgets(iterations: str, sets: int) -> str:
    """"a 4,000-iteration budget" (one data set), "12,000-iteration budgets" (several)."""
    return f"a {iterations}-iteration budget" if sets == 1 else f"{iterations}-iteration budgets"


def _main_sentence(df: pd.DataFrame, claims: dict) -> str:
    """What the comparison with the parallel LSTMs decides at the longest budget trained per set
    (first), where RIM's lead at 4,000 iterations does not last, and the paper's own schedule."""
    head = "RIM (six LSTMs, attention picks four per image row)"
    longest = {ds: g for ds in DATASET_ORDER if (g := _longest(df, ds))}
    if not longest:
        return f"{head} has no complete comparison with four plain LSTMs yet."
    verdict = {ds: _verdict(df, g, ds) for ds, g in longest.items()}
    beats = [d for d in longest if verdict[d] == HOLDS]
    worse = [d for d in longest if verdict[d] == NOT_HOLDS]
    open_ = [d for d in longest if d not in beats and d not in worse]
    faded = [d for d in _sets(df, "converged", "parallel_lstm", HOLDS) if longest.get(d, "converged") != "converged"
             and d not in beats]
    said = [False]
    parts = []
    if beats:
        parts.append(f"beats four plain LSTMs on {_at(beats, longest, faded, said)}")
    if open_:
        words = "but not measurably on" if beats else "does not beat four plain LSTMs measurably on"
        parts.append(f"{words} {_at(open_, longest, faded, said, ', nor on ')}")
    if worse:
        parts.append(f"is measurably worse than them on {_at(worse, longest, faded, said)}")
    mean = claims.get("paper", {}).get("vs_parallel_mean")
    if mean and math.isfinite(fmt.num(mean.get("pooled"))):
        v, pooled = mean.get("verdict", ""), fmt.num(mean["pooled"])
        if v.startswith("does not hold"):
            parts.append(f"averages {abs(pooled):.2f} points worse under the paper's schedule")
        elif v == HOLDS:
            parts.append(f"averages {pooled:.2f} points better under the paper's schedule")
    body = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + ", and " + parts[-1]
    return f"{head} {body}."


# what a control's verdict says in the answer (the parameter-matched baseline, random selection):
# (control, gap verdict or "equivalent") -> words; "{margin}": the protocol's margin in words
_CONTROL_SAYS = {
    ("matched", "the control better"): "equally large plain LSTMs beat it",
    ("matched", "RIM better"): "it beats equally large plain LSTMs",
    ("random", "RIM better"): "picking at random makes it worse",
    ("random", "the control better"): "picking at random makes it better",
    ("random", "equivalent"): "picking at random changes its error less than {margin}",
}


def _control_says(r: dict) -> list[str]:
    """The keys of ``_CONTROL_SAYS`` one controls row decides (none for other controls)."""
    kind = ("matched" if r.get("control") == PARAM_MATCHED.get(r.get("dataset"))
            else "random" if r.get("control") == "rim_random" else None)
    if kind is None:
        return []
    out = [(kind, v) for v in (r.get("gap_verdict"),) if (kind, v) in _CONTROL_SAYS]
    if kind == "random" and not out and str(r.get("equiv_verdict", "")).startswith("equivalent"):
        out.append((kind, "equivalent"))
    return out


def _controls_sentence(controls: list[dict]) -> str:
    """The controls of "why" in plain words: what the parameter-matched baseline and random selection
    decide, one clause per training length where the sets the answer reads differ in it."""
    groups: dict[str, dict[tuple, set]] = {}  # protocol -> {what is said: its sets}
    from .controls import LONG_PROTOCOLS

    for r in controls:
        p = str(r.get("protocol", ""))
        for key in _control_says(r):  # the long grid's budgets as one: the answer's first sentence gives each
            groups.setdefault("long" if p in LONG_PROTOCOLS else p, {}).setdefault(key, set()).add(r["dataset"])
    clauses = [_controls_clause(p, groups[p]) for p in groups]
    if not clauses:
        return ""
    text = ", and ".join(clauses)
    return text[0].upper() + text[1:] + "."


def _controls_clause(protocol: str, said: dict[tuple, set]) -> str:
    """One training length's part of the controls sentence."""
    from .controls import margin_words

    margin = margin_words(protocol)[1].replace(" claimed", "")
    keys = [k for k in _CONTROL_SAYS if k in said]
    words = [_CONTROL_SAYS[k].format(margin=margin) for k in keys]
    names = [_names([d for d in DATASET_ORDER if d in said[k]]) for k in keys]
    its = _iterations({protocol})
    n = len(set().union(*said.values()))
    when = (f"at the same budget{'s' if n > 1 else ''} " if protocol == "long"
            else f"at {_budgets(f'{its:,}', n)} " if its else "")
    if len(set(names)) == 1:
        return f"{when}on {names[0]}, " + ", and ".join(words)
    return (f"{when.strip()}, " if when else "") + ", and ".join(f"{w} on {n}" for w, n in zip(words, names, strict=True))


def _iterations(protocols: set[str]) -> int | None:
    """The training length the controls the answer reads share (their protocol's), else None."""
    from ..training.config import PROTOCOLS

    its = {PROTOCOLS[p]["iterations"] for p in protocols if p in PROTOCOLS}
    return its.pop() if len(its) == 1 and len(protocols) == 1 else None


def _count(n: int) -> str:
    words = ["No", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine", "Ten"]
    return words[n] if 0 <= n < len(words) else str(n)


def _seeds_sentence(df: pd.DataFrame, controls_seeds=()) -> str:
    """How many training seeds stand behind the comparison the answer leads with (RIM vs the
    parallel LSTMs at each data set's longest budget with all its seeds), and the fewest of the
    controls it states (``controls_seeds``), when fewer; a range where data sets differ: "Five to ten
    seeds"."""
    seeds = {ds: int(_pick(df, g, ds)["seeds"].min()) for ds in DATASET_ORDER if (g := _longest(df, ds))}
    if not seeds:
        return ""
    others = sorted({n for ds, n in seeds.items() if ds != "animals10"})
    a = seeds.get("animals10")
    n, high = (others[0], others[-1]) if others else (a, a)

    def count(k: int) -> str:
        return f"{_count(k)} seed{'s' if k != 1 else ''}"

    low = min([n, *controls_seeds]) if controls_seeds else n
    head = count(n) + " per method" if low == high else f"{_count(low)} to {_count(high).lower()} seeds"
    return head + (f" ({_count(a).lower()} on Animals-10)." if a is not None and a != n else ".")


def _pick(df: pd.DataFrame, grid: str, ds: str) -> pd.DataFrame:
    return df[(df["grid"] == grid) & (df["dataset"] == ds) & (df["other"] == "parallel_lstm")]


def answer_controls(root="results") -> list[dict]:
    """The controls rows the answer reads: the long grid's parameter-matched and random-selection
    rows, each on every set where its cell is in the tables (all its seeds); the 4,000-iteration
    grid's while the long grid has neither on any set (one budget in the sentence: the long grid's,
    the first sentence's, where it has any)."""
    from ..paths import LONG_GRID

    root = Path(root)
    short = _tables(root, "converged").get("controls") or []
    long_ = _tables(root, LONG_GRID).get("controls") or []
    said = [r for r in long_ if r["control"] in {PARAM_MATCHED.get(r["dataset"]), "rim_random"}]
    return said or short


def plain_answer(root="results") -> str:
    """At most three sentences a person reads in one pass: what RIM is, what holds, what does not,
    how sure. Every clause follows from ``gap_rows``, the claims and the controls tables."""
    root = Path(root)
    df = gap_rows(root)
    if df.empty:
        return "No results yet: train a grid (`python -m core.reproduce run`) to see the answer."
    claims = {g: {r["claim_id"]: r for r in _tables(root, g).get("claims") or []} for g in ("paper", "converged")}
    controls = answer_controls(root)
    said = _controls_sentence(controls)
    stated = [int(c["seeds"]) for c in controls if said and c.get("seeds") and c.get("control") in
              {PARAM_MATCHED.get(c.get("dataset")), "rim_random"}]
    return " ".join(s for s in (_main_sentence(df, claims), said, _seeds_sentence(df, stated)) if s)


def budget_note(root="results") -> str:
    """Why the answer reads each data set at its longest budget: how many runs of the 4,000-iteration
    grid and of the long grid are still improving by the convergence criterion, and where the long
    grid is below its bar (``PASS_SHARE`` meeting the criterion), which sets fall short."""
    from .controls import tabulated
    from .convergence import IMPROVING, NOT_MEASURED, PASS_SHARE, ends_before_cut
    from .tables import load_results

    def measured(folder: str) -> list[dict]:
        if folder == "long" and not (Path(root) / "long" / "runs").is_dir():
            return []
        rows = tabulated(load_results(Path(root) / folder))  # the runs the tables read
        return [r for r in rows if r.get("convergence", NOT_MEASURED) != NOT_MEASURED]

    def improving(rows: list[dict]) -> int:
        return sum(r["convergence"] == IMPROVING for r in rows)

    short, long_ = measured("converged"), measured("long")
    if not short:
        return ""
    text = (f"Why the longest budget: at 4,000 iterations {improving(short)} of {len(short)} runs are still "
            "improving (best validation accuracy gained more than 0.1 point in the last quarter of training)")
    if long_:
        text += f"; at each data set's long budget, {improving(long_)} of {len(long_)} are"
        if len(long_) - improving(long_) < PASS_SHARE * len(long_):  # below the bar: say where
            where = []
            for ds in DATASET_ORDER:
                d = [r for r in long_ if r["dataset"] == ds]
                if improving(d):
                    its = sorted({int(r["iterations"]) for r in d if r.get("iterations")})
                    where.append(f"{fmt.dataset_title(ds)}{f' at {its[-1]:,}' if its else ''}: {improving(d)} of {len(d)}")
            text += f" ({'; '.join(where)}): below the long grid's bar of {PASS_SHARE:.0%} meeting the criterion"
    early = sum(ends_before_cut(r) for r in long_)
    if early:
        text += (f". Of the {len(long_) - improving(long_)} that meet it there, {early} stopped early (validation "
                 "patience) by three quarters of their schedule, which meets it by construction")
    return text + "." + "".join(f" {s}" for s in _moved_sentences(root))


def _moved_sentences(root) -> list[str]:
    """One sentence per data set that the budget rule's second step moves (``results/long/budgets.csv``,
    written by core.grid.long): why, and the budget the long grid reads it at meanwhile."""
    path = Path(root) / "long" / "budgets.csv"
    if not path.is_file():
        return []
    out = []
    for r in pd.read_csv(path).to_dict("records"):
        if r["budget"] == r["first_step"]:
            continue
        text = (f"{fmt.dataset_title(r['dataset'])} goes to {int(r['budget']):,} (a rule step added after seeing its "
                f"{int(r['first_step']):,}-iteration grid: {int(r['main_met_at_first'])} of its "
                f"{int(r['main_runs_at_first'])} runs of seeds 0-4 meet the criterion)")
        if r["read_at"] != r["budget"]:
            text += (f"; read at {int(r['read_at']):,} until those {int(r['main_runs_at_first'])} are in at "
                     f"{int(r['budget']):,} ({int(r['main_runs_at_budget'])} so far)")
        out.append(text + ".")
    return out


MAGNITUDE_MARKS = {"smaller than the paper's": ", below the paper's", "as large as the paper's": ", as large as the paper's"}


NOT_RUN = "not run"  # a budget without this comparison (the page's word; the Markdown table: NOT_RUN_MARK)
NOT_RUN_MARK = "–"


def verdict_by_budget(df: pd.DataFrame) -> pd.DataFrame:
    """Each comparison of Tables 2-3 (data set x other method) with its verdict at each Adam
    budget that has it, and where the paper gives a figure, the magnitude rule's word when it
    decides. Each grid's verdicts come from its own tables (one Holm family per table and grid).
    ``df``: ``gap_rows`` (or ``read_gap_rows``)."""
    grids = [g for g in GRIDS if g != "paper" and g in set(df["grid"])]
    out = []
    for ds in DATASET_ORDER:
        for other in OTHERS:
            sel = df[(df["dataset"] == ds) & (df["other"] == other)]
            if sel.empty:
                continue
            row = {"data set": fmt.dataset_title(ds), "RIM vs": fmt.short_method_title(other)}
            for g in grids:
                r = sel[sel["grid"] == g]
                if r.empty:
                    row[SHORT[g]] = NOT_RUN
                    continue
                r = r.iloc[0]
                full = FULL_SEEDS.get(ds, 5)
                seeds = f" ({r['seeds']} seed{'s' if r['seeds'] != 1 else ''})" if r["seeds"] != full else ""
                cell = f"{fmt.marked_verdict(r['verdict']).split(' ')[0]} {fmt.gap(r['gap'], r['ci_low'], r['ci_high'])}{seeds}"
                row[SHORT[g]] = cell + MAGNITUDE_MARKS.get(r["magnitude"] if isinstance(r["magnitude"], str) else "", "")
            out.append(row)
    return pd.DataFrame(out)


BUDGET_NOTE = ("✅ holds, ❌ does not hold, ❔ cannot tell; gap = other − RIM in points (positive: RIM better), its interval "
               "at its Holm step's level; each budget's verdicts come from its own tables (a Holm family per table), so "
               "a verdict can change with the gap or with the family; \"below\" / \"as large as the paper's\": the "
               "magnitude rule, where it decides (REPRODUCTION, Statistics). Seeds: 5 (3 on Animals-10) unless a cell "
               "says otherwise.")


def verdict_by_budget_markdown(root="results") -> str:
    from .markdown import floors_line, md_table

    df = verdict_by_budget(gap_rows(root))
    if df.empty:
        return "*No results grid with tables yet.*"
    cells = [[NOT_RUN_MARK if v == NOT_RUN else v for v in row] for row in df.values.tolist()]
    return "\n".join(md_table(list(df.columns), cells)
                     + ["", f"{NOT_RUN_MARK} {NOT_RUN}; " + BUDGET_NOTE + " " + floors_line(DATASET_ORDER)])


ANSWER_FILE = "answer.md"  # results/answer.md: the plain answer as stored for the pages (no recomputation)


NOTE_FILE = "answer_note.md"  # results/answer_note.md: ``budget_note`` as stored for the pages


def write_answer(root="results") -> str:
    """Store ``plain_answer`` as ``results/answer.md``, ``budget_note`` as ``results/answer_note.md``
    and the tables they were read beside (``sources``) as ``results/answer_sources.json``; returns the
    answer."""
    text = plain_answer(root)
    (Path(root) / ANSWER_FILE).write_text(text + "\n")
    (Path(root) / NOTE_FILE).write_text(budget_note(root) + "\n")
    write_sources(root)
    return text


def read_answer(root="results") -> str:
    """The stored answer (``write_answer``); computed when none is stored."""
    p = Path(root) / ANSWER_FILE
    return p.read_text().strip() if p.is_file() else plain_answer(root)


def read_note(root="results") -> str:
    """The stored budget note (``write_answer``); computed when none is stored."""
    p = Path(root) / NOTE_FILE
    return p.read_text().strip() if p.is_file() else budget_note(root)


def read_gap_rows(root="results") -> pd.DataFrame:
    """The figure's numbers as stored (``results/gaps.csv``); computed when none are stored."""
    p = Path(root) / FIGURE_DATA
    return pd.read_csv(p, keep_default_na=False, na_values=[""]) if p.is_file() else gap_rows(root)


__all__ = ["gap_rows", "plain_answer", "write_answer", "read_answer", "read_note", "budget_note", "read_gap_rows"]
