"""What the results in results/ cost to compute (``core.report.compute``), as a table.

    .venv/bin/python -m scripts.compute_cost            # print the table
    .venv/bin/python -m scripts.compute_cost --write    # write results/compute.md (README and
                                                        # REPRODUCTION include it)
"""

from __future__ import annotations

import argparse

from core.paths import ROOT
from core.report.compute import collect, render

RESULTS = ROOT / "results"
OUT = RESULTS / "compute.md"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {OUT.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    text = render(collect(RESULTS))
    if args.write:
        OUT.write_text(text, encoding="utf-8")
    else:
        print(text)


if __name__ == "__main__":
    main()
