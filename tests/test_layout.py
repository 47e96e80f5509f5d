"""The shape of the code: no import cycle in core/, no module over 450 lines, no function over
80 lines without a ``# long:`` comment saying why, each name in one place, lint messages that
name current paths, no patched import path; the browser tests wait for conditions with the
helpers of tests/browser/helpers.py.

The checks read the source with ``ast`` or as text (nothing is imported; one test imports core
in a fresh interpreter), so they are quick and name the offending file and line.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

from tests.code_graph import CORE, MODULES, ROOT, _cycle, _graph

MAX_LINES = 450
MAX_FUNCTION_LINES = 80
LONG = "# long:"  # a comment at the top of a function's body: why it stays over MAX_FUNCTION_LINES


def test_the_walk_sees_imports_of_every_kind():
    """The walk below must see relative, absolute and function-level imports, or a cycle hides."""
    graph = _graph()
    assert "core.training.state" in graph["core.training.loop"]  # from .state import ...
    assert "core.training.lifecycle" in graph["core.grid.cells"]  # inside train_cell
    assert "core.errors" in graph["core.digits.load"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_core_has_no_import_cycle():
    assert _cycle(_graph()) is None


def test_no_core_module_is_over_450_lines():
    long = {str(p.relative_to(ROOT)): n for p in MODULES.values() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def _top_comment_lines(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The comment lines at the top of a function: from its ``def`` line to its first statement
    after the docstring (decorators are not part of it)."""
    body = node.body
    first = body[1] if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
        and isinstance(body[0].value.value, str) else body[0]
    return [ln.strip() for ln in lines[node.lineno - 1: first.lineno - 1] if ln.strip().startswith("#")]


def long_functions(path: Path) -> list[str]:
    """``"path:line name (n lines)"`` for each function in ``path`` over MAX_FUNCTION_LINES whose
    top carries no ``# long: <reason>`` comment."""
    text = path.read_text()
    lines = text.splitlines()
    out = []
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        n = node.end_lineno - node.lineno + 1
        said = any(c.startswith(LONG) and c[len(LONG):].strip() for c in _top_comment_lines(lines, node))
        if n > MAX_FUNCTION_LINES and not said:
            out.append(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{node.lineno} "
                       f"{node.name} ({n} lines)")
    return out


def test_the_long_function_check_reads_the_comment_at_the_top_only(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    cases = {
        "bare": "",
        "said": '    """Doc."""\n    # long: one recurrence read top to bottom\n',
        "said_above_the_docstring": '    # long: one recurrence read top to bottom\n    """Doc."""\n',
        "no_reason": "    # long:\n",
        "too_late": "    y = 0\n    # long: said after the first statement\n",
    }
    for name, top in cases.items():
        (tmp_path / f"{name}.py").write_text(f"def {name}():\n{top}{body}\n\ndef short():\n    return 1\n")
    found = {name: long_functions(tmp_path / f"{name}.py") for name in cases}
    assert [f.split()[1] for f in found["bare"]] == ["bare"] and found["bare"][0].endswith("(81 lines)")
    assert found["said"] == [] and found["said_above_the_docstring"] == []
    assert found["no_reason"] and found["too_late"]


def test_no_function_over_80_lines_without_a_reason():
    """Every function in core/, pages/ and app.py fits in 80 lines, or says at its top why not
    (a line ``# long: <reason>``, e.g. a fused kernel's recurrence that reads best in one piece)."""
    files = [*sorted(CORE.rglob("*.py")), *sorted((ROOT / "pages").rglob("*.py")), ROOT / "app.py"]
    long = [f for p in files for f in long_functions(p)]
    assert not long, f"over {MAX_FUNCTION_LINES} lines without a `{LONG} <reason>` comment at the top: {long}"


def test_package_init_files_only_describe_their_package():
    for m, p in MODULES.items():
        if p.name != "__init__.py":
            continue
        body = ast.parse(p.read_text()).body
        kinds = {type(n).__name__ for n in body}
        if m == "core":  # the version, and nothing else
            assert kinds <= {"Expr", "Assign"}, f"{p}: {kinds}"
            continue
        assert all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in body), \
            f"{p.relative_to(ROOT)} must hold only its docstring (no imports, no re-exports)"


def test_no_re_exports():
    """No ``noqa: F401`` in core, no ``import x as x`` spelling, and no name in ``__all__``
    that the module only imported."""
    for p in MODULES.values():
        text = p.read_text()
        assert "noqa: F401" not in text, f"{p.relative_to(ROOT)}: a re-export (noqa: F401)"
        tree = ast.parse(text)
        imported = set()
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    assert a.asname is None or a.asname != a.name.split(".")[-1] or isinstance(node, ast.Import), \
                        f"{p.relative_to(ROOT)}:{node.lineno}: `import {a.name} as {a.asname}` re-exports"
                    imported.add(a.asname or a.name.split(".")[0])
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
                listed = {e.value for e in getattr(node.value, "elts", []) if isinstance(e, ast.Constant)}
                assert not listed & imported, f"{p.relative_to(ROOT)}: __all__ re-lists {sorted(listed & imported)}"
        assert not any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in tree.body), \
            f"{p.relative_to(ROOT)}: a module __getattr__ (a lazy re-export)"


def test_core_never_imports_streamlit():
    for p in MODULES.values():
        for node in ast.walk(ast.parse(p.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n.split(".")[0] == "streamlit" for n in names), f"{p.relative_to(ROOT)} imports streamlit"


def _banned() -> dict[str, str]:
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return conf["tool"]["ruff"]["lint"]["flake8-tidy-imports"]["banned-api"]


def test_lint_bans_importing_the_two_launchers():
    """``core.train`` and ``core.reproduce`` run with ``python -m`` only: ruff (TID251) refuses an import of them."""
    banned = _banned()
    assert "TID251" in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]["extend-select"]
    assert {"core.train", "core.reproduce"} <= set(banned)


def _defines(path: Path, name: str) -> bool:
    """Whether the module at ``path`` defines ``name`` at top level (def, class or assignment)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        for t in targets:
            if any(isinstance(e, ast.Name) and e.id == name for e in ast.walk(t)):
                return True
    return False


def _points_to(dotted: str) -> bool:
    """Whether ``dotted`` is a module of the repository or a name a module of it defines."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:i])
        path = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if path.is_file():
            return i == len(parts) or (i == len(parts) - 1 and _defines(path, parts[-1]))
    return False


def test_lint_messages_point_to_what_is_in_the_repository():
    """Each banned path's message names where to import from now: a module or name of this
    repository that is not itself banned (no chain through an old path)."""
    import re

    banned = _banned()
    wrong = []
    for old, rule in banned.items():
        for target in re.findall(r"\b((?:core|pages)(?:\.\w+)+)", rule["msg"]):
            if target != old and (not _points_to(target) or target in banned):  # a launcher's message names itself
                wrong.append(f"{old}: {target}")
    assert not wrong, f"banned-api messages pointing to no current module or name: {wrong}"


@pytest.mark.parametrize("launcher", ["train", "reproduce"])
def test_the_two_fixed_commands_are_launchers_only(launcher):
    """``python -m core.train`` / ``core.reproduce`` (the developer guide's commands) define no names."""
    tree = ast.parse((CORE / f"{launcher}.py").read_text())
    assert [type(n).__name__ for n in tree.body] == ["Expr", "If"]


def test_page_helpers_are_imported_from_their_modules():
    """pages/ui/__init__.py imports its submodules, never their names (one place per name): a
    ``from .module import name`` there is allowed only for a name the package itself calls."""
    init = ROOT / "pages" / "ui" / "__init__.py"
    tree = ast.parse(init.read_text())
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    submodules = {p.stem for p in init.parent.glob("*.py")} - {"__init__"}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names = [a.name for a in node.names]
            if node.module is None:
                assert set(names) <= submodules, f"pages/ui imports {set(names) - submodules}: not its modules"
            else:
                assert set(names) <= called, f"pages/ui/__init__.py:{node.lineno} re-exports {sorted(set(names) - called)}"
    for page in [ROOT / "app.py", *(ROOT / "pages").glob("*.py")]:
        for node in ast.walk(ast.parse(page.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "pages.ui":
                assert {a.name for a in node.names} <= submodules, \
                    f"{page.name}:{node.lineno} imports names from pages.ui, not from its modules"


def test_browser_tests_take_their_helpers_from_helpers_py():
    """A browser test module defines no second copy of a helper of tests/browser/helpers.py (a
    private ``_poll`` beside ``poll`` included): the waits live in one place."""
    browser = ROOT / "tests" / "browser"
    shared = {n.name for n in ast.parse((browser / "helpers.py").read_text()).body
              if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")}
    copies = [f"{p.relative_to(ROOT)}:{n.lineno} {n.name}" for p in sorted(browser.glob("*.py")) if p.name != "helpers.py"
              for n in ast.walk(ast.parse(p.read_text())) if isinstance(n, ast.FunctionDef) and n.name.lstrip("_") in shared]
    assert "poll" in shared and not copies, f"use tests/browser/helpers.py instead: {copies}"


def lone_sleeps(source: str) -> list[int]:
    """Lines of ``time.sleep`` calls that stand in no loop: a fixed wait, where a poll would look
    again until its condition holds."""
    lines: list[int] = []

    def visit(node: ast.AST, in_loop: bool) -> None:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "sleep" \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "time" and not in_loop:
            lines.append(node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child, in_loop or isinstance(node, (ast.While, ast.For)))

    visit(ast.parse(source), False)
    return lines


def test_browser_tests_wait_for_conditions_not_fixed_times():
    assert lone_sleeps("import time\ntime.sleep(1)\nwhile x():\n    time.sleep(0.1)\n") == [2]
    browser = ROOT / "tests" / "browser"
    fixed = [f"{p.relative_to(ROOT)}:{n}" for p in sorted(browser.glob("*.py")) for n in lone_sleeps(p.read_text())]
    assert not fixed, f"fixed sleeps (wait with tests/browser/helpers.py poll / settle instead): {fixed}"


PATH_PATCH = __import__("re").compile(r"sys\.path\s*(\.(insert|append|extend)|\+=|=[^=]|\[)|PYTHONPATH\s*=|\benv\b.*PYTHONPATH")


def test_nothing_patches_the_import_path():
    """``import core`` works because the package is installed (``pip install -e .``), never
    because a file puts the repository on ``sys.path`` or ``PYTHONPATH``."""
    assert PATH_PATCH.search("sys.path.insert(0, '.')") and PATH_PATCH.search("PYTHONPATH=. python x.py")
    assert not PATH_PATCH.search("# nothing patches sys.path or PYTHONPATH.")
    files = [ROOT / "app.py", ROOT / "Makefile", *(p for d in ("core", "pages", "tests", "scripts", "bench")
                                                  for ext in ("*.py", "*.sh") for p in (ROOT / d).rglob(ext))]
    found = [f"{p.relative_to(ROOT)}:{i}" for p in files if p.resolve() != Path(__file__).resolve()
             for i, line in enumerate(p.read_text().splitlines(), 1) if PATH_PATCH.search(line)]
    assert not found, f"import path patched (install the package instead): {found}"


def test_core_imports_from_any_folder(tmp_path):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", "import core.report.columns, pages.ui; import core; print(core.__file__)"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"`import core` outside the repository fails (pip install -e .): {out.stderr[-500:]}"


def test_no_test_imports_another_test_module_or_a_conftest():
    """What tests share lives in helper modules (tests/run_helpers.py, tests/pages/helpers.py,
    tests/browser/helpers.py, ...): a test module or a conftest is never imported by another file."""
    found = []
    for p in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else
                     [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            for name in names:
                last = name.split(".")[-1]
                if name.startswith("tests") and (last.startswith("test_") or last == "conftest"):
                    found.append(f"{p.relative_to(ROOT)}:{node.lineno} imports {name}")
    assert found == []
