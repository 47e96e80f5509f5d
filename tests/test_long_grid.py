"""The long grid's budget rule and order (core.grid.long), fixed before its first run."""
import json

import pytest

from core.grid.cells import run_path
from core.grid.long import (
    FOLDERS,
    LONG,
    METHODS,
    RETRAINED,
    Cell,
    budget,
    budget_rows,
    cell_path,
    cells,
    job,
    link_long_grid,
    long_sources,
    read_budget,
    retrain_cells,
    write_budgets,
)
from core.paths import long_grid_weights
from core.report.tables import same_run


def _write(results, ds, model, seed, gains_late: bool, iterations=12000):
    vals = [0.9, 0.95, 0.96, 0.97] + ([0.975, 0.98] if gains_late else [0.97, 0.9705])  # cut at 9,000
    rec = {"train_config": {"iterations": iterations, "val_images": 5000},
           "evals": {"iteration": [3000, 6000, 8000, 9000, 10500, 12000][: len(vals)], "val_acc": vals}}
    p = run_path(results / FOLDERS[iterations], ds, model, seed)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(rec))


def test_mnist_keeps_12000_when_90_percent_meet_the_criterion_else_24000(tmp_path):
    for m in ("rim", "parallel_lstm", "entnet"):
        for s in range(5):
            _write(tmp_path, "mnist", m, s, gains_late=(m, s) == ("entnet", 0))  # 14 of 15 meet it
            _write(tmp_path, "fashion_mnist", m, s, gains_late=m == "parallel_lstm" and s < 2)  # 13 of 15
    assert budget("mnist", tmp_path) == 12000
    assert budget("fashion_mnist", tmp_path) == 24000
    with pytest.raises(ValueError, match="0 of the 15"):
        budget("mnist", tmp_path / "elsewhere")


def test_cifar10_waits_for_its_pilot_then_keeps_12000_only_when_both_meet_it(tmp_path):
    assert budget("cifar10", tmp_path) is None
    _write(tmp_path, "cifar10", "rim", 0, gains_late=False)
    assert budget("cifar10", tmp_path) is None
    _write(tmp_path, "cifar10", "parallel_lstm", 0, gains_late=True)
    assert budget("cifar10", tmp_path) == 24000
    _write(tmp_path, "cifar10", "parallel_lstm", 0, gains_late=False)
    assert budget("cifar10", tmp_path) == 12000


def test_cifar10_moves_to_24000_when_its_12000_grid_falls_below_the_bar_and_is_read_at_12000_meanwhile(tmp_path):
    """The rule's second step (added after seeing CIFAR-10's 12,000-iteration grid): under 90 % of the
    25 runs of seeds 0-4 meeting the criterion move it to 24,000; the long grid reads it at 12,000 until
    those 25 are in at 24,000."""
    methods = ["rim", "parallel_lstm", "entnet", "rmc", "indrnn"]
    for m in methods:
        for s in range(5):
            _write(tmp_path, "cifar10", m, s, gains_late=(m, s) in {("entnet", 0), ("indrnn", 1)})  # 23 of 25
    assert budget("cifar10", tmp_path) == read_budget("cifar10", tmp_path) == 12000
    _write(tmp_path, "cifar10", "rmc", 2, gains_late=True)  # 22 of 25: 88 %
    assert budget("cifar10", tmp_path) == 24000 and read_budget("cifar10", tmp_path) == 12000
    assert long_sources(tmp_path)["cifar10"] == "budget"
    for m in methods:
        for s in range(5):
            if (m, s) != ("indrnn", 4):
                _write(tmp_path, "cifar10", m, s, gains_late=False, iterations=24000)
    assert read_budget("cifar10", tmp_path) == 12000  # 24 of 25 in at 24,000
    row = {r["dataset"]: r for r in budget_rows(tmp_path)}["cifar10"]
    assert row == dict(dataset="cifar10", first_step=12000, budget=24000, read_at=12000, main_met_at_first=22,
                       main_runs_at_first=25, main_runs_at_budget=24)
    _write(tmp_path, "cifar10", "indrnn", 4, gains_late=True, iterations=24000)
    assert read_budget("cifar10", tmp_path) == 24000 and long_sources(tmp_path)["cifar10"] == "budget-24k"
    # the step is CIFAR-10's: MNIST's rule is the first step's, whatever its grid's share
    for m in methods:
        for s in range(5):
            _write(tmp_path, "mnist", m, s, gains_late=m == "indrnn")  # 20 of 25
    assert budget("mnist", tmp_path) == 12000
    assert write_budgets(tmp_path).read_text().splitlines()[0] == (
        "dataset,first_step,budget,read_at,main_met_at_first,main_runs_at_first,main_runs_at_budget")


def test_the_order_and_the_jobs(tmp_path):
    order = cells(tmp_path)
    assert order[0] == Cell("mnist", "rim", 0)
    pilot = order.index(Cell("cifar10", "rim", 0, 12000))  # the pilot: seed 0 at 12,000 (the rule reads it)
    assert all(c.dataset == "mnist" for c in order[:pilot])  # MNIST first, then the CIFAR-10 pilot, ...
    assert order.index(Cell("fashion_mnist", "rim", 0)) > pilot
    # the paper's main comparison (RIM, parallel LSTMs) over seeds 0-4 before the other methods
    assert order.index(Cell("fashion_mnist", "parallel_lstm", 4)) < order.index(Cell("fashion_mnist", "entnet", 0))
    # seeds 5-9 of MNIST and Fashion-MNIST after their main grids, before CIFAR-10's main grid and its seeds 5-9
    assert order.index(Cell("fashion_mnist", "indrnn", 4)) < order.index(Cell("mnist", "rim", 5)) \
        < order.index(Cell("fashion_mnist", "parallel_lstm", 9)) < order.index(Cell("cifar10", "rim", 1)) \
        < order.index(Cell("cifar10", "indrnn", 4)) < order.index(Cell("cifar10", "rim", 5))
    # the controls cell by cell: a cell's five seeds in a row, matched and random before the other three
    ctl = [c for c in order if c.model not in METHODS]
    assert ctl[:10] == [Cell("mnist", m, s) for m in ("parallel_lstm_h81", "rim_random") for s in range(5)]
    assert max(order.index(c) for c in ctl if c.model in ("parallel_lstm_h60", "rim_random")) \
        < min(order.index(c) for c in ctl if c.model == "parallel_lstm_6")
    assert order[-3] == Cell("cifar10", "rim_alpha0", 4)  # the controls, then
    assert order[-2:] == [Cell("cifar10", m, 0, 24000) for m in ("rim", "parallel_lstm")]  # the pilot's 24,000 half
    assert len(order) == len(set(order))
    assert not any(c.folder for c in order)  # no MNIST runs in tmp_path: nothing to train again
    j = job(Cell("mnist", "rmc", 3), 12000, None, "res")
    assert j["protocol"] == "converged-12k" and j["threads"] == 1 and j["path"].endswith("res/budget/runs/mnist/rmc_s3.json")


def _record(results, model, seed, err, weights=False):
    p = run_path(results / FOLDERS[12000], "mnist", model, seed)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps({"dataset": "mnist", "model": model, "seed": seed, "status": "completed",
                             "protocol": "converged-12k", "health": "healthy", "metrics": {"test_error": err},
                             "evals": {"val_acc": [0.9, 0.95]}}))
    if weights:
        p.with_suffix(".safetensors").write_bytes(b"")


def test_runs_without_weights_are_trained_again_the_shipped_medians_first(tmp_path):
    errs = [0.020, 0.014, 0.018, 0.016, 0.012]  # the median (third lowest) is seed 3
    for m in ("rim", "parallel_lstm", "entnet"):
        for s in range(5):
            if (m, s) != ("entnet", 4):
                _record(tmp_path, m, s, errs[s], weights=(m, s) == ("rim", 2))
    assert retrain_cells(tmp_path) == []  # EntNet seed 4 missing: not decided yet
    _record(tmp_path, "entnet", 4, errs[4])
    again = retrain_cells(tmp_path)
    assert again[:3] == [Cell("mnist", m, 3, 12000, RETRAINED) for m in ("rim", "parallel_lstm", "entnet")]
    assert [(c.model, c.seed) for c in again[3:6]] == [("rim", 0), ("rim", 1), ("rim", 4)]  # seed 2 has weights
    # then the handwriting table's: every other run of seeds 0-4 without weights, method by method
    assert [(c.model, c.seed) for c in again[6:]] == [("parallel_lstm", s) for s in (0, 1, 2, 4)] + [
        ("entnet", s) for s in (0, 1, 2, 4)]
    assert cell_path(again[0], 12000, tmp_path) == tmp_path / RETRAINED / "runs" / "mnist" / "rim_s3.json"
    assert again[0] in cells(tmp_path)


def test_a_retrained_run_matches_only_with_the_same_numbers():
    first = {"metrics": {"test_error": 0.0123}, "evals": {"val_acc": [0.9, 0.95]}}
    assert same_run(first, json.loads(json.dumps(first)))
    assert not same_run(first, {"metrics": {"test_error": 0.0124}, "evals": {"val_acc": [0.9, 0.95]}})
    assert not same_run(first, {"metrics": {"test_error": 0.0123}, "evals": {"val_acc": [0.9, 0.96]}})


def test_the_long_grid_links_each_data_set_to_its_budget(tmp_path):
    for m in ("rim", "parallel_lstm", "entnet"):
        for s in range(5):
            _write(tmp_path, "mnist", m, s, gains_late=False)  # MNIST: 12,000
            _write(tmp_path, "fashion_mnist", m, s, gains_late=True)  # Fashion-MNIST: 24,000
    (tmp_path / "converged" / "runs" / "animals10").mkdir(parents=True)
    assert long_sources(tmp_path) == {"mnist": "budget", "fashion_mnist": "budget-24k", "animals10": "converged"}
    assert link_long_grid(tmp_path) == {"mnist": "budget", "animals10": "converged"}  # no 24,000 runs yet: no link
    runs = tmp_path / LONG / "runs"
    assert sorted(p.name for p in runs.iterdir()) == ["animals10", "mnist"]
    assert sorted(p.name for p in (runs / "mnist").glob("*.json")) == sorted(
        p.name for p in (tmp_path / "budget" / "runs" / "mnist").glob("*.json"))
    _write(tmp_path, "fashion_mnist", "rim", 0, gains_late=False, iterations=24000)
    assert link_long_grid(tmp_path)["fashion_mnist"] == "budget-24k"
    assert [p.name for p in (runs / "fashion_mnist").glob("*.json")] == ["rim_s0.json"]
    assert (runs / "fashion_mnist").readlink().as_posix() == "../../budget-24k/runs/fashion_mnist"  # relative: moves with the repo


def test_the_shipped_long_grid_links_follow_the_rule():
    from core.paths import ROOT

    results = ROOT / "results"
    runs = results / LONG / "runs"
    linked = {p.name: p.readlink().as_posix() for p in runs.iterdir()}
    want = {ds: f"../../{f}/runs/{ds}" for ds, f in long_sources(results).items() if (results / f / "runs" / ds).is_dir()}
    assert linked == want
    import csv

    with (results / LONG / "budgets.csv").open() as f:  # the steps the documents quote, as the rule gives them now
        assert [{k: str(v) for k, v in r.items()} for r in budget_rows(results)] == list(csv.DictReader(f))


def test_at_least_90_percent_of_the_long_grids_runs_meet_the_criterion():
    """The long grid's bar (``PASS_SHARE``), computed from every run's validation history."""
    from core.paths import ROOT
    from core.report.convergence import CONVERGED, PASS_SHARE, plateau
    from core.report.tables import run_records

    records = run_records(ROOT / "results" / LONG)
    assert len(records) >= 40
    met = sum(plateau(r).state == CONVERGED for r in records)
    assert met / len(records) >= PASS_SHARE, f"{met} of {len(records)} runs meet the convergence criterion"


def test_the_long_grids_weights_are_found_at_the_budget_else_retrained(tmp_path):
    for m in ("rim", "parallel_lstm", "entnet"):
        for s in range(5):
            _write(tmp_path, "mnist", m, s, gains_late=False)  # MNIST: 12,000, in budget/
    (tmp_path / FOLDERS[12000] / "runs" / "mnist" / "rim_s0.safetensors").write_bytes(b"")  # kept with the grid
    again = tmp_path / RETRAINED / "runs" / "mnist"
    again.mkdir(parents=True)
    for name in ("rim_s2.json", "rim_s2.safetensors", "rim_s3.safetensors"):  # seed 3: weights without a record
        (again / name).write_text("{}")
    link_long_grid(tmp_path)
    found = long_grid_weights("mnist", "rim", tmp_path)
    assert found == [tmp_path / LONG / "runs" / "mnist" / "rim_s0", again / "rim_s2"]
    assert found[0].with_suffix(".safetensors").resolve() == (tmp_path / "budget" / "runs" / "mnist" /
                                                              "rim_s0.safetensors").resolve()
    assert long_grid_weights("fashion_mnist", "rim", tmp_path) == []  # its budget's runs are not in


def test_the_study_says_when_the_long_grid_has_no_weights_yet(tmp_path, monkeypatch):
    from core.studies import interventions as study

    monkeypatch.setattr(study, "ROOT", tmp_path)
    with pytest.raises(SystemExit, match=r"seeds 0, 1, 2, 3, 4 with their weights are not all in results/ on "
                                         r"fashion_mnist \(0 of 5\)"):
        study.weight_stems(["fashion_mnist"], None, "converged", long_grid=True)
    # seeds 0 and 1 in (weights and record beside the long grid's link): the study takes exactly those asked for
    runs = tmp_path / "results" / "long" / "runs" / "fashion_mnist"
    runs.mkdir(parents=True)
    for s in (0, 1):
        for ext in (".json", ".safetensors"):
            (runs / f"rim_s{s}{ext}").write_text("{}")
    assert [p.name for p in study.weight_stems(["fashion_mnist"], None, "converged", True, (0, 1))["fashion_mnist"]] \
        == ["rim_s0", "rim_s1"]
    with pytest.raises(SystemExit, match=r"\(2 of 3\)"):
        study.weight_stems(["fashion_mnist"], None, "converged", True, (0, 1, 2))
