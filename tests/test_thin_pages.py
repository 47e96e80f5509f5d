"""Pages stay thin: app.py and pages/ import the standard library, streamlit, ``core`` and
``pages.ui`` (numpy and pandas to hand data to streamlit), nothing else; figures come from
core.report.plots (a page that imports plotly's figure builders fails here), text formatting
from core.report.fmt (a formatting helper defined in a page fails here), and no page does torch
maths. The checks read the source with ``ast``: imports at top level and inside functions."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGE_FILES = sorted([REPO / "app.py", *(REPO / "pages").rglob("*.py")])

ALLOWED = {"streamlit", "streamlit_drawable_canvas", "core", "pages", "numpy", "pandas"}
# what a page helper may import beyond ALLOWED, and why (file -> modules)
EXCEPTIONS = {
    "pages/ui/cache.py": {"torch",  # torch.set_num_threads: the server's share of the cores
                          "plotly.subplots", "scipy.stats"},  # warm-up: imported early, never used here
    "pages/ui/export.py": {"plotly.io", "kaleido", "choreographer.browsers.chromium"},  # a core figure -> PNG/HTML
}
TORCH_CALLS = {"set_num_threads"}  # the torch a page may touch: no maths
FORMAT_HELPER = re.compile(r"^(pct|percent\w*|num|fmt\w*|format_\w*|duration\w*|human\w*)$")


def imports(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) of every absolute import, at top level or inside a function."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
    return out


def boundary_problems(rel: str, source: str) -> list[str]:
    """What a page (``rel``: its path from the repository root) does beyond the boundary."""
    tree = ast.parse(source)
    bad = []
    for line, module in imports(tree):
        top = module.split(".")[0]
        if top in sys.stdlib_module_names or top in ALLOWED or module in EXCEPTIONS.get(rel, ()):
            continue
        bad.append(f"{rel}:{line}: imports {module}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch" \
                and node.attr not in TORCH_CALLS:
            bad.append(f"{rel}:{node.lineno}: torch.{node.attr} (torch maths belongs in core)")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and FORMAT_HELPER.match(node.name):
            bad.append(f"{rel}:{node.lineno}: formatting helper {node.name} (belongs in core.report.fmt)")
    return bad


@pytest.mark.parametrize("source", [
    "import plotly.graph_objects as go", "from plotly.subplots import make_subplots", "import plotly.express as px",
    "def f():\n    import torch.nn.functional as F", "from scipy import stats", "import torch\nx = torch.zeros(3)",
    "def pct(v) -> str:\n    return ''", "def g():\n    def fmt_duration(s):\n        pass",
], ids=["go", "make_subplots", "plotly.express", "torch.nn in a function", "scipy", "torch maths", "def pct",
        "nested fmt_duration"])
def test_the_check_catches_what_it_is_for(source):
    assert boundary_problems("pages/some_page.py", source)


def test_the_check_leaves_page_code_alone():
    for ok in ("import streamlit as st\nst.plotly_chart(fig)", "from core.report import fmt\ntext = fmt.pct(v)",
               "from pages.ui import cache", "import numpy as np\nimport pandas as pd", "import json, re, time",
               "def number_of_runs():\n    pass", "from streamlit_drawable_canvas import st_canvas"):
        assert not boundary_problems("pages/some_page.py", ok), ok
    assert not boundary_problems("pages/ui/cache.py", "import torch\ntorch.set_num_threads(1)")
    assert boundary_problems("pages/train.py", "import torch")  # an exception holds for its file only


def test_pages_import_only_streamlit_core_and_pages_ui():
    assert len(PAGE_FILES) > 5  # app.py, the pages and pages/ui
    found = [p for path in PAGE_FILES for p in boundary_problems(str(path.relative_to(REPO)), path.read_text())]
    assert not found, "move these into core (core.report.plots, core.report.fmt, ...):\n" + "\n".join(found)


BUTTONS = {"button", "download_button", "form_submit_button", "link_button"}


@pytest.mark.parametrize("path", PAGE_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_button_has_a_tooltip(path):
    """Streamlit draws a button with a tooltip (``help=``) twice, the second a zero-size copy that a
    screen reader or a click by name meets (seen in Chromium on every such button): a button says
    what it does in its label and the text beside it."""
    bad = [n.lineno for n in ast.walk(ast.parse(path.read_text()))
           if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in BUTTONS
           and any(k.arg == "help" for k in n.keywords)]
    assert not bad, f"{path.relative_to(REPO)}: buttons with help= at lines {bad}"
