"""The computed facts the documents' prose may need: counts, subset sizes, floors, margins.

Each fact is a value with the sentence that says it, computed from ``results/`` (and the shipped
models' manifest for what a user picks), so no document has to carry a hand-written number.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import numpy as np

from ..paths import LONG_GRID, RETRAINED
from . import fmt
from .floors import floors
from .health import health_of
from .tables import derived_records, same_run


def health_facts(path) -> dict:
    """Runs of a grid by health class, the unhealthy ones named, and how many predict one class for
    (nearly) every test image (the largest predicted share at least 99.9 %)."""
    recs = derived_records(path, _health_row, "facts.health")
    classes: Counter = Counter()
    named: dict[str, list[str]] = {}
    one_class = also = 0
    for m in recs:
        classes[m["health"]] += 1
        if m["health"] != "healthy":
            named.setdefault(m["health"], []).append(
                f"{fmt.dataset_title(m['dataset'])} {fmt.display_name(m['model'])} seed {m['seed']}")
            share = m["max_predicted_share"]
            one_class += int(share is not None and share >= 0.999)
            also += int(m["health"] == "diverged" and ("balanced accuracy" in m["reasons"] or "predicted" in m["reasons"]))
    return {"runs": len(recs), "classes": dict(classes), "named": named, "one_class_for_every_image": one_class,
            "diverged_and_collapsed": also}


def _by_cell(names: list[str]) -> list[str]:
    """"CIFAR-10 IndRNN seed 0", "... seed 2" -> "CIFAR-10 IndRNN seeds 0, 2" (order kept)."""
    cells: dict[str, list[str]] = {}
    for n in names:
        cell, _, seed = n.rpartition(" seed ")
        cells.setdefault(cell, []).append(seed)
    return [f"{c} seed{'s' if len(s) > 1 else ''} {', '.join(s)}" for c, s in cells.items()]


def failed_markdown(path) -> str:
    """The paper-protocol runs that diverged or collapsed, named, by class."""
    f = health_facts(path)
    bad = sum(v for k, v in f["classes"].items() if k != "healthy")
    lines = [f"{bad} of {f['runs']} runs are unhealthy: "
             + ", ".join(f"{v} {k}" for k, v in sorted(f["classes"].items()) if k != "healthy")
             + f"; {f['one_class_for_every_image']} of them predict one class for (nearly) every test image "
             "(largest predicted share at least 99.9 %). Each is left out of every mean (`core.report.health`).", ""]
    for k, names in sorted(f["named"].items()):
        lines.append(f"- {k} ({len(names)}): " + "; ".join(_by_cell(names)))
    return "\n".join(lines)


def handwriting_seed_facts(root) -> dict:
    """Where the 4,000-iteration handwriting table's seeds come from: the grid's kept weights (its
    shipped median per method) and the retrained ones (``handwriting_retrain/runs.csv``)."""
    root = Path(root)
    seeds_csv = root / "converged" / "handwriting_seeds.csv"
    retrain = root / "converged" / "handwriting_retrain" / "runs.csv"
    per_method: dict[str, int] = Counter()
    if seeds_csv.is_file():
        for r in csv.DictReader(seeds_csv.open()):
            per_method[r["method"]] += 1
    retrained: dict[str, int] = Counter()
    if retrain.is_file():
        for r in csv.DictReader(retrain.open()):
            retrained[r.get("model")] += 1
    return {"seeds": dict(per_method), "retrained": dict(retrained)}


def long_handwriting_seed_facts(root) -> dict:
    """The long grid's handwriting table (``long/handwriting_seeds.csv``): seeds per method, how many
    models are retrained copies (``RETRAINED``: no weights beside the grid's own record), and the
    copies whose test error or validation history differs from their first record's
    (``differ``: ``(method, seed, first test error, retrained test error)``)."""
    root = Path(root)
    seeds_csv = root / LONG_GRID / "handwriting_seeds.csv"
    per_method: dict[str, int] = Counter()
    retrained, differ = 0, []
    if seeds_csv.is_file():
        for r in csv.DictReader(seeds_csv.open()):
            method, seed = r["method"], int(float(r["seed"]))
            per_method[method] += 1
            first = root / LONG_GRID / "runs" / "mnist" / f"{method}_s{seed}"
            if first.with_suffix(".safetensors").is_file():
                continue
            retrained += 1
            try:
                a = json.loads(first.with_suffix(".json").read_text())
                b = json.loads((root / RETRAINED / "runs" / "mnist" / f"{first.name}.json").read_text())
            except (OSError, ValueError):
                differ.append((method, seed, None, None))
                continue
            if not same_run(a, b):
                differ.append((method, seed, a["metrics"].get("test_error"), b["metrics"].get("test_error")))
    return {"seeds": dict(per_method), "retrained": retrained, "differ": differ}


def shipped_facts(pretrained="pretrained") -> list[dict]:
    """Every shipped model's error beside its data set's floors, balanced error where its metadata has
    per-class accuracies."""
    p = Path(pretrained) / "manifest.json"
    if not p.is_file():
        return []
    out = []
    for m in json.loads(p.read_text()).get("models", []):
        f = floors(m["dataset"])
        bal = None
        meta_path = Path(pretrained) / str(m.get("metadata", ""))
        if meta_path.is_file():
            pca = (json.loads(meta_path.read_text()).get("metrics") or {}).get("per_class_accuracy")
            if pca:
                bal = 1.0 - float(np.mean(pca))
        out.append({"dataset": m["dataset"], "model": m["model"], "protocol": m.get("protocol"), "seed": m.get("seed"),
                    "test_error": m.get("test_error"), "balanced_error": bal, "chance_error": f["chance_error"],
                    "majority_error": f["majority_error"]})
    return out


def data_facts(path) -> dict:
    """Images per data set as the runs recorded them (train incl. validation, test)."""
    out = {}
    for m in derived_records(path, lambda r: (r["dataset"], r.get("data_source") or {}), "facts.data"):
        ds, src = m
        if ds not in out and src.get("n_train") is not None:
            out[ds] = {"train": int(src["n_train"]), "test": int(src.get("n_test") or 0)}
    return out


def _health_row(m: dict) -> dict:
    h = health_of(m)
    return {"dataset": m["dataset"], "model": m.get("variant") or m["model"], "seed": m["seed"], "health": h["health"],
            "reasons": " ".join(h["health_reasons"] or []),
            "max_predicted_share": (m.get("health_measures") or {}).get("max_predicted_share")}


def facts(root="results", pretrained="pretrained") -> list[str]:
    """The facts as sentences, one a bullet."""
    root = Path(root)
    out = []
    paper = health_facts(root / "paper")
    if paper["runs"]:
        bad = {k: v for k, v in paper["classes"].items() if k != "healthy"}
        out.append(f"Paper protocol: {sum(bad.values())} of {paper['runs']} runs unhealthy ("
                   + ", ".join(f"{v} {k}" for k, v in sorted(bad.items())) + f"); {paper['diverged_and_collapsed']} of the "
                   "diverged also meet a collapse criterion (balanced accuracy not above chance + 2 points, or one class "
                   f"for over 90 % of the test images); {paper['one_class_for_every_image']} predict one class for "
                   "(nearly, at least 99.9 %) every test image.")
    conv = health_facts(root / "converged")
    if conv["runs"]:
        out.append(f"{fmt.CONVERGED_TITLE}: {conv['classes'].get('healthy', 0)} of {conv['runs']} runs healthy.")
    d = data_facts(root / "converged") or data_facts(root / "paper")
    if "animals10" in d:
        a = d["animals10"]
        f = floors("animals10")
        out.append(f"Animals-10 here is a {a['train'] + a['test']:,}-image subset ({a['train']:,} train incl. "
                   f"validation, {a['test']} test), unbalanced: majority-class error {100 * f['majority_error']:.2f} %, "
                   f"chance {100 * f['chance_error']:.2f} %; balanced error (mean of the per-class errors) of "
                   "guessing or of always answering one class: 90.00 %.")
    hw = long_handwriting_seed_facts(root)
    if hw["seeds"]:
        n = sorted(set(hw["seeds"].values()))
        d = hw["differ"]
        line = (f"Handwriting table (long grid): {'-'.join(map(str, (n[0], n[-1]) if len(n) > 1 else n))} seeds per "
                f"method; {hw['retrained']} of {sum(hw['seeds'].values())} models retrained where the grid kept no "
                f"weights (`results/{RETRAINED}`), {hw['retrained'] - len(d)} identical to their first run")
        if d:
            def err(v):
                return "?" if v is None else f"{100 * float(v):.2f}"

            line += (f"; {', '.join(f'{fmt.short_method_title(m)} s{s}' for m, s, *_ in d)} differ (test error "
                     + ", ".join(f"{err(a)} → {err(b)}" for *_, a, b in d) + " %)")
        out.append(line + ".")
    ship = shipped_facts(pretrained)
    for proto in ("paper", "converged"):
        sel = [m for m in ship if m["dataset"] == "animals10" and m["protocol"] == proto]
        if sel:
            maj = 100 * sel[0]["majority_error"]
            above = [m for m in sel if m["test_error"] is not None and 100 * m["test_error"] > maj]
            out.append(f"Shipped Animals-10 models ({fmt.protocol_title(proto)}): "
                       + ", ".join(f"{fmt.display_name(m['model'])} {100 * m['test_error']:.1f} %"
                                   + (f" (balanced {100 * m['balanced_error']:.1f} %)" if m["balanced_error"] is not None
                                      else "") for m in sel)
                       + f"; majority-class floor {maj:.2f} %: {len(above)} of {len(sel)} above it"
                       + (f" ({', '.join(fmt.display_name(m['model']) for m in above)})" if above else "") + ".")
    sel = selection_fact(root)
    if sel:
        out.append(sel)
    return out


def selection_fact(root) -> str:
    """The median selection margin of the RIM models measured in ``results/*/selection.json``
    (``python -m core.studies.selection --shipped``), when measured."""
    out = []
    for p in sorted(Path(root).glob("*/selection.json")):
        try:
            s = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        q = (s.get("margin_quantiles") or {}).get("0.5")
        if q is not None:
            out.append(f"{fmt.protocol_title(s.get('protocol'))} RIM ({fmt.dataset_title(s.get('dataset'))}, seed "
                       f"{s.get('seed')}, {s.get('images'):,} test images): median selection margin {q:.4f}")
    return ("Selection margin (4th − 5th ranked attention weight): " + "; ".join(out) + ".") if out else ""


def facts_markdown(root="results", pretrained="pretrained") -> str:
    return "\n".join(f"- {f}" for f in facts(root, pretrained))


if __name__ == "__main__":
    print(facts_markdown())


NEURON_MATCHED = "parallel_lstm"  # the paper's Table 2 baseline, matched to RIM's active LSTMs by neuron count


def parameter_gap_text(counts: dict, claim_rows: list[dict]) -> str:
    """Overview's paragraph on what the parameter gap means for the comparisons: the paper matches
    the method and ``NEURON_MATCHED`` by neuron count (their sizes from the models' configs), the
    ratio of their parameter counts (``counts``: data set -> method -> parameters, the first data
    set's), and the verdict of the parameter-matched control on the first data set from the claims
    table (``claim_rows``, as Compare shows it; left out when it holds no such row). "" without
    both counts."""
    from ..data.datasets import DATASETS
    from ..models.registry import DEFAULT_MODEL, config_fields
    from .paper import PARAM_MATCHED

    first = next(iter(counts.values()), {})
    ref, base = first.get(DEFAULT_MODEL), first.get(NEURON_MATCHED)
    if not (ref and base):
        return ""
    p, r = config_fields(NEURON_MATCHED), config_fields(DEFAULT_MODEL)
    text = (f"The paper matches RIM with parallel LSTMs by **neuron count** ({p['num_units']} LSTMs x "
            f"{p['hidden_size']} units, as many as RIM's {r['k_active']} active ones), not by parameters: here RIM "
            f"has **{ref / base:.1f}x the parameters** of the parallel LSTMs ({r['num_units']} LSTMs plus two "
            "attentions). Keep this in mind when reading the comparisons. EntNet, RMC and IndRNN are sized to be in "
            "the same range as the parallel LSTMs.")
    control = PARAM_MATCHED.get(next(iter(DATASETS)))
    # the claims table names a control's claim "control_<variant>" (core.report.claims)
    row = next((c for c in claim_rows if c.get("claim_id") == f"control_{control}"), None)
    if row is None:
        return text
    return (text + f" A parameter-matched control, {fmt.display_name(control).split(' (')[0]}, is in the claims "
            f"table on the Compare page (\"{row['claim']}\"): {row['converged']}.")
