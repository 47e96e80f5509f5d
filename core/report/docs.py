"""Generated blocks of the documents: ``python -m core.reproduce docs`` (``--check``).

A document (README.md, REPRODUCTION.md, docs/*.md) holds blocks

    <!-- generated:NAME -->
    ...written by code...
    <!-- /generated:NAME -->

whose content is rewritten from ``results/`` by ``render(NAME)``; everything outside the markers is
left as it is. ``--check`` rewrites nothing and fails when a block is out of date. An unknown NAME
fails with a message naming the file, the line and the known names.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from ..paths import LONG_GRID
from .columns import TABLES, compact_markdown
from .tables import FLUCT_WINDOW, convergence_line, excluded_runs, improving_runs

BLOCK = re.compile(r"<!-- generated:(?P<name>[^\s>]+) -->\n(?P<body>.*?)<!-- /generated:(?P=name) -->", re.S)
OPEN = re.compile(r"<!-- generated:(?P<name>[^\s>]+) -->")
DEFAULT_DOCS = ["README.md", "REPRODUCTION.md", "docs/*.md"]


class DocsError(Exception):
    """A document that cannot be generated (unknown block name, unclosed block, bad include)."""


def _holm(rows: list[dict]) -> str:
    m = rows[0].get("holm_m", 0) if rows else 0
    return (f"One Holm family of {m} tests; each interval at its Holm step's level, so it excludes 0 exactly when "
            "the verdict is holds or does not hold.")


def _foot(rows: list[dict], excluded: int, improving: tuple[list[dict], list[dict]] = ([], [])) -> str:
    return ("Gap = other − RIM in points (positive: RIM better); seeds in brackets; floors: chance / majority-class "
            "error. " + _holm(rows)
            + (f" Unhealthy runs left out of the means: {excluded} (named with the failed runs)." if excluded else "")
            + (" " + convergence_line(*improving) if improving[1] else ""))


def _fluctuation_foot(rows: list[dict]) -> str:
    return (f"Batch-loss jitter around its {FLUCT_WINDOW}-iteration moving average, second half of training "
            "(gap = parallel − RIM). " + _holm(rows))


def _compact(grid: str, name: str) -> Callable[[Path], str]:
    """One table of a grid in its compact form (``core.report.columns``: the columns marked
    ``compact``), with a line under it; the full table: ``results/<grid>/tables.md``."""

    def render(root: Path) -> str:
        from .claims import grid as load

        rows, t = load(root / grid)
        tab = t.get(name) or []
        if not tab:
            return f"No {name} in `results/{grid}` yet."
        foot = _fluctuation_foot(tab) if name == "fluctuation" else _foot(
            tab, len(excluded_runs(rows, t).get(name) or []), improving_runs(rows, t).get(name, ([], [])))
        return "\n".join(compact_markdown(TABLES[name], tab) + ["", foot])

    return render


def _claims(root: Path) -> str:
    from .claims import claims_markdown, claims_rows

    return claims_markdown(claims_rows(root))


def _glance(root: Path) -> str:
    from .claims import claims_rows, glance_markdown

    return glance_markdown(claims_rows(root), root)


def _answer(root: Path) -> str:
    """The answer in plain words (core.report.answer): the same text in README, REPRODUCTION and Compare."""
    from .answer import plain_answer

    return plain_answer(root)


def _budget_note(root: Path) -> str:
    from .answer import budget_note

    return budget_note(root) or "*No run with a validation split yet.*"


def _verdict_by_budget(root: Path) -> str:
    from .answer import verdict_by_budget_markdown

    return verdict_by_budget_markdown(root)


def _controls(root: Path) -> str:
    """The controls block (core.report.controls.controls_block): the long grid's where it has any."""
    from .claims import grid
    from .controls import controls_block

    _, short = grid(root / "converged")
    rows, long_ = grid(root / LONG_GRID) if (root / LONG_GRID / "runs").is_dir() else ([], {})
    return controls_block(short.get("controls") or [], long_.get("controls") or [], rows, LONG_GRID)


def _budget(root: Path) -> str:
    from .budget import budget_markdown

    return budget_markdown(root)


def _failed(root: Path) -> str:
    from .facts import failed_markdown

    return failed_markdown(root / "paper")


def _handwriting(root: Path) -> str:
    from .claims import handwriting_markdown

    return "\n".join(handwriting_markdown(root / LONG_GRID))


def _interventions(root: Path) -> str:
    from .interventions_block import interventions_markdown

    return interventions_markdown(root)


def _compute(root: Path) -> str:
    """One line: the training time of every run in ``results/`` (``core.report.compute``), with the
    per-folder table (results/compute.md) linked."""
    from .compute import total_line

    return total_line(root)


def _facts(root: Path) -> str:
    from .facts import facts_markdown

    return facts_markdown(root, root.parent / "pretrained")


RENDERERS: dict[str, Callable[[Path], str]] = {
    "claims": _claims, "glance": _glance, "answer": _answer,
    "converged-table2": _compact("converged", "table2"), "converged-table3": _compact("converged", "table3"),
    "converged-table4": _compact("converged", "table4"), "converged-fluctuation": _compact("converged", "fluctuation"),
    "long-table2": _compact(LONG_GRID, "table2"), "long-table3": _compact(LONG_GRID, "table3"),
    "long-table4": _compact(LONG_GRID, "table4"), "long-fluctuation": _compact(LONG_GRID, "fluctuation"),
    "controls": _controls, "budget": _budget,
    "verdict-by-budget": _verdict_by_budget, "budget-note": _budget_note,
    "paper-table2": _compact("paper", "table2"), "paper-table3": _compact("paper", "table3"),
    "paper-table4": _compact("paper", "table4"), "paper-failed": _failed,
    "handwriting": _handwriting, "facts": _facts, "interventions": _interventions, "compute": _compute,
}
NAMES = [*RENDERERS, "include:PATH"]


def render(name: str, root: Path) -> str:
    """The content of block ``name`` (``root``: the ``results`` folder), ending in a newline."""
    if name.startswith("include:"):
        rel = name.split(":", 1)[1]
        path = (root.parent / rel).resolve()
        if not rel.startswith("results/") or root.resolve() not in path.parents or path.suffix != ".md":
            raise DocsError(f"include:{rel}: only a Markdown file under results/ can be included")
        if not path.is_file():
            return f"*Not in results/ yet: `{rel}`.*\n"
        return path.read_text().rstrip("\n") + "\n"
    if name not in RENDERERS:
        raise DocsError(f"unknown generated block {name!r}; known: {', '.join(NAMES)}")
    return RENDERERS[name](root).rstrip("\n") + "\n"


def rewrite(text: str, root: Path, where: str = "") -> str:
    """``text`` with every generated block's content rendered again."""
    opened = [m for m in OPEN.finditer(text)]
    closed = {m.start() for m in BLOCK.finditer(text)}
    for m in opened:
        if m.start() not in closed:
            line = text.count("\n", 0, m.start()) + 1
            raise DocsError(f"{where}:{line}: block {m.group('name')!r} has no closing "
                            f"<!-- /generated:{m.group('name')} -->")

    def sub(m: re.Match) -> str:
        try:
            body = render(m.group("name"), root)
        except DocsError as exc:
            line = text.count("\n", 0, m.start()) + 1
            raise DocsError(f"{where}:{line}: {exc}") from None
        return f"<!-- generated:{m.group('name')} -->\n{body}<!-- /generated:{m.group('name')} -->"

    return BLOCK.sub(sub, text)


def documents(repo: Path, patterns=None) -> list[Path]:
    out = []
    for pat in patterns or DEFAULT_DOCS:
        out += sorted(repo.glob(pat)) if any(ch in pat for ch in "*?[") else [repo / pat]
    return [p for p in out if p.is_file()]


def run(repo=".", files=None, check: bool = False, results: str = "results") -> tuple[list[Path], list[str]]:
    """Rewrite (or with ``check`` only compare) the documents' generated blocks. Returns the
    documents that changed (or would) and the errors."""
    repo = Path(repo)
    root = repo / results
    changed, errors = [], []
    for doc in documents(repo, files):
        text = doc.read_text()
        try:
            new = rewrite(text, root, str(doc.relative_to(repo) if doc.is_relative_to(repo) else doc))
        except DocsError as exc:
            errors.append(str(exc))
            continue
        if new != text:
            changed.append(doc)
            if not check:
                doc.write_text(new)
    return changed, errors


def _figure(repo: Path, results: str, check: bool) -> list[Path]:
    """The results figure (``docs/figures/gaps.png``) and the stored answer (``results/answer.md``)
    of core.report.answer, with the tables it rests on (``results/answer_sources.json``):
    written again unless ``check``; returns those that are (or, with
    ``check``, would be) out of date. The figure's numbers, ``gaps.csv``, decide for the figure: a
    PNG's bytes depend on the plotting library's version."""
    from .answer import ANSWER_FILE, FIGURE, NOTE_FILE, budget_note, plain_answer, write_answer
    from .figure import figure_current, write_figure
    from .sources import SOURCES_FILE, stale_sources

    root = repo / results
    if not root.is_dir() or not (root / "converged").is_dir():
        return []
    stale = []
    if not figure_current(repo, results):
        stale.append(repo / FIGURE)
        if not check:
            write_figure(repo, results)
    stored, note = root / ANSWER_FILE, root / NOTE_FILE
    old = [p for p, text in ((stored, plain_answer(root)), (note, budget_note(root)))
           if not p.is_file() or p.read_text().strip() != text]
    if not (root / SOURCES_FILE).is_file() or stale_sources(root):  # the tables the answer rests on
        old.append(root / SOURCES_FILE)
    stale += old
    if old and not check:
        write_answer(root)
    return stale


def main(args) -> int:
    """``python -m core.reproduce docs [--check] [FILE ...]`` (without ``--check`` the stored claims
    table, ``results/claims_table.csv``, is written again too)."""
    root = Path(args.repo) / args.results
    if not args.check and (root / "converged").is_dir():
        from .claims import write_claims

        write_claims(root)
    changed, errors = run(args.repo, args.files or None, args.check, args.results)
    changed += _figure(Path(args.repo), args.results, args.check)
    for e in errors:
        print(f"error: {e}")
    if args.check:
        for d in changed:
            print(f"out of date: {d} (rebuild with `python -m core.reproduce docs`)")
        return 1 if changed or errors else 0
    for d in changed:
        print(f"rewrote {d}")
    return 1 if errors else 0
