"""Display frames of a reproduction summary (``results/<schedule>/summary.json``) for the pages:
errors in percent as "mean ± sd", gaps as "+d [lo, hi]" at the Holm step's level with the paper's
number beside ours; the raw numbers stay in the summary's own lists (for CSV downloads)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from ..data.datasets import DATASETS
from .columns import TABLES, frame
from .comparisons import Cells
from .floors import floors
from .fmt import (
    CI,
    dataset_title,
    display_name,
    gap,
    health_count,
    level_text,
    marked_verdict,
    mean_sd_text,
    method_title,
    num,
    p_pair,
    short_method_title,
)
from .stats import holm_levels, mean_sd, t_interval, welch_from_summary

# --- display frames of a reproduction summary (``results/<schedule>/summary.json``) --------
# errors in percent as "mean ± sd", gaps as "+d [lo, hi]" with the paper's number beside
# ours; the raw numbers stay in the summary's own lists (for CSV downloads)


def reproduction_tables(summary: dict) -> dict[str, pd.DataFrame]:
    """The reproduction tables as display frames (strings), ours beside the paper's, one per
    column spec of ``core.report.columns.TABLES``.

    table2: RIM vs parallel LSTMs; table3: RIM vs EntNet/RMC/IndRNN; table4: Gaussian noise;
    fluctuation: training-loss jitter, parallel LSTMs vs RIM; init_study, ablations, controls and
    the claims. Each method's cell says how many of its runs are healthy; each row its floors.
    Missing tables give empty frames.
    """
    tables = (summary or {}).get("tables") or {}
    return {name: frame(columns, tables.get(name) or []) for name, columns in TABLES.items()}


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
    "convergence": "convergence criterion",
    "test_error": "test error (%)", "noisy_test_error": "noisy test error (%)", "noise_draws": "noise draws",
    "iterations": "budget (iterations)", "iterations_run": "iterations trained", "train_time_s": "training time (s)", "parameters": "parameters",
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
    points with its interval at the Holm step's level (each set one family, as the CSV's p_holm and
    its ci_low / ci_high) and the unadjusted 95 % one beside it, p raw / Holm, the verdict with its mark (the reference
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
            r["_lo95"], r["_hi95"] = t_interval(w["diff"], w["se"], w["df"], 0.95)
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
            "unadjusted 95 %": gap(hundred["rim_minus_method"], r.get("_lo95"), r.get("_hi95"), 1) if tested else "",
            "p raw / Holm": p_pair(r.get("p"), r.get("p_holm")) if tested else "",
            "verdict": marked_verdict(v) if tested else "(reference)",
        })
    return pd.DataFrame(rows)


# --- the Robustness page's error table: each model's error here beside its error on the same images
@dataclass(frozen=True)
class ErrorAt:
    """One model's test error on a subset in a changed setting (noise, stretch) and on the same
    images unchanged; ``full_error``: the clean error its metadata records on the full test set."""

    name: str
    error: float
    low: float
    high: float
    n: int
    base_error: float
    full_error: float | None = None


def error_change_frames(rows: list[ErrorAt], images: str, setting: str,
                        versus: str = "clean") -> tuple[pd.DataFrame, pd.DataFrame]:
    """The error table as shown and as its CSV. Shown: the error here, the ``versus`` error on the
    same images, and the change between the two as shown (one decimal each, so the three add up);
    the full test set's clean error last, apart (other images). ``images``: what the subset's
    images are called ("sample images"); ``setting``: the CSV's name of the setting."""
    shown, numbers = [], []
    for r in rows:
        here, base = round(r.error * 100, 1), round(r.base_error * 100, 1)
        d = round(here - base, 1)
        shown.append({"model": r.name, f"test error on {r.n:,} {images}": f"{here:.1f}%",
                      f"{versus}, same {r.n:,} {images}": f"{base:.1f}%",
                      f"change vs {versus}": f"{d:+.1f} points" if d else "±0.0 points",
                      "95% interval": f"{r.low * 100:.1f}-{r.high * 100:.1f}%",
                      "clean, full test set": "–" if r.full_error is None else f"{r.full_error * 100:.2f}%"})
        numbers.append({"model": r.name, "setting": setting, "test error (%)": round(r.error * 100, 4),
                        f"{versus} error (%)": round(r.base_error * 100, 4), "95% low (%)": round(r.low * 100, 4),
                        "95% high (%)": round(r.high * 100, 4), "images": r.n})
    return pd.DataFrame(shown), pd.DataFrame(numbers)
