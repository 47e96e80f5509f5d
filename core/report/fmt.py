"""Formatting shared by the Markdown tables of ``core.grid`` and the pages.

Errors are stored as fractions and shown in percent; a reproduction summary's numbers are
already in percentage points. Every formatter returns ``"n/a"`` for a missing or non-finite
value, so a half-finished grid still gives readable tables.
"""

from __future__ import annotations

import math
import re

import pandas as pd

from ..models.registry import get_spec
from .paper import BASELINES

_VERDICT_MARK = {"holds": "✅", "does not hold": "❌", "cannot tell": "❔"}
# the verdict as shown in a table cell: the legend above the tables says what each mark means
_VERDICT_SHORT = {"does not hold (the other method is better)": "does not hold",
                  "cannot tell at this number of seeds": "cannot tell",
                  "cannot tell (fewer than 2 seeds)": "cannot tell (< 2 seeds)"}


def num(v) -> float:
    """``v`` as a float, NaN when it is not a number."""
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def pct_value(v, digits: int = 2) -> float | None:
    """A fraction as a rounded percentage (a table cell that stays numeric), None when missing."""
    f = num(v)
    return round(100 * f, digits) if math.isfinite(f) else None


def pct(v, digits: int = 2) -> str:
    """A fraction as text in percent: ``0.0123`` -> ``"1.23 %"``."""
    f = num(v)
    return f"{100 * f:.{digits}f} %" if math.isfinite(f) else "n/a"


def mean_sd(m, s=None, digits: int = 2) -> str:
    """``"1.23 ± 0.45"`` (the sd left out when missing)."""
    m, s = num(m), num(s)
    if math.isnan(m):
        return "n/a"
    return f"{m:.{digits}f}" if math.isnan(s) else f"{m:.{digits}f} ± {s:.{digits}f}"


def gap(d, lo=None, hi=None, digits: int = 2) -> str:
    """A signed difference with its interval: ``"+0.35 [-0.10, +0.80]"``."""
    d, lo, hi = num(d), num(lo), num(hi)
    if math.isnan(d):
        return "n/a"
    if math.isnan(lo) or math.isnan(hi):
        return f"{d:+.{digits}f}"
    return f"{d:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]"


def verdict(v) -> str:
    """A verdict with its mark, shortened for a table cell."""
    v = str(v or "n/a")
    for key, mark in _VERDICT_MARK.items():
        if v.startswith(key):
            return f"{mark} {_VERDICT_SHORT.get(v, v)}"
    return v


def dataset_title(ds) -> str:
    """``"fashion_mnist"`` -> ``"Fashion-MNIST"``; an unknown name as it is."""
    from ..data.datasets import DATASETS

    return DATASETS[ds].title if ds in DATASETS else str(ds)


def method_title(name) -> str:
    """A registry model's title; any other name (a variant, an upload's) as it is."""
    try:
        return get_spec(name).title
    except KeyError:
        return str(name)


def short_method_title(name) -> str:
    """``"RIM (paper's method)"`` -> ``"RIM"``."""
    return method_title(name).split(" (")[0]


PROTOCOL_NAMES = {"paper": "paper protocol", "converged": "converged", "custom": "own settings"}


def protocol_title(protocol) -> str:
    """``"paper"`` -> ``"paper protocol"``, ``"converged"`` -> ``"converged"``; "" for none."""
    return PROTOCOL_NAMES.get(str(protocol or ""), str(protocol or ""))


def short_run_id(run_id) -> str:
    """The random tail of a run id (``"20261201-184459-b7899b34"`` -> ``"b7899b34"``)."""
    return str(run_id or "").rsplit("-", 1)[-1]


def model_label(model, protocol="", seed=None, source="pretrained", run_id="", dataset=None,
                stopped_at=None) -> str:
    """The one display name of a model: method, protocol, seed and where it comes from.

    ``"RIM (paper's method) · converged · seed 0 (pretrained)"``; a run adds its short id
    (``"... (trained, run b7899b34)"``), ``dataset`` puts the data set first. Every picker,
    table, legend, metric and card shows a model by this name, so two models never share one
    (pretrained: one per data set, method, protocol and seed; runs: their id).
    """
    parts = [method_title(model)]
    if protocol:
        parts.append(protocol_title(protocol))
    if seed is not None:
        parts.append(f"seed {seed}")
    where = [str(source)] if source else []
    if run_id:
        where.append(f"run {short_run_id(run_id)}")
    if stopped_at is not None:
        where.append(f"stopped at iteration {int(stopped_at):,}")
    text = " · ".join(parts) + (f" ({', '.join(where)})" if where else "")
    return f"{dataset_title(dataset)} · {text}" if dataset else text


def source_parts(source) -> tuple[str, str]:
    """A data source in plain words and where it is: ``"npz folder (/data/mnist)"`` ->
    ``("npz folder", "/data/mnist")``. The path goes in a tooltip, never in running text."""
    m = re.fullmatch(r"(.*?) \(([^()]*[/\\][^()]*)\)(.*)", str(source or ""))
    return (m.group(1) + m.group(3), m.group(2)) if m else (str(source or ""), "")


def params(n) -> str:
    """A parameter count with thousands separators, ``"n/a"`` when unknown."""
    f = num(n)
    return f"{int(f):,}" if math.isfinite(f) and f > 0 else "n/a"


# --- display frames of a reproduction summary (``results/<schedule>/summary.json``) --------
# errors in percent as "mean ± sd", gaps as "+d [lo, hi]" with the paper's number beside
# ours; the raw numbers stay in the summary's own lists (for CSV downloads)


def _ci(r: dict, key: str, digits: int = 2) -> str:
    return gap(r.get(key), r.get(f"{key}_ci_low"), r.get(f"{key}_ci_high"), digits)


def reproduction_tables(summary: dict) -> dict[str, pd.DataFrame]:
    """The reproduction tables as display frames (strings), ours beside the paper's.

    table2: RIM vs parallel LSTMs; table3: RIM vs EntNet/RMC/IndRNN (runner-up);
    table4: Gaussian noise; fluctuation: training-loss jitter, parallel LSTMs vs RIM;
    init_study and ablations. Missing tables give empty frames.
    """
    tables = (summary or {}).get("tables") or {}
    t2 = [{
        "data set": dataset_title(r.get("dataset")),
        "RIM error (%)": mean_sd(r.get("rim_error"), r.get("rim_sd")),
        "parallel LSTMs error (%)": mean_sd(r.get("parallel_lstm_error"), r.get("parallel_lstm_sd")),
        "gap, ours (points) [95% CI]": _ci(r, "gap"),
        "gap, paper (points)": mean_sd(r.get("paper_gap")),
        "verdict": verdict(r.get("verdict")),
        "seeds": r.get("seeds"),
    } for r in tables.get("table2") or []]
    t3 = []
    for r in tables.get("table3") or []:
        paper_ru = r.get("paper_runner_up")
        row = {
            "data set": dataset_title(r.get("dataset")),
            "RIM error (%)": mean_sd(r.get("rim_error"), r.get("rim_sd")),
            "runner-up, ours": method_title(r.get("runner_up")) if r.get("runner_up") else "n/a",
            "gap to runner-up, ours (points) [95% CI]": _ci(r, "gap"),
            "gap, paper (points)": mean_sd(r.get("paper_gap")),
            "verdict": verdict(r.get("verdict")),
            "RIM lowest (means)": "yes" if r.get("rim_lowest") else "no",
            "runner-up, paper": method_title(paper_ru) if paper_ru else "not stated",
        }
        for b in BASELINES:
            cell = mean_sd(r.get(f"{b}_error"), r.get(f"{b}_sd"))
            if r.get(f"{b}_diverged"):
                cell += f" ({r[f'{b}_diverged']} diverged)"
            row[f"{method_title(b)} error (%)"] = cell
        t3.append(row)
    t4 = []
    for r in tables.get("table4") or []:
        row = {
            "data set": dataset_title(r.get("dataset")),
            "runner-up (noisy)": method_title(r.get("runner_up")) if r.get("runner_up") else "n/a",
            "growth gap, ours [95% CI]": _ci(r, "growth_gap"),
            "growth gap, paper": mean_sd(r.get("paper_growth_gap")),
            "verdict: RIM's error grows less": verdict(r.get("growth_verdict")),
            "noisy gap, ours [95% CI]": _ci(r, "noisy_gap"),
            "verdict: RIM lowest under noise": verdict(r.get("noisy_verdict")),
        }
        for m in ["rim", "parallel_lstm"] + BASELINES:
            cell = mean_sd(r.get(f"{m}_noisy_error"), r.get(f"{m}_noisy_sd"))
            ch = num(r.get(f"{m}_change"))
            if cell != "n/a" and not math.isnan(ch):
                cell += f" ({ch:+.2f})"
            row[f"{short_method_title(m)} noisy error (%) (change)"] = cell
        t4.append(row)
    tf = [{
        "data set": dataset_title(r.get("dataset")),
        "RIM": mean_sd(r.get("rim_abs"), r.get("rim_abs_sd"), 3),
        "parallel LSTMs": mean_sd(r.get("parallel_lstm_abs"), r.get("parallel_lstm_abs_sd"), 3),
        "gap [95% CI]": _ci(r, "gap_abs", 3),
        "verdict": verdict(r.get("verdict_abs")),
        "RIM (relative)": mean_sd(r.get("rim_rel"), r.get("rim_rel_sd"), 3),
        "parallel LSTMs (relative)": mean_sd(r.get("parallel_lstm_rel"), r.get("parallel_lstm_rel_sd"), 3),
        "gap (relative) [95% CI]": _ci(r, "gap_rel", 3),
        "verdict (relative)": verdict(r.get("verdict_rel")),
        "seeds": r.get("seeds"),
    } for r in tables.get("fluctuation") or []]
    ti = [{
        "data set": dataset_title(r.get("dataset")),
        "forget bias": f"{num(r.get('forget_bias')):g}",
        "RIM error (%)": mean_sd(r.get("rim_error"), r.get("rim_sd")),
        "parallel LSTMs error (%)": mean_sd(r.get("parallel_lstm_error"), r.get("parallel_lstm_sd")),
        "gap (parallel − RIM) [95% CI]": _ci(r, "gap"),
        "verdict: RIM better": verdict(r.get("verdict")),
        "effect of forget bias 0 on RIM": _ci(r, "rim_fb_effect") if "rim_fb_effect" in r else "",
        "effect on parallel LSTMs": _ci(r, "parallel_lstm_fb_effect") if "parallel_lstm_fb_effect" in r else "",
        "seeds": r.get("seeds"),
    } for r in tables.get("init_study") or []]
    ta = [{
        "data set": dataset_title(r.get("dataset")),
        "variant": r.get("variant"),
        "what it is": r.get("what"),
        "test error (%)": mean_sd(r.get("error"), r.get("sd")),
        "gap to RIM [95% CI]": _ci(r, "gap") if "gap" in r else "reference",
        "verdict": r.get("verdict", ""),
        "noisy error (%)": mean_sd(r.get("noisy_error"), r.get("noisy_sd")),
        "growth gap [95% CI]": _ci(r, "growth_gap") if "growth_gap" in r else "",
        "seeds": r.get("seeds"),
    } for r in tables.get("ablations") or []]
    return {"table2": pd.DataFrame(t2), "table3": pd.DataFrame(t3), "table4": pd.DataFrame(t4),
            "fluctuation": pd.DataFrame(tf), "init_study": pd.DataFrame(ti), "ablations": pd.DataFrame(ta)}


RUN_COLUMNS = {  # summary field -> column title (errors become percent)
    "dataset": "data set", "model": "model or variant", "seed": "seed", "status": "status",
    "test_error": "test error (%)", "noisy_test_error": "noisy test error (%)", "noise_draws": "noise draws",
    "iterations": "iterations", "train_time_s": "training time (s)", "parameters": "parameters",
    "loss_fluct": "loss fluctuation", "loss_fluct_rel": "loss fluctuation (relative)",
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
    return df[[c for c in RUN_COLUMNS if c in df]].rename(columns=RUN_COLUMNS)
