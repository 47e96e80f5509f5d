"""The warm-up (pages/ui/cache.py): what every newcomer's first views need is computed once per
server, in the shared caches the pages read, so the pages find it there."""

from __future__ import annotations

import pytest

from core.eval import curves

PNG_WARMED: list = []  # the steps done when the warm-up opened the PNG renderer


def _boom(*a, **k):
    """Stands in for a computation the warm-up should already have cached."""
    raise AssertionError("computed again: the warm-up did not fill the page's cache")


@pytest.fixture
def cache(page_env, monkeypatch):
    monkeypatch.setenv("RIMSCOPE_ROBUSTNESS_SUBSET", "20")
    from pages.ui import cache as C

    for fn in (C._noise_point, C._subset, C._shipped, C._load_model, C.test_data, C._set_traces):
        fn.clear()
    C.WARMUP.update(state="not started", steps={}, error=None, before_first_page={})
    PNG_WARMED.clear()  # the renderer itself: tests/test_png_export.py
    monkeypatch.setattr(C, "_warm_png", lambda: PNG_WARMED.append(list(C.WARMUP["steps"])))
    monkeypatch.setattr(C, "IDLE_S", 0.2)  # the later steps wait for an idle server; not 10 s per test
    C.script_run_over()  # as app.py does after its first script run
    return C


def test_the_later_steps_wait_until_the_server_is_idle(cache, monkeypatch):
    """The warm-up's later steps (LATE_STEPS) start only when no script run has happened for
    IDLE_S: someone clicking through the pages never shares the machine with them."""
    import threading
    import time

    monkeypatch.setattr(cache, "IDLE_S", 1.5)
    monkeypatch.setattr(cache, "_RUNNING", [0])
    t = threading.Thread(target=cache._warm, daemon=True)
    t.start()
    deadline = time.monotonic() + 120
    while "mechanisms set" not in cache.WARMUP["steps"] and time.monotonic() < deadline:
        cache.script_run_over()  # a page every 0.5 s: the server is never idle for 1.5 s
        time.sleep(0.5)
    for _ in range(6):  # 3 s more of pages: no later step starts
        cache.script_run_over()
        time.sleep(0.5)
    assert "mechanisms set" in cache.WARMUP["steps"] and not set(cache.LATE_STEPS) & set(cache.WARMUP["steps"])
    t.join(120)  # the pages stop: the later steps run
    assert cache.WARMUP["state"] == "done" and set(cache.LATE_STEPS) <= set(cache.WARMUP["steps"]), cache.WARMUP


def test_the_warmup_fills_the_caches_the_robustness_page_reads(cache, monkeypatch):
    cache._warm()
    assert cache.WARMUP["state"] == "done" and cache.WARMUP["error"] is None, cache.WARMUP
    assert set(cache.WARMUP["steps"]) == {"imports", "manifest", "models", "test data", "match set", "robustness",
                                          "compare",
                                          "mechanisms set", "noise kinds", "protocols", "fashion_mnist",
                                          "protocols, other kinds", "png"}
    assert PNG_WARMED == [list(cache.WARMUP["steps"])[:-1]] and list(cache.WARMUP["steps"])[-1] == "png"  # last
    calls = []
    real = cache.noisy_eval
    monkeypatch.setattr(cache, "noisy_eval", lambda *a, **k: calls.append(a[3:5]) or real(*a, **k))
    models = cache.default_models("mnist")
    assert {"rim", "parallel_lstm", "indrnn"} <= set(models)
    scorer = cache.robustness_scorer("mnist", cache.test_data("mnist"), models)
    for s in curves.GRID:  # the page's default view: the mask-shift curve of the RIM
        scorer.noise("rim", "gaussian", s)
    assert calls == []  # every point came from the warm cache
    for kind in ("salt_pepper", "speckle"):  # another noise kind: warmed too (the page's mask-shift curve)
        for s in curves.GRID:
            scorer.noise("rim", kind, s)
    scorer.noise("rim", "poisson", 1.0)
    assert calls == []
    scorer.noise("rim", "speckle", 0.055)  # not a level of the page: computed now
    assert calls == [("speckle", 0.055)]


def test_the_warmup_fills_the_mechanisms_set_statistics(cache, monkeypatch):
    cache.activation_stats.clear()
    cache.selection_reports.clear()
    cache._warm()
    assert cache.WARMUP["error"] is None, cache.WARMUP
    from core.eval import robustness_points as points
    from core.eval import selection

    monkeypatch.setattr(points, "activation_stats", _boom)
    monkeypatch.setattr(selection, "selection_report", _boom)
    entry, model = cache.default_models("mnist")["rim"]
    data = cache.test_data("mnist")
    key = cache.data_key("mnist", data)
    stats = cache.activation_stats(model, entry.key, entry.weights_mtime, key, data.images, data.labels, 1000, 10)
    rep, twin = cache.selection_reports(model, entry.key, entry.weights_mtime, key, data.images, data.labels, 1000)
    assert stats.n == 1000 and rep.images == 1000


def test_the_warmup_fills_the_match_set_of_mechanisms(cache, monkeypatch):
    """Mechanisms' "Find the same mechanisms elsewhere" matches the input's block in the default
    RIM's traces over the searched set of its default size: the warm-up has them before the tab opens."""
    cache._warm()
    assert cache.WARMUP["error"] is None, cache.WARMUP
    from core.eval import match

    monkeypatch.setattr(match, "set_traces", _boom)
    entry, model = cache.default_models("mnist")["rim"]
    data = cache.test_data("mnist")
    traces = cache.set_traces(entry, model, "mnist", data, cache.set_sizes(len(data))[0])
    assert len(traces.indices) == min(1000, len(data))


def test_the_warmup_reads_the_grids_of_compares_claims_table(cache, monkeypatch):
    """Compare's "Paper's claims vs ours" reads the converged and paper grids from every run record:
    the warm-up has read them (the page's tab then opens without that wait)."""
    from core.report import claims, tables

    claims._grid.cache_clear()
    cache._warm()
    assert cache.WARMUP["error"] is None, cache.WARMUP

    monkeypatch.setattr(tables, "load_results", _boom)
    from core import paths

    for name in ("converged", "paper"):
        rows, _ = claims.grid(paths.results_dir() / name)
        assert rows  # the fixture's grids have runs


def test_the_warmup_waits_for_the_first_page(cache, monkeypatch):
    import threading

    monkeypatch.setattr(cache, "_FIRST_RUN_OVER", threading.Event())
    monkeypatch.setattr(cache, "FIRST_RUN_WAIT_S", 30.0)
    cache.start_warmup.clear()
    t = cache.start_warmup()
    t.join(1.0)
    assert t.is_alive() and cache.WARMUP["state"] == "waiting for the first page" and not cache.WARMUP["steps"]
    cache.script_run_over()
    t.join(120)
    assert cache.WARMUP["state"] == "done" and cache.WARMUP["error"] is None, cache.WARMUP
    cache.start_warmup.clear()


def test_the_warmup_pauses_while_a_page_is_drawn(cache, monkeypatch):
    """Between its points the warm-up waits while a script run is in progress (it would share the
    interpreter with that page), at most YIELD_MAX_S; it goes on once the run is over."""
    import threading

    monkeypatch.setattr(cache, "YIELD_MAX_S", 60.0)
    monkeypatch.setattr(cache, "_RUNNING", [0])
    cache.script_run_started()  # a page is being drawn
    t = threading.Thread(target=cache._warm, daemon=True)
    t.start()
    t.join(1.5)
    assert t.is_alive() and cache.WARMUP["state"] == "running" and not cache.WARMUP["steps"], cache.WARMUP
    cache.script_run_over()  # the page is drawn
    t.join(120)
    assert cache.WARMUP["state"] == "done" and cache.WARMUP["error"] is None, cache.WARMUP
    assert cache._RUNNING == [0]
    cache.script_run_over()  # never below zero
    assert cache._RUNNING == [0]


def test_warmup_can_be_switched_off(cache, monkeypatch):
    monkeypatch.setenv("RIMSCOPE_WARMUP", "0")
    cache.start_warmup.clear()
    assert cache.start_warmup() is None and cache.WARMUP["state"] == "off"
    cache.start_warmup.clear()


def test_before_the_first_page_the_default_models_and_test_data_are_loaded(cache, monkeypatch):
    """``python app.py`` runs ``warm_before_first_page`` once the server is up: the first page then
    loads no model and no test data itself."""
    from core import catalog
    from core.data import datasets

    cache.warm_before_first_page()
    assert cache.WARMUP["error"] is None and set(cache.WARMUP["before_first_page"]) == {"manifest", "models",
                                                                                      "test data"}
    assert cache.WARMUP["state"] == "not started"  # the warm-up proper still waits for the first page
    monkeypatch.setattr(catalog, "load_entry", _boom)
    monkeypatch.setattr(datasets, "load_dataset", _boom)
    monkeypatch.setattr(cache, "load_dataset", _boom)
    assert {"rim", "parallel_lstm"} <= set(cache.default_models("mnist"))
    assert len(cache.test_data("mnist")) > 0


def test_nothing_is_loaded_before_the_first_page_when_the_warmup_is_off(cache, monkeypatch):
    monkeypatch.setenv("RIMSCOPE_WARMUP", "0")
    cache.warm_before_first_page()
    assert cache.WARMUP["before_first_page"] == {}


def test_the_warmup_threads_print_no_missing_context_warning(cache):
    """The warm-up reads the caches outside any script run, on purpose: Streamlit's "missing
    ScriptRunContext!" line (seven at a server's start) is not printed for its threads; another
    thread still gets it."""
    import logging
    import threading

    from streamlit.runtime.scriptrunner_utils import script_run_context

    logger = logging.getLogger(script_run_context.__name__)
    said: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            said.append(f"{threading.current_thread().name}: {record.getMessage()}")

    handler = Keep()
    logger.addHandler(handler)
    try:
        for name in ("rimscope-before-first-page", "someone-else"):
            for fn in (cache._load_model, cache.test_data):  # cold caches for each
                fn.clear()
            t = threading.Thread(target=cache.warm_before_first_page, name=name)
            t.start()
            t.join(120)
    finally:
        logger.removeHandler(handler)
    assert cache.WARMUP["before_first_page"] and cache.WARMUP["error"] is None
    assert not [s for s in said if s.startswith("rimscope-")]
    assert [s for s in said if s.startswith("someone-else") and "missing ScriptRunContext" in s]
