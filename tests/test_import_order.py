"""Imports in core/ only point down the declared order (docs/architecture.md, "Import order").

Each module belongs to a layer by its subject (its folder, or its name for the leaves at the
top of core/); a module may import its own subject and any layer below, never one above nor
another subject of its own layer. The walk reads the source with ``ast`` (tests/test_layout.py),
so it sees imports inside functions too.
"""

from __future__ import annotations

from tests.code_graph import MODULES, _graph

# bottom to top; the same order is written in docs/architecture.md
ORDER: list[tuple[str, ...]] = [
    ("core", "core.errors", "core.paths", "core.fileio", "core.seeds", "core.intervals"),  # leaves
    ("core.digits",),  # image preprocessing: upload -> what a model sees
    ("core.data",),
    ("core.models",),
    ("core.eval",),  # inference and measurements on a model in memory
    ("core.training",),
    ("core.report",),
    ("core.runs",),
    ("core.catalog",),  # every model a user can pick: shipped ones and the run store's
    ("core.grid", "core.studies"),
    ("core.train", "core.reproduce"),  # launchers of python -m only
]


def subject(module: str) -> str:
    """The entry of ORDER a module belongs to (its longest matching prefix)."""
    best = ""
    for layer in ORDER:
        for s in layer:
            if (module == s or module.startswith(s + ".")) and len(s) > len(best):
                best = s
    return best


def layer_of(module: str) -> int:
    s = subject(module)
    return next(i for i, layer in enumerate(ORDER) if s in layer)


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for m, targets in graph.items():
        for t in targets:
            same = subject(m) == subject(t) or layer_of(m) == 0 == layer_of(t)
            if not same and layer_of(t) >= layer_of(m):
                bad.append(f"{m} -> {t}")
    return sorted(bad)


def test_every_core_module_has_a_place_in_the_order():
    assert not [m for m in MODULES if not subject(m)]


def test_the_check_catches_an_upward_import():
    assert upward_imports({"core.data.plan": {"core.training.config"}}) == ["core.data.plan -> core.training.config"]
    assert upward_imports({"core.grid.cells": {"core.studies.selection"}}) == \
        ["core.grid.cells -> core.studies.selection"]  # the same layer, another subject
    assert upward_imports({"core.training.loop": {"core.eval.predict", "core.training.state", "core.seeds"}}) == []


def test_core_imports_only_point_down():
    assert upward_imports(_graph()) == []
