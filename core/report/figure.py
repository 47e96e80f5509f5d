"""The results figure, ``docs/figures/gaps.png``: RIM's gap to each method per data set and grid
(``core.report.answer.gap_rows``), its numbers in ``results/gaps.csv``."""
from __future__ import annotations

import math
from pathlib import Path

from . import fmt
from .answer import FIGURE, FIGURE_DATA, GRIDS, OTHERS, SHORT, _paper_gap, gap_rows
from .paper import DATASET_ORDER


def write_figure(repo=".", results="results") -> Path:
    """Draw ``gap_rows`` as ``docs/figures/gaps.png`` (and its numbers as ``results/gaps.csv``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    repo = Path(repo)
    df = gap_rows(repo / results)
    out = repo / FIGURE
    out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(repo / results / FIGURE_DATA, index=False)  # every float as it round-trips: read back, shown alike
    if df.empty:
        raise ValueError(f"no results grid with tables under {repo / results}: nothing to draw")
    from .plots.style import GRID_COLORS as colours  # the same colour per grid as on Compare
    rows_of = [[g for g in GRIDS if g != "paper" and g in set(df["grid"])], ["paper"] if "paper" in set(df["grid"]) else []]
    rows_of = [r for r in rows_of if r]
    fig, axes = plt.subplots(len(rows_of), len(DATASET_ORDER), figsize=(10, 2.9 * len(rows_of) + 0.8), dpi=160,
                             sharey=True, squeeze=False)
    labelled: set = set()
    for axrow, grids in zip(axes, rows_of, strict=True):
        for ax, ds in zip(axrow, DATASET_ORDER, strict=True):
            ax.axvline(0, color="black", lw=0.8)
            for i, other in enumerate(OTHERS):
                for j, g in enumerate(grids):
                    r = df[(df["grid"] == g) & (df["dataset"] == ds) & (df["other"] == other)]
                    if r.empty:
                        continue
                    r = r.iloc[0]
                    y = i + (j - (len(grids) - 1) / 2) * 0.22
                    err = [[r["gap"] - r["ci_low"]], [r["ci_high"] - r["gap"]]] if math.isfinite(r["ci_low"]) else None
                    ax.errorbar(r["gap"], y, xerr=err, fmt="o", ms=4, color=colours[g], capsize=2, lw=1.3,
                                label=SHORT[g] if g not in labelled else None)
                    labelled.add(g)
                paper = _paper_gap(ds, other)
                if math.isfinite(paper):
                    ax.plot(paper, i, marker="D", ms=6, mfc="none", mec="black", ls="none",
                            label="paper's figure" if "paper_fig" not in labelled else None)
                    labelled.add("paper_fig")
            ax.set_title(f"{fmt.dataset_title(ds)}" + (" (paper protocol)" if grids == ["paper"] else ""), fontsize=9)
            ax.tick_params(labelsize=8)
            ax.grid(axis="x", alpha=0.3)
        axrow[0].set_yticks(range(len(OTHERS)), [f"vs {fmt.short_method_title(o)}" for o in OTHERS], fontsize=9)
    axes[0][0].invert_yaxis()
    for ax in axes[-1]:
        ax.set_xlabel("other − RIM, error points", fontsize=8)
    fig.legend(loc="lower center", ncol=len(labelled), fontsize=9, frameon=False)
    fig.suptitle("RIM's test-error gap to each method (right of 0: RIM better)\nbars: the Holm-adjusted interval, "
                 "which excludes 0 exactly when a difference is shown; no bar: one seed", fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(out, metadata={"Software": None})
    plt.close(fig)
    return out


def figure_current(repo=".", results="results") -> bool:
    """Whether ``results/gaps.csv`` holds the numbers ``gap_rows`` computes now."""
    p = Path(repo) / results / FIGURE_DATA
    if not p.is_file():
        return False
    return p.read_text() == gap_rows(Path(repo) / results).to_csv(index=False)
