"""Crash test: kill -9 a training worker at random moments; the store must stay intact.

After each kill: every JSON file in the store parses, list_runs works, an earlier completed
run is unchanged and loads, and after pump() the killed run is "interrupted" with its
metrics up to the worker's last write. Delays are seeded (random.Random(2024)): some kills
land while the worker starts (imports, claim, data), most while it trains and writes.

Then the training itself: ``python -m core.train`` killed with SIGKILL 10 times at seeded
points and resumed with ``--resume`` after each ends with the weights of an uninterrupted run.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import sys
import time
from pathlib import Path

import pytest
import torch

from core import catalog
from core.runs.queue import worker_alive
from core.runs.store import RunStore
from core.runs.worker import run_worker
from core.training.config import TrainConfig
from core.training.weights import load_weights
from tests.run_helpers import kill_running_workers, write_tiny_mnist

KILLS = 5


def tiny(**kw) -> TrainConfig:
    base = dict(dataset="mnist", model="parallel_lstm", iterations=30, batch_size=20, eval_every=5,
                eval_samples=50, noise_draws=1, holdout_sample=False,
                model_overrides={"num_units": 1, "hidden_size": 8})
    base.update(kw)
    return TrainConfig(**base)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def store_readable(store: RunStore) -> list[str]:
    """Problems found reading the whole store (empty when intact)."""
    problems = []
    for p in store.root.rglob("*.json"):
        try:
            json.loads(p.read_text())
        except ValueError as exc:
            problems.append(f"{p}: {exc}")
    try:
        store.list_runs()
        for r in store.list_runs():
            store.read_metrics(r.run_id)
    except Exception as exc:  # noqa: BLE001
        problems.append(f"list/read failed: {exc!r}")
    return problems


@pytest.fixture
def store(tiny_mnist_home):
    s = RunStore(max_concurrent=1)
    yield s
    kill_running_workers(s)


def wait_dead(pid: int, run_id: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while worker_alive(pid, run_id) and time.monotonic() < deadline:
        time.sleep(0.02)


@pytest.mark.slow
def test_kill_9_at_random_points(store):
    # an earlier completed run (trained in this process: fast) that must survive every crash
    done = store.submit(tiny())
    assert run_worker(store.run_dir(done)) == "completed"
    stem = store.weights_stem(done)
    fingerprint = {p.name: digest(p) for p in store.run_dir(done).iterdir() if p.name != "worker.log"}

    # all workers start at once (their torch imports overlap); each is killed at its own time:
    # a seeded delay after it began training, or (every third) after it was started
    rng = random.Random(2024)
    store.max_concurrent = KILLS
    plan = {}
    for k in range(KILLS):
        rid = store.submit(tiny(iterations=200_000, seed=k, eval_every=rng.choice([3, 7, 50])))
        plan[rid] = ("training" if k % 3 != 1 else "starting", rng.uniform(0.2, 3.0))
    t0 = time.monotonic()
    assert sorted(store.pump()) == sorted(plan)
    since = {rid: t0 for rid, (phase, _) in plan.items() if phase == "starting"}
    intact, killed = 0, []
    deadline = time.monotonic() + 150
    while len(killed) < KILLS and time.monotonic() < deadline:
        now = time.monotonic()
        for rid, (phase, delay) in plan.items():
            if rid in killed:
                continue
            info = store.get(rid)
            if rid not in since and info.iteration >= 1:
                since[rid] = now
            if rid not in since or now - since[rid] < delay:
                continue
            assert info.status == "running", info.message
            os.kill(info.pid, signal.SIGKILL)
            wait_dead(info.pid, rid)
            killed.append(rid)
            # readable right away, before anyone tidies up (other workers still write)
            problems = store_readable(store)
            before = store.read_metrics(rid)
            t_pump = time.monotonic()
            while store.get(rid).status == "running" and time.monotonic() - t_pump < 30:
                store.pump()
                time.sleep(0.05)
            info = store.get(rid)
            after = store.read_metrics(rid)
            ok = (not problems and info.status == "interrupted" and "ended unexpectedly" in info.message
                  and after == before
                  and info.iteration == (after["iteration"][-1] if after["iteration"] else 0)
                  and not list(store.run_dir(rid).glob(".*.tmp"))
                  and not store_readable(store)
                  and store.get(done).status == "completed"
                  and {p.name: digest(p) for p in store.run_dir(done).iterdir()
                       if p.name != "worker.log"} == fingerprint
                  and load_weights(stem, expected_dataset="mnist")[1]["run_id"] == done
                  and [e.key for e in catalog.run_entries(store=store)] == [f"run:{done}"])
            print(f"kill {len(killed)}: {delay:.1f} s after {phase} began ({now - t0:.1f} s in), "
                  f"{len(after['iteration'])} iterations kept, status {info.status}: "
                  f"{'intact' if ok else 'BROKEN'} {problems}")
            intact += ok
        time.sleep(0.05)
    print(f"{len(killed)} kills, store intact {intact}/{len(killed)}")
    assert len(killed) == KILLS and intact == KILLS
    assert not any(r.status == "running" for r in store.list_runs())


# ---------------------------------------------------------------------------------------
# kill -9 and resume: the training itself survives
RESUME_KILLS = 10
RESUME_ITERATIONS = 90


def _train_cmd(data_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "core.train", "--dataset", "mnist", "--model", "rim", "--no-holdout-sample",
            "--iterations", str(RESUME_ITERATIONS), "--batch-size", "20", "--eval-every", "7", "--eval-samples", "50",
            "--noise-draws", "2", "--threads", "1", "--quiet", "--optimizer", "adam", "--lr", "0.01",
            "--schedule", "cosine", "--val-images", "40", "--state-every", "3", "--state-every-s", "0",
            "--data-dir", str(data_dir), "--set", "hidden_size=8", "--set", "num_units=3", "--set", "k_active=2",
            *extra]


@pytest.mark.slow
def test_kill_9_ten_times_and_resume_gives_identical_weights(tmp_path):
    """A real ``python -m core.train`` (the method, Adam, cosine schedule, validation) killed with
    SIGKILL at 10 seeded points, each time resumed with ``--resume``: its final weights, history
    and evaluations equal those of an uninterrupted run."""
    import subprocess

    from safetensors.torch import load_file

    from core.training import state as R

    root = Path(__file__).resolve().parent.parent
    write_tiny_mnist(tmp_path / "data")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    ref_out, out = tmp_path / "ref", tmp_path / "run"
    ckpt = Path(f"{out}.ckpt")
    ref = subprocess.Popen(_train_cmd(tmp_path / "data", "--out", str(ref_out)), cwd=root, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    rng = random.Random(2025)
    # kill once the newest training state has reached a seeded iteration, a seeded moment later: in an
    # iteration, an evaluation, a training state write, or (when the target is already passed) while
    # the resumed process is still starting
    targets = sorted(rng.sample(range(3, RESUME_ITERATIONS - 30), RESUME_KILLS))
    delays = [rng.uniform(0.0, 0.15) for _ in targets]
    kills, resumes, log = 0, 0, []
    cmd = _train_cmd(tmp_path / "data", "--out", str(out))
    t0 = time.monotonic()
    for target, delay in zip(targets, delays):
        before = R.last_iteration(ckpt) or 0
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        resumes += "--resume" in cmd
        deadline = time.monotonic() + 120
        while (R.last_iteration(ckpt) or 0) < target and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(delay)
        assert proc.poll() is None, f"the run ended before kill {kills + 1}: {proc.communicate()[0][-2000:]!r}"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
        mid_write = bool(list(ckpt.glob(".*.tmp")))
        damaged = []
        state = R.latest_state(ckpt, on_damaged=lambda p, e, seen=damaged: seen.append(f"{p.name}: {e}"))
        assert state is not None and not damaged, damaged
        log.append(f"kill {kills}: target {target}, +{delay:.2f} s, training state {before} -> {state.iteration}"
                   + (", during a training state write" if mid_write else ""))
        cmd = [sys.executable, "-m", "core.train", "--resume", str(ckpt), "--quiet"]
    last = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    resumes += 1
    assert last.returncode == 0, last.stderr[-3000:]
    assert f"resuming from iteration {state.iteration}" in last.stderr
    ref_log = ref.communicate(timeout=300)[0]
    assert ref.returncode == 0, ref_log[-3000:]
    a, b = load_file(f"{ref_out}.safetensors"), load_file(f"{out}.safetensors")
    identical = a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    ma, mb = json.loads(Path(f"{ref_out}.json").read_text()), json.loads(Path(f"{out}.json").read_text())
    print("\n".join(log))
    print(f"{kills} kills, {resumes} resumes, final weights {'identical' if identical else 'DIFFERENT'} "
          f"({time.monotonic() - t0:.1f} s)")
    assert kills == RESUME_KILLS and resumes == RESUME_KILLS and identical
    assert ma["history"] == mb["history"] and ma["evals"] == mb["evals"]
    assert ma["history"]["iteration"] == list(range(1, RESUME_ITERATIONS + 1))
    for k in ("test_accuracy", "noisy_test_accuracy", "best_iteration", "val_accuracy"):
        assert ma["metrics"][k] == mb["metrics"][k], k
    assert not ckpt.exists()  # completed: nothing left to resume
