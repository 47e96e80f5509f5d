"""Is the 4,000-iteration protocol converged? The budget check and the stopping facts.

* ``budget_rows``: for each verdict of Tables 2-3 on MNIST and Fashion-MNIST that the budget grid
  covers (RIM vs parallel LSTMs, RIM vs EntNet), the verdict at 4,000 iterations
  (``results/converged``) beside the one at 12,000 (``results/budget``, protocol
  ``converged-12k``: the same cosine shape over three times the budget) on the same seeds, and
  whether it stays: at seeds 0-2 (the check's design) and, once the longer grid goes past seed 2,
  at seeds 0-4 (as many as Tables 2-3); "not yet run" with the runs that exist where a cell is
  incomplete. The widest checked seed set decides (``deciding_seeds``).
* ``stopping_facts``: how many runs of a grid stopped early and how many had their best
  validation accuracy at their last evaluation (a run still improving when the budget ends).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pandas as pd

from ..fileio import derived_from_json
from . import fmt
from .comparisons import Cells, adjust_family, compare
from .health import HEALTHY, health_of
from .markdown import floors_line, md_table
from .paper import DATASET_ORDER
from .tables import run_files

BUDGET_SETS = ["mnist", "fashion_mnist"]
BUDGET_SEEDS = [0, 1, 2]  # the check's design
ALL_SEEDS = [0, 1, 2, 3, 4]  # as many as Tables 2-3 (the 4,000-iteration grid)
BUDGET_COMPARISONS = [("parallel_lstm", "Table 2: RIM vs parallel LSTMs"), ("entnet", "Table 3: RIM vs EntNet")]
BUDGET_ITERATIONS = 12000
BUDGET_DIR = "budget"  # results/<this>: the runs with the longer budget


def _cell_runs(rows: list[dict], ds: str, model: str) -> list[dict]:
    return [r for r in rows if r["dataset"] == ds and r["model"] == model]


def _exists(rows: list[dict], ds: str, models) -> str:
    parts = []
    for m in models:
        seeds = sorted(r["seed"] for r in _cell_runs(rows, ds, m) if r.get("status") == "completed")
        parts.append(f"{fmt.display_name(m)} seeds {', '.join(map(str, seeds))}" if seeds
                     else f"{fmt.display_name(m)} none")
    return "; ".join(parts)


def _tests(rows: list[dict], seeds, complete: bool = False) -> dict:
    """(dataset, other) -> the test row of other − RIM at ``seeds``, one Holm family over these
    comparisons (``complete``: only those whose two methods have a healthy run at every seed)."""
    c = Cells([r for r in rows if r["seed"] in seeds])
    out = []
    for ds in BUDGET_SETS:
        rim = c.values(ds, "rim", "test_error")
        for other, _ in BUDGET_COMPARISONS:
            vals = c.values(ds, other, "test_error")
            if complete and not _complete(rows, ds, ("rim", other), seeds):
                continue
            if len(rim) >= 2 and len(vals) >= 2:
                out.append({"dataset": ds, "other": other, **compare("gap", vals, rim)})
    adjust_family(out, ["gap"])
    return {(r["dataset"], r["other"]): r for r in out}


def _complete(rows: list[dict], ds: str, models, seeds) -> bool:
    """Every method of ``models`` has a healthy completed run at each seed of ``seeds``."""
    return all({r["seed"] for r in _cell_runs(rows, ds, m) if r.get("status") == "completed"
                and r.get("health", HEALTHY) == HEALTHY} >= set(seeds) for m in models)


def _seed_sets(long_runs: list[dict]) -> list[list[int]]:
    """The seed sets the check compares at: seeds 0-2 (its design), and seeds 0-4 (as many as
    Tables 2-3) once the 12,000-iteration grid has a run past seed 2."""
    more = any(r["seed"] not in BUDGET_SEEDS for r in long_runs)
    return [BUDGET_SEEDS, *([ALL_SEEDS] if more else [])]


def _checked(r: dict) -> bool:
    """A row of the check with a verdict at both budgets."""
    return r["stays"] in ("stays", "changes")


def _long_runs(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r.get("iterations") == BUDGET_ITERATIONS or r.get("protocol") == "converged-12k"]


def seeds_label(seeds) -> str:
    return f"{min(seeds)}-{max(seeds)}"


def budget_rows(root="results") -> list[dict]:
    """One row per (seed set, data set, comparison): the verdict at 4,000 and at 12,000 iterations
    on the same seeds (one Holm family per budget and seed set over these comparisons) and whether
    it stays; "not yet run" with the runs that exist where a cell is incomplete."""
    from .claims import grid

    root = Path(root)
    conv_rows, tc = grid(root / "converged")
    t2 = {r["dataset"]: r for r in tc.get("table2") or []}
    t3 = {r["dataset"]: r for r in tc.get("table3") or []}
    bud_rows = _long_runs(grid(root / BUDGET_DIR)[0])
    out = []
    for seeds in _seed_sets(bud_rows):
        short, long_ = _tests(conv_rows, seeds), _tests(bud_rows, seeds, complete=True)
        for ds in BUDGET_SETS:
            for other, title in BUDGET_COMPARISONS:
                a, b = short.get((ds, other)), long_.get((ds, other))
                src = t2.get(ds) if other == "parallel_lstm" else t3.get(ds)
                key = "gap" if other == "parallel_lstm" else f"gap_{other}"
                row = {"seeds": seeds_label(seeds), "dataset": ds, "comparison": title, "other": other,
                       "table_verdict": (src or {}).get(f"{key}_verdict", "not measured"),
                       "at_4000": a["gap_verdict"] if a else "not measured",
                       "gap_4000": fmt.gap_test(a, "gap") if a else "n/a"}
                if b is None:  # no test: some seed of the two methods missing at 12,000
                    row.update(at_12000="not yet run", gap_12000="n/a", stays="not yet run",
                               exists=_exists(bud_rows, ds, ["rim", other]))
                else:
                    row.update(at_12000=b["gap_verdict"], gap_12000=fmt.gap_test(b, "gap"),
                               stays="stays" if a and a["gap_verdict"] == b["gap_verdict"] else "changes")
                out.append(row)
    return out


def _run_facts(path: Path) -> dict | None:
    return derived_from_json(path, _facts_of, "budget.run_facts")


def _facts_of(meta: dict) -> dict | None:
    if meta.get("status") != "completed":
        return None
    m = meta.get("metrics") or {}
    return {"test_error": m.get("test_error"), "best_iteration": m.get("best_iteration"),
            "done": m.get("iterations_done"), "planned": (meta.get("train_config") or {}).get("iterations"),
            "health": health_of(meta)["health"]}


def same_seed_rows(root="results") -> list[dict]:
    """Each finished 12,000-iteration run beside the 4,000-iteration run of the same data set,
    method and seed (the same data order): both test errors, the change, where each run had its
    best validation accuracy and where the longer one stopped. A description of single runs."""
    root = Path(root)
    out = []
    for p in sorted((root / BUDGET_DIR / "runs").glob("*/*.json")):
        long_ = _run_facts(p)
        short = _run_facts(root / "converged" / "runs" / p.parent.name / p.name)
        if long_ is None or short is None or long_["test_error"] is None or short["test_error"] is None:
            continue
        model, _, seed = p.stem.rpartition("_s")
        out.append({"dataset": p.parent.name, "model": model, "seed": int(seed), "short": dict(short), "long": dict(long_),
                    "change": 100 * (long_["test_error"] - short["test_error"])})
    order = {m: i for i, m in enumerate(["rim", *(o for o, _ in BUDGET_COMPARISONS)])}
    return sorted(out, key=lambda r: (DATASET_ORDER.index(r["dataset"]) if r["dataset"] in DATASET_ORDER else 99,
                                      order.get(r["model"], 99), r["seed"]))


def budget_sentence(root="results") -> str:
    """One sentence on the budget check for README: what the finished 12,000-iteration runs show
    beside their seeds' 4,000-iteration runs, and what the check decides (``verdicts_checked``) or
    that it decides nothing yet. Empty without finished runs."""
    rows = same_seed_rows(root)
    if not rows:
        return ""
    brows = budget_rows(root)
    checked = [r for r in brows if _checked(r)]
    changes = [r for r in rows if r["change"] < 0]
    short = max(r["short"]["planned"] or 0 for r in rows)
    later = [r for r in rows if (r["long"]["best_iteration"] or 0) > short]
    s = (f"Trained three times as long ({BUDGET_ITERATIONS:,} iterations, the same cosine shape), {len(changes)} of "
         f"{len(rows)} single runs end with a lower test error than their seed's {short:,}-iteration run")
    s += _by_points(changes)
    s += f", and {len(later)} of {len(rows)} have their best validation accuracy after iteration {short:,}"
    s += "; " + verdicts_checked(brows) if checked else "; no verdict is checked yet (that needs seeds 0-2 of both methods)."
    return s if s.endswith(".") else s + "."


def deciding_seeds(rows: list[dict]) -> str:
    """The widest seed set with a checked verdict ("0-2" when none is checked): the one that decides."""
    checked = [r["seeds"] for r in rows if _checked(r)]
    return max(checked, key=lambda s: int(s.split("-")[1])) if checked else seeds_label(BUDGET_SEEDS)


def verdicts_checked(rows: list[dict], seeds: str | None = None) -> str:
    """What the budget check decides at ``seeds`` (default: the deciding set): how many verdicts
    are the same at both budgets (and which they are), and each one that changes."""
    seeds = seeds or deciding_seeds(rows)
    of = [r for r in rows if r["seeds"] == seeds]
    mine = [r for r in of if _checked(r)]
    same = [r for r in mine if r["stays"] == "stays"]
    counts = Counter(fmt.short_verdict(r["at_4000"]) for r in same)
    s = (f"of the {len(of)} verdicts of Tables 2-3 re-checked (seeds {seeds} at both budgets"
         + (f", {len(mine)} so far" if len(mine) < len(of) else "") + ")"
         + f", {len(same)} stay{'s' if len(same) == 1 else ''}"
         + (f" ({', '.join(f'{n} {v}' for v, n in counts.items())})" if same else ""))
    changed = [r for r in mine if r["stays"] == "changes"]
    if changed:
        s += f" and {len(changed)} change{'s' if len(changed) == 1 else ''} from 4,000 to 12,000 iterations" + "".join(
            f"{'; ' if i else ' ('}{fmt.dataset_title(r['dataset'])}, {r['comparison'].split(': ')[1]}: "
            f"{fmt.short_verdict(r['at_4000'])} → {fmt.short_verdict(r['at_12000'])}" for i, r in enumerate(changed)) + ")"
    return s + "."


def _stop_text(f: dict) -> str:
    stopped = f["done"] is not None and f["planned"] is not None and f["done"] < f["planned"]
    return f"{f['best_iteration']:,} / " + (f"{f['done']:,}" if stopped else "ran all")


def same_seed_markdown(root="results") -> list[str]:
    rows = same_seed_rows(root)
    if not rows:
        return []
    lines = md_table(["data set", "method", "seed", "test error (%), 4,000 → 12,000", "budget 12,000: best / stopped at"],
                     [[fmt.dataset_title(r["dataset"]), fmt.display_name(r["model"]), r["seed"],
                       f"{100 * r['short']['test_error']:.2f} → {100 * r['long']['test_error']:.2f} ({r['change']:+.2f})"
                       + ("" if r["long"]["health"] == HEALTHY else f", {r['long']['health']}"),
                       _stop_text(r["long"])] for r in rows])
    return ["", "Each finished run with the 12,000-iteration budget beside the run of its seed with 4,000 (single "
            "runs: a description, not a test):", "", *lines, "", _same_seed_counts(rows) + "."]


def _by_points(lower: list[dict]) -> str:
    """How much lower the longer budget's errors are, as " (by a to b points)"; empty for none."""
    if not lower:
        return ""
    lo, hi = f"{min(-r['change'] for r in lower):.2f}", f"{max(-r['change'] for r in lower):.2f}"
    return f" (by {lo} points)" if lo == hi else f" (by {lo} to {hi} points)"


def _stopped_early(r: dict) -> bool:
    return r["long"]["done"] is not None and r["long"]["planned"] is not None and r["long"]["done"] < r["long"]["planned"]


def _same_seed_counts(rows: list[dict]) -> str:
    lower = [r for r in rows if r["change"] < 0]
    s = f"{len(lower)} of {len(rows)} have a lower test error with the longer budget"
    s += _by_points(lower)
    bests = [r["long"]["best_iteration"] for r in rows if r["long"]["best_iteration"] is not None]
    s += f"; {sum(map(_stopped_early, rows))} of {len(rows)} stopped early under it"
    if bests:
        s += (f", their best validation at iteration {bests[0]:,}" if min(bests) == max(bests) else
              f", their best validation between iterations {min(bests):,} and {max(bests):,}")
    return s


def same_seed_line(root="results") -> str:
    """REPRODUCTION's one line on the same-seed pairs (the table itself: ``results/budget/tables.md``)."""
    rows = same_seed_rows(root)
    if not rows:
        return ""
    return (f"Each finished 12,000-iteration run beside its seed's 4,000-iteration run (single runs: a description, "
            f"not a test; their table, and the check at every seed set: `results/budget/tables.md`): "
            f"{_same_seed_counts(rows)}.")


CHECK_FILE = "check.csv"  # results/budget/check.csv: the check's rows as shown, for the pages (no recomputation)
CHECK_COLUMNS = [("seeds", "seeds"), ("dataset", "data set"), ("comparison", "comparison"),
                 ("table_verdict", "verdict, 4,000 (all seeds)"), ("at_4000", "4,000"), ("gap_4000", "gap, 4,000"),
                 ("at_12000", "12,000"), ("gap_12000", "gap, 12,000"), ("stays", "stays?")]


# a page shows the verdicts before the long gap cells, so a 1,280 px window has them without scrolling
PAGE_ORDER = ["data set", "comparison", "verdict, 4,000 (all seeds)", "4,000", "12,000", "stays?"]


def write_check(out: Path) -> None:
    """After the budget grid's tables: ``check.csv`` (every row of the check, for Compare) and, in its
    ``tables.md``, the check at every seed set (REPRODUCTION shows the deciding one) and the
    same-seed table (each run beside its seed's run of the converged grid, ``out.parent / "converged"``)."""
    root = Path(out).parent
    if not same_seed_rows(root):
        return
    rows = budget_rows(root)
    pd.DataFrame(rows).to_csv(Path(out) / CHECK_FILE, index=False)
    said = [f"Seeds {o}: {verdicts_checked(rows, o)}" for o in dict.fromkeys(r["seeds"] for r in rows)
            if any(r["seeds"] == o and _checked(r) for r in rows)]
    parts = ["", "### Does each verdict stay? Every seed set", "", budget_sentence(root), "", budget_table(rows), "",
             CHECK_NOTE,
             *(["", " ".join(said)] if said else []), "",
             "### Each run beside its seed's 4,000-iteration run", *same_seed_markdown(root), ""]
    with open(Path(out) / "tables.md", "a") as f:
        f.write("\n".join(parts))


def read_check(root="results") -> list[dict]:
    """The stored rows of the check (``write_check``); none when the budget grid has not written them."""
    p = Path(root) / BUDGET_DIR / CHECK_FILE
    if not p.is_file():
        return []
    return pd.read_csv(p, dtype=str, keep_default_na=False).to_dict("records")


def check_frame(rows: list[dict]) -> pd.DataFrame:
    """The check's rows of its deciding seed set as a page shows them (the same cells as REPRODUCTION;
    the seeds are in the sentence under it)."""
    seeds = deciding_seeds(rows)
    df = pd.DataFrame([_cells(r)[1:] for r in rows if r["seeds"] == seeds], columns=[t for _, t in CHECK_COLUMNS[1:]])
    return df[[*PAGE_ORDER, *(c for c in df.columns if c not in PAGE_ORDER)]]  # the verdicts first, the gaps after


def _cells(r: dict) -> list[str]:
    return [r["seeds"], fmt.dataset_title(r["dataset"]), r["comparison"], fmt.marked_verdict(r["table_verdict"]),
            fmt.marked_verdict(r["at_4000"]), r["gap_4000"], fmt.marked_verdict(r["at_12000"]), r["gap_12000"],
            r["stays"] if r["stays"] != "not yet run" else f"not yet run ({r['exists']})"]


def stopping_facts(path, datasets=None) -> dict:
    """Counts over a grid's run records: ``runs``, ``early_stops`` (fewer iterations done than
    configured), ``best_at_last`` (best validation at the last evaluation), each also ``by_dataset``."""
    out = {"runs": 0, "early_stops": 0, "best_at_last": 0, "by_dataset": {}}
    for p in run_files(path):
        f = derived_from_json(p, _stopping_of, "budget.stopping")
        if f is None or (datasets and f["dataset"] not in datasets):
            continue
        d = out["by_dataset"].setdefault(f["dataset"], {"runs": 0, "early_stops": 0, "best_at_last": 0})
        for bucket in (out, d):
            bucket["runs"] += 1
            bucket["early_stops"] += int(f["early_stop"])
            bucket["best_at_last"] += int(f["best_at_last"])
    return out


def _stopping_of(meta: dict) -> dict | None:
    if meta.get("status") != "completed":
        return None
    m, cfg = meta.get("metrics") or {}, meta.get("train_config") or {}
    done, planned = m.get("iterations_done"), cfg.get("iterations")
    evals = (meta.get("evals") or {}).get("iteration") or []
    last = evals[-1] if evals else done
    return {"dataset": meta.get("dataset"), "early_stop": done is not None and planned is not None and done < planned,
            "best_at_last": m.get("best_iteration") is not None and m.get("best_iteration") == last}


CHECK_NOTE = ("Gap = other − RIM in points. Verdicts on the same seeds at both budgets, one Holm family per budget "
              "and seed set (the four comparisons); each interval at its Holm step's level (in brackets), so it "
              "excludes 0 exactly when the verdict is not \"cannot tell\". The table's verdict (all seeds at 4,000, "
              "its own family) stands beside.")


def check_sentence(rows: list[dict]) -> str:
    """What the check decides at its deciding seed set, or that it decides nothing yet."""
    if not any(map(_checked, rows)):
        return "No verdict is checked yet: no comparison has seeds 0-2 of both its methods in `results/budget`."
    return "The check decides: " + verdicts_checked(rows)


def budget_table(rows: list[dict], seeds_column: bool = True) -> str:
    first = 0 if seeds_column else 1
    return "\n".join(md_table([t for _, t in CHECK_COLUMNS[first:]], [_cells(r)[first:] for r in rows]))


def budget_markdown(root="results") -> str:
    """REPRODUCTION's block: the check at its deciding seed set (every set: ``results/budget/tables.md``)."""
    rows = budget_rows(root)
    seeds = deciding_seeds(rows)
    f = stopping_facts(Path(root) / "converged", ["mnist", "fashion_mnist", "cifar10"])
    by = "; ".join(f"{fmt.dataset_title(d)} {v['best_at_last']} of {v['runs']}" for d, v in
                   sorted(f["by_dataset"].items(), key=lambda kv: DATASET_ORDER.index(kv[0])))
    return "\n".join([
        budget_table([r for r in rows if r["seeds"] == seeds], seeds_column=False),
        "", CHECK_NOTE, "",
        check_sentence(rows), *(["", line] if (line := same_seed_line(root)) else []), "",
        f"Of the {f['runs']} completed runs of the 4,000-iteration grid on MNIST, Fashion-MNIST and CIFAR-10, "
        f"{f['early_stops']} stopped early and {f['best_at_last']} had their best validation accuracy at their last "
        f"evaluation ({by}).", "", floors_line(BUDGET_SETS)])
