"""Train: start training runs in the background and watch them live.

The page only queues runs (core.runs.RunStore) and draws what the workers write to disk;
training happens in worker processes, so the page never blocks and runs survive reloads.
"""

from __future__ import annotations

import re

import streamlit as st
from streamlit.errors import StreamlitAPIException

from core.catalog import health_warning, in_models, is_demo, legend_names, run_health, run_label, seconds_per_iteration
from core.data.datasets import DATASETS, how_to_get
from core.data.plan import SAMPLE_TRAIN, DataPlan, no_training_data_text, training_data_plan
from core.errors import ConfigError, DataUnavailableError, RimscopeError
from core.models.registry import DEFAULT_MODEL, config_fields, list_models
from core.models.rim import SELECTIONS
from core.paths import pretrained_dir, runs_root
from core.report import fmt
from core.report.fmt import dataset_title, method_title, short_run_id, source_parts
from core.report.plots.training import has_points, live_runs_figure
from core.runs.progress import kept_weights, progress_text, stop_outcome
from core.runs.schema import RESUMABLE, RunInfo
from core.runs.store import RunStore
from core.training.config import (
    AUGMENTS,
    CLASS_WEIGHTINGS,
    DEVICES,
    OPTIMIZERS,
    PROTOCOLS,
    SCHEDULES,
    TrainConfig,
    configs_from_form,
    parse_seeds,
)
from core.training.lifecycle import as_protocol_asks, protocol_val_images, readable_message, stop_applies
from pages.ui.auth import Viewer, current_viewer, sign_in_prompt
from pages.ui.cache import mtime, read_json
from pages.ui.messages import details, show_error
from pages.ui.pickers import dataset_picker, keep_valid, sidebar_protocol
from pages.ui.urlstate import restore_from_url, session_owner, sync_url, url_bool, url_list

SAMPLE_DATASETS = ("mnist", "fashion_mnist")  # the data sets with a bundled sample
MAX_RUNS_PER_START = 20
SHOWN_OWN_RUNS = 8  # finished runs of the user shown with curves; older ones in a table
REFRESH_S = 2.0  # live view refresh while runs are queued or running (2 cores: keep it light)
STATUS_ICONS = {"queued": "⏳", "running": "🏃", "completed": "✅", "stopped": "⏹️", "diverged": "💥",
                "interrupted": "⚠️", "failed": "❌", "uploaded": "📤"}


def md_escape(text: str) -> str:
    return re.sub(r"([\\`*_{}\[\]()#+\-.!|<>~$])", r"\\\1", text)


@st.cache_data(ttl=60, show_spinner=False, max_entries=64)
def _speed(model: str, dataset: str, n_runs: int, pre_dir: str, manifest_mtime: float):
    """Measured seconds per iteration (reads run and model JSONs: cached, keyed by the run
    count and the pretrained folder)."""
    return seconds_per_iteration(model, dataset)


def models_link(run_id: str) -> None:
    """Open the Models page with this run selected (and its data set in the filter)."""
    if st.button("Open in Models", key=f"open_{run_id}", icon="📦"):
        st.session_state["models_open"] = f"run:{run_id}"
        try:
            st.switch_page("pages/models.py")
        except StreamlitAPIException:  # the page is not registered (e.g. this page run on its own)
            st.caption("Find it on the Models page.")


CARD_HEIGHT = 190  # px: every card the same height, so a change of state never moves the cards below


def run_name(r: RunInfo) -> str:
    """A run's name on its card, in the legend and in messages (``core.catalog.run_label``)."""
    return run_label(r, source="")


def _act(action: str, run_id: str) -> None:
    """A card button's callback: ``action`` on the run the card names, whatever the list looks
    like when the click arrives; the page then says which run it acted on."""
    store = RunStore()
    actor = current_viewer().actor  # the store refuses another user's run, whatever the page showed
    try:
        r = store.get(run_id)
        name = run_name(r) if r is not None else f"run {run_id}"
        if action == "stop" and r is not None and not stop_applies(r.status, r.iteration, r.total):
            # past its last iteration the run no longer polls for a stop: said, not asked for
            msg = (f"{name} has done all its iterations and is in its final evaluation; a stop no longer "
                   "applies, and it completes in a moment." if r.status == "running"
                   else f"{name} had already ended ({r.status}); nothing to stop.")
        elif action == "stop":
            after = store.request_stop(run_id, actor=actor)
            msg = (f"Stopped {name} before it started." if after == "stopped" else
                   f"Stopping {name}: it stops after the current iteration and keeps what it learned."
                   if after == "running" else f"{name} had already ended ({after}); nothing to stop.")
        elif action == "resume":
            store.resume(run_id, actor=actor)
            store.pump()
            msg = f"Resumed {name}: it continues from its last training state."
        else:
            store.delete(run_id, actor=actor)
            msg = f"Deleted {name}."
    except RimscopeError as exc:
        st.session_state["train_flash"] = ("error", str(exc), run_id, action)
    else:
        st.session_state["train_flash"] = ("success", msg, run_id, action, name)


def flash_now(runs: list[RunInfo]) -> tuple[str, str] | None:
    """The last action's message as it stands now: "Stopping X…" becomes what the stop came to
    once the run's worker has ended (``core.runs.progress.stop_outcome``)."""
    flash = st.session_state.get("train_flash")
    if not flash:
        return None
    kind, msg = flash[0], flash[1]
    if len(flash) == 5 and flash[3] == "stop" and kind == "success" and msg.startswith("Stopping "):
        outcome = stop_outcome(next((r for r in runs if r.run_id == flash[2]), None))
        if outcome:  # the name as it was when the stop was asked for
            msg = f"{flash[4]} {outcome}"
            st.session_state["train_flash"] = (kind, msg, flash[2], "stopped", flash[4])
    return kind, msg


def _cached_json(path) -> dict | None:
    return read_json(str(path), mtime(path))


def run_card(store: RunStore, r: RunInfo, editable: bool, metrics: dict | None = None) -> None:
    has_model = in_models(r, store)  # what the Models page lists: it opens there
    with st.container(border=True, height=CARD_HEIGHT, key=f"card_{r.run_id}"):
        head, ctl = st.columns([4, 1])  # the buttons' column fits "Open in Models" at 1280 px
        data = DATASETS[r.dataset].title if r.dataset in DATASETS else r.dataset
        head.markdown(f"{STATUS_ICONS.get(r.status, '')} **{md_escape(run_name(r))}** on {data}"
                      + (f" · {md_escape(r.label)}" if r.label else ""))
        head.progress(r.progress, text=progress_text(r))
        lt = r.latest or {}
        kept = None
        if r.status in ("completed", "stopped") and r.metrics.get("test_accuracy") is not None:
            noisy = (f" · with noise (variance {r.metrics.get('noise_var')}) "
                     f"{fmt.pct(r.metrics.get('noisy_test_accuracy'), 1)}" if "noisy_test_accuracy" in r.metrics else "")
            kept = kept_weights(r.metrics, metrics or {})
            unhealthy = health_warning(run_health(r, store, read=_cached_json)) if has_model else ""
            if unhealthy:  # first, within the card's fixed height: the Models page's verdict
                head.warning(unhealthy, icon="⚠️")
            if kept["warning"]:
                head.warning(kept["warning"], icon="📉")
            head.caption(f"final test accuracy {fmt.pct(r.metrics.get('test_accuracy'), 1)} "
                         f"(n={r.metrics.get('test_n', '?')}){noisy} · last loss {fmt.decimal(lt.get('loss'))}"
                         + (f" · {kept['kept']}" if kept["kept"] and "kept the weights" not in r.message else ""))
        elif lt:
            head.caption(f"loss {fmt.decimal(lt.get('loss'))} · batch accuracy {fmt.pct(lt.get('batch_acc'), 1)} · "
                         f"test accuracy (subset) {fmt.pct(lt.get('test_acc'), 1)}")
        if r.message:
            message = readable_message(r.message)  # a kept-weights note in percent
            if r.status in ("failed", "diverged", "interrupted"):
                head.warning(message)
            else:
                head.caption(message)
        if r.detail:
            with head:
                details(r.detail)
        with ctl:
            # every button's key and callback carry the run id: a click acts on the run this card
            # names, even when the list changed between the render and the click. No tooltips: a
            # button with one is drawn twice (the second a zero-size copy); what a click did is said
            # in the message above the cards
            # Stop while a stop can end the run: not once it is in its final evaluation
            if editable and stop_applies(r.status, r.iteration, r.total) and not r.stop_requested:
                st.button("Stop", key=f"stop_{r.run_id}", on_click=_act, args=("stop", r.run_id))
            if editable and r.status in RESUMABLE:
                st.button("Resume", key=f"resume_{r.run_id}", type="primary", on_click=_act, args=("resume", r.run_id))
            if has_model:  # completed, uploaded or stopped with weights: Models lists it
                models_link(r.run_id)
            if editable and not r.active:
                with st.popover("Delete"):
                    st.caption("Removes the run, its curves and its weights.")
                    st.button("Delete for good", key=f"del_{r.run_id}", on_click=_act, args=("delete", r.run_id))


def card_runs(mine: list[RunInfo]) -> tuple[list[RunInfo], list[RunInfo]]:
    """The user's runs as cards and as the table of older ones.

    Cards are in creation order (oldest first; a new run comes last) and never re-sorted by
    state. They start at the oldest run that is active or among the newest ``SHOWN_OWN_RUNS``;
    that start only moves back within a session until new runs are started, so a run that
    finishes never takes its card away from under the pointer."""
    ordered = sorted(mine, key=lambda r: (r.created_ts, r.run_id))
    first = min([i for i, r in enumerate(ordered) if r.active] + [max(0, len(ordered) - SHOWN_OWN_RUNS)])
    held = st.session_state.get("_train_cards_from")
    if held is not None and held[0] == len(ordered):
        first = min(first, held[1])
    st.session_state["_train_cards_from"] = (len(ordered), first)
    return ordered[first:], ordered[:first]


def show_runs(store: RunStore, runs: list[RunInfo], editable: bool, key: str) -> None:
    metrics = {r.run_id: store.read_metrics(r.run_id) for r in runs}
    for r in runs:
        run_card(store, r, editable, metrics[r.run_id])
    if runs:
        c1, c2 = st.columns(2)
        # every run keeps its line in both charts (all the runs go in, each chart draws those with
        # points); a legend name says the settings in which runs of one name differ
        names = legend_names(runs)
        for col, kind in ((c1, "loss"), (c2, "acc")):
            if any(has_points(metrics[r.run_id], kind) for r in runs):  # no empty chart
                col.plotly_chart(live_runs_figure(runs, metrics, kind, names=names), key=f"{key}_{kind}")


RUNS_TABLE_WIDTHS = {"run": 80, "data set": 110, "model": 140, "seed": 40, "status": 85, "progress": 75,
                     "test accuracy": 80, "created": 130, "label": 80}  # px: 820, a 1280 px window's page


def runs_table(runs: list[RunInfo]) -> None:
    """Runs as a table, by the names the cards use (method and data set titles, the run's short id);
    the label column only when a run has one."""
    rows = [{"run": short_run_id(r.run_id), "data set": dataset_title(r.dataset),
             "model": method_title(r.model) + (" · demo" if is_demo(r) else ""), "seed": r.seed, "status": r.status,
             "progress": f"{r.iteration:,}/{r.total:,}", "test accuracy": r.metrics.get("test_accuracy"),
             "created": str(r.created)[:16].replace("T", " "), "label": r.label} for r in runs]
    cols = [c for c in RUNS_TABLE_WIDTHS if c != "label" or any(r.label for r in runs)]
    st.dataframe(
        rows, hide_index=True, column_order=cols,
        column_config={c: st.column_config.Column(c, width=RUNS_TABLE_WIDTHS.get(c, 120)) for c in cols}
        | {"test accuracy": st.column_config.NumberColumn("test accuracy", format="percent",
                                                          width=RUNS_TABLE_WIDTHS["test accuracy"])})


# ---------------------------------------------------------------------------------------
PROTOCOL_INTROS = {
    "paper": "Train models with the paper's protocol (plain SGD, learning rate 0.1, batch 100, 1,000 iterations).",
    "converged": "Train models with Adam and a cosine learning-rate schedule (up to 4,000 iterations, "
                 "the best weights on a validation split carved from the training images kept, early stopping).",
    "converged-aug": "Train models as above (Adam, cosine, 4,000 iterations), each training image randomly slanted, thickened or "
                     "thinned, elastically distorted and binarised (for models that read other people's handwriting).",
    "converged-12k": "Train models with three times the 4,000-iteration budget: Adam, the same cosine shape over 12,000 "
                     "iterations, the best weights on a validation split kept (the budget check of the shipped tables).",
    "converged-24k": "Train models with six times the 4,000-iteration budget: Adam, the same cosine shape over 24,000 "
                     "iterations, the best weights on a validation split kept.",
}
PROTOCOL_TITLES = {"paper": "Paper (SGD 0.1, 1,000 iterations)",
                   "converged": "Adam, cosine, 4,000 iterations (best of a validation split)",
                   "converged-aug": "Adam, cosine, 4,000 iterations + scan augmentation (slant, stroke width, "
                                    "elastic, binarisation)",
                   "converged-12k": "Adam, cosine, 12,000 iterations (best of a validation split)",
                   "converged-24k": "Adam, cosine, 24,000 iterations (best of a validation split)"}
# form field -> TrainConfig field; a protocol writes its values into these
PROTOCOL_FORM = {"train_iterations": "iterations", "train_batch": "batch_size", "train_optimizer": "optimizer",
                 "train_lr": "lr", "train_momentum": "momentum", "train_schedule": "schedule",
                 "train_val": "val_images", "train_patience": "patience", "train_eval_every": "eval_every",
                 "train_wd": "weight_decay", "train_step_every": "step_every", "train_step_gamma": "step_gamma"}
# every setting of the form lives in the URL: a reload keeps it, a link shares it
URL_STATE = {"train_protocol": str, "train_dataset": str, "train_models": url_list, "train_seeds": str,
             "train_iterations": int, "train_batch": int, "train_optimizer": str, "train_lr": float,
             "train_momentum": float, "train_schedule": str, "train_val": int, "train_patience": int,
             "train_clip_on": url_bool, "train_clip": float, "train_eval_every": int, "train_weighting": str,
             "train_holdout": url_bool, "train_eval_n": int, "train_noise_var": float, "train_noise_draws": int,
             "train_wd": float, "train_step_every": int, "train_step_gamma": float, "train_device": str,
             "train_data_dir": str, "train_forget_bias": float, "train_selection": str, "train_k_active": int,
             "train_alpha": float, "train_demo": url_bool, "train_augment": str}


def apply_protocol(only_missing: bool = False) -> None:
    """Write the chosen protocol's settings into the form (``only_missing``: keep what is set,
    e.g. values restored from the URL)."""
    P = {**TrainConfig().to_dict(), **PROTOCOLS[st.session_state.get("train_protocol", "paper")]}
    values = {key: (float(P[f]) if isinstance(P[f], float) else P[f]) for key, f in PROTOCOL_FORM.items()}
    values.update(train_clip_on=P.get("grad_clip") is not None, train_clip=float(P.get("grad_clip") or 1.0))
    for key, v in values.items():
        if not (only_missing and key in st.session_state):
            st.session_state[key] = v


def restore_form(rim: dict) -> None:
    """The form's values from the URL, each kept only when valid, the rest from the protocol and the
    defaults (set here, not in the widgets, since the URL may set them); ``rim``: RIM's config fields."""
    restore_from_url(URL_STATE)
    for key, options in (("train_protocol", list(PROTOCOLS)), ("train_optimizer", OPTIMIZERS),
                         ("train_schedule", SCHEDULES), ("train_augment", AUGMENTS), ("train_device", DEVICES),
                         ("train_weighting", CLASS_WEIGHTINGS), ("train_selection", SELECTIONS)):
        keep_valid(key, options)
    if "train_models" in st.session_state:
        st.session_state["train_models"] = [m for m in st.session_state["train_models"] if m in list_models()]
    if any(k not in st.session_state for k in PROTOCOL_FORM):
        apply_protocol(only_missing=True)
    for key, default in {"train_models": ["rim", "parallel_lstm"], "train_seeds": "0", "train_holdout": True,
                         "train_eval_n": 1000, "train_noise_var": 0.01, "train_noise_draws": 3, "train_data_dir": "",
                         "train_forget_bias": float(rim["forget_bias"]), "train_k_active": int(rim["k_active"]),
                         "train_alpha": float(rim["alpha"]), "train_augment": "none"}.items():
        st.session_state.setdefault(key, default)
    if not 1 <= int(st.session_state.get("train_k_active", 1)) <= int(rim["num_units"]):
        st.session_state["train_k_active"] = int(rim["k_active"])


def protocol_picker(intro) -> None:
    """The protocol radio, and the page's introduction (in ``intro``, above) that follows it."""
    protocol = st.radio("Protocol", list(PROTOCOLS), horizontal=True, key="train_protocol", on_change=apply_protocol,
                        format_func=lambda p: PROTOCOL_TITLES.get(p, str(p)),
                        help="Sets the settings below to that protocol's; each can still be changed.")
    shipped = sidebar_protocol()
    if shipped is not None:
        st.caption(f"The protocol of your new runs, this page's own choice; the sidebar's pretrained models "
                   f"({PROTOCOL_TITLES.get(shipped, shipped).split(' (')[0]}) are what the other pages show.")
    intro.caption(PROTOCOL_INTROS.get(protocol, "") + " Runs train in background worker processes, one at a time by "
                  "default, and keep going when you close or reload the page; they are kept in your run store. "
                  "Completed runs appear on the Models page, and so do runs stopped early, marked as such.",
                  help=f"The run store is the folder `{runs_root()}` (set `RIMSCOPE_HOME` to move it).")


def training_fields(form: dict) -> None:
    """The three columns of training settings into ``form`` (TrainConfig field names)."""
    c1, c2, c3 = st.columns(3)
    with c1:
        form["iterations"] = st.number_input("Iterations", step=100, key="train_iterations",
                                             help="optimiser steps (paper: 1,000)")
        form["batch_size"] = st.number_input("Batch size", step=10, key="train_batch",
                                             help="images per step (paper: 100)")
        form["optimizer"] = st.selectbox("Optimiser", OPTIMIZERS, key="train_optimizer",
                                         format_func={"sgd": "SGD", "adam": "Adam"}.get)
        form["lr"] = st.number_input("Learning rate", step=0.001, format="%.4f", key="train_lr",
                                     help="paper: SGD with 0.1")
    with c2:
        form["momentum"] = st.number_input("Momentum (SGD)", step=0.1, format="%.2f", key="train_momentum",
                                           disabled=form["optimizer"] != "sgd", help="0 = the paper's plain SGD")
        form["schedule"] = st.selectbox("Learning-rate schedule", SCHEDULES, key="train_schedule",
                                        format_func={"none": "constant", "cosine": "cosine to 0",
                                                     "step": "step decay"}.get)
        form["val_images"] = st.number_input("Validation images (from the training data)",
                                             step=1000, min_value=0, key="train_val",
                                             help="Held out from training; the weights with the best validation "
                                                  "accuracy are kept. Never the test set.")
        form["patience"] = st.number_input("Early stop after evaluations without improvement",
                                           min_value=0, key="train_patience", disabled=not form["val_images"],
                                           help="0 = never stop early")
    with c3:
        form["clip_on"] = st.checkbox("Clip gradients", key="train_clip_on",
                                      help="Limit the global gradient norm (the paper does not clip)")
        form["grad_clip"] = st.number_input("Max gradient norm", step=0.5, key="train_clip",
                                            disabled=not form["clip_on"])
        form["eval_every"] = st.number_input("Test accuracy every (iterations)", step=50, key="train_eval_every")
        form["class_weighting"] = st.selectbox(
            "Class weighting", CLASS_WEIGHTINGS, key="train_weighting",
            help="auto = balanced loss weights when the classes are unbalanced")
        form["augment"] = st.selectbox(
            "Augmentation (training images)", AUGMENTS, key="train_augment",
            format_func=lambda a: {"none": "none", "affine": "small random affine",
                                   "scan": "scan-like (slant, stroke width, elastic, binarisation)"}.get(a, str(a)),
            help="affine: each training image is rotated (up to 10°), shifted (up to 2 px), scaled "
                 "(0.9-1.1) and sheared a little, drawn from the run's own seed. Validation and test "
                 "images are never changed.")
        form["holdout_sample"] = True
        if form["dataset"] == "mnist":
            form["holdout_sample"] = st.checkbox(
                "Hold out the bundled sample", key="train_holdout",
                help="Leave out MNIST training images 0 to 9,999: the bundled 1,000-image sample "
                     "that the per-image pages show was cut from them, so no model has trained on it")


def more_settings(form: dict) -> tuple[str, str]:
    """The "More settings" expander into ``form``; returns the run label and the data folder."""
    with st.expander("More settings"):
        m1, m2, m3 = st.columns(3)
        form["eval_samples"] = m1.number_input("Test subset size (live accuracy)", step=100, key="train_eval_n")
        form["noise_var"] = m2.number_input("Noise variance (final noisy test)", step=0.01, format="%.3f",
                                            key="train_noise_var")
        form["noise_draws"] = m3.number_input("Noise draws", step=1, key="train_noise_draws")
        o1, o2, o3 = st.columns(3)
        form["weight_decay"] = o1.number_input("Weight decay", step=0.0001, format="%.5f", key="train_wd")
        form["step_every"] = o2.number_input("Step decay: every (iterations)", min_value=1,
                                             key="train_step_every", disabled=form["schedule"] != "step")
        form["step_gamma"] = o3.number_input("Step decay: factor", step=0.05, format="%.3f",
                                             key="train_step_gamma", disabled=form["schedule"] != "step")
        d1, _ = st.columns([1, 2])
        form["device"] = d1.selectbox("Device", DEVICES, key="train_device",
                                      help="auto = CUDA when torch sees a GPU on the server, else CPU. "
                                           "Nothing needs a GPU.")
        label = st.text_input("Label (optional)", "", max_chars=100, key="train_label")
        data_dir = st.text_input("Data folder (optional)", key="train_data_dir",
                                 help="A folder with <data set>/train.npz and test.npz; default: $RIMSCOPE_DATA_DIR "
                                      "or ./data, then torchvision").strip()
    return label, data_dir


def model_settings(form: dict, rim: dict) -> None:
    """The "Initialisation and ablations" expander into ``form`` (``FORM_MODEL_SETTINGS``)."""
    with st.expander("Initialisation and ablations"):
        st.caption("Every LSTM forget gate of every method starts from the same bias; the ablations remove one part "
                   "of the paper's method (they apply to RIM only).")
        a1, a2, a3, a4 = st.columns(4)
        form["forget_bias"] = a1.number_input("Forget-gate bias", step=0.5, key="train_forget_bias",
                                              help="RIM, parallel LSTMs and RMC; default 1 for all")
        form["selection"] = a2.selectbox(
            "RIM: who is active", SELECTIONS, key="train_selection",
            format_func={"attention": "attention (paper)", "random": "random k (ablation)",
                         "all": "all (ablation)"}.get,
            help="attention: the input attention picks the k active LSTMs (the paper); random: k "
                 "drawn at random each row (ablation); all: every LSTM active (ablation)")
        form["k_active"] = a3.number_input("RIM: active LSTMs k", min_value=1, max_value=int(rim["num_units"]),
                                           key="train_k_active")
        form["alpha"] = a4.number_input("RIM: communication share alpha", step=0.05, format="%.3f",
                                        key="train_alpha", help="0 = ablation: no communication")


def find_plan(dataset: str, data_dir: str, holdout: bool) -> tuple[DataPlan | None, RimscopeError | None]:
    """Where the training data comes from (``core.data.plan.training_data_plan``, cheap), or why
    there is none: (plan, None) or (None, the error)."""
    try:
        return training_data_plan(dataset, data_dir or None, holdout_sample=holdout), None
    except RimscopeError as exc:
        return None, exc


def n_train_now(dataset: str, found: tuple[DataPlan | None, RimscopeError | None]) -> int | None:
    """The training images a run of the form would have: the plan's, the bundled sample's when
    the demo is chosen (its data missing), None when not known."""
    plan, exc = found
    if plan is not None:
        return plan.n_train
    if isinstance(exc, DataUnavailableError) and st.session_state.get("train_demo") and dataset in SAMPLE_DATASETS:
        return SAMPLE_TRAIN
    return None


def follow_protocol_split(n_train: int | None) -> None:
    """While the validation field holds what the chosen protocol puts there, it follows the data
    set: the protocol's split fitted to its training images (``core.training.lifecycle.
    protocol_val_images``: at most a tenth of them, the rule the shipped runs followed). A value
    the user typed stays. Called before the field is drawn."""
    protocol = st.session_state.get("train_protocol", "paper")
    asked, fitted = protocol_val_images(protocol), protocol_val_images(protocol, n_train)
    now = st.session_state.get("train_val")
    if now == asked or now == st.session_state.get("_train_val_preset"):
        st.session_state["train_val"] = fitted
        st.session_state["_train_val_preset"] = fitted


def data_plan(dataset: str, found: tuple[DataPlan | None, RimscopeError | None]) -> tuple[DataPlan | None, bool, bool]:
    """Where the training data comes from (``found``: :func:`find_plan`), said under the form:
    (plan, data found, demo on the bundled sample); without the data, the ways to get it and,
    where a sample is bundled, the demo."""
    plan, exc = found
    data_ok, demo = True, False
    if plan is not None:
        n_txt = f" · {plan.n_train:,} training images" if plan.n_train is not None else ""
        src, where = source_parts(plan.source)
        st.caption(f"Training data: {src}{n_txt}." + (f" {plan.note[:1].upper()}{plan.note[1:]}." if plan.note else ""),
                   help=f"Read from {where}." if where else None)
    elif isinstance(exc, DataUnavailableError):
        data_ok = False
        say = st.info if st.session_state.get("train_demo") and dataset in SAMPLE_DATASETS else st.error
        # the ways to get the data are listed below, once: the message says only why (its reason);
        # a reason the error does not give apart (a damaged file) is shown as it is
        say(no_training_data_text(DATASETS[dataset].title, exc))
        details(exc.detail)
        st.markdown("Training needs the full training set. Ways to get it:  \n" + "\n".join(
            f"- {w}" for w in how_to_get(dataset)) + "\n- or type a folder under *More settings → Data folder*.")
        if dataset in SAMPLE_DATASETS:
            demo = st.checkbox(f"Train a quick demo on the bundled {DATASETS[dataset].title} sample instead "
                               f"({SAMPLE_TRAIN} images to train, 200 to test; not comparable with full-data runs)",
                               key="train_demo")
            if demo:
                data_ok, plan = True, DataPlan("bundled sample (demo)", SAMPLE_TRAIN, "")
                st.caption(f"Training data: bundled sample (demo) · {SAMPLE_TRAIN} training images, 200 test images "
                           "(held apart, fixed); its numbers are not comparable with full-data runs.")
    else:
        data_ok = False
        show_error(exc, "Training data")
    return plan, data_ok, demo


def run_configs(form: dict, models: list[str], seeds_text: str, plan: DataPlan | None) -> tuple[list, list[str]]:
    """The validated configs of the runs the form asks for (``core.training.config.configs_from_form``)
    and every problem, each shown once."""
    errors: list[str] = []
    configs: list[TrainConfig] = []
    if not models:
        errors.append("Pick at least one model.")
    try:
        seeds = parse_seeds(seeds_text)
    except ConfigError as exc:
        errors.append(str(exc))
        seeds = []
    if len(models) * len(seeds) > MAX_RUNS_PER_START:
        errors.append(f"That is {len(models) * len(seeds)} runs; start at most {MAX_RUNS_PER_START} at once.")
    elif models and seeds:
        n_train = plan.n_train if plan else None
        configs, problems = configs_from_form(form, models, seeds, n_train=n_train)
        errors += problems
        # the protocol's split fitted to the data set is recorded as the protocol asks it
        configs = [as_protocol_asks(c, st.session_state.get("train_protocol"), n_train) for c in configs]
    if errors:
        configs = []
    for e in dict.fromkeys(errors):
        st.error(e)
    return configs, errors


def time_estimate(store: RunStore, configs: list[TrainConfig]) -> None:
    """Each model's estimated training time, from the speeds measured for the shipped weights."""
    by_source: dict[str, list[str]] = {}  # where a speed was measured -> "RIM about 83 s", ...
    for cfg in {c.model: c for c in configs}.values():
        rate = _speed(cfg.model, cfg.dataset, len(store.list_runs()), str(pretrained_dir()),
                      mtime(pretrained_dir() / "manifest.json"))
        if rate is not None:
            by_source.setdefault(rate[1], []).append(
                f"{method_title(cfg.model)} about {fmt.duration(rate[0] * cfg.iterations)}")
    if by_source:
        est = "; ".join(f"{', '.join(times)} (measured on {source})" for source, times in by_source.items())
        st.caption(f"Estimated training time per run: {est}. Periodic and final evaluations come on top; "
                   "runs beyond the worker limit wait in the queue.")


def not_again(store: RunStore, viewer: Viewer, configs: list[TrainConfig], data_dir: str) -> list[TrainConfig]:
    """``configs`` less those the user already has a run of with the same settings (queued, running
    or finished: the same result), which are named, with where they stand, instead of queued twice."""
    mine = [r for r in store.list_runs() if viewer.owns(r)]
    there = {i: store.identical_run(cfg, mine, data_dir or None) for i, cfg in enumerate(configs)}
    same = [r for r in there.values() if r is not None]
    if same:
        st.info("Already in your runs with these settings, so not queued again: "
                + "; ".join(f"{run_name(r)} ({r.status})" for r in same)
                + ". Change a setting (a seed, say) to train another.")
    return [cfg for i, cfg in enumerate(configs) if there[i] is None]


def start_button(store: RunStore, viewer: Viewer, owner: str, configs: list[TrainConfig], blocked: bool, label: str,
                 data_dir: str) -> None:
    """Sign-in, then the Start button: queues ``configs`` for ``owner`` (disabled when ``blocked`` or
    there is none)."""
    n_runs = len(configs)
    sign_in_prompt("start runs", key="train_sign_in")
    if st.button(f"Start {n_runs} run{'s' if n_runs != 1 else ''}" if n_runs else "Start", type="primary",
                 key="train_start", disabled=blocked or not n_runs or not viewer.may_start) and viewer.may_start:
        try:
            ids = [store.submit(cfg, owner=owner, label=label, data_dir=data_dir or None) for cfg in configs]
            store.pump()
            st.success(f"Queued {len(ids)} run{'s' if len(ids) != 1 else ''}; "
                       f"{store.max_concurrent} train{'s' if store.max_concurrent == 1 else ''} at a time.")
            if store.max_concurrent == 0:
                st.warning("The training queue is paused on this server (it allows no worker at the moment); the "
                           "runs wait until workers are allowed again.")
        except RimscopeError as exc:
            show_error(exc, "Could not start")


def set_up(store: RunStore, viewer: Viewer, owner: str) -> None:
    """The Set up section: protocol, data set, models, seeds and every setting, then Start."""
    intro = st.empty()  # follows the protocol chosen below
    st.subheader("Set up")
    rim = config_fields(DEFAULT_MODEL)
    restore_form(rim)
    protocol_picker(intro)
    r1, r2, r3 = st.columns([1, 3, 1])  # the models box gets the width its full names need
    form: dict = {}
    with r1:
        form["dataset"] = dataset_picker(key="train_dataset")
    models = r2.multiselect("Models", list_models(), format_func=method_title,
                            key="train_models", help="One run per model and seed.")
    seeds_text = r3.text_input("Seeds", key="train_seeds", help="e.g. 0, or 0,1,2, or 0-4")
    # the data plan before the fields: the protocol's validation split follows the data set's size
    # (the data folder and the holdout as their widgets below give them: their values in the state)
    found = find_plan(form["dataset"], str(st.session_state.get("train_data_dir") or "").strip(),
                      form["dataset"] != "mnist" or bool(st.session_state.get("train_holdout", True)))
    follow_protocol_split(n_train_now(form["dataset"], found))
    training_fields(form)
    label, data_dir = more_settings(form)
    model_settings(form, rim)
    plan, data_ok, form["demo"] = data_plan(form["dataset"], found)
    configs, errors = run_configs(form, models, seeds_text, plan)
    if configs:
        time_estimate(store, configs)
        configs = not_again(store, viewer, configs, data_dir)
    start_button(store, viewer, owner, configs, bool(errors) or not data_ok, label, data_dir)


def live_view(viewer: Viewer, active_now: bool) -> None:
    """Your runs (cards, then a table of the older ones) and, with sign-in, the others' runs. A
    fragment (see the end of the page): it redraws itself every ``REFRESH_S`` while a run is
    ``active_now``, and the whole page when that changes."""
    fstore = RunStore()
    fstore.pump()
    runs = fstore.list_runs()
    if active_now != any(r.active for r in runs):
        st.rerun()  # everything finished, or a run was resumed: redraw the page, polling off or on
    mine = [r for r in runs if viewer.owns(r)]
    others = [r for r in runs if not viewer.owns(r)]
    st.subheader("Your runs")
    # kept until the next action replaces it: the redraw when a run ends must not wipe the message
    # that says which run the click acted on
    flash = flash_now(runs)
    if flash:
        (st.error if flash[0] == "error" else st.success)(flash[1])
    if not mine:
        st.info("No runs of yours yet. Set them up above and press Start.")
    else:
        shown, older = card_runs(mine)
        show_runs(fstore, shown, editable=True, key="mine")
        if older:
            with st.expander(f"Your older runs ({len(older)})"):
                runs_table(older)
    if not viewer.sign_in:
        return  # without sign-in every run on the machine is the user's: there are no others
    with st.expander(f"Runs of other users ({len(others)}, read-only)"):
        if not others:
            st.caption("None.")
        else:
            runs_table(others)
            live = [r for r in others if r.active]
            if live:
                show_runs(fstore, live, editable=False, key="others")


st.title("Train")
store = RunStore()
owner, viewer = session_owner(), current_viewer()
store.pump()
set_up(store, viewer, owner)
sync_url(URL_STATE)  # before the live view, which reruns itself while runs are active
active_now = any(r.active for r in store.list_runs())
st.fragment(live_view, run_every=REFRESH_S if active_now else None)(viewer, active_now)
