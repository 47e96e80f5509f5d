"""Resume (core.training.state): a run interrupted, stopped or crashed continues to the same end, bit for bit.

Every resumed run here is compared with an uninterrupted run of the same config on the same
machine and threads (1): the weights with ``torch.equal``, the per-iteration history and the
periodic evaluations with ``==``. ``rim`` and ``rmc`` reuse workspaces between steps
(core/models/_workspace.py); their pools are emptied before each resume, as in a fresh process.
Negative controls show the comparison fails when one part of the state is not restored.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from core.data.datasets import LoadedData
from core.errors import WeightsError
from core.models import rim_kernel, rmc_kernel
from core.runs.queue import worker_alive
from core.runs.schema import RunStoreError
from core.runs.store import RunStore
from core.runs.worker import run_worker
from core.training import state as R
from core.training.config import TrainConfig
from core.training.loop import train

TINY = {
    "rim": {"hidden_size": 8, "num_units": 3, "k_active": 2},
    "parallel_lstm": {"num_units": 1, "hidden_size": 8},
    "rmc": {"num_slots": 2, "slot_size": 16, "num_heads": 2},
    "entnet": {"num_slots": 2, "slot_size": 8},
    "indrnn": {"hidden_size": 16},
}


def synth(n: int, seed: int) -> LoadedData:
    r = np.random.default_rng(seed)
    return LoadedData(r.integers(0, 256, (n, 28, 28), dtype=np.uint8), r.integers(0, 10, n).astype(np.int64),
                      [str(i) for i in range(10)], "synthetic", np.arange(n))


@pytest.fixture(scope="module")
def data():
    return synth(120, 0), synth(40, 1)


def cfg(model: str = "rim", **kw) -> TrainConfig:
    base = dict(dataset="mnist", model=model, iterations=14, batch_size=20, eval_every=3, eval_samples=20,
                noise_draws=1, threads=1, holdout_sample=False, state_every=4, state_every_s=0,
                model_overrides=dict(TINY[model]))
    base.update(kw)
    return TrainConfig(**base)


class Crash(Exception):
    pass


def crash_at(iteration: int):
    def cb(ev):
        if ev["kind"] == "iter" and ev["iteration"] == iteration:
            raise Crash(iteration)
    return cb


def fresh_pools():
    """What a new process starts with: no workspace to reuse."""
    rim_kernel._POOL._free.clear()
    rmc_kernel._POOL._free.clear()


def same_run(a, b) -> bool:
    sa, sb = a.model.state_dict(), b.model.state_dict()
    return (a.history == b.history and a.evals == b.evals and sa.keys() == sb.keys()
            and all(torch.equal(sa[k], sb[k]) for k in sa)
            and a.metrics["test_accuracy"] == b.metrics["test_accuracy"]
            and a.metrics.get("noisy_test_accuracy") == b.metrics.get("noisy_test_accuracy"))


def crash_and_resume(c: TrainConfig, data, folder: Path, at: int):
    tr, te = data
    with pytest.raises(Crash):
        train(c, tr, te, callback=crash_at(at), state_dir=folder)
    fresh_pools()
    return train(c, tr, te, state_dir=folder, resume_from=folder)


# --------------------------------------------------------------------------- bit-identity

# an augmented run (its own generator, saved in every training state)
AUGMENTED = cfg("parallel_lstm", augment="affine", optimizer="adam", lr=0.01, schedule="cosine", val_images=30)

CASES = {
    "rim": cfg("rim"),
    "rim_random_adam_cosine_val": cfg("rim", model_overrides={**TINY["rim"], "selection": "random"},
                                      optimizer="adam", lr=0.01, schedule="cosine", val_images=30, grad_clip=1.0),
    "parallel_lstm_momentum": cfg("parallel_lstm", momentum=0.9),
    "rmc_adam": cfg("rmc", optimizer="adam", lr=0.01),
    "entnet_step": cfg("entnet", schedule="step", step_every=4, step_gamma=0.5),
    "indrnn_weight_decay": cfg("indrnn", weight_decay=0.01),
}


@pytest.mark.parametrize("name", list(CASES))
def test_crash_then_resume_is_bit_identical(data, tmp_path, name):
    c = CASES[name]
    tr, te = data
    ref = train(c, tr, te)
    fresh_pools()
    res = crash_and_resume(c, data, tmp_path / "ck", at=10)  # training states at 4 and 8: resumes from 8
    assert res.resumed_from == 8 and res.metrics["resumed_from_iteration"] == 8
    assert res.history["iteration"] == list(range(1, 15))
    assert same_run(ref, res)


def test_stop_writes_a_state_and_resume_continues_there(data, tmp_path):
    c = CASES["rim_random_adam_cosine_val"]
    tr, te = data
    ref = train(c, tr, te)
    polls = []
    stopped = train(c, tr, te, state_dir=tmp_path, should_stop=lambda: polls.append(1) or len(polls) > 7)
    assert stopped.status == "stopped" and stopped.metrics["iterations_done"] == 7
    assert [it for it, _ in R.list_states(tmp_path)] == [7, 4]  # the stop training state and the periodic one
    assert stopped.state_path == tmp_path / "state-00000007.json"
    fresh_pools()
    res = train(c, tr, te, state_dir=tmp_path, resume_from=tmp_path)
    assert res.status == "completed" and res.resumed_from == 7 and same_run(ref, res)


def test_resume_twice_and_by_time(data, tmp_path):
    """Training states by time only (every iteration here), two crashes, still identical."""
    c = cfg("rmc", state_every=0, state_every_s=1e-9)
    tr, te = data
    ref = train(c, tr, te)
    with pytest.raises(Crash):
        train(c, tr, te, callback=crash_at(5), state_dir=tmp_path)
    assert R.last_iteration(tmp_path) == 4
    fresh_pools()
    with pytest.raises(Crash):
        train(c, tr, te, callback=crash_at(11), state_dir=tmp_path, resume_from=tmp_path)
    assert [it for it, _ in R.list_states(tmp_path)] == [10, 9]
    fresh_pools()
    res = train(c, tr, te, state_dir=tmp_path, resume_from=tmp_path)
    assert res.resumed_from == 10 and same_run(ref, res)


@pytest.mark.parametrize("part", ["torch_rng", "optimizer", "data_order", "best", "augment"])
def test_a_part_left_out_breaks_identity(data, tmp_path, monkeypatch, part):
    """Negative controls: the comparison above notices each part of the state (the augmentation
    generator's state is what keeps a resumed augmented run identical)."""
    c = AUGMENTED if part == "augment" else CASES["rim_random_adam_cosine_val"]
    tr, te = data
    ref = train(c, tr, te)
    with pytest.raises(Crash):
        train(c, tr, te, callback=crash_at(10), state_dir=tmp_path)
    real = R.read_state

    def spoiled(path):
        st = real(path)
        if part == "torch_rng":  # the random selection would draw other units
            g = torch.Generator().manual_seed(123)
            st.rng["torch"] = g.get_state()
        elif part == "optimizer":  # Adam's moments forgotten
            st.optimizer = {**st.optimizer, "state": {}}
        elif part == "data_order":
            st.pos = (st.pos + 20) % len(st.order)
        elif part == "best":
            st.best = {"acc": -1.0, "iteration": 0, "state": None, "since": 0}
        elif part == "augment":
            st.rng["augment"] = torch.Generator().manual_seed(123).get_state()
        return st

    monkeypatch.setattr(R, "read_state", spoiled)
    fresh_pools()
    res = train(c, tr, te, resume_from=tmp_path)
    assert res.resumed_from == 8 and not same_run(ref, res)


# --------------------------------------------------------------------------- files

def test_state_files_pruned_checksummed_atomic(data, tmp_path):
    c = cfg("parallel_lstm", state_every=2)
    tr, te = data
    with pytest.raises(Crash):
        train(c, tr, te, callback=crash_at(9), state_dir=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "state-00000006.json", "state-00000006.safetensors", "state-00000008.json", "state-00000008.safetensors"]
    doc = json.loads((tmp_path / "state-00000008.json").read_text())
    w = tmp_path / "state-00000008.safetensors"
    assert doc["format"] == R.FORMAT and doc["iteration"] == 8 and doc["weights"]["bytes"] == w.stat().st_size
    assert len(doc["weights"]["sha256"]) == 64 and doc["pos"] == 40 and doc["train_config"]["seed"] == 0
    assert doc["rng"]["numpy"]["bit_generator"] == "PCG64" and "__tensor__" in doc["rng"]["torch"]
    assert w.read_bytes()[:2] not in (b"\x80\x02", b"\x80\x04")  # safetensors, never a pickle
    st = R.read_state(tmp_path / "state-00000008.json")
    assert st.iteration == 8 and st.history["iteration"] == list(range(1, 9)) and st.order.shape == (120,)
    assert st.rng["torch"].dtype == torch.uint8
    # a finished run leaves no training state to resume
    R.remove_states(tmp_path)
    assert not tmp_path.exists()


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EROFS])
def test_failed_write_is_reported_and_keeps_the_previous_state(data, tmp_path, monkeypatch, err):
    c = cfg("rim")
    tr, te = data
    ref = train(c, tr, te)
    real_write = R._write_all
    calls = []

    def failing(f, blob):  # the third file (state 8's tensors) fails halfway: disk full / read-only
        calls.append(1)
        if len(calls) == 3:
            f.write(blob[: len(blob) // 2])
            raise OSError(err, os.strerror(err))
        real_write(f, blob)

    monkeypatch.setattr(R, "_write_all", failing)
    events = []

    def cb(ev):
        events.append(ev)
        crash_at(10)(ev)

    with pytest.raises(Crash):
        train(c, tr, te, callback=cb, state_dir=tmp_path)
    ck = [e for e in events if e["kind"] == "state"]
    assert [(e["iteration"], e["ok"]) for e in ck] == [(4, True), (8, False)]
    words = "the disk is full" if err == errno.ENOSPC else "read-only"
    assert words in ck[1]["message"] and str(tmp_path) in ck[1]["message"]
    assert "the training state of iteration 4 is kept" in ck[1]["message"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state-00000004.json", "state-00000004.safetensors"]
    assert R.read_state(tmp_path / "state-00000004.json").iteration == 4  # intact

    # write_state itself raises WeightsError with that message
    calls.clear()
    calls.extend([1, 1])
    st = R.read_state(tmp_path / "state-00000004.json")
    st.iteration = 5
    st.history = {k: v + [0.5] if k != "iteration" else v + [5] for k, v in st.history.items()}
    with pytest.raises(WeightsError, match=words):
        R.write_state(tmp_path, st)
    assert [it for it, _ in R.list_states(tmp_path)] == [4]

    monkeypatch.setattr(R, "_write_all", real_write)
    fresh_pools()
    res = train(c, tr, te, resume_from=tmp_path)
    assert res.resumed_from == 4 and same_run(ref, res)


def test_failed_periodic_write_does_not_stop_training(data, tmp_path, monkeypatch):
    c = cfg("parallel_lstm")
    tr, te = data

    def full(f, blob):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(R, "_write_all", full)
    res = train(c, tr, te, state_dir=tmp_path)
    assert res.status == "completed" and res.metrics["state_write_errors"] == 3  # at 4, 8, 12
    assert "3 training state write(s) failed" in res.message and "disk is full" in res.message
    assert not list(tmp_path.glob("*"))  # no partial or temporary files


DAMAGES = {
    "truncated tensors": lambda d: (d / "state-00000008.safetensors").write_bytes(
        (d / "state-00000008.safetensors").read_bytes()[:1000]),
    "flipped byte": lambda d: _flip(d / "state-00000008.safetensors"),
    "garbage json": lambda d: (d / "state-00000008.json").write_text('{"format": "rimscope-tr'),
    "json missing (write never finished)": lambda d: (d / "state-00000008.json").unlink(),
    "tensors missing": lambda d: (d / "state-00000008.safetensors").unlink(),
    "pickle in place of tensors": lambda d: (d / "state-00000008.safetensors").write_bytes(b"\x80\x04K\x01."),
    "valid json, one number changed": lambda d: _edit_json(d / "state-00000008.json", pos=41),
}


def _edit_json(path: Path, **changes) -> None:
    doc = json.loads(path.read_text())
    doc.update(changes)
    path.write_text(json.dumps(doc))


def _flip(path: Path) -> None:
    b = bytearray(path.read_bytes())
    b[len(b) // 2] ^= 0x40
    path.write_bytes(bytes(b))


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_damaged_latest_state_falls_back_to_the_one_before(data, tmp_path, damage):
    c = cfg("rim")
    tr, te = data
    ref = train(c, tr, te)
    with pytest.raises(Crash):
        train(c, tr, te, callback=crash_at(10), state_dir=tmp_path)
    DAMAGES[damage](tmp_path)
    seen = []
    st = R.latest_state(tmp_path, on_damaged=lambda p, e: seen.append((p.name, str(e))))
    assert st.iteration == 4
    if damage not in ("json missing (write never finished)",):
        assert seen and seen[0][0] == "state-00000008.json", seen
    with pytest.warns(UserWarning, match="damaged") if seen else contextlib.nullcontext():
        res = train(c, tr, te, state_dir=tmp_path, resume_from=tmp_path)
    assert res.resumed_from == 4 and same_run(ref, res)
    # the damaged state is gone once a newer one is written over it
    assert not (tmp_path / "state-00000008.json").exists() or R.read_state(tmp_path / "state-00000008.json")


def test_all_damaged_or_none(tmp_path, data):
    assert R.latest_state(tmp_path / "nothing") is None
    with pytest.raises(WeightsError, match="No training state"):
        train(cfg(), *data, resume_from=tmp_path / "nothing")
    (tmp_path / "state-00000004.json").write_text("{}")
    with pytest.warns(UserWarning):
        assert R.latest_state(tmp_path) is None
    with pytest.raises(WeightsError, match="No usable training state"), pytest.warns(UserWarning):
        train(cfg(), *data, resume_from=tmp_path)


def test_resume_refuses_other_settings_or_other_data(data, tmp_path):
    tr, te = data
    with pytest.raises(Crash):
        train(cfg(), tr, te, callback=crash_at(6), state_dir=tmp_path)
    with pytest.raises(WeightsError, match="other settings.*lr"):
        train(cfg(lr=0.05), tr, te, resume_from=tmp_path)
    with pytest.raises(WeightsError, match="other training data"):
        train(cfg(), synth(120, 7), te, resume_from=tmp_path)
    # threads and the training state interval may change
    res = train(cfg(state_every=3, threads=1), tr, te, resume_from=tmp_path)
    assert res.resumed_from == 4


def test_a_fresh_run_clears_old_states(data, tmp_path):
    tr, te = data
    with pytest.raises(Crash):
        train(cfg(), tr, te, callback=crash_at(10), state_dir=tmp_path)
    with pytest.raises(Crash):
        train(cfg(seed=1), tr, te, callback=crash_at(6), state_dir=tmp_path)
    assert [it for it, _ in R.list_states(tmp_path)] == [4]
    assert R.latest_state(tmp_path).train_config["seed"] == 1


# --------------------------------------------------------------------------- the CLI

def write_npz(folder: Path, dataset: str = "mnist", n: int = 200, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    (folder / dataset).mkdir(parents=True, exist_ok=True)
    for split in ("train", "test"):
        np.savez(folder / dataset / f"{split}.npz", x=rng.integers(0, 256, (n, 28, 28), dtype=np.uint8),
                 y=rng.integers(0, 10, n).astype(np.int64), classes=np.array([str(i) for i in range(10)]))
    return folder


def test_cli_resume_after_an_interrupt(tmp_path, monkeypatch, capsys):
    from safetensors.torch import load_file

    from core.training import cli

    d = write_npz(tmp_path / "data")
    args = ["--dataset", "mnist", "--model", "rim", "--no-holdout-sample", "--iterations", "12", "--batch-size", "20",
            "--eval-every", "5", "--eval-samples", "20", "--noise-draws", "1", "--threads", "1", "--quiet",
            "--state-every", "4", "--data-dir", str(d), "--set", "hidden_size=8", "--set", "num_units=3",
            "--set", "k_active=2"]
    assert cli.main(args + ["--out", str(tmp_path / "ref")]) == 0
    assert not (tmp_path / "ref.ckpt").exists()  # completed: the training states are removed
    real = cli.train

    def interrupted(*a, **kw):  # Ctrl-C at iteration 10
        def cb(ev):
            kw["callback"](ev)
            if ev["kind"] == "iter" and ev["iteration"] == 10:
                raise KeyboardInterrupt
        return real(*a, **{**kw, "callback": cb})

    monkeypatch.setattr(cli, "train", interrupted)
    monkeypatch.chdir(tmp_path)
    assert cli.main(args + ["--out", "run"]) == 130
    assert "continue with: python -m core.train --resume run.ckpt" in capsys.readouterr().err
    assert not (tmp_path / "run.safetensors").exists() and R.last_iteration(tmp_path / "run.ckpt") == 8
    monkeypatch.setattr(cli, "train", real)
    monkeypatch.chdir(tmp_path / "data")  # somewhere else: the training state knows the data and the output
    fresh_pools()
    assert cli.main(["--resume", str(tmp_path / "run"), "--quiet"]) == 0  # the --out stem the user gave
    out = capsys.readouterr()
    assert "resuming from iteration 8" in out.err and "resumed from iteration 8" in out.out
    a, b = load_file(tmp_path / "ref.safetensors"), load_file(tmp_path / "run.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    ma = json.loads((tmp_path / "ref.json").read_text())
    mb = json.loads((tmp_path / "run.json").read_text())
    assert ma["history"] == mb["history"] and ma["evals"] == mb["evals"]
    assert not (tmp_path / "run.ckpt").exists()
    assert cli.main(["--resume", str(tmp_path / "run.ckpt")]) == 2
    err = capsys.readouterr().err
    assert "No training state" in err and "its model is at" in err and "run.safetensors" in err
    assert cli.main(["--resume", str(tmp_path / "never")]) == 2  # neither the stem nor its .ckpt folder exists
    err = capsys.readouterr().err
    assert f"{tmp_path / 'never'} or {tmp_path / 'never.ckpt'}" in err and "Traceback" not in err


def test_resolve_resume_path(tmp_path):
    from core.training import cli

    (tmp_path / "a.ckpt").mkdir()
    assert cli.resolve_resume_path(tmp_path / "a") == tmp_path / "a.ckpt"
    assert cli.resolve_resume_path(tmp_path / "a.ckpt") == tmp_path / "a.ckpt"
    (tmp_path / "state.json").write_text("{}")
    assert cli.resolve_resume_path(tmp_path / "state.json") == tmp_path / "state.json"
    with pytest.raises(WeightsError, match=r"No training state at .*b or .*b\.ckpt\.$"):
        cli.resolve_resume_path(tmp_path / "b")


# --------------------------------------------------------------------------- the run store

def _store(tmp_path, monkeypatch) -> RunStore:
    write_npz(tmp_path / "data", n=300)
    monkeypatch.setenv("RIMSCOPE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RIMSCOPE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RIMSCOPE_WORKER_NICE", "0")
    return RunStore(max_concurrent=1)


def store_cfg(**kw) -> TrainConfig:
    base = dict(dataset="mnist", model="rim", iterations=24, batch_size=20, eval_every=5, eval_samples=50,
                noise_draws=1, holdout_sample=False, state_every=3, state_every_s=0,
                model_overrides=dict(TINY["rim"]))
    base.update(kw)
    return TrainConfig(**base)


def reference(c: TrainConfig, data_dir: Path):
    from core.data.plan import prepare_training_data

    tr, te, _ = prepare_training_data(c, data_dir)
    fresh_pools()
    return train(c.__class__(**{**c.to_dict(), "threads": 1}), tr, te)


def test_store_stop_then_resume_in_the_page_worker(tmp_path, monkeypatch):
    store = _store(tmp_path, monkeypatch)
    c = store_cfg()
    rid = store.submit(c, owner="o")
    d = store.run_dir(rid)
    t = threading.Thread(target=run_worker, args=(d,))
    t.start()
    deadline = time.monotonic() + 60
    while len(store.read_metrics(rid)["iteration"]) < 7 and time.monotonic() < deadline:
        time.sleep(0.01)
    store.request_stop(rid)
    t.join(60)
    info = store.get(rid)
    assert info.status == "stopped" and "it can be resumed" in info.message, info.message
    stopped_at = info.iteration
    assert 7 <= stopped_at < 24 and R.last_iteration(d / "ckpt") == stopped_at
    with pytest.raises(RunStoreError, match="only interrupted or stopped"):
        store.resume(store.submit(c))  # a queued one
    assert store.resume(rid) == "queued"
    info = store.get(rid)
    assert info.status == "queued" and f"resumes from iteration {stopped_at}" in info.message
    assert not (d / "stop").exists()
    fresh_pools()
    assert run_worker(d) == "completed"
    info = store.get(rid)
    assert info.iteration == 24
    m = store.read_metrics(rid)
    assert m["iteration"] == list(range(1, 25)) and m["eval_iteration"] == [5, 10, 15, 20, 24]
    assert not (d / "ckpt").exists()
    ref = reference(c, tmp_path / "data")
    from core.training.weights import load_weights

    model, meta = load_weights(store.weights_stem(rid))
    assert meta["history"] == ref.history and meta["metrics"]["resumed_from_iteration"] == stopped_at
    assert m["loss"] == ref.history["loss"]
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), ref.model.state_dict().values()))
    with pytest.raises(RunStoreError, match="is completed"):
        store.resume(rid)


@pytest.mark.slow
def test_store_worker_killed_server_restarted_then_resumed(tmp_path, monkeypatch, capsys):
    """A real worker process killed with SIGKILL (the machine went down with the server); a new
    server (a fresh RunStore) shows the run interrupted; resume continues it to the same end."""
    import signal

    from core.runs.cli import main as runs_main

    store = _store(tmp_path, monkeypatch)
    c = store_cfg(iterations=60)
    rid = store.submit(c, owner="o")
    assert store.pump() == [rid]
    d = store.run_dir(rid)
    deadline = time.monotonic() + 120
    while (R.last_iteration(d / "ckpt") or 0) < 9 and time.monotonic() < deadline:
        time.sleep(0.02)
    pid = store.get(rid).pid
    os.kill(pid, signal.SIGKILL)
    while worker_alive(pid, rid) and time.monotonic() < deadline:
        time.sleep(0.02)
    fresh = RunStore(max_concurrent=0)  # the restarted server; its queue paused for a moment
    fresh.pump()
    info = fresh.get(rid)
    assert info.status == "interrupted" and "ended unexpectedly" in info.message
    saved = R.last_iteration(d / "ckpt")
    assert f"resume continues from its training state at iteration {saved}" in info.message
    monkeypatch.setenv("RIMSCOPE_MAX_CONCURRENT", "0")
    assert runs_main(["resume", rid]) == 0 and capsys.readouterr().out.strip() == "queued"
    assert runs_main(["resume", rid]) == 2  # queued now: not resumable twice
    fresh.max_concurrent = 1
    info = fresh.wait(rid, timeout=180)
    assert info.status == "completed", (info.message, (d / "worker.log").read_text()[-2000:])
    m = fresh.read_metrics(rid)
    assert m["iteration"] == list(range(1, 61))
    ref = reference(c, tmp_path / "data")
    assert m["loss"] == ref.history["loss"] and info.metrics["resumed_from_iteration"] == saved
    from core.training.weights import load_weights

    model, _ = load_weights(fresh.weights_stem(rid))
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), ref.model.state_dict().values()))


# --------------------------------------------------------------------------- the grid

def test_grid_cell_continues_from_its_state(tmp_path, monkeypatch):
    from core.grid import cells
    from core.training import loop

    d = write_npz(tmp_path / "data", dataset="fashion_mnist", n=300)

    def job(out: Path) -> dict:
        return dict(dataset="fashion_mnist", model="rim", seed=0, iterations=12, protocol="paper", noise_draws=1,
                    eval_every=5, data_dir=str(d), overrides=dict(TINY["rim"]), threads=1, state_every=4,
                    path=str(cells.run_path(out, "fashion_mnist", "rim", 0)))

    fresh_pools()
    ref = cells.train_cell(job(tmp_path / "ref"))
    assert ref["status"] == "completed" and ref["resumed_from"] is None
    real = loop.train

    def killed(*a, **kw):
        return real(*a, **{**kw, "callback": crash_at(10)})

    monkeypatch.setattr(loop, "train", killed)
    j = job(tmp_path / "out")
    with pytest.raises(Crash):
        cells.train_cell(j)
    cell = Path(j["path"])
    assert not cell.exists() and R.last_iteration(cell.with_suffix(".ckpt")) == 8
    monkeypatch.setattr(loop, "train", real)
    fresh_pools()
    r = cells.train_cell(j)
    assert r["status"] == "completed" and r["resumed_from"] == 8
    assert not cell.with_suffix(".ckpt").exists()
    a = json.loads(Path(job(tmp_path / "ref")["path"]).read_text())
    b = json.loads(cell.read_text())
    assert a["history"] == b["history"] and a["evals"] == b["evals"]
    from safetensors.torch import load_file

    wa, wb = load_file(cell.with_name("rim_s0.safetensors")), \
        load_file(Path(job(tmp_path / "ref")["path"]).with_suffix(".safetensors"))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


# --------------------------------------------------------------------------- the benchmark

def test_state_benchmark_runs_and_counts_protocol_states(capsys):
    from bench.bench_state import main, states_in_protocol_run

    assert states_in_protocol_run(20.0, 0.02) == 4  # 200, 400, 600, 800
    # slow (400 ms/it): also 60 s after the last one: 150, 200, 350, 400, 550, 600, 750, 800, 950
    assert states_in_protocol_run(400.0, 0.02) == 9
    assert states_in_protocol_run(20.0, 0.02, every=0, every_s=0) == 0
    assert main(["--models", "parallel_lstm", "--iterations", "4", "--every", "2", "--train-images", "300",
                 "--no-adam"]) == 0
    out = capsys.readouterr().out
    assert "parallel_lstm" in out and "share of a 1,000-it run" in out


# --------------------------------------------------------------------------- augmentation


@pytest.mark.parametrize("augment", ["affine", "scan"])
def test_augmented_run_crash_then_resume_is_bit_identical(data, tmp_path, augment):
    tr, te = data
    AUGMENTED = cfg("parallel_lstm", augment=augment, optimizer="adam", lr=0.01, schedule="cosine", val_images=30)
    ref = train(AUGMENTED, tr, te)
    plain = train(cfg("parallel_lstm", optimizer="adam", lr=0.01, schedule="cosine", val_images=30), tr, te)
    assert not same_run(ref, plain)  # the augmentation is on: this is not the unaugmented run
    res = crash_and_resume(AUGMENTED, data, tmp_path / "ck", at=10)  # resumes from the training state of 8
    assert res.resumed_from == 8 and same_run(ref, res)
    st = R.read_state(tmp_path / "ck" / "state-00000008.json")
    assert st.train_config["augment"] == augment and st.rng["augment"].dtype == torch.uint8
    # stopped midway, then resumed: the same run too
    polls = []
    stopped = train(AUGMENTED, tr, te, state_dir=tmp_path / "st", should_stop=lambda: polls.append(1) or len(polls) > 5)
    assert stopped.status == "stopped" and stopped.metrics["iterations_done"] == 5
    res2 = train(AUGMENTED, tr, te, state_dir=tmp_path / "st", resume_from=tmp_path / "st")
    assert res2.resumed_from == 5 and same_run(ref, res2)


def test_augment_resume_refuses_the_other_setting_and_old_states_mean_none(data, tmp_path):
    tr, te = data
    with pytest.raises(Crash):
        train(cfg(), tr, te, callback=crash_at(6), state_dir=tmp_path)
    with pytest.raises(WeightsError, match="other settings.*augment"):
        train(cfg(augment="affine"), tr, te, resume_from=tmp_path)
    # a state written before the setting existed has no "augment": it was an unaugmented run
    st = R.read_state(tmp_path / "state-00000004.json")
    old = {k: v for k, v in st.train_config.items() if k != "augment"}
    st.train_config = old
    assert R.config_mismatch(st, cfg().to_dict()) == []
    assert R.config_mismatch(st, cfg(augment="affine").to_dict()) == ["augment"]
    res = train(cfg(), tr, te, resume_from=st)
    assert res.resumed_from == 4
