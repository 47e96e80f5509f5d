"""The page bench's timed key press on a slider: a press that reaches no slider is made again.

A fake page stands in for the browser (no Chromium needed): its keyboard loses the first
``lost`` presses (nothing moves, no script run), as a loaded machine's re-render can, and the
``unsent`` presses after them move the slider but start no script run (the value never sent).
"""

from __future__ import annotations

import pytest

from bench import bench_pages
from bench.bench_pages import CHANGE_STATE_JS, RUN_AFTER_JS, STARTED_AFTER_JS, LostInput, last_change, timed_key


class FakeSlider:
    def __init__(self, value=5, lo=0, hi=10):
        self.value, self.lo, self.hi, self.focused = value, lo, hi, 0

    def focus(self):
        self.focused += 1

    def get_attribute(self, name, timeout=None):
        return str({"aria-valuenow": self.value, "aria-valuemin": self.lo, "aria-valuemax": self.hi}[name])


class FakePage:
    """``performance.now()`` is a counter in ms; each press that lands moves the slider and adds one script run."""

    def __init__(self, slider, lost, unsent=0):
        self.slider, self.lost, self.unsent, self.now, self.runs, self.presses = slider, lost, unsent, 1000.0, [], []
        self.keyboard = self

    def press(self, key):
        self.presses.append(key)
        if len(self.presses) <= self.lost:
            return
        self.slider.value += 1 if key == "ArrowRight" else -1
        if len(self.presses) <= self.lost + self.unsent:
            return
        self.runs.append((self.now + 5, self.now + 250))

    def evaluate(self, js, arg=None):
        if js == "() => performance.now()":
            self.now += 1000
            return self.now
        if js == RUN_AFTER_JS:
            return next(([a, b] for a, b in self.runs if a >= arg), None)
        if js == STARTED_AFTER_JS:
            return any(a >= arg for a, _ in self.runs)
        if js == CHANGE_STATE_JS:  # last_change(): nothing changed after the run, everything drawn
            return [0, self.now + 1e6, True]
        return None  # the observer scripts, window.__rs

    def wait_for_function(self, *a, **k):  # settle(): quiet at once
        return True


@pytest.fixture(autouse=True)
def _short_confirm(monkeypatch):
    monkeypatch.setattr(bench_pages, "CONFIRM_S", 0.1)
    monkeypatch.setattr(bench_pages, "START_S", 0.2)


def test_a_lost_press_is_pressed_again_and_timed_from_the_press_that_landed():
    slider = FakeSlider()
    page = FakePage(slider, lost=1)
    took = timed_key(page, slider, "ArrowRight")
    assert page.presses == ["ArrowRight", "ArrowRight"] and slider.value == 6 and slider.focused == 2
    assert took == pytest.approx(0.25)  # from the landed press's clock, not the lost one's


def test_a_press_that_moves_the_slider_but_starts_no_run_is_pressed_again():
    slider = FakeSlider()
    page = FakePage(slider, lost=0, unsent=1)
    took = timed_key(page, slider, "ArrowRight")
    assert page.presses == ["ArrowRight", "ArrowRight"] and slider.value == 7
    assert took == pytest.approx(0.25)  # timed from the press whose run came


def test_presses_lost_every_time_fail_with_lost_input():
    slider = FakeSlider()
    page = FakePage(slider, lost=10)
    with pytest.raises(LostInput, match="3 ArrowLeft presses in a row were lost"):
        timed_key(page, slider, "ArrowLeft")
    assert len(page.presses) == 3 and slider.value == 5


def test_a_key_at_the_slider_end_is_turned_around():
    slider = FakeSlider(value=10)
    page = FakePage(slider, lost=0)
    timed_key(page, slider, "ArrowRight", turn_at_ends=True)
    assert page.presses == ["ArrowLeft"] and slider.value == 9


class DrawingPage:
    """A page whose script run ended at 1,000 ms, quiet from outside while the browser's main
    thread evaluates the chart library, whose charts are drawn (a change) at 3,400 ms."""

    def __init__(self):
        self.now = 1000.0

    def evaluate(self, js, arg=None):
        assert js == CHANGE_STATE_JS
        self.now += 400
        drawn = self.now >= 3400
        return [3400 if drawn else 1000, self.now, drawn]


def test_the_last_change_waits_for_every_chart_to_be_drawn(monkeypatch):
    monkeypatch.setattr(bench_pages, "CHANGE_QUIET_S", 0.75)
    monkeypatch.setattr(bench_pages.time, "sleep", lambda s: None)
    # from 1,800 ms on the page looks unchanged for 750 ms, but its charts are not drawn yet
    assert last_change(DrawingPage(), 0.0, 1000.0) == 3400
