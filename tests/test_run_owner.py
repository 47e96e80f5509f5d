"""Who may act on a run (core.runs.schema.may_act), enforced by the store's stop, resume and
delete: the machine's owner (actor None) on every run, a signed-in user on their own only.

The queue is paused (RIMSCOPE_MAX_CONCURRENT=0): no worker starts; runs are set to the
statuses an action needs by hand."""

from __future__ import annotations

import pytest

from core.runs.schema import RunPermissionError, RunStoreError, may_act
from core.runs.store import RunStore
from core.training.config import TrainConfig

ALICE, BOB = "user-alice", "user-bob"


@pytest.fixture
def store(tiny_mnist_home, monkeypatch):
    monkeypatch.setenv("RIMSCOPE_MAX_CONCURRENT", "0")
    return RunStore()


def cfg() -> TrainConfig:
    return TrainConfig(dataset="mnist", model="parallel_lstm", iterations=20, holdout_sample=False)


def test_may_act_rule():
    assert may_act("anyone", None) and may_act("", None)  # the machine's owner: every run
    assert may_act(ALICE, ALICE)
    assert not may_act(ALICE, BOB)
    assert not may_act("", "")  # nobody signed in acts on nothing, not even ownerless runs
    assert not may_act(ALICE, "")
    assert not may_act("", BOB)  # a run started before sign-in was on is nobody's to act on


def test_another_user_can_neither_stop_resume_nor_delete(store):
    rid = store.submit(cfg(), owner=ALICE)
    with pytest.raises(RunPermissionError, match="started by another user; only they can stop it"):
        store.request_stop(rid, actor=BOB)
    assert store.get(rid).status == "queued"
    assert not (store.run_dir(rid) / "stop").exists()
    store._set_status(rid, status="stopped", iteration=5)
    with pytest.raises(RunPermissionError, match="only they can resume it"):
        store.resume(rid, actor=BOB)
    assert store.get(rid).status == "stopped"
    with pytest.raises(RunPermissionError, match="only they can delete it"):
        store.delete(rid, actor=BOB)
    with pytest.raises(RunPermissionError):
        store.delete(rid, actor="")  # not signed in
    assert store.get(rid) is not None
    assert issubclass(RunPermissionError, RunStoreError)  # the pages show it like any refusal


def test_the_owner_and_the_machine_owner_can(store):
    mine = store.submit(cfg(), owner=ALICE)
    assert store.request_stop(mine, actor=ALICE) == "stopped"
    assert store.resume(mine, actor=ALICE) == "queued"
    assert store.request_stop(mine) == "stopped"  # the command line: no actor
    store.delete(mine, actor=ALICE)
    assert store.get(mine) is None
    theirs = store.submit(cfg(), owner=BOB)
    store.delete(theirs)  # the machine's owner deletes any run
    assert store.list_runs() == []


def test_running_run_gets_no_stop_file_from_another_user(store):
    rid = store.submit(cfg(), owner=ALICE)
    store._set_status(rid, status="running", iteration=3)
    with pytest.raises(RunPermissionError):
        store.request_stop(rid, actor=BOB)
    assert not (store.run_dir(rid) / "stop").exists()
    assert store.request_stop(rid, actor=ALICE) == "running"
    assert (store.run_dir(rid) / "stop").exists()
