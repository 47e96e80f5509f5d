"""The Train page through Streamlit's AppTest: widgets, validation messages, queuing runs.

The queue is paused (RIMSCOPE_MAX_CONCURRENT=0), so no worker process starts here; the
workers themselves are tested in tests/test_runs.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.runs.store import RunStore
from pages.ui.auth import owner_id

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "train.py")


@pytest.fixture
def home(tiny_mnist_home, monkeypatch):
    monkeypatch.setenv("RIMSCOPE_MAX_CONCURRENT", "0")  # queue paused: nothing trains here
    return tiny_mnist_home


def user(sub: str) -> dict:
    """``st.user`` of a signed-in account (sign-in configured on the server)."""
    return {"is_logged_in": True, "iss": "https://id.example", "sub": sub, "email": f"{sub}@example.com"}


def run_page(sub: str | None = None) -> AppTest:
    """The page without sign-in (the default), or signed in as ``sub``."""
    at = AppTest.from_file(PAGE, default_timeout=60)
    if sub is not None:
        at.user = user(sub)
    return at.run()


def errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


def test_page_loads_with_widgets(home):
    at = run_page()
    assert not at.exception
    assert at.selectbox(key="train_dataset").value == "mnist"
    assert set(at.selectbox(key="train_dataset").options) >= {"MNIST", "Fashion-MNIST", "CIFAR-10", "Animals-10"}
    assert at.multiselect(key="train_models").value == ["rim", "parallel_lstm"]
    assert at.number_input(key="train_iterations").value == 1000
    assert at.number_input(key="train_batch").value == 100
    assert at.number_input(key="train_lr").value == pytest.approx(0.1)
    assert at.number_input(key="train_momentum").value == 0
    assert at.checkbox(key="train_clip_on").value is False
    assert at.selectbox(key="train_weighting").value == "auto"
    assert at.checkbox(key="train_holdout").value is True
    assert any("Training data: npz folder" in c.value for c in at.caption)
    # the tiny data set (300 images) is not the original MNIST order: nothing is held out, said so
    assert any("300 training images" in c.value and "nothing held out" in c.value.lower() for c in at.caption)
    assert not errors(at) and not at.button(key="train_start").disabled
    at.checkbox(key="train_holdout").uncheck().run()
    assert not at.exception and not errors(at)
    assert not at.button(key="train_start").disabled
    assert "Start 2 runs" in at.button(key="train_start").label


@pytest.mark.parametrize("key, value, message", [
    ("train_lr", -0.1, "Learning rate must be a number in (0, 10]"),
    ("train_iterations", 0, "Iterations must be between 1 and"),
    ("train_batch", 500, "larger than the training set (300 images)"),
    ("train_momentum", 1.5, "Momentum must be in [0, 1)"),
])
def test_invalid_settings_are_refused(home, key, value, message):
    at = run_page()
    at.checkbox(key="train_holdout").uncheck().run()
    at.number_input(key=key).set_value(value).run()
    assert not at.exception
    assert any(message in e for e in errors(at)), errors(at)
    assert at.button(key="train_start").disabled


def test_bad_seeds_and_no_models(home):
    at = run_page()
    at.checkbox(key="train_holdout").uncheck().run()
    at.text_input(key="train_seeds").input("zero").run()
    assert any("Seeds must be whole numbers" in e for e in errors(at))
    at.text_input(key="train_seeds").input("0").run()
    at.multiselect(key="train_models").set_value([]).run()
    assert any("Pick at least one model" in e for e in errors(at))
    assert at.button(key="train_start").disabled
    assert not at.exception


def test_no_data_offline_disables_start(home, monkeypatch):
    at = run_page()
    at.selectbox(key="train_dataset").set_value("cifar10").run()
    assert not at.exception
    # said once: a short error, then the ways to get the data (not the ways twice, in the error too)
    assert "No training data for CIFAR-10 here: none of its sources holds the train split." in errors(at)
    assert not any("RIMSCOPE_DATA_DIR" in e for e in errors(at))
    assert at.button(key="train_start").disabled
    ways = " ".join(m.value for m in at.markdown)
    assert "RIMSCOPE_DATA_DIR=/path/to/folder make app" in ways and "torchvision downloads" in ways
    assert not [c for c in at.checkbox if c.key == "train_demo"]  # no CIFAR-10 sample to demo on


def test_a_machine_found_offline_says_why_once_and_lists_the_ways_once(home, monkeypatch, tmp_path):
    """No RIMSCOPE_OFFLINE, but the download source does not answer: the error says why in one
    clause (not the ways to get the data, nor "(Train page)" on the Train page); the ways are
    listed once below it."""
    from core.data import plan
    from core.data.online import Reachability

    monkeypatch.delenv("RIMSCOPE_OFFLINE")
    monkeypatch.setenv("RIMSCOPE_DATA_DIR", str(tmp_path / "nothing"))
    monkeypatch.setattr(plan, "download_reachable", lambda *a, **k: Reachability(False, "no route"))
    at = run_page()
    assert not at.exception
    said = errors(at)
    assert said == ["No training data for MNIST here: MNIST could not be downloaded: this machine has no internet "
                    "connection."], said
    shown = " ".join(said + [m.value for m in at.markdown] + [c.label for c in at.checkbox])
    assert "Train page" not in shown
    assert shown.count("RIMSCOPE_DATA_DIR") == 1 and shown.count("train.npz") == 1
    assert len([c for c in at.checkbox if c.key == "train_demo"]) == 1


def test_offline_without_data_offers_a_labelled_demo_on_the_sample(home, monkeypatch, tmp_path):
    monkeypatch.setenv("RIMSCOPE_DATA_DIR", str(tmp_path / "nothing"))
    at = run_page()
    assert any("No training data for MNIST" in e for e in errors(at)) and at.button(key="train_start").disabled
    at.checkbox(key="train_demo").check().run()
    assert not at.exception and not errors(at) and not at.button(key="train_start").disabled
    assert any("bundled sample (demo)" in c.value for c in at.caption)
    at.button(key="train_start").click().run()
    runs = RunStore().list_runs()
    assert runs and all(r.config["data_source"] == "sample" for r in runs)


@pytest.mark.parametrize("folder, words", [("/nonexistent/folder", "does not exist"),
                                           ("/etc/passwd", "is a file, not a folder"),
                                           ("/tmp", "has no mnist/train.npz")])
def test_a_wrong_data_folder_is_said_not_ignored(home, folder, words):
    at = run_page()
    at.text_input(key="train_data_dir").input(folder).run()
    assert any(words in e for e in errors(at)) and at.button(key="train_start").disabled


def test_every_problem_is_listed_and_duplicate_seeds_give_one_run(home):
    at = run_page()
    at.number_input(key="train_lr").set_value(-1.0).run()
    at.number_input(key="train_iterations").set_value(0).run()
    at.number_input(key="train_noise_draws").set_value(100_000).run()
    msgs = errors(at)
    assert any("Learning rate" in e for e in msgs) and any("Iterations" in e for e in msgs)
    assert any("Noise draws must be between 0 and 100" in e for e in msgs)
    assert len(msgs) == len(set(msgs))  # each once, though two models fail the same way
    at.number_input(key="train_lr").set_value(0.1).run()
    at.number_input(key="train_iterations").set_value(1000).run()
    at.number_input(key="train_noise_draws").set_value(3).run()
    at.text_input(key="train_seeds").input("1,1").run()
    assert at.button(key="train_start").label == "Start 2 runs"  # rim and parallel LSTMs, seed 1 once


def test_an_identical_run_is_not_queued_twice_and_the_page_says_which(home):
    at = run_page()
    at.checkbox(key="train_holdout").uncheck().run()
    at.multiselect(key="train_models").set_value(["rim"]).run()
    assert at.button(key="train_start").label == "Start 1 run"
    at.button(key="train_start").click().run()
    assert not at.exception and len(RunStore().list_runs()) == 1
    at.run()  # the same form again: the run is there, queued
    said = " ".join(i.value for i in at.info)
    assert "Already in your runs with these settings, so not queued again: RIM" in said and "(queued)" in said
    assert at.button(key="train_start").label == "Start" and at.button(key="train_start").disabled
    at.text_input(key="train_seeds").input("0-1").run()  # seed 1 is new: only it is queued
    assert at.button(key="train_start").label == "Start 1 run"
    at.button(key="train_start").click().run()
    runs = RunStore().list_runs()
    assert sorted(r.seed for r in runs) == [0, 1]  # not two entries that differ only by run id


def test_estimated_duration_from_measured_speed(home, monkeypatch, tmp_path):
    """With a shipped model whose JSON records 100 s for 1,000 iterations, 1,000,000 iterations of it
    are estimated at about 27.8 hours."""
    import json

    from core.models.registry import build_model
    from core.training.weights import save_weights

    pre = tmp_path / "pre"
    entries = []
    for model, seconds in (("rim", 100.0), ("parallel_lstm", 20.0)):
        meta = {"model": model, "dataset": "mnist", "seed": 0, "status": "completed",
                "metrics": {"train_time_s": seconds, "iterations_done": 1000}, "train_config": {"iterations": 1000}}
        save_weights(build_model(model), meta, pre / "mnist" / model)
        entries.append({"dataset": "mnist", "model": model, "seed": 0, "weights": f"mnist/{model}.safetensors"})
    (pre / "manifest.json").write_text(json.dumps({"models": entries}))
    monkeypatch.setenv("RIMSCOPE_PRETRAINED_DIR", str(pre))
    at = run_page()
    at.number_input(key="train_iterations").set_value(1_000_000).run()
    cap = next(c.value for c in at.caption if c.value.startswith("Estimated training time"))
    assert "about 27.8 h" in cap and "about 5.6 h" in cap
    assert cap.count("shipped models") == 1, cap  # the source once for the models it serves, not per model


def test_start_queues_one_run_per_model_and_seed(home):
    owner = "b" * 16
    at = run_page(owner)
    at.checkbox(key="train_holdout").uncheck().run()
    at.text_input(key="train_seeds").input("0,1").run()
    at.number_input(key="train_iterations").set_value(20).run()
    at.text_input(key="train_label").input("page test").run()
    assert at.button(key="train_start").label == "Start 4 runs"
    at.button(key="train_start").click().run()
    assert not at.exception
    runs = RunStore().list_runs()
    assert len(runs) == 4
    assert {(r.model, r.seed) for r in runs} == {("rim", 0), ("rim", 1), ("parallel_lstm", 0), ("parallel_lstm", 1)}
    assert all(r.status == "queued" and r.owner == owner_id(user(owner)) and r.label == "page test" for r in runs)
    assert all(r.config["iterations"] == 20 and r.config["holdout_sample"] is False for r in runs)
    assert any("Queued 4 runs" in s.value for s in at.success)
    # the live view lists them with a Stop button each; stopping a queued run is immediate
    stop_keys = [b.key for b in at.button if (b.key or "").startswith("stop_")]
    assert len(stop_keys) == 4
    at.button(key=stop_keys[0]).click().run()
    assert not at.exception
    assert RunStore().get(stop_keys[0][len("stop_"):]).status == "stopped"
    # a new tab (new session, same account) still shows them as the user's runs
    at2 = run_page(owner)
    assert not at2.exception
    assert len([b for b in at2.button if (b.key or "").startswith("stop_")]) == 3
    # another account sees them read-only, whatever the URL says
    at3 = AppTest.from_file(PAGE, default_timeout=60)
    at3.user = user("someone-else")
    at3.query_params["owner"] = owner
    at3.run()
    assert not at3.exception and not [b for b in at3.button if (b.key or "").startswith(("stop_", "del_"))]


def test_converged_protocol_and_ablation_settings_reach_the_queued_runs(home):
    at = run_page("c" * 16)
    at.checkbox(key="train_holdout").uncheck().run()
    at.radio(key="train_protocol").set_value("converged").run()
    assert not at.exception
    assert at.selectbox(key="train_optimizer").value == "adam"
    assert at.selectbox(key="train_schedule").value == "cosine"
    # the protocol's 5,000 validation images, fitted to the tiny data set: a tenth of its 300 images
    assert at.number_input(key="train_val").value == 30
    assert not errors(at) and not at.button(key="train_start").disabled
    # a split as large as the training set is refused: said, and Start is off
    at.number_input(key="train_val").set_value(300).run()
    assert any("Validation images (300) must be fewer than the training images" in e for e in errors(at))
    assert at.button(key="train_start").disabled
    at.number_input(key="train_val").set_value(50).run()
    at.number_input(key="train_iterations").set_value(30).run()
    at.selectbox(key="train_selection").set_value("random").run()
    at.number_input(key="train_alpha").set_value(0.0).run()
    at.number_input(key="train_forget_bias").set_value(0.0).run()
    assert not errors(at)
    at.button(key="train_start").click().run()
    runs = {r.model: r for r in RunStore().list_runs()}
    rim, pl = runs["rim"].config, runs["parallel_lstm"].config
    assert rim["optimizer"] == pl["optimizer"] == "adam" and rim["val_images"] == 50 and rim["iterations"] == 30
    assert rim["model_overrides"] == {"forget_bias": 0.0, "selection": "random", "alpha": 0.0}
    assert pl["model_overrides"] == {"forget_bias": 0.0}  # the rim-only ablations are not passed on
    # back to the paper protocol: its settings return
    at.radio(key="train_protocol").set_value("paper").run()
    assert at.selectbox(key="train_optimizer").value == "sgd" and at.number_input(key="train_lr").value == 0.1


def test_resume_button_on_interrupted_and_stopped_runs(home):
    from core.training.config import TrainConfig

    owner = "d" * 16
    store = RunStore()
    cfg = TrainConfig(dataset="mnist", model="parallel_lstm", iterations=20, holdout_sample=False)
    interrupted, stopped, done, theirs = (store.submit(cfg, owner=owner_id(user(o))) for o in (owner, owner, owner, "e" * 16))
    store._set_status(interrupted, status="interrupted", iteration=7,
                      message="the worker process ended unexpectedly after 7 iterations")
    store._set_status(stopped, status="stopped", iteration=5, message="stopped by the user after 5 iterations")
    store._set_status(done, status="completed", iteration=20)
    store._set_status(theirs, status="interrupted", iteration=3)
    at = run_page(owner)
    assert not at.exception
    resume_keys = sorted(b.key for b in at.button if (b.key or "").startswith("resume_"))
    # only the user's interrupted and stopped runs: not the completed one, not another user's
    assert resume_keys == sorted(f"resume_{r}" for r in (interrupted, stopped))
    at.button(key=f"resume_{interrupted}").click().run()
    assert not at.exception
    info = RunStore().get(interrupted)
    assert info.status == "queued" and "resumes from the start" in info.message  # no training state yet
    assert [b.key for b in at.button if (b.key or "").startswith("resume_")] == [f"resume_{stopped}"]
    assert RunStore().get(theirs).status == "interrupted"


def test_device_choice_reaches_the_run_and_cuda_without_gpu_is_refused(home):
    import torch

    at = run_page("d" * 16)
    at.checkbox(key="train_holdout").uncheck().run()
    assert at.selectbox(key="train_device").value == "auto"
    at.selectbox(key="train_device").set_value("cuda").run()
    if not torch.cuda.is_available():
        assert any("torch sees no GPU" in e for e in errors(at)) and at.button(key="train_start").disabled
    at.selectbox(key="train_device").set_value("cpu").run()
    at.number_input(key="train_iterations").set_value(10).run()
    at.button(key="train_start").click().run()
    assert {r.config["device"] for r in RunStore().list_runs()} == {"cpu"}


def test_curves_span_the_schedule_and_runs_without_points_draw_no_chart():
    import types

    from core.report.plots.training import has_points, live_runs_figure

    run = types.SimpleNamespace(run_id="r1", model="rim", seed=0, total=1000)
    one_point = {"iteration": [1], "loss": [2.3], "eval_iteration": [100], "test_acc": [0.2]}
    fig = live_runs_figure([run], {"r1": one_point}, "acc")
    assert list(fig.layout.xaxis.range) == [-20, 1020]  # the schedule, with a margin for its end points
    assert live_runs_figure([run], {"r1": one_point}, "loss").layout.yaxis.rangemode == "tozero"
    assert not has_points({"loss": [], "test_acc": []}, "loss")
    assert has_points(one_point, "acc")
    named = live_runs_figure([run], {"r1": one_point}, "acc", names={"r1": "RIM (paper's method) · paper protocol · seed 0 (run r1)"})
    assert named.data[0].name == "RIM (paper's method) · paper protocol · seed 0 (run r1)"
    long = {"iteration": list(range(1, 5001)), "loss": [1.0] * 5000}
    assert len(live_runs_figure([run], {"r1": long}, "loss").data[0].x) <= 1501  # thinned, last point kept


def test_the_form_lives_in_the_url_and_a_reload_keeps_it(home):
    at = run_page()
    at.checkbox(key="train_holdout").uncheck().run()
    at.number_input(key="train_iterations").set_value(3000).run()
    at.multiselect(key="train_models").set_value(["indrnn"]).run()
    at.text_input(key="train_data_dir").input(str(home / "data")).run()
    qp = {k: (v[0] if isinstance(v, list) else v) for k, v in dict(at.query_params).items()}
    assert qp["train_iterations"] == "3000" and qp["train_models"] == "indrnn" and qp["train_holdout"] == "0"
    again = AppTest.from_file(PAGE, default_timeout=60)  # a reload: a new session on the same URL
    for k, v in qp.items():
        again.query_params[k] = v
    again.run()
    assert not again.exception and not [w for w in again.warning if "Session State" in w.value]
    assert again.number_input(key="train_iterations").value == 3000
    assert again.multiselect(key="train_models").value == ["indrnn"]
    assert again.checkbox(key="train_holdout").value is False
    assert again.text_input(key="train_data_dir").value == str(home / "data")
    assert again.button(key="train_start").label == "Start 1 run"


def test_a_url_the_browser_has_not_yet_updated_does_not_undo_an_edit(home):
    """Two fields edited quickly: the second edit's rerun may carry the URL from before the first
    (the browser had not yet applied the page's update). That older URL is one this page wrote
    itself, so it undoes nothing: the run starts with the value the user typed."""
    at = run_page()
    before = {k: (v[0] if isinstance(v, list) else v) for k, v in dict(at.query_params).items()}
    assert before["train_iterations"] == "1000"
    at.number_input(key="train_iterations").set_value(20).run()
    assert dict(at.query_params)["train_iterations"] in ("20", ["20"])
    for k, v in before.items():  # the browser still shows the URL from before the first edit
        at.query_params[k] = v
    at.number_input(key="train_eval_every").set_value(5).run()
    assert at.number_input(key="train_iterations").value == 20, "an older URL undid the edit"
    assert dict(at.query_params)["train_iterations"] in ("20", ["20"])
    # a link to another value (never written by this page) still sets the field
    at.query_params["train_iterations"] = "300"
    at.run()
    assert at.number_input(key="train_iterations").value == 300


def test_augment_choice_lives_in_the_url_and_reaches_the_queued_runs(home):
    at = run_page("f" * 16)
    at.checkbox(key="train_holdout").uncheck().run()
    assert at.selectbox(key="train_augment").value == "none"
    assert list(at.selectbox(key="train_augment").options) == ["none", "small random affine", "scan-like (slant, stroke width, elastic, binarisation)"]
    at.selectbox(key="train_augment").set_value("affine").run()
    at.radio(key="train_protocol").set_value("converged").run()  # a protocol leaves the augmentation alone
    assert at.selectbox(key="train_augment").value == "affine"
    qp = {k: (v[0] if isinstance(v, list) else v) for k, v in dict(at.query_params).items()}
    assert qp["train_augment"] == "affine"
    at.number_input(key="train_val").set_value(50).run()
    at.number_input(key="train_iterations").set_value(10).run()
    assert not errors(at)
    at.button(key="train_start").click().run()
    assert {r.config["augment"] for r in RunStore().list_runs()} == {"affine"}
    again = AppTest.from_file(PAGE, default_timeout=60)  # a reload keeps it; a bad value falls back to none
    again.query_params["train_augment"] = "affine"
    again.run()
    assert not again.exception and again.selectbox(key="train_augment").value == "affine"
    bad = AppTest.from_file(PAGE, default_timeout=60)
    bad.query_params["train_augment"] = "flip"
    bad.run()
    assert not bad.exception and bad.selectbox(key="train_augment").value == "none"


def _cards(at: AppTest) -> list[str]:
    """The run cards' titles, top to bottom."""
    return [m.value for m in at.markdown if re.search(r"run [0-9a-f]{8}\\?\)", m.value) and " on " in m.value]


def test_intro_follows_the_chosen_protocol(home):
    at = run_page("f" * 16)
    intro = at.caption[0].value
    assert "paper's protocol (plain SGD" in intro and "$RIMSCOPE_HOME" not in intro
    at.radio(key="train_protocol").set_value("converged").run()
    intro = at.caption[0].value
    assert "cosine" in intro and "Adam" in intro and "paper's protocol" not in intro


def test_cards_name_their_protocol_keep_their_order_and_stop_says_which_run(home):
    from core.training.config import TrainConfig

    owner = "9" * 16
    store = RunStore()
    paper = store.submit(TrainConfig.from_protocol("paper", dataset="mnist", model="rim", holdout_sample=False),
                         owner=owner)
    conv = store.submit(TrainConfig.from_protocol("converged", dataset="mnist", model="rim", holdout_sample=False),
                        owner=owner)
    at = run_page()  # without sign-in: every run in the store is the user's
    assert not at.exception
    cards = _cards(at)
    assert len(cards) == 2
    # creation order, and the two protocols of one method and seed read differently
    assert "· paper protocol · seed 0" in cards[0] and paper[-8:] in cards[0]
    assert "· Adam 4k · seed 0" in cards[1] and conv[-8:] in cards[1]
    # the older run finishes: the cards keep their places (not re-sorted by state)
    store._set_status(paper, status="completed", iteration=1000)
    at.run()
    assert _cards(at)[0].count(paper[-8:]) == 1 and conv[-8:] in _cards(at)[1]
    # Stop acts on the run its card names, and the page says which one it stopped
    at.button(key=f"stop_{conv}").click().run()
    assert not at.exception
    assert RunStore().get(conv).status == "stopped" and RunStore().get(paper).status == "completed"
    said = " ".join(s.value for s in at.success)
    assert f"Stopped RIM (paper's method) · Adam 4k · seed 0 (run {conv[-8:]}) before it started." in said


def test_held_out_sentence_says_why_without_nested_brackets_or_paths(home, monkeypatch):
    """The original 60,000-image MNIST: the caption says how many images train, which are held
    out and why, in one plain sentence; the folder only in its tooltip."""
    import core.data.plan as plan
    from core.data.datasets import MNIST_TRAIN_SIZE

    held, note = plan._mnist_holdout(MNIST_TRAIN_SIZE, True)
    assert held
    monkeypatch.setattr(plan, "training_data_plan", lambda *a, **k: plan.DataPlan(
        "npz folder (/somewhere/data/mnist)", MNIST_TRAIN_SIZE - 10_000, note))
    at = run_page("7" * 16)
    assert not at.exception
    cap = next(c for c in at.caption if c.value.startswith("Training data:"))
    assert "50,000 training images" in cap.value and "0 to 9,999 held out" in cap.value
    assert "1,000 images of the bundled sample" in cap.value and "were cut from these 10,000" in cap.value
    assert "(" not in cap.value and "/somewhere" not in cap.value
    assert "/somewhere/data/mnist" in cap.proto.help


def _running(store: RunStore, run_id: str, iteration: int, **changes) -> None:
    """Mark a run as running in this process (a live worker for pump(): this test's pid)."""
    import os
    import time

    from core.runs.queue import process_started

    store._set_status(run_id, status="running", pid=os.getpid(), pid_started=process_started(os.getpid()),
                      heartbeat=time.time(), iteration=iteration, **changes)


def _progress(at: AppTest) -> list[str]:
    return [p.proto.text for p in at.get("progress")]


def test_after_the_last_iteration_the_card_says_final_evaluation(home):
    from core.training.config import TrainConfig

    owner = "8" * 16
    store = RunStore()
    rid = store.submit(TrainConfig(dataset="mnist", model="rim", iterations=300, holdout_sample=False), owner=owner)
    _running(store, rid, 150)
    at = run_page(owner)
    assert not at.exception
    assert _progress(at) == ["running · 150 / 300 iterations"]
    _running(store, rid, 300)
    at.run()
    assert _progress(at) == ["final evaluation on the whole test set… · 300 / 300 iterations"]


def test_stopping_message_becomes_what_the_stop_came_to(home):
    from core.training.config import TrainConfig

    owner = "7" * 16
    store = RunStore()
    rid = store.submit(TrainConfig(dataset="mnist", model="rim", iterations=1000, holdout_sample=False),
                       owner=owner_id(user(owner)))
    _running(store, rid, 100)
    at = run_page(owner)
    at.button(key=f"stop_{rid}").click().run()
    assert not at.exception
    assert any(s.value.startswith("Stopping RIM") for s in at.success)
    assert not [b for b in at.button if b.key == f"stop_{rid}"]  # asked once; the card says it is stopping
    assert _progress(at) == ["stopping after the current iteration · 100 / 1,000 iterations"]
    # the worker ends the run (what core.runs.worker writes on a stop)
    (store.run_dir(rid) / "stop").unlink()
    store._set_status(rid, status="stopped", iteration=105, pid=None, message="stopped by the user after 105 iterations",
                      metrics={"test_accuracy": 0.21, "test_n": 10000, "iterations_done": 105})
    at.run()
    said = " ".join(s.value for s in at.success)
    assert "Stopping" not in said
    assert f"(run {rid[-8:]}) stopped after 105 of 1,000 iterations" in said and "can be resumed" in said


def test_a_last_iteration_loss_spike_is_said_with_the_weights_kept(home):
    """A demo that ended at 53 % after 86.5 % at iteration 250: the card says the final weights are
    kept and that the final evaluation is far below the best seen; a steady run gets no warning."""
    import json

    from core.training.config import TrainConfig

    owner = "6" * 16
    store = RunStore()
    cfg = TrainConfig(dataset="mnist", model="parallel_lstm", iterations=300, eval_every=50, holdout_sample=False,
                      data_source="sample")
    spiky, steady = store.submit(cfg, owner=owner_id(user(owner))), store.submit(cfg, owner=owner_id(user(owner)))
    for rid, accs in ((spiky, (0.70, 0.80, 0.84, 0.85, 0.865, 0.53)), (steady, (0.70, 0.80, 0.84, 0.85, 0.86, 0.855))):
        with open(store.run_dir(rid) / "metrics.jsonl", "w") as f:
            for it, acc in zip(range(50, 301, 50), accs):
                f.write(json.dumps({"kind": "iter", "iteration": it, "loss": 0.5}) + "\n")
                f.write(json.dumps({"kind": "eval", "iteration": it, "test_acc": acc, "test_loss": 1.0}) + "\n")
        store._set_status(rid, status="completed", iteration=300, message="",
                          metrics={"test_accuracy": accs[-1], "test_n": 200, "iterations_done": 300})
    at = run_page(owner)
    assert not at.exception
    cards = _cards(at)
    assert len(cards) == 2 and all("(demo, run " in c for c in cards)  # demo runs say so on their cards
    caps = [c.value for c in at.caption if c.value.startswith("final test accuracy")]
    assert len(caps) == 2 and all("kept the final weights (iteration 300)" in c for c in caps)
    warns = [w.value for w in at.warning if "below the best seen" in w.value]
    assert len(warns) == 1
    assert "53.0 %, 33.5 points below the best seen" in warns[0] and "86.5 % at iteration 250" in warns[0]


def test_older_runs_table_uses_titles_and_fits_1280_px(home):
    import json

    from core.training.config import TrainConfig

    owner = "5" * 16
    store = RunStore()
    for _ in range(3):
        store.submit(TrainConfig(dataset="mnist", model="parallel_lstm", iterations=10, holdout_sample=False),
                     owner="someone-else", label="a label")
    at = run_page(owner)
    df = at.dataframe[0].value
    assert set(df["model"]) == {"Parallel LSTMs"} and set(df["data set"]) == {"MNIST"}
    assert all(len(r) == 8 for r in df["run"])  # the short id the cards show
    cols = json.loads(at.dataframe[0].proto.columns)
    shown = [c for c in df.columns if c in cols]
    assert "label" in shown and sum(cols[c]["width"] for c in shown) <= 820


def test_every_protocol_has_a_readable_title_and_an_introduction(home):
    """The protocol switch never shows an internal key, and every protocol says what it trains."""
    from core.training.config import PROTOCOLS

    at = run_page()
    radio = at.radio(key="train_protocol")
    assert list(radio.options) and all(label not in PROTOCOLS for label in radio.options), radio.options
    for protocol in PROTOCOLS:
        at.radio(key="train_protocol").set_value(protocol).run()
        assert not at.exception
        intro = at.caption[0].value
        assert intro.startswith("Train models"), (protocol, intro)


def _animals10(data_dir: Path, n_train: int = 1060, n_test: int = 50) -> None:
    """An Animals-10-shaped npz data set (``n_train`` training images, like a small Animals-10)."""
    import numpy as np

    from core.data.datasets import DATASETS

    rng = np.random.default_rng(0)
    out = data_dir / "animals10"
    out.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("test", n_test)):
        np.savez(out / f"{split}.npz", x=rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8),
                 y=(np.arange(n) % 10).astype(np.int64), classes=np.array(DATASETS["animals10"].classes))


@pytest.mark.parametrize("protocol", ["converged", "converged-12k", "converged-24k"])
def test_adam_presets_hold_out_a_tenth_of_a_small_data_set(home, protocol):
    """The protocol's rule (5,000 validation images, a tenth of the training set where that is
    smaller) gives Animals-10 with 1,060 training images a split of 106, as the shipped runs had;
    the split follows the data set while it holds the protocol's value, and a typed one stays."""
    from core.training.config import TrainConfig
    from core.training.lifecycle import fit_validation

    _animals10(home / "data")
    at = run_page()
    at.selectbox(key="train_dataset").set_value("animals10").run()
    at.radio(key="train_protocol").set_value(protocol).run()
    assert not at.exception
    assert at.number_input(key="train_val").value == 106
    assert not errors(at), errors(at)
    assert not at.button(key="train_start").disabled
    # another data set, the protocol still chosen: the split follows (MNIST here: 300 images -> 30)
    at.selectbox(key="train_dataset").set_value("mnist").run()
    assert at.number_input(key="train_val").value == 30
    at.selectbox(key="train_dataset").set_value("animals10").run()
    assert at.number_input(key="train_val").value == 106
    # a value the user typed is theirs: a change of data set leaves it
    at.number_input(key="train_val").set_value(40).run()
    at.selectbox(key="train_dataset").set_value("mnist").run()
    assert at.number_input(key="train_val").value == 40
    # the protocol's split fitted to the data set is recorded as the protocol asks it (5,000), as
    # a run of the protocol started from the CLI or a grid: the run holds out 106 and is named
    # by its protocol
    at.selectbox(key="train_dataset").set_value("animals10").run()
    at.number_input(key="train_val").set_value(106).run()
    at.button(key="train_start").click().run()
    assert not at.exception
    runs = RunStore().list_runs()
    assert len(runs) == 2 and {r.config["val_images"] for r in runs} == {5000}
    assert {fit_validation(TrainConfig.from_dict(r.config), 1060).val_images for r in runs} == {106}
    short = {"converged": "Adam 4k", "converged-12k": "Adam 12k", "converged-24k": "Adam 24k"}[protocol]
    assert all(f"· {short} · seed 0" in c for c in _cards(at)), _cards(at)


def test_the_stop_request_is_written_by_the_click_itself(home, monkeypatch):
    """Stop's callback writes the stop request when the click arrives, before the page's script
    runs again: a script run that fails right at its start (or never comes) loses no stop."""
    from core.runs.store import RunStore as Store
    from core.training.config import TrainConfig

    store = RunStore()
    rid = store.submit(TrainConfig(dataset="mnist", model="rim", iterations=1000, holdout_sample=False))
    _running(store, rid, 100)
    at = run_page()
    assert [b for b in at.button if b.key == f"stop_{rid}"]

    def broken_pump(self, *a, **k):
        raise RuntimeError("the script run after the click fails at its first line")

    monkeypatch.setattr(Store, "pump", broken_pump)
    at.button(key=f"stop_{rid}").click().run()
    assert at.exception  # the page's script did not get past its start
    assert (store.run_dir(rid) / "stop").is_file()
    assert RunStore().get(rid).stop_requested


def test_no_stop_once_the_run_is_in_its_final_evaluation(home):
    """After its last iteration a run no longer polls for a stop: the card offers none, and a click
    that arrives then is told so, with no stop request written."""
    from core.training.config import TrainConfig

    store = RunStore()
    rid = store.submit(TrainConfig(dataset="mnist", model="rim", iterations=300, holdout_sample=False))
    _running(store, rid, 299)
    at = run_page()
    stop = at.button(key=f"stop_{rid}")
    _running(store, rid, 300)  # the last iteration done between the drawing and the click
    stop.click().run()
    assert not at.exception
    assert not (store.run_dir(rid) / "stop").exists()
    said = " ".join(s.value for s in at.success)
    assert f"(run {rid[-8:]}) has done all its iterations and is in its final evaluation" in said
    assert not [b for b in at.button if b.key == f"stop_{rid}"]
    assert _progress(at) == ["final evaluation on the whole test set… · 300 / 300 iterations"]


def _finished(store: RunStore, rid: str, status: str, message: str, one_class: bool = False,
              weights: bool = True) -> None:
    """A finished run of 1 iteration, with (``weights``) its model files: each of the 10 test
    images of every class predicted right, or (``one_class``) every image predicted as class 0."""
    import json

    metrics = {"test_accuracy": 0.177, "test_n": 100, "iterations_done": 1}
    if weights:
        confusion = [[10 if j == (0 if one_class else i) else 0 for j in range(10)] for i in range(10)]
        meta = {"model": "rim", "dataset": "mnist", "seed": 0, "status": status, "message": message,
                "metrics": {**metrics, "confusion": confusion,
                            "per_class_accuracy": [confusion[i][i] / 10 for i in range(10)]},
                "history": {"iteration": [1], "loss": [2.3], "batch_acc": [0.1]}, "evals": {}}
        (store.run_dir(rid) / "model.json").write_text(json.dumps(meta))
        (store.run_dir(rid) / "model.safetensors").write_bytes(b"weights")
    store._set_status(rid, status=status, iteration=1, pid=None, message=message, metrics=metrics)


def test_a_finished_cards_health_percent_note_and_models_link(home):
    """A collapsed run's card says so (the Models page's verdict); a kept-weights note reads in
    percent, also from a record holding the accuracy as a fraction; a stopped run with weights
    opens in Models like a completed one, a run stopped before its first iteration does not."""
    from core.training.config import TrainConfig

    store = RunStore()
    collapsed, healthy, stopped, early = (
        store.submit(TrainConfig(dataset="mnist", model="rim", iterations=1, holdout_sample=False, seed=s))
        for s in range(4))
    _finished(store, collapsed, "completed", "completed; kept the weights of iteration 100 (validation accuracy 0.2100)",
              one_class=True)
    _finished(store, healthy, "completed", "completed")
    _finished(store, stopped, "stopped", "stopped by the user after 1 iterations; it can be resumed")
    _finished(store, early, "stopped", "stopped before the first iteration; nothing to save", weights=False)
    at = run_page()
    assert not at.exception
    warns = [w.value for w in at.warning if "This model is" in w.value]
    assert len(warns) == 1 and warns[0].startswith("**This model is collapsed**: ")
    assert "class 0 predicted for 100.0 % of the test images" in warns[0]
    captions = " ".join(c.value for c in at.caption)
    assert "kept the weights of iteration 100 (validation accuracy 21.0 %)" in captions
    assert "0.2100" not in captions
    opens = {b.key for b in at.button if (b.key or "").startswith("open_")}
    assert opens == {f"open_{r}" for r in (collapsed, healthy, stopped)}


def test_two_runs_of_one_name_draw_apart_in_the_live_charts(home):
    """Two RIM seed-0 runs with own settings (different iterations): their lines differ (dash) and
    their legend names say the setting in which they differ."""
    import json

    from core.training.config import TrainConfig

    store = RunStore()
    ids = [store.submit(TrainConfig(dataset="mnist", model="rim", iterations=its, lr=0.05, holdout_sample=False))
           for its in (300, 400)]
    for rid in ids:
        with open(store.run_dir(rid) / "metrics.jsonl", "w") as f:
            for it in (1, 2):
                f.write(json.dumps({"kind": "iter", "iteration": it, "loss": 2.3}) + "\n")
        _running(store, rid, 2)
    at = run_page()
    assert not at.exception
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    loss = next(c for c in charts if c["layout"]["title"]["text"] == "Training loss")
    names = [t["name"] for t in loss["data"]]
    assert len(names) == 2 and names[0].endswith("· iterations 300") and names[1].endswith("· iterations 400")
    assert loss["data"][0]["line"]["dash"] != loss["data"][1]["line"]["dash"]
