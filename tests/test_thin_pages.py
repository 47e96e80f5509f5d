"""Pages stay thin: figures come from core.report.plots and text formatting
from core.report.fmt. A figure built in a page (``go.Figure(``, ``go.Scatter(``,
``make_subplots(``, plotly express) or a formatting helper defined in a page (``def pct``,
``def num``, ``def fmt_duration``, ...) fails here; move it into core.report."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGE_FILES = sorted([REPO / "app.py", *(REPO / "pages").rglob("*.py")])

FIGURE = re.compile(r"\bgo\.[A-Z]\w*\(|\bmake_subplots\(|\bplotly\.express\b|\bpx\.[a-z_]+\(")
FORMAT_HELPER = re.compile(
    r"^\s*def\s+(pct|percent\w*|num|fmt\w*|format_\w*|duration\w*|human\w*)\s*\(", re.M)


def _hits(pattern: re.Pattern, text: str) -> list[str]:
    return [text[: m.start()].count("\n") + 1 for m in pattern.finditer(text)]


@pytest.mark.parametrize("pattern, sample", [
    (FIGURE, "fig = go.Figure()"), (FIGURE, "fig.add_trace(go.Scatter(x=x))"),
    (FIGURE, "fig = make_subplots(rows=2)"), (FIGURE, "import plotly.express as px"),
    (FORMAT_HELPER, "def pct(v) -> str:"), (FORMAT_HELPER, "def fmt_duration(s):"),
    (FORMAT_HELPER, "    def num(v):"),
], ids=["go.Figure", "go.Scatter", "make_subplots", "plotly.express", "def pct", "def fmt_duration", "def num"])
def test_the_patterns_catch_what_they_are_for(pattern, sample):
    assert _hits(pattern, sample)


def test_the_patterns_leave_page_code_alone():
    for ok in ("st.plotly_chart(fig)", "go_on = 1", "def number_of_runs():", "ago.Figure(", "text = fmt.pct(v)"):
        assert not _hits(FIGURE, ok) and not _hits(FORMAT_HELPER, ok), ok


def test_pages_build_no_figures_and_define_no_formatting_helpers():
    assert len(PAGE_FILES) > 5  # app.py, the pages and pages/ui
    found = []
    for path in PAGE_FILES:
        text = path.read_text()
        for what, pattern in (("figure", FIGURE), ("formatting helper", FORMAT_HELPER)):
            found += [f"{path.relative_to(REPO)}:{line}: {what}" for line in _hits(pattern, text)]
    assert not found, "move these into core.report.plots / core.report.fmt:\n" + "\n".join(found)
