"""The comparisons behind the reproduction tables: which runs count, one test per gap, the
Holm family of each table and the verdicts, and the claims table (``core.report.tables``
loads the runs, calls these and writes the files).

A cell's runs count when they completed and are healthy (``core.report.health``), unless
``include_unhealthy``. Every gap gets a Welch test and, beside it, the seed-paired test (a
seed gives every model the same data order, ``core.training.loop``); one table's Welch tests
are one Holm-Bonferroni family (its paired tests another), and every verdict is
``core.report.stats.verdict`` on the adjusted p-value.
"""

from __future__ import annotations

import math

import numpy as np

from . import fmt
from .floors import floors
from .health import HEALTHY
from .paper import ABLATIONS, BASELINES, DATASET_ORDER, PAPER, VARIANT_NOTES
from .stats import holm, mean_sd, paired_test, pooled_gap, verdict, verdict_all, welch_test


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
    own) and ``<prefix>_verdict`` (``core.report.stats.verdict`` on the adjusted p; ``words``:
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
    that table). "Average gap": the pooled gap (``core.report.stats.pooled_gap``); these tests are a
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
