"""Bring the long grid's finished runs from the checkout that trains them into this one, and
regenerate everything that reads them.

The long grid (``scripts/long_grid.py``) runs from a separate checkout (a ``git worktree``), so
that work on this one does not change the code under it. Each finished run (its record ``.json``
and its weights ``.safetensors``) is copied here once; a run still training (its ``.ckpt/``
state beside it, or no weights yet) and a run this checkout already has are left alone. Then the
tables of the grid's folders, the long grid's handwriting table, its shipped models, the compute
table and the documents are regenerated, as ``make reproduce`` and ``make pretrained`` do. A
control cell with fewer than its five seeds is named, never tabulated (``core.report.controls``),
so every finished run can land as it comes.

    .venv/bin/python -m scripts.sync_grid --from ../grid            # copy, then regenerate
    .venv/bin/python -m scripts.sync_grid --from ../grid --dry-run  # only list what it would copy
    .venv/bin/python -m scripts.sync_grid --from ../grid --regenerate  # regenerate, even with nothing new
    .venv/bin/python -m scripts.sync_grid --regenerate  # regenerate only (make reproduce, after the grid)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from core.grid.long import FOLDERS
from core.paths import LONG_GRID, RETRAINED, ROOT

GRID_FOLDERS = [*FOLDERS.values(), RETRAINED]  # where the long grid writes its runs, under results/


def finished_runs(src: Path, folders=GRID_FOLDERS) -> list[Path]:
    """The finished runs under ``src/results/<folder>/runs``: relative paths of their records
    (``.json``) that have their weights beside them, no training state and a completed status."""
    out = []
    for folder in folders:
        base = src / "results" / folder / "runs"
        for rec in sorted(base.rglob("*.json")) if base.is_dir() else []:
            if not rec.with_suffix(".safetensors").is_file() or rec.with_suffix(".ckpt").exists():
                continue
            try:
                meta = json.loads(rec.read_text())
            except (OSError, ValueError):
                continue  # being written: the next sync takes it
            if isinstance(meta, dict) and meta.get("status") == "completed":
                out.append(rec.relative_to(src))
    return out


def copy_new(src: Path, dst: Path, folders=GRID_FOLDERS, dry_run: bool = False) -> list[Path]:
    """Copy each finished run of ``src`` that ``dst`` lacks (record and weights; never overwrites)."""
    new = [rel for rel in finished_runs(src, folders) if not (dst / rel).exists()]
    for rel in new if not dry_run else []:
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / rel.with_suffix(".safetensors"), dst / rel.with_suffix(".safetensors"))
        shutil.copy2(src / rel, dst / rel)  # the record last: a record here always has its weights
    return new


def regenerate(data_dir: str | None) -> None:
    """Every table, shipped model and document that reads the long grid's runs."""
    py = [sys.executable, "-m"]
    folders = [f"results/{f}" for f in FOLDERS.values()]
    steps = [py + ["scripts.classify_health", *folders]]
    steps += [py + ["core.reproduce", "tables", "--out", f] for f in [*folders, f"results/{LONG_GRID}"]]
    steps += [py + ["core.studies.handwriting", "generalisation", "--runs", f"results/{LONG_GRID}/runs/mnist",
                    "--runs", f"results/{RETRAINED}/runs/mnist", "--out", f"results/{LONG_GRID}/handwriting.csv"],
              py + ["core.reproduce", "export-pretrained", "--out", f"results/{LONG_GRID}", "--protocol", "long",
                    "--weights-from", f"results/{RETRAINED}"],
              py + ["scripts.compute_cost", "--write"], py + ["core.reproduce", "docs"]]
    env = {**os.environ, **({"RIMSCOPE_DATA_DIR": data_dir} if data_dir else {})}
    for step in steps:
        print("$", " ".join(step[2:]), flush=True)
        subprocess.run(step, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="src", help="the checkout that trains the long grid (without it: "
                                                   "nothing to copy; --regenerate regenerates here)")
    parser.add_argument("--dry-run", action="store_true", help="list the runs it would copy; change nothing")
    parser.add_argument("--no-regenerate", action="store_true", help="copy only")
    parser.add_argument("--regenerate", action="store_true", help="regenerate even when no run is new")
    parser.add_argument("--data-dir", default=os.environ.get("RIMSCOPE_DATA_DIR"),
                        help="the data sets (the handwriting table and the shipped models' checks read them)")
    args = parser.parse_args(argv)
    if args.src is None:
        if not args.regenerate or args.dry_run or args.no_regenerate:
            print("nothing to do: give --from CHECKOUT (the one that trains the long grid) to bring its runs, "
                  "or --regenerate alone to regenerate what reads the long grid here", file=sys.stderr)
            return 2
        regenerate(args.data_dir)
        return 0
    src = Path(args.src).resolve()
    if not (src / "results").is_dir():
        print(f"{src}: no results/ folder there; --from is the checkout that runs scripts.long_grid", file=sys.stderr)
        return 2
    if src == ROOT.resolve():
        print("--from is this checkout: nothing to bring", file=sys.stderr)
        return 2
    new = copy_new(src, ROOT, dry_run=args.dry_run)
    print(f"{'would copy' if args.dry_run else 'copied'} {len(new)} finished run(s)"
          + "".join(f"\n  {rel}" for rel in new))
    if (new or args.regenerate) and not args.dry_run and not args.no_regenerate:
        regenerate(args.data_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
