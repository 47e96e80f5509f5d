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

import math
import re
from collections.abc import Callable
from pathlib import Path

from . import fmt
from .markdown import floors_line, md_table
from .paper import BASELINES

BLOCK = re.compile(r"<!-- generated:(?P<name>[^\s>]+) -->\n(?P<body>.*?)<!-- /generated:(?P=name) -->", re.S)
OPEN = re.compile(r"<!-- generated:(?P<name>[^\s>]+) -->")
DEFAULT_DOCS = ["README.md", "REPRODUCTION.md", "docs/*.md"]


class DocsError(Exception):
    """A document that cannot be generated (unknown block name, unclosed block, bad include)."""


def _cell(r: dict, name: str, digits: int = 2) -> str:
    """``"1.55 ± 0.09 (5)"``: mean ± sd and healthy seeds, ``"k of n"`` where runs were left out."""
    text = fmt.mean_sd_text(r.get(f"{name}_error"), r.get(f"{name}_sd"), digits)
    h, n = fmt.num(r.get(f"{name}_healthy")), fmt.num(r.get(f"{name}_runs"))
    if not math.isfinite(n) or n == 0:
        return text
    return f"{text} ({int(h)})" if h == n else f"{text} ({int(h)} of {int(n)} healthy)"


def _foot(rows: list[dict], excluded: int) -> str:
    m = rows[0].get("holm_m", 0) if rows else 0
    sets = [r["dataset"] for r in rows]
    return (f"Gap = other − RIM in points (positive: RIM better); seeds in brackets. One Holm family: the {m} tests "
            "of this table; each interval is at the level of the Holm step that decides its test, so it excludes 0 "
            "exactly when the verdict is holds or does not hold. " + floors_line(sets)
            + (f" Unhealthy runs left out of the means: {excluded} (named with the failed runs)." if excluded else ""))


def _compact(grid: str, name: str) -> Callable[[Path], str]:
    """One table of a grid, compact for a document (the full one: ``results/<grid>/tables.md``)."""

    def render(root: Path) -> str:
        from .claims import grid as load
        from .tables import excluded_runs

        rows, t = load(root / grid)
        tab = t.get(name) or []
        if not tab:
            return f"No {name} in `results/{grid}` yet."
        ex = len(excluded_runs(rows, t).get(name) or [])
        v, g, ds = fmt.marked_verdict, fmt.gap_test, fmt.dataset_title
        if name == "table2":
            head = ["data set", "RIM", "parallel LSTMs", "gap [interval] (level), p raw / Holm", "paper", "verdict"]
            body = [[ds(r["dataset"]), _cell(r, "rim"), _cell(r, "parallel_lstm"), g(r, "gap"),
                     f"{r['paper_gap']:.2f}", v(r["verdict"])] for r in tab]
        elif name == "table3":
            head = ["data set", "RIM"] + [fmt.display_name(b) for b in BASELINES] + [
                f"gap {fmt.display_name(b)}" + (" (runner-up fixed in advance)" if b == "rmc" else "") + ", p"
                for b in BASELINES] + ["paper's gap", "verdict: RIM lowest"]
            body = [[ds(r["dataset"]), _cell(r, "rim")] + [_cell(r, b) for b in BASELINES]
                    + [g(r, f"gap_{b}") if f"gap_{b}" in r else "n/a" for b in BASELINES]
                    + [f"{r['paper_gap']:.2f}", f"{v(r['verdict'])} ({r['verdict_detail']})"] for r in tab]
        elif name == "table4":
            head = ["data set"] + [f"{fmt.display_name(m)} noisy (change)" for m in ["rim", "parallel_lstm", *BASELINES]] \
                + ["verdict: RIM lowest under noise", "growth gap RMC (fixed runner-up), p", "verdict",
                   "growth gap parallel LSTMs, p", "verdict", "paper's growth gap"]
            body = []
            for r in tab:
                cells = [_cell(r, f"{m}_noisy") + (f" ({r[f'{m}_change']:+.2f})" if math.isfinite(
                    fmt.num(r.get(f"{m}_change"))) else "") for m in ["rim", "parallel_lstm", *BASELINES]]
                body.append([ds(r["dataset"]), *cells, v(r["noisy_verdict"]),
                             g(r, "growth_gap"), v(r.get("growth_gap_verdict")), g(r, "growth_gap_parallel_lstm"),
                             v(r.get("growth_gap_parallel_lstm_verdict")), f"{r['paper_growth_gap']:.2f}"])
        else:
            head = ["data set", "RIM", "parallel LSTMs", "gap, p", "verdict", "gap (relative, post hoc), p",
                    "verdict (post hoc)"]
            body = [[ds(r["dataset"]), fmt.mean_sd_text(r["rim_abs"], r["rim_abs_sd"], 3),
                     fmt.mean_sd_text(r["parallel_lstm_abs"], r["parallel_lstm_abs_sd"], 3), g(r, "gap_abs", 3),
                     v(r["gap_abs_verdict"]), g(r, "gap_rel", 3), v(r["gap_rel_verdict"])] for r in tab]
            return "\n".join(md_table(head, body) + ["", "Batch-loss jitter around its 51-iteration moving average, "
                                                      "second half of training (gap = parallel − RIM). " + _foot(tab, 0)
                                                      .split(" Floors")[0].replace("Gap = other − RIM in points "
                                                                                   "(positive: RIM better); ", "")])
        return "\n".join(md_table(head, body) + ["", _foot(tab, ex)])

    return render


def _claims(root: Path) -> str:
    from .claims import claims_markdown, claims_rows

    return claims_markdown(claims_rows(root))


def _glance(root: Path) -> str:
    from .claims import claims_rows, glance_markdown

    return glance_markdown(claims_rows(root), root)


def _answer(root: Path) -> str:
    from .claims import answer_text

    return answer_text(root)


def _controls(root: Path) -> str:
    from .claims import grid
    from .controls import controls_markdown

    _, t = grid(root / "converged")
    return "\n".join(controls_markdown(t["controls"])) if t.get("controls") else "No controls in `results/converged` yet."


def _budget(root: Path) -> str:
    from .budget import budget_markdown

    return budget_markdown(root)


def _failed(root: Path) -> str:
    from .facts import failed_markdown

    return failed_markdown(root / "paper")


def _handwriting(root: Path) -> str:
    from .claims import handwriting_markdown

    return "\n".join(handwriting_markdown(root / "converged"))


def _interventions(root: Path) -> str:
    from .interventions import interventions_markdown

    return interventions_markdown(root)


def _facts(root: Path) -> str:
    from .facts import facts_markdown

    return facts_markdown(root, root.parent / "pretrained")


RENDERERS: dict[str, Callable[[Path], str]] = {
    "claims": _claims, "glance": _glance, "answer": _answer,
    "converged-table2": _compact("converged", "table2"), "converged-table3": _compact("converged", "table3"),
    "converged-table4": _compact("converged", "table4"), "converged-fluctuation": _compact("converged", "fluctuation"),
    "controls": _controls, "budget": _budget,
    "paper-table2": _compact("paper", "table2"), "paper-table3": _compact("paper", "table3"),
    "paper-table4": _compact("paper", "table4"), "paper-failed": _failed,
    "handwriting": _handwriting, "facts": _facts, "interventions": _interventions,
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


def main(args) -> int:
    """``python -m core.reproduce docs [--check] [FILE ...]`` (without ``--check`` the stored claims
    table, ``results/claims_table.csv``, is written again too)."""
    root = Path(args.repo) / args.results
    if not args.check and (root / "converged").is_dir():
        from .claims import write_claims

        write_claims(root)
    changed, errors = run(args.repo, args.files or None, args.check, args.results)
    for e in errors:
        print(f"error: {e}")
    if args.check:
        for d in changed:
            print(f"out of date: {d} (rebuild with `python -m core.reproduce docs`)")
        return 1 if changed or errors else 0
    for d in changed:
        print(f"rewrote {d}")
    return 1 if errors else 0
