"""The run store: training runs on disk, started as background worker processes.

One folder per run under ``$RIMSCOPE_HOME/runs`` (default ``~/.rimscope/runs``)::

    runs/<run_id>/config.json        training config, owner (session id), label, data folder
    runs/<run_id>/status.json        status, pid, timestamps, heartbeat, progress, final metrics
    runs/<run_id>/metrics.jsonl      one JSON line per iteration / periodic evaluation
    runs/<run_id>/model.safetensors  weights (completed or stopped runs, uploads)
    runs/<run_id>/model.json         checkpoint metadata (core.checkpoint format)
    runs/<run_id>/stop               present once a stop was requested
    runs/<run_id>/ckpt/              training checkpoints (core.resume) while the run is unfinished
    runs/<run_id>/worker.log         the worker's stdout/stderr

Statuses: queued, running, completed, stopped, diverged, interrupted, failed, uploaded.

Everything a page needs is on disk, so runs survive page reloads and server restarts, and
several Streamlit sessions (or processes) can share one store. JSON files are written
atomically (temporary file + rename); ``metrics.jsonl`` is appended and flushed line by line
and readers ignore a torn last line. Run ids are generated here (time + random hex) and every
id coming in is checked against ``RUN_ID_RE`` before it touches a path.

``pump()`` starts queued runs as detached worker processes
(``python -m core.runs worker <run_dir>``) while fewer than ``max_concurrent`` run, and marks
runs whose worker died (process gone, or no heartbeat for ``STALE_AFTER_S``) "interrupted",
keeping their metrics so far. ``resume(run_id)`` queues an interrupted or stopped run again;
its worker continues from the newest intact training checkpoint in ``ckpt/`` (written every
``checkpoint_every`` iterations / ``checkpoint_every_s`` seconds and when a run stops) and ends
bit-identical to an uninterrupted run. It holds an ``fcntl.flock`` on ``runs/.lock``, so two sessions
never start the same run twice.

CLI::

    python -m core.runs list            # the runs in the store
    python -m core.runs pump            # start queued runs, mark dead ones
    python -m core.runs stop <run_id>
    python -m core.runs resume <run_id>  # an interrupted or stopped run continues from its checkpoint
    python -m core.runs worker <run_dir>   # what pump() starts; not for people

Heavy modules (torch, the models) are imported lazily, so a worker writes its first
heartbeat before it spends seconds importing torch.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import math
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import CheckpointError, ConfigError, RimscopeError

if TYPE_CHECKING:  # pragma: no cover
    from .train import TrainConfig

ROOT = Path(__file__).resolve().parent.parent

STATUSES = ("queued", "running", "completed", "stopped", "diverged", "interrupted", "failed", "uploaded")
ACTIVE = ("queued", "running")
FINISHED = ("completed", "stopped", "diverged", "interrupted", "failed", "uploaded")
WITH_WEIGHTS = ("completed", "stopped", "uploaded")  # statuses whose checkpoint may be used
RESUMABLE = ("interrupted", "stopped")  # statuses resume() accepts

RUN_ID_RE = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{8}$")
STALE_AFTER_S = 60.0  # no heartbeat for this long: the worker is taken as dead
HEARTBEAT_S = 2.0  # the worker's heartbeat period
STATUS_EVERY_S = 1.0  # progress is written to status.json at most this often
MAX_UPLOAD_BYTES = 64 * 1024 * 1024  # weights per upload
MAX_META_UPLOAD_BYTES = 8 * 1024 * 1024
MAX_RUNS = 1000  # runs kept in one store (submit/import refuse beyond)
MAX_QUEUED = 100  # queued runs at once
MAX_TEXT = 200  # owner / label length

CONFIG_FILE, STATUS_FILE, METRICS_FILE = "config.json", "status.json", "metrics.jsonl"
STOP_FILE, LOG_FILE, CKPT_STEM, CKPT_DIR = "stop", "worker.log", "model", "ckpt"


class RunStoreError(RimscopeError):
    """A run store operation was refused (unknown or malformed run id, running run, ...)."""


# ---------------------------------------------------------------------------------------
# small helpers
def default_root() -> Path:
    base = os.environ.get("RIMSCOPE_HOME") or Path.home() / ".rimscope"
    return Path(base).expanduser() / "runs"


def default_max_concurrent() -> int:
    """``RIMSCOPE_MAX_CONCURRENT`` (default 1); 0 pauses the queue (runs stay queued)."""
    try:
        return max(0, int(os.environ.get("RIMSCOPE_MAX_CONCURRENT", "1")))
    except ValueError:
        return 1


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(4)


def check_run_id(run_id) -> str:
    """``run_id`` if it is one of ours, else RunStoreError (never a path from outside)."""
    if not isinstance(run_id, str) or not RUN_ID_RE.fullmatch(run_id):
        raise RunStoreError(f"Not a valid run id: {str(run_id)[:60]!r}.")
    return run_id


def _now_iso(ts: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(time.time() if ts is None else ts))


def _clean_text(value, limit: int = MAX_TEXT) -> str:
    text = "" if value is None else str(value)
    return "".join(ch for ch in text if ch.isprintable())[:limit].strip()


def _finite(obj):
    """NaN/inf -> None (strict JSON); recurses into dicts and lists."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):
        try:
            return _finite(obj.item())
        except (TypeError, ValueError):
            return str(obj)
    return obj


def _scalars(metrics) -> dict:
    """The scalar entries of a metrics dict (for status.json and RunInfo)."""
    if not isinstance(metrics, dict):
        return {}
    return {str(k): _finite(v) for k, v in metrics.items()
            if isinstance(v, (int, float, str, bool)) or v is None}


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    from .fileio import atomic_write_bytes

    atomic_write_bytes(path, data, mkdir=False)


def _write_json(path: Path, obj) -> None:
    _atomic_write_bytes(path, json.dumps(_finite(obj), indent=1, allow_nan=False).encode())


def _read_json(path: Path):
    """Parsed JSON or None when missing or unreadable."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def _proc_state(pid: int) -> tuple[str | None, str | None]:
    """(state letter, command line) from /proc, or (None, None) where /proc is absent."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        state = stat[stat.rindex(")") + 2:].split()[0]
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        return state, cmd
    except (OSError, ValueError, IndexError):
        return None, None


def worker_alive(pid, run_id: str) -> bool:
    """True when ``pid`` is a live (not zombie) worker process for ``run_id``."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, someone else's: assume alive and rely on the heartbeat
    if Path("/proc").is_dir():
        state, cmd = _proc_state(pid)
        if state is None:
            return False
        if state in ("Z", "X"):
            return False
        if pid == os.getpid():
            return True  # a worker running in this process (tests)
        return run_id in (cmd or "")  # pid reused by another program: not our worker
    return True


# ---------------------------------------------------------------------------------------
# metrics.jsonl: incremental, torn-line-tolerant reader
_METRIC_KEYS = ("iteration", "loss", "batch_acc", "eval_iteration", "test_acc", "test_loss")
_metrics_cache: dict[str, tuple] = {}  # path -> (inode, offset, data)
_metrics_lock = threading.Lock()


def _empty_metrics() -> dict:
    return {k: [] for k in _METRIC_KEYS}


def read_metrics_file(path: Path) -> dict:
    """Lists ``iteration, loss, batch_acc`` and ``eval_iteration, test_acc, test_loss``.

    Reads only what was appended since the last call; a line without its newline (a writer
    killed mid-line, or one still writing) is left for later and never parsed.
    """
    path = Path(path)
    key = str(path)
    try:
        st = path.stat()
    except OSError:
        with _metrics_lock:
            _metrics_cache.pop(key, None)
        return _empty_metrics()
    with _metrics_lock:
        inode, offset, data = _metrics_cache.get(key, (None, 0, None))
        if data is None or inode != st.st_ino or st.st_size < offset:
            inode, offset, data = st.st_ino, 0, _empty_metrics()
        if st.st_size > offset:
            with open(path, "rb") as f:
                f.seek(offset)
                chunk = f.read(st.st_size - offset)
            end = chunk.rfind(b"\n")
            if end >= 0:
                for raw in chunk[: end + 1].splitlines():
                    _parse_metric_line(raw, data)
                offset += end + 1
        _metrics_cache[key] = (inode, offset, data)
        return {k: list(v) for k, v in data.items()}


def _num(v):
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _parse_metric_line(raw: bytes, data: dict) -> None:
    try:
        ev = json.loads(raw)
    except ValueError:
        return
    if not isinstance(ev, dict) or not isinstance(ev.get("iteration"), int):
        return
    if ev.get("kind") == "iter":
        data["iteration"].append(ev["iteration"])
        data["loss"].append(_num(ev.get("loss")))
        data["batch_acc"].append(_num(ev.get("batch_acc")))
    elif ev.get("kind") == "eval":
        data["eval_iteration"].append(ev["iteration"])
        data["test_acc"].append(_num(ev.get("test_acc")))
        data["test_loss"].append(_num(ev.get("test_loss")))


# ---------------------------------------------------------------------------------------
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

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    @property
    def progress(self) -> float:
        return min(1.0, self.iteration / self.total) if self.total else 0.0

    @property
    def title(self) -> str:
        return self.label or f"{self.model} on {self.dataset}, seed {self.seed}"


@dataclass(frozen=True)
class DataPlan:
    """Where a worker will find the training data, without loading it."""

    source: str
    n_train: int | None  # images left for training (after the MNIST holdout), when known
    note: str = ""


def parse_seeds(text: str, limit: int = 20) -> list[int]:
    """``"0"``, ``"0,1,2"``, ``"0 1 2"`` or ``"0-4"`` -> distinct seeds; ConfigError otherwise."""
    seeds: list[int] = []
    for part in re.split(r"[,\s;]+", str(text).strip()):
        if not part:
            continue
        m = re.fullmatch(r"(\d{1,9})(?:-(\d{1,9}))?", part)
        if not m:
            raise ConfigError(f"Seeds must be whole numbers >= 0 such as '0', '0,1,2' or '0-4'; got {part!r}.")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        if hi < lo:
            raise ConfigError(f"Seed range {part!r} runs backwards.")
        if hi - lo + 1 > limit:
            raise ConfigError(f"At most {limit} seeds at once.")
        for s in range(lo, hi + 1):
            if s not in seeds:
                seeds.append(s)
    if not seeds:
        raise ConfigError("Give at least one seed, e.g. 0 or 0,1,2.")
    if len(seeds) > limit:
        raise ConfigError(f"At most {limit} seeds at once.")
    return seeds


def validate_config(config: TrainConfig, n_train: int | None = None) -> TrainConfig:
    """TrainConfig.validate plus the model overrides (built as the model's config)."""
    from .data import get_info
    from .models import make_config
    from .train import TrainConfig as _TC

    if not isinstance(config, _TC):
        raise ConfigError("A training run needs a TrainConfig.")
    config.validate(n_train=n_train)
    from .train import resolve_device

    resolve_device(config.device)  # cuda without a GPU: said before the run is queued
    info = get_info(config.dataset)
    try:
        make_config(config.model, input_dim=info.input_dim, num_classes=len(info.classes),
                    **config.model_overrides)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"Model settings: {exc}") from None
    return config


def training_data_plan(dataset: str, data_dir: str | Path | None = None,
                       holdout_sample: bool = True) -> DataPlan:
    """Which source a worker will train from, found cheaply (no image is loaded).

    Raises DataUnavailableError (with the options) when no source has the training split
    and downloading is impossible (``RIMSCOPE_OFFLINE=1``).
    """
    import numpy as np

    from .data import (
        MNIST_SAMPLE_TRAIN_INDICES,
        _find_image_folder,
        _missing_message,
        check_data_dir,
        default_data_dir,
        get_info,
        mnist_holdout_applies,
        offline,
        torchvision_root,
    )
    from .errors import DataUnavailableError

    info = get_info(dataset)
    if data_dir:  # given explicitly: it must serve this data set, or the user hears why not
        check_data_dir(data_dir, dataset)
    ddir = Path(data_dir).expanduser() if data_dir else default_data_dir()

    def after_holdout(n: int | None, has_indices: bool) -> tuple[int | None, str]:
        if n is None or dataset != "mnist" or not holdout_sample:
            return n, ""
        if not mnist_holdout_applies(n, has_indices):
            return n, (f"nothing held out: these {n:,} images are not the original 60,000-image MNIST training "
                       "set, so the bundled sample is not among them")
        lo, hi = MNIST_SAMPLE_TRAIN_INDICES.start, MNIST_SAMPLE_TRAIN_INDICES.stop
        held = max(0, min(n, hi) - lo)
        return n - held, f"train images {lo}..{hi - 1} held out (the bundled sample comes from them)"

    if ddir is not None:
        train_npz, test_npz = ddir / info.name / "train.npz", ddir / info.name / "test.npz"
        if train_npz.is_file() and test_npz.is_file():
            n = None
            try:
                with np.load(train_npz, allow_pickle=False) as d:
                    n = int(d["y"].shape[0])
            except Exception:  # the worker reports a broken file with its own message
                pass
            n, note = after_holdout(n, True)
            return DataPlan(f"npz folder ({train_npz.parent})", n, note)
    if info.name == "animals10":
        folder = _find_image_folder(ddir)
        if folder is not None:
            files = sum(1 for sub in folder.iterdir() if sub.is_dir()
                        for p in sub.iterdir() if p.suffix.lower() in (".jpg", ".jpeg", ".png"))
            return DataPlan(f"image folder ({folder}), seeded 80/20 split", int(files * 0.8) or None)
    tv = {"mnist": ("MNIST/raw/train-images-idx3-ubyte", 60_000),
          "fashion_mnist": ("FashionMNIST/raw/train-images-idx3-ubyte", 60_000),
          "cifar10": ("cifar-10-batches-py/data_batch_1", 50_000)}
    if info.name in tv:
        rel, n = tv[info.name]
        root = torchvision_root()
        if (root / rel).is_file():
            n, note = after_holdout(n, True)
            return DataPlan(f"torchvision ({root})", n, note)
        if not offline():
            n, note = after_holdout(n, True)
            return DataPlan(f"torchvision download into {root} (needs internet)", n, note)
    raise DataUnavailableError(_missing_message(info, "train"))


# ---------------------------------------------------------------------------------------
_children: dict[str, subprocess.Popen] = {}  # workers started by this process (reaped in pump)
_children_lock = threading.Lock()
_held = threading.local()  # roots whose lock this thread holds (re-entrant locking)


class RunStore:
    """Runs on disk plus the worker queue. Cheap to create; holds no open files.

    ``max_concurrent``: workers running at once (default ``RIMSCOPE_MAX_CONCURRENT`` or 1);
    0 pauses the queue.
    """

    def __init__(self, root: str | Path | None = None, max_concurrent: int | None = None):
        self.root = Path(root).expanduser() if root else default_root()
        self.max_concurrent = (max(0, int(max_concurrent)) if max_concurrent is not None
                               else default_max_concurrent())
        self.root.mkdir(parents=True, exist_ok=True)

    # -- paths and locking ----------------------------------------------------------------
    def run_dir(self, run_id: str) -> Path:
        return self.root / check_run_id(run_id)

    def _existing_dir(self, run_id: str) -> Path:
        d = self.run_dir(run_id)
        if not (d / CONFIG_FILE).is_file():
            raise RunStoreError(f"No run {run_id} in the store.")
        return d

    @contextlib.contextmanager
    def lock(self, timeout: float = 30.0):
        """Exclusive store lock (``flock`` on runs/.lock); re-entrant within a thread."""
        held = getattr(_held, "roots", None)
        if held is None:
            held = _held.roots = set()
        key = str(self.root.resolve())
        if key in held:
            yield
            return
        fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise RunStoreError("The run store is busy; try again in a moment.") from None
                    time.sleep(0.02)
            held.add(key)
            try:
                yield
            finally:
                held.discard(key)
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    # -- reading --------------------------------------------------------------------------
    def _run_ids(self) -> list[str]:
        try:
            names = [p.name for p in self.root.iterdir()]
        except OSError:
            return []
        return [n for n in names if RUN_ID_RE.fullmatch(n)]

    def read_status(self, run_id: str) -> dict:
        st = _read_json(self.run_dir(run_id) / STATUS_FILE)
        return st if isinstance(st, dict) else {}

    def _info(self, run_id: str) -> RunInfo | None:
        d = self.root / run_id
        cfg_doc = _read_json(d / CONFIG_FILE)
        if not isinstance(cfg_doc, dict):
            return None  # being deleted, or not a run
        st = _read_json(d / STATUS_FILE)
        if not isinstance(st, dict):
            st = {"status": "failed", "message": "status file missing or unreadable"}
        tc = cfg_doc.get("train_config") if isinstance(cfg_doc.get("train_config"), dict) else {}
        status = st.get("status") if st.get("status") in STATUSES else "failed"

        def as_int(v, default=0):
            return v if isinstance(v, int) and not isinstance(v, bool) else default

        seed = tc.get("seed", cfg_doc.get("seed"))
        return RunInfo(
            run_id=run_id,
            dataset=str(cfg_doc.get("dataset") or tc.get("dataset") or ""),
            model=str(cfg_doc.get("model") or tc.get("model") or ""),
            seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
            status=status,
            created=str(cfg_doc.get("created") or ""),
            updated=str(st.get("updated") or cfg_doc.get("created") or ""),
            iteration=as_int(st.get("iteration")),
            total=as_int(st.get("total"), as_int(tc.get("iterations"))),
            message=str(st.get("message") or ""),
            metrics=dict(st.get("metrics") or {}),
            owner=str(cfg_doc.get("owner") or ""),
            label=str(cfg_doc.get("label") or ""),
            config=dict(tc),
            started=str(st.get("started") or ""),
            finished=str(st.get("finished") or ""),
            pid=st.get("pid") if isinstance(st.get("pid"), int) else None,
            data_dir=cfg_doc.get("data_dir") if isinstance(cfg_doc.get("data_dir"), str) else None,
            latest=dict(st.get("latest") or {}),
            created_ts=float(cfg_doc.get("created_ts") or 0.0),
        )

    def list_runs(self, owner: str | None = None) -> list[RunInfo]:
        """Every run, newest first (``owner`` given: only that owner's)."""
        out = []
        for rid in self._run_ids():
            info = self._info(rid)
            if info is not None and (owner is None or info.owner == owner):
                out.append(info)
        out.sort(key=lambda r: (r.created_ts, r.run_id), reverse=True)
        return out

    def get(self, run_id: str) -> RunInfo | None:
        return self._info(check_run_id(run_id))

    def read_metrics(self, run_id: str) -> dict:
        return read_metrics_file(self.run_dir(run_id) / METRICS_FILE)

    def checkpoint_stem(self, run_id: str) -> Path | None:
        """``runs/<id>/model`` when the run is completed, stopped or uploaded and has weights."""
        d = self.run_dir(run_id)
        if self.read_status(run_id).get("status") not in WITH_WEIGHTS:
            return None
        stem = d / CKPT_STEM
        if stem.with_suffix(".safetensors").is_file() and stem.with_suffix(".json").is_file():
            return stem
        return None

    # -- writing --------------------------------------------------------------------------
    def _check_capacity(self, queued_extra: int = 0) -> None:
        ids = self._run_ids()
        if len(ids) >= MAX_RUNS:
            raise RunStoreError(f"The run store holds {len(ids)} runs (at most {MAX_RUNS}); delete some first.")
        if queued_extra:
            queued = sum(1 for r in ids if self.read_status(r).get("status") == "queued")
            if queued + queued_extra > MAX_QUEUED:
                raise RunStoreError(f"{queued} runs are already waiting (at most {MAX_QUEUED}); "
                                    "wait for them or stop some.")

    def _create(self, config_doc: dict, status_doc: dict, files: dict[str, bytes] | None = None) -> str:
        """Create a run folder complete or not at all (built under a hidden name, then renamed)."""
        for _ in range(10):
            run_id = new_run_id()
            if not (self.root / run_id).exists():
                break
        else:  # pragma: no cover
            raise RunStoreError("Could not find a free run id.")
        tmp = self.root / f".new-{run_id}"
        try:
            tmp.mkdir()
            now = time.time()
            config_doc = {"run_id": run_id, "created": _now_iso(now), "created_ts": now, **config_doc}
            status_doc = {"created": _now_iso(now), "updated": _now_iso(now), **status_doc}
            for name, data in (files or {}).items():
                _atomic_write_bytes(tmp / name, data)
            (tmp / METRICS_FILE).touch()
            _write_json(tmp / STATUS_FILE, status_doc)
            _write_json(tmp / CONFIG_FILE, config_doc)
            os.rename(tmp, self.root / run_id)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return run_id

    def submit(self, config: TrainConfig, owner: str = "", label: str = "",
               data_dir: str | Path | None = None) -> str:
        """Queue a training run; returns its id. ConfigError on bad settings.

        ``threads`` left at None becomes 1 (env ``RIMSCOPE_WORKER_THREADS``): workers share
        the machine with the server and each other.
        """
        validate_config(config)
        if data_dir:
            data_dir = str(Path(data_dir).expanduser())
            if not Path(data_dir).is_dir():
                raise ConfigError(f"The data folder {data_dir} does not exist.")
        if config.threads is None:
            try:
                threads = max(1, int(os.environ.get("RIMSCOPE_WORKER_THREADS", "1")))
            except ValueError:
                threads = 1
            config = dataclasses.replace(config, threads=threads)
        with self.lock():
            self._check_capacity(queued_extra=1)
            return self._create(
                {"kind": "train", "dataset": config.dataset, "model": config.model,
                 "owner": _clean_text(owner, 100), "label": _clean_text(label),
                 "data_dir": data_dir or None, "train_config": config.to_dict()},
                {"status": "queued", "pid": None, "iteration": 0, "total": config.iterations,
                 "message": "waiting for a free worker", "metrics": {}, "latest": {}})

    def import_checkpoint(self, weights: bytes, meta: bytes, expected_dataset: str | None = None,
                          owner: str = "", label: str = "") -> str:
        """Store an uploaded checkpoint as a new run with status "uploaded".

        Validated in full (core.checkpoint.load_checkpoint_bytes, size limits, the model fits
        its data set) before anything is written; on any problem a CheckpointError is raised
        and the store is unchanged.
        """
        from .data import DATASETS

        weights = bytes(weights) if isinstance(weights, (bytearray, memoryview)) else weights
        meta = bytes(meta) if isinstance(meta, (bytearray, memoryview)) else meta
        if not isinstance(weights, bytes) or not isinstance(meta, bytes):
            raise CheckpointError("Upload both files: the weights (.safetensors) and the metadata (.json).")
        if len(weights) > MAX_UPLOAD_BYTES:
            raise CheckpointError(f"The weights file is too large (over {MAX_UPLOAD_BYTES // 2**20} MB).")
        if len(meta) > MAX_META_UPLOAD_BYTES:
            raise CheckpointError(f"The metadata file is too large (over {MAX_META_UPLOAD_BYTES // 2**20} MB).")
        from .checkpoint import load_checkpoint_bytes
        from .models import count_parameters

        model, meta_doc = load_checkpoint_bytes(weights, meta, expected_dataset=expected_dataset)
        ds = meta_doc.get("dataset")
        if ds not in DATASETS:
            raise CheckpointError("The metadata does not name a known data set "
                                  f"({', '.join(DATASETS)}); add \"dataset\" to the JSON.")
        info = DATASETS[ds]
        cfg = getattr(model, "config", None)
        if getattr(cfg, "input_dim", info.input_dim) != info.input_dim:
            raise CheckpointError(f"The model reads rows of {cfg.input_dim} values; {info.title} rows have "
                                  f"{info.input_dim}.")
        if getattr(cfg, "num_classes", len(info.classes)) != len(info.classes):
            raise CheckpointError(f"The model has {cfg.num_classes} outputs; {info.title} has "
                                  f"{len(info.classes)} classes.")
        seed = meta_doc.get("seed")
        tc = meta_doc.get("train_config") if isinstance(meta_doc.get("train_config"), dict) else {}
        metrics = _scalars(meta_doc.get("metrics"))
        metrics.setdefault("parameters", count_parameters(model))
        with self.lock():
            self._check_capacity()
            return self._create(
                {"kind": "upload", "dataset": ds, "model": meta_doc["model"],
                 "seed": seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
                 "owner": _clean_text(owner, 100), "label": _clean_text(label),
                 "data_dir": None, "train_config": _finite(tc)},
                {"status": "uploaded", "pid": None, "iteration": 0, "total": 0,
                 "message": "uploaded checkpoint", "metrics": metrics, "latest": {},
                 "finished": _now_iso()},
                files={CKPT_STEM + ".safetensors": weights, CKPT_STEM + ".json": meta})

    def _set_status(self, run_id: str, **changes) -> dict:
        d = self.run_dir(run_id)
        st = self.read_status(run_id)
        st.update(changes, updated=_now_iso())
        _write_json(d / STATUS_FILE, st)
        return st

    def request_stop(self, run_id: str) -> str:
        """Ask a run to stop; returns its status afterwards.

        A running worker sees the stop file within one iteration and saves what it learned;
        a queued run is marked stopped at once; a finished run is left as it is.
        """
        d = self._existing_dir(run_id)
        with self.lock():
            status = self.read_status(run_id).get("status")
            if status == "queued":
                self._set_status(run_id, status="stopped", message="stopped before it started",
                                 finished=_now_iso())
                return "stopped"
            if status == "running":
                (d / STOP_FILE).touch()
            return status or "failed"

    def resume(self, run_id: str) -> str:
        """Queue an interrupted or stopped run again; returns "queued".

        Its worker continues from the newest intact training checkpoint (or from the start
        when there is none yet: the same run, bit for bit). RunStoreError for other statuses.
        """
        from .resume import last_iteration

        d = self._existing_dir(run_id)
        with self.lock():
            st = self.read_status(run_id)
            status = st.get("status")
            cfg_doc = _read_json(d / CONFIG_FILE) or {}
            if status not in RESUMABLE or cfg_doc.get("kind", "train") != "train":
                raise RunStoreError(f"Run {run_id} is {status}; only interrupted or stopped runs can be resumed.")
            queued = sum(1 for r in self._run_ids() if self.read_status(r).get("status") == "queued")
            if queued >= MAX_QUEUED:
                raise RunStoreError(f"{queued} runs are already waiting (at most {MAX_QUEUED}); "
                                    "wait for them or stop some.")
            (d / STOP_FILE).unlink(missing_ok=True)
            saved = last_iteration(d / CKPT_DIR) or 0
            where = f"from iteration {saved}" if saved else "from the start (no checkpoint yet)"
            self._set_status(run_id, status="queued", pid=None, host=None, heartbeat=None, finished="",
                             iteration=saved, metrics={}, resumes=int(st.get("resumes") or 0) + 1,
                             message=f"waiting for a free worker; resumes {where}")
        return "queued"

    def delete(self, run_id: str) -> None:
        """Remove a run and its files. Refused while its worker runs (stop it first)."""
        d = self._existing_dir(run_id)
        with self.lock():
            st = self.read_status(run_id)
            if st.get("status") == "running" and worker_alive(st.get("pid"), run_id):
                raise RunStoreError(f"Run {run_id} is still running; stop it first.")
            trash = self.root / f".trash-{run_id}-{secrets.token_hex(2)}"
            os.rename(d, trash)  # readers never see a half-deleted run
        with _children_lock:
            _children.pop(run_id, None)
        with _metrics_lock:
            _metrics_cache.pop(str(d / METRICS_FILE), None)
        shutil.rmtree(trash, ignore_errors=True)

    # -- the queue ------------------------------------------------------------------------
    def _mark_dead(self, run_id: str, st: dict, why: str) -> None:
        d = self.run_dir(run_id)
        st = self.read_status(run_id)  # re-read: the worker may have finished just before it ended
        if st.get("status") != "running":
            return
        m = read_metrics_file(d / METRICS_FILE)
        it = m["iteration"][-1] if m["iteration"] else int(st.get("iteration") or 0)
        latest = dict(st.get("latest") or {})
        if m["loss"]:
            latest.update(loss=m["loss"][-1], batch_acc=m["batch_acc"][-1])
        if m["test_acc"]:
            latest.update(test_acc=m["test_acc"][-1], test_loss=m["test_loss"][-1])
        from .resume import last_iteration

        saved = last_iteration(d / CKPT_DIR)
        where = (f"resume continues from its checkpoint at iteration {saved}" if saved
                 else "resume starts it again (no checkpoint yet)")
        self._set_status(run_id, status="interrupted", iteration=it, latest=latest, finished=_now_iso(),
                         message=f"{why} after {it} iterations; the metrics so far are kept; {where}")
        for tmp in d.glob(".*.tmp"):  # half-written files of the dead worker
            tmp.unlink(missing_ok=True)

    def _spawn(self, run_id: str) -> subprocess.Popen:
        d = self.run_dir(run_id)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        env.setdefault("OMP_NUM_THREADS", "1")
        env.setdefault("MKL_NUM_THREADS", "1")
        with open(d / LOG_FILE, "ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", "core.runs", "worker", str(d)], cwd=str(ROOT),
                                    env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, close_fds=True)
        with _children_lock:
            _children[run_id] = proc
        return proc

    def pump(self, lock_timeout: float = 2.0) -> list[str]:
        """Mark dead workers "interrupted" and start queued runs up to ``max_concurrent``.

        Returns the ids started. Safe to call often and from many sessions/processes: it
        holds the store lock, and gives up quietly when another caller holds it for longer
        than ``lock_timeout`` seconds (that caller does the same work).
        """
        with _children_lock:  # reap workers this process started, so none stays a zombie
            for rid, proc in list(_children.items()):
                if proc.poll() is not None:
                    del _children[rid]
        started: list[str] = []
        try:
            with self.lock(timeout=lock_timeout):
                self._cleanup_hidden()
                running, queued = 0, []
                now = time.time()
                for rid in self._run_ids():
                    st = self.read_status(rid)
                    status = st.get("status")
                    if status == "running":
                        if st.get("host") not in (None, socket.gethostname()):
                            alive = True  # another machine's worker: only the heartbeat tells
                        else:
                            alive = worker_alive(st.get("pid"), rid)
                        beat = st.get("heartbeat")
                        stale = isinstance(beat, (int, float)) and now - beat > STALE_AFTER_S
                        if not alive:
                            self._mark_dead(rid, st, "the worker process ended unexpectedly")
                        elif stale:
                            pid = st.get("pid")
                            if (st.get("host") in (None, socket.gethostname()) and isinstance(pid, int)
                                    and pid != os.getpid()):  # a hung worker (verified ours above)
                                with contextlib.suppress(OSError):
                                    os.kill(pid, signal.SIGKILL)
                            self._mark_dead(rid, st, f"no heartbeat from the worker for over {STALE_AFTER_S:.0f} s")
                        else:
                            running += 1
                    elif status == "queued":
                        cfg_doc = _read_json(self.root / rid / CONFIG_FILE) or {}
                        queued.append((float(cfg_doc.get("created_ts") or 0.0), rid))
                for _, rid in sorted(queued):
                    if running >= self.max_concurrent:
                        break
                    try:
                        proc = self._spawn(rid)
                    except OSError as exc:  # e.g. out of processes or memory: tell, don't retry forever
                        self._set_status(rid, status="failed", finished=_now_iso(),
                                         message=f"could not start a worker process ({exc})")
                        continue
                    now_iso = _now_iso()
                    self._set_status(rid, status="running", pid=proc.pid, host=socket.gethostname(),
                                     started=now_iso, heartbeat=time.time(), message="starting the worker")
                    running += 1
                    started.append(rid)
        except RunStoreError:
            return started
        return started

    def _cleanup_hidden(self, older_than_s: float = 3600.0) -> None:
        """Remove leftovers of crashed creates/deletes (hidden folders, old enough)."""
        now = time.time()
        for p in self.root.iterdir():
            if p.is_dir() and (p.name.startswith(".new-") or p.name.startswith(".trash-")):
                try:
                    if p.name.startswith(".trash-") or now - p.stat().st_mtime > older_than_s:
                        shutil.rmtree(p, ignore_errors=True)
                except OSError:
                    pass

    def wait(self, run_id: str, timeout: float = 60.0, poll: float = 0.2,
             until: tuple = FINISHED) -> RunInfo | None:
        """Pump and poll until the run reaches one of ``until`` (tests and the CLI)."""
        deadline = time.monotonic() + timeout
        while True:
            self.pump()
            info = self.get(run_id)
            if info is None or info.status in until or time.monotonic() >= deadline:
                return info
            time.sleep(poll)


# ---------------------------------------------------------------------------------------
# the worker
def _truncate_metrics(path: Path, upto: int) -> None:
    """Keep the lines of ``metrics.jsonl`` up to iteration ``upto`` (a resumed run's past), atomically."""
    try:
        raw = path.read_bytes()
    except OSError:
        return
    if not raw:
        return
    keep = []
    for line in raw.split(b"\n")[:-1]:  # the part after the last newline is torn
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if isinstance(ev, dict) and isinstance(ev.get("iteration"), int) and ev["iteration"] <= upto:
            keep.append(line + b"\n")
    data = b"".join(keep)
    if data != raw:
        _atomic_write_bytes(path, data)
        with _metrics_lock:
            _metrics_cache.pop(str(path), None)


class _Terminated(Exception):
    pass


class _StatusWriter:
    """The worker's view of status.json: progress in memory, written at most every second,
    a heartbeat thread, and nothing written after the final status."""

    def __init__(self, path: Path, status: dict):
        self.path, self.st = path, dict(status)
        self.lock = threading.RLock()  # a SIGTERM handler may raise inside write()
        self.last_write = 0.0
        self.final = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="rimscope-heartbeat", daemon=True)

    def start(self):
        self._thread.start()

    def _beat(self):
        while not self._stop.wait(HEARTBEAT_S):
            self.write(force=True)

    def update(self, **changes):
        with self.lock:
            self.st.update(changes)

    def write(self, force: bool = False, final: bool = False, **changes):
        with self.lock:
            if self.final:
                return
            self.st.update(changes)
            now = time.time()
            if not (force or final) and now - self.last_write < STATUS_EVERY_S:
                return
            self.st.update(heartbeat=now, updated=_now_iso(now))
            if final:
                self.st["finished"] = _now_iso(now)
                self.final = True
            _write_json(self.path, self.st)
            self.last_write = now

    def close(self):
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)


def run_worker(run_dir: str | Path, install_signals: bool = False) -> str:
    """Run one queued run to its end in this process; returns the final status.

    ``pump()`` runs this in a fresh process (``python -m core.runs worker``); tests may call
    it directly. Claims the run under the store lock first, so a run is never trained twice.
    """
    run_dir = Path(run_dir).resolve()
    run_id = check_run_id(run_dir.name)
    store = RunStore(root=run_dir.parent)
    state = {"phase": "starting", "term": False}

    # claim: queued (a pump that died before recording us) or running with our pid
    with store.lock(timeout=120):
        st = store.read_status(run_id)
        status, pid = st.get("status"), st.get("pid")
        mine = status == "running" and pid == os.getpid()
        if not (status == "queued" or mine):
            if status == "running" and not worker_alive(pid, run_id):
                pass  # the worker recorded there is gone: take over
            else:
                print(f"worker {os.getpid()} did not claim {run_id} (status {status}, pid {pid})", flush=True)
                return str(status)
        print(f"worker {os.getpid()} claimed {run_id}", flush=True)
        writer = _StatusWriter(run_dir / STATUS_FILE, st)
        writer.write(force=True, status="running", pid=os.getpid(), host=socket.gethostname(),
                     started=st.get("started") or _now_iso(), message="loading data")
    writer.start()

    old_handler = None
    if install_signals:
        def on_term(signum, frame):
            state["term"] = True
            if state["phase"] == "starting":
                raise _Terminated()
        old_handler = signal.signal(signal.SIGTERM, on_term)

    stop_file = run_dir / STOP_FILE
    metrics_f = None
    try:
        cfg_doc = _read_json(run_dir / CONFIG_FILE) or {}
        from .train import TrainConfig, prepare_training_data, run_metadata, train

        cfg = TrainConfig.from_dict(dict(cfg_doc.get("train_config") or {}))
        validate_config(cfg)
        if stop_file.exists():
            writer.write(final=True, status="stopped", message="stopped before training started")
            return "stopped"
        train_data, test_data, note = prepare_training_data(cfg, cfg_doc.get("data_dir") or None)
        cfg.validate(n_train=len(train_data))
        from .resume import latest_state, remove_states

        ckpt_dir = run_dir / CKPT_DIR
        resume_from = latest_state(ckpt_dir, on_damaged=lambda p, e: print(f"skipping a damaged checkpoint: {e}",
                                                                              flush=True))
        start = resume_from.iteration if resume_from is not None else 0
        _truncate_metrics(run_dir / METRICS_FILE, start)  # what the killed worker did after its checkpoint
        train_msg = f"training on {train_data.source} ({len(train_data)} images)"
        latest = {}
        if resume_from is not None:
            train_msg += f"; resumed from iteration {start}"
            h, e = resume_from.history, resume_from.evals
            if h.get("loss"):
                latest.update(loss=h["loss"][-1], batch_acc=h["batch_acc"][-1])
            if e.get("test_acc"):
                latest.update(test_acc=e["test_acc"][-1], test_loss=e["test_loss"][-1])
        writer.write(force=True, message=train_msg, total=cfg.iterations, data_source=train_data.source,
                     n_train=len(train_data), iteration=start, latest=_finite(latest))
        metrics_f = open(run_dir / METRICS_FILE, "a", encoding="utf-8")

        def callback(ev: dict):
            if ev["kind"] == "checkpoint":  # not a metric: shown in the status only
                writer.write(force=True, checkpoint={"iteration": ev["iteration"], "ok": ev["ok"]},
                             message=train_msg if ev["ok"] else f"training goes on, but {ev['message']}")
                return
            line = {k: _finite(v) for k, v in ev.items()}
            metrics_f.write(json.dumps(line, allow_nan=False) + "\n")
            metrics_f.flush()
            latest = dict(writer.st.get("latest") or {})
            if ev["kind"] == "iter":
                latest.update(loss=line.get("loss"), batch_acc=line.get("batch_acc"))
                writer.write(iteration=ev["iteration"], latest=latest)
            else:
                latest.update(test_acc=line.get("test_acc"), test_loss=line.get("test_loss"))
                writer.write(force=True, latest=latest)

        def should_stop() -> bool:
            return state["term"] or stop_file.exists()

        state["phase"] = "training"
        result = train(cfg, train_data, test_data, callback=callback, should_stop=should_stop,
                       checkpoint_dir=ckpt_dir, resume_from=resume_from, checkpoint_extra={"run_id": run_id})
        state["phase"] = "finishing"
        metrics_f.close()
        metrics_f = None
        done = int(result.metrics.get("iterations_done", 0))
        status, message = result.status, result.message
        if status == "stopped" and state["term"] and not stop_file.exists():
            message = f"stopped by a termination signal after {done} iterations"
        if status in ("completed", "stopped") and done >= 1:
            meta = run_metadata(cfg, result, train_data, test_data, note)
            meta.update(run_id=run_id, run_name=run_id)
            writer.write(force=True, message="saving the checkpoint")
            from .checkpoint import save_checkpoint

            save_checkpoint(result.model, meta, run_dir / CKPT_STEM)
        elif status == "stopped":
            message = "stopped before the first iteration; nothing to save"
        if status in ("completed", "diverged"):
            remove_states(ckpt_dir)  # nothing left to resume
        elif status == "stopped" and result.checkpoint is not None:
            message += "; it can be resumed"
        writer.write(final=True, status=status, message=message, iteration=done,
                     metrics=_scalars(result.metrics))
        return status
    except _Terminated:
        writer.write(final=True, status="interrupted", message="the worker was terminated before training started")
        return "interrupted"
    except RimscopeError as exc:
        writer.write(final=True, status="failed", message=str(exc))
        return "failed"
    except Exception as exc:  # noqa: BLE001 - reported to the user, traceback in worker.log
        import traceback

        traceback.print_exc()
        writer.write(final=True, status="failed", message=f"unexpected problem ({type(exc).__name__}: {exc})")
        return "failed"
    finally:
        if metrics_f is not None:
            metrics_f.close()
        writer.close()
        if install_signals and old_handler is not None:
            signal.signal(signal.SIGTERM, old_handler)


# ---------------------------------------------------------------------------------------
def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m core.runs", description="The RIMscope run store.")
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("worker", help="run one queued run (started by pump())")
    w.add_argument("run_dir")
    sub.add_parser("list", help="list the runs")
    sub.add_parser("pump", help="start queued runs and mark dead workers")
    s = sub.add_parser("stop", help="ask a run to stop")
    s.add_argument("run_id")
    r = sub.add_parser("resume", help="continue an interrupted or stopped run from its last checkpoint")
    r.add_argument("run_id")
    args = p.parse_args(argv)
    try:
        if args.cmd == "worker":
            with contextlib.suppress(OSError, AttributeError):
                os.nice(int(os.environ.get("RIMSCOPE_WORKER_NICE", "5")))
            status = run_worker(args.run_dir, install_signals=True)
            print(f"worker {os.getpid()} finished: {status}", flush=True)
            return 0
        store = RunStore()
        if args.cmd == "list":
            for r in store.list_runs():
                print(f"{r.run_id}  {r.status:<11} {r.dataset:<13} {r.model:<13} seed {r.seed}  "
                      f"{r.iteration}/{r.total}  {r.message}")
        elif args.cmd == "pump":
            print("started:", ", ".join(store.pump()) or "none")
        elif args.cmd == "stop":
            print(store.request_stop(args.run_id))
        elif args.cmd == "resume":
            store.resume(args.run_id)
            started = args.run_id in store.pump()
            print("running" if started else "queued")
    except RimscopeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
