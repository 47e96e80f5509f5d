"""SVG drawn by the browser itself (``core.report.plots.svg``), through one small component that
puts the (server-made, escaped) SVG on the page and reports which ``data-cell`` was clicked.
``st.html`` cannot carry it: its sanitiser keeps HTML only and drops every SVG element. Nothing
here loads the chart library, so a page whose first view has only these draws at once."""

from __future__ import annotations

import functools

from streamlit.components.v2 import component

_JS = """
export default function (component) {
  const { data, setTriggerValue, parentElement } = component;
  let box = parentElement.querySelector(".rs-svg");
  if (!box) {
    box = document.createElement("div");
    box.className = "rs-svg";
    parentElement.appendChild(box);
  }
  box.innerHTML = data;
  box.onclick = (event) => {
    const cell = event.target.closest("[data-cell]");
    if (cell) setTriggerValue("cell", cell.getAttribute("data-cell"));
  };
}
"""
_CSS = """
.rs-svg { overflow-x: auto; }
.rs-svg rect.cell { cursor: pointer; }
.rs-svg rect.cell:hover { stroke: #111; stroke-width: 1.5; }
"""


@functools.cache
def _clickable_component():
    """Registered on first use (inside a script run: registering at import warns in bare mode)."""
    return component("rimscope.clickable_svg", js=_JS, css=_CSS)


def show(svg: str, key: str) -> None:
    """An SVG to look at (tooltips from its ``<title>`` elements), keyed ``key``."""
    _clickable_component()(data=svg, key=key)


def clickable(svg: str, key: str) -> str | None:
    """An SVG whose ``data-cell`` elements are clickable: the clicked cell's ``data-cell`` value on
    the script run the click starts, None on every other run."""
    result = _clickable_component()(data=svg, key=key, on_cell_change=lambda: None)
    return getattr(result, "cell", None)
