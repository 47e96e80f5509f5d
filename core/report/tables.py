"""The reproduction's tables: per-run rows from the stored runs, the statistics per table,
and the Markdown / CSV / JSON files ``python -m core.reproduce tables`` writes.

The comparisons themselves are in ``core.report.comparisons``. What goes in: only healthy
runs (``core.report.health``: not diverged, not collapsed) unless ``include_unhealthy``;
every table counts the healthy runs per cell ("3 of 5 healthy") and lists the runs it left
out. Statistics (``core.report.stats``): mean and sample standard deviation over seeds; for
each difference of means a 95% Welch t-interval with its two-sided p-value, and beside it the
seed-paired t-interval (a seed gives every model the same batch order, validation split and
evaluation subset, ``core.training.loop``). One table is one family of tests: its Welch
p-values are Holm-Bonferroni adjusted together (the paired ones as a family of their own),
and every verdict comes from ``core.report.stats.verdict`` on the adjusted p-value. The
claims table combines them: a claim over all four data sets holds only when it holds on
each; the paper's "average gap" claims are tested on the pooled gap (mean of the per-set
gaps). Numbers are test-error points (percent); each row carries its data set's chance and
majority-class error (``core.report.floors``). Cells are formatted by ``core.report.fmt``.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np

from ..fileio import derived_from_json, json_safe, read_json
from . import fmt
from .columns import TABLES, markdown
from .comparisons import (
    ABLATION_WORDS,
    EFFECT_WORDS,
    Cells,
    ablation_table,
    claims_table,
    fluctuation_table,
    init_table,
    table2,
    table3,
    table4,
)
from .controls import (
    controls_markdown,
    controls_table,
    counted_in_only,
    long_plan,
    planned_ablations,
    read_budgets,
    tabulated,
    training_note,
)
from .convergence import IMPROVING, NOT_MEASURED, ends_before_cut, plateau
from .floors import floors
from .health import HEALTHY, health_of
from .markdown import family_note, floors_line
from .paper import ABLATIONS, BASELINES, DATASET_ORDER, INIT_STUDY, PAPER, controls_for


def same_run(first: dict, again: dict) -> bool:
    """A retrained run matches its first record: the same test error and validation history."""
    return (first["metrics"].get("test_error") == again["metrics"].get("test_error")
            and first.get("evals", {}).get("val_acc") == again.get("evals", {}).get("val_acc"))


def run_files(out: Path) -> list[Path]:
    """The run JSONs under ``out/runs`` (``<run>/<file>.json``), in path order."""
    return sorted((Path(out) / "runs").glob("*/*.json"))


def run_records(out: Path) -> list[dict]:
    """Every run JSON of ``run_files(out)`` that reads as a run (a dict with a ``dataset``);
    unreadable ones are left out."""
    return [m for m in map(read_json, run_files(out)) if isinstance(m, dict) and "dataset" in m]


def derived_records(out: Path, derive, name: str) -> list:
    """``derive(record)`` for every run of ``run_files(out)`` that reads as a run (a dict with a
    ``dataset``), None results left out; each file's value is derived once per process until the
    file changes (``core.fileio.derived_from_json``): treat the values as read-only."""
    def checked(meta: dict):
        return derive(meta) if "dataset" in meta else None

    values = (derived_from_json(p, checked, name, owner=derive) for p in run_files(out))
    return [v for v in values if v is not None]


def load_results(out: Path) -> list[dict]:
    """One row per run under ``out/runs``: what the tables use, with its health (each caller gets
    its own copies of the rows)."""
    return [dict(row) for row in derived_records(out, _result_row, "tables.row")]


def _result_row(meta: dict) -> dict:
    m = meta.get("metrics", {})
    h = health_of(meta)
    pl = plateau(meta)
    sd, rel = loss_fluctuation(meta.get("history", {}).get("loss") or [])
    return {"convergence": pl.state, "convergence_gain": pl.gain_points, "dataset": meta["dataset"],
            "model": meta.get("variant") or meta["model"], "seed": meta["seed"],
            "protocol": meta.get("protocol") or "paper", "status": meta.get("status"), "health": h["health"],
            "health_reasons": "; ".join(h["health_reasons"] or []),
            "health_checked": ", ".join(h["health_checked"] or []),
            "test_error": m.get("test_error"),
            "noisy_test_error": m.get("noisy_test_error"), "noise_draws": m.get("noise_draws"),
            "iterations": meta.get("train_config", {}).get("iterations"),
            "iterations_run": m.get("iterations_done"),
            "train_time_s": m.get("train_time_s"), "parameters": m.get("parameters"),
            "loss_fluct": sd, "loss_fluct_rel": rel}


# each table's verdict for a difference its test does not show (the family note names it)
# (the ablations' parallel-LSTM row carries Table 2's and Table 4's tests, the init study its gaps: "cannot tell")
UNDECIDED = {"ablations": (ABLATION_WORDS[2], "cannot tell"), "init_study": (EFFECT_WORDS[2], "cannot tell")}

FLUCT_WINDOW = 51  # iterations in the centred moving average that stands for the loss trend


def loss_fluctuation(loss, window: int = FLUCT_WINDOW) -> tuple[float, float]:
    """How much the per-batch training loss jumps around its own trend, second half of training.

    The paper says the parallel LSTMs' training loss "fluctuates more" without a number. Ours:
    over the second half of the iterations, the standard deviation of (loss - its centred
    moving average over ``window`` iterations): the primary statistic, the jitter a loss plot
    shows. Divided by the mean of the moving average it is the relative statistic, which was
    chosen after seeing the data (it discounts that a model with a higher loss has a noisier
    batch loss, and so grows whenever a method's loss is lower). NaN when the history is too
    short or holds non-finite values (a diverged run).
    """
    v = np.asarray([math.nan if x is None else x for x in loss], dtype=float)
    v = v[len(v) // 2 :]
    if len(v) < window + 2 or not np.all(np.isfinite(v)):
        return math.nan, math.nan
    trend = np.convolve(v, np.ones(window) / window, mode="valid")
    resid = v[window // 2 : window // 2 + len(trend)] - trend
    sd = float(resid.std(ddof=1))
    level = float(trend.mean())
    return sd, (sd / level if level > 0 else math.nan)


def build_tables(rows: list[dict], include_unhealthy: bool = False, budgets: dict | None = None) -> dict:
    """The tables as lists of dicts (errors in percent points), the claims table last; ``budgets``:
    the long grid's budget per set (``core.report.controls.read_budgets``), which fixes its plan."""
    plan = long_plan(rows, budgets)  # the long grid's planned controls, before or while they train
    rows = tabulated(rows)  # a control cell of the long grid enters with all its seeds
    datasets = [d for d in DATASET_ORDER if any(r["dataset"] == d for r in rows)]
    c = Cells(rows, include_unhealthy)
    t = {"table2": table2(c, datasets), "table3": table3(c, datasets), "table4": table4(c, datasets),
         "fluctuation": fluctuation_table(c, datasets)}
    t["init_study"] = init_table(c, datasets, t["table2"])
    t["ablations"] = ablation_table(c, datasets, t["table2"], t["table4"], planned=planned_ablations(plan))
    t["controls"] = controls_table(c, datasets, t["table2"], plan)
    t["claims"] = claims_table(c, t)
    return t


TABLE_MODELS = {"table2": ["rim", "parallel_lstm"], "table3": ["rim"] + BASELINES,
                "table4": ["rim", "parallel_lstm"] + BASELINES, "fluctuation": ["rim", "parallel_lstm"],
                "ablations": ABLATIONS, "init_study": INIT_STUDY,
                "controls": ["rim"] + list(dict.fromkeys(n for d in DATASET_ORDER for n in controls_for(d)))}


def excluded_runs(rows: list[dict], t: dict) -> dict[str, list[dict]]:
    """Per table: the unhealthy runs of its models and data sets (left out of its means by default)."""
    out = {}
    for name, models in TABLE_MODELS.items():
        sets = {r["dataset"] for r in t.get(name) or []}
        bad = [r for r in rows if r["dataset"] in sets and r["model"] in models
               and (r.get("status") != "completed" or r.get("health", HEALTHY) != HEALTHY)]
        bad.sort(key=lambda r: (DATASET_ORDER.index(r["dataset"]) if r["dataset"] in DATASET_ORDER else 99,
                                models.index(r["model"]), r["seed"]))
        out[name] = [{k: r.get(k) for k in ("dataset", "model", "seed", "status", "health", "health_reasons",
                                             "test_error")} for r in bad]
    return out


def _table_runs(rows: list[dict], t: dict, name: str) -> list[dict]:
    sets = {r["dataset"] for r in t.get(name) or []}
    return [r for r in rows if r["dataset"] in sets and r["model"] in TABLE_MODELS[name]]


def improving_runs(rows: list[dict], t: dict) -> dict[str, tuple[list[dict], list[dict]]]:
    """Per table: its runs that fail the convergence criterion (core.report.convergence: still
    improving at the end of their schedule) and the runs the criterion measured."""
    out = {}
    for name in TABLE_MODELS:
        mine = _table_runs(rows, t, name)
        measured = [r for r in mine if r.get("convergence", NOT_MEASURED) != NOT_MEASURED]
        out[name] = ([r for r in measured if r.get("convergence") == IMPROVING], measured)
    return out


def convergence_cells(rows: list[dict]) -> list[str]:
    """Markdown: per data set and model, how many runs meet the convergence criterion, with the
    iterations they ran to; nothing when no run was measured (no validation split)."""
    measured = [r for r in rows if r.get("convergence", NOT_MEASURED) != NOT_MEASURED]
    if not measured:
        return []
    sets = [d for d in DATASET_ORDER if any(r["dataset"] == d for r in measured)]
    models = list(dict.fromkeys(r["model"] for r in sorted(measured, key=lambda r: _model_rank(r["model"]))))
    head = ["", "### Convergence criterion per cell", "",
            "Runs that meet it / runs (`core.report.convergence`: best validation accuracy at most 0.1 point above "
            "its best by three quarters of the schedule), and the schedule's iterations.", "",
            "| data set | " + " | ".join(fmt.display_name(m) for m in models) + " |",
            "|---|" + "---|" * len(models)]
    lines = []
    for ds in sets:
        cells = []
        for m in models:
            mine = [r for r in measured if r["dataset"] == ds and r["model"] == m]
            its = sorted({r["iterations"] for r in mine if r.get("iterations")})
            cells.append(f"{sum(r['convergence'] != IMPROVING for r in mine)}/{len(mine)} "
                         f"({', '.join(f'{i:,}' for i in its)})" if mine else "")
        lines.append(f"| {fmt.dataset_title(ds)} | " + " | ".join(cells) + " |")
    n_ok = sum(r["convergence"] != IMPROVING for r in measured)
    return head + lines + ["", f"All cells: {n_ok} of {len(measured)} runs ({100 * n_ok / len(measured):.0f} %) meet it.",
                           *early_stop_line(measured)]


def early_stop_line(measured: list[dict]) -> list[str]:
    """Markdown: how many runs early stopping ended by three quarters of their schedule (meeting
    the criterion by construction), per data set with the iterations they ran."""
    early = [r for r in measured if ends_before_cut(r)]
    if not early:
        return []
    parts = []
    for ds in DATASET_ORDER:
        mine = [r for r in early if r["dataset"] == ds]
        if mine:
            its = sorted(int(r["iterations_run"]) for r in mine)
            span = f"{its[0]:,}" if its[0] == its[-1] else f"{its[0]:,}-{its[-1]:,}"
            met = sum(r["dataset"] == ds and r["convergence"] != IMPROVING for r in measured)
            parts.append(f"{fmt.dataset_title(ds)} {len(mine)} of {met} (at {span})")
    return ["", f"{len(early)} of the runs that meet it stopped early (no better validation accuracy for the "
                "protocol's patience) by three quarters of their schedule, which meets it by construction: for "
                "them it says that validation stopped improving, not that the learning rate's schedule ran out. "
                "Per data set: " + "; ".join(parts) + "."]


def _model_rank(model: str) -> tuple:
    order = ["rim", "parallel_lstm", *BASELINES]
    return (order.index(model) if model in order else len(order), model)


def convergence_line(improving: list[dict], measured: list[dict]) -> str:
    """One line under a table: how many of its runs meet the convergence criterion, and per data
    set how many are still improving (each run's state: the ``convergence`` column of runs.csv)."""
    if not measured:
        return "Convergence criterion: not measured (no validation split)."
    if not improving:
        return f"Convergence criterion: all {len(measured)} runs meet it."
    per = {}
    for r in improving:
        per.setdefault(r["dataset"], []).append(r)
    parts = []
    for ds in sorted(per, key=lambda d: DATASET_ORDER.index(d) if d in DATASET_ORDER else 99):
        runs = per[ds]
        if len(runs) <= 2:
            parts.append(f"{fmt.dataset_title(ds)} " + ", ".join(
                f"{fmt.short_method_title(r['model'])} seed {r['seed']}" for r in runs))
        else:
            parts.append(f"{fmt.dataset_title(ds)} {len(runs)} of {sum(r['dataset'] == ds for r in measured)}")
    return (f"Convergence criterion: {len(measured) - len(improving)} of {len(measured)} runs meet it; still "
            f"improving (in the means): {'; '.join(parts)}.")


def _excluded_md(ex: list[dict], include_unhealthy: bool) -> list[str]:
    if not ex:
        return ["", "Every run of this table is healthy."]
    head = "Unhealthy runs, included in the means (--include-unhealthy):" if include_unhealthy else \
        "Left out (unhealthy; `core.report.health`):"
    out = ["", head, ""]
    for e in ex:
        err = fmt.pct(e.get("test_error"))
        out.append(f"- {fmt.dataset_title(e['dataset'])} {e['model']} seed {e['seed']} ({err}): {e.get('health')}"
                   + (f": {e['health_reasons']}" if e.get("health_reasons") else ""))
    return out


def tables_markdown(t: dict, runs: list[dict], include_unhealthy: bool = False) -> str:
    rows = tabulated(runs)  # the runs the tables read: a control cell of the long grid still training is named only
    ex = excluded_runs(rows, t)
    imp = improving_runs(rows, t)
    seeds = sorted({r["seed"] for r in rows})
    its = sorted({r["iterations"] for r in rows if r["iterations"]})
    n_bad = sum(1 for r in rows if r.get("status") != "completed" or r.get("health", HEALTHY) != HEALTHY)
    out = [f"Test error in percent, mean ± sd over seeds {seeds} ({', '.join(map(str, its))} iterations) of the "
           + ("finished runs, unhealthy ones included" if include_unhealthy else "healthy runs")
           + f" ({len(rows) - n_bad} of {len(rows)} runs healthy; a run is unhealthy when it diverged or collapsed, "
           "`core.report.health`). Gap = other − RIM (positive: RIM better). Each table is one Holm family; its "
           "intervals are at the level of the Holm step that decides each test, so an interval and its verdict never "
           "disagree; the seed-paired 95 % interval (a seed gives every model the same data order) stands beside, "
           "unadjusted. Floors: the error of guessing at random (chance) / of always answering the test set's "
           "biggest class (majority). Animals-10 is a small unbalanced real subset (1,320 images): not comparable "
           "with the full data set.", ""]
    if note := training_note(runs):
        out[0] += " " + note
    draws = sorted({r["noise_draws"] for r in rows if r.get("noise_draws")})
    sections = [  # (table, heading, the text under it; None: none), in the order of the document
        ("table2", "### Table 2: RIM vs parallel LSTMs", None),
        ("table3", "### Table 3: RIM vs EntNet, RMC, IndRNN",
         "Gap = baseline − RIM for each baseline. RIM has the lowest error on a set only when it holds "
         "against each of the three there. Runner-up: RMC, the paper's named one, fixed in advance; the "
         "lowest-mean baseline beside it was chosen after seeing the data."),
        ("table4", f"### Table 4: Gaussian noise (variance 0.01, {'/'.join(map(str, draws)) or '?'} draws per seed)",
         "Noisy error (its change from the clean error). Noisy gap = other − RIM on noisy error: RIM is lowest "
         "under noise on a set when it holds against each other method. Growth gap = other's growth − RIM's "
         "(positive: RIM's error grows less); the runner-up is RMC, fixed in advance; the one with the lowest "
         "noisy error, chosen after seeing the data, beside it; and the parallel LSTMs (our question: is RIM "
         "more robust than them?)."),
        ("fluctuation", "### Training-loss fluctuation: parallel LSTMs vs RIM",
         f"Second half of training: sd of (batch loss − its centred {FLUCT_WINDOW}-iteration moving "
         "average): the absolute statistic, primary. Divided by the mean of the moving average: the "
         "relative statistic, **chosen after seeing the data** (it grows whenever a method's loss is "
         "lower). Gap = parallel LSTMs − RIM (positive: parallel LSTMs fluctuate more, as the paper says). "
         "A loss statistic: the error floors do not apply."),
        ("init_study", "### Initialisation study: forget-gate bias 1 (default) vs 0",
         "Gap = parallel LSTMs − RIM (positive: RIM better). Effect = error at forget bias 0 − at 1."),
        ("ablations", "### Ablations of the method",
         "Gap = variant − RIM in test-error points (positive: the variant is worse, so what it removes "
         "helped); growth = noisy − clean error; growth gap = variant − RIM. The parallel LSTMs' row carries "
         "Table 2's and Table 4's tests (one comparison, one p)."),
    ]
    for k, (name, heading, text) in enumerate(sections):
        if k < 3 or t.get(name):  # Tables 2-4 always, the others when there are rows
            out += ([""] if k else []) + [heading, ""] + ([text, ""] if text else []) + markdown(TABLES[name], t[name])
            sensitivity = counted_in_only(t[name], "ablations") if name == "ablations" else ""
            out += ["", family_note(t[name], undecided=UNDECIDED.get(name, ("cannot tell",)))
                    + (f" {sensitivity}" if sensitivity else "")] + _excluded_md(ex[name], include_unhealthy)
            if name in ("table2", "table3", "table4"):
                out += ["", convergence_line(*imp[name])]
    out += convergence_cells(rows)
    if t.get("controls"):
        out += ["", "### The controls of why", ""] + controls_markdown(t["controls"])
    if t.get("claims"):
        out += ["", "### The paper's claims, one by one (verdicts by the one rule, `core.report.stats.verdict`)", "",
                "A claim over all four sets holds only when it holds on each set in its table's family, and does not "
                "hold when it fails measurably on any. An average claim is tested on the pooled gap (the mean of "
                "the per-set gaps, Welch-Satterthwaite interval); the pooled tests are this table's family.", ""]
        out += markdown(TABLES["claims"], t["claims"])
        out += ["", family_note(t["claims"], "pooled tests"), "", floors_line(sorted({r["dataset"] for r in rows}))]
    return "\n".join(out) + "\n"


def _csv_value(v):
    return "; ".join(map(str, v)) if isinstance(v, list) else v


def _write_csv(path: Path, rows: list[dict]) -> None:
    """``rows`` as CSV, one column per key any row has (an empty file for no rows)."""
    with open(path, "w", newline="") as f:
        if rows:
            w = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for row in rows for k in row)))
            w.writeheader()
            w.writerows([{k: _csv_value(v) for k, v in row.items()} for row in rows])


def rendered_tables(out: Path, include_unhealthy: bool = False) -> tuple[dict, list[dict], str]:
    """The tables of the runs under ``out``, their rows and ``tables.md``'s text, as written now."""
    rows = load_results(out)
    t = build_tables(rows, include_unhealthy, read_budgets(Path(out).resolve().parent))
    return t, rows, tables_markdown(t, rows, include_unhealthy)


def write_tables(out: Path, include_unhealthy: bool = False) -> dict:
    """Rebuild ``tables.md``, one CSV per table, ``runs.csv`` and ``summary.json`` in ``out``."""
    out = Path(out)
    t, rows, text = rendered_tables(out, include_unhealthy)
    (out / "tables.md").write_text(text)
    for name, table in t.items():
        if table:
            _write_csv(out / f"{name}.csv", table)
    _write_csv(out / "runs.csv", rows)
    datasets = sorted({r["dataset"] for r in rows})
    summary = json_safe({"tables": t, "runs": rows, "paper": PAPER, "excluded": excluded_runs(rows, t),
                      "include_unhealthy": include_unhealthy, "floors": {d: floors(d) for d in datasets}})
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return t
