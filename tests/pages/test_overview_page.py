"""The Overview page through AppTest: diagram, the five methods with parameter counts, what is
loaded, and that it explains what is missing."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from core.models.registry import list_models, parameter_counts
from core.report.fmt import method_title

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "overview.py")


def run_page() -> AppTest:
    return AppTest.from_file(PAGE, default_timeout=120).run()


def test_overview_loads_with_diagram_methods_and_counts(page_env):
    at = run_page()
    assert not at.exception
    assert not at.error
    headers = [h.value for h in at.header]
    assert headers == ["How the method works", "The five methods", "What is loaded", "Where to start"]
    assert len(at.image) == 1 and at.image[0].value[0].startswith("data:image/svg+xml")  # the diagram
    methods = at.table[0].value  # static tables: long descriptions wrap instead of being cut
    assert list(methods["method"]) == [method_title(m) for m in list_models()]
    small = parameter_counts(28)
    col = next(c for c in methods.columns if "28x28" in c)
    assert list(methods[col]) == [small[m] for m in list_models()]
    assert any("32x32x3" in c for c in methods.columns)
    knobs = at.table[1].value
    assert dict(zip(knobs["setting"], knobs["default"]))["k_active"] == "4"
    assert dict(zip(knobs["setting"], knobs["default"]))["alpha"] == "0.1"
    assert len(at.get("plotly_chart")) == 1  # parameter bars


def test_overview_counts_pretrained_per_dataset_and_sources(page_env):
    at = run_page()
    loaded = at.dataframe[0].value.set_index("data set")
    assert loaded.loc["MNIST", "pretrained models"] == "3 of 5"
    assert loaded.loc["CIFAR-10", "pretrained models"] == "3 of 5"
    assert loaded.loc["Fashion-MNIST", "pretrained models"] == "0 of 5"
    assert (loaded["your runs"] == 0).all()
    assert loaded.loc["MNIST", "bundled sample"] == "✅"  # the shipped sample; no npz in the test data dir
    assert loaded.loc["MNIST", "npz folder"] == "—"
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Pretrained models"] == "6"
    assert metrics["Your runs (trained or uploaded)"] == "0"
    assert metrics["Reproduction results"] == "3 experiments"  # a count: names would not fit the metric
    listed = next(c.value for c in at.caption if c.value.startswith("Reproduction results:"))
    assert "`results/converged`" in listed and "`results/paper`" in listed and "`results/unequal_init/long`" in listed
    assert any("Animals-10 here is a small, unbalanced subset" in w.value for w in at.warning)


def test_overview_source_check_can_be_switched_off(page_env):
    at = run_page()
    at.toggle(key="check_sources").set_value(False).run()
    assert not at.exception
    assert "bundled sample" not in at.dataframe[0].value.columns


def test_overview_without_pretrained_models_says_how_to_get_them(empty_env):
    at = run_page()
    assert not at.exception
    assert any("export-pretrained" in i.value for i in at.info)
    assert {m.label: m.value for m in at.metric}["Reproduction results"] == "none yet"
