"""What a run folder holds: file names, limits, run ids, and typed ``config.json`` / ``status.json``.

``RunConfig`` and ``RunStatus`` are the two documents of a run. Reading is forgiving (a
field of the wrong type falls back to its default, unknown fields are ignored: a store
written by another version still lists), writing is strict (``RunStatus.update`` refuses a
field it does not know, so a misspelt key fails where it is written, not where it is read).
Torch-free: the worker imports this before torch.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import secrets
import time
import typing
from dataclasses import dataclass, field

from ..errors import RimscopeError
from ..fileio import json_safe

STATUSES = ("queued", "running", "completed", "stopped", "diverged", "interrupted", "failed", "uploaded")
ACTIVE = ("queued", "running")
FINISHED = ("completed", "stopped", "diverged", "interrupted", "failed", "uploaded")
WITH_WEIGHTS = ("completed", "stopped", "uploaded")  # statuses whose model may be used
RESUMABLE = ("interrupted", "stopped")  # statuses resume() accepts

RUN_ID_RE = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{8}$")
STALE_AFTER_S = 60.0  # no heartbeat for this long: the worker is taken as dead
HEARTBEAT_S = 2.0  # the worker's heartbeat period
STATUS_EVERY_S = 1.0  # progress is written to status.json at most this often
MAX_RUNS = 1000  # runs kept in one store (submit/import refuse beyond)
MAX_QUEUED = 100  # queued runs at once
MAX_TEXT = 200  # owner / label length

CONFIG_FILE, STATUS_FILE, METRICS_FILE = "config.json", "status.json", "metrics.jsonl"
# a run's weights are model.safetensors + model.json; its training states (to resume) are in ckpt/
STOP_FILE, LOG_FILE, WEIGHTS_STEM, STATE_DIR = "stop", "worker.log", "model", "ckpt"


class RunStoreError(RimscopeError):
    """A run store operation was refused (unknown or malformed run id, running run, ...)."""


class RunPermissionError(RunStoreError):
    """Someone asked to stop, resume or delete a run that another user started."""


def may_act(owner: str, actor: str | None) -> bool:
    """Whether ``actor`` may stop, resume or delete a run whose recorded owner is ``owner``.

    ``actor`` None is the machine's owner (the command line; the dashboard when no sign-in is
    configured): every run is theirs. Any other actor (a signed-in user's id, given by the
    pages) acts only on the runs recorded with exactly that id; an empty id (nobody signed
    in) acts on none."""
    if actor is None:
        return True
    return bool(actor) and owner == actor


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(4)


def check_run_id(run_id) -> str:
    """``run_id`` if it is one of ours, else RunStoreError (never a path from outside)."""
    if not isinstance(run_id, str) or not RUN_ID_RE.fullmatch(run_id):
        raise RunStoreError(f"Not a valid run id: {str(run_id)[:60]!r}.")
    return run_id


def now_iso(ts: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(time.time() if ts is None else ts))


def clean_text(value, limit: int = MAX_TEXT) -> str:
    text = "" if value is None else str(value)
    return "".join(ch for ch in text if ch.isprintable())[:limit].strip()


def scalars(metrics) -> dict:
    """The scalar entries of a metrics dict (for status.json and RunInfo)."""
    if not isinstance(metrics, dict):
        return {}
    return {str(k): json_safe(v) for k, v in metrics.items()
            if isinstance(v, (int, float, str, bool)) or v is None}


def _fits(value, hint) -> bool:
    """``value`` is of the annotated type ``hint`` (the few kinds the documents use)."""
    if value is None:
        return type(None) in typing.get_args(hint) or hint is type(None)
    for kind in typing.get_args(hint) or (hint,):
        if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return True
        if kind is int and isinstance(value, int) and not isinstance(value, bool):
            return True
        if kind in (str, dict, bool) and isinstance(value, kind):
            return True
    return False


@functools.cache
def _hints(cls) -> dict:
    return typing.get_type_hints(cls)


class _Document:
    """A JSON document as a dataclass: ``from_dict`` keeps the fields of the right type."""

    @classmethod
    def from_dict(cls, doc) -> _Document:
        doc = doc if isinstance(doc, dict) else {}
        hints = _hints(cls)
        return cls(**{f.name: doc[f.name] for f in dataclasses.fields(cls)
                      if f.name in doc and _fits(doc[f.name], hints[f.name])})

    def to_dict(self) -> dict:
        return json_safe(dataclasses.asdict(self))

    def update(self, **changes) -> _Document:
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field(s) {', '.join(unknown)}")
        for k, v in changes.items():
            setattr(self, k, v)
        return self


@dataclass
class RunConfig(_Document):
    """``config.json``: what the run is, written once when it is created."""

    run_id: str = ""
    kind: str = "train"  # "train" (a worker trains it) or "upload" (a model brought in)
    dataset: str = ""
    model: str = ""
    seed: int | None = None  # uploads; a training run's seed is in train_config
    owner: str = ""  # who started it: a signed-in user's id (pages.ui.auth), "" without sign-in
    label: str = ""
    data_dir: str | None = None
    train_config: dict = field(default_factory=dict)
    created: str = ""
    created_ts: float = 0.0


@dataclass
class RunStatus(_Document):
    """``status.json``: where the run stands, rewritten by the store and by its worker."""

    status: str = ""  # one of STATUSES (read: anything else is "failed")
    message: str = ""
    detail: str = ""  # the raw reason behind a failure's message (e.g. the download error)
    pid: int | None = None
    pid_started: float | None = None  # the worker process's start time (tells a reused pid apart)
    host: str | None = None
    created: str = ""
    updated: str = ""
    started: str = ""
    finished: str = ""
    heartbeat: float | None = None
    iteration: int = 0
    total: int | None = None  # iterations in all (None: the config's)
    metrics: dict = field(default_factory=dict)
    latest: dict = field(default_factory=dict)  # last loss, batch_acc, test_acc, test_loss
    state: dict | None = None  # the last training state written: iteration, ok
    data_source: str | None = None
    n_train: int | None = None
    resumes: int = 0

    @classmethod
    def from_dict(cls, doc) -> RunStatus:
        if isinstance(doc, dict) and "checkpoint" in doc and "state" not in doc:  # its name in older status files
            doc = {**doc, "state": doc["checkpoint"]}
        st = super().from_dict(doc)
        if st.status not in STATUSES:
            st.status = "failed"
            st.message = st.message or "status file missing or unreadable"
        return st


@dataclass
class RunInfo:
    run_id: str
    dataset: str
    model: str
    seed: int | None
    status: str
    created: str
    updated: str
    iteration: int
    total: int
    message: str
    metrics: dict
    owner: str
    label: str
    config: dict
    started: str = ""
    finished: str = ""
    pid: int | None = None
    data_dir: str | None = None
    latest: dict = field(default_factory=dict)  # last loss, batch_acc, test_acc, test_loss
    created_ts: float = 0.0
    detail: str = ""  # the raw reason behind a failure's message
    stop_requested: bool = False  # a stop was asked for and the worker has not ended yet

    @classmethod
    def of(cls, run_id: str, cfg: RunConfig, st: RunStatus) -> RunInfo:
        tc = cfg.train_config
        seed = tc.get("seed", cfg.seed)
        total = st.total if st.total is not None else tc.get("iterations")
        return cls(
            run_id=run_id, dataset=cfg.dataset or str(tc.get("dataset") or ""),
            model=cfg.model or str(tc.get("model") or ""),
            seed=seed if _fits(seed, int) else None, status=st.status, created=cfg.created,
            updated=st.updated or cfg.created, iteration=st.iteration,
            total=total if _fits(total, int) else 0, message=st.message, metrics=dict(st.metrics),
            owner=cfg.owner, label=cfg.label, config=dict(tc), started=st.started, finished=st.finished,
            pid=st.pid, data_dir=cfg.data_dir, latest=dict(st.latest), created_ts=cfg.created_ts,
            detail=st.detail)

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    @property
    def progress(self) -> float:
        return min(1.0, self.iteration / self.total) if self.total else 0.0

    @property
    def title(self) -> str:
        return self.label or f"{self.model} on {self.dataset}, seed {self.seed}"
