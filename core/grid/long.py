"""The long grid: every method trained until it stops improving (``python -m scripts.long_grid``).

Each data set gets the shortest budget at which at least 90 % of its runs meet the convergence
criterion (core.report.convergence), by a rule fixed before the grid's first run:

- MNIST and Fashion-MNIST: from their 12,000-iteration runs (``results/budget``, RIM, parallel
  LSTMs and EntNet, seeds 0-4): 12,000 iterations when >= 90 % of them meet it, else 24,000.
- CIFAR-10: a pilot (RIM and parallel LSTMs, seed 0, 12,000 and 24,000 iterations): 12,000 when
  both pilot runs at 12,000 meet it, else 24,000. The rule reads the 12,000-iteration half, so the
  24,000-iteration half is trained last (or as the main grid's seed 0, where the rule gives 24,000).
- Animals-10: its 4,000-iteration runs (``results/converged``) stop early at 2,000-3,250: kept.

A second step for CIFAR-10, added after its 12,000-iteration grid was seen: it moves to 24,000
when fewer than 90 % of that grid's 25 runs of seeds 0-4 (five methods) meet the criterion. The long
grid reads CIFAR-10 at 12,000 until its five methods have seeds 0-4 at 24,000. ``link_long_grid``
writes each set's steps and counts to ``results/long/budgets.csv``, which the documents quote.

``cells`` lists the grid in priority order (MNIST, the CIFAR-10 pilot, Fashion-MNIST, seeds 5-9 of
MNIST and Fashion-MNIST, CIFAR-10, the controls, cell by cell); runs of 12,000 iterations live in ``results/budget``,
of 24,000 in ``results/budget-24k``. On Fashion-MNIST and CIFAR-10 the paper's main comparison
(RIM and parallel LSTMs, seeds 0-4) comes before the other three methods, so the answer's
comparison is complete first.

The MNIST runs of RIM, parallel LSTMs and EntNet at 12,000 iterations were trained before the grid
kept weights. Those the interventions study (RIM, seeds 0-4) and the shipped models (each cell's
median seed) need are trained again, same settings and seed, into ``results/budget-retrained``:
each retrained run has its own record, which ``scripts.long_grid`` compares with the first one.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

from ..paths import LONG_GRID, RETRAINED
from ..report.convergence import CONVERGED, PASS_SHARE, plateau
from .cells import run_path
from .export import cell_runs, median_run

FOLDERS = {12000: "budget", 24000: "budget-24k"}  # under the results folder
LONG = LONG_GRID  # results/long: each data set's runs at its budget, as links into the folders above
SHORT_FOLDER = "converged"  # the 4,000-iteration grid: Animals-10's budget by the rule
PROTOCOL = {12000: "converged-12k", 24000: "converged-24k"}
METHODS = ["rim", "parallel_lstm", "entnet", "rmc", "indrnn"]
MATCHED = {"mnist": "parallel_lstm_h81", "fashion_mnist": "parallel_lstm_h81", "cifar10": "parallel_lstm_h60"}
SETS = ["mnist", "fashion_mnist", "cifar10"]


def _record(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def first_budget(ds: str, results="results") -> int | None:
    """The data set's budget by the rule's first step (fixed before the grid's first run); None while
    the CIFAR-10 pilot is not finished."""
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


def _main_grid(ds: str, iterations: int, results="results") -> list[dict]:
    """The records in of the main grid of ``ds`` at ``iterations`` (five methods, seeds 0-4)."""
    folder = Path(results) / FOLDERS[iterations]
    return [r for m in METHODS for s in range(5) if (r := _record(run_path(folder, ds, m, s))) is not None]


def grid_share(ds: str, iterations: int, results="results") -> tuple[int, int] | None:
    """(runs meeting the criterion, 25): the main grid of ``ds`` at ``iterations``; None until all 25
    are in."""
    recs = _main_grid(ds, iterations, results)
    if len(recs) < len(METHODS) * 5:
        return None
    return sum(plateau(r).state == CONVERGED for r in recs), len(recs)


def budget(ds: str, results="results") -> int | None:
    """The data set's budget by the rule above (both steps); None while the CIFAR-10 pilot is not
    finished."""
    first = first_budget(ds, results)
    if ds == "cifar10" and first == 12000 and (share := grid_share(ds, 12000, results)) is not None and share[0] < PASS_SHARE * share[1]:
        return 24000
    return first


class Cell(NamedTuple):
    dataset: str
    model: str
    seed: int
    iterations: int | None = None  # None: the data set's budget, decided when the cell is trained
    folder: str | None = None  # None: FOLDERS[iterations]


def retrain_cells(results="results") -> list[Cell]:
    """MNIST 12,000-iteration runs without weights that the shipped models (the median seed of RIM,
    parallel LSTMs and EntNet), the interventions study (RIM, seeds 0-4) and the handwriting table
    (every method, seeds 0-4) need; trained again into ``RETRAINED``, in that order. Empty while the
    MNIST runs are not all in ``results``."""
    folder = Path(results) / FOLDERS[12000]
    runs = cell_runs(folder, PROTOCOL[12000], ["mnist"])
    if any(len(runs.get(("mnist", m), [])) < 5 for m in ("rim", "parallel_lstm", "entnet")):
        return []
    medians = [(m, chosen[1]["seed"]) for m in ("rim", "parallel_lstm", "entnet")
               if (chosen := median_run(runs[("mnist", m)]))]
    order = medians + [("rim", s) for s in range(5) if ("rim", s) not in medians]  # the shipped ones first
    order += [(m, s) for m in METHODS[1:] for s in range(5)
              if (m, s) not in order and run_path(folder, "mnist", m, s).is_file()]
    return [Cell("mnist", m, s, 12000, RETRAINED) for m, s in order
            if not run_path(folder, "mnist", m, s).with_suffix(".safetensors").is_file()]


def cells(results="results") -> list[Cell]:
    """The grid in priority order."""
    main = ["rim", "parallel_lstm"]
    rest = [m for m in METHODS if m not in main]
    out = [Cell("mnist", m, s) for s in range(5) for m in METHODS]
    out += [Cell("cifar10", m, 0, 12000) for m in main]  # the pilot's half the budget rule reads
    out += retrain_cells(results)
    def main_grid(ds: str) -> list[Cell]:
        return [Cell(ds, m, s) for s in range(5) for m in main] + [Cell(ds, m, s) for s in range(5) for m in rest]

    out += main_grid("fashion_mnist")
    # seeds 5-9 of the sets whose budget is final, then CIFAR-10's main grid at the budget the rule
    # gives (its second step can move it), then its seeds 5-9
    out += [Cell(ds, m, s) for s in range(5, 10) for ds in ("mnist", "fashion_mnist") for m in main]
    out += main_grid("cifar10") + [Cell("cifar10", m, s) for s in range(5, 10) for m in main]
    # the controls cell by cell (a cell's five seeds together, so each can enter the tables whole):
    # parameter-matched and random selection on every set first, then the other three
    out += [Cell(ds, m, s) for ds in SETS for m in (MATCHED[ds], "rim_random") for s in range(5)]
    out += [Cell(ds, m, s) for ds in SETS for m in ("parallel_lstm_6", "rim_all", "rim_alpha0") for s in range(5)]
    # the pilot's other half: when CIFAR-10 goes to 24,000 these are its main grid's seed-0 cells (trained
    # there); when it keeps 12,000 they show what twice the budget would change
    out += [Cell("cifar10", m, 0, 24000) for m in main]
    return out


def cell_path(cell: Cell, iterations: int, results="results") -> Path:
    """Where a cell's record goes once its budget (``iterations``) is known."""
    return run_path(Path(results) / (cell.folder or FOLDERS[iterations]), cell.dataset, cell.model, cell.seed)


def job(cell: Cell, iterations: int, data_dir: str | None, results="results") -> dict:
    """A ``train_cell`` job of the grid (one torch thread, the CPU, 10 noise draws)."""
    return dict(dataset=cell.dataset, model=cell.model, seed=cell.seed, iterations=iterations,
                protocol=PROTOCOL[iterations], path=str(cell_path(cell, iterations, results)), device="cpu",
                noise_draws=10, eval_every=250, data_dir=data_dir, overrides={}, threads=1)


def read_budget(ds: str, results="results") -> int | None:
    """The budget the long grid reads ``ds`` at: its budget, except that CIFAR-10, once the rule's
    second step moves it, is read at its first budget until its main grid is complete at the second."""
    it = budget(ds, results)
    if it is not None and it != (first := first_budget(ds, results)) and grid_share(ds, it, results) is None:
        return first
    return it


def long_sources(results="results") -> dict[str, str]:
    """``{data set: folder}`` of the long grid: each data set's folder at the budget the rule gives
    (Animals-10: the 4,000-iteration grid); a data set whose budget is not decided yet is left out."""
    out = {}
    for ds in SETS:
        try:
            it = read_budget(ds, results)
        except ValueError:  # its 12,000-iteration runs are not all in yet
            it = None
        if it is not None:
            out[ds] = FOLDERS[it]
    out["animals10"] = SHORT_FOLDER
    return out


BUDGETS_FILE = "budgets.csv"  # results/long/budgets.csv
BUDGET_COLUMNS = ["dataset", "first_step", "budget", "read_at", "main_met_at_first", "main_runs_at_first",
                  "main_runs_at_budget"]


def budget_rows(results="results") -> list[dict]:
    """Each set's budget by the rule's first step and by both, the budget the long grid reads it at,
    the main grid's runs meeting the criterion and its runs at the first step's budget, and its runs
    in at the budget (of 25); sets whose budget is not decided are left out."""
    out = []
    for ds in SETS:
        try:
            first, it, read = first_budget(ds, results), budget(ds, results), read_budget(ds, results)
        except ValueError:
            continue
        if first is None:
            continue
        share = grid_share(ds, first, results)
        out.append(dict(dataset=ds, first_step=first, budget=it, read_at=read,
                        main_met_at_first=share[0] if share else "", main_runs_at_first=share[1] if share else "",
                        main_runs_at_budget=len(_main_grid(ds, it, results))))
    return out


def write_budgets(results="results") -> Path:
    """``budget_rows`` to ``results/long/budgets.csv``."""
    import csv

    path = Path(results) / LONG / BUDGETS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=BUDGET_COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(budget_rows(results))
    return path


def link_long_grid(results="results") -> dict[str, str]:
    """Make ``results/long/runs/<data set>`` a relative link to that set's runs at its budget
    (``long_sources``), so every reader of a results folder reads the long grid as one; links of
    sets whose budget is not decided are removed. Returns the sources linked."""
    runs = Path(results) / LONG / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    write_budgets(results)
    sources = {ds: f for ds, f in long_sources(results).items() if (Path(results) / f / "runs" / ds).is_dir()}
    for ds in set(SETS) | {"animals10"}:
        link = runs / ds
        want = Path("..", "..", sources[ds], "runs", ds) if ds in sources else None
        if link.is_symlink() and (want is None or Path(link.readlink()) != want):
            link.unlink()
        if want is not None and not link.is_symlink():
            link.symlink_to(want, target_is_directory=True)
    return sources
