"""Refresh the measured tables inside REPRODUCTION.md from the results folders.

Every block between ``<!-- tables: results/X -->`` and ``<!-- /tables -->`` is replaced with
``results/X/tables.md`` as ``python -m core.reproduce tables --out results/X`` last wrote it,
so the document never carries a number the results do not hold. The prose around the blocks
(the verdicts in words) is written by hand and must be re-read after a refresh.

    python scripts/update_reproduction.py
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"(<!-- tables: (?P<dir>[^ ]+) -->\n).*?(<!-- /tables -->)", re.S)


def main() -> int:
    doc = ROOT / "REPRODUCTION.md"
    text = doc.read_text()

    def fill(m: re.Match) -> str:
        tables = (ROOT / m.group("dir") / "tables.md").read_text().strip()
        tables = re.sub(r"^### ", "#### ", tables, flags=re.M)  # nested under the document's sections
        return m.group(1) + tables + "\n" + m.group(3)

    new, n = BLOCK.subn(fill, text)
    doc.write_text(new)
    print(f"{n} table blocks refreshed in {doc.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
