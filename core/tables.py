"""The reproduction's tables: per-run rows from the stored runs, the statistics per table,
and the Markdown / CSV / JSON files ``python -m core.reproduce tables`` writes.

What goes in: only healthy runs (``core.health``: not diverged, not collapsed) unless
``include_unhealthy``; every table counts the healthy runs per cell ("3 of 5 healthy") and
lists the runs it left out. Statistics (``core.stats``): mean and sample standard deviation
over seeds; for each difference of means a 95% Welch t-interval with its two-sided p-value,
and beside it the seed-paired t-interval (a seed gives every model the same batch order,
validation split and evaluation subset, ``core.train``). One table is one family of tests:
its Welch p-values are Holm-Bonferroni adjusted together (the paired ones as a family of
their own), and every verdict comes from ``core.stats.verdict`` on the adjusted p-value.
The claims table combines them: a claim over all four data sets holds only when it holds
on each; the paper's "average gap" claims are tested on the pooled gap (mean of the
per-set gaps). Numbers are test-error points (percent); each row carries its data set's
chance and majority-class error (``core.floors``). Cells are formatted by ``core.fmt``.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np

from . import fmt
from .fileio import finite
from .floors import floors
from .health import HEALTHY, health_of
from .paper import ABLATIONS, BASELINES, DATASET_ORDER, INIT_STUDY, PAPER, VARIANT_NOTES
from .stats import (
    holm,
    mean_sd,
    paired_test,
    pooled_gap,
    verdict,
    verdict_all,
    welch_test,
)


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


class Cells:
    """The runs of one grid by (data set, model): those the statistics use (completed and,
    unless ``include_unhealthy``, healthy) and the health count of every cell."""

    def __init__(self, rows: list[dict], include_unhealthy: bool = False):
        self.rows = rows
        self.include_unhealthy = include_unhealthy
        self.use = [r for r in rows if r.get("status") == "completed"
                    and (include_unhealthy or r.get("health", HEALTHY) == HEALTHY)]

    def values(self, ds: str, model: str, key: str, scale: float = 100.0) -> dict[int, float]:
        """seed -> ``key`` x ``scale`` over the used runs of one cell (finite values only)."""
        out = {}
        for r in self.use:
            if r["dataset"] == ds and r["model"] == model and r.get(key) is not None and math.isfinite(r[key]):
                out[r["seed"]] = float(r[key]) * scale
        return out

    def growth(self, ds: str, model: str) -> dict[int, float]:
        """seed -> noisy error − clean error (points)."""
        clean, noisy = self.values(ds, model, "test_error"), self.values(ds, model, "noisy_test_error")
        return {s: noisy[s] - clean[s] for s in noisy if s in clean}

    def health(self, ds: str, model: str) -> tuple[int, int]:
        """(healthy, all) runs of one cell, all = every run record (a diverged one too)."""
        sel = [r for r in self.rows if r["dataset"] == ds and r["model"] == model]
        return sum(1 for r in sel if r.get("status") == "completed" and r.get("health", HEALTHY) == HEALTHY), len(sel)

    def describe(self, row: dict, ds: str, model: str, key: str = "test_error", name: str | None = None) -> None:
        """``<name>_error``, ``<name>_sd``, ``<name>_healthy``, ``<name>_runs`` of one cell into ``row``."""
        name = name or model
        row[f"{name}_error"], row[f"{name}_sd"], _ = mean_sd(list(self.values(ds, model, key).values()))
        row[f"{name}_healthy"], row[f"{name}_runs"] = self.health(ds, model)


def compare(prefix: str, a: dict, b: dict) -> dict:
    """``a`` − ``b`` (seed -> value): Welch (``prefix``, ``_ci_low``, ``_ci_high``, ``_p``) and
    seed-paired (``prefix_paired`` ..., ``_paired_n``) fields of one test."""
    d, lo, hi, p = welch_test(list(a.values()), list(b.values()))
    pd_, plo, phi, pp, n = paired_test(a, b)
    return {prefix: d, f"{prefix}_ci_low": lo, f"{prefix}_ci_high": hi, f"{prefix}_p": p,
            f"{prefix}_paired": pd_, f"{prefix}_paired_ci_low": plo, f"{prefix}_paired_ci_high": phi,
            f"{prefix}_paired_p": pp, f"{prefix}_paired_n": n}


ABLATION_WORDS = ("removing it hurts (the part helps)", "removing it helps", "no measurable effect at this number of seeds")
EFFECT_WORDS = ("forget bias 0 raises the error", "forget bias 0 lowers the error",
                "no measurable effect at this number of seeds")


def adjust_family(rows: list[dict], prefixes, words: dict | None = None) -> int:
    """Holm-adjust every test ``prefix`` of ``rows`` (one table = one family) and set its verdict.

    Adds ``<prefix>_p_holm``, ``<prefix>_paired_p_holm`` (the paired tests: a family of their
    own) and ``<prefix>_verdict`` (``core.stats.verdict`` on the adjusted p; ``words``:
    prefix -> (above, below, neither) where the claim is worded otherwise). Each row gets
    ``holm_m``, the family's number of tests. Returns it."""
    m = 0
    for kind in ("", "_paired"):
        keys = [(r, pre) for r in rows for pre in prefixes if f"{pre}{kind}_p" in r]
        adj = holm([r[f"{pre}{kind}_p"] for r, pre in keys])
        for (r, pre), q in zip(keys, adj, strict=True):
            r[f"{pre}{kind}_p_holm"] = float(q)
        if not kind:
            m = int(np.isfinite(adj).sum())
    for r in rows:
        r["holm_m"] = m
        for pre in prefixes:
            if pre in r:
                r[f"{pre}_verdict"] = verdict(r[pre], r[f"{pre}_p_holm"], *(words or {}).get(pre, ()))
    return m


def _floor_fields(ds: str) -> dict:
    f = floors(ds)
    return {"chance_error": 100 * f["chance_error"], "majority_error": 100 * f["majority_error"]}


def table2(c: Cells, datasets) -> list[dict]:
    """RIM vs parallel LSTMs: gap = parallel − RIM (positive: RIM better)."""
    out = []
    for ds in datasets:
        rim, pl = c.values(ds, "rim", "test_error"), c.values(ds, "parallel_lstm", "test_error")
        if not (c.health(ds, "rim")[1] and c.health(ds, "parallel_lstm")[1]):
            continue
        row = {"dataset": ds}
        c.describe(row, ds, "rim")
        c.describe(row, ds, "parallel_lstm")
        row.update(seeds=min(len(rim), len(pl)), **compare("gap", pl, rim), paper_gap=PAPER["vs_parallel_gap"][ds],
                   **_floor_fields(ds))
        out.append(row)
    adjust_family(out, ["gap"])
    for r in out:
        r["verdict"] = r["gap_verdict"]
    return out


def table3(c: Cells, datasets) -> list[dict]:
    """RIM vs EntNet, RMC, IndRNN: gap = baseline − RIM for each; per set, "RIM lowest" holds
    only when it holds against each baseline (``verdict_all``); the runner-up's gap beside the paper's."""
    out = []
    for ds in datasets:
        rim = c.values(ds, "rim", "test_error")
        present = [b for b in BASELINES if c.health(ds, b)[1]]
        if not (c.health(ds, "rim")[1] and present):
            continue
        row = {"dataset": ds}
        c.describe(row, ds, "rim")
        base = {}
        for b in present:
            c.describe(row, ds, b)
            base[b] = c.values(ds, b, "test_error")
            row.update(compare(f"gap_{b}", base[b], rim))
        have = {b: v for b, v in base.items() if v}
        row.update(runner_up=min(have, key=lambda b: np.mean(list(have[b].values()))) if have else "",
                   paper_gap=PAPER["vs_runner_up_gap"][ds], paper_runner_up=PAPER["runner_up"].get(ds, ""),
                   rim_lowest=bool(rim) and bool(have) and all(
                       np.mean(list(rim.values())) < np.mean(list(v.values())) for v in have.values()),
                   baselines=present, **_floor_fields(ds))
        out.append(row)
    adjust_family(out, [f"gap_{b}" for b in BASELINES])
    for r in out:
        ru = r["runner_up"]
        for suffix in ("", "_ci_low", "_ci_high", "_p", "_p_holm", "_paired", "_paired_ci_low", "_paired_ci_high",
                       "_paired_p", "_paired_p_holm", "_verdict"):
            r[f"gap{suffix}"] = r.get(f"gap_{ru}{suffix}", math.nan) if ru else math.nan
        r["verdict"], groups = verdict_all({b: r.get(f"gap_{b}_verdict") for b in r["baselines"]}, r["baselines"])
        r["verdict_detail"] = _groups_text(groups, fmt.short_method_title)
    return out


def table4(c: Cells, datasets) -> list[dict]:
    """Gaussian noise: noisy error and its change from clean per method; the runner-up (lowest
    noisy error of the others) against RIM on noisy error and on growth (noisy − clean)."""
    out = []
    models = ["rim", "parallel_lstm"] + BASELINES
    for ds in datasets:
        noisy = {m: c.values(ds, m, "noisy_test_error") for m in models}
        others = {m: noisy[m] for m in models[1:] if noisy[m]}
        if not (noisy["rim"] and others):
            continue
        runner = min(others, key=lambda m: np.mean(list(others[m].values())))
        row = {"dataset": ds}
        for m in models:
            c.describe(row, ds, m, "noisy_test_error", name=f"{m}_noisy")
            g = c.growth(ds, m)
            row[f"{m}_change"] = mean_sd(list(g.values()))[0] if g else math.nan
        row.update(runner_up=runner, **compare("noisy_gap", others[runner], noisy["rim"]),
                   **compare("growth_gap", c.growth(ds, runner), c.growth(ds, "rim")),
                   paper_growth_gap=PAPER["noise_growth_gap"][ds], **_floor_fields(ds))
        out.append(row)
    adjust_family(out, ["noisy_gap", "growth_gap"])
    return out


def fluctuation_table(c: Cells, datasets) -> list[dict]:
    """Loss fluctuation, parallel LSTMs − RIM (positive: the parallel LSTMs' loss jitters more):
    absolute (primary) and relative (chosen after seeing the data)."""
    out = []
    for ds in datasets:
        row = {"dataset": ds}
        for key, name in (("loss_fluct", "abs"), ("loss_fluct_rel", "rel")):
            rim, pl = c.values(ds, "rim", key, 1.0), c.values(ds, "parallel_lstm", key, 1.0)
            if not (rim and pl):
                break
            row[f"rim_{name}"], row[f"rim_{name}_sd"], n_r = mean_sd(list(rim.values()))
            row[f"parallel_lstm_{name}"], row[f"parallel_lstm_{name}_sd"], n_p = mean_sd(list(pl.values()))
            row.update(compare(f"gap_{name}", pl, rim), seeds=min(n_r, n_p))
        else:
            row["rim_healthy"], row["rim_runs"] = c.health(ds, "rim")
            row["parallel_lstm_healthy"], row["parallel_lstm_runs"] = c.health(ds, "parallel_lstm")
            out.append(row)
    adjust_family(out, ["gap_abs", "gap_rel"])
    return out


def ablation_table(c: Cells, datasets) -> list[dict]:
    """Every ablation of rim (and parallel LSTMs) against the paper's rim, per data set.

    gap = variant − rim in test-error points (positive: the variant is worse, so the removed
    part helped), growth gap likewise. Present only where rim and at least one variant ran."""
    out = []
    for ds in datasets:
        rim = c.values(ds, "rim", "test_error")
        if not rim or not any(c.health(ds, v)[1] for v in ABLATIONS if v.startswith("rim_")):
            continue
        g_rim = c.growth(ds, "rim")
        for name in ABLATIONS:
            if not c.health(ds, name)[1]:
                continue
            vals = c.values(ds, name, "test_error")
            m, s, n = mean_sd(list(vals.values()))
            mn, sn, _ = mean_sd(list(c.values(ds, name, "noisy_test_error").values()))
            g = c.growth(ds, name)
            row = {"dataset": ds, "variant": name, "what": VARIANT_NOTES.get(name, ""), "error": m, "sd": s,
                   "seeds": n, "noisy_error": mn, "noisy_sd": sn, "growth": mean_sd(list(g.values()))[0],
                   **dict(zip(("healthy", "runs"), c.health(ds, name), strict=True)), **_floor_fields(ds)}
            if name != "rim":
                row.update(compare("gap", vals, rim), **compare("growth_gap", g, g_rim))
            out.append(row)
    adjust_family(out, ["gap", "growth_gap"], {"gap": ABLATION_WORDS, "growth_gap": ABLATION_WORDS})
    for r in out:
        if "gap_verdict" in r:
            r["verdict"] = r["gap_verdict"]
    return out


def init_table(c: Cells, datasets) -> list[dict]:
    """The initialisation study: rim vs parallel LSTMs at forget bias 1 (default) and 0.

    gap = parallel − rim (positive: rim better), as in Table 2, at each forget bias; and the
    effect of the forget bias on each model (fb0 − fb1)."""
    out = []
    pairs = {1.0: ("rim", "parallel_lstm"), 0.0: ("rim_fb0", "parallel_lstm_fb0")}
    for ds in datasets:
        if not any(c.health(ds, m)[1] for m in pairs[0.0]):
            continue
        for fb, (r_name, p_name) in pairs.items():
            rim, pl = c.values(ds, r_name, "test_error"), c.values(ds, p_name, "test_error")
            if not (c.health(ds, r_name)[1] and c.health(ds, p_name)[1]):
                continue
            row = {"dataset": ds, "forget_bias": fb, "seeds": min(len(rim), len(pl))}
            c.describe(row, ds, r_name, name="rim")
            c.describe(row, ds, p_name, name="parallel_lstm")
            row.update(compare("gap", pl, rim), **_floor_fields(ds))
            if fb == 0.0:  # how much the forget bias moves each model (fb0 - fb1)
                for name, one in (("rim", "rim"), ("parallel_lstm", "parallel_lstm")):
                    row.update(compare(f"{name}_fb_effect", c.values(ds, f"{one}_fb0", "test_error"),
                                       c.values(ds, one, "test_error")))
            out.append(row)
    adjust_family(out, ["gap", "rim_fb_effect", "parallel_lstm_fb_effect"],
                  {"rim_fb_effect": EFFECT_WORDS, "parallel_lstm_fb_effect": EFFECT_WORDS})
    for r in out:
        r["verdict"] = r["gap_verdict"]
    return out


def _groups_text(groups: dict, name=fmt.dataset_title) -> str:
    """``"holds on: MNIST; cannot tell on: CIFAR-10"`` (the non-empty groups)."""
    return "; ".join(f"{k} on: {', '.join(name(d) for d in v)}" for k, v in groups.items() if v)


CLAIMS = [  # (claim id, the paper's claim in words, table, test prefix, pooled paper number key)
    ("vs_parallel_all", "Lower test error than parallel LSTMs on all four sets", "table2", "gap", None),
    ("vs_parallel_mean", "Average gap to parallel LSTMs over the four sets", "table2", "gap", "vs_parallel_gap"),
    ("vs_baselines_all", "Lowest test error against EntNet, RMC, IndRNN on all four sets", "table3", "", None),
    ("vs_runner_up_mean", "Average gap to the runner-up over the four sets", "table3", "gap", "vs_runner_up_gap"),
    ("noisy_lowest_all", "Lowest error under Gaussian noise (var 0.01) on all four sets", "table4", "noisy_gap", None),
    ("growth_all", "Error grows less under noise than the runner-up's on all four sets", "table4", "growth_gap", None),
    ("growth_mean", "Average growth gap over the four sets", "table4", "growth_gap", "noise_growth_gap"),
    ("fluct_abs_all", "Parallel LSTMs' training loss fluctuates more (absolute; primary statistic)", "fluctuation",
     "gap_abs", None),
    ("fluct_rel_all", "Parallel LSTMs' training loss fluctuates more (relative to its level; chosen after seeing "
     "the data)", "fluctuation", "gap_rel", None),
]


def _pooled_samples(c: Cells, table: str, row: dict) -> tuple[list, list]:
    """(other, rim) samples behind a row's tested gap, for the pooled gap."""
    ds = row["dataset"]
    if table == "table2":
        a, b = c.values(ds, "parallel_lstm", "test_error"), c.values(ds, "rim", "test_error")
    elif table == "table3":
        a, b = c.values(ds, row["runner_up"], "test_error") if row["runner_up"] else {}, c.values(ds, "rim", "test_error")
    else:
        a, b = c.growth(ds, row["runner_up"]), c.growth(ds, "rim")
    return list(a.values()), list(b.values())


def claims_table(c: Cells, t: dict) -> list[dict]:
    """The paper's claims, one per row, each with the verdict the one rule gives.

    "All four sets": ``verdict_all`` over the table's per-set verdicts (Holm-adjusted within
    that table). "Average gap": the pooled gap (``core.stats.pooled_gap``); these tests are a
    family of their own, Holm-adjusted together."""
    out = []
    for cid, claim, table, prefix, mean_key in CLAIMS:
        rows = t.get(table) or []
        row = {"claim_id": cid, "claim": claim, "table": table}
        if mean_key is None:
            key = f"{prefix}_verdict" if prefix else "verdict"
            row["verdict"], groups = verdict_all({r["dataset"]: r.get(key) for r in rows}, DATASET_ORDER)
            row["detail"] = _groups_text(groups)
        else:
            usable = [r for r in rows if r.get(prefix) is not None and not math.isnan(r[prefix])]
            row.update(zip(("pooled", "pooled_ci_low", "pooled_ci_high", "pooled_p"),
                           pooled_gap([_pooled_samples(c, table, r) for r in usable]), strict=True))
            row.update(paper=PAPER["stated_mean"][mean_key], pooled_sets=[r["dataset"] for r in usable])
            missing = [fmt.dataset_title(d) for d in DATASET_ORDER if d not in row["pooled_sets"]]
            row["detail"] = (f"mean of {len(usable)} per-set gaps" + (f"; missing: {', '.join(missing)}" if missing
                                                                      else ""))
        out.append(row)
    adjust_family(out, ["pooled"])
    for r in out:
        if "pooled_verdict" in r:
            r["verdict"] = r["pooled_verdict"]
    return out


def build_tables(rows: list[dict], include_unhealthy: bool = False) -> dict:
    """The tables as lists of dicts (errors in percent points), the claims table last."""
    datasets = [d for d in DATASET_ORDER if any(r["dataset"] == d for r in rows)]
    c = Cells(rows, include_unhealthy)
    t = {"table2": table2(c, datasets), "table3": table3(c, datasets), "table4": table4(c, datasets),
         "fluctuation": fluctuation_table(c, datasets), "ablations": ablation_table(c, datasets),
         "init_study": init_table(c, datasets)}
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
        "Left out (unhealthy; `core.health`):"
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
           "`core.health`). Gap = other − RIM (positive: RIM better) with its 95% Welch t-interval and beside it "
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
        out += ["", "### The paper's claims, one by one (verdicts by the one rule, `core.stats.verdict`)", "",
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
