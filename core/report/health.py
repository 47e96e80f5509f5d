"""Run health: did a finished run learn anything, or did it diverge or collapse?

A run's ``status`` only says whether training ran to its end ("completed") or hit a
non-finite loss ("diverged"). A run can complete and still be broken: its loss blew up and
never came back, or it predicts one class for every image. ``classify`` names that, from
what a run JSON stores (the per-batch loss history and the final test confusion matrix):

* ``diverged``: a non-finite loss anywhere; or a batch loss above ``BLOWUP_FACTOR`` x the
  first batch loss at any iteration; or a last batch loss above the first.
* ``collapsed``: balanced accuracy (mean per-class recall on the test set) not above chance
  (1 / classes) + ``COLLAPSE_MARGIN``; or one class predicted for more than
  ``MAX_CLASS_SHARE`` of the test images.
* ``healthy``: neither.

A run that is both diverged and collapsed is called ``diverged`` (the cause); the reasons
list every criterion that failed. ``checked`` names what could be checked: a run without
a confusion matrix can be checked for balanced accuracy (per-class accuracy) but not for the
predicted-class share, and a run without a loss history not for divergence.

Pure numpy on plain dicts: no torch, no files (``health_fields`` gives the keys to store).
"""

from __future__ import annotations

import math

import numpy as np

HEALTHY, DIVERGED, COLLAPSED = "healthy", "diverged", "collapsed"
BLOWUP_FACTOR = 10.0  # a batch loss above this many times the first one counts as diverged
# The blow-up test reads the loss through a running median of this many iterations. 1 = every
# single batch loss, the rule as written ("at any point"): it also flags runs with
# a one- or two-batch spike early in training that recovered. 11 would keep only blow-ups that
# last (on the paper grid: 6 diverged runs instead of 12).
BLOWUP_WINDOW = 1
COLLAPSE_MARGIN = 0.02  # balanced accuracy must exceed chance by more than 2 points
MAX_CLASS_SHARE = 0.90  # one class predicted for more than 90 % of the test set: collapsed
CRITERIA = ("loss", "balanced_accuracy", "predicted_share")
HEALTH_KEYS = ("health", "health_reasons", "health_checked", "health_measures")
_EPS = 1e-12  # a rate exactly at a threshold is not above it, whatever the float rounding


def _floats(values) -> np.ndarray:
    out = []
    for v in values or []:
        try:
            out.append(float(v))
        except (TypeError, ValueError):  # a diverged loss is stored as null
            out.append(math.nan)
    return np.asarray(out, dtype=float)


def running_median(v: np.ndarray, window: int) -> np.ndarray:
    """Centred running median (non-finite values count as +inf; edges use the part inside)."""
    if window <= 1:
        return v
    x = np.where(np.isfinite(v), v, np.inf)
    h = window // 2
    return np.asarray([np.median(x[max(0, i - h) : i + h + 1]) for i in range(len(x))])


def loss_problems(loss, iterations=None, window: int | None = None) -> tuple[list[str], dict]:
    """Divergence reasons of a per-batch loss history (empty list: none), and the measures.

    ``window``: the running median the blow-up test reads (default ``BLOWUP_WINDOW``)."""
    window = BLOWUP_WINDOW if window is None else window
    v = _floats(loss)
    its = list(iterations) if iterations is not None and len(iterations) == len(v) else list(range(1, len(v) + 1))
    reasons: list[str] = []
    bad = np.flatnonzero(~np.isfinite(v))
    if len(bad):
        reasons.append(f"loss not finite at iteration {its[bad[0]]}")
    first, last = v[0], v[-1]
    measures = {"loss_first": float(first) if math.isfinite(first) else None,
                "loss_last": float(last) if math.isfinite(last) else None}
    if math.isfinite(first) and first > 0:
        level = running_median(v, window)
        ratio = np.where(np.isfinite(level), level / first, np.inf)
        over = np.flatnonzero(ratio > BLOWUP_FACTOR)
        peak = float(np.nanmax(np.where(np.isfinite(v), v, np.nan))) if np.isfinite(v).any() else math.nan
        measures.update(loss_peak_ratio=peak / first if math.isfinite(peak) else None,
                        iterations_above_blowup=int(len(over)))
        if len(over):
            where = (f"iteration {its[over[0]]}" if len(over) == 1
                     else f"{len(over)} iterations, {its[over[0]]}-{its[over[-1]]}")
            what = "batch loss" if window <= 1 else f"running median ({window} iterations) of the batch loss"
            reasons.append(f"{what} above {BLOWUP_FACTOR:g}x its first value ({first:.3g}) at {where}; "
                           f"peak {peak:.3g} ({peak / first:.3g}x)")
    if math.isfinite(first) and math.isfinite(last) and last > first:
        reasons.append(f"final batch loss {last:.3g} above the first {first:.3g}")
    return reasons, measures


def balanced_accuracy(confusion=None, per_class_accuracy=None) -> float:
    """Mean per-class recall over the classes with test images (NaN when nothing is known)."""
    if confusion is not None:
        c = np.asarray(confusion, dtype=float)
        n = c.sum(1)
        if c.ndim == 2 and (n > 0).any():
            return float((np.diag(c)[n > 0] / n[n > 0]).mean())
    acc = _floats(per_class_accuracy)
    acc = acc[np.isfinite(acc)]
    return float(acc.mean()) if len(acc) else math.nan


def prediction_problems(num_classes: int, confusion=None, per_class_accuracy=None) -> tuple[list[str], dict, list[str]]:
    """Collapse reasons from the test predictions, the measures and which criteria were checked."""
    reasons: list[str] = []
    measures: dict = {}
    checked: list[str] = []
    bal = balanced_accuracy(confusion, per_class_accuracy)
    chance = 1.0 / num_classes if num_classes else math.nan
    if math.isfinite(bal) and math.isfinite(chance):
        checked.append("balanced_accuracy")
        measures.update(balanced_accuracy=bal, chance=chance)
        if bal <= chance + COLLAPSE_MARGIN + _EPS:
            reasons.append(f"balanced accuracy {100 * bal:.2f} % not above chance {100 * chance:.2f} % "
                           f"+ {100 * COLLAPSE_MARGIN:g} points")
    if confusion is not None:
        c = np.asarray(confusion, dtype=float)
        if c.ndim == 2 and c.sum() > 0:
            checked.append("predicted_share")
            pred = c.sum(0)
            top = int(pred.argmax())
            share = float(pred[top] / pred.sum())
            measures.update(max_predicted_share=share, most_predicted_class=top)
            if share > MAX_CLASS_SHARE + _EPS:
                reasons.append(f"class {top} predicted for {100 * share:.1f} % of the test images "
                               f"(above {100 * MAX_CLASS_SHARE:g} %)")
    return reasons, measures, checked


def classify(meta: dict) -> dict:
    """``{"health", "health_reasons", "health_checked", "health_measures"}`` of one run JSON."""
    metrics = meta.get("metrics") or {}
    history = meta.get("history") or {}
    reasons_d: list[str] = []
    measures: dict = {}
    checked: list[str] = []
    if meta.get("status") == "diverged":
        reasons_d.append("training stopped on a non-finite loss" + (f" ({meta['message']})" if meta.get("message") else ""))
    if history.get("loss"):
        checked.append("loss")
        r, m = loss_problems(history["loss"], history.get("iteration"))
        reasons_d += [x for x in r if x not in reasons_d]
        measures.update(m)
    confusion = metrics.get("confusion")
    n_classes = len(confusion) if confusion else len(meta.get("classes") or metrics.get("per_class_accuracy") or [])
    reasons_c, m, chk = prediction_problems(n_classes, confusion, metrics.get("per_class_accuracy"))
    measures.update(m)
    checked += chk
    health = DIVERGED if reasons_d else COLLAPSED if reasons_c else HEALTHY
    return {"health": health, "health_reasons": reasons_d + reasons_c, "health_checked": checked,
            "health_measures": measures}


def health_of(meta: dict) -> dict:
    """The stored health fields of a run JSON, or classified now when it has none."""
    if meta.get("health") in (HEALTHY, DIVERGED, COLLAPSED):
        return {k: meta.get(k) for k in HEALTH_KEYS}
    return classify(meta)


def with_health(meta: dict) -> dict:
    """``meta`` with its health fields (re)computed by ``classify``, placed right after ``status``."""
    h = classify(meta)
    out = {}
    for k, v in meta.items():
        if k in HEALTH_KEYS:
            continue
        out[k] = v
        if k == "status":
            out.update(h)
    if "health" not in out:
        out.update(h)
    return out


def summary_text(h: dict) -> str:
    """``"collapsed: class 5 predicted for 100.0 % ..."`` (one line for tables and pages)."""
    if h.get("health") == HEALTHY:
        unchecked = [c for c in CRITERIA if c not in (h.get("health_checked") or [])]
        return HEALTHY + (f" (not checked: {', '.join(unchecked)})" if unchecked else "")
    return f"{h.get('health')}: " + "; ".join(h.get("health_reasons") or [])
