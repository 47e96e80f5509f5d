"""The long grid: every method trained until it stops improving (``python -m scripts.long_grid``).

Each data set gets the shortest budget at which at least 90 % of its runs meet the convergence
criterion (core.report.convergence), by a rule fixed before the grid's first run:

- MNIST and Fashion-MNIST: from their 12,000-iteration runs (``results/budget``, RIM, parallel
  LSTMs and EntNet, seeds 0-4): 12,000 iterations when >= 90 % of them meet it, else 24,000.
- CIFAR-10: a pilot (RIM and parallel LSTMs, seed 0, 12,000 and 24,000 iterations): 12,000 when
  both pilot runs at 12,000 meet it, else 24,000.
- Animals-10: its 4,000-iteration runs (``results/converged``) stop early at 2,000-3,250: kept.

``cells`` lists the grid in priority order; runs of 12,000 iterations live in ``results/budget``,
of 24,000 in ``results/budget-24k``.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..report.convergence import CONVERGED, plateau
from .cells import run_path

FOLDERS = {12000: "budget", 24000: "budget-24k"}  # under the results folder
PROTOCOL = {12000: "converged-12k", 24000: "converged-24k"}
PASS_SHARE = 0.9
METHODS = ["rim", "parallel_lstm", "entnet", "rmc", "indrnn"]
MATCHED = {"mnist": "parallel_lstm_h81", "fashion_mnist": "parallel_lstm_h81", "cifar10": "parallel_lstm_h60"}
SETS = ["mnist", "fashion_mnist", "cifar10"]


def _record(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def budget(ds: str, results="results") -> int | None:
    """The data set's budget by the rule above; None while the CIFAR-10 pilot is not finished."""
    if ds == "cifar10":
        recs = [_record(run_path(Path(results) / FOLDERS[12000], ds, m, 0)) for m in ("rim", "parallel_lstm")]
        if any(r is None for r in recs):
            return None
        return 12000 if all(plateau(r).state == CONVERGED for r in recs) else 24000
    recs = [r for m in ("rim", "parallel_lstm", "entnet") for s in range(5)
            if (r := _record(run_path(Path(results) / FOLDERS[12000], ds, m, s))) is not None]
    if len(recs) < 15:
        raise ValueError(f"{ds}: {len(recs)} of the 15 12,000-iteration runs the budget rule reads are in "
                         f"{Path(results) / FOLDERS[12000]}")
    share = sum(plateau(r).state == CONVERGED for r in recs) / len(recs)
    return 12000 if share >= PASS_SHARE else 24000


def cells() -> list[tuple[str, str, int, int | None]]:
    """(data set, model, seed, iterations or None = the set's budget, decided when it is trained)."""
    out = [("mnist", m, s, None) for s in range(5) for m in METHODS]
    out += [("cifar10", m, 0, it) for it in (12000, 24000) for m in ("rim", "parallel_lstm")]
    out += [("fashion_mnist", m, s, None) for s in range(5) for m in METHODS]
    out += [("cifar10", m, s, None) for s in range(5) for m in METHODS]
    out += [(ds, m, s, None) for s in range(5, 10) for ds in SETS for m in ("rim", "parallel_lstm")]
    out += [(ds, m, s, None) for s in range(5) for ds in SETS for m in (MATCHED[ds], "rim_random")]
    out += [(ds, m, s, None) for s in range(5) for ds in SETS for m in ("parallel_lstm_6", "rim_all", "rim_alpha0")]
    return out


def job(ds: str, model: str, seed: int, iterations: int, data_dir: str | None, results="results") -> dict:
    """A ``train_cell`` job of the grid (one torch thread, the CPU, 10 noise draws)."""
    return dict(dataset=ds, model=model, seed=seed, iterations=iterations, protocol=PROTOCOL[iterations],
                path=str(run_path(Path(results) / FOLDERS[iterations], ds, model, seed)), device="cpu", noise_draws=10,
                eval_every=250, data_dir=data_dir, overrides={}, threads=1)
