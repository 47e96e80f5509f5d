"""THE claims table: one row per claim of the paper (``docs/method.md``) plus ours beyond it
(other people's handwriting, the controls of "why"), from ``results/``.

claim | paper's figure | Adam, cosine, 4,000 iterations | paper protocol | verdict. One column
spec (``CLAIM_COLUMNS``) renders it as a DataFrame for the pages (``claims_frame``) and as
Markdown for the documents (``claims_markdown``); README's glance and its answer sentences are
computed from the same rows (``glance_markdown``; the plain answer: core.report.answer), so no
document can disagree with another. Every verdict is the one rule's (``core.report.stats.verdict``) on a test decided in
its table's Holm family, with the interval at the Holm step's level (``INTERVAL_NOTE``).
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

import pandas as pd

from ..paths import LONG_GRID
from . import fmt
from .controls import CONTROL_WORDS, EQUIV_WORDS
from .markdown import floors_line, md_table
from .paper import DATASET_ORDER, PAPER
from .stats import (
    CANNOT_TELL,
    HOLDS,
    NOT_HOLDS,
    holm,
    holm_levels,
    t_interval,
    verdict,
    verdict_all,
    welch_from_summary,
)

CLAIM_COLUMNS = [  # key in a claims row -> column title (pages and documents)
    ("claim", "claim"),
    ("paper", "paper's figure"),
    ("converged", fmt.CONVERGED_TITLE),
    ("paper_protocol", "paper protocol (SGD 0.1, 1,000 iterations)"),
    ("verdict", "verdict"),
]
CLAIMS_NOTE = ("Each interval is at the level of the Holm step that decides its test (in brackets), so it excludes 0 "
               "exactly when the verdict is holds or does not hold. A claim over several sets holds only when it "
               "holds on each and does not hold when another method is measurably better on any. Verdict: the "
               f"{fmt.CONVERGED_TITLE} protocol's (5 seeds, 3 on Animals-10).")

_PAPER_FIGURES = {
    "vs_parallel_all": "gaps " + ", ".join(PAPER["vs_parallel_gap_note"].get(d, f"{PAPER['vs_parallel_gap'][d]:g}")
                                           for d in DATASET_ORDER),
    "vs_parallel_mean": f"{PAPER['stated_mean']['vs_parallel_gap']:.2f}",
    "vs_baselines_all": "lowest on all four",
    "vs_runner_up_mean": f"{PAPER['stated_mean']['vs_runner_up_gap']:.2f} (runner-up named only on MNIST: RMC)",
    "vs_runner_up_mean_posthoc": f"{PAPER['stated_mean']['vs_runner_up_gap']:.2f}",
    "noisy_lowest_all": "lowest everywhere",
    "growth_all": "grows less by " + ", ".join(f"{PAPER['noise_growth_gap'][d]:g}" for d in DATASET_ORDER),
    "growth_mean": f"{PAPER['stated_mean']['noise_growth_gap']:.2f}",
    "growth_mean_posthoc": f"{PAPER['stated_mean']['noise_growth_gap']:.2f}",
    "fluct_abs_all": "fluctuates more (no number)",
    "fluct_rel_all": "fluctuates more (no number)",
    "robust_vs_parallel": "not claimed",
}


@lru_cache(maxsize=8)
def _grid(path: str, stamp: float) -> tuple[list, dict]:
    from .controls import read_budgets
    from .tables import build_tables, load_results

    rows = load_results(Path(path))
    return rows, build_tables(rows, budgets=read_budgets(Path(path).resolve().parent)) if rows else {}


def grid(path) -> tuple[list[dict], dict]:
    """(run rows, tables) of one results folder (``results/converged``); empty when it has no runs."""
    p = Path(path)
    runs = list((p / "runs").glob("*/*.json"))
    stamp = max((f.stat().st_mtime for f in runs), default=0.0)
    return _grid(str(p), stamp)


def _short(v) -> str:
    return fmt.marked_verdict(v) if v else "not measured"


def _claim_cell(r: dict | None, detail: bool = True) -> str:
    """One grid's result of a claim: the verdict, the pooled test or the per-set detail."""
    if r is None:
        return "not measured"
    text = _short(r.get("verdict"))
    if "pooled" in r and math.isfinite(fmt.num(r.get("pooled"))):
        text += f": {fmt.gap_test(r, 'pooled')}"
    if detail and r.get("detail") and ("pooled" not in r or "missing" in r["detail"]):
        text += f" ({r['detail']})"
    if r.get("magnitude"):
        text += f"; against the paper's figure: {r['magnitude']}"
    return text


def _combined(conv: str | None, paper: str | None) -> str:
    if not conv:
        return _short(paper) + " (paper protocol only)"
    return _short(conv)


def handwriting_rows(path) -> list[dict]:
    """The handwriting table (``handwriting.csv`` of ``python -m core.studies.handwriting generalisation``) with
    Welch tests recomputed from its means, sds and seeds, one Holm family per set as the CSV defines,
    and the interval at the Holm step's level. Accuracy points, RIM − method (positive: RIM reads better)."""
    p = Path(path) / "handwriting.csv"
    if not p.is_file():
        return []
    df = pd.read_csv(p)
    if not {"set", "half", "method", "seeds", "mean", "sd"} <= set(df.columns):
        return []  # not a generalisation table (the page says so)
    out = []
    for s in dict.fromkeys(df["set"]):
        sub = df[df["set"] == s]
        ref = sub[sub["method"] == "rim"]
        if ref.empty:
            continue
        rr = ref.iloc[0]
        rows = []
        for _, r in sub.iterrows():
            row = {"set": s, "half": r["half"], "method": r["method"], "seeds": int(r["seeds"]),
                   "accuracy": 100 * r["mean"], "sd": 100 * r["sd"]}
            if r["method"] != "rim":
                w = welch_from_summary(100 * rr["mean"], 100 * rr["sd"], int(rr["seeds"]), 100 * r["mean"],
                                       100 * r["sd"], int(r["seeds"]))
                row.update(gap=w["diff"], gap_raw_ci_low=w["ci_low"], gap_raw_ci_high=w["ci_high"], gap_p=w["p"],
                           gap_se=w["se"], gap_df=w["df"])
            rows.append(row)
        tested = [r for r in rows if "gap_p" in r]
        ps = [r["gap_p"] for r in tested]
        for r, q, lev in zip(tested, holm(ps), holm_levels(ps), strict=True):
            r.update(gap_p_holm=float(q), gap_level=float(lev))
            r["gap_ci_low"], r["gap_ci_high"] = t_interval(r["gap"], r["gap_se"], r["gap_df"], lev)
            r["gap_verdict"] = verdict(r["gap"], q, "RIM reads it better", "the other method reads it better",
                                       CANNOT_TELL)
        out += rows
    return out


def handwriting_markdown(path) -> list[str]:
    rows = handwriting_rows(path)
    if not rows:
        return ["No handwriting table yet (`python -m core.studies.handwriting generalisation`)."]
    body = [[f"{r['set']} ({r['half']})", fmt.display_name(r["method"]), r["seeds"],
             fmt.mean_sd_text(r["accuracy"], r["sd"], 1),
             fmt.gap_test(r, "gap", 1) if "gap" in r else "(reference)", r.get("gap_verdict", "")] for r in rows]
    return md_table(["set", "method", "seeds", "accuracy % (mean ± sd)",
                      "RIM − method, points [Holm-step interval] (level), p raw / Holm", "verdict"], body) + [
        "", "One Holm family per set (the generalisation table's definition); each interval at the level of the Holm "
        "step that decides its test, so it excludes 0 exactly when the verdict is not \"cannot tell\"."
        + " Chance 10 % on both sets (accuracy; error floors do not apply to an accuracy of other collections)."]


def _handwriting_claim(path) -> dict | None:
    rows = handwriting_rows(path)
    if not rows:
        return None
    per_set = {}
    for s in dict.fromkeys(r["set"] for r in rows):
        vs = {r["method"]: r["gap_verdict"] for r in rows if r["set"] == s and "gap_verdict" in r}
        norm = {m: HOLDS if v.startswith("RIM reads") else NOT_HOLDS if v.startswith("the other") else CANNOT_TELL
                for m, v in vs.items()}
        per_set[s] = verdict_all(norm, list(norm))
    sets = list(per_set)
    v, _ = verdict_all({s: per_set[s][0] for s in sets}, sets)
    detail = "; ".join(f"{s}: " + ", ".join(f"{k} vs {', '.join(fmt.display_name(m) for m in ms)}"
                                            for k, ms in g.items() if ms) for s, (_, g) in per_set.items())
    n = sorted({r["seeds"] for r in rows})
    return {"claim_id": "handwriting", "verdict": v, "detail": f"{detail}; {'/'.join(map(str, n))} seeds"}


def _control_claims(controls: list[dict]) -> list[dict]:
    """One claim per control: "RIM has a lower error than <control>" over the sets where it ran."""
    out = []
    names = list(dict.fromkeys(r["control"] for r in controls if r["control"] not in ("rim", "parallel_lstm")))
    for name in names:
        rows = [r for r in controls if r["control"] == name and "gap_verdict" in r]
        plain = {CONTROL_WORDS[0]: HOLDS, CONTROL_WORDS[1]: NOT_HOLDS}
        vs = {r["dataset"]: plain.get(r["gap_verdict"], CANNOT_TELL) for r in rows}
        v, groups = verdict_all(vs, list(vs))
        parts = []
        for r in rows:
            word = {CONTROL_WORDS[2]: "no measurable difference"}.get(r["gap_verdict"], r["gap_verdict"])
            eq = f", equivalent ±{fmt.margin(r['margin'])}" if r.get("equiv_verdict") == EQUIV_WORDS[0] else ""
            parts.append(f"{fmt.dataset_title(r['dataset'])} {word}{eq}, {r['seeds']} seeds")
        title = fmt.display_name(name)
        out.append({"claim_id": f"control_{name}", "claim": f"Ours, why: RIM beats {title}",
                    "verdict": v, "detail": "; ".join(parts)})
    return out


def claims_rows(root="results") -> list[dict]:
    """THE claims table: one dict per claim with ``claim``, ``paper``, ``converged``,
    ``paper_protocol``, ``long``, ``verdict`` (texts as shown) and the raw verdicts
    ``converged_verdict``, ``paper_verdict``, ``long_verdict`` (the one rule's words)."""
    root = Path(root)
    _, tc = grid(root / "converged")
    _, tp = grid(root / "paper")
    _, tl = grid(root / LONG_GRID)
    conv = {r["claim_id"]: r for r in tc.get("claims") or []}
    pap = {r["claim_id"]: r for r in tp.get("claims") or []}
    from .comparisons import CLAIMS

    out = []
    for cid, claim, *_ in CLAIMS:
        c, p = conv.get(cid), pap.get(cid)
        out.append({"claim_id": cid, "claim": claim, "paper": _PAPER_FIGURES.get(cid, ""),
                    "converged": _claim_cell(c), "paper_protocol": _claim_cell(p, detail=False),
                    "verdict": _combined(c and c.get("verdict"), p and p.get("verdict")),
                    "converged_verdict": c and c.get("verdict"), "paper_verdict": p and p.get("verdict")})
    hw = _handwriting_claim(root / "converged")
    if hw:
        out.append({"claim_id": "handwriting", "claim": "Ours: RIM reads other people's handwriting (Semeion, "
                    "optdigits; odd halves) better than each other method", "paper": "not in the paper",
                    "converged": _claim_cell(hw), "paper_protocol": "not measured", "verdict": _short(hw["verdict"]),
                    "converged_verdict": hw["verdict"], "paper_verdict": None})
    for r in _control_claims(tc.get("controls") or []):
        out.append({**r, "paper": "not in the paper", "converged": _claim_cell(r), "paper_protocol": "not measured",
                    "verdict": _short(r["verdict"]), "converged_verdict": r["verdict"], "paper_verdict": None})
    # the long grid's result of each claim, where it has one (its controls and handwriting table as they land)
    long = {r["claim_id"]: r for r in tl.get("claims") or []}
    long.update({r["claim_id"]: r for r in _control_claims(tl.get("controls") or [])})
    if (hw_long := _handwriting_claim(root / LONG_GRID)) is not None:
        long["handwriting"] = hw_long
    for row in out:
        r = long.get(row["claim_id"])
        row["long"], row["long_verdict"] = _claim_cell(r), r and r.get("verdict")
    return out


CLAIMS_FILE = "claims_table.csv"  # results/claims_table.csv: the rows as shown, for the pages (no recomputation)


def write_claims(root="results") -> list[dict]:
    """Compute the claims rows and store them as ``results/claims_table.csv`` and ``.md``."""
    root = Path(root)
    rows = claims_rows(root)
    if rows:
        pd.DataFrame(rows).to_csv(root / CLAIMS_FILE, index=False)
        (root / CLAIMS_FILE).with_suffix(".md").write_text(claims_markdown(rows) + "\n")
    return rows


def read_claims(root="results") -> list[dict]:
    """The stored claims rows (``write_claims``); computed from the runs when none are stored."""
    p = Path(root) / CLAIMS_FILE
    if not p.is_file():
        return claims_rows(root) if (Path(root) / "converged" / "runs").is_dir() else []
    df = pd.read_csv(p, dtype=str, keep_default_na=False)
    return df.to_dict("records")


def claims_frame(rows: list[dict]) -> pd.DataFrame:
    """The claims table for a page: the columns of ``CLAIM_COLUMNS``."""
    return pd.DataFrame([{title: r.get(key, "") for key, title in CLAIM_COLUMNS} for r in rows],
                        columns=[t for _, t in CLAIM_COLUMNS])


NAME_COLUMNS = ("model", "variant", "control", "runner_up", "runner_up_posthoc", "paper_runner_up", "method", "other")


def display_csv(df: pd.DataFrame) -> bytes:
    """A table as CSV for a reader: data sets and methods by their display names, not internal ones."""
    out = df.copy()
    for col in out.columns:
        if col == "dataset":
            out[col] = [fmt.dataset_title(v) for v in out[col]]
        elif col in NAME_COLUMNS:
            out[col] = [fmt.display_name(v) if isinstance(v, str) and v else v for v in out[col]]
        elif col in ("baselines", "others", "pooled_sets"):
            out[col] = [", ".join(fmt.display_name(x) for x in v) if isinstance(v, list) else v for v in out[col]]
    return out.to_csv(index=False).encode()


def _md_cell(v) -> str:
    return str(v).replace("|", "\\|").replace("\n", " ")


def claims_markdown(rows: list[dict]) -> str:
    """The claims table as Markdown, its note and the floors."""
    head = [t for _, t in CLAIM_COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_md_cell(r.get(k, "")) for k, _ in CLAIM_COLUMNS) + " |" for r in rows]
    return "\n".join(lines + ["", CLAIMS_NOTE, "", floors_line(DATASET_ORDER)])


def _glance_cell(verdict_text, row: dict | None) -> str:
    if not verdict_text:
        return "not measured"
    out = fmt.marked_verdict(verdict_text)
    if row and "pooled" in row and math.isfinite(fmt.num(row.get("pooled"))):
        out += " " + fmt.gap(row["pooled"], row.get("pooled_ci_low"), row.get("pooled_ci_high"))
    if row and row.get("magnitude"):
        out += f"; {row['magnitude']}"
    return out


GLANCE_LEGEND = ("✅ holds, ❌ does not hold (the other method is measurably better), ❔ cannot tell at this number "
                 "of seeds; an average claim shows its pooled gap in points, its interval at the Holm step's level "
                 "(so interval and verdict agree). Per set, with p values: the tables of REPRODUCTION.md.")


def glance_frame(rows: list[dict], root="results") -> pd.DataFrame:
    """The claims table as REPRODUCTION.md and Compare show it: one row per claim, the verdict
    under each protocol (the long grid first: the default experiment) with the pooled gap of an
    average claim."""
    by = {}
    for name in (LONG_GRID, "converged", "paper"):
        _, t = grid(Path(root) / name)
        by[name] = {r["claim_id"]: r for r in t.get("claims") or []}
    long = fmt.PROTOCOL_NAMES[LONG_GRID]
    return pd.DataFrame([{"claim": r["claim"], "paper": r.get("paper", ""),
                          long: _glance_cell(r.get("long_verdict"), by[LONG_GRID].get(r["claim_id"])),
                          fmt.CONVERGED_TITLE: _glance_cell(r.get("converged_verdict"), by["converged"].get(r["claim_id"])),
                          "paper protocol": _glance_cell(r.get("paper_verdict"), by["paper"].get(r["claim_id"]))}
                         for r in rows], columns=["claim", "paper", long, fmt.CONVERGED_TITLE, "paper protocol"])


def glance_markdown(rows: list[dict], root="results") -> str:
    """``glance_frame`` as Markdown, with its legend and the floors."""
    df = glance_frame(rows, root)
    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(_md_cell(x) for x in rec) + " |" for rec in df.itertuples(index=False)]
    return "\n".join(lines + ["", GLANCE_LEGEND + " " + floors_line(DATASET_ORDER)])
