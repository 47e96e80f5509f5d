"""REPRODUCTION's interventions block, from ``results/interventions/`` (knockout.csv and
patching.csv, written by ``python -m core.studies.interventions``): each knock-out mode's drops
and the selection swaps per data set and condition, over one network or several (then the mean
over networks with its t interval), beside the retrained no-communication control; what holds
on every set, patching, the attributions, and what the tables do not show. The significance
rule is ``core.report.interventions``'.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ..eval.interventions import KNOCKOUTS
from .fmt import dataset_title
from .interventions import CONDITIONS, MODE_SHORT, NO_DIFFERENCE, _span, no_communication_control, seed_interval
from .markdown import md_table
from .stats import ALPHA


def _cell(r: pd.DataFrame) -> str:
    """Drops of one row group on one data set and condition. One network: their range and how many
    tests differ. Several: the group's mean drop per network, averaged over the networks with its
    95 % t interval over them (``seed_interval``), and the tests (the ranges: knockout.md). LSTM numbers are
    not matched across networks, so only the group's mean is averaged over seeds."""
    if r.empty:
        return "–"
    n_sig = int((r["p_holm"] < ALPHA).sum())
    span = _span(list(r["drop_points"])).replace("from ", "")
    per_seed = r.groupby("seed")["drop_points"].mean()
    if len(per_seed) == 1:
        return f"{span} ({n_sig}/{len(r)})"
    mean, lo, hi = seed_interval(per_seed.to_numpy())
    return f"**{mean:+.2f}** [{lo:+.2f}, {hi:+.2f}] ({n_sig}/{len(r)})"


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


def _across_seeds(df: pd.DataFrame) -> str:
    """What the seed-level intervals decide, in one sentence: which modes' mean drops exclude 0 on
    every set and condition, and the direct (read-out) share of the removed drop."""
    if df.groupby("dataset")["seed"].nunique().min() < 2:
        return ""
    def interval(mode, ds, cond):
        r = df[(df["mode"] == mode) & (df["dataset"] == ds) & (df["condition"] == cond)]
        return seed_interval(r.groupby("seed")["drop_points"].mean().to_numpy()) if len(r) else None
    sets = list(dict.fromkeys(df["dataset"]))
    above, unsure = [], []
    for name, mode in [(f"LSTM {MODE_SHORT[m]}", m) for m in KNOCKOUTS] + [
            ("random selection", "random"), ("all six active", "all"), ("alpha 0 at inference", "alpha0")]:
        ivs = [interval(mode, ds, c) for ds in sets for c in CONDITIONS]
        ivs = [v for v in ivs if v is not None]
        if ivs and all(lo > 0 for _, lo, _ in ivs):
            above.append(name)
        elif ivs:
            unsure.append(name)
    share = []
    for ds in sets:
        rem, rd = interval("removed", ds, "clean"), interval("readout", ds, "clean")
        if rem and rd and rem[0] > 0:
            share.append(f"{dataset_title(ds)} {100 * rd[0] / rem[0]:.0f} %")
    text = ""
    if above:
        text += f"Over the networks, the mean drop is above 0 on every set, clean and noisy, for: {', '.join(above)}"
        text += (f"; not on every one for: {', '.join(unsure)}. " if unsure else ". ")
    if share:
        text += f"The read-out-only drop is this share of the removed drop (means, clean): {', '.join(share)}. "
    return text


def _patching_sentence(root: Path) -> str:
    path = Path(root) / "interventions" / "patching.csv"
    if not path.is_file():
        return ""
    df = pd.read_csv(path)
    bits = []
    for ds, d in df.groupby("dataset", sort=False):
        parts = []
        for pairing, g in d.groupby("pairing", sort=False):
            state, mask = g[g["what"] == "state"], g[g["what"] == "mask"]
            b = state.loc[state["share"].idxmax()]
            where = f"seed {int(b['seed'])}, " if d["seed"].nunique() > 1 else ""
            parts.append(f"{'another class' if pairing == 'class' else 'clean into noisy'} {100 * b['share']:.1f} % "
                         f"of {int(b['pairs'])} ({where}LSTM {int(b['unit'])}, rows {b['rows']}; mask "
                         f"{100 * mask['share'].max():.1f} %)")
        bits.append(f"{dataset_title(ds)} " + ", ".join(parts))
    return ("Patching one LSTM's state (or the mask) from a donor on 7 rows moves at most this share of pairs to the "
            "donor's prediction: " + "; ".join(bits) + ". ")


def interventions_markdown(root: Path) -> str:
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
    groups = [(f"LSTM {MODE_SHORT[m]}", m) for m in KNOCKOUTS] + [
        ("selection random", "random"), ("selection all", "all"), ("alpha 0 at inference", "alpha0")]
    body = [[name, *(_cell(df[(df["mode"] == mode) & (df["dataset"] == ds) & (df["condition"] == cond)])
                     for ds in sets for cond in CONDITIONS)] for name, mode in groups]
    controls = {ds: no_communication_control(root, ds) for ds in sets}
    if any(controls.values()):
        body.append(["no communication, retrained (Adam, 4,000 iterations): test error gap to RIM"] + [
            "–" if c is None or cond == "noisy" else
            f"{c['gap']:+.2f} ({c['seeds']} seeds: {c['verdict'].replace(NO_DIFFERENCE, 'cannot tell')})"
            for ds, c in controls.items() for cond in CONDITIONS])
    notes = []
    for ds in sets:
        d = df[(df["dataset"] == ds) & (df["variant"] == "intact") & (df["condition"] == "clean")]
        m = int(df[(df["dataset"] == ds) & df["holm_m"].notna()]["holm_m"].max())
        its = _iterations(root, d["model"])
        notes.append(f"{dataset_title(ds)} {len(d)} network{'s' if len(d) > 1 else ''}"
                     + (f" trained {its:,} iterations" if its else "")
                     + f" ({_seeds(list(d['seed']))}, intact {_span_pct(list(d['accuracy']))}, {m} tests each)")
    short = df[(df["mode"] == "off") & (df["condition"] == "clean")]["rows_short"].dropna()
    noise = ", ".join(sorted({f"{v:g}" for v in df["noise_var"] if v > 0}))
    several = df.groupby("dataset")["seed"].nunique().max() > 1
    text = ("Drop = intact minus variant accuracy, in points. "
            + ("Bold: the mean drop over the row's LSTMs (or draws), averaged over the networks, and its 95 % t "
               "interval over them; " if several else
               "The range over the row's LSTMs (or draws); ")
            + f"(k/m): k of its m paired exact tests differ from no change, Holm over each network's table at {ALPHA:g}. "
            f"{int(df['images'].iloc[0]):,} test images, noise variance {noise}; " + "; ".join(notes) + ". ")
    if len(short):
        text += (f"Switched off after selection runs one LSTM short on {100 * short.min():.0f}-"
                 f"{100 * short.max():.0f} % of rows; removed, another fills its place. ")
    text += ("Read-out only is the direct effect, the rest of a removed drop goes through the other LSTMs. "
             + _across_seeds(df) + _patching_sentence(root) +
             "Attributions hold the input's own mask fixed, so their shares add up (tested on 50 images). "
             "Not shown: "
             + ("which LSTM matters (LSTM numbers are not matched across networks; the interval is over one "
                "training recipe)" if several else
                "a property of the method: a drop on one network is one of its weights (`--weights` over seeds "
                "gives it an interval)")
             + "; a per-class drop says the class's computation passes through the LSTM, not that it encodes the "
             "class; alpha 0 at inference says what these weights depend on, the retrained control what "
             "communication adds.")
    return "\n".join(md_table(head, body) + ["", text, "", "Per class, raw / Holm p: "
                                             "[results/interventions/knockout.md](results/interventions/knockout.md)."])
