"""One column spec per result table (core.report.columns), rendered for the pages, for
``results/<grid>/tables.md`` and for the compact blocks of README.md / REPRODUCTION.md
(core.report.docs), so a table's columns are written down once."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from core.report import docs
from core.report.claims import grid as load_grid
from core.report.columns import TABLES, Column, compact_columns, compact_markdown, compact_title, seeds_cell
from core.report.markdown import md_table

REPO = Path(__file__).resolve().parent.parent
BLOCKS = {"converged-table2": ("converged", "table2"), "converged-table3": ("converged", "table3"),
          "converged-table4": ("converged", "table4"), "converged-fluctuation": ("converged", "fluctuation"),
          "long-table2": ("long", "table2"), "long-table3": ("long", "table3"), "long-table4": ("long", "table4"),
          "long-fluctuation": ("long", "fluctuation"), "paper-table2": ("paper", "table2"), "paper-table3": ("paper", "table3"), "paper-table4": ("paper", "table4")}


@pytest.mark.parametrize("block", sorted(BLOCKS))
def test_a_compact_block_is_its_specs_compact_columns(block):
    grid, name = BLOCKS[block]
    _, tables = load_grid(REPO / "results" / grid)
    rows = tables[name]
    shown = compact_columns(TABLES[name])
    lines = docs.render(block, REPO / "results").splitlines()
    assert lines[0] == "| " + " | ".join(compact_title(c) for c in shown) + " |"
    assert lines[: len(rows) + 2] == compact_markdown(TABLES[name], rows)
    assert lines[len(rows) + 2] == "" and lines[len(rows) + 3].startswith(("Gap = ", "Batch-loss jitter"))
    assert "data set" in lines[0] and "verdict" in lines[0]


def test_the_compact_blocks_name_what_they_kept():
    titles = {name: [compact_title(c) for c in compact_columns(TABLES[name])]
              for name in ("table2", "table3", "table4", "fluctuation")}
    assert titles["table2"] == ["data set", "RIM", "parallel LSTMs", "gap [interval] (level), p raw / Holm", "paper",
                                "vs paper", "floors (%)", "verdict"]
    assert all("floors (%)" in titles[t] for t in ("table2", "table3", "table4"))  # beside every table, in it
    assert "vs paper" in titles["table3"] and "vs paper" in titles["table4"]  # the magnitude rule's word
    assert "gap RMC (runner-up fixed in advance), p" in titles["table3"]
    assert titles["fluctuation"][-1] == "verdict (post hoc)"


def test_docs_writes_no_table_of_its_own():
    """core.report.docs renders tables through core.report.columns only: no table head, no cell format."""
    tree = ast.parse((REPO / "core" / "report" / "docs.py").read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert "md_table" not in imported | called and "fmt" not in imported
    assert "compact_markdown" in called


def test_seeds_cell_counts_the_healthy_seeds_and_names_the_ones_left_out():
    r = {"rim_error": 1.554, "rim_sd": 0.09, "rim_healthy": 5, "rim_runs": 5,
         "rmc_error": 2.0, "rmc_sd": 0.5, "rmc_healthy": 3, "rmc_runs": 5, "x_error": 1.0}
    assert seeds_cell(r, "rim") == "1.55 ± 0.09 (5)"
    assert seeds_cell(r, "rmc") == "2.00 ± 0.50 (3 of 5 healthy)"
    assert seeds_cell(r, "x") == "1.00"


def test_compact_markdown_uses_the_compact_cell_then_the_documents_then_the_pages():
    cols = [Column("page a", "doc a", lambda r: "page", compact=True),
            Column("page b", "doc b", lambda r: "page", lambda r: "doc", compact="b"),
            Column("page c", "doc c", lambda r: "page", lambda r: "doc", compact=True, compact_cell=lambda r: "compact"),
            Column("page d", "doc d", lambda r: "never shown")]
    assert compact_markdown(cols, [{}]) == md_table(["doc a", "b", "doc c"], [["page", "doc", "compact"]])


def test_a_compact_column_without_a_document_title_must_name_its_own():
    with pytest.raises(ValueError, match="compact=True names the document's title"):
        compact_markdown([Column("page only", None, lambda r: "x", compact=True)], [{}])
