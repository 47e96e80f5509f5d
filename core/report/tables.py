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

from ..fileio import finite
from . import fmt
from .comparisons import (
    Cells,
    ablation_table,
    claims_table,
    controls_table,
    fluctuation_table,
    init_table,
    table2,
    table3,
    table4,
)
from .floors import floors
from .health import HEALTHY, health_of
from .paper import ABLATIONS, BASELINES, DATASET_ORDER, INIT_STUDY, PAPER


def load_results(out: Path) -> list[dict]:
    """One row per run JSON under ``out/runs``: what the tables use, with its health."""
    rows = []
    for p in sorted((Path(out) / "runs").glob("*/*.json")):
        try:
            meta = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if not isinstance(meta, dict) or "dataset" not in meta:
            continue
        m = meta.get("metrics", {})
        h = health_of(meta)
        rows.append({"dataset": meta["dataset"], "model": meta.get("variant") or meta["model"], "seed": meta["seed"],
                     "protocol": meta.get("protocol") or "paper", "status": meta.get("status"), "health": h["health"],
                     "health_reasons": "; ".join(h["health_reasons"] or []),
                     "health_checked": ", ".join(h["health_checked"] or []),
                     "test_error": m.get("test_error"),
                     "noisy_test_error": m.get("noisy_test_error"), "noise_draws": m.get("noise_draws"),
                     "iterations": meta.get("train_config", {}).get("iterations"),
                     "train_time_s": m.get("train_time_s"), "parameters": m.get("parameters")})
        sd, rel = loss_fluctuation(meta.get("history", {}).get("loss") or [])
        rows[-1].update(loss_fluct=sd, loss_fluct_rel=rel)
    return rows


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


def build_tables(rows: list[dict], include_unhealthy: bool = False) -> dict:
    """The tables as lists of dicts (errors in percent points), the claims table last."""
    datasets = [d for d in DATASET_ORDER if any(r["dataset"] == d for r in rows)]
    c = Cells(rows, include_unhealthy)
    t = {"table2": table2(c, datasets), "table3": table3(c, datasets), "table4": table4(c, datasets),
         "fluctuation": fluctuation_table(c, datasets), "init_study": init_table(c, datasets)}
    t["ablations"] = ablation_table(c, datasets, t["table2"], t["table4"])
    t["controls"] = controls_table(c, datasets, t["table2"])
    t["claims"] = claims_table(c, t)
    return t


TABLE_MODELS = {"table2": ["rim", "parallel_lstm"], "table3": ["rim"] + BASELINES,
                "table4": ["rim", "parallel_lstm"] + BASELINES, "fluctuation": ["rim", "parallel_lstm"],
                "ablations": ABLATIONS, "init_study": INIT_STUDY}


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


def _t(r: dict, key: str, digits: int = 2) -> str:
    return fmt.gap_test(r, key, digits)


def _tp(r: dict, key: str, digits: int = 2) -> str:
    return fmt.gap_test(r, key, digits, paired=True)


def _family_note(rows: list[dict]) -> str:
    m = rows[0].get("holm_m", 0) if rows else 0
    return (f"Holm-Bonferroni over the {m} Welch tests of this table (one family; the paired tests are a "
            "family of their own): p = raw / adjusted; verdicts from the adjusted p (below 0.05: holds or "
            "does not hold, by the sign of the gap).")


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


def tables_markdown(t: dict, rows: list[dict], include_unhealthy: bool = False) -> str:
    ex = excluded_runs(rows, t)
    seeds = sorted({r["seed"] for r in rows})
    its = sorted({r["iterations"] for r in rows if r["iterations"]})
    n_bad = sum(1 for r in rows if r.get("status") != "completed" or r.get("health", HEALTHY) != HEALTHY)
    out = [f"Test error in percent, mean ± sd over seeds {seeds} ({', '.join(map(str, its))} iterations) of the "
           + ("finished runs, unhealthy ones included" if include_unhealthy else "healthy runs")
           + f" ({len(rows) - n_bad} of {len(rows)} runs healthy; a run is unhealthy when it diverged or collapsed, "
           "`core.report.health`). Gap = other − RIM (positive: RIM better) with its 95% Welch t-interval and beside it "
           "the seed-paired t-interval (a seed gives every model the same data order). Floors: the error of "
           "guessing at random (chance) / of always answering the test set's biggest class (majority). "
           "Animals-10 is a small unbalanced real subset (1,320 images): not comparable with the full data set.", ""]
    out += ["### Table 2: RIM vs parallel LSTMs", "",
            "| data set | RIM | parallel LSTMs | gap (ours) [95% CI], p raw / Holm | paired gap [95% CI] | paper's gap "
            "| floors (chance / majority) | verdict |", "|---|---|---|---|---|---|---|---|"]
    for r in t["table2"]:
        out.append(f"| {r['dataset']} | {fmt.cell(r, 'rim')} | {fmt.cell(r, 'parallel_lstm')} | {_t(r, 'gap')} "
                   f"| {_tp(r, 'gap')} | {r['paper_gap']:.2f} | {fmt.floors_cell(r)} | {r['verdict']} |")
    out += ["", _family_note(t["table2"])] + _excluded_md(ex["table2"], include_unhealthy)
    out += ["", "### Table 3: RIM vs EntNet, RMC, IndRNN", "",
            "Gap = baseline − RIM for each baseline. RIM has the lowest error on a set only when it holds "
            "against each of the three there.", "",
            "| data set | RIM | EntNet | RMC | IndRNN | gap EntNet [95% CI], p | gap RMC [95% CI], p "
            "| gap IndRNN [95% CI], p | runner-up (ours) | paper's gap | floors (chance / majority) | verdict |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in t["table3"]:
        paper_ru = f" ({r['paper_runner_up']})" if r["paper_runner_up"] else ""
        gaps = " | ".join(_t(r, f"gap_{b}") if f"gap_{b}" in r else "n/a" for b in BASELINES)
        cells = " | ".join(fmt.cell(r, b) if f"{b}_runs" in r else "n/a" for b in BASELINES)
        out.append(f"| {r['dataset']} | {fmt.cell(r, 'rim')} | {cells} | {gaps} | {r['runner_up'] or 'n/a'} "
                   f"| {r['paper_gap']:.2f}{paper_ru} | {fmt.floors_cell(r)} | {r['verdict']} ({r['verdict_detail']}) |")
    out += ["", _family_note(t["table3"])] + _excluded_md(ex["table3"], include_unhealthy)
    draws = sorted({r["noise_draws"] for r in rows if r.get("noise_draws")})
    out += ["", f"### Table 4: Gaussian noise (variance 0.01, {'/'.join(map(str, draws)) or '?'} draws per seed)", "",
            "| data set | RIM noisy (change) | parallel LSTMs | EntNet | RMC | IndRNN | runner-up | noisy gap [95% CI], p "
            "| verdict (noisy) | growth gap (runner-up − RIM) [95% CI], p | paired growth gap [95% CI] "
            "| paper's growth gap | floors (chance / majority) | verdict (growth) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in t["table4"]:
        cells = []
        for m in ["rim", "parallel_lstm"] + BASELINES:
            ch = r[f"{m}_change"]
            cells.append(fmt.cell(r, f"{m}_noisy") + (f" ({ch:+.2f})" if not math.isnan(ch) else ""))
        out.append(f"| {r['dataset']} | {' | '.join(cells)} | {r['runner_up']} | {_t(r, 'noisy_gap')} "
                   f"| {r['noisy_gap_verdict']} | {_t(r, 'growth_gap')} | {_tp(r, 'growth_gap')} "
                   f"| {r['paper_growth_gap']:.2f} | {fmt.floors_cell(r)} | {r['growth_gap_verdict']} |")
    out += ["", _family_note(t["table4"])] + _excluded_md(ex["table4"], include_unhealthy)
    if t.get("fluctuation"):
        out += ["", "### Training-loss fluctuation: parallel LSTMs vs RIM", "",
                f"Second half of training: sd of (batch loss − its centred {FLUCT_WINDOW}-iteration moving "
                "average): the absolute statistic, primary. Divided by the mean of the moving average: the "
                "relative statistic, **chosen after seeing the data** (it grows whenever a method's loss is "
                "lower). Gap = parallel LSTMs − RIM (positive: parallel LSTMs fluctuate more, as the paper says).", "",
                "| data set | RIM | parallel LSTMs | gap [95% CI], p | paired gap [95% CI] | verdict "
                "| RIM (relative, post hoc) | parallel LSTMs (relative, post hoc) | gap (relative, post hoc) [95% CI], p "
                "| verdict (relative, post hoc) |", "|---|---|---|---|---|---|---|---|---|---|"]
        for r in t["fluctuation"]:
            h = (f" ({fmt.health_count(r['rim_healthy'], r['rim_runs'])})",
                 f" ({fmt.health_count(r['parallel_lstm_healthy'], r['parallel_lstm_runs'])})")
            out.append(
                f"| {r['dataset']} | {fmt.mean_sd(r['rim_abs'], r['rim_abs_sd'], digits=3)}{h[0]} "
                f"| {fmt.mean_sd(r['parallel_lstm_abs'], r['parallel_lstm_abs_sd'], digits=3)}{h[1]} "
                f"| {_t(r, 'gap_abs', 3)} | {_tp(r, 'gap_abs', 3)} | {r['gap_abs_verdict']} "
                f"| {fmt.mean_sd(r['rim_rel'], r['rim_rel_sd'], digits=3)} "
                f"| {fmt.mean_sd(r['parallel_lstm_rel'], r['parallel_lstm_rel_sd'], digits=3)} "
                f"| {_t(r, 'gap_rel', 3)} | {r['gap_rel_verdict']} |")
        out += ["", _family_note(t["fluctuation"])] + _excluded_md(ex["fluctuation"], include_unhealthy)
    if t.get("init_study"):
        out += ["", "### Initialisation study: forget-gate bias 1 (default) vs 0", "",
                "Gap = parallel LSTMs − RIM (positive: RIM better). Effect = error at forget bias 0 − at 1.", "",
                "| data set | forget bias | RIM | parallel LSTMs | gap [95% CI], p | paired gap [95% CI] | verdict "
                "| effect on RIM [95% CI], p | effect on parallel LSTMs [95% CI], p |",
                "|---|---|---|---|---|---|---|---|---|"]
        for r in t["init_study"]:
            eff = [_t(r, f"{m}_fb_effect") if f"{m}_fb_effect" in r else "" for m in ("rim", "parallel_lstm")]
            out.append(f"| {r['dataset']} | {r['forget_bias']:g} | {fmt.cell(r, 'rim')} | {fmt.cell(r, 'parallel_lstm')} "
                       f"| {_t(r, 'gap')} | {_tp(r, 'gap')} | {r['verdict']} | {eff[0]} | {eff[1]} |")
        out += ["", _family_note(t["init_study"])] + _excluded_md(ex["init_study"], include_unhealthy)
    if t.get("ablations"):
        out += ["", "### Ablations of the method", "",
                "Gap = variant − RIM in test-error points (positive: the variant is worse, so what it removes "
                "helped); growth = noisy − clean error; growth gap = variant − RIM.", "",
                "| data set | variant | what it is | test error | noisy error (growth) | gap to RIM [95% CI], p "
                "| verdict | growth gap [95% CI], p | verdict (growth) |", "|---|---|---|---|---|---|---|---|---|"]
        for r in t["ablations"]:
            gap = _t(r, "gap") if "gap" in r else "(reference)"
            gg = _t(r, "growth_gap") if "growth_gap" in r else ""
            err = fmt.mean_sd(r["error"], r["sd"]) + f" ({fmt.health_count(r['healthy'], r['runs'])})"
            out.append(f"| {r['dataset']} | {r['variant']} | {r['what']} | {err} "
                       f"| {fmt.mean_sd(r['noisy_error'], r['noisy_sd'])} ({r['growth']:+.2f}) | {gap} "
                       f"| {r.get('verdict', '')} | {gg} | {r.get('growth_gap_verdict', '')} |")
        out += ["", _family_note(t["ablations"])] + _excluded_md(ex["ablations"], include_unhealthy)
    if t.get("claims"):
        out += ["", "### The paper's claims, one by one (verdicts by the one rule, `core.report.stats.verdict`)", "",
                "A claim over all four sets holds only when its Holm-adjusted test holds on each set, and does not "
                "hold when it fails measurably on any. An average claim is tested on the pooled gap (the mean of "
                "the per-set gaps, Welch-Satterthwaite interval); the pooled tests are one family.", "",
                "| claim | paper | ours [95% CI], p raw / Holm | verdict | detail |", "|---|---|---|---|---|"]
        for r in t["claims"]:
            ours = _t(r, "pooled") if "pooled" in r else ""
            paper = f"{r['paper']:.2f}" if "paper" in r else ""
            out.append(f"| {r['claim']} | {paper} | {ours} | {r['verdict']} | {r['detail']} |")
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


def write_tables(out: Path, include_unhealthy: bool = False) -> dict:
    """Rebuild ``tables.md``, one CSV per table, ``runs.csv`` and ``summary.json`` in ``out``."""
    out = Path(out)
    rows = load_results(out)
    t = build_tables(rows, include_unhealthy)
    (out / "tables.md").write_text(tables_markdown(t, rows, include_unhealthy))
    for name, table in t.items():
        if table:
            _write_csv(out / f"{name}.csv", table)
    _write_csv(out / "runs.csv", rows)
    datasets = sorted({r["dataset"] for r in rows})
    summary = finite({"tables": t, "runs": rows, "paper": PAPER, "excluded": excluded_runs(rows, t),
                      "include_unhealthy": include_unhealthy, "floors": {d: floors(d) for d in datasets}})
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return t
