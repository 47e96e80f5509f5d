"""The interventions in words and tables: what ``core.eval.interventions`` computes across a
set, as the Intervene tab, ``results/interventions/`` (knockout.csv, knockout.md) and
REPRODUCTION's generated block show it (one input and patching: ``core.report.intervene``; the
block itself: ``core.report.interventions_block``).

One significance rule everywhere: the paired exact (McNemar) test of each variant against the
intact model on the same images, Holm-adjusted over the tests of the table it belongs to (one
trained network on one data set, clean and noisy), at ``ALPHA``. A sentence says that a drop
differs from no change when its adjusted p is below ``ALPHA``, and that it cannot be told from
no change otherwise; no sentence calls an LSTM needed or not necessary (a drop on one network
does not decide that).
"""
from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..eval.interventions import NOISE_VAR, InterventionTable
from .fmt import protocol_title
from .markdown import md_table
from .stats import ALPHA, holm

CONDITIONS = ("clean", "noisy")
NO_DIFFERENCE = "no measurable difference at this number of seeds"  # the controls table's verdict


def mode_title(mode: str, k: int = 4, fill: str = "zeros") -> str:
    """A knock-out mode in words (``KNOCKOUTS``)."""
    return {"removed": f"removed (leaves the competition; {k} others stay active)",
            "off": "switched off after selection (its place stays empty)",
            "readout": "read-out only (its final state " + ("zeroed" if fill == "zeros" else
                                                             "set to its mean over training images")
                       + " at the classifier)"}[mode]


MODE_SHORT = {"removed": "removed", "off": "switched off", "readout": "read-out only"}


def variant_label(table: InterventionTable, key: str) -> str:
    """One variant of the table in words."""
    v = table.variant(key)
    if v.kind == "intact":
        return "intact (attention)"
    if v.kind == "knockout":
        return f"{table.unit_names[v.unit]} {MODE_SHORT[v.mode]}"
    return {"random": f"selection random (draw {v.seed})", "all": "selection all",
            "alpha0": "alpha 0 at inference"}[v.mode]


def p_text(p) -> str:
    """A p value: three significant digits, in scientific notation below 0.001 (``"2.1e-57"``);
    an exact test's p that underflows to 0 is ``"<1e-300"``."""
    p = float(p)
    if math.isnan(p):
        return "n/a"
    if p == 0.0:
        return "<1e-300"
    return f"{p:.2e}" if p < 1e-3 else f"{p:.3g}"


def adjusted(table: InterventionTable) -> dict[tuple[str, str], float]:
    """Holm-adjusted p of every test of the table: (variant key, condition) -> p."""
    tests = [(v.key, cond) for v in table.variants if v.kind != "intact" for cond in CONDITIONS]
    p = holm([table.p_value(k, c) for k, c in tests])
    return dict(zip(tests, (float(x) for x in p), strict=True))


def differs(holm_p: dict, key: str, condition: str) -> bool:
    return holm_p[(key, condition)] < ALPHA


def _span(values) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:+.2f}" if math.isclose(lo, hi) else f"from {lo:+.2f} to {hi:+.2f}"


def _mode_sentence(table: InterventionTable, mode: str, condition: str, holm_p: dict) -> str:
    keys = table.keys("knockout", mode)
    drops = [table.drop(k, condition) for k in keys]
    sig = [k for k in keys if differs(holm_p, k, condition)]
    names = [table.unit_names[table.variant(k).unit] for k in keys]
    worst = names[int(np.argmax(drops))]
    title = mode_title(mode, table.k_active, table.readout_fill)
    text = (f"{title[0].upper()}{title[1:]}: the drop per LSTM runs {_span(drops)} points (largest: {worst}); "
            f"{len(sig)} of {len(keys)} differ from no change")
    if mode == "off" and condition == "clean":
        short = [table.short_rows(k) for k in keys]
        if all(np.isfinite(short)):
            text += (f"; fewer than {table.k_active} LSTMs are active on {100 * min(short):.0f}-"
                     f"{100 * max(short):.0f} % of rows")
    return text + "."


def caption(table: InterventionTable, condition: str = "clean", *, network: str = "one trained network",
            control: dict | None = None) -> str:
    """What the numbers of one condition say, in one paragraph computed from them. ``network``:
    which weights (the sentence says the findings are theirs); ``control``: the retrained
    no-communication control (``no_communication_control``) shown beside alpha 0."""
    holm_p = adjusted(table)
    m = len(holm_p)
    what = "clean" if condition == "clean" else f"with Gaussian noise (variance {table.noise_var:g})"
    base = table.accuracy("intact", condition)[0] * 100
    parts = [f"On {table.n:,} images {what}, {network} is right on {base:.2f}% intact "
             f"(a property of these weights, not of the method)."]
    modes = table.modes
    parts += [_mode_sentence(table, mode, condition, holm_p) for mode in modes]
    parts.append(f"A drop differs from no change when its paired exact test, Holm-adjusted over the table's {m} "
                 f"tests, is below {ALPHA:g}; the others cannot be told from no change on these images.")
    if modes:
        parts.append(_class_sentence(table, modes, condition))
    swaps = [v for v in table.variants if v.kind == "selection"]
    if swaps:
        parts.append(_swap_sentence(table, swaps, condition, holm_p, control))
    return " ".join(p for p in parts if p)


def _class_sentence(table: InterventionTable, modes: list[str], condition: str) -> str:
    """The largest per-class drop of the first mode and, beside it, the read-out-only drop of the
    same LSTM on that class: the direct effect, and what the rest is (the difference has its
    sign: negative where the direct effect alone is larger than the whole drop)."""
    first = modes[0]
    per_class = table.per_class_drops(first, condition)
    if not per_class.size:
        return ""
    u, c = np.unravel_index(int(np.nanargmax(per_class)), per_class.shape)
    name, cls = table.unit_names[table.variant(table.keys("knockout", first)[u]).unit], table.classes[c]
    total = float(per_class[u, c])
    text = f"Per class the largest drop ({MODE_SHORT[first]}) is {total:.1f} points ({name}, class {cls})"
    if "readout" in modes and first != "readout":
        direct = float(table.per_class_drops("readout", condition)[u, c])
        rest = total - direct
        fill = "zeroed" if table.readout_fill == "zeros" else "set to its mean over training images"
        text += (f"; with the recurrence left as trained and only {name}'s final state {fill} at the classifier "
                 f"(its direct effect) the drop on that class is {direct:.1f} points")
        if abs(rest) < 0.05:
            text += ", all of it"
        elif rest > 0:
            text += f", so {rest:.1f} points go through what the other LSTMs compute without it"
        else:
            text += (f", {-rest:.1f} points more than the whole drop: without it the other LSTMs compute something "
                     f"that makes up part of its direct effect")
        if table.readout_fill != "zeros":
            text += (" (a removed LSTM leaves a zero state at the classifier, not its mean, so the difference is not "
                     "only the indirect effect)")
    return text + "."


def _swap_sentence(table, swaps, condition, holm_p, control) -> str:
    def word(keys):
        n_sig = sum(differs(holm_p, k, condition) for k in keys)
        return "differs from no change" if n_sig == len(keys) else (
            "cannot be told from no change" if n_sig == 0 else f"{n_sig} of {len(keys)} draws differ from no change")

    bits = []
    rand = [v.key for v in swaps if v.mode == "random"]
    if rand:
        d = [-table.drop(k, condition) for k in rand]
        bits.append(f"random selection {np.mean(d):+.2f} points (mean of {len(d)} draws, {_span(d)}; {word(rand)})")
    for v in swaps:
        if v.mode == "all":
            bits.append(f"all active {-table.drop(v.key, condition):+.2f} points ({word([v.key])})")
        if v.mode == "alpha0":
            bits.append(f"alpha 0 {-table.drop(v.key, condition):+.2f} points ({word([v.key])})")
    text = f"At inference with the same weights (trained with alpha {table.alpha:g}): " + "; ".join(bits) + "."
    if any(v.mode == "alpha0" for v in swaps):
        text += " " + alpha_sentence(control)
    return text


def alpha_sentence(control: dict | None) -> str:
    """Alpha 0 at inference beside the retrained no-communication control, in one sentence."""
    if not control:
        return ("Alpha 0 at inference takes from these weights a communication they were trained with; it does not "
                "measure what communication adds to the method (that is the retrained no-communication control, "
                "not in results/ here).")
    trained = protocol_title(control.get("protocol"))
    return (f"Alpha 0 at inference takes from these weights a communication they were trained with; a RIM trained "
            f"with no communication ({control['seeds']} seeds" + (f", {trained}" if trained else "")
            + f") has a test error of {control['error']:.2f}% against "
            f"RIM's {control['rim_error']:.2f}% (same protocol; gap {control['gap']:+.2f} points, {control['verdict']}), so the "
            f"drop at inference measures what these weights depend on, not what communication adds to the method.")


def no_communication_control(root: Path, dataset: str) -> dict | None:
    """The retrained no-communication control of ``dataset`` from results/converged/controls.csv."""
    path = Path(root) / "converged" / "controls.csv"
    if not path.is_file():
        return None
    df = pd.read_csv(path)
    df = df[df["dataset"] == dataset]
    ctrl, rim = df[df["control"] == "rim_alpha0"], df[df["control"] == "rim"]
    if ctrl.empty or rim.empty:
        return None
    r = ctrl.iloc[0]
    return {"error": float(r["error"]), "rim_error": float(rim.iloc[0]["error"]), "gap": float(r["gap"]),
            "seeds": int(r["seeds"]), "verdict": str(r["gap_verdict"]), "protocol": str(r.get("protocol", ""))}


def study_header(*, isolate: bool, fill: str) -> list[str]:
    """The opening of results/interventions/knockout.md: what the study runs and how it tests."""
    readout = ("zeroed, as a removed LSTM's is, so removed minus read-out only is what goes through the other "
               "LSTMs: the indirect effect" if fill == "zeros" else "replaced by its mean over training images")
    return ["# Interventions on trained RIMs", "",
            "Written by `python -m core.studies.interventions`. Each LSTM taken out in turn in three ways "
            "(`core/eval/interventions.py`, `KNOCKOUTS`): removed (it leaves the top-k competition, so k others stay "
            "active), switched off after selection (its place stays empty on the rows where it ranks in the top k) "
            f"and read-out only (the recurrence runs as trained and its final state is {readout} at the classifier: "
            "the direct effect); the taken-out LSTM " + ("also leaves" if isolate else "stays in")
            + " the communication softmax. The same weights are also run with another selection or alpha 0 at "
            "inference. Accuracy with its 95% Wilson interval; drop = intact minus variant, in points; lost / gained "
            "= images the variant gets wrong that the intact model gets right, and the reverse; p: the paired exact "
            "(McNemar) test of the variant against the intact model on the same images, raw and Holm-adjusted over "
            f"the network's table (clean and noisy). Noise: Gaussian, variance {NOISE_VAR:g}, one draw (seed 0). "
            "Patching: one LSTM's state (h, c), or the whole selection mask, taken from a donor image on a band of "
            "rows. Attributions (attribution.csv): Integrated Gradients of the predicted logit on the first test "
            "images, with the image's own mask held fixed and with the model as it runs, and each one's completeness "
            "gap relative to the logit's change.", ""]


ATTRIBUTION_FIELDS = ["dataset", "model", "seed", "image", "function", "target_class", "value", "baseline_value",
                      "sum", "relative_gap", "complete"]


def write_attribution_csv(path: Path, rows: list[dict]) -> None:
    """The attributions' completeness, one row per (network, image, function attributed)."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=ATTRIBUTION_FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow({k: csv_value(r.get(k)) for k in ATTRIBUTION_FIELDS})


# --------------------------------------------------------------------------- tables


def frame(table: InterventionTable) -> pd.DataFrame:
    """The table as the Intervene tab shows it: one row per variant, accuracy, interval, drop and
    Holm-adjusted p, clean and noisy."""
    holm_p = adjusted(table)
    rows = []
    for v in table.variants:
        rec = {"variant": variant_label(table, v.key), "how": "" if v.kind != "knockout" else MODE_SHORT[v.mode]}
        for condition in CONDITIONS:
            what = "clean" if condition == "clean" else f"noise {table.noise_var:g}"
            acc, lo, hi, _ = table.accuracy(v.key, condition)
            rec[f"accuracy {what} %"] = acc * 100
            rec[f"95% CI {what}"] = f"{lo * 100:.1f}–{hi * 100:.1f}"
            rec[f"drop {what} (points)"] = None if v.kind == "intact" else table.drop(v.key, condition)
            rec[f"p Holm {what}"] = "" if v.kind == "intact" else p_text(holm_p[(v.key, condition)])
        rows.append(rec)
    return pd.DataFrame(rows)


CSV_FIELDS = ["dataset", "model", "seed", "variant", "mode", "unit", "label", "fill", "condition", "noise_var",
              "class", "images", "accuracy", "wilson_low", "wilson_high", "drop_points", "lost", "gained", "p_paired",
              "p_holm", "holm_m", "rows_short"]


def rows(table: InterventionTable) -> list[dict]:
    """Long-format rows (one per variant x condition x class, 'all' first) for the CSV."""
    holm_p, out = adjusted(table), []
    for v in table.variants:
        for condition in CONDITIONS:
            for cls in [None, *range(len(table.classes))]:
                acc, lo, hi, n = table.accuracy(v.key, condition, cls)
                overall = cls is None and v.kind != "intact"
                lost, gained = table.flips(v.key, condition) if overall else (None, None)
                out.append({"variant": v.key, "mode": v.mode, "unit": "" if v.unit is None else v.unit + 1,
                            "label": variant_label(table, v.key), "condition": condition,
                            "fill": table.readout_fill if v.mode == "readout" else "",
                            "noise_var": table.noise_var if condition == "noisy" else 0.0,
                            "class": "all" if cls is None else table.classes[cls], "images": n,
                            "accuracy": acc, "wilson_low": lo, "wilson_high": hi,
                            "drop_points": table.drop(v.key, condition, cls), "lost": lost, "gained": gained,
                            "p_paired": table.p_value(v.key, condition) if overall else None,
                            "p_holm": holm_p[(v.key, condition)] if overall else None,
                            "holm_m": len(holm_p) if overall else None,
                            "rows_short": table.short_rows(v.key) if cls is None and condition == "clean" else None})
    return out


def csv_value(v):
    if isinstance(v, float):
        return "" if math.isnan(v) else f"{v:.6g}"
    return "" if v is None else v


def write_csv(path: Path, tables: dict[tuple[str, str, int | None], InterventionTable]) -> None:
    """``tables``: (dataset, model, seed) -> table. Numbers with 6 significant digits (small p
    values in scientific notation)."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        for (dataset, model, seed), table in tables.items():
            for row in rows(table):
                w.writerow({"dataset": dataset, "model": model, "seed": "" if seed is None else seed,
                            **{k: csv_value(v) for k, v in row.items()}})


def markdown(table: InterventionTable, title: str, *, network: str = "one trained network",
             control: dict | None = None) -> str:
    """Every variant (clean and noisy, raw and Holm-adjusted p) and the per-class drops of each
    knock-out mode, with the captions."""
    holm_p = adjusted(table)
    head = ["Variant", "Clean accuracy [95% CI]", "Drop (points)", "Lost / gained", "p raw / Holm",
            f"Noisy accuracy (var {table.noise_var:g}) [95% CI]", "Drop (points)", "p raw / Holm",
            f"Rows with < {table.k_active} active (clean)"]
    body = []
    for v in table.variants:
        cells = [variant_label(table, v.key)]
        for condition in CONDITIONS:
            acc, lo, hi, _ = table.accuracy(v.key, condition)
            cells.append(f"{acc * 100:.2f} [{lo * 100:.2f}, {hi * 100:.2f}]")
            intact = v.kind == "intact"
            cells.append("–" if intact else f"{table.drop(v.key, condition):+.2f}")
            if condition == "clean":
                lost, gained = table.flips(v.key, condition)
                cells.append("–" if intact else f"{lost} / {gained}")
            cells.append("–" if intact else f"{p_text(table.p_value(v.key, condition))} / "
                                            f"{p_text(holm_p[(v.key, condition)])}")
        short = table.short_rows(v.key)
        cells.append("–" if math.isnan(short) else f"{100 * short:.1f} %")
        body.append(cells)
    lines = [f"### {title}", "", *md_table(head, body)]
    for mode in table.modes:
        drops = table.per_class_drops(mode, "clean")
        lines += ["", f"Drop per class, {mode_title(mode, table.k_active, table.readout_fill)} (clean, points):", ""]
        lines += md_table(["", *table.classes],
                          [[table.unit_names[table.variant(k).unit], *(f"{d:+.1f}" for d in row)]
                           for k, row in zip(table.keys("knockout", mode), drops, strict=True)])
    lines += ["", caption(table, "clean", network=network, control=control), "",
              caption(table, "noisy", network=network, control=control), ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------- over seeds


def seed_interval(values, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high): the t interval of the mean over seeds (NaN bounds with one seed)."""
    from scipy.stats import t

    v = np.asarray(values, dtype=float)
    mean = float(v.mean()) if len(v) else math.nan
    if len(v) < 2:
        return mean, math.nan, math.nan
    half = float(t.ppf(0.5 + level / 2, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v)))
    return mean, mean - half, mean + half


def group_drops(table: InterventionTable, group: str, condition: str = "clean", cls: int | None = None) -> float:
    """The mean drop of a row group of one network: a knock-out mode over its LSTMs, or a
    selection swap ("random" over its draws, "all", "alpha0")."""
    keys = [v.key for v in table.variants if v.mode == group and v.kind != "intact"]
    return float(np.mean([table.drop(k, condition, cls) for k in keys])) if keys else math.nan


def seeds_frame(tables: list[InterventionTable], seeds: list, condition: str = "clean",
                cls: int | None = None) -> pd.DataFrame:
    """One row per row group (each knock-out mode, each selection swap): its mean drop on each
    trained network and the mean over networks with its 95 % t interval (descriptive: the tests
    over networks are REPRODUCTION's, Holm over its table). LSTM numbers are not matched across
    networks, so a knock-out's drop is the mean over the network's LSTMs."""
    first = tables[0]
    groups = list(dict.fromkeys(v.mode for v in first.variants if v.kind != "intact"))
    out = []
    for g in groups:
        d = np.array([group_drops(t, g, condition, cls) for t in tables])
        mean, lo, hi = seed_interval(d)
        name = f"LSTM {MODE_SHORT[g]}" if g in MODE_SHORT else {"random": "selection random", "all": "selection all",
                                                                  "alpha0": "alpha 0 at inference"}[g]
        out.append({"variant": name, **{f"seed {s}": float(x) for s, x in zip(seeds, d, strict=True)},
                    "mean drop": mean, "95% CI low": lo, "95% CI high": hi, "seeds": len(d)})
    return pd.DataFrame(out)


def seeds_markdown(tables: list[InterventionTable], seeds: list, title: str) -> str:
    """Each row group's mean drop on each network and over the networks (95 % t interval,
    descriptive), clean and noisy, and per class (clean)."""
    def cell(r):
        return f"{r['mean drop']:+.2f}" + ("" if math.isnan(r["95% CI low"]) else
                                           f" [{r['95% CI low']:+.2f}, {r['95% CI high']:+.2f}]")

    lines = [f"### {title}", "", "Each row: the mean drop over the network's LSTMs (a knock-out) or draws, per network; "
             "then over the networks with its 95 % t interval (descriptive, unadjusted: REPRODUCTION.md tests these "
             "means, Holm over its table). LSTM numbers are not matched across networks.", ""]
    for condition in CONDITIONS:
        df = seeds_frame(tables, seeds, condition)
        head = ["variant", *[f"seed {s}" for s in seeds], "mean drop [95% CI over seeds]"]
        body = [[r["variant"], *(f"{r[f'seed {s}']:+.2f}" for s in seeds), cell(r)] for _, r in df.iterrows()]
        lines += [f"Drop in points, {condition}:", "", *md_table(head, body), ""]
    classes = tables[0].classes
    per_class = [seeds_frame(tables, seeds, "clean", c) for c in range(len(classes))]
    lines += ["Drop per class in points (clean), mean over the networks [95% CI over seeds]:", "",
              *md_table(["variant", *classes], [[r["variant"], *(cell(f.iloc[i]) for f in per_class)]
                                                for i, (_, r) in enumerate(per_class[0].iterrows())]), ""]
    return "\n".join(lines)
