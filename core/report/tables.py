"""The reproduction's tables: per-run rows from the stored runs, the statistics per table,
and the Markdown / CSV / JSON files ``python -m core.reproduce tables`` writes.

Statistics (``core.report.stats``): mean and sample standard deviation over seeds; a 95% Welch
t-interval for each difference of means (unpaired: seeds are independent draws). Numbers in
the tables are test-error points (percent); cells are formatted by ``core.report.fmt``.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np

from ..fileio import finite
from . import fmt
from .paper import ABLATIONS, BASELINES, DATASET_ORDER, PAPER, VARIANT_NOTES
from .stats import mean_sd, verdict, welch_ci


def load_results(out: Path) -> list[dict]:
    rows = []
    for p in sorted((Path(out) / "runs").glob("*/*.json")):
        try:
            meta = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        m = meta.get("metrics", {})
        rows.append({"dataset": meta["dataset"], "model": meta.get("variant") or meta["model"], "seed": meta["seed"],
                     "status": meta.get("status"), "test_error": m.get("test_error"),
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
    moving average over ``window`` iterations), and that divided by the mean of the moving
    average. The first is the jitter a loss plot shows; the second discounts that a model
    with a higher loss has a noisier batch loss. NaN when the history is too short or holds
    non-finite values (a diverged run).
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


def _values(rows, ds, model, key):
    return [r[key] * 100 for r in rows
            if r["dataset"] == ds and r["model"] == model and r[key] is not None and r["status"] == "completed"]


def _finite(rows, ds, model, key):
    """Finite values of ``key`` over the completed runs of one data set and model."""
    return [r[key] for r in rows if r["dataset"] == ds and r["model"] == model and r["status"] == "completed"
            and r.get(key) is not None and math.isfinite(r[key])]


def _diverged(rows, ds, model):
    return sum(1 for r in rows if r["dataset"] == ds and r["model"] == model and r["status"] == "diverged")


def build_tables(rows: list[dict]) -> dict:
    """The three tables as lists of dicts (errors in percent points)."""
    datasets = [d for d in DATASET_ORDER if any(r["dataset"] == d for r in rows)]
    t2, t3, t4, tf = [], [], [], []
    for ds in datasets:
        rim = _values(rows, ds, "rim", "test_error")
        pl = _values(rows, ds, "parallel_lstm", "test_error")
        if rim and pl:
            d, lo, hi = welch_ci(pl, rim)
            m_r, s_r, n_r = mean_sd(rim)
            m_p, s_p, n_p = mean_sd(pl)
            t2.append({"dataset": ds, "rim_error": m_r, "rim_sd": s_r, "parallel_lstm_error": m_p,
                       "parallel_lstm_sd": s_p, "seeds": min(n_r, n_p), "gap": d, "gap_ci_low": lo,
                       "gap_ci_high": hi, "paper_gap": PAPER["vs_parallel_gap"][ds], "verdict": verdict(lo, hi)})
        # table 3: runner-up among EntNet, RMC, IndRNN by mean clean error
        base = {b: _values(rows, ds, b, "test_error") for b in BASELINES}
        base = {b: v for b, v in base.items() if v}
        if rim and base:
            runner = min(base, key=lambda b: np.mean(base[b]))
            d, lo, hi = welch_ci(base[runner], rim)
            row = {"dataset": ds, "rim_error": mean_sd(rim)[0], "rim_sd": mean_sd(rim)[1]}
            for b in BASELINES:
                m, s, _ = mean_sd(base.get(b, []))
                row[f"{b}_error"], row[f"{b}_sd"] = m, s
                row[f"{b}_diverged"] = _diverged(rows, ds, b)
            row.update(runner_up=runner, gap=d, gap_ci_low=lo, gap_ci_high=hi,
                       paper_gap=PAPER["vs_runner_up_gap"][ds], paper_runner_up=PAPER["runner_up"].get(ds, ""),
                       verdict=verdict(lo, hi), rim_lowest=bool(all(np.mean(rim) < np.mean(v) for v in base.values())))
            t3.append(row)
        # table 4: noisy error, change from clean, runner-up by noisy error among all baselines
        noisy = {m: _values(rows, ds, m, "noisy_test_error") for m in ["rim", "parallel_lstm"] + BASELINES}
        others = {m: noisy[m] for m in ["parallel_lstm"] + BASELINES if noisy[m]}
        if noisy["rim"] and others:
            runner = min(others, key=lambda m: np.mean(others[m]))
            d, lo, hi = welch_ci(_growth(rows, ds, runner), _growth(rows, ds, "rim"))
            dn, lon, hin = welch_ci(others[runner], noisy["rim"])
            row = {"dataset": ds}
            for m, vals in noisy.items():
                row[f"{m}_noisy_error"], row[f"{m}_noisy_sd"] = mean_sd(vals)[:2]
                row[f"{m}_change"] = mean_sd(_growth(rows, ds, m))[0] if vals else math.nan
            row.update(runner_up=runner, noisy_gap=dn, noisy_gap_ci_low=lon, noisy_gap_ci_high=hin,
                       noisy_verdict=verdict(lon, hin), growth_gap=d, growth_gap_ci_low=lo,
                       growth_gap_ci_high=hi, paper_growth_gap=PAPER["noise_growth_gap"][ds],
                       growth_verdict=verdict(lo, hi))
            t4.append(row)
        # loss fluctuation: parallel LSTMs vs RIM (the paper: the former fluctuates more)
        if _finite(rows, ds, "rim", "loss_fluct") and _finite(rows, ds, "parallel_lstm", "loss_fluct"):
            row = {"dataset": ds}
            for key, name in (("loss_fluct", "abs"), ("loss_fluct_rel", "rel")):
                rim_f, pl_f = _finite(rows, ds, "rim", key), _finite(rows, ds, "parallel_lstm", key)
                d, lo, hi = welch_ci(pl_f, rim_f)
                row[f"rim_{name}"], row[f"rim_{name}_sd"], n_r = mean_sd(rim_f)
                row[f"parallel_lstm_{name}"], row[f"parallel_lstm_{name}_sd"], n_p = mean_sd(pl_f)
                row.update({f"gap_{name}": d, f"gap_{name}_ci_low": lo, f"gap_{name}_ci_high": hi,
                            f"verdict_{name}": verdict(lo, hi), "seeds": min(n_r, n_p)})
            tf.append(row)
    return {"table2": t2, "table3": t3, "table4": t4, "fluctuation": tf,
            "ablations": ablation_table(rows, datasets), "init_study": init_table(rows, datasets)}


def _growth(rows, ds, model) -> list[float]:
    """Per seed: noisy error − clean error (points)."""
    clean = {r["seed"]: r["test_error"] for r in rows if r["dataset"] == ds and r["model"] == model
             and r["status"] == "completed" and r["test_error"] is not None}
    return [(r["noisy_test_error"] - clean[r["seed"]]) * 100 for r in rows
            if r["dataset"] == ds and r["model"] == model and r["status"] == "completed"
            and r["noisy_test_error"] is not None and r["seed"] in clean]


def ablation_table(rows: list[dict], datasets) -> list[dict]:
    """Every ablation of rim (and parallel LSTMs) against the paper's rim, per data set.

    gap = variant − rim in test-error points (positive: the variant is worse, so the removed
    part helped), 95% Welch interval. Present only where rim and at least one variant ran."""
    out = []
    for ds in datasets:
        rim = _values(rows, ds, "rim", "test_error")
        if not rim or not any(_values(rows, ds, v, "test_error") for v in ABLATIONS if v.startswith("rim_")):
            continue
        g_rim = _growth(rows, ds, "rim")
        for name in ABLATIONS:
            vals = _values(rows, ds, name, "test_error")
            if not vals:
                continue
            m, s, n = mean_sd(vals)
            mn, sn, _ = mean_sd(_values(rows, ds, name, "noisy_test_error"))
            row = {"dataset": ds, "variant": name, "what": VARIANT_NOTES.get(name, ""), "error": m, "sd": s,
                   "seeds": n, "noisy_error": mn, "noisy_sd": sn, "growth": mean_sd(_growth(rows, ds, name))[0]}
            if name != "rim":
                d, lo, hi = welch_ci(vals, rim)
                dg, log_, hig = welch_ci(_growth(rows, ds, name), g_rim) if g_rim else (math.nan,) * 3
                row.update(gap=d, gap_ci_low=lo, gap_ci_high=hi, verdict=ablation_verdict(lo, hi),
                           growth_gap=dg, growth_gap_ci_low=log_, growth_gap_ci_high=hig)
            out.append(row)
    return out


def ablation_verdict(lo: float, hi: float) -> str:
    """The verdict of (variant - rim): above 0, the removed part helped."""
    return verdict(lo, hi, "removing it hurts (the part helps)", "removing it helps",
                   "no measurable effect at this number of seeds")


def init_table(rows: list[dict], datasets) -> list[dict]:
    """The initialisation study: rim vs parallel LSTMs at forget bias 1 (default) and 0.

    gap = parallel − rim (positive: rim better), as in Table 2, at each forget bias; and the
    effect of the forget bias on each model (fb0 − fb1)."""
    out = []
    for ds in datasets:
        pairs = {1.0: ("rim", "parallel_lstm"), 0.0: ("rim_fb0", "parallel_lstm_fb0")}
        have = {fb: (_values(rows, ds, r, "test_error"), _values(rows, ds, p, "test_error"))
                for fb, (r, p) in pairs.items()}
        if not (have[0.0][0] or have[0.0][1]):
            continue
        for fb, (rim, pl) in have.items():
            if not (rim and pl):
                continue
            d, lo, hi = welch_ci(pl, rim)
            (mr, sr, nr), (mp, sp, np_) = mean_sd(rim), mean_sd(pl)
            row = {"dataset": ds, "forget_bias": fb, "rim_error": mr, "rim_sd": sr, "parallel_lstm_error": mp,
                   "parallel_lstm_sd": sp, "seeds": min(nr, np_), "gap": d, "gap_ci_low": lo, "gap_ci_high": hi,
                   "verdict": verdict(lo, hi)}
            if fb == 0.0:  # how much the forget bias moves each model (fb0 - fb1)
                for name, (v0, v1) in (("rim", (rim, have[1.0][0])), ("parallel_lstm", (pl, have[1.0][1]))):
                    e = welch_ci(v0, v1) if v1 else (math.nan,) * 3
                    row.update({f"{name}_fb_effect": e[0], f"{name}_fb_effect_ci_low": e[1],
                                f"{name}_fb_effect_ci_high": e[2]})
            out.append(row)
    return out


def _cell(r: dict, key: str, digits: int = 2) -> str:
    """``r[key]`` with its interval ``r[key_ci_low], r[key_ci_high]`` as a table cell."""
    return fmt.gap(r[key], r[f"{key}_ci_low"], r[f"{key}_ci_high"], digits)


def tables_markdown(t: dict, rows: list[dict]) -> str:
    seeds = sorted({r["seed"] for r in rows})
    its = sorted({r["iterations"] for r in rows if r["iterations"]})
    out = [f"Test error in percent, mean ± sd over seeds {seeds} ({', '.join(map(str, its))} iterations). "
           "Gap = other − RIM (positive: RIM better), with a 95% Welch t-interval. "
           "Animals-10 is a small unbalanced real subset (1,320 images): not comparable with the full data set.", ""]
    out += ["### Table 2: RIM vs parallel LSTMs", "",
            "| data set | RIM | parallel LSTMs | gap (ours) [95% CI] | paper's gap | verdict |", "|---|---|---|---|---|---|"]
    for r in t["table2"]:
        out.append(f"| {r['dataset']} | {fmt.mean_sd(r['rim_error'], r['rim_sd'])} | {fmt.mean_sd(r['parallel_lstm_error'], r['parallel_lstm_sd'])} "
                   f"| {_cell(r, 'gap')} | {r['paper_gap']:.2f} | {r['verdict']} |")
    out += ["", "### Table 3: RIM vs EntNet, RMC, IndRNN", "",
            "| data set | RIM | EntNet | RMC | IndRNN | runner-up | gap to runner-up [95% CI] | paper's gap | verdict |",
            "|---|---|---|---|---|---|---|---|---|"]
    for r in t["table3"]:
        cells = []
        for b in BASELINES:
            c = fmt.mean_sd(r[f"{b}_error"], r[f"{b}_sd"])
            if r[f"{b}_diverged"]:
                c += f" ({r[f'{b}_diverged']} diverged)"
            cells.append(c)
        paper_ru = f" ({r['paper_runner_up']})" if r["paper_runner_up"] else ""
        out.append(f"| {r['dataset']} | {fmt.mean_sd(r['rim_error'], r['rim_sd'])} | {' | '.join(cells)} | {r['runner_up']} "
                   f"| {_cell(r, 'gap')} | {r['paper_gap']:.2f}{paper_ru} | {r['verdict']} |")
    draws = sorted({r["noise_draws"] for r in rows if r.get("noise_draws")})
    out += ["", f"### Table 4: Gaussian noise (variance 0.01, {'/'.join(map(str, draws)) or '?'} draws per seed)", "",
            "| data set | RIM noisy (change) | parallel LSTMs | EntNet | RMC | IndRNN | runner-up | noisy gap [95% CI] "
            "| growth gap (runner-up − RIM) [95% CI] | paper's growth gap | verdict (growth) |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in t["table4"]:
        cells = [f"{fmt.mean_sd(r[f'{m}_noisy_error'], r[f'{m}_noisy_sd'])} ({r[f'{m}_change']:+.2f})"
                 for m in ["rim", "parallel_lstm"] + BASELINES]
        out.append(f"| {r['dataset']} | {' | '.join(cells)} | {r['runner_up']} | {_cell(r, 'noisy_gap')} "
                   f"| {_cell(r, 'growth_gap')} | {r['paper_growth_gap']:.2f} | {r['growth_verdict']} |")
    if t.get("fluctuation"):
        out += ["", "### Training-loss fluctuation: parallel LSTMs vs RIM", "",
                f"Second half of training: sd of (batch loss − its centred {FLUCT_WINDOW}-iteration moving "
                "average), and that sd divided by the mean of the moving average (relative). Gap = parallel "
                "LSTMs − RIM (positive: parallel LSTMs fluctuate more, as the paper says).", "",
                "| data set | RIM | parallel LSTMs | gap [95% CI] | verdict | RIM (relative) | parallel LSTMs (relative) "
                "| gap (relative) [95% CI] | verdict (relative) |", "|---|---|---|---|---|---|---|---|---|"]
        for r in t["fluctuation"]:
            out.append(
                f"| {r['dataset']} | {fmt.mean_sd(r['rim_abs'], r['rim_abs_sd'], digits=3)} | {fmt.mean_sd(r['parallel_lstm_abs'], r['parallel_lstm_abs_sd'], digits=3)} "
                f"| {_cell(r, 'gap_abs', 3)} | {r['verdict_abs']} "
                f"| {fmt.mean_sd(r['rim_rel'], r['rim_rel_sd'], digits=3)} | {fmt.mean_sd(r['parallel_lstm_rel'], r['parallel_lstm_rel_sd'], digits=3)} "
                f"| {_cell(r, 'gap_rel', 3)} | {r['verdict_rel']} |")
    if t.get("init_study"):
        out += ["", "### Initialisation study: forget-gate bias 1 (default) vs 0", "",
                "Gap = parallel LSTMs − RIM (positive: RIM better). Effect = error at forget bias 0 − at 1.", "",
                "| data set | forget bias | RIM | parallel LSTMs | gap [95% CI] | verdict | effect on RIM | effect on parallel LSTMs |",
                "|---|---|---|---|---|---|---|---|"]
        for r in t["init_study"]:
            eff = [_cell(r, f"{m}_fb_effect")
                   if f"{m}_fb_effect" in r else "" for m in ("rim", "parallel_lstm")]
            out.append(f"| {r['dataset']} | {r['forget_bias']:g} | {fmt.mean_sd(r['rim_error'], r['rim_sd'])} "
                       f"| {fmt.mean_sd(r['parallel_lstm_error'], r['parallel_lstm_sd'])} "
                       f"| {_cell(r, 'gap')} | {r['verdict']} | {eff[0]} | {eff[1]} |")
    if t.get("ablations"):
        out += ["", "### Ablations of the method", "",
                "Gap = variant − RIM in test-error points (positive: the variant is worse, so what it removes "
                "helped), 95% Welch interval; growth = noisy − clean error; growth gap = variant − RIM.", "",
                "| data set | variant | what it is | test error | seeds | noisy error (growth) | gap to RIM [95% CI] "
                "| verdict | growth gap [95% CI] |", "|---|---|---|---|---|---|---|---|---|"]
        for r in t["ablations"]:
            gap = _cell(r, "gap") if "gap" in r else "(reference)"
            gg = _cell(r, "growth_gap") if "growth_gap" in r else ""
            out.append(f"| {r['dataset']} | {r['variant']} | {r['what']} | {fmt.mean_sd(r['error'], r['sd'])} | {r['seeds']} "
                       f"| {fmt.mean_sd(r['noisy_error'], r['noisy_sd'])} ({r['growth']:+.2f}) | {gap} "
                       f"| {r.get('verdict', '')} | {gg} |")
    return "\n".join(out) + "\n"


def _write_csv(path: Path, rows: list[dict]) -> None:
    """``rows`` as CSV, one column per key any row has (an empty file for no rows)."""
    with open(path, "w", newline="") as f:
        if rows:
            w = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for row in rows for k in row)))
            w.writeheader()
            w.writerows(rows)


def write_tables(out: Path) -> dict:
    """Rebuild ``tables.md``, one CSV per table, ``runs.csv`` and ``summary.json`` in ``out``."""
    out = Path(out)
    rows = load_results(out)
    t = build_tables(rows)
    (out / "tables.md").write_text(tables_markdown(t, rows))
    for name, table in t.items():
        if table:
            _write_csv(out / f"{name}.csv", table)
    _write_csv(out / "runs.csv", rows)
    summary = finite({"tables": t, "runs": rows, "paper": PAPER})
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return t


