"""Compare: every method side by side — curves, final errors over seeds, the paper's tables."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core import paths
from core.catalog import run_label
from core.grid.export import protocol_text
from core.paths import LONG_GRID
from core.report.answer import BUDGET_NOTE, read_answer, read_gap_rows, read_note, verdict_by_budget
from core.report.budget import BUDGET_SETS, CHECK_NOTE, check_frame, check_sentence, read_check
from core.report.claims import CLAIMS_NOTE, GLANCE_LEGEND, claims_frame, display_csv, glance_frame, read_claims
from core.report.comparisons import Cells
from core.report.controls import (
    controls_margin_rule,
    controls_named,
    counted_in_only,
    pending_note,
    training_note,
)
from core.report.fmt import dataset_title as _ds_title
from core.report.fmt import method_title, pct
from core.report.frames import dataset_order, handwriting_table, reproduction_tables, runs_frame, spread_frame
from core.report.markdown import floors_line
from core.report.paper import DATASET_ORDER, PAPER
from core.report.plots.comparison import ERROR_METRICS, error_bar_figure, gaps_figure
from core.report.plots.style import method_order
from core.report.plots.training import curves_overlay, curves_small_multiples
from core.report.sources import stale_sources
from core.report.stats import INTERVAL_NOTE
from core.runs.compare import OwnRunView, compare_view, option_name, own_runs, shipped_protocol
from core.studies.handwriting.external import SETS as HANDWRITING_SETS
from pages import ui
from pages.ui.auth import current_viewer
from pages.ui.cache import RESULT_FOLDERS, load_curves, load_summary, mtime, read_json, result_folders, run_store
from pages.ui.export import figure_downloads
from pages.ui.messages import reproduce_hint
from pages.ui.urlstate import url_list

SMALL_MULTIPLE_METRICS = {"loss": "training loss", "batch_acc": "training-batch accuracy",
                          "test_acc": "periodic test accuracy"}


def _paper_gaps(claim: str, note: str = "") -> str:
    """The paper's numbers of one claim in the data sets' order, e.g. ``"0.35, 0.62, 0.77 and 1.19"``;
    ``note``: a name of PAPER's per-data-set wording ("about 1")."""
    notes = PAPER.get(note, {})
    vals = [notes.get(d, f"{PAPER[claim][d]:g}") for d in DATASET_ORDER if d in PAPER[claim]]
    return ", ".join(vals[:-1]) + " and " + vals[-1]


def _paper_mean(claim: str) -> str:
    return f"{PAPER['stated_mean'][claim]:.2f}"


_PL, _RU, _NG = PAPER["vs_parallel_gap"], PAPER["vs_runner_up_gap"], "noise_growth_gap"
TABLE_INFO = {
    "table2": ("Table 2 · RIM vs parallel LSTMs",
               f"Paper: RIM has a lower test error than parallel LSTMs on all four sets; gaps {_PL['mnist']:g} (MNIST), "
               f"about {_PL['fashion_mnist']:g} (Fashion-MNIST, CIFAR-10) and {_PL['animals10']:g} (Animals-10) points, "
               f"about {_paper_mean('vs_parallel_gap')} on average. Gap = parallel − RIM (positive: RIM better)."),
    "table3": ("Table 3 · RIM vs EntNet, RMC, IndRNN",
               f"Paper: RIM has the lowest test error on all four sets, ahead of the runner-up by {_RU['mnist']:.2f} "
               f"(MNIST, runner-up {method_title(PAPER['runner_up']['mnist']).split(' (')[0]}), "
               f"{_paper_gaps('vs_runner_up_gap').split(', ', 1)[1]} points; about {_paper_mean('vs_runner_up_gap')} "
               "on average. Gap = baseline − RIM. Our runner-up is RMC, the paper's named one, fixed in advance; the "
               "baseline with the lowest mean error, chosen after seeing the data, is named beside it."),
    "table4": ("Table 4 · Gaussian noise (variance 0.01)",
               "Paper: with noise RIM still has the lowest error everywhere, and its error grows less than the "
               f"runner-up's by {_paper_gaps(_NG)} points (about {_paper_mean(_NG)} on average). In brackets: change "
               "from the clean error. Growth gap = other's growth − RIM's growth: against RMC (the runner-up fixed "
               "in advance), against the parallel LSTMs (is RIM more robust than them?) and against the lowest "
               "noisy error (chosen after seeing the data). RIM is lowest under noise when it holds against each."),
    "fluctuation": ("Training-loss fluctuation · parallel LSTMs vs RIM",
                    "Paper: the parallel LSTMs' training loss fluctuates more (no number given). Ours, primary: second "
                    "half of training, sd of the batch loss around its 51-iteration moving average. The relative "
                    "statistic (divided by the average loss level) was chosen after seeing the data and grows "
                    "whenever a method's loss is lower. Gap = parallel − RIM (positive: parallel LSTMs fluctuate more)."),
    "init_study": ("Initialisation study · forget-gate bias 1 (default for every method) vs 0",
                   "Not a claim of the paper: how much of any gap comes from the LSTMs' starting point. Every "
                   "method's LSTMs start with forget bias 1 in the main grid; here RIM and parallel LSTMs are "
                   "also trained with 0. Effect = error at forget bias 0 − at 1."),
    "ablations": ("Ablations · which part of the method carries the effect",
                  "Not in the paper. Each variant removes one part of RIM: random = the 4 active LSTMs drawn at "
                  "random (input-independent); all = every LSTM active; alpha 0 = no communication; k 5/6 = more "
                  "active LSTMs. Gap = variant − RIM (positive: the variant is worse, so the part helps)."),
    "controls": ("Controls of why · RIM the reference",
                 "Not in the paper: {controls}; gap = control − RIM (positive: RIM better), n seeds per cell. "
                 "Equivalence: TOST; the margin is {margin}; equivalent when the equivalence interval (1 − 2 × the "
                 "alpha of its Holm step; in the CSV download) lies within ± the margin. A difference verdict is \"no measurable "
                 "difference\" exactly when its interval contains 0."),
}


# shorter column titles on screen (the frames and CSV keep the full ones; the text above the
# tables says errors are in percent and gaps in percentage points), so the verdicts fit a laptop
SHORT_TITLES = {
    "RIM error (%)": "RIM error", "parallel LSTMs error (%)": "parallel LSTMs error",
    "gap, ours (points) [Holm-step interval]": "gap, ours [interval]", "gap, paper (points)": "gap, paper",
    "floors: chance / majority (%)": "floors: chance / majority",
    "gap to RMC (runner-up fixed in advance), ours (points) [Holm-step interval]": "gap to RMC (fixed) [interval]",
    "verdict: RIM's error grows less than RMC's": "verdict: grows less than RMC's",
    "verdict: RIM lowest under noise": "verdict: lowest",
    "gap (parallel − RIM) [Holm-step interval]": "gap [interval]", "noisy error (%)": "noisy error",
    "verdict: RIM better": "verdict", "effect of forget bias 0 on RIM": "effect of bias 0 on RIM",
    "effect on parallel LSTMs": "on parallel LSTMs", "test error (%)": "test error",
}
LAST_COLUMNS = ("what it is",)  # long explanations: after the numbers (the caption above explains the variants)


def _table_config(df: pd.DataFrame) -> dict:
    cfg = {c: st.column_config.TextColumn(SHORT_TITLES[c]) for c in df.columns if c in SHORT_TITLES}
    if "data set" in df.columns:
        cfg["data set"] = st.column_config.TextColumn("data set", width=110, pinned=True)
    return cfg


def _column_order(df: pd.DataFrame) -> list[str]:
    """The data set, then the verdicts (so they fit at 1280 px), the numbers, the long texts last."""
    first = [c for c in df.columns if c == "data set" or c.startswith("verdict")]
    rest = [c for c in df.columns if c not in first and c not in LAST_COLUMNS]
    return first + rest + [c for c in LAST_COLUMNS if c in df.columns]


def _excluded(summary: dict, name: str) -> None:
    """Under a table: the runs it left out (unhealthy), or that it has none."""
    ex = ((summary or {}).get("excluded") or {}).get(name)
    if ex is None:
        return
    if not ex:
        st.caption("Every run of this table is healthy.")
        return
    included = (summary or {}).get("include_unhealthy")
    with st.expander(f"{len(ex)} unhealthy run{'s' if len(ex) != 1 else ''} "
                     + ("included in the means" if included else "left out of the means")):
        st.markdown("\n".join(
            f"- {_ds_title(e.get('dataset'))} · {method_title(e.get('model'))} · seed {e.get('seed')} "
            f"({pct(e.get('test_error'))}): **{e.get('health')}**"
            + (f" — {e['health_reasons']}" if e.get("health_reasons") else "") for e in ex))


URL_STATE = {"cmp_schedule": str, "cmp_curves_ds": str, "cmp_tab": str, "cmp_err_metric": str, "cmp_sm_metric": str,
             "cmp_own_runs": url_list, "pretrained_protocol": str}
TABS = ["Training curves", "Final errors over seeds", "Paper's claims vs ours", "Runs"]


def follow_protocol(available: dict, protocol: str | None) -> None:
    """The experiment follows the sidebar's protocol: at the first view (unless a link names an
    experiment) and whenever the protocol changes, here or on another page."""
    followed = st.session_state.get("_cmp_protocol")
    st.session_state["_cmp_protocol"] = protocol
    if protocol not in available or followed == protocol:
        return
    if followed is not None or "cmp_schedule" not in st.session_state:
        st.session_state["cmp_schedule"] = protocol


def pick_experiment(available: dict, protocol: str | None) -> str:
    """The experiment (a results folder) to show: a radio when there are several; an experiment
    other than the sidebar's protocol is said so beside it."""
    names = list(available)
    if len(names) == 1:
        st.caption(f"Showing the {RESULT_FOLDERS.get(names[0], names[0])}.", help=f"Read from `results/{names[0]}`.")
        return names[0]
    ui.pickers.keep_valid("cmp_schedule", names)
    follow_protocol(available, protocol)
    sched = st.radio("Experiment", names, key="cmp_schedule", horizontal=False,
                     format_func=lambda n: RESULT_FOLDERS.get(n, n),
                     help="The long grid: every method trained with Adam and a cosine decay until most of its "
                          "runs stop improving (a budget per data set, fixed by a rule before its runs); Adam, "
                          "cosine, 4,000 iterations: the short budget, every method with Adam and a cosine decay over "
                          "4,000 iterations, the weights of the best validation accuracy kept; the paper's short "
                          "schedule: 1,000 SGD iterations at learning rate 0.1, under two epochs of MNIST. "
                          "Follows the sidebar's pretrained models; changed here, it is this page's own choice. "
                          "Folders: " + ", ".join(f"`results/{n}`" for n in names) + ".")
    if protocol in available and sched != protocol:
        st.caption(f"This page's own choice: the sidebar's pretrained models are those of the "
                   f"{ui.pickers.PROTOCOL_TITLES.get(protocol, protocol)}; the experiment shown is the "
                   f"{RESULT_FOLDERS.get(sched, sched)}.")
    return sched


def grid_caption(sched: str, out_dir, summary: dict | None, rows: list[dict]) -> None:
    """Seeds, iterations, protocol and how many runs are healthy; or that the summary is missing."""
    if summary is None:
        st.warning(f"`{out_dir}/summary.json` is missing or unreadable, so the final errors and tables are not shown. "
                   f"Rebuild it from the runs with `python -m core.reproduce tables --out {out_dir}`.")
        return
    seeds = sorted({r.get("seed") for r in rows if r.get("seed") is not None})
    its = sorted({r.get("iterations") for r in rows if r.get("iterations")})
    protocols = sorted({r.get("protocol") or ("converged" if sched == "converged" else "paper") for r in rows})
    healthy = len(Cells(rows).use)  # completed and healthy (core.report.health)
    by_set = {}  # a grid of several budgets (the long grid) says which data set had which
    for r in rows:
        if r.get("iterations"):
            by_set.setdefault(r["dataset"], set()).add(r["iterations"])
    budgets = (", ".join(f"{i:,}" for i in its) if len(its) < 2 else "; ".join(
        f"{_ds_title(d)} {', '.join(f'{i:,}' for i in sorted(v))}" for d, v in by_set.items())) or "?"
    st.caption(f"{len(rows)} runs · seeds {', '.join(map(str, seeds)) or 'none'} · "
               f"{budgets} iterations at most · "
               f"{'; '.join(protocol_text(p).rsplit(' (', 1)[0] for p in protocols)}. "
               "Errors are in percent of the test split.")
    st.caption(f"**{healthy} of {len(rows)} runs healthy.** Diverged runs (the loss became non-finite, rose above "
               "10x its first value or ended above it) and collapsed ones (balanced accuracy not above chance + 2 "
               "points, or one class for over 90 % of the test images) are left out of every mean and listed "
               "under each table.")


def _cached_json(path) -> dict | None:
    return read_json(str(path), mtime(path))


def own_runs_picker(sched: str, ds: str, rows: list[dict]) -> list[OwnRunView]:
    """*Add your runs*: the user's finished runs on ``ds`` (every run without sign-in, else the
    signed-in user's: ``pages.ui.auth``), those not offered with the reason; the chosen ones as
    ``core.runs.compare`` turns them into curves and a table row."""
    store, viewer = run_store(), current_viewer()
    if store is None:
        st.caption("The run store cannot be read, so your own runs cannot be added here.")
        return []
    if viewer.sign_in and not viewer.signed_in:
        st.caption("Sign in to add your own runs beside the shipped ones.")
        return []
    try:
        recs = own_runs(store, [r for r in store.list_runs() if viewer.owns(r)], ds, read=_cached_json)
    except Exception as exc:  # a broken store must not take the page down
        st.caption(f"Your runs could not be listed ({type(exc).__name__}: {exc}).")
        return []
    offered = {r.run.run_id: r for r in recs if r.offered}
    names = {rid: option_name(r, run_label(r.run)) for rid, r in offered.items()}
    if offered:
        chosen = ui.pickers.kept_multiselect(
            "cmp_own_runs", "compare_own_runs", list(offered), "Add your runs", format_func=names.get,
            placeholder="Choose runs you trained or uploaded",
            help="Your finished runs on this data set (completed, stopped early and marked so, or uploaded), drawn "
                 "dashed beside the shipped methods and listed in a table under the charts. They never enter the "
                 "shipped methods' means, spreads or verdicts.")
    else:
        chosen = []
        st.caption(f"Add your runs: you have no finished run on {_ds_title(ds)} to draw beside these. Train one on "
                   "the Train page (a demo on the bundled sample takes a minute).")
    hidden = [r for r in recs if not r.offered]
    if hidden:
        more = f"; and {len(hidden) - 5} more (the Train page lists them)" if len(hidden) > 5 else ""
        st.caption("Not offered: " + "; ".join(f"{run_label(r.run)}: {r.reason}" for r in hidden[:5]) + more + ".")
    shipped = shipped_protocol(rows, ds, fallback="converged" if sched == "converged" else "paper")
    return [compare_view(offered[rid], run_label(offered[rid].run), shipped) for rid in chosen if rid in offered]


def own_runs_table(ds: str, views: list[OwnRunView]) -> None:
    """The chosen runs of the user: final test error, images, budget, health, and the warnings."""
    if not views:
        return
    st.subheader("Your runs")
    table = pd.DataFrame([v.row for v in views])
    st.dataframe(table, hide_index=True, width="stretch", column_config={  # 820 px: fits a 1280 px window
        "your run": st.column_config.TextColumn("your run", width=200, pinned=True),
        "test error (%)": st.column_config.NumberColumn("error %", format="%.2f", width=65,
                                                        help="final test error, percent"),
        "tested on": st.column_config.TextColumn(width=130, help="the images of the final test error; demo: the "
                                                                "images of the bundled sample it did not train on"),
        "health": st.column_config.TextColumn(width=75, help="healthy, diverged (the loss blew up) or collapsed "
                                                            "(about one class predicted for everything)"),
        "state": st.column_config.TextColumn(width=150, help="completed, uploaded, or stopped early (the "
                                                            "iterations it ran of its schedule)"),
        "budget": st.column_config.TextColumn(width=200, help="iterations trained, optimiser and learning "
                                                             "rate, learning-rate schedule")})
    st.caption("Test error: one minus the accuracy after the last iteration on every image of the run's test data, "
               "measured by the same code as the shipped figures (which use the whole test split); a demo run is "
               "tested on the images of the bundled sample it did not train on. Your runs are not part of any "
               f"mean, sd, table or verdict on this page. {_ds_title(ds)} only: another data set's runs are offered "
               "when that data set is chosen.")
    for v in views:
        if v.warning:
            st.warning(v.warning)


def curves_tab(sched: str, out_dir, curves: dict, rows: list[dict]) -> None:
    """Training curves of one data set: every method overlaid with the user's chosen runs, then
    one panel per method."""
    if not curves:
        st.info(f"No training curves under `{out_dir}/runs`. " + reproduce_hint(out_dir))
    else:
        ds_list = dataset_order(curves)
        c1, c2, c3 = st.columns([1, 2, 1])
        ui.pickers.keep_valid("cmp_curves_ds", ds_list)
        ds = c1.selectbox("Data set", ds_list, key="cmp_curves_ds", format_func=_ds_title)
        smoothing = c2.slider("Loss smoothing (exponential moving average weight)", 0.0, 0.99, 0.6, 0.01,
                              key="cmp_smoothing", help="0 = raw per-iteration loss; 0.9 averages roughly the last "
                                                        "10 iterations. Applies to the loss and batch accuracy.")
        log_y = c3.toggle("Log scale for loss", value=True, key="cmp_logy",
                          help="Diverging runs reach huge losses; a log axis keeps the others readable.")
        views = own_runs_picker(sched, ds, rows)
        per_ds = curves.get(ds, {})
        n_runs = len(per_ds.get("loss", []))
        st.caption(f"{_ds_title(ds)}: {n_runs} runs. Thin lines are seeds, bold lines their mean"
                   + ("; dashed lines are your runs, each on its own." if views else "."))

        st.subheader("Overlaid")
        # with runs of the user's the charts take the full width: the legend names every run in full
        o1, o2 = (st.container(), st.container()) if views else st.columns(2)
        fig_loss = curves_overlay(per_ds.get("loss", []), "loss", smoothing=smoothing, log_y=log_y,
                                  title=f"{_ds_title(ds)}: training loss" + (f" (EMA {smoothing:g})" if smoothing else ""),
                                  own=[v.curves["loss"] for v in views if "loss" in v.curves])
        fig_acc = curves_overlay(per_ds.get("test_acc", []), "test_acc",
                                 title=f"{_ds_title(ds)}: periodic test accuracy",
                                 own=[v.curves["test_acc"] for v in views if "test_acc" in v.curves])
        with o1:
            st.plotly_chart(fig_loss, width="stretch", key="cmp_fig_loss")
            figure_downloads(fig_loss, f"{sched}_{ds}_loss_overlay", key="cmp_dl_loss")
        with o2:
            st.plotly_chart(fig_acc, width="stretch", key="cmp_fig_acc")
            figure_downloads(fig_acc, f"{sched}_{ds}_test_accuracy_overlay", key="cmp_dl_acc")

        st.caption("Training loss: cross-entropy (nats) on each training batch of 100 images. Test accuracy: measured "
                   "every few iterations on a fixed subset of the test split (the final errors use the whole split).")
        own_runs_table(ds, views)

        st.subheader("One panel per method")
        ui.pickers.keep_valid("cmp_sm_metric", list(SMALL_MULTIPLE_METRICS))
        metric = st.radio("Quantity", list(SMALL_MULTIPLE_METRICS), horizontal=True, key="cmp_sm_metric",
                          format_func=SMALL_MULTIPLE_METRICS.get)
        fig_sm = curves_small_multiples(per_ds.get(metric, []), metric,
                                        smoothing=smoothing if metric != "test_acc" else 0.0,
                                        log_y=log_y and metric == "loss",
                                        title=f"{_ds_title(ds)}: {SMALL_MULTIPLE_METRICS[metric]} per method")
        st.plotly_chart(fig_sm, width="stretch", key="cmp_fig_sm")
        figure_downloads(fig_sm, f"{sched}_{ds}_{metric}_per_method", key="cmp_dl_sm")
        st.caption("The paper notes that the parallel LSTMs' training loss fluctuates more than RIM's: compare the "
                   "raw loss (smoothing 0) of the two panels.")


def errors_tab(sched: str, out_dir, rows: list[dict]) -> None:
    """Final errors over seeds: the bar chart, then mean ± sd per data set and method."""
    if not rows:
        st.info("No finished runs in the summary. " + reproduce_hint(out_dir))
    else:
        ui.pickers.keep_valid("cmp_err_metric", list(ERROR_METRICS))
        metric = st.radio("Test", list(ERROR_METRICS), horizontal=True, key="cmp_err_metric",
                          format_func=lambda k: "clean test images" if k == "test_error" else "Gaussian noise, variance 0.01")
        base = set(method_order())
        fig_err = error_bar_figure([r for r in rows if r.get("model") in base], metric)
        st.plotly_chart(fig_err, width="stretch", key="cmp_fig_err")
        figure_downloads(fig_err, f"{sched}_final_{metric}", key="cmp_dl_err")
        spread = spread_frame(rows, method_order())
        st.dataframe(spread, hide_index=True, width="stretch", placeholder="–", column_config={
            "data set": st.column_config.TextColumn("data set", width=110, pinned=True),
            "method": st.column_config.TextColumn("method", width=150, pinned=True),
            "healthy": st.column_config.TextColumn("healthy", width=110)}
            | {c: st.column_config.NumberColumn(format="%.2f") for c in spread.columns if c.endswith("(%)")})
        st.download_button("⬇ Mean ± sd as CSV", spread.to_csv(index=False).encode(), file_name=f"{sched}_errors_mean_sd.csv",
                           mime="text/csv", key="cmp_csv_spread")
        st.caption("sd = sample standard deviation over the healthy training seeds; unhealthy runs are drawn as "
                   "crosses, counted, and left out of the mean. Dashed lines: the error of guessing at random "
                   "(chance) and of always answering the test set's biggest class (majority class)."
                   + (" Ablation and initialisation variants are compared in their tables under *Paper's claims vs "
                      "ours*." if any(r.get("model") not in base for r in rows) else ""))


def claims_table(sched: str, out_dir) -> None:
    """The paper's claims vs ours, one row per claim (the main grids only)."""
    claim_rows = read_claims(out_dir.parent) if sched in ("converged", "paper") else []
    if claim_rows:
        st.subheader("The paper's claims vs ours")
        # the same table as README and REPRODUCTION.md (core.report.claims.glance_frame)
        st.dataframe(glance_frame(claim_rows, out_dir.parent), hide_index=True, width="stretch",
                     column_config={"claim": st.column_config.TextColumn("claim", width="medium", pinned=True)})
        st.caption(GLANCE_LEGEND.replace(" Per set, with p values: the tables of REPRODUCTION.md.", "") + " "
                   + floors_line(DATASET_ORDER))
        with st.expander("In detail: per-set verdicts, intervals and p values"):
            st.dataframe(claims_frame(claim_rows), hide_index=True, width="stretch",
                         column_config={"claim": st.column_config.TextColumn("claim", width="medium", pinned=True),
                                        "verdict": st.column_config.TextColumn("verdict", width="small", pinned=True)})
            st.caption(CLAIMS_NOTE)
        st.download_button("⬇ Claims as CSV", display_csv(claims_frame(claim_rows)), file_name="claims.csv",
                           mime="text/csv", key="cmp_csv_claims")
    if sched == "converged":
        budget_check(out_dir.parent)
        budget_verdicts(out_dir.parent)
    elif sched == LONG_GRID:
        st.subheader("The paper's claims by training budget")
        st.caption("Each verdict of Tables 2-3 at 4,000 iterations beside the long grid's (its tables follow). "
                   "The claims table with one row per claim sets the 4,000-iteration grid beside the paper "
                   "protocol: pick \"Adam, cosine, 4,000 iterations\" above.")
        budget_verdicts(out_dir.parent, expanded=True)


def budget_check(results) -> None:
    """Whether the verdicts of Tables 2-3 stay with three times the budget (``results/budget``)."""
    rows = read_check(results)
    if not rows:
        return
    with st.expander("Are 4,000 iterations enough? The verdicts with three times the budget (12,000 iterations)"):
        st.dataframe(check_frame(rows), hide_index=True, width="stretch",
                     column_config={"comparison": st.column_config.TextColumn("comparison", width="medium")})
        st.caption(f"{CHECK_NOTE} {check_sentence(rows)} Every seed set, and each run beside its seed's "
                   f"4,000-iteration run: `results/budget/tables.md`. {floors_line(BUDGET_SETS)}")


def budget_verdicts(results, expanded: bool = False) -> None:
    """Each verdict of Tables 2-3 at every Adam budget with runs (the answer's numbers, results/gaps.csv)."""
    vb = verdict_by_budget(_answer(str(results), mtime(results / "answer.md") + mtime(results / "gaps.csv"))[1])
    if vb.empty:
        return
    with st.expander("Verdicts by training budget: 4,000 iterations and longer", expanded=expanded):
        st.dataframe(vb, hide_index=True, width="stretch")
        st.caption(f"{BUDGET_NOTE} {floors_line(DATASET_ORDER)}")


FAMILY_WHAT = {"controls": "difference and equivalence tests", "ablations": "Welch tests"}  # family_note's words


def reproduction_tables_view(sched: str, summary: dict) -> None:
    """The paper's Tables 2-4 and our further tables, each with its caption, CSV and excluded runs."""
    frames = reproduction_tables(summary)
    raw = summary.get("tables") or {}
    st.markdown("Errors in percent, mean ± sd over the healthy seeds (each cell says how many of its runs are "
                "healthy); gaps in percentage points. **p raw / Holm**: each table is one family of tests, "
                "Holm-Bonferroni adjusted. " + INTERVAL_NOTE + " The unadjusted and the seed-paired 95 % "
                "intervals stand beside it, labelled; they decide nothing. **Verdict**: ✅ holds, ❌ does not "
                "hold, ❔ cannot tell at this number of seeds (*< 2 seeds*: no test yet). **Floors**: the error "
                "of guessing at random / of always answering the test set's biggest class.")
    controls, note = raw.get("controls") or [], training_note(summary.get("runs") or [])
    for name, (title, claim) in TABLE_INFO.items():
        st.subheader(title)
        st.caption(claim.format(margin=controls_margin_rule(controls), controls=controls_named(controls) or "none yet")
                   if name == "controls" else claim)
        if name in ("controls", "ablations") and note:
            st.caption(note)
        if name in ("controls", "ablations") and (family := pending_note(raw.get(name) or [], FAMILY_WHAT[name])):
            st.caption(f"{family} {counted_in_only(raw.get(name) or [], name)}")
        df = frames[name]
        if df.empty:
            st.info("Not enough runs for this table yet (it needs RIM and the compared methods on a data set).")
            continue
        st.dataframe(df, hide_index=True, width="stretch", column_order=_column_order(df),
                     column_config=_table_config(df))
        st.download_button(f"⬇ {name} as CSV (all numbers)", display_csv(pd.DataFrame(raw.get(name) or [])),
                           file_name=f"{sched}_{name}.csv", mime="text/csv", key=f"cmp_csv_{name}")
        _excluded(summary, name)


def handwriting_view(sched: str, out_dir) -> None:
    """Beyond the paper: how the grid's MNIST models read other people's handwriting."""
    handwriting = ui.cache.load_handwriting(out_dir)
    if handwriting is not None:
        st.subheader("Beyond the paper: other people's handwriting")
        st.caption("Does the method generalise better to other people's handwriting? Every seed of the MNIST "
                   "models of this grid reads two real collections from outside MNIST (Semeion, UCI optdigits; "
                   "never trained on, the upload path tuned on their even-indexed half only) through the "
                   "Mechanisms upload path; accuracy on the odd half, mean ± sd over seeds; RIM minus each "
                   "method with its Welch interval at the level of the Holm step that decides it (each set one "
                   "family), the unadjusted 95 % interval beside it; verdict: ✅ RIM reads the set "
                   "better, ❌ the other method does, ❔ cannot tell. Chance is 10 %. Seeds whose grid weights "
                   "were not kept (only each cell's shipped median is) were trained again from the grid's settings "
                   "(docs/handwriting.md says where and how close). "
                   "Robustness → *Other handwriting* shows the misread digits.")
        try:
            table = handwriting_table(handwriting, {k: v.title.split(' (')[0] for k, v in HANDWRITING_SETS.items()})
        except ValueError as exc:
            st.warning(f"`{out_dir}/handwriting.csv` is {exc}.")
        else:
            st.dataframe(table, hide_index=True, width="stretch")
        st.download_button("⬇ Other handwriting as CSV (all numbers)", handwriting.to_csv(index=False).encode(),
                           file_name=f"{sched}_handwriting.csv", mime="text/csv", key="cmp_csv_handwriting")


def tables_tab(sched: str, out_dir, summary: dict | None, rows: list[dict]) -> None:
    """The paper's claims vs ours: the claims, the tables, other handwriting."""
    if summary is None:
        st.info(f"No summary to show. Rebuild it with `python -m core.reproduce tables --out {out_dir}`.")
        return
    claims_table(sched, out_dir)
    reproduction_tables_view(sched, summary)
    if any(r.get("dataset") == "animals10" for r in rows):
        st.caption("Animals-10 here is a small, unbalanced subset: its numbers are not comparable with the paper's.")
    handwriting_view(sched, out_dir)


def runs_tab(sched: str, out_dir, summary: dict | None) -> None:
    """Every run of the grid, one row each, and its CSV."""
    df_runs = runs_frame(summary or {})
    if df_runs.empty:
        st.info("No runs recorded. " + reproduce_hint(out_dir))
    else:
        st.dataframe(df_runs, hide_index=True, width="stretch", column_config={
            c: st.column_config.NumberColumn(format="%.2f") for c in ("test error (%)", "noisy test error (%)")}
            | {"parameters": st.column_config.NumberColumn(format="localized"),
               "training time (s)": st.column_config.NumberColumn(format="%.0f"),
               "loss fluctuation": st.column_config.NumberColumn(format="%.3f"),
               "loss fluctuation (relative)": st.column_config.NumberColumn(format="%.3f"),
               "data set": st.column_config.TextColumn("data set", width=110, pinned=True),
               "model or variant": st.column_config.TextColumn("model or variant", pinned=True)})
        st.download_button("⬇ Runs as CSV", df_runs.to_csv(index=False).encode(), file_name=f"{sched}_runs.csv",
                           mime="text/csv", key="cmp_csv_runs")


@st.cache_data(show_spinner=False)
def _answer(root: str, stamp: float) -> tuple[str, pd.DataFrame]:
    return read_answer(root), read_gap_rows(root)


@st.cache_data(show_spinner=False)
def _note(root: str, stamp: float) -> str:
    return read_note(root)


def answer_view() -> None:
    """The answer in plain words and RIM's gap to each method (the same text and numbers as README)."""
    root = paths.results_dir()
    text, gaps = _answer(str(root), mtime(root / "answer.md") + mtime(root / "gaps.csv"))
    st.markdown(f"**The answer.** {text}")
    if note := _note(str(root), mtime(root / "answer_note.md")):
        st.caption(note)
    if changed := stale_sources(root):  # tables regenerated after the answer: the two would disagree unsaid
        shown = ", ".join(f"`results/{c}`" for c in changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
        st.warning(f"The answer, its note and the gap figure were written before the tables below last changed "
                   f"({shown}), so their numbers may differ. Regenerate them with `python -m core.reproduce docs`.",
                   icon=":material/sync_problem:")
    box = st.expander("RIM's gap to each method, every data set and protocol", key="cmp_gaps_open", on_change="rerun")
    if not box.open:  # drawn only while open: every other run of the page skips the figure
        return
    with box:
        st.plotly_chart(gaps_figure(gaps), width="stretch", key="cmp_gaps")
        st.caption("Other − RIM in test-error points (right of 0: RIM better); each bar is the interval at the level "
                   "of the Holm step that decides its verdict; an open diamond is the paper's figure. Hover a point "
                   "for its verdict, how it compares with the paper's figure and its seeds.")


ui.urlstate.restore_from_url(URL_STATE)
ui.frontend.charts_early()
st.title("Compare the methods")
protocol = ui.pickers.sidebar_protocol()
answer_view()
available = result_folders()
if not available:
    st.info("No reproduction results yet: this page reads `results/paper/summary.json` and the runs beside it. "
            + reproduce_hint("results/paper"))
    st.stop()
sched = pick_experiment(available, protocol)
out_dir = available[sched]
summary = load_summary(out_dir)
rows = (summary or {}).get("runs") or []
grid_caption(sched, out_dir, summary, rows)
# only the open tab runs (the curves of every seed, the claims table from every run are seconds each)
ui.pickers.tab_views("cmp_tab", dict(zip(TABS, (
    lambda: curves_tab(sched, out_dir, load_curves(out_dir), rows),
    lambda: errors_tab(sched, out_dir, rows),
    lambda: tables_tab(sched, out_dir, summary, rows),
    lambda: runs_tab(sched, out_dir, summary)), strict=True)))
ui.urlstate.sync_url(URL_STATE)
