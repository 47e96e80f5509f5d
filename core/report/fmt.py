"""Formatting shared by the Markdown tables of ``core.grid`` and the pages.

Errors are stored as fractions and shown in percent; a reproduction summary's numbers are
already in percentage points. Every formatter returns ``"n/a"`` for a missing or non-finite
value, so a half-finished grid still gives readable tables.
"""

from __future__ import annotations

import math
import re

from ..models.registry import get_spec

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


def margin(v) -> str:
    """An equivalence margin in points: two decimals, three where two would round it (0.175)."""
    v = float(v)
    return f"{v:.2f}" if v != v or round(v, 2) == v else f"{v:.3f}"


def pct(v, digits: int = 2) -> str:
    """A fraction as text in percent: ``0.0123`` -> ``"1.23 %"``."""
    f = num(v)
    return f"{100 * f:.{digits}f} %" if math.isfinite(f) else "n/a"


def mean_sd_text(m, s=None, digits: int = 2) -> str:
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


def p_value(p) -> str:
    """A p-value: ``"0.031"``, ``"<0.001"``, ``"1"``; ``"n/a"`` when missing."""
    f = num(p)
    if math.isnan(f):
        return "n/a"
    if f < 0.001:
        return "<0.001"
    return f"{f:.3f}".rstrip("0").rstrip(".") if f < 1 else "1"


def p_pair(p, p_holm) -> str:
    """Raw and Holm-adjusted p side by side: ``"p 0.012 / 0.048"``."""
    return f"p {p_value(p)} / {p_value(p_holm)}"


def level_text(level) -> str:
    """A confidence level as shown: ``0.9875`` -> ``"98.75 %"``."""
    f = num(level)
    return f"{100 * f:.2f}".rstrip("0").rstrip(".") + " %" if math.isfinite(f) else "n/a"


def gap_test(r: dict, key: str, digits: int = 2, paired: bool = False) -> str:
    """A test as one cell: gap [interval at the Holm step's level] (level), p raw / Holm, and the
    family where the test was decided in another table (``paired``: the seed-paired test, its
    unadjusted 95 % interval and pairs, no p: it decides nothing)."""
    k = f"{key}_paired" if paired else key
    g = gap(r.get(k), r.get(f"{k}_ci_low"), r.get(f"{k}_ci_high"), digits)
    if g == "n/a":
        return g
    if paired:
        n = r.get(f"{k}_n")
        return g + (f", {int(n)} pair{'s' if n != 1 else ''}" if n is not None else "")
    if math.isnan(num(r.get(f"{k}_p"))):  # no test (fewer than 2 seeds): the difference alone
        return g
    lev = f" ({level_text(r.get(f'{k}_level'))})" if math.isfinite(num(r.get(f"{k}_level"))) else ""
    fam = f", {r[f'{k}_family']}'s test" if r.get(f"{k}_family") else ""
    return f"{g}{lev}, {p_pair(r.get(f'{k}_p'), r.get(f'{k}_p_holm'))}{fam}"


def raw_interval(r: dict, key: str, digits: int = 2) -> str:
    """The unadjusted 95 % Welch interval of a test (shown beside, labelled; it decides nothing)."""
    return gap(r.get(key), r.get(f"{key}_raw_ci_low"), r.get(f"{key}_raw_ci_high"), digits)


def health_count(healthy, runs) -> str:
    """``"3 of 5 healthy"`` (empty when the cell has no runs)."""
    h, n = num(healthy), num(runs)
    return f"{int(h)} of {int(n)} healthy" if math.isfinite(n) and n > 0 and math.isfinite(h) else ""


def cell(r: dict, name: str, digits: int = 2) -> str:
    """A method's cell: ``"11.11 ± 1.35 (5 of 5 healthy)"`` from ``name_error``/``_sd``/``_healthy``/``_runs``."""
    text = mean_sd_text(r.get(f"{name}_error"), r.get(f"{name}_sd"), digits)
    h = health_count(r.get(f"{name}_healthy"), r.get(f"{name}_runs"))
    return f"{text} ({h})" if h else text


def floors_cell(r: dict) -> str:
    """The data set's chance / majority-class error in percent: ``"90.00 / 82.31"``."""
    return f"{mean_sd_text(r.get('chance_error'))} / {mean_sd_text(r.get('majority_error'))}"


def short_verdict(v) -> str:
    """A verdict without its reason in brackets ("does not hold", "cannot tell", ...)."""
    return _VERDICT_SHORT.get(str(v), str(v))


def marked_verdict(v) -> str:
    """A verdict with its mark, shortened for a table cell."""
    v = str(v or "n/a")
    for key, mark in _VERDICT_MARK.items():
        if v.startswith(key):
            return f"{mark} {short_verdict(v)}"
    return v


def dataset_title(ds) -> str:
    """``"fashion_mnist"`` -> ``"Fashion-MNIST"``; an unknown name as it is."""
    from ..data.datasets import DATASETS

    return DATASETS[ds].title if ds in DATASETS else str(ds)


def long_budgets(entries) -> str:
    """The long grid's iterations per data set, from its shipped models (``catalog.ModelEntry``s), e.g.
    "MNIST 12,000, ..."."""
    its = {}
    for e in entries:
        if e.source == "pretrained" and e.protocol == "long" and e.metrics.get("iterations"):
            its.setdefault(e.dataset, int(e.metrics["iterations"]))
    return ", ".join(f"{dataset_title(ds)} {n:,}" for ds, n in its.items()) or "none shipped"


def method_title(name) -> str:
    """A registry model's title; any other name (a variant, an upload's) as it is."""
    try:
        return get_spec(name).title
    except KeyError:
        return str(name)


def display_name(name) -> str:
    """A model or variant as a reader sees it: ``"rim"`` -> ``"RIM"``, ``"rim_random"`` -> ``"RIM, random
    selection"``; an unknown name as it is."""
    from .paper import VARIANT_TITLES

    return VARIANT_TITLES.get(str(name), short_method_title(name))


def short_method_title(name) -> str:
    """``"RIM (paper's method)"`` -> ``"RIM"``."""
    return method_title(name).split(" (")[0]


# The converged protocol's name wherever a reader sees it: what it is (Adam, a cosine decay, 4,000
# iterations, the best validation accuracy kept). "Converged" is earned only by the budget check
# (results/budget: does anything change at 12,000 iterations?), core.report.budget.
CONVERGED_TITLE = "Adam, cosine, 4,000 iterations"
PROTOCOL_NAMES = {"paper": "paper protocol", "converged": CONVERGED_TITLE, "long": "long grid",
                  "converged-aug": f"{CONVERGED_TITLE} + scan augmentation",
                  "converged-12k": "Adam, cosine, 12,000 iterations",
                  "converged-24k": "Adam, cosine, 24,000 iterations", "custom": "own settings"}


# the long grid (results/long, core.grid.long): each data set at the budget where most of its runs stop
# improving by the convergence criterion, decided by a rule fixed before its first run
LONG_GRID_TITLE = ("long grid: Adam, cosine, a budget per data set fixed by a convergence rule before its "
                   "runs (12,000 or 24,000 iterations; Animals-10 4,000)")


# the protocol inside a model's one display name (pickers, legends, cards): short enough for a
# picker at 1280 px; the sidebar and the glossary spell it out
PROTOCOL_SHORT = {"long": "long grid", "converged": "Adam 4k", "converged-aug": "Adam 4k + scan", "converged-12k": "Adam 12k",
                  "converged-24k": "Adam 24k"}


# the sidebar's protocol switch and the Compare page's experiment picker
PROTOCOL_SWITCH_TITLES = {"long": "long grid: Adam, cosine, a budget per data set (the default)",
                          "converged": f"{CONVERGED_TITLE}: the short budget (best validation kept)",
                          "paper": "paper protocol (SGD 0.1, 1,000 iterations)"}
SCHEDULE_TITLES = {"converged": f"{CONVERGED_TITLE}: the short budget, best of a validation split",
                   "paper": "the paper's short schedule (SGD 0.1, 1,000 iterations): paper grid, ablations, init study"}


def protocol_title(protocol) -> str:
    """``"paper"`` -> ``"paper protocol"``, ``"converged"`` -> ``"Adam, cosine, 4,000 iterations"``; "" for none."""
    return PROTOCOL_NAMES.get(str(protocol or ""), str(protocol or ""))


def protocols_text(protocols: dict) -> str:
    """The manifest's ``protocols`` (name -> its line, ``core.grid.export.protocol_text``) joined
    by "; ": each line after its protocol's title, the title left out where the line names it
    itself ("Long grid: Adam, ...", "... (paper protocol)"), so no name stands twice."""
    parts = []
    for name, text in protocols.items():
        title, text = protocol_title(name), str(text)
        parts.append(text if not title or title.lower() in text.lower() else f"{title}: {text}")
    return "; ".join(parts)


def shipped_models_text(models: list[dict]) -> str:
    """How the shipped models were chosen, from the manifest's ``selection`` of each: the healthy
    run with the median error of its cell, or (where that run's weights were not kept) another
    seed, counted per protocol."""
    by: dict[str, list[int]] = {}
    for m in models:
        median = str(m.get("selection", "")).startswith("median")
        by.setdefault(protocol_title(m.get("protocol")) or "unnamed", [0, 0])[0 if median else 1] += 1
    parts = []
    for proto, (median, other) in by.items():
        text = f"{proto}: {median} of {median + other} are their cell's median healthy run"
        parts.append(text + (f", {other} another seed (the median run's weights were not kept; Models names the seed)" if other else ""))
    return "; ".join(parts)


def short_run_id(run_id) -> str:
    """The random tail of a run id (``"20261201-184459-b7899b34"`` -> ``"b7899b34"``)."""
    return str(run_id or "").rsplit("-", 1)[-1]


def model_label(model, protocol="", seed=None, source="pretrained", run_id="", dataset=None,
                stopped_at=None) -> str:
    """The one display name of a model: method, protocol, seed and where it comes from.

    ``"RIM (paper's method) · Adam 4k · seed 0 (pretrained)"`` (Adam 4k: Adam, cosine, 4,000
    iterations); a run adds its short id
    (``"... (trained, run b7899b34)"``), ``dataset`` puts the data set first. Every picker,
    table, legend, metric and card shows a model by this name, so two models never share one
    (pretrained: one per data set, method, protocol and seed; runs: their id).
    """
    parts = [method_title(model)]
    if protocol:
        parts.append(PROTOCOL_SHORT.get(str(protocol), protocol_title(protocol)))
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


def decimal(v, digits: int = 3) -> str:
    """A plain number with ``digits`` decimals (e.g. a loss in nats), ``"n/a"`` when missing."""
    f = num(v)
    return f"{f:.{digits}f}" if math.isfinite(f) else "n/a"


def duration(seconds) -> str:
    """A rough duration for an estimate: ``"45 s"``, ``"12 min"``, ``"3.5 h"``, ``"2.1 days"``."""
    s = num(seconds)
    if not math.isfinite(s):
        return "n/a"
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    if s < 2 * 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} days"


CI = "[Holm-step interval]"  # the interval of every table: at the level of the Holm step deciding its test


def even_share_text(config) -> str:
    """What an even choice would give, from a RIM's ``config`` (its ``k_active`` of ``num_units``;
    every one with ``selection="all"``): "With k = 4 of 6 every LSTM would be active in 0.67 of
    the rows if the attention chose evenly." """
    n = int(config.num_units)
    k = n if getattr(config, "selection", "attention") == "all" else int(config.k_active)
    return f"With k = {k} of {n} every LSTM would be active in {k / n:.2f} of the rows if the attention chose evenly."
