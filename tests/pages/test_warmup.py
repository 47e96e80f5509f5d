"""The warm-up (pages/ui/cache.py): what every newcomer's first views need is computed once per
server, in the shared caches the pages read, so the pages find it there."""

from __future__ import annotations

import pytest

from core.eval import curves


@pytest.fixture
def cache(page_env, monkeypatch):
    monkeypatch.setenv("RIMSCOPE_ROBUSTNESS_SUBSET", "20")
    from pages.ui import cache as C

    for fn in (C._noise_point, C._subset, C._shipped, C._load_model, C.test_data):
        fn.clear()
    C.WARMUP.update(state="not started", steps={}, error=None)
    C.first_run_over()  # as app.py does after its first script run
    return C


def test_the_warmup_fills_the_caches_the_robustness_page_reads(cache, monkeypatch):
    cache._warm()
    assert cache.WARMUP["state"] == "done" and cache.WARMUP["error"] is None, cache.WARMUP
    assert set(cache.WARMUP["steps"]) == {"imports", "manifest", "models", "test data", "robustness", "compare"}
    calls = []
    real = cache.noisy_eval
    monkeypatch.setattr(cache, "noisy_eval", lambda *a, **k: calls.append(a[3:5]) or real(*a, **k))
    models = cache.default_models("mnist")
    assert {"rim", "parallel_lstm", "indrnn"} <= set(models)
    scorer = cache.robustness_scorer("mnist", cache.test_data("mnist"), models)
    for s in curves.GRID:  # the page's default view: the mask-shift curve of the RIM
        scorer.noise("rim", "gaussian", s)
    assert calls == []  # every point came from the warm cache
    scorer.noise("rim", "speckle", 0.05)  # not warmed: computed now
    assert calls == [("speckle", 0.05)]


def test_the_warmup_waits_for_the_first_page(cache, monkeypatch):
    import threading

    monkeypatch.setattr(cache, "_FIRST_RUN_OVER", threading.Event())
    monkeypatch.setattr(cache, "FIRST_RUN_WAIT_S", 30.0)
    cache.start_warmup.clear()
    t = cache.start_warmup()
    t.join(1.0)
    assert t.is_alive() and cache.WARMUP["state"] == "waiting for the first page" and not cache.WARMUP["steps"]
    cache.first_run_over()
    t.join(120)
    assert cache.WARMUP["state"] == "done" and cache.WARMUP["error"] is None, cache.WARMUP
    cache.start_warmup.clear()


def test_warmup_can_be_switched_off(cache, monkeypatch):
    monkeypatch.setenv("RIMSCOPE_WARMUP", "0")
    cache.start_warmup.clear()
    assert cache.start_warmup() is None and cache.WARMUP["state"] == "off"
    cache.start_warmup.clear()
