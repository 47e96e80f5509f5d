"""Display frames of a reproduction summary (``results/<schedule>/summary.json``) for the pages:
errors in percent as "mean ± sd", gaps as "+d [lo, hi]" at the Holm step's level with the paper's
number beside ours; the raw numbers stay in the summary's own lists (for CSV downloads)."""

from __future__ import annotations

import math

import pandas as pd

from ..data.datasets import DATASETS
from .comparisons import Cells
from .floors import floors
from .fmt import (
    CI,
    cell,
    dataset_title,
    display_name,
    floors_cell,
    gap,
    gap_test,
    health_count,
    level_text,
    marked_verdict,
    mean_sd_text,
    method_title,
    num,
    p_pair,
    params,
    raw_interval,
    short_method_title,
)
from .paper import BASELINES
from .stats import holm_levels, mean_sd, t_interval, welch_from_summary

# --- display frames of a reproduction summary (``results/<schedule>/summary.json``) --------
# errors in percent as "mean ± sd", gaps as "+d [lo, hi]" with the paper's number beside
# ours; the raw numbers stay in the summary's own lists (for CSV downloads)


def _ci(r: dict, key: str, digits: int = 2) -> str:
    return gap(r.get(key), r.get(f"{key}_ci_low"), r.get(f"{key}_ci_high"), digits)




def _tested(r: dict, key: str, digits: int = 2) -> dict:
    """The cells of one test: gap [Holm-step interval] (Welch), p raw / Holm, the unadjusted and the
    seed-paired 95 % intervals (labelled; they decide nothing)."""
    return {f"gap {CI}": _ci(r, key, digits), "p raw / Holm": p_pair(r.get(f"{key}_p"), r.get(f"{key}_p_holm")),
            "gap [unadjusted 95 %]": raw_interval(r, key, digits),
            "paired gap [unadjusted 95 %]": _ci(r, f"{key}_paired", digits)}


def reproduction_tables(summary: dict) -> dict[str, pd.DataFrame]:
    """The reproduction tables as display frames (strings), ours beside the paper's.

    table2: RIM vs parallel LSTMs; table3: RIM vs EntNet/RMC/IndRNN; table4: Gaussian noise;
    fluctuation: training-loss jitter, parallel LSTMs vs RIM; init_study, ablations and the
    claims. Each method's cell says how many of its runs are healthy; each row its floors.
    Missing tables give empty frames.
    """
    tables = (summary or {}).get("tables") or {}
    t2 = [{
        "data set": dataset_title(r.get("dataset")),
        "RIM error (%)": cell(r, "rim"),
        "parallel LSTMs error (%)": cell(r, "parallel_lstm"),
        f"gap, ours (points) {CI}": _ci(r, "gap"),
        "p raw / Holm": p_pair(r.get("gap_p"), r.get("gap_p_holm")),
        "verdict": marked_verdict(r.get("verdict")),
        "gap, paper (points)": mean_sd_text(r.get("paper_gap")),
        "gap [unadjusted 95 %]": raw_interval(r, "gap"),
        "paired gap [unadjusted 95 %]": _ci(r, "gap_paired"),
        "floors: chance / majority (%)": floors_cell(r),
        "seeds": r.get("seeds"),
    } for r in tables.get("table2") or []]
    t3 = []
    for r in tables.get("table3") or []:
        paper_ru = r.get("paper_runner_up")
        row = {
            "data set": dataset_title(r.get("dataset")),
            "RIM error (%)": cell(r, "rim"),
            "verdict": marked_verdict(r.get("verdict")),
            f"gap to RMC (runner-up fixed in advance), ours (points) {CI}": _ci(r, "gap"),
            "gap, paper (points)": mean_sd_text(r.get("paper_gap")),
            "runner-up, paper": display_name(paper_ru) if paper_ru else "not stated",
            "lowest-mean baseline (chosen after seeing the data)":
                display_name(r.get("runner_up_posthoc")) if r.get("runner_up_posthoc") else "n/a",
        }
        for b in BASELINES:
            row[f"{display_name(b)} error (%)"] = cell(r, b) if f"{b}_runs" in r else "n/a"
            row[f"gap {display_name(b)} {CI}, p raw / Holm"] = gap_test(r, f"gap_{b}")
        row.update({"RIM lowest (means)": "yes" if r.get("rim_lowest") else "no", "per baseline": r.get("verdict_detail"),
                    "floors: chance / majority (%)": floors_cell(r)})
        t3.append(row)
    t4 = []
    for r in tables.get("table4") or []:
        post = r.get("runner_up_posthoc")
        row = {
            "data set": dataset_title(r.get("dataset")),
            f"growth gap to RMC (runner-up fixed in advance) {CI}, p raw / Holm": gap_test(r, "growth_gap"),
            "verdict: RIM's error grows less than RMC's": marked_verdict(r.get("growth_gap_verdict")),
            "growth gap, paper": mean_sd_text(r.get("paper_growth_gap")),
            "verdict: RIM lowest under noise": marked_verdict(r.get("noisy_verdict")),
            "per method (noisy)": r.get("noisy_verdict_detail"),
            f"growth gap to the parallel LSTMs {CI}, p raw / Holm": gap_test(r, "growth_gap_parallel_lstm"),
            "verdict: RIM's error grows less than the parallel LSTMs'": marked_verdict(r.get("growth_gap_parallel_lstm_verdict")),
            "runner-up chosen after seeing the data (lowest noisy error)": display_name(post) if post else "n/a",
            f"growth gap to it {CI}, p raw / Holm": gap_test(r, "growth_gap_posthoc") if post else "",
        }
        for m in ["rim", "parallel_lstm"] + BASELINES:
            c = cell(r, f"{m}_noisy")
            ch = num(r.get(f"{m}_change"))
            if not c.startswith("n/a") and not math.isnan(ch):
                c += f" ({ch:+.2f})"
            row[f"{display_name(m)} noisy error (%) (change)"] = c
        row["floors: chance / majority (%)"] = floors_cell(r)
        t4.append(row)
    tf = [{
        "data set": dataset_title(r.get("dataset")),
        "RIM": mean_sd_text(r.get("rim_abs"), r.get("rim_abs_sd"), 3),
        "parallel LSTMs": mean_sd_text(r.get("parallel_lstm_abs"), r.get("parallel_lstm_abs_sd"), 3),
        **_tested(r, "gap_abs", 3),
        "verdict": marked_verdict(r.get("gap_abs_verdict")),
        "healthy runs (RIM, parallel)": f"{health_count(r.get('rim_healthy'), r.get('rim_runs'))}, "
                                        f"{health_count(r.get('parallel_lstm_healthy'), r.get('parallel_lstm_runs'))}",
        f"gap (relative, chosen after seeing the data) {CI}": _ci(r, "gap_rel", 3),
        "p raw / Holm (relative)": p_pair(r.get("gap_rel_p"), r.get("gap_rel_p_holm")),
        "verdict (relative, post hoc)": marked_verdict(r.get("gap_rel_verdict")),
        "seeds": r.get("seeds"),
    } for r in tables.get("fluctuation") or []]
    ti = [{
        "data set": dataset_title(r.get("dataset")),
        "forget bias": f"{num(r.get('forget_bias')):g}",
        "RIM error (%)": cell(r, "rim"),
        "parallel LSTMs error (%)": cell(r, "parallel_lstm"),
        f"gap (parallel − RIM) {CI}": _ci(r, "gap"),
        "p raw / Holm": p_pair(r.get("gap_p"), r.get("gap_p_holm")),
        "verdict: RIM better": marked_verdict(r.get("verdict")),
        "effect of forget bias 0 on RIM": gap_test(r, "rim_fb_effect") if "rim_fb_effect" in r else "",
        "effect on parallel LSTMs": gap_test(r, "parallel_lstm_fb_effect") if "parallel_lstm_fb_effect" in r else "",
        "seeds": r.get("seeds"),
    } for r in tables.get("init_study") or []]
    ta = [{
        "data set": dataset_title(r.get("dataset")),
        "variant": display_name(r.get("variant")),
        "what it is": r.get("what"),
        "test error (%)": mean_sd_text(r.get("error"), r.get("sd")) + (
            f" ({health_count(r.get('healthy'), r.get('runs'))})" if r.get("runs") else ""),
        f"gap to RIM {CI}, p raw / Holm": gap_test(r, "gap") if "gap" in r else "reference",
        "verdict": r.get("gap_verdict", ""),
        "noisy error (%)": mean_sd_text(r.get("noisy_error"), r.get("noisy_sd")),
        f"growth gap {CI}, p raw / Holm": gap_test(r, "growth_gap") if "growth_gap" in r else "",
        "floors: chance / majority (%)": floors_cell(r),
        "seeds": r.get("seeds"),
    } for r in tables.get("ablations") or []]
    tcon = [{
        "data set": dataset_title(r.get("dataset")),
        "control": display_name(r.get("control")),
        "parameters": params(r.get("parameters")),
        "n seeds (healthy of runs)": f"{r.get('seeds')} ({health_count(r.get('healthy'), r.get('runs'))})",
        "test error (%)": mean_sd_text(r.get("error"), r.get("sd")),
        f"gap to RIM {CI}, p raw / Holm": gap_test(r, "gap") if "gap" in r else "reference",
        "verdict": marked_verdict(r.get("gap_verdict")) if "gap" in r else "",
        "equivalence (TOST, margin ±)": (f"{marked_verdict(r.get('equiv_verdict'))} (±{num(r.get('margin')):.2f})"
                                         if "equiv_verdict" in r else ""),
        "what it is": r.get("what"),
        "floors: chance / majority (%)": floors_cell(r),
    } for r in tables.get("controls") or []]
    tc = [{
        "claim": r.get("claim"),
        "verdict": marked_verdict(r.get("verdict")),
        "paper (points)": mean_sd_text(r.get("paper")) if r.get("paper") is not None else "",
        f"ours: pooled gap {CI}, p raw / Holm": gap_test(r, "pooled") if "pooled" in r else "",
        "detail": r.get("detail"),
    } for r in tables.get("claims") or []]
    return {"table2": pd.DataFrame(t2), "table3": pd.DataFrame(t3), "table4": pd.DataFrame(t4),
            "fluctuation": pd.DataFrame(tf), "init_study": pd.DataFrame(ti), "ablations": pd.DataFrame(ta),
            "controls": pd.DataFrame(tcon), "claims": pd.DataFrame(tc)}




def dataset_order(datasets) -> list[str]:
    """The distinct ``datasets`` in the order of ``core.data.datasets.DATASETS``, unknown ones last."""
    order = list(DATASETS)
    return sorted(set(datasets), key=lambda d: order.index(d) if d in order else len(order))


def spread_frame(rows: list[dict], methods) -> pd.DataFrame:
    """Mean ± sd (and n) of clean and noisy error per data set and method (in ``methods``' order)
    over the healthy runs (``Cells``), in percent, with each cell's health count and its data set's
    floors; one row per cell with runs."""
    c = Cells(rows)
    out = []
    for ds in dataset_order(r["dataset"] for r in rows):
        f = floors(ds)
        for m in methods:
            healthy, runs = c.health(ds, m)
            if not runs:
                continue
            row = {"data set": dataset_title(ds), "method": method_title(m), "healthy": health_count(healthy, runs)}
            for key, label in (("test_error", "clean"), ("noisy_test_error", "noisy")):
                mean, sd, n = mean_sd(list(c.values(ds, m, key).values()))
                row[f"{label} error mean (%)"] = round(mean, 2) if n else None
                row[f"{label} error sd (%)"] = round(sd, 2) if n > 1 else None
                row[f"{label} seeds"] = n
            row["chance error (%)"] = round(100 * f["chance_error"], 2) if f["classes"] else None
            row["majority-class error (%)"] = round(100 * f["majority_error"], 2) if f["classes"] else None
            out.append(row)
    return pd.DataFrame(out)


RUN_COLUMNS = {  # summary field -> column title (errors become percent)
    "dataset": "data set", "model": "model or variant", "seed": "seed", "status": "status", "health": "health",
    "test_error": "test error (%)", "noisy_test_error": "noisy test error (%)", "noise_draws": "noise draws",
    "iterations": "iterations", "train_time_s": "training time (s)", "parameters": "parameters",
    "loss_fluct": "loss fluctuation", "loss_fluct_rel": "loss fluctuation (relative)",
    "health_reasons": "why unhealthy",
}


def runs_frame(summary: dict) -> pd.DataFrame:
    """The per-run rows of a summary with readable column titles; errors in percent."""
    rows = (summary or {}).get("runs") or []
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    for col in ("test_error", "noisy_test_error"):
        if col in df:
            df[col] = pd.to_numeric(df[col], errors="coerce") * 100
    if "dataset" in df:
        df["dataset"] = [dataset_title(d) for d in df["dataset"]]
    if "model" in df:
        df["model"] = [display_name(m) for m in df["model"]]
    return df[[c for c in RUN_COLUMNS if c in df]].rename(columns=RUN_COLUMNS)


HANDWRITING_COLUMNS = ("set", "half", "method", "seeds", "mean", "sd", "rim_minus_method", "ci_low", "ci_high",
                       "p", "p_holm", "verdict")  # what `python -m core.studies.handwriting generalisation` writes


def handwriting_table(summary: pd.DataFrame, titles: dict | None = None, reference: str = "rim") -> pd.DataFrame:
    """The generalisation table of ``python -m core.studies.handwriting generalisation`` (its summary CSV:
    one row per set and method, accuracies as fractions, ``reference`` minus method in
    accuracy fractions) as shown: accuracy in percent, mean ± sd over seeds, the difference in
    points with its interval at the Holm step's level (each set one family, as the CSV's p_holm) and
    the unadjusted 95 % one beside it, p raw / Holm, the verdict with its mark (the reference
    reading a set better is "holds", the method reading it better "does not hold"). ``titles``: a set's short name as shown (the half
    measured follows it); ValueError when ``summary`` lacks the CSV's columns."""
    if summary is None or summary.empty:
        return pd.DataFrame()
    missing = [c for c in HANDWRITING_COLUMNS if c not in summary.columns]
    if missing:
        raise ValueError(f"not a generalisation table: no column {', '.join(missing)} "
                         "(rebuild it with `python -m core.studies.handwriting generalisation`)")
    rows = []
    records = summary.to_dict("records")
    sets = list(dict.fromkeys(r.get("set") for r in records))
    records.sort(key=lambda r: (sets.index(r.get("set")), r.get("method") != reference))  # the reference first
    for s in sets:  # the interval at the Holm step's level of each set's family (the CSV's definition)
        group = [r for r in records if r.get("set") == s]
        ref = next((r for r in group if r.get("method") == reference), None)
        tested = [r for r in group if r is not ref and math.isfinite(num(r.get("p")))]
        for r, lev in zip(tested, holm_levels([num(r.get("p")) for r in tested]), strict=True):
            w = welch_from_summary(100 * num(ref["mean"]), 100 * num(ref["sd"]), int(num(ref["seeds"])),
                                   100 * num(r["mean"]), 100 * num(r["sd"]), int(num(r["seeds"])))
            r["_lo"], r["_hi"] = t_interval(w["diff"], w["se"], w["df"], lev)
            r["_level"] = lev
    for r in records:
        v = str(r.get("verdict") or "")
        if v.startswith(f"{reference} reads"):
            v = "holds"  # the claim of the table: the reference reads the set better
        elif v.endswith("reads it better"):
            v = "does not hold"
        hundred = {k: 100 * num(r.get(k)) for k in ("mean", "sd", "rim_minus_method", "ci_low", "ci_high")}
        tested = r.get("method") != reference and math.isfinite(hundred["rim_minus_method"])
        rows.append({
            "set": f"{(titles or {}).get(r.get('set'), r.get('set'))} ({r.get('half')} half)",
            "method": method_title(r.get("method")),
            "seeds": int(num(r.get("seeds"))) if math.isfinite(num(r.get("seeds"))) else None,
            "accuracy % (mean ± sd)": mean_sd_text(hundred["mean"], hundred["sd"], 1),
            f"{short_method_title(reference)} − method, points {CI}":
                gap(hundred["rim_minus_method"], r.get("_lo"), r.get("_hi"), 1) if tested else "",
            "level": level_text(r.get("_level")) if tested else "",
            "unadjusted 95 %": gap(hundred["rim_minus_method"], hundred["ci_low"], hundred["ci_high"], 1) if tested else "",
            "p raw / Holm": p_pair(r.get("p"), r.get("p_holm")) if tested else "",
            "verdict": marked_verdict(v) if tested else "(reference)",
        })
    return pd.DataFrame(rows)
