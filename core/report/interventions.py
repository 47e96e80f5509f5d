"""The interventions study in brief (results/interventions/knockout.csv, written by
``python -m core.studies.interventions``): one row per variant, a column per data set and
condition, for the documents; the full tables with the per-class drops are in knockout.md."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from .fmt import dataset_title
from .markdown import md_table
from .stats import holm

ALPHA = 0.05


def interventions_markdown(root: Path) -> str:
    """``root``: the results folder. Accuracy of the shipped RIM per variant, and its drop from
    the intact model, clean and noisy; the note says which p threshold every drop meets."""
    path = Path(root) / "interventions" / "knockout.csv"
    if not path.is_file():
        return "*Not in results/ yet: `results/interventions/knockout.csv`.*"
    df = pd.read_csv(path)
    df = df[df["class"].astype(str) == "all"]
    cols = list(dict.fromkeys(zip(df["dataset"], df["condition"], strict=True)))
    labels = list(dict.fromkeys(df["label"]))
    head = ["variant"] + [f"{dataset_title(ds)} {cond}" for ds, cond in cols]
    body = []
    for label in labels:
        row = [label]
        for ds, cond in cols:
            r = df[(df["label"] == label) & (df["dataset"] == ds) & (df["condition"] == cond)]
            if r.empty:
                row.append("–")
                continue
            r = r.iloc[0]
            acc = f"{100 * r['accuracy']:.2f} [{100 * r['wilson_low']:.2f}, {100 * r['wilson_high']:.2f}]"
            row.append(acc if r["variant"] == "intact" else f"{acc}, drop {r['drop_points']:+.2f}")
        body.append(row)
    tests = df[df["variant"] != "intact"]
    m = len(tests)
    worst = float(holm(tests["p_paired"].to_numpy(dtype=float)).max()) if m else float("nan")
    noise = sorted({f"{v:g}" for v in df["noise_var"] if v > 0})
    images = sorted({int(n) for n in df["images"]})
    note = (f"Accuracy in percent with its 95 % Wilson interval on {', '.join(f'{n:,}' for n in images)} test "
            f"images; drop = intact minus variant, in points; noisy: Gaussian noise of variance "
            f"{', '.join(noise)}, one draw. One shipped model per data set (a single trained network, not a "
            f"spread over seeds). Paired exact (McNemar) test of each variant against the intact model on the "
            f"same images, Holm-adjusted over the table's {m} tests: the largest adjusted p is {worst:.2g}, ")
    note += (f"so every drop is significant at {ALPHA:g}." if worst < ALPHA else
             f"so not every drop is significant at {ALPHA:g}.")
    return "\n".join(md_table(head, body) + ["", note, "",
                                             "Per class and with lost / gained counts: "
                                             "[results/interventions/knockout.md](results/interventions/knockout.md)."])
