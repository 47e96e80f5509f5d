"""The convergence criterion (core.report.convergence) and where the tables show it."""
import json
import math

import pandas as pd

from core.paths import ROOT
from core.report.convergence import CONVERGED, IMPROVING, NOT_MEASURED, ends_before_cut, plateau
from core.report.tables import convergence_cells, convergence_line, load_results


def record(vals, iterations=1000, every=100, val_images=500):
    its = list(range(every, every * len(vals) + 1, every))
    return {"train_config": {"iterations": iterations, "val_images": val_images},
            "evals": {"iteration": its, "val_acc": vals}}


def test_a_run_that_gains_in_its_last_quarter_is_still_improving():
    flat = record([0.5, 0.8, 0.9, 0.95, 0.96, 0.97, 0.97, 0.971, 0.9705, 0.971])  # cut at 750: best 0.97
    assert plateau(flat).state == CONVERGED and math.isclose(plateau(flat).gain_points, 0.1)
    rising = record([0.5, 0.8, 0.9, 0.95, 0.96, 0.97, 0.97, 0.972, 0.974, 0.975])
    p = plateau(rising)
    assert p.state == IMPROVING and math.isclose(p.gain_points, 0.5) and p.best_iteration == 1000
    stopped = record([0.5, 0.8, 0.9, 0.89, 0.88, 0.88])  # stopped early at 600, best at 300
    assert plateau(stopped).state == CONVERGED and plateau(stopped).gain_points == 0
    assert plateau(record([0.5, 0.6], val_images=0)).state == NOT_MEASURED  # the paper protocol: no split
    assert plateau({"train_config": {}}).state == NOT_MEASURED


def test_the_shipped_runs_csvs_hold_the_criterion_computed_from_each_history():
    for grid in ("converged", "budget", "paper"):
        df = pd.read_csv(ROOT / "results" / grid / "runs.csv")
        for r in df.itertuples():
            name = f"{r.model}_s{r.seed}.json"
            meta = json.loads((ROOT / "results" / grid / "runs" / r.dataset / name).read_text())
            assert plateau(meta).state == r.convergence, (grid, r.dataset, name)


def test_the_line_under_a_table_counts_and_names():
    run = {"dataset": "mnist", "model": "rim", "seed": 1, "convergence": IMPROVING}
    ok = {"dataset": "mnist", "model": "rim", "seed": 0, "convergence": CONVERGED}
    assert convergence_line([], []) == "Convergence criterion: not measured (no validation split)."
    assert convergence_line([], [ok]) == "Convergence criterion: all 1 runs meet it."
    assert convergence_line([run], [ok, run]) == ("Convergence criterion: 1 of 2 runs meet it; still improving "
                                                  "(in the means): MNIST RIM seed 1.")


def test_runs_that_early_stopping_ends_by_the_cut_are_counted_apart():
    row = {"dataset": "mnist", "model": "rim", "seed": 0, "convergence": CONVERGED, "iterations": 12000}
    assert ends_before_cut({**row, "iterations_run": 9000})  # the cut itself: every evaluation is before it
    assert not ends_before_cut({**row, "iterations_run": 9250})
    assert not ends_before_cut({**row, "iterations_run": 12000})  # ran its schedule out
    assert not ends_before_cut({**row, "iterations_run": None})
    fmnist = {**row, "dataset": "fashion_mnist", "iterations": 24000}
    rows = [{**row, "iterations_run": 4250}, {**row, "seed": 1, "iterations_run": 12000},
            {**fmnist, "iterations_run": 6000}, {**fmnist, "seed": 1, "iterations_run": 16500},
            {**row, "seed": 2, "iterations_run": 12000, "convergence": IMPROVING}]
    text = "\n".join(convergence_cells(rows))
    assert "All cells: 4 of 5 runs (80 %) meet it." in text  # per set: of the runs that meet it (MNIST 2, not 3)
    assert "3 of the runs that meet it stopped early" in text
    assert "Per data set: MNIST 1 of 2 (at 4,250); Fashion-MNIST 2 of 2 (at 6,000-16,500)." in text
    assert "stopped early" not in "\n".join(convergence_cells([{**row, "iterations_run": 12000}]))


def test_the_long_grids_table_counts_its_early_stopped_runs():
    from core.report.controls import tabulated

    rows = tabulated(load_results(ROOT / "results" / "long"))  # the runs its tables read
    early = [r for r in rows if r.get("convergence") == CONVERGED and ends_before_cut(r)]
    text = (ROOT / "results" / "long" / "tables.md").read_text()
    assert early and f"{len(early)} of the runs that meet it stopped early" in text
