"""The user's own runs beside the shipped methods (the Compare page).

A run of the run store becomes what Compare draws and tabulates for it: its curves (training
loss, batch accuracy, periodic test accuracy and loss against iterations, as
``core.report.plots.training`` draws them), one table row (its final test error, the images it
was tested on, its budget, its health) and, when it was not trained like the shipped runs it is
drawn beside, the reasons in plain words. A user run is never part of the shipped methods' means,
spreads or verdicts: those come from the reproduction summary alone.

The final test error is the run's own ``metrics.test_error``, measured by the same code as the
shipped figures (``core.training.lifecycle.finish_run`` after the last iteration: one minus the
accuracy on every image of the run's test data). A demo run's test data are the 200 images of the
bundled sample it did not train on (``core.data.plan.sample_split``).

Offered: completed runs, runs stopped early (marked so) and uploaded models, each with a
training history. Runs still training, failed, interrupted, stopped on a non-finite loss (no
weights, no final evaluation) or without a history are not offered, with the reason
(:func:`offer_reason`).

Torch-free at import time, like the rest of ``core.runs``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..fileio import read_json
from ..report.fmt import pct_value
from ..report.health import COLLAPSED, DIVERGED, health_of
from .schema import WITH_WEIGHTS, RunInfo

# why a run is not offered, by its status (the run store's statuses without weights)
NOT_OFFERED = {
    "queued": "waiting to train",
    "running": "still training",
    "failed": "failed",
    "interrupted": "interrupted before the end of its schedule (resume it on the Train page)",
    "diverged": "stopped on a non-finite loss, so it has no weights and no final test error",
}
NO_HISTORY = "no training history recorded"
# settings that tell protocols apart, in plain words (core.training.config.protocol_of compares them)
SETTING_NAMES = {"optimizer": "optimiser", "lr": "learning rate", "momentum": "momentum",
                 "weight_decay": "weight decay", "schedule": "schedule", "iterations": "iterations",
                 "batch_size": "batch size", "val_images": "validation split", "patience": "early stopping",
                 "grad_clip": "gradient clipping", "augment": "augmentation"}
DEMO_NOTE = ("a demo: trained on {train} images of the bundled sample and tested on the other {test}; the shipped "
             "runs train on the whole training split and are tested on the whole test split")


@dataclass(frozen=True)
class ShippedProtocol:
    """How the shipped runs drawn beside a user run were trained: a protocol's settings
    (``core.training.config.PROTOCOLS``) with the iterations they were given."""

    name: str  # "converged", "paper", ...; "" when the shipped runs do not say
    settings: dict = field(default_factory=dict)

    @property
    def text(self) -> str:
        """``"Adam, cosine, 4,000 iterations"``; "settings not recorded" when unknown."""
        return budget_text(self.settings) if self.settings else "settings not recorded"


def shipped_protocol(rows: list[dict], dataset: str, fallback: str = "") -> ShippedProtocol:
    """The protocol of the shipped runs of ``dataset`` in a reproduction summary's ``rows``
    (the most common one, with its most common number of iterations); ``fallback``: the
    protocol of a row that names none (e.g. the results folder's)."""
    from ..training.config import PROTOCOLS

    mine = [(str(r.get("protocol") or fallback), r) for r in rows or []
             if r.get("dataset") == dataset and not r.get("variant")]
    names = Counter(p for p, _ in mine if p)
    name = names.most_common(1)[0][0] if names else fallback
    if name not in PROTOCOLS:
        return ShippedProtocol(name)
    settings = _full_settings(PROTOCOLS[name])
    its = Counter(int(r["iterations"]) for p, r in mine if p == name and _whole(r.get("iterations")))
    if its:
        settings["iterations"] = its.most_common(1)[0][0]
    return ShippedProtocol(name, settings)


@dataclass(frozen=True)
class OwnRun:
    """A run of the store as Compare sees it: its record and its model's metadata."""

    run: RunInfo
    meta: dict  # model.json, its curves from metrics.jsonl when it has none; {} when there is none
    reason: str = ""  # why it is not offered; "" when it is

    @property
    def offered(self) -> bool:
        return not self.reason

    @property
    def demo(self) -> bool:
        """Trained on the bundled sample (the Train page's demo; ``core.catalog.is_demo``)."""
        return (self.run.config or {}).get("data_source") == "sample"

    @property
    def health(self) -> dict:
        """``core.report.health``: as stored in its metadata, else classified from it now."""
        try:
            return health_of(self.meta)
        except Exception:  # an upload's odd metadata names no health rather than failing the page
            return {"health": "not known", "health_reasons": [], "health_checked": [], "health_measures": {}}

    @property
    def stopped(self) -> bool:
        """Stopped before the end of its schedule (a run of the store, or an upload that says so)."""
        return self.run.status == "stopped" or self.meta.get("status") == "stopped"

    @property
    def train_config(self) -> dict:
        tc = self.meta.get("train_config")
        return tc if isinstance(tc, dict) and tc else dict(self.run.config or {})

    @property
    def iterations_done(self) -> int:
        """Iterations it trained: the last of its history (a stopped run: until its stop)."""
        its = (self.meta.get("history") or {}).get("iteration") or []
        if its and _whole(its[-1]):
            return int(its[-1])
        done = (self.meta.get("metrics") or {}).get("iterations_done")
        return int(done) if _whole(done) else int(self.run.iteration or 0)


def offer_reason(run: RunInfo, meta: dict | None) -> str:
    """Why ``run`` cannot be drawn beside the shipped methods; "" when it can."""
    if run.status not in WITH_WEIGHTS:
        reason = NOT_OFFERED.get(run.status, run.status)
        return f"{reason}: {run.message}" if run.status == "failed" and run.message else reason
    if meta is None:
        return "its model's metadata is missing or unreadable"
    if not ((meta.get("history") or {}).get("iteration") or (meta.get("evals") or {}).get("iteration")):
        return NO_HISTORY
    return ""


def own_run(store, run: RunInfo, read: Callable[[Path], dict | None] | None = None) -> OwnRun:
    """``run`` with its model's metadata (``read``: how to read a JSON file, e.g. a page's
    cached reader; the plain reader by default). A metadata without a history takes it from the
    run's ``metrics.jsonl``."""
    read = read or _read
    meta = None
    if run.status in WITH_WEIGHTS:
        stem = store.weights_stem(run.run_id)
        meta = read(stem.with_suffix(".json")) if stem is not None else None
        if meta is not None and not (meta.get("history") or {}).get("iteration"):
            meta = {**meta, **history_from_metrics(store.read_metrics(run.run_id))}
    return OwnRun(run, meta or {}, offer_reason(run, meta))


def option_name(rec: OwnRun, label: str) -> str:
    """How a picker offers the run: its ``label`` (``core.catalog.run_label``: a demo and a stop
    say so), and its health when it diverged or collapsed."""
    health = rec.health.get("health")
    return f"{label} · {health}" if health in (DIVERGED, COLLAPSED) else label


def own_runs(store, runs: list[RunInfo], dataset: str, read: Callable[[Path], dict | None] | None = None) -> list[OwnRun]:
    """The runs of ``runs`` on ``dataset`` (newest first, as given), each with its metadata."""
    return [own_run(store, r, read) for r in runs if r.dataset == dataset]


def history_from_metrics(m: dict) -> dict:
    """``history`` and ``evals`` blocks (the metadata JSON's) from ``RunStore.read_metrics``."""
    out = {}
    if m.get("iteration"):
        out["history"] = {"iteration": m["iteration"], "loss": m.get("loss", []), "batch_acc": m.get("batch_acc", [])}
    if m.get("eval_iteration"):
        out["evals"] = {"iteration": m["eval_iteration"], "test_acc": m.get("test_acc", []),
                        "test_loss": m.get("test_loss", [])}
    return out


# --------------------------------------------------------------------------- curves, row, warning
@dataclass(frozen=True)
class OwnRunView:
    """What Compare shows of one of the user's runs."""

    curves: dict  # metric -> {"model", "seed", "x", "y", "label", "run_id"} (core.report.plots.training)
    row: dict  # one row of the table of the user's runs
    footing: list  # why it is not on an equal footing with the shipped curves; [] when it is
    warning: str  # the plain warning that says so; "" when it is on an equal footing and healthy


def compare_view(rec: OwnRun, label: str, shipped: ShippedProtocol) -> OwnRunView:
    """``rec`` as Compare draws it beside shipped runs trained under ``shipped``; ``label``: the
    run's one display name (``core.catalog.run_label``)."""
    return OwnRunView(run_curves(rec, label), run_row(rec, label), footing(rec, shipped),
                      warning_text(rec, label, shipped))


def run_curves(rec: OwnRun, label: str) -> dict:
    """The run's curves, each named ``label`` and tagged with its run id."""
    from ..report.plots.training import curves_from_metadata

    meta = {**rec.meta, "model": rec.run.model, "seed": rec.run.seed}
    return {k: {**c, "label": label, "run_id": rec.run.run_id} for k, c in curves_from_metadata(meta).items()}


def run_row(rec: OwnRun, label: str) -> dict:
    """One table row: the run, its final test error and on which images, its health, its state
    and its budget (iterations trained, optimiser, schedule)."""
    metrics = {**(rec.run.metrics or {}), **(rec.meta.get("metrics") or {})}
    return {
        "your run": label,
        "test error (%)": pct_value(metrics.get("test_error")),
        "tested on": tested_on(rec),
        "health": rec.health.get("health") or "not known",
        "state": state_text(rec),
        "budget": run_budget(rec),
    }


def run_budget(rec: OwnRun) -> str:
    """``"300 iterations · SGD lr 0.1 · constant rate"``: what it trained for, and how."""
    its = f"{rec.iterations_done:,} iterations"
    if not rec.train_config:
        return f"{its} · settings not recorded"
    tc = {**_defaults(), **rec.train_config}
    return f"{its} · {optimiser_text(tc)} · {schedule_text(tc)}"


def state_text(rec: OwnRun) -> str:
    """``"completed"``, ``"uploaded"``, ``"stopped at 300 of 1,000"`` (iterations)."""
    if rec.stopped:
        total = rec.train_config.get("iterations")
        return f"stopped at {rec.iterations_done:,}" + (f" of {int(total):,}" if _whole(total) else "")
    return rec.run.status


def tested_on(rec: OwnRun) -> str:
    """On which images its final test error was measured: a demo's held-out images of the bundled
    sample, else its test split's (how many)."""
    metrics, source = rec.meta.get("metrics") or {}, rec.meta.get("data_source") or {}
    n = metrics.get("test_n") if _whole(metrics.get("test_n")) else source.get("n_test")
    count = f"{int(n):,} " if _whole(n) else ""
    if rec.demo:
        return f"{count}held-out (demo)"
    return f"{count}test images"


def footing(rec: OwnRun, shipped: ShippedProtocol) -> list[str]:
    """Why the run is not on an equal footing with the shipped curves ([] when it is): another
    protocol or budget, stopped early, a demo, changed model settings."""
    from ..data.plan import SAMPLE_TRAIN

    reasons = []
    tc = rec.train_config
    if not tc:
        reasons.append("its training settings are not recorded")
    elif not shipped.settings:
        reasons.append("the shipped runs' training settings are not recorded, so nothing says they match")
    else:
        mine = {**_defaults(), **tc}
        differ = [k for k in SETTING_NAMES if not _same(mine.get(k), shipped.settings.get(k))]
        if differ:
            text = (f"trained for {int(mine['iterations']):,} iterations with {optimiser_text(mine)}, "
                    f"{schedule_text(mine)}; the shipped curves: {shipped.text}")
            others = [SETTING_NAMES[k] for k in differ if k not in ("optimizer", "lr", "schedule", "iterations")]
            reasons.append(text + (f" (also another {', '.join(others)})" if others else ""))
    if rec.stopped:
        reasons.append(f"stopped early, at iteration {rec.iterations_done:,}"
                       + (f" of {int(rec.train_config['iterations']):,}" if _whole(rec.train_config.get("iterations"))
                          else ""))
    if rec.demo:
        test = (rec.meta.get("metrics") or {}).get("test_n")
        reasons.append(DEMO_NOTE.format(train=SAMPLE_TRAIN, test=int(test) if _whole(test) else "images"))
    overrides = tc.get("model_overrides") if isinstance(tc.get("model_overrides"), dict) else {}
    if overrides:
        reasons.append("model settings changed (" + ", ".join(f"{k} {v}" for k, v in overrides.items()) + ")")
    return reasons


def warning_text(rec: OwnRun, label: str, shipped: ShippedProtocol) -> str:
    """The plain warning shown under the table for this run ("" when there is nothing to warn of)."""
    parts = []
    reasons = footing(rec, shipped)
    if reasons:
        parts.append(f"**{label}** is not on an equal footing with the shipped curves: " + "; ".join(reasons) + ".")
    h = rec.health
    if h.get("health") in (DIVERGED, COLLAPSED):
        why = "; ".join(h.get("health_reasons") or []) or "no reason recorded"
        parts.append(f"It is **{h['health']}** ({why}).")
    return " ".join(parts)


# --------------------------------------------------------------------------- budget in words
def optimiser_text(s: dict) -> str:
    """``"Adam lr 0.002"``, ``"SGD lr 0.1"``."""
    opt = str(s.get("optimizer") or "?")
    name = opt.upper() if opt == "sgd" else opt.capitalize()
    lr = s.get("lr")
    return f"{name} lr {lr:g}" if isinstance(lr, (int, float)) and not isinstance(lr, bool) else name


def schedule_text(s: dict) -> str:
    """``"cosine"``, ``"constant rate"``, ``"step (x0.1 every 1,000)"``."""
    sched = str(s.get("schedule") or "none")
    if sched == "none":
        return "constant rate"
    if sched == "step":
        return f"step (x{s.get('step_gamma', 0.1):g} every {int(s.get('step_every', 1000)):,})"
    return sched


def budget_text(s: dict) -> str:
    """``"Adam, cosine, 4,000 iterations"`` (a protocol's settings in the words of a warning)."""
    opt = str(s.get("optimizer") or "?")
    its = s.get("iterations")
    return ", ".join([opt.upper() if opt == "sgd" else opt.capitalize(), schedule_text(s),
                      f"{int(its):,} iterations" if _whole(its) else "iterations not recorded"])


# --------------------------------------------------------------------------- helpers
def _defaults() -> dict:
    import dataclasses

    from ..training.config import TrainConfig

    return {f.name: f.default for f in dataclasses.fields(TrainConfig) if f.default is not dataclasses.MISSING}


def _full_settings(protocol: dict) -> dict:
    return {**_defaults(), **protocol}


def _same(a, b) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) \
            and not isinstance(b, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=1e-12)
    return a == b


def _whole(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _read(path: Path) -> dict | None:
    try:
        obj = read_json(path)
    except (OSError, ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None
