"""The Ray engine (core.grid.ray): a tiny grid through a local Ray with 2 CPUs gives the local
pool's results bit for bit, resumes, survives a killed worker, retries a failing cell once,
and the CLI starts and stops its own Ray. Needs ``ray`` (requirements-scale.txt): skipped
without it, except under CI=true, where a missing ray fails."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest

try:
    import ray
except ImportError:
    if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes"):
        pytest.fail("ray is not installed but CI=true: pip install -r requirements-scale.txt", pytrace=False)
    pytest.skip("ray is not installed (pip install -r requirements-scale.txt)", allow_module_level=True)

from safetensors.numpy import load_file

from core.grid import cells, cli
from core.grid import local as local_mod
from core.grid import ray as engine

pytestmark = pytest.mark.slow  # make test-slow (CI runs it after make test)

REPO = Path(__file__).resolve().parents[1]
DATASETS = ["fashion_mnist", "cifar10"]
MODELS = ["parallel_lstm", "indrnn"]
SMALL = ["parallel_lstm.hidden_size=8", "indrnn.hidden_size=8"]
GRID = dict(iterations=5, noise_draws=1, eval_every=5)


def write_tiny_data(root: Path, datasets=DATASETS) -> Path:
    """200 train and 60 test images per data set; the class is which row is bright."""
    rng = np.random.default_rng(0)
    shapes = {"fashion_mnist": (28, 28), "cifar10": (32, 32, 3)}
    for ds in datasets:
        (root / ds).mkdir(parents=True, exist_ok=True)
        for split, n in (("train", 200), ("test", 60)):
            y = rng.integers(0, 10, n)
            x = np.zeros((n, *shapes[ds]), np.uint8)
            x[np.arange(n), y * 2 + 3] = 255
            np.savez(root / ds / f"{split}.npz", x=x, y=y.astype(np.int64),
                     classes=np.array([str(i) for i in range(10)]))
    return root


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    out, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.add(c)
            todo.append(c)
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:120]
    except OSError:
        return "?"


def _wait_gone(pids, timeout: float = 60.0) -> set[int]:
    """The processes of ``pids`` still alive after ``timeout`` s (generous: on a loaded 2-core
    machine Ray's raylet and its agents take tens of seconds to exit after ray.shutdown())."""
    deadline = time.monotonic() + timeout
    left = {p for p in pids if _alive(p)}
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = {p for p in left if _alive(p)}
    return left


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory):
    """One local Ray with 2 CPUs for the module; afterwards no process of it may be left."""
    saved = os.environ.get("RIMSCOPE_OFFLINE")
    os.environ["RIMSCOPE_OFFLINE"] = "1"  # the workers inherit it: never a download
    # the local pool the tests compare with spawns its workers, which starts multiprocessing's
    # resource tracker (a child that lives as long as this process): start it first, so it is not
    # taken for a process Ray left behind
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    before = _descendants(os.getpid())
    engine.start_ray(num_cpus=2)
    try:
        yield ray
    finally:
        # Ray's own processes (raylet, GCS, workers, agents: "ray" in their command line), not a
        # child another module's kept browser spawned meanwhile in this test process
        ray_pids = {p for p in _descendants(os.getpid()) - before if "ray" in _cmdline(p).lower()}
        ray.shutdown()
        if saved is None:
            os.environ.pop("RIMSCOPE_OFFLINE", None)
        else:
            os.environ["RIMSCOPE_OFFLINE"] = saved
        left = _wait_gone(ray_pids)
        names = {pid: _cmdline(pid) for pid in left}
        for pid in left:  # do not leave them running on a shared machine, then fail
            os.kill(pid, signal.SIGKILL)
        assert not left, f"Ray processes left after ray.shutdown(): {names}"


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    return write_tiny_data(tmp_path_factory.mktemp("engine_data"))


def _cells(out: Path):
    return sorted(p.relative_to(out).as_posix() for p in (out / "runs").rglob("*") if p.is_file())


def _same_run(a: Path, b: Path) -> None:
    ma, mb = json.loads(a.read_text()), json.loads(b.read_text())
    assert ma["history"]["loss"] == mb["history"]["loss"]  # per-iteration losses, exactly
    assert ma["metrics"]["test_error"] == mb["metrics"]["test_error"]
    wa, wb = load_file(a.with_suffix(".safetensors")), load_file(b.with_suffix(".safetensors"))
    assert wa.keys() == wb.keys()
    for k in wa:
        assert wa[k].dtype == wb[k].dtype and wa[k].tobytes() == wb[k].tobytes(), k  # bit for bit


def test_ray_grid_matches_local_pool_and_resumes(local_ray, tiny_data, tmp_path, monkeypatch):
    overrides = cells.parse_model_overrides(SMALL)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # the local pool: 2 workers x 1 thread, as the Ray cells
    local = local_mod.run_grid(tmp_path / "local", DATASETS, MODELS, [0], workers=2, data_dir=str(tiny_data),
                               log=lambda s: None, overrides=overrides, **GRID)
    log: list[str] = []
    done = engine.run_grid_ray(tmp_path / "ray", DATASETS, MODELS, [0], workers=2, threads=1, data_dir=str(tiny_data),
                               log=log.append, overrides=overrides, progress=False, **GRID)
    print("\n".join(log))
    assert len(local) == len(done) == 4 and all(r["status"] == "completed" for r in done)
    assert _cells(tmp_path / "local") == _cells(tmp_path / "ray")  # same files at the same places
    for ds in DATASETS:
        for m in MODELS:
            _same_run(cells.run_path(tmp_path / "local", ds, m, 0), cells.run_path(tmp_path / "ray", ds, m, 0))
    # resume: a second run finds every cell finished and touches nothing
    stamps = {p: p.stat().st_mtime_ns for p in (tmp_path / "ray" / "runs").rglob("*")}
    again: list[str] = []
    assert engine.run_grid_ray(tmp_path / "ray", DATASETS, MODELS, [0], workers=2, threads=1, data_dir=str(tiny_data),
                               log=again.append, overrides=overrides, progress=False, **GRID) == []
    assert any(s.startswith("0 runs to train") for s in again)
    assert stamps == {p: p.stat().st_mtime_ns for p in (tmp_path / "ray" / "runs").rglob("*")}


def _kill_when_running(name: str, stop: threading.Event, killed: list) -> None:
    """SIGKILL the Ray worker whose process title is ``ray::<name>`` (it is running that cell)."""
    title = f"ray::{name}".encode()
    while not stop.is_set() and not killed:
        for d in Path("/proc").iterdir():
            if not d.name.isdigit():
                continue
            try:
                if (d / "cmdline").read_bytes().startswith(title):
                    os.kill(int(d.name), signal.SIGKILL)
                    killed.append(int(d.name))
                    return
            except (OSError, ProcessLookupError):
                continue
        time.sleep(0.005)


def test_killed_worker_is_redone_and_the_store_stays_consistent(local_ray, tiny_data, tmp_path):
    kw = dict(iterations=60, noise_draws=1, eval_every=20, workers=2, threads=1, data_dir=str(tiny_data),
              progress=False, overrides=cells.parse_model_overrides(SMALL))
    job = {"dataset": "fashion_mnist", "model": "parallel_lstm", "seed": 0}
    stop, killed = threading.Event(), []
    watcher = threading.Thread(target=_kill_when_running, args=(engine.cell_name(job), stop, killed), daemon=True)
    watcher.start()
    log: list[str] = []
    try:
        done = engine.run_grid_ray(tmp_path / "killed", ["fashion_mnist"], MODELS, [0], log=log.append, **kw)
    finally:
        stop.set()
        watcher.join()
    print("\n".join(log))
    assert killed, "the cell's worker was never seen running"
    assert sorted(r["model"] for r in done) == sorted(MODELS)  # every cell once
    assert any("parallel_lstm s0" in s and "redone" in s for s in log)
    assert [r["attempts"] for r in done if r["model"] == "parallel_lstm"] == [2]
    out = tmp_path / "killed"
    files = _cells(out)
    assert not [f for f in files if f.endswith(".tmp") or "/." in f], files  # no half-written file
    assert sorted(f for f in files if f.endswith(".json")) == [f"runs/fashion_mnist/{m}_s0.json" for m in sorted(MODELS)]
    # the redone cell is the cell an undisturbed run gives
    engine.run_grid_ray(tmp_path / "calm", ["fashion_mnist"], ["parallel_lstm"], [0], log=lambda s: None, **kw)
    _same_run(cells.run_path(out, "fashion_mnist", "parallel_lstm", 0),
              cells.run_path(tmp_path / "calm", "fashion_mnist", "parallel_lstm", 0))


def test_failing_cell_is_retried_once_then_reported(local_ray, tmp_path):
    data = tmp_path / "data" / "cifar10"
    data.mkdir(parents=True)
    for split in ("train", "test"):  # wrong image size: the cell raises when it loads its data
        np.savez(data / f"{split}.npz", x=np.zeros((20, 28, 28), np.uint8), y=np.zeros(20, np.int64),
                 classes=np.array([str(i) for i in range(10)]))
    log: list[str] = []
    done = engine.run_grid_ray(tmp_path / "out", ["cifar10"], ["indrnn"], [0], workers=2, threads=1,
                               data_dir=str(tmp_path / "data"), log=log.append, progress=False, **GRID)
    print("\n".join(log))
    assert done == []
    assert sum("trying once more" in s for s in log) == 1 and sum("FAILED twice" in s for s in log) == 1
    assert not cells.run_path(tmp_path / "out", "cifar10", "indrnn", 0).exists()


def test_infeasible_cells_are_refused_not_waited_for(local_ray, tiny_data, tmp_path):
    for kw in (dict(threads=3), dict(threads=1, device="cuda")):
        if kw.get("device") == "cuda" and ray.cluster_resources().get("GPU", 0):
            continue  # this machine has a GPU: the cells would run
        with pytest.raises(RuntimeError, match="CPUs|GPU"):
            engine.run_grid_ray(tmp_path, ["fashion_mnist"], ["indrnn"], [0], workers=1, data_dir=str(tiny_data),
                                log=lambda s: None, progress=False, **GRID, **kw)


def test_task_resources_follow_threads_and_device():
    job = {"dataset": "mnist", "model": "rim", "seed": 1, "threads": 3}
    assert engine.task_options({**job, "device": "cpu"})["num_gpus"] == 0
    assert engine.task_options({**job, "device": "auto"})["num_gpus"] == 0
    opts = engine.task_options({**job, "device": "cuda"})
    assert opts["num_gpus"] == 1 and opts["num_cpus"] == 3 and opts["max_retries"] == 1
    jobs = cells.grid_jobs(Path("/nonexistent"), ["mnist"], ["rim"], [0, 1], threads=2, device="cuda")
    assert [(j["seed"], j["device"], j["threads"]) for j in jobs] == [(0, "cuda", 2), (1, "cuda", 2)]


def test_without_ray_the_cli_says_how_to_install_it(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # "import ray" now raises ImportError
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", "--engine", "ray", "--datasets", "mnist", "--models", "rim", "--seeds", "0"])
    assert exc.value.code == 2
    assert "pip install -r requirements-scale.txt" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # --device takes auto, cpu or cuda only
        cli.main(["run", "--engine", "ray", "--device", "tpu"])


def test_cli_starts_a_local_ray_and_leaves_no_process(tmp_path):
    data = write_tiny_data(tmp_path / "data", ["fashion_mnist"])
    ray_tmp = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Ray's socket paths must stay short
    env = {**os.environ, "RIMSCOPE_OFFLINE": "1", "RAY_TMPDIR": ray_tmp}
    cmd = [sys.executable, "-m", "core.reproduce", "run", "--engine", "ray", "--workers", "1", "--threads", "1",
           "--datasets", "fashion_mnist", "--models", "indrnn", "--seeds", "0", "--iterations", "3",
           "--eval-every", "3", "--noise-draws", "1", "--set", "indrnn.hidden_size=8",
           "--data-dir", str(data), "--out", str(tmp_path / "out")]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        text, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    print(text)
    assert proc.returncode == 0
    assert "Ray started locally" in text and "1 runs to train" in text
    assert json.loads(cells.run_path(tmp_path / "out", "fashion_mnist", "indrnn", 0).read_text())["status"] == "completed"
    assert (tmp_path / "out" / "tables.md").is_file()
    # every process of that Ray (its session lives under ray_tmp) has ended with the command
    def leftovers():
        found = []
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    sid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[3])  # session id
                    if sid == proc.pid or ray_tmp.encode() in (d / "cmdline").read_bytes():
                        found.append(int(d.name))
                except (OSError, IndexError, ValueError):
                    continue
        return {p for p in found if _alive(p)}
    left = _wait_gone(leftovers())
    names = {pid: _cmdline(pid) for pid in left}
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(ray_tmp, ignore_errors=True)
    assert not left, f"processes of the CLI's Ray left running: {names}"
