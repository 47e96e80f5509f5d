"""REPRODUCTION's interventions block, from ``results/interventions/`` (knockout.csv,
patching.csv and attribution.csv, written by ``python -m core.studies.interventions``): each
knock-out mode's drops and the selection swaps per data set and condition, over one network or
several, beside the retrained no-communication control; what holds on every set, patching, the
attributions, and what the tables do not show.

Significance: within one network, ``core.report.interventions``' rule (paired exact tests, Holm
over the network's table). Across networks (``seed_tests``): each row group's mean drop per
network, a one-sample t test of those means against 0, Holm over every (group, set, condition)
of the table, and each interval at its Holm step's level, so an interval excludes 0 exactly
when its test decides. Patching across networks is described (means with 95 % t intervals), not
tested.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..eval.attribution import MAX_STEPS, STEPS, TOLERANCE
from ..eval.interventions import KNOCKOUTS
from .fmt import dataset_title, protocol_title
from .interventions import CONDITIONS, MODE_SHORT, NO_DIFFERENCE, _span, no_communication_control, seed_interval
from .markdown import md_table
from .stats import ALPHA, holm, holm_levels, t_interval

GROUPS = [(f"LSTM {MODE_SHORT[m]}", m) for m in KNOCKOUTS] + [
    ("selection random", "random"), ("selection all", "all"), ("alpha 0 at inference", "alpha0")]


def seed_tests(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (group, data set, condition) with at least 2 networks: the mean over networks
    of the group's mean drop per network, a one-sample t test against 0, Holm over the rows, and
    the t interval at each row's Holm level. ``df``: knockout.csv's "all" rows."""
    from scipy.stats import ttest_1samp

    out = []
    for _, mode in GROUPS:
        for ds in dict.fromkeys(df["dataset"]):
            for cond in CONDITIONS:
                r = df[(df["mode"] == mode) & (df["dataset"] == ds) & (df["condition"] == cond)]
                per_seed = r.groupby("seed")["drop_points"].mean().to_numpy()
                if len(per_seed) < 2:
                    continue
                sd = float(per_seed.std(ddof=1))
                p = 0.0 if sd == 0 and per_seed.mean() != 0 else float(ttest_1samp(per_seed, 0.0).pvalue)
                out.append({"mode": mode, "dataset": ds, "condition": cond, "seeds": len(per_seed),
                            "mean": float(per_seed.mean()), "se": sd / math.sqrt(len(per_seed)), "p": p})
    t = pd.DataFrame(out)
    if t.empty:
        return t
    t["p_holm"], t["level"] = holm(t["p"]), holm_levels(t["p"])
    bounds = [t_interval(r.mean, r.se, r.seeds - 1, r.level) for r in t.itertuples()]
    t["low"], t["high"] = [b[0] for b in bounds], [b[1] for b in bounds]
    return t


def _cell(r: pd.DataFrame, test: pd.Series | None = None) -> str:
    """Drops of one row group on one data set and condition. One network: their range and how many
    tests differ. Several: the group's mean drop per network, averaged over the networks, with
    its t interval at its Holm level (``seed_tests``: ``test``), and the tests (the ranges:
    knockout.md). LSTM numbers are not matched across networks, so only the group's mean is
    averaged over seeds."""
    if r.empty:
        return "–"
    n_sig = int((r["p_holm"] < ALPHA).sum())
    span = _span(list(r["drop_points"])).replace("from ", "")
    if test is None:
        return f"{span} ({n_sig}/{len(r)})"
    return f"**{test['mean']:+.2f}** [{test['low']:+.2f}, {test['high']:+.2f}] ({n_sig}/{len(r)})"


def _seeds(seeds: list[str]) -> str:
    """"seed 4", "seeds 0-4" (a run of consecutive seeds) or "seeds 0, 2, 5"."""
    n = sorted(int(x) for x in seeds)
    if len(n) == 1:
        return f"seed {n[0]}"
    return f"seeds {n[0]}-{n[-1]}" if n == list(range(n[0], n[-1] + 1)) else f"seeds {', '.join(map(str, n))}"


def _span_pct(acc: list[float]) -> str:
    lo, hi = 100 * min(acc), 100 * max(acc)
    return f"{lo:.2f} %" if lo == hi else f"{lo:.2f}-{hi:.2f} %"


def _iterations(root: Path, models) -> int | None:
    """The training length the networks ``models`` (weight stems as knockout.csv names them) share,
    from their run records; None where a record is missing or they differ."""
    its = set()
    for m in models:
        rec = Path(m).with_suffix(".json")
        rec = rec if rec.is_absolute() else Path(root).parent / rec
        try:
            its.add(int(json.loads(rec.read_text())["train_config"]["iterations"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None
    return its.pop() if len(its) == 1 else None


def _across_seeds(df: pd.DataFrame, tests: pd.DataFrame) -> str:
    """What the seed-level tests decide, in words: which groups' mean drops are above 0 on every
    set and condition, which on none, and the direct (read-out only) and indirect (removed minus
    read-out only) parts of the removed drop."""
    if tests.empty:
        return ""
    above, mixed, none = [], [], []
    for name, mode in GROUPS:
        t = tests[tests["mode"] == mode]
        if t.empty:
            continue
        up = (t["p_holm"] < ALPHA) & (t["mean"] > 0)
        (above if up.all() else mixed if up.any() else none).append(
            name.replace("LSTM ", "an LSTM "))
    said = [f"{where} for: {', '.join(names)}" for where, names in (
        ("on every set, clean and noisy,", above), ("on some but not all", mixed), ("on none", none)) if names]
    text = (f"Over the networks, the mean drop is above 0 (Holm, {len(tests)} tests) "
            + "; ".join(said) + ". ")
    fill = "zeroed" if _zero_fill(df) else "set to its mean over training images"
    parts = []
    for ds in dict.fromkeys(tests["dataset"]):
        def mean(mode, ds=ds):
            r = tests[(tests["mode"] == mode) & (tests["dataset"] == ds) & (tests["condition"] == "clean")]
            return float(r["mean"].iloc[0]) if len(r) else math.nan
        rem, rd = mean("removed"), mean("readout")
        if math.isfinite(rem) and math.isfinite(rd):
            parts.append(f"{dataset_title(ds)} {rem:+.2f} = {rd:+.2f} direct {rem - rd:+.2f} indirect")
    if parts:
        text += (f"A removed LSTM's mean drop (clean, points) splits into its direct effect (read-out only: its final "
                 f"state {fill} at the classifier) and the rest, through what the other LSTMs compute without it: "
                 + "; ".join(parts) + ". ")
    return text


def _zero_fill(df: pd.DataFrame) -> bool:
    """Whether the read-out-only rows zeroed the state (knockout.csv's ``fill``)."""
    fills = set(df[df["mode"] == "readout"].get("fill", pd.Series(dtype=str)).dropna().astype(str))
    return fills == {"zeros"}


def _patching_sentence(root: Path) -> str:
    """Patching across the networks, described: per set and pairing, the whole mask's share on its
    best band and one LSTM's largest share per network (chosen after seeing the data), each as a
    mean over networks with its 95 % t interval."""
    path = Path(root) / "interventions" / "patching.csv"
    if not path.is_file():
        return ""
    df = pd.read_csv(path)
    several = df.groupby("dataset")["seed"].nunique().max() > 1
    bits = []
    for ds, d in df.groupby("dataset", sort=False):
        parts = []
        for pairing, g in d.groupby("pairing", sort=False):
            mask = g[g["what"] == "mask"].groupby(["rows", "seed"])["share"].first().unstack()
            band = mask.mean(axis=1).idxmax()
            best = g[g["what"] == "state"].groupby("seed")["share"].max().to_numpy()
            what = "another class" if pairing == "class" else "clean into noisy"
            parts.append(f"{what}: mask on rows {band} {_share(mask.loc[band].to_numpy())}, one LSTM's state at "
                         f"most {_share(best)}")
        bits.append(f"{dataset_title(ds)} " + "; ".join(parts))
    n = int(df.groupby("dataset")["seed"].nunique().min())
    return ("Patching from a donor on a band of 7 rows moves this share of pairs to the donor's prediction"
            + (f" (mean over {n} networks, 95 % t interval, descriptive; the band and the LSTM are the largest, "
               "chosen after seeing the data): " if several else " (the largest band and LSTM): ")
            + " — ".join(bits) + ". ")


def _share(values) -> str:
    v = 100 * np.asarray(values, dtype=float)
    if len(v) < 2:
        return f"{v.mean():.1f} %"
    mean, lo, hi = seed_interval(v)
    return f"{mean:.1f} % [{lo:.1f}, {hi:.1f}]"


def _attribution_sentence(root: Path) -> str:
    """What attribution.csv says of completeness: the predicted logit's attributions with the
    image's own mask held fixed and with the model as it runs, per set."""
    path = Path(root) / "interventions" / "attribution.csv"
    if not path.is_file():
        return ""
    df = pd.read_csv(path)
    bits = []
    for ds, d in df.groupby("dataset", sort=False):
        fr, run = d[d["function"] == "frozen mask"], d[d["function"] == "as it runs"]
        nets = d["seed"].nunique()
        bits.append(f"{dataset_title(ds)} {int(fr['complete'].sum())} of {len(fr)} with the mask held fixed (largest "
                    f"gap {100 * fr['relative_gap'].max():.1f} %), {int(run['complete'].sum())} of {len(run)} as it runs "
                    f"(median gap {100 * run['relative_gap'].median():.1f} %)"
                    + (f", {d['image'].nunique()} test images x {nets} networks" if nets > 1 else ""))
    return (f"Integrated Gradients of the predicted logit ({STEPS:,} points, doubled up to {MAX_STEPS:,} for the fixed "
            f"mask) add up to its change from a black image within {TOLERANCE:.0%} on: " + "; ".join(bits) + ". ")


def interventions_markdown(root: Path, link: bool = True) -> str:
    """``root``: the results folder. The brief table of REPRODUCTION.md, from knockout.csv and
    patching.csv: per data set, each knock-out mode's drops (clean and noisy), how many differ
    from no change (Holm over each network's table), the selection swaps beside the retrained
    no-communication control, what patching and the attributions show, and what they do not."""
    path = Path(root) / "interventions" / "knockout.csv"
    if not path.is_file():
        return "*Not in results/ yet: `results/interventions/knockout.csv`.*"
    df = pd.read_csv(path)
    if "mode" not in df.columns:
        return "*`results/interventions/knockout.csv` predates the knock-out modes: rerun `python -m core.studies.interventions`.*"
    df = df[df["class"].astype(str) == "all"].assign(seed=lambda d: d["seed"].astype(str))
    sets = list(dict.fromkeys(df["dataset"]))
    head = ["variant", *[f"{dataset_title(ds)} {c}" for ds in sets for c in CONDITIONS]]
    tests = seed_tests(df)

    def test(mode, ds, cond):
        if tests.empty:
            return None
        r = tests[(tests["mode"] == mode) & (tests["dataset"] == ds) & (tests["condition"] == cond)]
        return r.iloc[0] if len(r) else None

    body = [[name, *(_cell(df[(df["mode"] == mode) & (df["dataset"] == ds) & (df["condition"] == cond)],
                           test(mode, ds, cond)) for ds in sets for cond in CONDITIONS)] for name, mode in GROUPS]
    controls = {ds: no_communication_control(root, ds) for ds in sets}
    if any(controls.values()):
        trained = sorted({protocol_title(c.get("protocol")) for c in controls.values() if c} - {""})
        body.append(["no communication, retrained" + (f" ({', '.join(trained)})" if trained else "")
                      + ": test error gap to RIM"] + [
            "–" if c is None or cond == "noisy" else
            f"{c['gap']:+.2f} ({c['seeds']} seeds: {c['verdict'].replace(NO_DIFFERENCE, 'cannot tell')})"
            for ds, c in controls.items() for cond in CONDITIONS])
    notes = []
    for ds in sets:
        d = df[(df["dataset"] == ds) & (df["variant"] == "intact") & (df["condition"] == "clean")]
        m = int(df[(df["dataset"] == ds) & df["holm_m"].notna()]["holm_m"].max())
        its = _iterations(root, d["model"])
        notes.append(f"{dataset_title(ds)} {len(d)} network{'s' if len(d) > 1 else ''}"
                     + (f" at a {its:,}-iteration budget" if its else "")
                     + f" ({_seeds(list(d['seed']))}, intact {_span_pct(list(d['accuracy']))}, {m} tests each)")
    short = df[(df["mode"] == "off") & (df["condition"] == "clean")]["rows_short"].dropna()
    noise = ", ".join(sorted({f"{v:g}" for v in df["noise_var"] if v > 0}))
    several = not tests.empty
    text = ("Drop = intact minus variant accuracy, in points. "
            + (f"Bold: the mean drop over the row's LSTMs (or draws), averaged over the networks, and its t interval "
               f"over them at its Holm level (one family of the table's {len(tests)} seed-level t tests: it excludes 0 "
               "exactly when the test decides); " if several else
               "The range over the row's LSTMs (or draws); ")
            + f"(k/m): k of its m paired exact tests differ from no change, Holm over each network's table at {ALPHA:g}. "
            f"{int(df['images'].iloc[0]):,} test images, noise variance {noise}; " + "; ".join(notes) + ". ")
    if len(short):
        text += (f"Switched off after selection runs one LSTM short on {100 * short.min():.0f}-"
                 f"{100 * short.max():.0f} % of rows; removed, another fills its place. ")
    text += (_across_seeds(df, tests) + _patching_sentence(root) + _attribution_sentence(root) +
             "Not shown: "
             + ("which LSTM matters (LSTM numbers are not matched across networks; the interval is over one "
                "training recipe)" if several else
                "a property of the method: a drop on one network is one of its weights (`--weights` over seeds "
                "gives it an interval)")
             + "; a per-class drop says the class's computation passes through the LSTM, not that it encodes the "
             "class; alpha 0 at inference says what these weights depend on, the retrained control what "
             "communication adds.")
    where = ("[results/interventions/knockout.md](results/interventions/knockout.md)" if link else
             "results/interventions/knockout.md")
    return "\n".join(md_table(head, body) + ["", text, "", f"Per class, raw / Holm p: {where}."])
