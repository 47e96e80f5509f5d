"""The generated parts of the documents are what their generators write from the committed files."""

from __future__ import annotations

import json
from pathlib import Path

from bench import report

ROOT = Path(__file__).resolve().parents[1]


def test_bench_readme_shows_the_committed_figures():
    text = (ROOT / "bench" / "README.md").read_text(encoding="utf-8")
    generated = text.split(report.BEGIN, 1)[1].split(report.END, 1)[0]
    assert generated.strip() == report.render().strip(), "run `python -m bench.report --write`"


def test_every_bench_file_has_its_table_and_machine():
    rendered = report.render()
    for path in sorted((ROOT / "bench" / "results").glob("*.json")):
        assert f"`bench/results/{path.name}`" in rendered
    assert rendered.count("Machine: ") == len(list((ROOT / "bench" / "results").glob("*.json")))


def test_an_unknown_bench_file_is_shown_as_its_numbers(tmp_path):
    (tmp_path / "new_bench.json").write_text(json.dumps({"machine": {"cores": 2}, "a": {"b_s": 1.5}, "n": 3}))
    out = report.render(tmp_path)
    assert "| a / b_s | 1.5 |" in out and "Machine: 2 cores." in out


def test_compute_cost_sums_the_run_records(tmp_path):
    from core.report import compute as cc

    for i, (folder, t) in enumerate([("paper", 100.0), ("paper", 260.0), ("converged", 3600.0)]):
        p = tmp_path / folder / "runs" / "mnist" / f"rim_s{i}.json"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps({"metrics": {"train_time_s": t, "device": "cpu"}, "train_config": {"threads": 1},
                                 "torch_version": "2.14.1+cu130"}))
    folders = cc.collect(tmp_path)
    assert folders["paper"]["runs"] == 2 and folders["paper"]["seconds"] == 360.0
    text = cc.render(folders)
    assert "| `results/converged` | 1 | 1.0 h | 1 |\n" in text and "Every run: device cpu, torch 2.14.1." in text
    assert "| all | 3 | 1.1 h | |\n" in text
    folders["paper"]["torch"] = {"2.10.0"}  # folders that differ get the column
    text = cc.render(folders)
    assert "| `results/paper` | 2 | 0.1 h | 1 | 2.10.0 |" in text and "Every run: device cpu." in text


def test_results_compute_md_is_current():
    from core.report import compute as cc

    assert (ROOT / "results" / "compute.md").read_text(encoding="utf-8") == cc.render(cc.collect(ROOT / "results")), \
        "run `python -m scripts.compute_cost --write`"


def test_a_new_pages_file_gets_the_pages_table(tmp_path):
    src = json.loads((ROOT / "bench" / "results" / "pages.json").read_text())
    (tmp_path / "pages_slow.json").write_text(json.dumps(src))
    out = report.render(tmp_path)
    assert "| interaction |" in out and "| quantity | value |" not in out


def test_the_interventions_table_names_its_data_sets_as_every_other_table():
    from core.report.interventions_block import interventions_markdown

    header = interventions_markdown(ROOT / "results").splitlines()[0]
    assert header == ("| variant | MNIST clean | MNIST noisy | Fashion-MNIST clean | Fashion-MNIST noisy |")


def test_reproduction_gives_the_compute_total_and_links_the_table(tmp_path):
    """The one line is summed from the run records themselves, as the table is."""
    from core.report.docs import render

    for i, t in enumerate((7200.0, 1800.0)):
        p = tmp_path / "converged" / "runs" / "mnist" / f"rim_s{i}.json"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps({"metrics": {"train_time_s": t}, "train_config": {"threads": 1}}))
    line = render("compute", tmp_path)
    assert line.startswith("2 runs, 2.5 h of recorded training time") and "(results/compute.md)" in line
    assert render("compute", tmp_path / "nowhere").startswith("*No run records")
