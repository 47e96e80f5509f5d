"""Robustness's "Other handwriting" view and the Mechanisms input it opens, through AppTest.

Models come from the ``page_env`` fixture (untrained models + manifest); the digits are
the bundled samples (no full set on disk) or a tiny full set written here.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from core.studies.handwriting import external as de
from tests.pages.helpers import run_page


@pytest.fixture(autouse=True)
def _no_full_sets(monkeypatch, tmp_path):
    monkeypatch.setenv("RIMSCOPE_HANDWRITING_DIR", str(tmp_path / "no_handwriting_here"))
    monkeypatch.setenv("RIMSCOPE_ROBUSTNESS_SUBSET", "100")


def run(page: str, **state) -> AppTest:
    return run_page(page.removesuffix(".py"), 600, **state)


def mechanisms_links(at: AppTest) -> list[dict]:
    """The query of every "Open on Mechanisms" link (a plain link: AppTest runs the page alone)."""
    from urllib.parse import parse_qs, urlparse

    found = re.findall(r"\(mechanisms\?([^)]*)\)", " ".join(m.value for m in at.markdown))
    return [{k: v[0] for k, v in parse_qs(urlparse("?" + q).query).items()} for q in found]


def test_view_on_the_bundled_sample(page_env):
    at = run("robustness.py", rb_tab="Other handwriting", rb_hw_set="semeion")
    assert not at.exception and not at.error
    assert any("bundled sample" in i.value and "RIMSCOPE_HANDWRITING_DIR" in i.value for i in at.info)
    table = at.dataframe[0].value
    assert "method" not in table.columns  # display names only, no internal ones
    assert [m.split(" ·")[0] for m in table["model"]] == ["RIM (paper's method)", "Parallel LSTMs", "IndRNN"]
    sample = de.load_external("semeion", sample=True)
    # the sample is all odd-half digits: one column, named as the sample it is; no "all" beside Compare's
    assert list(table.columns) == ["model", f"Semeion: {len(sample.y)}-digit sample (odd half)",
                                   "MNIST test set (full)"]
    assert table["MNIST test set (full)"].iloc[0] == "96.9 %"  # the fixture's rim: test error 0.0312
    # untrained models misread digits: a grid of them, each linking to Mechanisms
    links = mechanisms_links(at)
    assert links and len(links) <= 24
    assert all(q["mech_source"] == "Other handwriting" and q["mech_hw_set"] == "semeion" for q in links)
    assert {int(q["mech_hw_idx"]) for q in links} <= set(sample.index.tolist())
    assert links[0]["mech_model_mnist"] == "pretrained:mnist/rim"
    heading = next(h.value for h in at.subheader if h.value.startswith("Misread digits"))
    assert heading.endswith(f"of {len(sample.y)})")


def test_mechanisms_opens_a_handwriting_digit(page_env):
    sample = de.load_external("optdigits", sample=True)
    idx = int(sample.index[5])
    at = run("mechanisms.py", mech_source="Other handwriting", mech_hw_set="optdigits", mech_hw_idx=idx)
    assert not at.exception and not at.error
    assert at.radio(key="mech_source").value == "Other handwriting"
    want = f"optdigits digit #{idx}"
    assert any(want in c.value and f"true class {sample.y[5]}" in c.value for c in at.caption)
    assert any("Inside" in h.value for h in at.subheader)  # the trace is shown
    # a number the sample does not hold falls back to one it does, without an error
    at = run("mechanisms.py", mech_source="Other handwriting", mech_hw_set="optdigits", mech_hw_idx=0)
    assert not at.exception and not at.error and at.selectbox(key="mech_hw_idx").value == int(sample.index[0])


def test_digit_numbers_offer_only_the_digits_the_set_holds(page_env):
    """The sample holds odd numbers only: the picker offers exactly those, says so, steps from one to
    the next, and a number it lacks (an even one) goes to the nearest with a note, not to #1."""
    sample = de.load_external("semeion", sample=True)
    numbers = sorted(int(i) for i in sample.index)
    assert all(n % 2 for n in numbers)
    at = run("mechanisms.py", mech_source="Other handwriting", mech_hw_set="semeion", mech_hw_idx=numbers[3])
    assert not at.exception and not at.error
    box = at.selectbox(key="mech_hw_idx")
    assert [int(o) for o in box.options] == numbers
    assert "odd numbers" in box.label and f"{len(numbers)} digits" in box.label
    at.button(key="mech_hw_next").click().run()
    assert at.selectbox(key="mech_hw_idx").value == numbers[4]
    at.button(key="mech_hw_prev").click().run()
    at.button(key="mech_hw_prev").click().run()
    assert at.selectbox(key="mech_hw_idx").value == numbers[2]
    even = numbers[10] + 1
    at = run("mechanisms.py", mech_source="Other handwriting", mech_hw_set="semeion", mech_hw_idx=even)
    assert not at.exception and not at.error
    assert at.selectbox(key="mech_hw_idx").value in (numbers[10], numbers[11])
    assert at.selectbox(key="mech_hw_idx").value != numbers[0]
    assert any(f"Digit #{even} is not in" in c.value for c in at.caption)
    assert any(f"semeion digit #{at.selectbox(key='mech_hw_idx').value}" in c.value for c in at.caption)


def test_full_set_on_disk_is_used(page_env, monkeypatch, tmp_path):
    sample = de.load_external("semeion", sample=True)
    folder = tmp_path / "hw"
    folder.mkdir()
    np.savez(folder / "semeion.npz", x=sample.x[:30], y=sample.y[:30])
    monkeypatch.setenv("RIMSCOPE_HANDWRITING_DIR", str(folder))
    at = run("robustness.py", rb_tab="Other handwriting", rb_hw_set="semeion")
    assert not at.exception and not at.error
    assert not any("bundled sample" in i.value for i in at.info)
    assert any(f"30 digits from {folder / 'semeion.npz'}" in c.value for c in at.caption)
    table = at.dataframe[0].value
    assert {"Semeion: odd half (15 digits)", "Semeion: even half (15 digits)", "Semeion: all 30 digits"} \
        <= set(table.columns)


def test_other_data_sets_say_it_is_for_mnist(page_env):
    at = run("robustness.py", rb_tab="Other handwriting", rb_dataset="fashion_mnist")
    assert not at.exception
    assert any("MNIST" in i.value for i in at.info)
