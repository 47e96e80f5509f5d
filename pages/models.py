"""Models: every pretrained model and the user's own runs; inspect, download, upload, delete."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from core.catalog import ModelEntry, error_floors, featured_entry, health_warning, same_weights
from core.data.datasets import DATASETS
from core.errors import WeightsError
from core.report.fmt import PROTOCOL_SHORT, method_title, params, pct, pct_value, protocol_title, short_method_title
from core.report.fmt import dataset_title as _ds_title
from core.report.health import HEALTHY, health_of, summary_text
from core.report.plots.training import run_curves_figure
from core.runs.compare import history_from_metrics
from core.runs.progress import kept_weights
from core.runs.schema import RunInfo
from pages.ui.auth import Viewer, current_viewer, sign_in_prompt
from pages.ui.cache import entry_metadata, model_entries, run_store
from pages.ui.export import figure_downloads
from pages.ui.frontend import charts_early
from pages.ui.messages import show_error
from pages.ui.pickers import sidebar_protocol
from pages.ui.upload import MAX_UPLOAD_MB, check_upload
from pages.ui.urlstate import session_owner

ALL = "All data sets"
TABLE_WIDTHS = {"data set": 110, "model": 110, "protocol": 108, "source": 95, "parameters": 64, "seed": 40,
                "clean error (%)": 60, "noisy error (%)": 60, "iterations": 70, "state": 95}  # px, 812 in all


SOURCES = ["pretrained", "trained", "uploaded"]
STOPPED_EARLY = "stopped early"
AS_STATED = "as its metadata says"
INTRO = ("The shipped pretrained models and the runs trained on the Train page or uploaded here, in one table. "
         "Errors are in percent on the test data each run was evaluated on (its data source is under "
         "*Training setup and data*); noisy = Gaussian noise of variance 0.01 on the test images. Runs that are "
         "still training or failed are on the Train page; a run stopped before the end of its schedule is listed "
         f"here as *{STOPPED_EARLY}*, with the iterations it ran; a *demo* run trained on 800 images of the "
         "bundled sample and was tested on the other 200. Health: *diverged* = the loss became "
         "non-finite, exceeded 10x its first value or ended above it; *collapsed* = balanced accuracy not above "
         "chance + 2 points, or one class predicted for over 90 % of the test images.")


def _label(entry: ModelEntry) -> str:
    return entry.display_with_dataset  # the one name of a model (core.report.fmt.model_label), data set first


def run_info(store, entry: ModelEntry) -> RunInfo | None:
    """The run store's record of a run entry (owner, status), or None."""
    if store is None or not entry.run_id:
        return None
    try:
        return store.get(entry.run_id)
    except Exception:
        return None


def owner_label(entry: ModelEntry, info: RunInfo | None, viewer: Viewer) -> str:
    """Whose model it is: "" for a shipped one, "you" or "another user"."""
    if entry.source == "pretrained":
        return ""
    return "you" if info is not None and viewer.owns(info) else "another user"


def _source(entry: ModelEntry) -> str:
    """Where a model comes from, a demo run said so (trained on 800 images of the bundled sample)."""
    return f"{entry.source} demo" if entry.demo else entry.source


def history_from_store(store, entry: ModelEntry) -> dict:
    """Curves of a run whose metadata JSON has none, from the store's live metrics file."""
    try:
        return history_from_metrics(store.read_metrics(entry.run_id))
    except Exception:
        return {}


def _health(meta: dict) -> dict:
    """The run's health (``core.report.health``): as stored in its JSON, else classified from it now.
    A run still training has no final confusion matrix and is judged on what it has."""
    try:
        return health_of(meta)
    except Exception:  # an upload's odd metadata must not take the table down
        return {"health": "not known", "health_reasons": [], "health_checked": [], "health_measures": {}}


def table_row(entry: ModelEntry, meta: dict | None, owner: str = "") -> dict:
    """One table row: metadata first (the full record), catalog metrics as fallback; ``owner``:
    :func:`owner_label`."""
    metrics = dict(entry.metrics or {})
    if meta and isinstance(meta.get("metrics"), dict):
        metrics = {**metrics, **{k: v for k, v in meta["metrics"].items() if v is not None}}
    created = entry.created or (meta or {}).get("created") or ""
    budget = (meta or {}).get("train_config", {}).get("iterations") if meta else metrics.get("iterations")
    status = str((meta or {}).get("status") or "")
    done = ((meta or {}).get("history") or {}).get("iteration") or []
    # the iterations trained, not the budget: early stopping and a stop end a run before its budget
    its = metrics.get("iterations_done") or (done[-1] if done else None) or budget
    health = _health(meta)["health"] if meta else ""
    return {
        "data set": _ds_title(entry.dataset),
        "model": method_title(entry.model),
        "protocol": protocol_title(entry.protocol) or "n/a",
        "source": _source(entry),
        "owner": owner,
        "parameters": metrics.get("parameters"),
        "seed": entry.seed,
        "clean error (%)": pct_value(metrics.get("test_error")),
        "noisy error (%)": pct_value(metrics.get("noisy_test_error")),
        "iterations": its if its is None else int(its),
        "budget": budget if budget is None else int(budget),
        "kept iteration": metrics.get("best_iteration"),
        "status": status,
        "health": health,
        # the table's one word on a run: a stopped run is not judged as if it had finished
        "state": STOPPED_EARLY if status == "stopped" else health,
        "date": str(created)[:16].replace("T", " "),
        "key": entry.key,
    }


def follow_protocol(entries: list[ModelEntry], protocol: str | None) -> None:
    """When the sidebar's protocol changes (here or on another page), a shipped model open under
    *Inspect a model* becomes its twin of the new protocol (same data set and method)."""
    followed = st.session_state.get("_models_protocol")
    st.session_state["_models_protocol"] = protocol
    by_key = {e.key: e for e in entries}
    now = by_key.get(st.session_state.get("models_pick"))
    if protocol is None or followed in (None, protocol) or now is None or now.source != "pretrained":
        return
    twin = next((e for e in entries if e.source == "pretrained" and e.protocol == protocol
                 and (e.dataset, e.model) == (now.dataset, now.model)), None)
    if twin is not None:
        st.session_state["models_pick_next"] = twin.key


def choose_opened(entries: list[ModelEntry], infos: dict, viewer: Viewer, protocol: str | None) -> None:
    """What to open: a run sent here by the Train page (or ?model= in the URL), else the user's
    latest run, else the featured model of the sidebar's ``protocol``."""
    by_key_all = {e.key: e for e in entries}
    wanted = st.session_state.pop("models_open", None) or st.query_params.get("model")
    if wanted in by_key_all and st.session_state.get("models_opened") != wanted:
        target = by_key_all[wanted]
        st.session_state["models_opened"] = wanted
        st.session_state["models_ds"] = target.dataset
        st.session_state["models_src"] = sorted({*st.session_state.get("models_src", SOURCES), target.source},
                                                key=SOURCES.index)
        st.session_state["models_pick_next"] = wanted
    elif "models_pick" not in st.session_state and "models_pick_next" not in st.session_state and entries:
        own = [e for e in entries if e.source != "pretrained" and infos.get(e.key) is not None
               and viewer.owns(infos[e.key])]
        first = own[0] if own else (featured_entry(entries, protocol) if protocol else featured_entry(entries))
        st.session_state["models_pick_next"] = first.key


def models_table(entries: list[ModelEntry], infos: dict, viewer: Viewer) -> tuple[list[ModelEntry], dict]:
    """The filters and the table of every model they let through, its CSV; returns the models
    shown and their metadata by key."""
    f1, f2 = st.columns([1, 2])
    ds_filter = f1.selectbox("Data set", [ALL] + list(DATASETS), key="models_ds",
                             format_func=lambda d: d if d == ALL else _ds_title(d))
    src_filter = f2.multiselect("Source", SOURCES, default=SOURCES, key="models_src")
    shown = [e for e in entries if (ds_filter == ALL or e.dataset == ds_filter) and e.source in src_filter]
    metas = {e.key: entry_metadata(e) for e in shown}
    table = pd.DataFrame([table_row(e, metas[e.key], owner_label(e, infos.get(e.key), viewer)) for e in shown])
    if not entries:
        st.info("No models yet. Pretrained models appear once `pretrained/manifest.json` exists "
                "(`python -m core.reproduce run --seeds 0` then `python -m core.reproduce export-pretrained --seed 0`); "
                "you can also train one on the Train page or upload a model below.")
    elif table.empty:
        st.info("No model matches these filters.")
    else:
        _table_view(table, shown)
    return shown, metas


def _table_view(table: pd.DataFrame, shown: list[ModelEntry]) -> None:
    """The table as shown: short model and protocol names, the columns that have a value, their widths."""
    # the columns shown and their widths: together at most the 820 px a 1280 px window leaves the page,
    # so nothing is cut or scrolled sideways; owner, date and the separate status and health are in the CSV,
    # the full protocol names in the CSV and under *Inspect a model*
    view = table.assign(model=[short_method_title(e.model) for e in shown],
                        protocol=[PROTOCOL_SHORT.get(e.protocol, p) for e, p in zip(shown, table["protocol"], strict=True)])
    filled = [c for c in TABLE_WIDTHS if view[c].map(lambda v: v not in (None, "") and v == v).any()]
    st.dataframe(
        view[filled], hide_index=True, width="stretch", height=min(36 * (len(table) + 1) + 3, 760),
        column_config={
            "data set": st.column_config.TextColumn("data set", width=TABLE_WIDTHS["data set"], pinned=True),
            "model": st.column_config.TextColumn("model", width=TABLE_WIDTHS["model"], pinned=True),
            "protocol": st.column_config.TextColumn(
                "protocol", width=TABLE_WIDTHS["protocol"], help="How it was trained: long grid (Adam with a cosine "
                "schedule over each data set's own budget), Adam 4k (Adam with a cosine schedule for 4,000 iterations, "
                "the weights of the best validation accuracy kept; Adam 12k, 24k: 12,000, 24,000 iterations), paper "
                "protocol (1,000 SGD steps), or own settings; the full name of the inspected model's protocol is "
                "under *Inspect a model*"),
            "source": st.column_config.TextColumn(
                "source", width=TABLE_WIDTHS["source"], help="pretrained (shipped), trained here or uploaded; "
                "demo: trained on 800 images of the bundled sample and tested on the other 200, not comparable "
                "with full-data runs"),
            "parameters": st.column_config.NumberColumn("params", format="localized", width=TABLE_WIDTHS["parameters"],
                                                        help="trainable parameters"),
            "seed": st.column_config.NumberColumn("seed", width=TABLE_WIDTHS["seed"]),
            "clean error (%)": st.column_config.NumberColumn("error %", format="%.2f", width=TABLE_WIDTHS["clean error (%)"],
                                                             help="clean test error, percent"),
            "noisy error (%)": st.column_config.NumberColumn("noisy %", format="%.2f", width=TABLE_WIDTHS["noisy error (%)"],
                                                             help="test error under Gaussian noise of variance 0.01, percent"),
            "iterations": st.column_config.NumberColumn("iterations", width=TABLE_WIDTHS["iterations"],
                                                        help="iterations trained: a run stops before its budget "
                                                             "when its validation accuracy stops improving or when "
                                                             "it is stopped (budget and kept iteration: the CSV, "
                                                             "Inspect a model)"),
            "state": st.column_config.TextColumn(
                "health", width=TABLE_WIDTHS["state"],
                help=f"healthy, diverged (the loss blew up) or collapsed (about one class predicted for everything; "
                     f"core.report.health); {STOPPED_EARLY}: stopped before the end of its schedule, not judged"),
        }, column_order=filled)
    if STOPPED_EARLY not in set(view["state"]):
        st.caption("Every run in the table completed its training.")
    st.download_button("⬇ Table as CSV", table.drop(columns=["key", "state"]).to_csv(index=False).encode(),
                       file_name="rimscope_models.csv", mime="text/csv", key="models_csv")


def pick_model(shown: list[ModelEntry]) -> ModelEntry:
    """The model picker of *Inspect a model* (a pick set by an import or a delete comes first)."""
    by_key = {e.key: e for e in shown}
    if "models_pick_next" in st.session_state:  # set by an import or a delete on the previous run
        st.session_state["models_pick"] = st.session_state.pop("models_pick_next")
    if st.session_state.get("models_pick") not in by_key:
        st.session_state.pop("models_pick", None)
    pick = st.selectbox("Model", list(by_key), key="models_pick", format_func=lambda k: _label(by_key[k]))
    return by_key[pick]


def iterations_text(row: dict) -> str:
    """The iterations trained; the budget, where the run ended before it, is in `iterations_help`
    (a metric value as long as "9,500 of 12,000" does not fit a fifth of a narrow page)."""
    its = row["iterations"]
    return "n/a" if its is None else f"{its:,}"


def iterations_help(row: dict) -> str | None:
    its, budget, kept = row["iterations"], row.get("budget"), row.get("kept iteration")
    parts = []
    if its is not None and budget and its < budget:
        parts.append(f"Trained {its:,} of its budget of {budget:,} iterations: "
                     + ("stopped." if row.get("status") == "stopped" else
                        "it stopped early when its validation accuracy stopped improving."))
    if kept:
        parts.append(f"The weights of iteration {int(kept):,} (best validation accuracy) are kept.")
    return " ".join(parts) or None


def key_numbers(entry: ModelEntry, meta: dict) -> None:
    """Errors, size, iterations and seed, the data set's floors beside them."""
    row = table_row(entry, meta)
    c = st.columns(5)
    c[0].metric("Clean test error", pct((meta.get("metrics") or {}).get("test_error")))
    c[1].metric("Noisy test error", pct((meta.get("metrics") or {}).get("noisy_test_error")))
    c[2].metric("Parameters", params(row["parameters"]))
    its_note = iterations_help(row)
    c[3].metric("Iterations trained", iterations_text(row), help=its_note)
    c[4].metric("Seed", entry.seed if entry.seed is not None else "n/a")
    fl = error_floors(entry.dataset, meta.get("metrics") or {})
    if fl["classes"]:  # what an answer that ignores the image would score (core.report.floors)
        on = (f"the {_ds_title(entry.dataset)} test set" if fl["tested_n"] is None
              else f"the {fl['tested_n']:,} {_ds_title(entry.dataset)} images it was tested on")
        floor_text = (f"For comparison: on {on}, guessing at random errs "
                      f"{pct(fl['chance_error'])} and always answering the largest class {pct(fl['majority_error'])}.")
        if fl["unbalanced"]:
            floor_text += (f" Its classes are unbalanced, so the fair figure is the balanced error (the mean of the "
                           f"per-class errors; {pct(fl['chance_error'])} for any answer that ignores the image): "
                           + (f"this model's is **{pct(fl['balanced_error'])}**." if fl["balanced_error"] is not None
                              else "this model's metadata records no per-class results to compute it."))
        st.caption(floor_text)
    if its_note:
        st.caption(its_note)


def warnings_of(entry: ModelEntry, meta: dict) -> None:
    """What to know before trusting the numbers: stopped early, another status, a spike, a demo, its health."""
    if meta.get("status") == "stopped":
        st.warning(f"This run was {STOPPED_EARLY}, after {table_row(entry, meta)['iterations']} of "
                   f"{(meta.get('train_config') or {}).get('iterations', '?')} iterations: its weights are what it "
                   f"had learned by then, and its errors are not those of a finished run. {meta.get('message', '')}")
    elif meta.get("status") not in (None, "completed"):
        st.warning(f"This run's status is {meta.get('status')!r}: {meta.get('message', '')}")
    spike = kept_weights(meta.get("metrics") or {}, meta.get("evals") or {})["warning"]
    if spike:  # the final evaluation far below the best one seen during training (core.runs.progress)
        st.warning(spike, icon="📉")
    if entry.demo:
        st.info("A **demo** run: trained on 800 images of the bundled sample and tested on the other 200; its "
                "errors are not comparable with runs on the full data set. Pages that measure across a test set "
                "use only the images it did not train on.")
    h = _health(meta)
    if h["health"] == HEALTHY:
        st.caption(f"Health: {summary_text(h)} (it neither diverged nor collapsed; `core.report.health`).")
    else:
        st.warning(health_warning(h))


def curves_and_settings(store, entry: ModelEntry, meta: dict) -> None:
    """The training curves (from the run store while the JSON has none), the model config and the
    training setup."""
    if store is not None and entry.run_id and not meta.get("history"):
        meta = {**meta, **history_from_store(store, entry)}
    fig = run_curves_figure(meta, title=entry.display_with_dataset)
    st.plotly_chart(fig, width="stretch", key="models_curves")
    figure_downloads(fig, f"curves_{entry.dataset}_{entry.model}", key="models_curves_dl")
    st.caption("Loss and batch accuracy are per training iteration (one optimiser step, SGD or Adam, on a batch of images); test accuracy "
               "is measured every few iterations on a fixed subset of the test split.")
    left, right = st.columns(2)
    with left:
        st.markdown("**Model config**")
        st.json(meta.get("config") or {}, expanded=False)  # setting names as in the code: opened on request
    with right:
        st.markdown("**Training setup and data**")
        st.json({"train_config": meta.get("train_config"), "data_source": meta.get("data_source"),
                 "code_version": meta.get("code_version"), "torch_version": meta.get("torch_version")},
                expanded=False)


def downloads(entry: ModelEntry) -> None:
    """The two files of the model, straight from disk."""
    w_path, m_path = Path(entry.stem).with_suffix(".safetensors"), Path(entry.stem).with_suffix(".json")
    base = f"{entry.dataset}_{entry.model}" + (f"_s{entry.seed}" if entry.seed is not None else "")
    d1 = d2 = st.container(horizontal=True)
    try:
        d1.download_button("⬇ Weights (.safetensors)", w_path.read_bytes(), file_name=f"{base}.safetensors",
                           mime="application/octet-stream", key="models_dl_w")
        d2.download_button("⬇ Metadata (.json)", m_path.read_bytes(), file_name=f"{base}.json",
                           mime="application/json", key="models_dl_m")
    except OSError as exc:
        st.error(f"The model files of {entry.display} cannot be read ({exc.strerror or exc}).")


def delete_section(store, viewer: Viewer, entry: ModelEntry, info: RunInfo | None) -> None:
    """Delete: the user's own runs only (pages.ui.auth), after an explicit confirmation."""
    if entry.source == "pretrained":
        st.caption("Pretrained models ship with RIMscope and cannot be deleted here.")
        return
    if not entry.run_id:
        return
    if info is None or not viewer.owns(info):
        st.caption("This run belongs to another user, so it is read-only here.")
        return
    run_id = entry.run_id
    with st.expander("Delete this run"):
        sure = st.checkbox(f"Yes, delete run {run_id} and its files for good", key=f"models_del_ok_{run_id}")
        if st.button("Delete run", type="primary", disabled=not sure, key=f"models_del_{run_id}"):
            if store is None:
                st.error("The run store is not available, so nothing was deleted.")
                return
            try:
                store.delete(run_id, actor=viewer.actor)
            except Exception as exc:
                show_error(exc, f"Could not delete run {run_id}")
            else:
                st.session_state["models_flash"] = f"Run {run_id} was deleted."
                st.session_state["models_pick_next"] = None
                st.rerun()


def inspect(store, viewer: Viewer, shown: list[ModelEntry], metas: dict, infos: dict) -> None:
    """*Inspect a model*: one model's numbers, warnings, curves, settings, files and delete."""
    st.header("Inspect a model")
    entry = pick_model(shown)
    if entry.protocol:
        st.caption(f"Protocol: {protocol_title(entry.protocol)}")
    meta = metas.get(entry.key)
    if meta is None:
        st.error(f"The metadata of {entry.display} ({Path(entry.stem).name}.json) is missing or not valid JSON.")
        return
    key_numbers(entry, meta)
    warnings_of(entry, meta)
    curves_and_settings(store, entry, meta)
    downloads(entry)
    delete_section(store, viewer, entry, infos.get(entry.key))


def upload(store, viewer: Viewer, owner: str, entries: list[ModelEntry]) -> None:
    """*Upload a model*: two files, checked before anything is stored, then imported as a run."""
    st.header("Upload a model")
    st.markdown(
        f"A model is two files saved by RIMscope: the weights as **.safetensors** and the metadata as **.json** "
        f"(both at most {MAX_UPLOAD_MB} MB). They are checked (model, config, every tensor's name, shape and "
        "values) before anything is stored; nothing already stored is changed. **Pickle files such as PyTorch `.pt` "
        "are refused and never opened**, because loading one can run arbitrary code.")
    u1, u2, u3 = st.columns([2, 2, 1.4])
    up_w = u1.file_uploader("Weights (.safetensors)", key="models_up_w", max_upload_size=MAX_UPLOAD_MB)
    up_m = u2.file_uploader("Metadata (.json)", key="models_up_m", max_upload_size=MAX_UPLOAD_MB)
    up_ds = u3.selectbox("Trained on", [AS_STATED] + list(DATASETS), key="models_up_ds",
                         format_func=lambda d: d if d == AS_STATED else _ds_title(d))
    sign_in_prompt("upload models", key="models_sign_in")
    imported = st.session_state.pop("models_import_flash", None)  # said here, beside the button that did it
    if imported:
        st.success(imported)
    if st.button("Check and import", key="models_import", disabled=not (up_w and up_m and viewer.may_start),
                 type="primary") and viewer.may_start:
        import_upload(store, owner, entries, up_w, up_m, None if up_ds == AS_STATED else up_ds)


def import_upload(store, owner: str, entries: list[ModelEntry], up_w, up_m, expected: str | None) -> None:
    """Check the uploaded pair (``expected``: the data set the user says, None: as its metadata says),
    refuse a copy of weights already listed, store it as the owner's run and select it."""
    meta_up = same = None
    try:
        meta_up = check_upload(up_w.getvalue(), up_m.getvalue(), weights_name=up_w.name,
                               meta_name=up_m.name, expected_dataset=expected)
        same = same_weights(up_w.getvalue(), entries)
    except WeightsError as exc:
        st.error(f"Upload refused: {exc}")
    except Exception as exc:
        show_error(exc, "Upload refused")
    if meta_up is None:
        return
    if same is not None:
        st.warning(f"Not imported: these weights are exactly those of **{same.display_with_dataset}**, which is "
                   "already in the table above (pick it under *Inspect a model*). A copy would add nothing.")
        return
    ds_up = expected or meta_up.get("dataset")
    if store is None:
        st.warning(f"The model files are valid ({method_title(str(meta_up.get('model')))} on {_ds_title(ds_up)}), but the run store "
                   "is not available in this installation, so it was not saved.")
        return
    try:
        run_id = store.import_weights(up_w.getvalue(), up_m.getvalue(), ds_up, owner=owner,
                                         label=f"upload {up_w.name}"[:200])
    except WeightsError as exc:
        st.error(f"Upload refused: {exc}")
    except Exception as exc:
        show_error(exc, "Could not store the upload")
    else:
        st.session_state["models_import_flash"] = (
            f"Imported {method_title(str(meta_up.get('model')))} on {_ds_title(ds_up)} as run {run_id}; it is "
            "selected under *Inspect a model* above.")
        st.session_state["models_pick_next"] = f"run:{run_id}"
        st.rerun()


charts_early()
st.title("Models")
st.caption(INTRO)
flash = st.session_state.pop("models_flash", None)
if flash:
    st.success(flash)
entries, problems = model_entries()
for p in problems:
    st.warning(p)
store = run_store()
owner = session_owner()
viewer = current_viewer()
infos = {e.key: run_info(store, e) for e in entries if e.source != "pretrained"}
protocol = sidebar_protocol()
follow_protocol(entries, protocol)
choose_opened(entries, infos, viewer, protocol)
shown, metas = models_table(entries, infos, viewer)
if shown:
    inspect(store, viewer, shown, metas, infos)
upload(store, viewer, owner, entries)
