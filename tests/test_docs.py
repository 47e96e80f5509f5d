"""The documents speak of the project in the present, keep their budgets and link to what exists.

* No history sentence ("session 3", "issue 22", "not worked on", "was ... before") in the
  reader's documents (README, REPRODUCTION, bench/README, docs/*.md, results/**/README.md) nor
  in the comments and docstrings of core/ and pages/: the git log is the history.
* README.md at most 12,000 characters, REPRODUCTION.md at most 42,000 (its tables: every claim, every budget).
* The 4,000-iteration protocol is never called converged where a reader sees prose (the
  documents, and every string of the pages): none of its runs stopped early; ``converged`` stays
  only as its key (``--protocol converged``, ``results/converged``).
* Every relative link in every Markdown document of the repository points at a file or folder
  that exists.
* Every module or name of the project a document, the Makefile, a grid script or the Streamlit
  config names (``core.x.y``, ``python -m core.x``) exists, and every ``python -m`` of them runs
  something (a package with ``__main__``, a module with a ``__main__`` block); CHANGELOG.md
  names the old ones on purpose.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

HISTORY = [
    re.compile(r"\bsession \d", re.IGNORECASE),
    re.compile(r"\bissue \d", re.IGNORECASE),
    re.compile(r"\bnot worked on\b", re.IGNORECASE),
    re.compile(r"\bwas\b(?:(?![.!?](?:\s|$)).)*?\bbefore\b", re.IGNORECASE),  # within one sentence
]
BUDGETS = {"README.md": 12_000, "REPRODUCTION.md": 42_000}
SKIP_DIRS = {".git", ".venv", "node_modules", "__pycache__", ".pytest_cache", ".ruff_cache", "shared"}


def _reader_documents() -> list[Path]:
    docs = [ROOT / "README.md", ROOT / "REPRODUCTION.md", ROOT / "bench" / "README.md"]
    docs += sorted((ROOT / "docs").glob("*.md"))
    docs += sorted((ROOT / "results").rglob("README.md"))
    return [p for p in docs if p.is_file()]


def _markdown_files() -> list[Path]:
    out = []
    for p in ROOT.rglob("*.md"):
        rel = p.relative_to(ROOT)
        if any(part in SKIP_DIRS or part.startswith(".") for part in rel.parts[:-1]):
            continue
        out.append(p)
    return sorted(out)


def _code_texts(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring of a Python file."""
    source = path.read_text(encoding="utf-8")
    texts = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            texts.append((tok.start[0], tok.string))
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                texts.append((node.body[0].lineno, doc))
    return texts


def _history_hits(text: str) -> list[str]:
    flat = re.sub(r"\s+", " ", text)
    return [m.group(0) for pattern in HISTORY for m in pattern.finditer(flat)]


def _strip_code(markdown: str) -> str:
    """Markdown without fenced code blocks (commands may quote anything)."""
    return re.sub(r"^```.*?^```", "", markdown, flags=re.MULTILINE | re.DOTALL)


@pytest.mark.parametrize("path", _reader_documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_history_sentence_in_documents(path):
    hits = _history_hits(_strip_code(path.read_text(encoding="utf-8")))
    assert not hits, f"{path.relative_to(ROOT)} tells the project's history (the git log keeps it): {hits}"


def test_no_history_sentence_in_comments_and_docstrings():
    found = []
    for folder in ("core", "pages"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for line, text in _code_texts(path):
                found += [f"{path.relative_to(ROOT)}:{line}: {hit!r}" for hit in _history_hits(text)]
    assert not found, "comments or docstrings tell the project's history:\n" + "\n".join(found)


@pytest.mark.parametrize("name", sorted(BUDGETS))
def test_document_budget(name):
    n = len((ROOT / name).read_text(encoding="utf-8"))
    assert n <= BUDGETS[name], f"{name} has {n:,} characters, over its budget of {BUDGETS[name]:,}"


CONVERGED = re.compile(r"\bconverge[ds]?\b|\bconvergence\b", re.IGNORECASE)
# the protocol keys, and the convergence criterion (a run meets it or is still improving) by its name
KEYS = re.compile(r"`[^`\n]*`|<!--.*?-->|(?:results|pretrained)/converged|converged-(?:12k|24k|aug)|@converged"
                  r"|\bconvergence criterion\b", re.DOTALL | re.IGNORECASE)


def _converged_words(text: str) -> list[str]:
    """Each place ``text`` calls something converged, outside code spans, comments and the key."""
    text = KEYS.sub("", _strip_code(text))
    return [text[max(0, m.start() - 40):m.end() + 20] for m in CONVERGED.finditer(text)]


def test_the_4000_iteration_protocol_is_not_called_converged():
    found = [f"{p.relative_to(ROOT)}: {hit!r}" for p in _reader_documents()
             for hit in _converged_words(p.read_text(encoding="utf-8"))]
    for path in sorted((ROOT / "pages").rglob("*.py")) + [ROOT / "app.py"]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value != "converged":
                found += [f"{path.relative_to(ROOT)}:{node.lineno}: {hit!r}" for hit in _converged_words(node.value)]
    assert not found, "the 4,000-iteration protocol called converged:\n" + "\n".join(found)


LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def _relative_targets(markdown: str) -> list[str]:
    targets = []
    for target in LINK.findall(_strip_code(markdown)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) or target.startswith(("#", "//")):
            continue  # a URL, mailto:, or an anchor in the same page
        targets.append(target)
    return targets


def test_relative_links_resolve():
    dead = []
    for path in _markdown_files():
        for target in _relative_targets(path.read_text(encoding="utf-8")):
            file_part = target.split("#", 1)[0].split("?", 1)[0]
            if not file_part:
                continue
            resolved = (ROOT / file_part.lstrip("/")) if file_part.startswith("/") else (path.parent / file_part)
            if not resolved.exists():
                dead.append(f"{path.relative_to(ROOT)} -> {target}")
    assert not dead, "dead relative links:\n" + "\n".join(dead)


def test_the_checks_catch_what_they_should():
    assert _history_hits("Session 10 ran make bench again.")
    assert _history_hits("as issue 22 asked")
    assert _history_hits("Four views miss the goal; not worked on.")
    assert _history_hits("The loss was 0.3 before the fix.")
    assert not _history_hits("The loss is 0.3 after 1,000 iterations. Before training, it is 2.3.")
    assert _relative_targets("[a](docs/x.md) ![b](assets/y.png) [c](https://e.org) [d](#top)") == [
        "docs/x.md", "assets/y.png"]
    assert _relative_targets("```\n[a](not/a/link.md)\n```\n") == []


DOTTED = re.compile(r"(?<![\w/.-])((?:core|bench|scripts)(?:\.[A-Za-z_]\w*)+)")
RUN_MODULE = re.compile(r"python3? -m ((?:core|bench|scripts)(?:\.\w+)*)")


def _named_files() -> list[Path]:
    files = [p for p in _markdown_files() if p.name != "CHANGELOG.md"]
    files += [ROOT / "Makefile", ROOT / ".streamlit" / "config.toml", *sorted((ROOT / "scripts").glob("*.sh"))]
    return [p for p in files if p.is_file()]


def _name_exists(name: str) -> bool:
    """``core.a.b.c``: the longest prefix that is a module, the rest attributes of it (found
    without importing where the name is a module)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            spec = importlib.util.find_spec(".".join(parts[:i]))
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            continue
        if i == len(parts):
            return True
        obj = importlib.import_module(".".join(parts[:i]))
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def _runnable(module: str) -> bool:
    """``python -m module`` runs something: a package with ``__main__``, a module with a main block
    or a script's top-level statements (not only imports, definitions and constants)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    if spec.submodule_search_locations is not None:
        return importlib.util.find_spec(module + ".__main__") is not None
    quiet = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)
    for node in ast.parse(Path(spec.origin).read_text(encoding="utf-8")).body:
        docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        if not (isinstance(node, quiet) or docstring):
            return True  # a main block, or a script's top-level statements
    return False


def _bad_names(text: str) -> list[str]:
    bad = [f"{m} (no such module or name)" for m in sorted(set(DOTTED.findall(text))) if not _name_exists(m)]
    return bad + [f"python -m {m} (runs nothing)" for m in sorted(set(RUN_MODULE.findall(text))) if not _runnable(m)]


def test_every_named_module_exists():
    bad = [f"{p.relative_to(ROOT)}: {hit}" for p in _named_files() for hit in _bad_names(p.read_text(encoding="utf-8"))]
    assert not bad, "names of modules that do not exist (CHANGELOG.md lists the moved ones):\n" + "\n".join(bad)


def test_the_name_check_catches_moved_modules():
    assert _bad_names("images are capped again in core.preprocess") == ["core.preprocess (no such module or name)"]
    assert _bad_names("`python -m core.eval.selection pretrained/converged/mnist/rim`") == [
        "python -m core.eval.selection (runs nothing)"]
    assert _bad_names("run `python -m core.digits generalisation`") == ["python -m core.digits (runs nothing)"]
    assert _bad_names("`python -m core.studies.selection`, `core.report.fmt.PROTOCOL_SHORT`, make test") == []
