"""The tables a stored answer rests on: ``results/answer_sources.json`` holds a SHA-256 per
table file of each grid the answer reads (and the long grid's, which Compare shows under it), so a
page can say when the tables changed after the answer, its note and the gap figure were written
(``core.report.answer.write_answer``; ``python -m core.reproduce docs`` writes them all again)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

FOLDERS = ("paper", "converged", "budget", "budget-24k", "long")  # answer.GRIDS and the long grid
SOURCES_FILE = "answer_sources.json"  # results/answer_sources.json: the tables the stored answer rests on
SOURCE_TABLES = ("summary.json", "runs.csv", "table2.csv", "table3.csv", "table4.csv", "claims.csv", "controls.csv")


def sources(root="results") -> dict[str, str]:
    """A SHA-256 per table file the pages show beside the stored answer (each grid's and the long
    grid's tables, ``SOURCE_TABLES``), keyed by its path under ``root``."""
    root = Path(root)
    out = {}
    for folder in FOLDERS:
        for name in SOURCE_TABLES:
            p = root / folder / name
            if p.is_file():
                out[f"{folder}/{name}"] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def stale_sources(root="results") -> list[str]:
    """The table files (paths under ``root``) that changed, appeared or went since the stored answer,
    note and gaps were written (``write_answer``); empty when they match or nothing is stored."""
    p = Path(root) / SOURCES_FILE
    if not p.is_file():
        return []
    try:
        stored = json.loads(p.read_text())
    except (OSError, ValueError):
        return [SOURCES_FILE]
    now = sources(root)
    return sorted(k for k in set(stored) | set(now) if stored.get(k) != now.get(k))


def write_sources(root="results") -> None:
    """Store ``sources`` as ``results/answer_sources.json`` (beside the answer it belongs to)."""
    (Path(root) / SOURCES_FILE).write_text(json.dumps(sources(root), indent=1, sort_keys=True) + "\n")
