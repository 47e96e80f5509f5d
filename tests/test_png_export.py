"""The PNG renderer of the downloads (pages/ui/export.py): one kept browser per server process,
opened once and shared by every session's renders one at a time, the one-shot path when it
cannot open, and real PNG bytes from kaleido and Chromium (needed under CI=true)."""

from __future__ import annotations

import asyncio
import os
import struct
import sys
import threading
import time
import types
import warnings

import pytest

from pages.ui import export as E

FIG = {"data": [{"type": "scatter", "x": [0, 1, 2], "y": [2, 0, 1]}], "layout": {}}


class FakeKaleido:
    """Stands in for ``kaleido.Kaleido``: counts browsers opened and closed, renders concurrently seen."""

    opened = 0
    closed = 0
    fail_open = False
    fail_render = False
    in_flight = 0
    most_in_flight = 0
    renders: list = []

    def __init__(self, n=1, timeout=None, **kopts):
        self.kopts = kopts

    async def open(self):
        await asyncio.sleep(0.05)
        if FakeKaleido.fail_open:
            raise RuntimeError("no browser here")
        FakeKaleido.opened += 1

    async def close(self):
        FakeKaleido.closed += 1

    async def calc_fig(self, fig, opts=None, **_):
        FakeKaleido.in_flight += 1
        FakeKaleido.most_in_flight = max(FakeKaleido.most_in_flight, FakeKaleido.in_flight)
        try:
            await asyncio.sleep(0.05)
            if FakeKaleido.fail_render:
                raise RuntimeError("the browser went away")
            FakeKaleido.renders.append((threading.current_thread().name, opts["width"]))
            return b"\x89PNG fake " + str(opts["width"]).encode()
        finally:
            FakeKaleido.in_flight -= 1


@pytest.fixture
def fake(monkeypatch):
    import plotly.io._kaleido  # noqa: F401 - first, with the real kaleido: plotly keeps the module it imports
    for k, v in dict(opened=0, closed=0, fail_open=False, fail_render=False, in_flight=0, most_in_flight=0).items():
        monkeypatch.setattr(FakeKaleido, k, v)
    monkeypatch.setattr(FakeKaleido, "renders", [])
    monkeypatch.setitem(sys.modules, "kaleido", types.SimpleNamespace(Kaleido=FakeKaleido))
    one_shot = []
    monkeypatch.setattr(E, "_one_shot", lambda fig, opts: one_shot.append(opts["width"]) or b"\x89PNG one-shot")
    r = E.PngRenderer()
    yield r, one_shot
    r.close()


def test_the_browser_opens_once_and_serves_renders_from_two_threads(fake):
    r, one_shot = fake
    out, errors = [], []

    def session(width):
        try:
            for _ in range(3):
                out.append(r.render(FIG, width, 300))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=session, args=(w,)) for w in (500, 700)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors and len(out) == 6
    assert FakeKaleido.opened == 1 and r.running  # opened by the first render, then reused
    assert sorted(out) == [b"\x89PNG fake 500"] * 3 + [b"\x89PNG fake 700"] * 3  # each caller got its own PNG
    assert FakeKaleido.most_in_flight == 1  # renders one at a time
    assert {name for name, _ in FakeKaleido.renders} == {"rimscope-png"}  # on the renderer's own loop
    assert one_shot == []
    r.close()
    assert FakeKaleido.closed == 1 and not r.running


def test_start_opens_the_browser_ahead_of_the_first_render(fake):
    r, _ = fake
    assert r.start() and FakeKaleido.opened == 1
    r.render(FIG, 400, 300)
    assert FakeKaleido.opened == 1


def test_a_browser_that_cannot_open_falls_back_to_one_shot_renders(fake):
    r, one_shot = fake
    FakeKaleido.fail_open = True
    assert r.render(FIG, 400, 300) == b"\x89PNG one-shot"
    assert "RuntimeError: no browser here" in r.problem and not r.running
    assert r.render(FIG, 500, 300) == b"\x89PNG one-shot"
    assert one_shot == [400, 500] and FakeKaleido.opened == 0  # not tried again on every render
    assert not any(t.name == "rimscope-png" for t in threading.enumerate())  # its loop thread ended


def test_a_broken_browser_is_replaced_at_the_next_render(fake):
    r, one_shot = fake
    r.render(FIG, 400, 300)
    FakeKaleido.fail_render = True
    assert r.render(FIG, 500, 300) == b"\x89PNG one-shot"  # this render: the one-shot way
    assert one_shot == [500] and not r.running and FakeKaleido.closed == 1 and r.problem is None
    FakeKaleido.fail_render = False
    assert r.render(FIG, 600, 300) == b"\x89PNG fake 600" and FakeKaleido.opened == 2


def test_a_figure_that_fails_everywhere_raises(fake, monkeypatch):
    r, _ = fake
    FakeKaleido.fail_render = True

    def broken(fig, opts):
        raise ValueError("bad figure")

    monkeypatch.setattr(E, "_one_shot", broken)
    with pytest.raises(ValueError, match="bad figure"):
        r.render(FIG, 400, 300)


def test_the_warm_up_renders_through_the_process_wide_renderer(fake, monkeypatch):
    r, _ = fake
    monkeypatch.setattr(E, "RENDERER", r)
    monkeypatch.setattr(E, "png_export_ready", lambda: True)
    E.warm_png()
    assert FakeKaleido.opened == 1 and FakeKaleido.renders[-1][1] == E.TINY_FIGURE["layout"]["width"]
    monkeypatch.setattr(E, "png_export_ready", lambda: False)
    E.warm_png()  # no kaleido or no Chromium here: nothing to warm
    assert len(FakeKaleido.renders) == 1


def _kaleido_missing() -> str | None:
    try:
        import kaleido  # noqa: F401
        from choreographer.browsers.chromium import Chromium
    except Exception as exc:  # noqa: BLE001
        return f"kaleido is not importable ({type(exc).__name__}: {exc})"
    if not (os.environ.get("BROWSER_PATH") or Chromium.find_browser(skip_local=False)):
        return "kaleido finds no Chromium (scripts/install_browser.sh)"
    return None


@pytest.mark.slow
def test_a_real_render_is_a_png_of_the_asked_size_without_warnings():
    reason = _kaleido_missing()
    if reason and os.environ.get("CI", "").strip().lower() in ("1", "true", "yes"):
        pytest.fail(f"CI=true but PNG export cannot be checked: {reason}", pytrace=False)
    if reason:
        pytest.skip(reason)
    r = E.PngRenderer()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # e.g. kaleido's "kopts argument is ignored if using a server"
            first = r.render(FIG, 300, 200, scale=1)
            t0 = time.perf_counter()
            second = r.render(FIG, 320, 200, scale=2)
            took = time.perf_counter() - t0
        assert r.running and r.problem is None
        for png, (w, h) in ((first, (300, 200)), (second, (640, 400))):
            assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
            assert struct.unpack(">II", png[16:24]) == (w, h)
        print(f"second render through the kept browser: {took:.2f} s")
    finally:
        r.close()
    assert not r.running
