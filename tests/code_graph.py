"""The import graph of core/, read from the source with ``ast`` (nothing is imported): every
module by dotted name, what each imports, and a cycle in it. tests/test_layout.py and
tests/test_import_order.py check it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "core"


def _modules() -> dict[str, Path]:
    out = {}
    for p in sorted(CORE.rglob("*.py")):
        parts = list(p.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


MODULES = _modules()


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The dotted module an ``ImportFrom`` names, relative imports resolved."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str, path: Path) -> list[tuple[str, int, list[str]]]:
    """Every core module ``module`` imports (at top level or inside a function), with the line
    and the names taken from it."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            src = _absolute(module, path, node)
            if src == "core" or src.startswith("core."):
                out.append((src, node.lineno, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(a.name, node.lineno, []) for a in node.names if a.name.startswith("core.")]
    return out


def _graph() -> dict[str, set[str]]:
    """module -> the core modules it imports; ``from core.x import y`` with y a module counts as
    an import of ``core.x.y``."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for m, p in MODULES.items():
        for src, _, names in _imports(m, p):
            subs = [f"{src}.{n}" for n in names if f"{src}.{n}" in MODULES]
            targets = subs if subs and len(subs) == len(names) else [src, *subs]
            graph[m] |= {t for t in targets if t in MODULES and t != m}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 = on the path, 2 = done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state and (found := visit(n)):
                return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None
