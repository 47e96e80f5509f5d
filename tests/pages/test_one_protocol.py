"""One protocol for the whole app: the sidebar's "Pretrained models" switch is on every page,
and every page follows it, or says beside its own choice that it is its own (Compare's
experiment once changed there, Train's protocol of new runs)."""

from __future__ import annotations

import pytest

from tests.pages.helpers import run_page, with_converged_rim

SWITCH = "pretrained_protocol"


@pytest.fixture
def two_protocols(page_env, fixture_dirs, tmp_path, monkeypatch):
    with_converged_rim(fixture_dirs, tmp_path, monkeypatch)
    return page_env


@pytest.mark.parametrize("page", ["overview", "train", "models", "mechanisms", "robustness", "compare"])
def test_every_page_has_the_switch(two_protocols, page):
    at = run_page(page)
    assert not at.exception
    assert at.sidebar.radio(key=SWITCH).value == "converged"


def test_compare_follows_the_sidebar_and_says_when_it_shows_another_experiment(two_protocols):
    at = run_page("compare")
    assert at.radio(key="cmp_schedule").value == "converged"
    at.sidebar.radio(key=SWITCH).set_value("paper").run()
    assert not at.exception and at.radio(key="cmp_schedule").value == "paper"
    assert not any("own choice" in c.value for c in at.caption)
    at.radio(key="cmp_schedule").set_value("converged").run()  # the page's own choice, said beside it
    assert any(c.value.startswith("This page's own choice: the sidebar's pretrained models are those of the paper")
               for c in at.caption)
    at.sidebar.radio(key=SWITCH).set_value("converged").run()
    assert at.radio(key="cmp_schedule").value == "converged"


def test_compare_follows_a_switch_made_on_another_page(two_protocols):
    from pages.ui.pickers import PICKS_KEY

    at = run_page("compare")
    assert at.radio(key="cmp_schedule").value == "converged"
    at.session_state[PICKS_KEY] = {"protocol": "paper", "models": {}}  # switched on Mechanisms, say
    at.session_state[SWITCH] = "paper"
    at.run()
    assert at.radio(key="cmp_schedule").value == "paper"


def test_models_inspects_the_rim_of_the_sidebars_protocol(two_protocols):
    at = run_page("models")
    assert at.selectbox(key="models_pick").value == "pretrained:mnist/rim@converged"
    at.sidebar.radio(key=SWITCH).set_value("paper").run()
    assert not at.exception and at.selectbox(key="models_pick").value == "pretrained:mnist/rim"
    fresh = run_page("models", **{SWITCH: "paper"})  # a new view under the paper protocol
    assert fresh.selectbox(key="models_pick").value == "pretrained:mnist/rim"


def test_train_says_its_protocol_is_its_own_choice(two_protocols):
    at = run_page("train")
    assert any(c.value.startswith("The protocol of your new runs, this page's own choice") for c in at.caption)
