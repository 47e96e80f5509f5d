"""The run store (core.runs): real worker processes on a tiny data set.

Every test gets its own RIMSCOPE_HOME and a tiny MNIST-shaped npz data set (300 random
images), offline. Models are shrunk through model_overrides so a run takes seconds; most
of a worker's time is importing torch.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from core import catalog
from core.data.plan import training_data_plan
from core.errors import ConfigError, WeightsError
from core.models.registry import build_model
from core.runs.events import read_metrics_file
from core.runs.schema import RunStoreError
from core.runs.store import RunStore
from core.runs.worker import run_worker
from core.training.config import parse_seeds
from core.training.weights import load_weights, weights_bytes
from tests.run_helpers import TINY, kill_running_workers, tiny


def wait_for(pred, timeout: float, poll: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"condition not met within {timeout} s")


def listing(root: Path) -> dict:
    """Every file under root with its size and mtime (to show nothing changed)."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def store(tiny_mnist_home, monkeypatch):
    monkeypatch.delenv("RIMSCOPE_MAX_CONCURRENT", raising=False)
    s = RunStore()
    yield s
    kill_running_workers(s)


@pytest.mark.slow
def test_tiny_run_completes_in_a_worker(store):
    assert store.root == Path(os.environ["RIMSCOPE_HOME"]) / "runs"
    rid = store.submit(tiny(), owner="session-1", label="tiny run")
    assert store.get(rid).status == "queued"
    assert store.pump() == [rid]
    assert store.pump() == []  # already running: never started twice
    info = store.wait(rid, timeout=300)  # generous: worker start imports torch on a busy machine
    log_path = store.run_dir(rid) / "worker.log"
    assert info.status == "completed", (info.message, log_path.read_text())
    # The worker prints its last line after it has written the final status, so wait for it.
    deadline = time.monotonic() + 60
    while "finished: completed" not in log_path.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    log = log_path.read_text()
    assert f"claimed {rid}" in log and "finished: completed" in log, log
    assert (info.iteration, info.total) == (30, 30)
    assert info.owner == "session-1" and info.label == "tiny run"
    assert info.config["threads"] == 1 and info.config["model_overrides"] == TINY["parallel_lstm"]
    assert 0 <= info.metrics["test_accuracy"] <= 1 and info.metrics["test_n"] == 300
    m = store.read_metrics(rid)
    assert m["iteration"] == list(range(1, 31)) and len(m["loss"]) == 30 and len(m["batch_acc"]) == 30
    assert m["eval_iteration"] == [10, 20, 30] and len(m["test_acc"]) == 3 and len(m["test_loss"]) == 3
    st = json.loads((store.run_dir(rid) / "status.json").read_text())
    assert st["started"] and st["finished"] and st["pid"] == info.pid and isinstance(st["heartbeat"], float)
    assert isinstance(st["pid_started"], float)  # the worker's start time: a reused pid is told apart
    cfg = json.loads((store.run_dir(rid) / "config.json").read_text())
    assert cfg["train_config"]["iterations"] == 30 and cfg["owner"] == "session-1"
    stem = store.weights_stem(rid)
    assert stem == store.run_dir(rid) / "model"
    model, meta = load_weights(stem, expected_dataset="mnist")
    assert meta["run_id"] == rid and meta["status"] == "completed" and meta["train_config"]["iterations"] == 30
    entries = catalog.run_entries("mnist", store=store)
    assert [e.key for e in entries] == [f"run:{rid}"] and entries[0].source == "trained"
    assert catalog.run_entries("cifar10", store=store) == []
    assert [e.key for e in catalog.run_entries()] == [f"run:{rid}"]  # default store follows RIMSCOPE_HOME
    model2, _ = catalog.load_entry(entries[0])
    assert model2.config.hidden_size == 8


@pytest.mark.slow
def test_queue_bound_stop_sigterm_and_delete(store):
    store.max_concurrent = 1
    ids = [store.submit(tiny(iterations=200_000, seed=i)) for i in range(3)]
    max_running = 0

    def statuses():
        nonlocal max_running
        st = {r.run_id: r for r in store.list_runs()}
        max_running = max(max_running, sum(r.status == "running" for r in st.values()))
        return st

    assert store.pump() == [ids[0]]
    assert [statuses()[i].status for i in ids] == ["running", "queued", "queued"]
    wait_for(lambda: (store.pump() or True) and statuses()[ids[0]].iteration >= 3, 90)
    # a running run cannot be deleted; a queued one stops at once
    with pytest.raises(RunStoreError, match="still running"):
        store.delete(ids[0])
    assert store.request_stop(ids[2]) == "stopped"
    assert statuses()[ids[2]].message == "stopped before it started"
    # stop the first: it saves what it learned, then the second starts
    assert store.request_stop(ids[0]) == "running"
    first = wait_for(lambda: (store.pump() or True) and statuses()[ids[0]].status == "stopped"
                     and statuses()[ids[0]], 60)
    assert "stopped by the user" in first.message and first.iteration >= 3
    assert store.weights_stem(ids[0]) is not None
    wait_for(lambda: (store.pump() or True) and statuses()[ids[1]].iteration >= 1, 90)
    assert statuses()[ids[2]].status == "stopped"  # stayed stopped, never started
    # SIGTERM: the worker stops gracefully and keeps its weights
    os.kill(statuses()[ids[1]].pid, signal.SIGTERM)
    second = wait_for(lambda: (store.pump() or True) and statuses()[ids[1]].status != "running"
                      and statuses()[ids[1]], 60)
    assert second.status == "stopped" and "termination signal" in second.message
    assert load_weights(store.weights_stem(ids[1]))[1]["status"] == "stopped"
    assert max_running == 1
    # the two runs stopped with weights are offered (labelled as stopped); the one stopped
    # before it started has nothing to offer
    offered = {e.key: e for e in catalog.run_entries(store=store)}
    assert set(offered) == {f"run:{ids[0]}", f"run:{ids[1]}"}
    assert f"stopped at iteration {first.iteration}" in offered[f"run:{ids[0]}"].display
    catalog.load_entry(offered[f"run:{ids[0]}"])
    # delete: folder gone, store and catalog no longer list it
    store.delete(ids[0])
    assert not store.run_dir(ids[0]).exists()
    assert ids[0] not in {r.run_id for r in store.list_runs()}
    assert store.get(ids[0]) is None
    with pytest.raises(RunStoreError, match="No run"):
        store.delete(ids[0])


def test_diverged_run_has_no_state(store):
    # a small RIM with the largest allowed learning rate, heavy momentum and no clipping blows up
    # within 30 steps (with forget bias 1, plain SGD at lr 10 no longer does)
    rid = store.submit(tiny("rim", lr=10.0, momentum=0.9, grad_clip=None, state_every=5))
    assert run_worker(store.run_dir(rid)) == "diverged"  # in this process: no torch import wait
    info = store.get(rid)
    assert info.status == "diverged" and "loss became nan" in info.message
    assert not (store.run_dir(rid) / "model.safetensors").exists()
    assert not (store.run_dir(rid) / "ckpt").exists()  # nothing to resume: the training states are gone
    assert store.weights_stem(rid) is None
    assert catalog.run_entries(store=store) == []
    m = store.read_metrics(rid)
    assert m["loss"][-1] is None and m["iteration"][-1] == info.iteration  # NaN stored as null
    assert store.pump() == []  # a finished run is never restarted


def good_weights(dataset="mnist", input_dim=28, **meta):
    model = build_model("parallel_lstm", input_dim=input_dim, num_classes=10, num_units=1, hidden_size=8)
    return weights_bytes(model, {"dataset": dataset, "seed": 3, "metrics": {"test_accuracy": 0.5}, **meta})


def test_import_state_good_and_bad(store):
    w, m = good_weights()
    before = listing(store.root)
    bad_cases = [
        (b"", m, None, "empty"),
        (b"\x80\x04garbage", m, None, "pickle"),
        (b"not safetensors at all", m, None, "safetensors"),
        (w, b"{not json", None, "not valid JSON"),
        (w, m, "cifar10", "trained on 'mnist'"),
        (w, json.dumps({**json.loads(m), "dataset": "../../etc"}).encode(), None, "unsafe"),
        (w, json.dumps({k: v for k, v in json.loads(m).items() if k != "dataset"}).encode(), None, "data set"),
        (*good_weights("cifar10", input_dim=28), None, "rows of 28"),
        (w[:-10], m, None, "safetensors"),
        (b"\0" * (64 * 1024 * 1024 + 1), m, None, "too large"),
    ]
    for weights, meta, expected, message in bad_cases:
        with pytest.raises(WeightsError, match=message):
            store.import_weights(weights, meta, expected_dataset=expected)
        assert listing(store.root) == before, message
    rid = store.import_weights(w, m, expected_dataset="mnist", owner="me", label="my upload")
    info = store.get(rid)
    assert info.status == "uploaded" and info.dataset == "mnist" and info.model == "parallel_lstm"
    assert info.seed == 3 and info.metrics["test_accuracy"] == 0.5 and info.label == "my upload"
    assert (store.run_dir(rid) / "model.safetensors").read_bytes() == w
    entries = catalog.run_entries("mnist", store=store)
    assert [(e.key, e.source) for e in entries] == [(f"run:{rid}", "uploaded")]
    catalog.load_entry(entries[0])
    assert store.pump() == [] and store.get(rid).status == "uploaded"


@pytest.mark.parametrize("bad", ["../../etc/passwd", "", "x", "20240101-000000-ZZZZZZZZ", "20240101-000000-0000000a/..",
                                 "/tmp", "20240101-000000-0000000a\n", None, 5])
def test_invalid_run_ids_are_refused(store, bad):
    for call in (store.get, store.read_metrics, store.request_stop, store.delete, store.weights_stem,
                 store.run_dir):
        with pytest.raises(RunStoreError, match="Not a valid run id"):
            call(bad)


def test_unknown_run_and_bad_configs(store):
    missing = "20240101-000000-0000000a"
    assert store.get(missing) is None
    assert store.weights_stem(missing) is None
    assert store.read_metrics(missing)["iteration"] == []
    with pytest.raises(RunStoreError, match="No run"):
        store.request_stop(missing)
    before = listing(store.root)
    for cfg, message in [(tiny(lr=-0.1), "Learning rate"), (tiny(iterations=0), "Iterations"),
                         (tiny(model="nope"), "Unknown model"), (tiny(dataset="svhn"), "Unknown data set"),
                         (tiny(model_overrides={"hidden_size": -3}), "must be at least 1"),
                         (tiny(model_overrides={"wings": 2}), "Unknown setting")]:
        with pytest.raises(ConfigError, match=message):
            store.submit(cfg)
    with pytest.raises(ConfigError, match="does not exist"):
        store.submit(tiny(), data_dir="/nonexistent/folder")
    assert listing(store.root) == before


def test_failed_run_reports_the_data_problem(store, monkeypatch, tmp_path):
    monkeypatch.setenv("RIMSCOPE_DATA_DIR", str(tmp_path / "empty"))
    rid = store.submit(tiny(dataset="fashion_mnist", model_overrides=TINY["parallel_lstm"]))
    assert run_worker(store.run_dir(rid)) == "failed"
    info = store.get(rid)
    assert info.status == "failed" and "No Fashion-MNIST train data found" in info.message
    # a config only the data can refuse (batch larger than the training set); the data
    # folder given at submit wins over RIMSCOPE_DATA_DIR
    rid2 = store.submit(tiny(batch_size=1000), data_dir=tmp_path / "data")
    assert store.get(rid2).data_dir == str(tmp_path / "data")
    assert run_worker(store.run_dir(rid2)) == "failed"
    assert "larger than the training set" in store.get(rid2).message


def test_metrics_reader_ignores_a_torn_last_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"kind": "iter", "iteration": 1, "loss": 2.3, "batch_acc": 0.1}\n'
                    '{"kind": "eval", "iteration": 1, "test_acc": 0.2, "test_loss": 2.2}\n'
                    '{"kind": "iter", "iteration": 2, "lo')
    m = read_metrics_file(path)
    assert m["iteration"] == [1] and m["eval_iteration"] == [1] and m["test_acc"] == [0.2]
    with open(path, "a") as f:
        f.write('ss": null, "batch_acc": 0.2}\nnot json\n')
    m = read_metrics_file(path)
    assert m["iteration"] == [1, 2] and m["loss"] == [2.3, None]


def test_dead_worker_is_marked_interrupted(store):
    import subprocess

    store.max_concurrent = 0  # nothing may start here
    rid = store.submit(tiny())
    # a worker that vanished: its pid is gone
    store._set_status(rid, status="running", pid=2**22 + 12345, heartbeat=time.time())
    with open(store.run_dir(rid) / "metrics.jsonl", "a") as f:
        f.write('{"kind": "iter", "iteration": 1, "loss": 2.3, "batch_acc": 0.1}\n{"kind": "it')
    store.pump()
    info = store.get(rid)
    assert info.status == "interrupted" and info.iteration == 1 and "ended unexpectedly" in info.message
    # a live process that is not our worker (its pid reused) counts as dead too
    other = subprocess.Popen(["sleep", "30"])
    try:
        rid2 = store.submit(tiny())
        store._set_status(rid2, status="running", pid=other.pid, heartbeat=time.time())
        store.pump()
        assert store.get(rid2).status == "interrupted"
        # a live worker without a heartbeat for too long is taken as hung
        rid3 = store.submit(tiny())
        store._set_status(rid3, status="running", pid=os.getpid(), heartbeat=time.time() - 3600)
        store.pump()
        assert store.get(rid3).status == "interrupted" and "no heartbeat" in store.get(rid3).message
    finally:
        other.kill()
        other.wait()


def test_seeds_and_data_plan(store, tmp_path, monkeypatch):
    assert parse_seeds("0") == [0] and parse_seeds("0,1, 2") == [0, 1, 2] and parse_seeds("3-5 3") == [3, 4, 5]
    for bad in ("", "a", "-1", "1.5", "5-3", "0-100"):
        with pytest.raises(ConfigError):
            parse_seeds(bad)
    plan = training_data_plan("mnist", holdout_sample=False)
    assert plan.source.startswith("npz folder") and plan.n_train == 300
    plan = training_data_plan("mnist")  # 300 images are not the original MNIST set: nothing held out
    assert plan.n_train == 300 and "nothing held out" in plan.note
    from core.errors import DataUnavailableError

    with pytest.raises(DataUnavailableError, match="No CIFAR-10 train data found"):
        training_data_plan("cifar10")


# --------------------------------------------------------------------------- the pieces of core.runs
def test_store_lock_is_exclusive_across_threads_and_processes(store):
    import subprocess
    import sys
    import threading

    from core.paths import ROOT

    other = ("import sys\nfrom core.runs.schema import RunStoreError\nfrom core.runs.store import RunStore\n"
             "try:\n    RunStore(sys.argv[1]).lock(timeout=0.3).__enter__()\nexcept RunStoreError as e:\n"
             "    print('refused:', e)\nelse:\n    print('got it')\n")

    def other_process() -> str:
        return subprocess.run([sys.executable, "-c", other, str(store.root)], capture_output=True, text=True,
                              cwd=ROOT, timeout=60).stdout

    def other_thread() -> list:
        out = []

        def take():
            try:
                with RunStore(store.root).lock(timeout=0.3):
                    out.append("got it")
            except RunStoreError as exc:
                out.append(str(exc))
        t = threading.Thread(target=take)
        t.start()
        t.join()
        return out

    with store.lock():
        with RunStore(store.root).lock(timeout=0.1):  # re-entrant in this thread, across instances
            pass
        assert "refused: The run store is busy" in other_process()
        assert other_thread() == ["The run store is busy; try again in a moment."]
    assert other_process().strip() == "got it" and other_thread() == ["got it"]


def test_worker_liveness_and_pid_reuse(tmp_path):
    import subprocess
    import sys

    from core.runs.queue import process_started, worker_alive

    rid = "20240101-000000-0000000a"
    assert worker_alive(os.getpid(), rid)  # a worker in this process (tests)
    for bad in (None, 0, -1, True, "123", 2**22 + 12345):
        assert not worker_alive(bad, rid)
    ours = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "worker", str(tmp_path / rid)])
    other = subprocess.Popen(["sleep", "60"])
    try:
        t0 = wait_for(lambda: process_started(ours.pid), 10)
        wait_for(lambda: rid in " ".join(__import__("psutil").Process(ours.pid).cmdline()), 10)
        assert worker_alive(ours.pid, rid) and worker_alive(ours.pid, rid, started=t0)
        assert not worker_alive(ours.pid, "20240101-000000-0000000b")  # someone else's run
        assert not worker_alive(ours.pid, rid, started=t0 - 100)  # the pid was given to a newer process
        assert not worker_alive(other.pid, rid)  # a live process that is no worker of ours
    finally:
        for p in (ours, other):
            p.kill()
    ours.wait()
    assert not worker_alive(ours.pid, rid) and process_started(ours.pid) is None
    other.kill()  # killed, not yet reaped: a zombie is no worker either
    wait_for(lambda: not worker_alive(other.pid, rid), 10)
    other.wait()


def test_events_round_trip_nan_torn_line_and_truncation(tmp_path):
    import math

    from core.runs.events import MetricsWriter, truncate_metrics

    path = tmp_path / "metrics.jsonl"
    with MetricsWriter(path) as w:
        for it in (1, 2, 3):
            line = w.write({"kind": "iter", "iteration": it, "total": 3, "loss": math.nan if it == 2 else 1.0 / it,
                            "batch_acc": 0.5})
        w.write({"kind": "eval", "iteration": 3, "test_acc": 0.25, "test_loss": math.inf})
    assert line["loss"] == 1 / 3 and "NaN" not in path.read_text() and "Infinity" not in path.read_text()
    m = read_metrics_file(path)
    assert m["iteration"] == [1, 2, 3] and m["loss"] == [1.0, None, 1 / 3] and m["batch_acc"] == [0.5] * 3
    assert (m["eval_iteration"], m["test_acc"], m["test_loss"]) == ([3], [0.25], [None])
    with open(path, "a") as f:  # a writer killed mid-line
        f.write('{"kind": "iter", "iteration": 4, "lo')
    assert read_metrics_file(path)["iteration"] == [1, 2, 3]
    truncate_metrics(path, 2)  # a resume from iteration 2: later events and the torn line go
    assert path.read_text().count("\n") == 2 and path.read_text().endswith("}\n")
    m = read_metrics_file(path)  # the reader notices the rewrite (new file) and starts over
    assert m["iteration"] == [1, 2] and m["eval_iteration"] == []
    with MetricsWriter(path) as w:
        w.write({"kind": "iter", "iteration": 3, "loss": 0.1, "batch_acc": 1.0})
    assert read_metrics_file(path)["iteration"] == [1, 2, 3]


def test_status_and_config_documents_are_typed():
    from core.runs.schema import RunConfig, RunStatus

    st = RunStatus.from_dict({"status": "running", "pid": "12", "iteration": 7.5, "heartbeat": 3, "latest": [],
                              "total": 30, "from_the_future": 1})
    assert (st.status, st.pid, st.iteration, st.heartbeat, st.latest, st.total) == ("running", None, 0, 3, {}, 30)
    assert RunStatus.from_dict(None).status == "failed" and "unreadable" in RunStatus.from_dict(None).message
    assert RunStatus.from_dict({"status": "exploded", "message": "m"}).status == "failed"
    with pytest.raises(TypeError, match="no field"):
        st.update(iteraton=3)
    assert RunStatus.from_dict(st.update(metrics={"a": float("nan")}).to_dict()).metrics == {"a": None}
    cfg = RunConfig.from_dict({"kind": "upload", "seed": True, "train_config": {"seed": 4}, "data_dir": 5})
    assert (cfg.kind, cfg.seed, cfg.data_dir, cfg.train_config) == ("upload", None, None, {"seed": 4})


def test_upload_check_shared_with_the_page(store):
    from core.training.weights import check_upload

    w, m = good_weights()
    model, meta = check_upload(w, m, weights_name="model.safetensors", meta_name="model.json")
    assert meta["dataset"] == "mnist" and model.config.input_dim == 28
    for names, words in [(("model.pt", "model.json"), "pickle-based"), (("model.bin", "m.json"), "pickle-based"),
                         (("weights.dat", "model.json"), "must be a .safetensors"),
                         (("model.safetensors", "model.txt"), "must be a .json")]:
        with pytest.raises(WeightsError, match=words):
            check_upload(w, m, weights_name=names[0], meta_name=names[1])
    with pytest.raises(WeightsError, match=r"^model.safetensors is too large \(.* MB; the limit is .* per file"):
        check_upload(w, m, weights_name="model.safetensors", max_bytes=100)
    with pytest.raises(WeightsError, match="trained on 'mnist'"):
        check_upload(bytearray(w), memoryview(m), expected_dataset="fashion_mnist")
