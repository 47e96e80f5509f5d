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
from .stats import (
    holm,
    holm_levels,
    magnitude,
    mean_sd,
    paired_test,
    pooled_gap,
    pooled_se_df,
    t_interval,
    verdict,
    verdict_all,
    welch_se_df,
    welch_test,
)


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
    """``a`` − ``b`` (seed -> value): the Welch test (``prefix``, ``_raw_ci_low``/``_raw_ci_high``: the
    unadjusted 95 % interval, ``_p``, ``_se``, ``_df``; ``adjust_family`` adds the interval at the Holm
    step's level as ``_ci_low``/``_ci_high``) and the seed-paired one (``prefix_paired`` ...,
    ``_paired_n``: unadjusted 95 %, shown beside, no verdict)."""
    d, lo, hi, p = welch_test(list(a.values()), list(b.values()))
    se, df = welch_se_df(list(a.values()), list(b.values()))
    pd_, plo, phi, pp, n = paired_test(a, b)
    return {prefix: d, f"{prefix}_raw_ci_low": lo, f"{prefix}_raw_ci_high": hi, f"{prefix}_p": p,
            f"{prefix}_se": se, f"{prefix}_df": df, f"{prefix}_n_a": len(a), f"{prefix}_n_b": len(b),
            f"{prefix}_paired": pd_, f"{prefix}_paired_ci_low": plo, f"{prefix}_paired_ci_high": phi,
            f"{prefix}_paired_p": pp, f"{prefix}_paired_n": n}


ABLATION_WORDS = ("removing it hurts (the part helps)", "removing it helps", "no measurable effect at this number of seeds")
EFFECT_WORDS = ("forget bias 0 raises the error", "forget bias 0 lowers the error",
                "no measurable effect at this number of seeds")


def adjust_family(rows: list[dict], prefixes, words: dict | None = None, pending: int = 0) -> int:
    """Holm-adjust every Welch test ``prefix`` of ``rows`` (one table = one family) and set its verdict.

    Adds ``<prefix>_p_holm``, ``<prefix>_level`` (the confidence level of the Holm step that decides
    the test, ``core.report.stats.holm_levels``), ``<prefix>_ci_low``/``_ci_high`` (the interval at
    that level: it excludes 0 exactly when the verdict rejects) and ``<prefix>_verdict``
    (``core.report.stats.verdict`` on the adjusted p; ``words``: prefix -> (above, below, neither)
    where the claim is worded otherwise). A test already decided in another table's family
    (``<prefix>_family`` set) keeps that family's numbers. ``pending``: planned tests of the family
    whose runs are not in yet (``core.report.stats.holm``: counted, never rejected). Each row gets
    ``holm_m``, the family's number of tests (the pending ones included), and ``holm_pending`` where
    some are. Returns ``holm_m``."""
    keys = [(r, pre) for r in rows for pre in prefixes if f"{pre}_p" in r and not r.get(f"{pre}_family")]
    ps = [r[f"{pre}_p"] for r, pre in keys]
    adj, levels = holm(ps, pending), holm_levels(ps, pending=pending)
    for (r, pre), q, lev in zip(keys, adj, levels, strict=True):
        r[f"{pre}_p_holm"] = float(q)
        r[f"{pre}_level"] = float(lev)
        r[f"{pre}_ci_low"], r[f"{pre}_ci_high"] = t_interval(r[pre], r.get(f"{pre}_se", math.nan),
                                                              r.get(f"{pre}_df", math.nan), lev)
    m = int(np.isfinite(adj).sum()) + max(0, int(pending))
    for r in rows:
        r["holm_m"] = m
        if pending > 0:
            r["holm_pending"] = int(pending)
        for pre in prefixes:
            if pre in r and not r.get(f"{pre}_family"):
                r[f"{pre}_verdict"] = verdict(r[pre], r.get(f"{pre}_p_holm", math.nan), *(words or {}).get(pre, ()))
    return m


def adopt(row: dict, prefix: str, source: dict, source_prefix: str, family: str) -> None:
    """Copy a test decided in another table's family (its p, interval and verdict) into ``row`` as
    ``prefix``, marked ``<prefix>_family`` = ``family``: one comparison, one p, wherever it is printed."""
    for k, v in source.items():
        if k == source_prefix or k.startswith(source_prefix + "_"):
            row[prefix + k[len(source_prefix):]] = v
    row[f"{prefix}_family"] = family


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
        r["gap_magnitude"] = _magnitude(r, "gap", r.get("paper_gap"))
    return out


FIXED_RUNNER_UP = "rmc"  # the paper's named runner-up (Table 3, MNIST): fixed before any run, the primary comparison


def _copy_test(row: dict, prefix: str, source_prefix: str) -> None:
    """Every field of test ``source_prefix`` of ``row`` again under ``prefix`` (the same test, one family)."""
    for k in [k for k in row if k == source_prefix or k.startswith(source_prefix + "_")]:
        row[prefix + k[len(source_prefix):]] = row[k]


def _lowest(values: dict) -> str:
    have = {m: v for m, v in values.items() if v}
    return min(have, key=lambda m: np.mean(list(have[m].values()))) if have else ""


def table3(c: Cells, datasets) -> list[dict]:
    """RIM vs EntNet, RMC, IndRNN: gap = baseline − RIM for each; per set, "RIM lowest" holds
    only when it holds against each baseline (``verdict_all``). The runner-up: RMC, the paper's
    named one, fixed in advance (``gap``); beside it the lowest-mean baseline, chosen after seeing
    the data (``gap_posthoc``)."""
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
        row.update(runner_up=FIXED_RUNNER_UP if FIXED_RUNNER_UP in have else "", runner_up_posthoc=_lowest(have),
                   paper_gap=PAPER["vs_runner_up_gap"][ds], paper_runner_up=PAPER["runner_up"].get(ds, ""),
                   rim_lowest=bool(rim) and bool(have) and all(
                       np.mean(list(rim.values())) < np.mean(list(v.values())) for v in have.values()),
                   baselines=present, **_floor_fields(ds))
        out.append(row)
    adjust_family(out, [f"gap_{b}" for b in BASELINES])
    for r in out:
        for name, ru in (("gap", r["runner_up"]), ("gap_posthoc", r["runner_up_posthoc"])):
            if ru:
                _copy_test(r, name, f"gap_{ru}")
        r["verdict"], groups = verdict_all({b: r.get(f"gap_{b}_verdict") for b in r["baselines"]}, r["baselines"])
        r["verdict_detail"] = _groups_text(groups, fmt.short_method_title)
        r["gap_magnitude"] = _magnitude(r, "gap", r.get("paper_gap"))
    return out


NOISE_OTHERS = ["parallel_lstm"] + BASELINES


def table4(c: Cells, datasets) -> list[dict]:
    """Gaussian noise: noisy error and its change from clean per method; RIM against each other
    method on noisy error (``noisy_gap_<m>``: "lowest under noise" holds when it holds against
    each) and on growth (noisy − clean, ``growth_gap_<m>``). The runner-up of the growth claim is
    RMC, fixed in advance (``growth_gap``, ``noisy_gap``); the lowest noisy error of the others,
    chosen after seeing the data, beside it (``*_posthoc``). One family: every test of the table."""
    out = []
    models = ["rim"] + NOISE_OTHERS
    for ds in datasets:
        noisy = {m: c.values(ds, m, "noisy_test_error") for m in models}
        others = {m: noisy[m] for m in NOISE_OTHERS if noisy[m]}
        if not (noisy["rim"] and others):
            continue
        row = {"dataset": ds}
        for m in models:
            c.describe(row, ds, m, "noisy_test_error", name=f"{m}_noisy")
            g = c.growth(ds, m)
            row[f"{m}_change"] = mean_sd(list(g.values()))[0] if g else math.nan
        for m in others:
            row.update(compare(f"noisy_gap_{m}", others[m], noisy["rim"]),
                       **compare(f"growth_gap_{m}", c.growth(ds, m), c.growth(ds, "rim")))
        row.update(runner_up=FIXED_RUNNER_UP if FIXED_RUNNER_UP in others else "", runner_up_posthoc=_lowest(others),
                   others=list(others), paper_growth_gap=PAPER["noise_growth_gap"][ds], **_floor_fields(ds))
        out.append(row)
    adjust_family(out, [f"{k}_{m}" for m in NOISE_OTHERS for k in ("noisy_gap", "growth_gap")])
    for r in out:
        for suffix, ru in (("", r["runner_up"]), ("_posthoc", r["runner_up_posthoc"])):
            if ru:
                _copy_test(r, f"noisy_gap{suffix}", f"noisy_gap_{ru}")
                _copy_test(r, f"growth_gap{suffix}", f"growth_gap_{ru}")
        r["noisy_verdict"], groups = verdict_all({m: r.get(f"noisy_gap_{m}_verdict") for m in r["others"]}, r["others"])
        r["noisy_verdict_detail"] = _groups_text(groups, fmt.short_method_title)
        r["growth_gap_magnitude"] = _magnitude(r, "growth_gap", r.get("paper_growth_gap"))
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


def ablation_table(c: Cells, datasets, t2=None, t4=None, planned=None) -> list[dict]:
    """Every ablation of rim (and parallel LSTMs) against the paper's rim, per data set.

    gap = variant − rim in test-error points (positive: the variant is worse, so the removed
    part helped), growth gap likewise. Present only where rim and at least one variant ran.
    ``planned``: ``{data set: variants planned there}`` (``core.report.controls.planned_ablations``);
    the two tests of each one not in yet count in the family as never rejected."""
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
            if name == "parallel_lstm":  # the same comparisons as Table 2 / Table 4: their family's numbers
                _adopt_from(row, "gap", t2, ds, "gap", "Table 2")
                _adopt_from(row, "growth_gap", t4, ds, "growth_gap_parallel_lstm", "Table 4")
            out.append(row)
    pending = untested(out, planned or {}, "variant", lambda name: ("gap", "growth_gap"))
    adjust_family(out, ["gap", "growth_gap"], {"gap": ABLATION_WORDS, "growth_gap": ABLATION_WORDS}, pending=pending)
    for r in out:
        if "gap_verdict" in r:
            r["verdict"] = r["gap_verdict"]
    return out


def untested(rows: list[dict], planned: dict, key: str, prefixes) -> int:
    """The planned tests (``{data set: names}``, ``prefixes(name)`` its tests) without a finite p in
    ``rows``: its row not in yet, or a test it could not run. A family counts them as never rejected."""
    n = 0
    for ds, names in planned.items():
        for name in names:
            row = next((r for r in rows if r["dataset"] == ds and r[key] == name), {})
            n += sum(1 for pre in prefixes(name) if not math.isfinite(float(row.get(f"{pre}_p", math.nan))))
    return n


def _adopt_from(row: dict, prefix: str, table, ds: str, source_prefix: str, family: str) -> None:
    src = next((r for r in table or [] if r["dataset"] == ds and f"{source_prefix}_verdict" in r), None)
    if src is not None:
        adopt(row, prefix, src, source_prefix, family)


def init_table(c: Cells, datasets, t2=None) -> list[dict]:
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
            if fb == 1.0:  # the main grid's comparison: Table 2's test (one comparison, one p)
                _adopt_from(row, "gap", t2, ds, "gap", "Table 2")
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


POSTHOC = "runner-up chosen after seeing the data: the lowest mean"
CLAIMS = [  # (claim id, the claim in words, table, verdict key or pooled test, pooled paper number key, sets)
    ("vs_parallel_all", "Lower test error than parallel LSTMs on all four sets", "table2", "gap", None, None),
    ("vs_parallel_mean", "Average gap to parallel LSTMs over the four sets", "table2", "gap", "vs_parallel_gap", None),
    ("vs_baselines_all", "Lowest test error against EntNet, RMC, IndRNN on all four sets", "table3", "", None, None),
    ("vs_runner_up_mean", "Average gap to the runner-up (RMC, the paper's, fixed in advance) over the four sets",
     "table3", "gap", "vs_runner_up_gap", None),
    ("vs_runner_up_mean_posthoc", f"Average gap to the runner-up ({POSTHOC})", "table3", "gap_posthoc",
     "vs_runner_up_gap", None),
    ("noisy_lowest_all", "Lowest error under Gaussian noise (var 0.01) on all four sets", "table4", "noisy", None, None),
    ("growth_all", "Error grows less under noise than the runner-up's (RMC, fixed in advance) on all four sets",
     "table4", "growth_gap", None, None),
    ("growth_mean", "Average growth gap to the runner-up (RMC, fixed in advance) over the four sets", "table4",
     "growth_gap", "noise_growth_gap", None),
    ("growth_mean_posthoc", f"Average growth gap to the runner-up ({POSTHOC} noisy error)", "table4",
     "growth_gap_posthoc", "noise_growth_gap", None),
    ("fluct_abs_all", "Parallel LSTMs' training loss fluctuates more (absolute; primary statistic)", "fluctuation",
     "gap_abs", None, None),
    ("fluct_rel_all", "Parallel LSTMs' training loss fluctuates more (relative to its level; chosen after seeing "
     "the data)", "fluctuation", "gap_rel", None, None),
    ("robust_vs_parallel", "Ours: RIM's error grows less under noise than the parallel LSTMs' on MNIST and "
     "Fashion-MNIST", "table4", "growth_gap_parallel_lstm", None, ["mnist", "fashion_mnist"]),
]


def _pooled_samples(c: Cells, table: str, row: dict, key: str) -> tuple[list, list]:
    """(other, rim) samples behind a row's tested gap ``key``, for the pooled gap."""
    ds = row["dataset"]
    ru = row.get("runner_up_posthoc" if key.endswith("_posthoc") else "runner_up")
    if table == "table2":
        a, b = c.values(ds, "parallel_lstm", "test_error"), c.values(ds, "rim", "test_error")
    elif table == "table3":
        a, b = c.values(ds, ru, "test_error") if ru else {}, c.values(ds, "rim", "test_error")
    else:
        a, b = c.growth(ds, ru) if ru else {}, c.growth(ds, "rim")
    return list(a.values()), list(b.values())


def claims_table(c: Cells, t: dict) -> list[dict]:
    """The paper's claims (and ours beyond it), one per row, each with the verdict the one rule gives.

    "All four sets": ``verdict_all`` over the table's per-set verdicts (decided in that table's
    family). "Average gap": the pooled gap (``core.report.stats.pooled_gap``); the pooled tests are
    the claims table's own family, Holm-adjusted together (interval at the Holm step's level)."""
    out = []
    key_of = {cid: key for cid, _, _, key, _, _ in CLAIMS}
    for cid, claim, table, key, mean_key, sets in CLAIMS:
        rows = t.get(table) or []
        row = {"claim_id": cid, "claim": claim, "table": table}
        if mean_key is None:
            vkey = "noisy_verdict" if key == "noisy" else f"{key}_verdict" if key else "verdict"
            row["verdict"], groups = verdict_all({r["dataset"]: r.get(vkey) for r in rows}, sets or DATASET_ORDER)
            row["detail"] = _groups_text(groups)
        else:
            usable = [r for r in rows if r.get(key) is not None and not math.isnan(r[key])]
            samples = [_pooled_samples(c, table, r, key) for r in usable]
            row.update(zip(("pooled", "pooled_raw_ci_low", "pooled_raw_ci_high", "pooled_p"), pooled_gap(samples),
                           strict=True))
            row["pooled_se"], row["pooled_df"] = pooled_se_df(samples)
            row.update(paper=PAPER["stated_mean"][mean_key], pooled_sets=[r["dataset"] for r in usable])
            missing = [fmt.dataset_title(d) for d in DATASET_ORDER if d not in row["pooled_sets"]]
            row["detail"] = (f"mean of {len(usable)} per-set gaps" + (f"; missing: {', '.join(missing)}" if missing
                                                                      else ""))
        out.append(row)
    adjust_family(out, ["pooled"])
    for r in out:
        if "pooled_verdict" in r:
            r["verdict"] = r["pooled_verdict"]
            r["magnitude"] = _magnitude(r, "pooled", r.get("paper"))
        elif key_of.get(r["claim_id"]) in MAGNITUDE_KEYS:
            mkey = MAGNITUDE_KEYS[key_of[r["claim_id"]]]
            per = {row["dataset"]: row.get(mkey) or "" for row in t.get(r["table"]) or []}
            r["magnitude"] = _magnitude_groups(per)
    return out


# a per-set gap whose paper figure the magnitude rule reads -> its magnitude field in the table's rows
MAGNITUDE_KEYS = {"gap": "gap_magnitude", "growth_gap": "growth_gap_magnitude"}


def _magnitude(row: dict, key: str, paper) -> str:
    """The magnitude rule (``core.report.stats.magnitude``) on a tested gap's Holm-step interval."""
    return magnitude(fmt.num(row.get(f"{key}_ci_low")), fmt.num(row.get(f"{key}_ci_high")), fmt.num(paper))


def _magnitude_groups(per: dict) -> str:
    """Per-set magnitudes in one line: ``"smaller than the paper's on MNIST, CIFAR-10; ..."``."""
    groups: dict[str, list] = {}
    for ds in DATASET_ORDER:
        if per.get(ds):
            groups.setdefault(per[ds], []).append(fmt.dataset_title(ds))
    return "; ".join(f"{k} on {', '.join(v)}" for k, v in groups.items())
