"""Classify the health of finished runs and store it in each run JSON, in place.

Every ``*.json`` under the given folders that is a run record (it has ``metrics`` and a
``status``) gets ``health`` (healthy / diverged / collapsed), ``health_reasons``,
``health_checked`` (which criteria its stored numbers allow: the loss history, balanced
accuracy, the predicted-class share) and ``health_measures``, right after ``status``; see
``core.report.health``. Nothing is retrained and no weights are read: everything comes from the
stored loss history and the final test confusion matrix. Rerunning it is harmless (the
fields are recomputed from the same numbers).

    .venv/bin/python -m scripts.classify_health results/paper results/unequal_init
    .venv/bin/python -m scripts.classify_health --glob '*_s0.json' results/converged
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from core.fileio import write_json  # noqa: E402
from core.report.health import HEALTH_KEYS, HEALTHY, summary_text, with_health  # noqa: E402


def classify_folder(folder: Path, pattern: str = "*.json", dry_run: bool = False) -> list[tuple[Path, dict]]:
    """(path, health fields) of every run JSON under ``folder`` matching ``pattern``; written unless dry."""
    done = []
    for p in sorted(Path(folder).rglob(pattern)):
        try:
            meta = json.loads(p.read_text())
        except (OSError, ValueError) as exc:
            print(f"{p}: not readable ({exc}), skipped", file=sys.stderr)
            continue
        if not isinstance(meta, dict) or "metrics" not in meta or "status" not in meta:
            continue  # a summary, a manifest, a digits measurement: not a run
        new = with_health(meta)
        if not dry_run and new != meta:
            write_json(p, new)
        done.append((p, {k: new[k] for k in HEALTH_KEYS}))
    return done


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--glob", default="*.json", help="file name pattern (default %(default)s)")
    ap.add_argument("--dry-run", action="store_true", help="print, do not write")
    args = ap.parse_args(argv)
    counts: Counter = Counter()
    for folder in args.folders:
        if not folder.is_dir():
            print(f"{folder}: no such folder", file=sys.stderr)
            return 2
        for p, h in classify_folder(folder, args.glob, args.dry_run):
            counts[h["health"]] += 1
            if h["health"] != HEALTHY:
                print(f"{p}: {summary_text(h)}")
    print(", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no run JSONs found")
    return 0


if __name__ == "__main__":
    sys.exit(main())
