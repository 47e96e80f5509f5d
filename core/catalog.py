"""Every model a user can pick: shipped pretrained ones and the user's own runs.

``list_entries(dataset)`` merges ``pretrained/manifest.json`` (``read_manifest``, the one
reader of it) with the runs in the run store that have weights (trained in the app, stopped
early, or uploaded), and ``load_entry`` loads one through the validating model loader.
The pretrained folder is ``core.paths.pretrained_dir()``, read at call time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from . import paths
from .errors import WeightsError
from .models.registry import DEFAULT_MODEL
from .report.fmt import dataset_title, model_label
from .training.weights import load_weights

DEFAULT_DATASET = "mnist"  # with DEFAULT_MODEL: the featured model, the pages' first choice
DEFAULT_PROTOCOL = "long"  # the shipped models the pages prefer: the long grid's medians


@dataclass(frozen=True)
class ModelEntry:
    key: str  # "pretrained:<dataset>/<model>" or "run:<run id>"
    dataset: str
    model: str
    source: str  # "pretrained", "trained" or "uploaded"
    stem: Path  # model path without suffix
    seed: int | None = None
    label: str = ""
    created: str = ""
    metrics: dict = field(default_factory=dict, hash=False, compare=False)
    protocol: str = ""  # pretrained: the manifest's ("long", "converged", "paper"); runs: the protocol of their settings

    run_id: str = ""
    demo: bool = False  # a demo run: trained on 800 images of the bundled sample, tested on the other 200

    @property
    def display(self) -> str:
        """The one name of this model on every page (``core.report.fmt.model_label``)."""
        return self.label or model_label(self.model, self.protocol, self.seed, self.source, self.run_id)

    @property
    def display_with_dataset(self) -> str:
        """``display`` with the data set first (lists that mix data sets)."""
        return f"{dataset_title(self.dataset)} · {self.display}"

    @property
    def weights_mtime(self) -> float:
        """Modification time of the weights file (0 when missing): part of every cache key of
        a result computed with them, so a replaced file is never answered from a cache."""
        try:
            return Path(self.stem).with_suffix(".safetensors").stat().st_mtime
        except OSError:
            return 0.0


def manifest_path(pretrained_dir: Path | None = None) -> Path:
    return Path(pretrained_dir or paths.pretrained_dir()) / "manifest.json"


def read_manifest(pretrained_dir: Path | None = None) -> dict:
    """``manifest.json`` of the pretrained folder; ``{"models": []}`` when missing or malformed."""
    try:
        m = json.loads(manifest_path(pretrained_dir).read_text())
    except (OSError, ValueError, RecursionError):
        return {"models": []}
    return m if isinstance(m, dict) and isinstance(m.get("models"), list) else {"models": []}


def pretrained_entries(dataset: str | None = None, pretrained_dir: Path | None = None) -> list[ModelEntry]:
    pretrained_dir = Path(pretrained_dir or paths.pretrained_dir())
    out = []
    for m in read_manifest(pretrained_dir).get("models", []):
        if dataset and m.get("dataset") != dataset:
            continue
        stem = Path(pretrained_dir) / Path(m["weights"]).with_suffix("")
        protocol = m.get("protocol", "paper")
        key = f"pretrained:{m['dataset']}/{m['model']}" + ("" if protocol == "paper" else f"@{protocol}")
        label = model_label(m["model"], protocol, m.get("seed"), "pretrained")
        out.append(ModelEntry(key, m["dataset"], m["model"], "pretrained", stem, m.get("seed"), label, "",
                              {k: m.get(k) for k in ("test_accuracy", "test_error", "noisy_test_error",
                                                     "parameters", "iterations")}, protocol))
    return out


def run_entries(dataset: str | None = None, store=None) -> list[ModelEntry]:
    """Runs with usable weights (completed, stopped by the user, uploaded), newest first.

    A stopped run keeps what it learned up to the stop; its label says so, since it did not
    follow its schedule to the end.
    """
    from .runs.schema import WITH_WEIGHTS
    from .runs.store import RunStore

    store = store or RunStore()
    out = []
    for run in store.list_runs():
        if run.status not in WITH_WEIGHTS:
            continue
        if dataset and run.dataset != dataset:
            continue
        stem = store.weights_stem(run.run_id)
        if stem is None:
            continue
        out.append(run_entry(run, stem))
    return out


def in_models(run, store) -> bool:
    """Whether the Models page lists ``run`` (a ``RunInfo``): a completed, stopped or uploaded run
    with weights on disk (:func:`run_entries`' rule; a run stopped before its first iteration has none)."""
    from .runs.schema import WITH_WEIGHTS

    return run.status in WITH_WEIGHTS and store.weights_stem(run.run_id) is not None


def run_health(run, store, read=None) -> dict | None:
    """The health of ``run``'s model (``core.report.health``: stored in its JSON, else classified
    from it; what the Models page shows), or None when the run has no model (:func:`in_models`).
    ``read``: how to read a JSON file (``core.runs.compare.own_run``)."""
    from .runs.compare import own_run

    if not in_models(run, store):
        return None
    return own_run(store, run, read).health


def health_warning(h: dict | None) -> str:
    """The warning for a model that is not healthy (``"**This model is collapsed**: ..."``), as the
    Models page and the Train page's run cards give it; "" for a healthy model or one whose health
    is not known."""
    from .report.health import COLLAPSED, DIVERGED

    if not h or h.get("health") not in (COLLAPSED, DIVERGED):
        return ""
    return (f"**This model is {h['health']}**: {'; '.join(h.get('health_reasons') or []) or 'no reason recorded'}. "
            "Its predictions say little about its method.")


# a run's settings that can tell two runs of one name apart, in words (core.runs.compare.SETTING_NAMES
# and what the name does not say: the data set, the model's own settings)
def _setting_words() -> dict[str, str]:
    from .runs.compare import SETTING_NAMES

    return {"dataset": "data set", **SETTING_NAMES, "class_weighting": "class weighting",
            "model_overrides": "model settings"}


def _setting_value(key: str, v) -> str:
    if key == "dataset":
        return dataset_title(v)
    if isinstance(v, dict):
        return ", ".join(f"{k} {_setting_value(k, x)}" for k, x in sorted(v.items())) or "defaults"
    if isinstance(v, bool) or v is None:
        return {True: "on", False: "off", None: "off"}[v]
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def legend_names(runs, source: str = "") -> dict[str, str]:
    """Each run's name in a chart legend, by run id: :func:`run_label`, and where runs share a
    method, protocol and seed, the settings in which each differs from the others
    (``"... (run 1a2b3c4d) · iterations 4,000, learning rate 0.002"``), so two lines of one name
    say how they were trained."""
    base = {r.run_id: run_label(r, source=source) for r in runs}
    # what the name says besides the run id
    plain = {r.run_id: (r.model, run_protocol(r), r.seed, is_demo(r), r.iteration if r.status == "stopped" else None)
             for r in runs}
    words = _setting_words()
    out = dict(base)
    for r in runs:
        same = [o for o in runs if o.run_id != r.run_id and plain[o.run_id] == plain[r.run_id]]
        if not same:
            continue
        mine = r.config or {}
        differ = [k for k in words if any((o.config or {}).get(k) != mine.get(k) for o in same)]
        if differ:
            out[r.run_id] = f"{base[r.run_id]} · " + ", ".join(f"{words[k]} {_setting_value(k, mine.get(k))}"
                                                                for k in differ)
    return out


def run_protocol(run) -> str:
    """The protocol a run's settings follow (``core.training.config.protocol_of``)."""
    from .training.config import protocol_of

    return protocol_of(run.config)


def is_demo(run) -> bool:
    """A run (``RunInfo``) trained on the bundled sample (Train's demo), not on a data set."""
    return (getattr(run, "config", None) or {}).get("data_source") == "sample"


def run_label(run, source: str | None = None) -> str:
    """A run's one display name (``core.report.fmt.model_label``): its Train card, its Models row,
    its chart legend and any message about it say the same; a demo run's says "demo"."""
    if source is None:
        source = "uploaded" if run.status == "uploaded" else "trained"
    if is_demo(run):
        source = f"{source} demo".strip()
    stopped = run.iteration if run.status == "stopped" else None
    return model_label(run.model, run_protocol(run), run.seed, source, run.run_id, stopped_at=stopped)


def run_entry(run, stem: Path) -> ModelEntry:
    source = "uploaded" if run.status == "uploaded" else "trained"
    return ModelEntry(f"run:{run.run_id}", run.dataset, run.model, source, stem, run.seed, run_label(run, source),
                      run.created, dict(run.metrics or {}), run_protocol(run), run.run_id, is_demo(run))


HELD_OUT = ", only those the demo runs did not train on"


def held_out_data(entry: ModelEntry, data):
    """``data`` (a ``LoadedData`` of ``entry``'s data set) less the images ``entry`` trained on,
    for statistics across a test set: a demo run keeps only the images it did not train on
    (``core.data.plan.demo_held_out``), its ``source`` saying so; any other model gets ``data``
    as it is."""
    if not entry.demo or str(data.source).endswith(HELD_OUT):
        return data
    import dataclasses

    from .data.plan import demo_held_out

    keep = demo_held_out(data, entry.dataset)
    if len(keep) == len(data):
        return data
    return dataclasses.replace(
        data, images=data.images[keep], labels=data.labels[keep],
        indices=None if data.indices is None else data.indices[keep],
        source=f"{data.source}{HELD_OUT}")


def list_entries(dataset: str | None = None, store=None) -> list[ModelEntry]:
    return pretrained_entries(dataset) + run_entries(dataset, store)


def featured_entry(entries: list[ModelEntry], protocol: str = DEFAULT_PROTOCOL) -> ModelEntry | None:
    """The model a page shows first: the paper's method on MNIST, pretrained with ``protocol``
    when shipped, else any of its pretrained or own models there, else the first entry."""
    if not entries:
        return None
    home = [e for e in entries if e.model == DEFAULT_MODEL and e.dataset == DEFAULT_DATASET]
    return next((e for e in home if e.source == "pretrained" and e.protocol == protocol), home[0] if home else entries[0])


def preferred_entry(candidates: list[ModelEntry], protocol: str = DEFAULT_PROTOCOL) -> ModelEntry:
    """Among ``candidates``: the pretrained one of ``protocol``, else any pretrained one, else the first."""
    pre = [e for e in candidates if e.source == "pretrained"]
    return next((e for e in pre if e.protocol == protocol), pre[0] if pre else candidates[0])


def load_entry(entry: ModelEntry):
    """``(model, metadata)``; raises WeightsError with a clear message."""
    if not Path(entry.stem).with_suffix(".safetensors").is_file():
        raise WeightsError(f"The model for {entry.display} is missing on disk.")
    return load_weights(entry.stem, expected_dataset=entry.dataset)


def seconds_per_iteration(model: str, dataset: str, pretrained_dir: Path | None = None, store=None) -> tuple[float, str] | None:
    """Measured training speed of ``model`` on ``dataset``: (seconds per iteration, where from).

    The user's own finished runs come first (this machine, now); else the shipped models'
    recorded training times (the project's 2-core CPU). None when nothing was measured."""
    rates = []
    for e in run_entries(dataset, store):
        t, n = e.metrics.get("train_time_s"), e.metrics.get("iterations_done")
        if e.model == model and t and n:
            rates.append(float(t) / float(n))
    if rates:
        return sorted(rates)[len(rates) // 2], f"{len(rates)} of your runs"
    for e in pretrained_entries(dataset, pretrained_dir=pretrained_dir):
        if e.model != model:
            continue
        try:
            meta = json.loads(e.stem.with_suffix(".json").read_text())
        except (OSError, ValueError):
            continue
        m = meta.get("metrics") or {}
        t, n = m.get("train_time_s"), m.get("iterations_done")
        if t and n:
            rates.append(float(t) / float(n))
    if rates:
        return min(rates), "the shipped models' training (2-core CPU)"
    return None



UNBALANCED_RATIO = 1.5  # test classes this unequal (largest / smallest count): the balanced error is the fair one


def error_floors(dataset: str, metrics: dict | None = None) -> dict:
    """What a model's test error on ``dataset`` compares with (``core.report.floors``): the chance
    and majority-class errors of the images it was tested on (the stored confusion matrix's, when
    they are not the whole test split: ``tested_n``; a demo run's 200), whether their classes are
    unbalanced, and (from the stored
    confusion matrix or per-class accuracies, when there) the model's balanced error, the mean
    per-class error, whose floor is chance for any answer that ignores the image."""
    from .report.floors import TEST_CLASS_COUNTS, floors, floors_from_counts
    from .report.health import balanced_accuracy

    m = metrics or {}
    full = list(TEST_CLASS_COUNTS.get(dataset, []))
    tested = _tested_counts(m.get("confusion"))  # the images it was tested on (a demo run: 200 of the sample)
    own = tested is not None and tested != full
    out = dict(floors_from_counts(tested) if own else floors(dataset))
    out["tested_n"] = sum(tested) if own else None  # None: the data set's whole test split
    counts = [c for c in (tested if own else full) if c > 0]
    out["unbalanced"] = bool(counts) and max(counts) > UNBALANCED_RATIO * min(counts)
    bal = balanced_accuracy(m.get("confusion"), m.get("per_class_accuracy"))
    out["balanced_error"] = None if bal != bal else 1.0 - bal
    return out


def _tested_counts(confusion) -> list[int] | None:
    """Per-class image counts of a stored confusion matrix (its row sums), or None without a valid one."""
    try:
        rows = [int(sum(r)) for r in confusion]
    except (TypeError, ValueError):
        return None
    return rows if rows and sum(rows) > 0 and all(c >= 0 for c in rows) else None


def same_weights(weights: bytes, entries: list[ModelEntry]) -> ModelEntry | None:
    """The entry whose weights file holds exactly these bytes (an upload of a model already
    here, e.g. a shipped one downloaded and uploaded again), or None."""
    import hashlib

    digest = hashlib.sha256(weights).digest()
    for e in entries:
        p = Path(e.stem).with_suffix(".safetensors")
        try:
            if p.stat().st_size == len(weights) and hashlib.sha256(p.read_bytes()).digest() == digest:
                return e
        except OSError:
            continue
    return None
