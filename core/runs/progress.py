"""What a run's card says about where it stands and what it kept: the progress line, the end of a
stop request, and which iteration's weights a finished run keeps (with a warning when its final
evaluation is far below the best one seen during training). Torch-free, no I/O.
"""

from __future__ import annotations

import math

from ..report.fmt import source_parts

FINAL_EVALUATION = "final evaluation on the whole test set…"
STOPPING = "stopping: evaluating and saving what it learned…"
FAR_BELOW = 0.05  # final test accuracy this far (5 points) under the best periodic one: said on the card


def progress_text(run) -> str:
    """The progress bar's words: the status and the iterations, or what a worker does between
    its last iteration and its end (the final evaluation, a stop)."""
    its = f"{run.iteration:,} / {run.total:,} iterations"
    if run.status == "running" and getattr(run, "stop_requested", False):
        return f"stopping after the current iteration · {its}"
    if run.status == "running" and run.total and run.iteration >= run.total:
        return f"{FINAL_EVALUATION} · {its}"
    return f"{run.status} · {its}"


def training_text(source: str, n_images: int) -> str:
    """The card's line while a run trains: how many images, from which source in plain words (its
    path, and a sample's own size, stay in the run's status: ``data_source``)."""
    return f"training on {n_images:,} images from the {source_parts(source)[0]}"


def stop_outcome(run) -> str | None:
    """What became of a run someone asked to stop, once its worker is done (None while it runs)."""
    if run is None or run.active:
        return None
    if run.status == "stopped":
        return f"stopped after {run.iteration:,} of {run.total:,} iterations; it keeps what it learned and can be resumed."
    return f"ended {run.status} ({run.iteration:,} of {run.total:,} iterations) before the stop took effect."


def _finite_or_none(v) -> float | None:
    """``v`` as a float when it is a finite number, else None (an accuracy to compare)."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def best_seen(evals: dict) -> tuple[float, int] | None:
    """(the best periodic test accuracy, its iteration) from ``{"iteration"|"eval_iteration": [...],
    "test_acc": [...]}``; None without any."""
    its = evals.get("eval_iteration") or evals.get("iteration") or []
    pts = [(a, int(i)) for i, a in zip(its, (_finite_or_none(v) for v in evals.get("test_acc") or [])) if a is not None]
    return max(pts, key=lambda p: (p[0], -p[1])) if pts else None


def kept_weights(metrics: dict, evals: dict) -> dict:
    """Which weights a finished run keeps, in words, and a warning when its final test accuracy
    is more than ``FAR_BELOW`` under the best periodic test accuracy seen during training.

    ``metrics``: the run's final metrics (``iterations_done``, ``test_accuracy``, ``best_iteration``
    when a validation split chose the weights); ``evals``: its periodic evaluations. Returns
    ``{"kept": str, "warning": str}`` ("" where there is nothing to say). The better weights seen are
    never swapped in afterwards: they were found by test accuracy, which would flatter the test error."""
    metrics = metrics or {}
    done, best_it = metrics.get("iterations_done"), metrics.get("best_iteration")
    if isinstance(best_it, int):
        kept = f"kept the weights of iteration {best_it:,} (best validation accuracy)"
    elif isinstance(done, int) and done:
        kept = f"kept the final weights (iteration {done:,})"
    else:
        kept = ""
    final, seen = _finite_or_none(metrics.get("test_accuracy")), best_seen(evals or {})
    warning = ""
    if final is not None and seen is not None and seen[0] - final > FAR_BELOW:
        which = (f"the weights of iteration {best_it:,}, chosen on the validation split" if isinstance(best_it, int)
                 else "the final weights")
        warning = (f"Final test accuracy {100 * final:.1f} %, {100 * (seen[0] - final):.1f} points below the best "
                   f"seen during training ({100 * seen[0]:.1f} % at iteration {seen[1]:,}): the run keeps {which}, "
                   "not the better ones seen.")
    return {"kept": kept, "warning": warning}
