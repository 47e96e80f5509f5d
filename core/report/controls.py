"""The controls of "why" RIM beats the parallel LSTMs (converged protocol, RIM the reference):
parameter-matched parallel LSTMs, six parallel LSTMs of 32 and RIM's ablations; one Holm family
over the table's difference and TOST equivalence tests; its Markdown and its one computed sentence."""

from __future__ import annotations

import math
from pathlib import Path

from ..paths import LONG_GRID
from . import fmt
from .columns import TABLES, compact_markdown, markdown
from .comparisons import ABLATION_WORDS, Cells, _adopt_from, _floor_fields, adjust_family, compare, untested
from .markdown import family_note, floors_line, pending_count, pending_words
from .paper import ABLATIONS, DATASET_ORDER, PAPER, VARIANT_NOTES, controls_for
from .stats import CANNOT_TELL, HOLDS, NOT_HOLDS, holm, mean_sd, t_interval, tost, verdict

# The equivalence margin of the controls (test-error points), fixed in code before the controls'
# runs were tabulated: the gap the paper claims for attention over the parallel LSTMs on that set
# (Table 2). A control "equivalent to RIM" differs from it by less than the effect the paper
# attributes to the method.
EQUIVALENCE_MARGIN = dict(PAPER["vs_parallel_gap"])
# The margin of the controls at the long budget (core.grid.long: protocols converged-12k and
# converged-24k): half the paper's claimed gap, so that "equivalent" means the control differs from
# RIM by less than half the effect it is used to explain. Fixed here before the long grid's first
# control run started (the grid trains the controls last); tests/test_controls.py checks that every
# control record of the long grid was created after MARGIN_FIXED_AT.
LONG_PROTOCOLS = ("converged-12k", "converged-24k")
LONG_CONTROL_SETS = ("mnist", "fashion_mnist", "cifar10")  # the sets the long grid trains every control on
LONG_EQUIVALENCE_MARGIN = {ds: gap / 2 for ds, gap in PAPER["vs_parallel_gap"].items()}
MARGIN_FIXED_AT = "2026-12-06T08:50:00+0000"


# A control cell of the long grid (one data set, one control) enters the tables with all its seeds
# (0-4), so a table never shows a control at one or two seeds while its grid is still training.
CONTROL_SEEDS = 5
MAIN_METHODS = ("rim", "parallel_lstm", "entnet", "rmc", "indrnn")


def training_cells(rows: list[dict]) -> dict[tuple[str, str], int]:
    """``{(data set, control): runs in}`` of the long grid's control cells with fewer than
    ``CONTROL_SEEDS`` runs: still training, left out of the tables."""
    n: dict[tuple[str, str], int] = {}
    for r in rows:
        if r.get("protocol") in LONG_PROTOCOLS and r.get("model") not in MAIN_METHODS:
            n[(r["dataset"], r["model"])] = n.get((r["dataset"], r["model"]), 0) + 1
    return {k: v for k, v in n.items() if v < CONTROL_SEEDS}


def tabulated(rows: list[dict]) -> list[dict]:
    """``rows`` less the long-grid runs of control cells still training (``training_cells``); the same
    control's runs of another protocol stay."""
    pending = training_cells(rows)
    if not pending:
        return rows
    return [r for r in rows if r.get("protocol") not in LONG_PROTOCOLS or (r.get("dataset"), r.get("model")) not in pending]


def training_note(rows: list[dict]) -> str:
    """One sentence naming the control cells still training, or ""."""
    pending = training_cells(rows)
    if not pending:
        return ""
    cells = ", ".join(f"{fmt.dataset_title(d)} {fmt.display_name(m)} ({n} of {CONTROL_SEEDS})"
                      for (d, m), n in sorted(pending.items()))
    return f"Still training, left out of the tables until all {CONTROL_SEEDS} seeds are in: {cells}."


def margin_words(protocol: str) -> tuple[str, str]:
    """How the margin of a protocol's controls is chosen: (the rule, "within <it> of RIM")."""
    if protocol in LONG_PROTOCOLS or protocol == "long":
        return ("half the gap the paper claims for the method on that set (`LONG_EQUIVALENCE_MARGIN`), fixed in code "
                "before the long grid's first control run", "half the paper's claimed gap")
    return ("the gap the paper claims for the method on that set (`EQUIVALENCE_MARGIN`), fixed in code before the "
            "controls were tabulated, after RIM's and the parallel LSTMs' errors were known", "the paper's claimed gap")


def equivalence_margin(protocol: str, dataset: str) -> float:
    """The controls' equivalence margin (test-error points) of a protocol's grid on a data set."""
    margins = LONG_EQUIVALENCE_MARGIN if protocol in LONG_PROTOCOLS else EQUIVALENCE_MARGIN
    return margins.get(dataset, math.nan)
CONTROL_WORDS = ("RIM better", "the control better", "no measurable difference at this number of seeds")
EQUIV_WORDS = ("equivalent within the margin", "not equivalent", "equivalence not shown")


def controls_table(c: Cells, datasets, t2=None, plan: dict | None = None) -> list[dict]:
    """The controls of "why" (converged protocol, RIM the reference): gap = control − RIM in test-error
    points (positive: RIM better), one Holm family over the table's difference tests and its TOST
    equivalence tests (margin ``EQUIVALENCE_MARGIN``); the parallel LSTMs' difference test is Table
    2's (one comparison, one p). Each row: n healthy of all runs, the parameter count of its runs."""
    out = []
    for ds in datasets:
        rim = c.values(ds, "rim", "test_error")
        names = [n for n in controls_for(ds) if c.health(ds, n)[1]]
        if not rim or not [n for n in names if n != "parallel_lstm"]:
            continue
        protocols = sorted({r.get("protocol") or "" for r in c.rows if r["dataset"] == ds and r["model"] == "rim"})
        margin = equivalence_margin(protocols[0], ds) if len(protocols) == 1 else math.nan  # one grid, one protocol
        for name in ["rim"] + names:
            vals = c.values(ds, name, "test_error")
            m, s, n = mean_sd(list(vals.values()))
            params = sorted({r.get("parameters") for r in c.rows if r["dataset"] == ds and r["model"] == name
                             and r.get("parameters")})
            row = {"dataset": ds, "control": name, "protocol": protocols[0] if len(protocols) == 1 else "", "what": VARIANT_NOTES.get(name, ""), "error": m, "sd": s,
                   "seeds": n, "parameters": params[len(params) // 2] if params else None,
                   **dict(zip(("healthy", "runs"), c.health(ds, name), strict=True)), **_floor_fields(ds)}
            if name != "rim":
                row.update(compare("gap", vals, rim), margin=margin)
                row.update(equiv=margin - abs(row["gap"]) if math.isfinite(row["gap"]) else math.nan,
                           equiv_p=tost(row["gap"], row["gap_se"], row["gap_df"], margin),
                           equiv_se=row["gap_se"], equiv_df=row["gap_df"])
                if name == "parallel_lstm":
                    _adopt_from(row, "gap", t2, ds, "gap", "Table 2")
            out.append(row)
    adjust_family(out, ["gap", "equiv"], {"gap": CONTROL_WORDS, "equiv": EQUIV_WORDS},
                  pending=planned_pending(out, plan or {}))
    plain = dict(zip((HOLDS, NOT_HOLDS, CANNOT_TELL), CONTROL_WORDS, strict=True))
    for r in out:
        if r.get("gap_family"):
            r["gap_verdict"] = plain.get(r["gap_verdict"], r["gap_verdict"])
        if "equiv_level" in r:  # TOST at the step's level: the (1 - 2 x step alpha) interval of the gap
            r["equiv_ci_low"], r["equiv_ci_high"] = t_interval(r["gap"], r["gap_se"], r["gap_df"],
                                                               1 - 2 * (1 - r["equiv_level"]))
        if "gap_verdict" in r:
            r["verdict"] = r["gap_verdict"]
    return out


def long_plan(rows: list[dict], budgets: dict[str, str] | None = None) -> dict[str, list[str]]:
    """``{data set: its planned controls}`` of the long grid in a table of ``rows``: every control of
    ``controls_for`` on each set of ``LONG_CONTROL_SETS`` whose RIM runs here are at its budget
    (``budgets``: set -> protocol, from ``results/long/budgets.csv``: ``read_budgets``), so the plan
    stands before the first control run; without ``budgets``, on each set where ``rows`` hold a
    long-grid control run (cells still training included). The controls table's and the ablations'
    Holm families count the planned tests not in yet as never rejected (``core.report.stats.holm``),
    so a verdict given while cells train stands when they land; the other grids' tables count the
    tests they have."""
    if budgets is None:
        sets = {r["dataset"] for r in rows if r.get("protocol") in LONG_PROTOCOLS and r.get("model") not in MAIN_METHODS}
    else:
        sets = {ds for ds in LONG_CONTROL_SETS if budgets.get(ds) in LONG_PROTOCOLS
                and any(r["dataset"] == ds and r.get("model") == "rim" and r.get("protocol") == budgets[ds] for r in rows)}
    return {ds: controls_for(ds) for ds in DATASET_ORDER if ds in sets}


def read_budgets(results) -> dict[str, str] | None:
    """``{data set: the protocol of its long-grid budget}`` from ``<results>/long/budgets.csv``
    (``core.grid.long.write_budgets``), or None where the file is not there."""
    import csv

    path = Path(results) / LONG_GRID / "budgets.csv"
    if not path.is_file():
        return None
    with path.open(newline="") as f:
        return {r["dataset"]: f"converged-{int(r['budget']) // 1000}k" for r in csv.DictReader(f) if r.get("budget")}


def planned_pending(table: list[dict], plan: dict) -> int:
    """The planned controls tests without a finite p in ``table``: two per control (difference and
    equivalence), the parallel LSTMs' equivalence alone (their difference test is Table 2's)."""
    return untested(table, plan, "control", lambda name: ("equiv",) if name == "parallel_lstm" else ("gap", "equiv"))


def planned_ablations(plan: dict) -> dict[str, list[str]]:
    """The plan's ablations of RIM per data set (its controls that are RIM variants)."""
    return {ds: [v for v in ABLATIONS if v.startswith("rim_") and v in names] for ds, names in plan.items()}


# the tests of each table whose family can count planned tests: (prefix, verdict words, label)
FAMILY_TESTS = {"controls": (("gap", CONTROL_WORDS, ""), ("equiv", EQUIV_WORDS, " (equivalence)")),
                "ablations": (("gap", ABLATION_WORDS, ""), ("growth_gap", ABLATION_WORDS, " (growth under noise)"))}


def pending_note(rows: list[dict], what: str = "difference and equivalence tests") -> str:
    """One sentence on the table's Holm family where some of its planned tests are not in yet, else ""."""
    words = pending_words(rows)
    return f"One Holm family: the {rows[0]['holm_m']} {what} of this table{words}." if words else ""


def counted_in_only(rows: list[dict], table: str = "controls") -> str:
    """Where the table's family counts planned tests not in yet: what counting only the tests in would
    change (a sensitivity line: the planned count is a rule adopted after the first control cells
    were in), else ""."""
    if not pending_count(rows):
        return ""
    tests = {pre: (w, label) for pre, w, label in FAMILY_TESTS[table]}
    keys = [(r, pre) for r in rows for pre in tests
            if isinstance(r.get(f"{pre}_p"), (int, float)) and math.isfinite(r[f"{pre}_p"]) and not r.get(f"{pre}_family")]
    changed = []
    for (r, pre), q in zip(keys, holm([r[f"{pre}_p"] for r, pre in keys]), strict=True):
        if (now := verdict(r[pre], q, *tests[pre][0])) != r.get(f"{pre}_verdict"):
            changed.append(f"{fmt.dataset_title(r['dataset'])}, {fmt.display_name(r.get('control') or r['variant'])}"
                           f"{tests[pre][1]}: {now}")
    head = f"The planned count is a rule adopted after the first control cells were in; counting only the {len(keys)} tests in"
    return head + (", no verdict would change." if not changed else ", these would read: " + "; ".join(changed) + ".")


def controls_markdown(rows: list[dict], compact: bool = False) -> list[str]:
    """The controls table (RIM the reference), its family note, floors and its computed sentence;
    ``compact``: the document's short columns (no parameters, no p)."""
    protocol = _protocol(rows)
    title = _title(rows, protocol)
    out = [f"{title[:1].upper() + title[1:]}. Gap = control − RIM in test-error points "
           f"(positive: RIM better). Equivalence: TOST; the margin is {margin_words(protocol)[0]}; equivalent when "
           "the interval (1 − 2 × the Holm step's alpha) lies within ± the margin.", ""]
    out += (compact_markdown if compact else markdown)(TABLES["controls"], rows)
    table2 = (" The parallel LSTMs' difference test is Table 2's (its family): one comparison, one verdict; levels "
              "and p values: the full table." if compact else " The parallel LSTMs' difference test is Table 2's (its "
              "family, its p): one comparison, one p.")
    sensitivity = counted_in_only(rows)
    return out + ["", family_note(rows, "difference and equivalence tests", compact, (CONTROL_WORDS[2], "cannot tell"),
                              equivalence=True) + table2
                  + (f" {sensitivity}" if sensitivity else ""), "",
                  floors_line([r["dataset"] for r in rows]), "", controls_decision(rows)]


def controls_block(short: list[dict], long_: list[dict], long_runs: list[dict], long_folder: str = "long") -> str:
    """REPRODUCTION's controls block: the long grid's controls table (compact) where it has any, with
    what the 4,000-iteration controls decide beside; else the 4,000-iteration table; the long grid's
    control cells still training named under it."""
    note = training_note(long_runs)
    training = f"Long grid: {note[0].lower()}{note[1:]}" if note else ""
    if not long_ and not short:
        return "\n".join(["No controls in `results/converged` yet."] + ["", training] * bool(training))
    shown, folder = (long_, long_folder) if long_ else (short, "converged")
    out = controls_markdown(shown, compact=True)
    out += ["", f"Full table with parameters and p values: `results/{folder}/tables.md`." + (f" {training}" if training else "")]
    said = controls_decision(short) if long_ and short else ""
    if "decide: " in said:
        out[-1] += (f" At {fmt.CONVERGED_TITLE.rsplit(', ', 1)[1]} (`results/converged/tables.md`), the controls "
                    f"decide: {said.split('decide: ', 1)[1]}")
    return "\n".join(out)


def _protocol(rows: list[dict]) -> str:
    """The rows' protocol; "long" where they are the long grid's at more than one budget."""
    protocols = {r.get("protocol") or "" for r in rows}
    if len(protocols) > 1 and protocols <= set(LONG_PROTOCOLS):
        return "long"
    return protocols.pop() if len(protocols) == 1 else ""


def controls_margin_rule(rows: list[dict]) -> str:
    """How the equivalence margin of these controls rows is chosen, in words."""
    return margin_words(_protocol(rows))[0]


def controls_named(rows: list[dict]) -> str:
    """The controls these rows hold beside RIM and Table 2's parallel LSTMs, in words ("" when none)."""
    names = [fmt.display_name(c) for c in dict.fromkeys(r["control"] for r in rows)
             if c not in ("rim", "parallel_lstm")]
    return "; ".join(names)


def _title(rows: list[dict], protocol: str) -> str:
    """The table's protocol in words; the long grid's names each data set's budget."""
    if protocol != "long":
        return fmt.protocol_title(protocol) or fmt.CONVERGED_TITLE
    budgets = {}
    for r in rows:
        budgets.setdefault(r.get("protocol"), []).append(r["dataset"])
    parts = [f"{', '.join(dict.fromkeys(fmt.dataset_title(d) for d in ds))} at {fmt.protocol_title(p).rsplit(', ', 1)[1]}"
             for p, ds in budgets.items()]
    return "long grid, Adam, cosine: " + "; ".join(parts)


def controls_sentence(rows: list[dict]) -> str:
    """What the controls decide, from their verdicts and nothing more."""
    parts, decided, kinds = [], [], {}  # kinds: the parameter-matched baselines of every set decide as one
    for name in dict.fromkeys(r["control"] for r in rows if r["control"] != "rim"):
        sel = [r for r in rows if r["control"] == name and "gap_verdict" in r]
        if not sel:
            continue
        by: dict[str, list[str]] = {}
        for r in sel:
            word = r["gap_verdict"]
            if word == CONTROL_WORDS[2]:
                word = f"no measurable difference at {r['seeds']} seeds"
            if word.startswith("cannot tell"):
                word = f"not tested yet ({r['seeds']} seed)"
            if r.get("equiv_verdict") == EQUIV_WORDS[0]:
                word += f", equivalent within ±{fmt.margin(r['margin'])}"
            by.setdefault(word, []).append(fmt.dataset_title(r["dataset"]))
        parts.append(f"{fmt.display_name(name)}: " + "; ".join(f"{w} on {', '.join(ds)}" for w, ds in by.items()))
        if name != "parallel_lstm":  # Table 2's comparison: the answer states it already
            kinds.setdefault("parallel_lstm_h" if name.startswith("parallel_lstm_h") else name, (name, []))[1].extend(sel)
    for name, sel in kinds.values():
        sel = sorted(sel, key=lambda r: DATASET_ORDER.index(r["dataset"]) if r["dataset"] in DATASET_ORDER else 99)
        decided += _decided(name, sel, margin_words(_protocol(rows))[1])
    text = "Controls (RIM the reference; Holm over the controls table): " + ". ".join(parts) + "."
    if decided:
        n = sorted({int(r["seeds"]) for r in rows if r["control"] != "rim"})
        seeds = f"{n[0]}" if len(n) == 1 else f"{n[0]}-{n[-1]}"
        text += (" What they decide: " + "; ".join(decided) + f" ({seeds} seeds each; Holm over the table; "
                 f"equivalence by TOST, {margin_words(_protocol(rows))[1]} the margin).")
    else:
        text += " They decide nothing yet beyond these verdicts."
    return text


def _decided(name: str, sel: list[dict], within: str = "the paper's claimed gap") -> list[str]:
    """What one control decides, set by set: where it is measurably better than RIM, where RIM is
    measurably better, and where the two are equivalent within the margin (TOST)."""
    def sets(rows):
        return ", ".join(fmt.dataset_title(r["dataset"]) for r in rows)

    who = ("parameter-matched parallel LSTMs" if name.startswith("parallel_lstm_h")
           else "six parallel LSTMs of 32 units" if name == "parallel_lstm_6"
           else fmt.display_name(name).replace("RIM, ", "RIM with "))
    better = [r for r in sel if r["gap_verdict"] == CONTROL_WORDS[1]]
    worse = [r for r in sel if r["gap_verdict"] == CONTROL_WORDS[0]]
    same = [r for r in sel if r.get("equiv_verdict") == EQUIV_WORDS[0]]
    out = []
    if better:
        out.append(f"{who} beat{'s' if who.startswith('RIM') else ''} RIM on {sets(better)}")
    if worse:
        out.append(f"RIM beats {who} on {sets(worse)}")
    if same:
        if name == "rim_random":
            out.append("choosing the active LSTMs at random instead of by attention changes the error by less than "
                       f"{within} on {sets(same)}")
        else:
            out.append(f"{who} {'is' if who.startswith('RIM') else 'are'} within {within} of RIM "
                       f"on {sets(same)}")
    return out


def controls_decision(rows: list[dict]) -> str:
    """The controls' one computed sentence: what they decide (and that nothing else is decided)."""
    text = controls_sentence(rows)
    if " What they decide: " not in text:
        return "The controls of why decide nothing yet beyond the per-set verdicts above."
    return "The controls of why decide: " + text.split(" What they decide: ", 1)[1]


