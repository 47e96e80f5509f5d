"""The Overview page through AppTest: diagram, the five methods with parameter counts, what is
loaded, and that it explains what is missing."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.models.registry import list_models, parameter_counts
from core.report.fmt import method_title
from core.report.plots.style import method_color

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
    assert dict(zip(knobs["setting"], knobs["default"]))["active LSTMs per row (k)"] == "4"
    assert dict(zip(knobs["setting"], knobs["default"]))["communication share"] == "0.1"
    # setting names as in the code only under the details expander, plain words in the table
    assert not any("_" in t or t == "impl" for t in knobs["setting"])
    names = at.table[2].value
    assert "k_active" in set(names["name in the code"]) and "impl" in set(names["name in the code"])
    # no chart library on the landing page: each parameter count is a bar in its method's colour,
    # its length the count's share of the largest
    assert len(at.get("plotly_chart")) == 0
    styles = at.table[0].proto.arrow_data.styler.styles
    big = max(v for by in (parameter_counts(28), parameter_counts(96)) for v in by.values())
    for row, m in enumerate(list_models()):
        share = 100 * small[m] / big
        assert f"_row{row}_col1 {{ background: linear-gradient(90deg, {method_color(m)}55 {share:.1f}%" in styles


def test_overview_counts_pretrained_per_dataset_and_sources(page_env):
    at = run_page()
    loaded = at.dataframe[0].value.set_index("data set")
    assert loaded.loc["MNIST", "pretrained, paper protocol"] == "3 of 5"
    assert loaded.loc["CIFAR-10", "pretrained, paper protocol"] == "3 of 5"
    assert loaded.loc["Fashion-MNIST", "pretrained, paper protocol"] == "0 of 5"
    assert (loaded["your runs"] == 0).all()
    assert loaded.loc["MNIST", "bundled sample"] == "✅"  # the shipped sample; no npz in the test data dir
    assert loaded.loc["MNIST", "npz folder"] == "—"
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Pretrained models"] == "6"
    assert metrics["Your runs (trained or uploaded)"] == "0"
    assert metrics["Reproduction results"] == "3 experiments"  # a count: names would not fit the metric
    listed = next(c for c in at.caption if c.value.startswith("Reproduction results"))
    assert "Adam, cosine, 4,000 iterations" in listed.value and "longer schedule" in listed.value
    assert "results/" not in listed.value  # folders only in the tooltip
    assert all(f"`results/{n}`" in listed.proto.help for n in ("converged", "paper", "unequal_init/long"))
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


def test_overview_counts_add_up_with_the_shipped_models(page_env, monkeypatch):
    """Two protocols per data set: each column counts one protocol's models (never "10 of 5"),
    and the columns add up to the "Pretrained models" metric. The parameter-matched sentence
    parses (no "), (" run-on) and names no folder."""
    import re

    from core.catalog import read_manifest
    from core.paths import ROOT

    if not (ROOT / "pretrained" / "manifest.json").is_file():
        pytest.skip("no shipped pretrained models in this checkout")
    monkeypatch.setenv("RIMSCOPE_PRETRAINED_DIR", str(ROOT / "pretrained"))
    monkeypatch.setenv("RIMSCOPE_RESULTS_DIR", str(ROOT / "results"))
    at = run_page()
    assert not at.exception
    loaded = at.dataframe[0].value.set_index("data set")
    cols = [c for c in loaded.columns if c.startswith("pretrained")]
    assert cols == ["pretrained, long grid", "pretrained, Adam, cosine, 4,000 iterations", "pretrained, paper protocol"]
    total = 0
    for cell in loaded[cols].to_numpy().ravel():
        n, of = map(int, re.fullmatch(r"(\d+) of (\d+)", cell).groups())
        assert n <= of
        total += n
    metrics = {m.label: m.value for m in at.metric}
    assert int(metrics["Pretrained models"]) == total == len(read_manifest(ROOT / "pretrained")["models"])
    text = " ".join(m.value for m in at.markdown)
    assert "), (" not in text and "results/unequal_init" not in text


def test_what_is_loaded_fits_a_1280_px_window(page_env, monkeypatch):
    """Every column of the "What is loaded" table has its width and together they fit the 820 px
    the page has in a 1280 px window (Streamlit 1.67, wide layout, sidebar open: measured), with
    the shipped models' three protocols and the source check on."""
    import json

    from core.paths import ROOT

    if (ROOT / "pretrained" / "manifest.json").is_file():
        monkeypatch.setenv("RIMSCOPE_PRETRAINED_DIR", str(ROOT / "pretrained"))
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    assert not at.exception
    df = at.dataframe[0].value
    cols = json.loads(at.dataframe[0].proto.columns)
    assert "bundled sample" in df.columns
    assert all(cols.get(c, {}).get("width") for c in df.columns), cols
    assert sum(cols[c]["width"] for c in df.columns) <= 820
    # every header fits its width (a 14 px header: about 6.5 px a character, 16 px of padding),
    # not cut ("shipped, Adam, cosin")
    for c in df.columns:
        label = cols[c].get("label") or c
        assert len(label) * 6.5 + 16 <= cols[c]["width"], (label, cols[c]["width"])


def test_parameter_gap_sentence_gives_the_parameter_matched_controls_verdict(page_env, tmp_path, monkeypatch):
    """Beside "RIM has 4.5x the parameters", the verdict of the parameter-matched control, read
    from the claims table (the one Compare shows); no such row, no sentence."""
    import shutil

    from core.report.claims import CLAIMS_FILE

    results = tmp_path / "results"
    shutil.copytree(page_env["results"], results)
    monkeypatch.setenv("RIMSCOPE_RESULTS_DIR", str(results))
    (results / CLAIMS_FILE).parent.mkdir(parents=True, exist_ok=True)
    (results / CLAIMS_FILE).write_text(
        "claim_id,claim,paper,converged,paper_protocol,verdict\n"
        "control_parallel_lstm_h81,Ours: RIM beats the 4 x 81 control,not in the paper,"
        "❌ does not hold (MNIST the control better),not measured,❌ does not hold\n")
    text = " ".join(m.value for m in run_page().markdown)
    assert "parameter-matched control" in text and "❌ does not hold (MNIST the control better)" in text
    assert "older run" not in text
    (results / CLAIMS_FILE).write_text("claim_id,claim,paper,converged,paper_protocol,verdict\n")
    text = " ".join(m.value for m in run_page().markdown)
    assert "4.5x the parameters" in text or "x the parameters" in text
    assert "parameter-matched control" not in text


def test_protocols_caption_names_each_protocol_once(page_env, tmp_path, monkeypatch):
    """The "Pretrained models" caption gives each shipped protocol's line (as the export writes it)
    with its name once: the long grid's line starts with "Long grid:" and the paper protocol's ends
    with "(paper protocol)", so neither gets its title again in front ("long grid: Long grid: ...")."""
    import json
    import shutil

    from core.grid.export import protocol_text

    pre = tmp_path / "pretrained"
    shutil.copytree(page_env["pretrained"], pre)
    man = json.loads((pre / "manifest.json").read_text())
    protos = {name: protocol_text(name) for name in ("long", "converged", "paper")}
    man.pop("protocol", None)
    man["protocols"] = protos
    (pre / "manifest.json").write_text(json.dumps(man))
    monkeypatch.setenv("RIMSCOPE_PRETRAINED_DIR", str(pre))
    at = run_page()
    assert not at.exception
    cap = next(c.value for c in at.caption if c.value.startswith("Pretrained models, per data set and method"))
    listed = cap.split(". Protocols: ", 1)[1]
    assert listed.count("Long grid") + listed.count("long grid") == 1, listed
    assert listed.count("paper protocol") == 1, listed
    assert protos["long"] in listed and protos["paper"] in listed
    assert "Adam, cosine, 4,000 iterations: " + protos["converged"] in listed  # a line without its name gets it
    assert listed.startswith(protos["long"] + "; ")
