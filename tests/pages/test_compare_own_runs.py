"""Compare with the user's own runs: *Add your runs* lists the finished runs of the data set
compared (the user's own, or every run without sign-in), draws the chosen ones dashed beside the
shipped methods, lists them in a table with their final test error and budget, and warns when
they were not trained like the shipped runs; the choice is kept like the other picks."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from core.catalog import run_label
from core.data.datasets import DATASETS
from core.models.registry import build_model
from core.report.fmt import method_title
from core.training.weights import weights_bytes
from pages.ui.auth import owner_id

CONTENT_PX_AT_1280 = 820  # the page's width in a 1280 px window, sidebar open (tests/pages/test_models_page.py)
PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "compare.py")
TINY = {"num_units": 1, "hidden_size": 8}
USER = {"is_logged_in": True, "iss": "https://id.example", "sub": "compare-page-user", "email": "me@example.com"}


def store():
    from core.runs.store import RunStore

    return RunStore()


def write_learnable_mnist(data_dir: Path, n: int = 300) -> None:
    """An MNIST-shaped npz data set a tiny model learns in a few dozen iterations: faint noise,
    and the class as a bright patch at a class-given column of the last rows (read last)."""
    rng = np.random.default_rng(0)
    (data_dir / "mnist").mkdir(parents=True, exist_ok=True)
    for split in ("train", "test"):
        y = rng.integers(0, 10, n)
        x = rng.integers(0, 40, (n, 28, 28)).astype(np.uint8)
        for i, c in enumerate(y):
            x[i, 24:, 2 * c + 3:2 * c + 6] = 255
        np.savez(data_dir / "mnist" / f"{split}.npz", x=x, y=y.astype(np.int64),
                 classes=np.array([str(i) for i in range(10)]))


@pytest.fixture
def trained_run(page_env, tmp_path, monkeypatch) -> str:
    """A run trained to its end by the worker (in this process) on a tiny learnable MNIST-shaped
    data set: 40 SGD iterations, so not the shipped converged protocol, and healthy."""
    from core.runs.worker import run_worker
    from core.training.config import TrainConfig

    write_learnable_mnist(tmp_path / "data")
    monkeypatch.setenv("RIMSCOPE_DATA_DIR", str(tmp_path / "data"))
    cfg = TrainConfig(dataset="mnist", model="parallel_lstm", iterations=40, lr=0.5, batch_size=20, eval_every=10,
                      eval_samples=50, noise_draws=1, holdout_sample=False, model_overrides=dict(TINY))
    s = store()
    rid = s.submit(cfg, owner=owner_id(USER))
    assert run_worker(s.run_dir(rid)) == "completed"
    return rid


def run_page(user: dict | None = None, query: dict | None = None) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=120)
    if user:
        at.user = dict(user)
    for k, v in (query or {}).items():
        at.query_params[k] = v
    return at.run()


def figure(at: AppTest, needle: str) -> dict:
    for el in at.get("plotly_chart"):
        spec = json.loads(el.proto.spec)
        title = spec.get("layout", {}).get("title", {})
        text = title.get("text", "") if isinstance(title, dict) else str(title)
        if needle in text and "per method" not in text:
            return spec
    raise AssertionError(f"no figure titled {needle!r}")


def values(arr) -> list:
    """A figure's data array (plotly writes numpy arrays in its binary encoding)."""
    if isinstance(arr, dict) and "bdata" in arr:
        return np.frombuffer(base64.b64decode(arr["bdata"]), dtype=np.dtype(arr["dtype"])).tolist()
    return list(arr)


def own_table(at: AppTest):
    return next(d.value for d in at.dataframe if "your run" in d.value.columns)


def test_a_completed_run_is_drawn_dashed_and_tabulated_with_its_protocol_warning(trained_run):
    rid = trained_run
    info = store().get(rid)
    name = run_label(info)
    meta = json.loads((store().run_dir(rid) / "model.json").read_text())
    at = run_page()
    assert not at.exception and not at.error
    picker = at.multiselect(key="cmp_own_runs")
    assert picker.label == "Add your runs" and picker.options == [name] and picker.value == []
    loss_before = figure(at, "training loss")
    assert len(loss_before["data"]) == 5 * (3 + 1)  # the shipped runs only
    assert not [d for d in at.dataframe if "your run" in d.value.columns]

    picker.set_value([rid]).run()
    assert not at.exception and not at.error
    for needle, n_points in (("training loss", 40), ("periodic test accuracy", 4)):
        fig = figure(at, needle)
        assert len(fig["data"]) == 5 * (3 + 1) + 1  # the shipped runs untouched, one line more
        mine = fig["data"][-1]
        assert mine["name"] == name and rid[-8:] in mine["name"] and method_title("parallel_lstm") in mine["name"]
        assert mine["line"]["dash"] == "dash" and mine["legendgrouptitle"]["text"] == "Your runs"
        assert len(values(mine["x"])) == n_points and values(mine["x"])[-1] == 40
    table = own_table(at)
    assert len(table) == 1
    row = table.iloc[0]
    assert row["your run"] == name and row["state"] == "completed" and row["health"] == "healthy"
    assert row["test error (%)"] == round(100 * meta["metrics"]["test_error"], 2)
    assert row["tested on"] == "300 test images"
    assert row["budget"] == "40 iterations · SGD lr 0.5 · constant rate"
    warning = " ".join(w.value for w in at.warning)
    assert f"**{name}** is not on an equal footing with the shipped curves: trained for 40 iterations with SGD " \
           "lr 0.5, constant rate; the shipped curves: Adam, cosine, 60 iterations" in warning
    assert "It is **" not in warning  # healthy: no health warning
    # never pooled: the means, spreads and run lists of the shipped methods are those of the summary
    at.session_state["cmp_tab"] = "Runs"  # only the open tab runs
    at.run()
    runs = next(d.value for d in at.dataframe if "status" in d.value.columns and "seed" in d.value.columns)
    assert len(runs) == 2 * 5 * 3
    at.session_state["cmp_tab"] = "Final errors over seeds"
    at.run()
    spread = next(d.value for d in at.dataframe if "healthy" in d.value.columns)
    assert name not in spread.to_string()


def test_the_choice_is_kept_across_data_sets_and_in_the_url(trained_run):
    rid = trained_run
    at = run_page()
    at.multiselect(key="cmp_own_runs").set_value([rid]).run()
    assert at.query_params["cmp_own_runs"] == rid
    at.selectbox(key="cmp_curves_ds").set_value("fashion_mnist").run()
    assert not at.exception
    assert not [m for m in at.multiselect if m.key == "cmp_own_runs"]  # no run of the user's there
    assert any("no finished run on Fashion-MNIST" in c.value for c in at.caption)
    at.selectbox(key="cmp_curves_ds").set_value("mnist").run()
    assert at.multiselect(key="cmp_own_runs").value == [rid]
    # a shared link (or a reload) shows the same runs
    fresh = run_page(query={"cmp_own_runs": rid})
    assert not fresh.exception
    assert fresh.multiselect(key="cmp_own_runs").value == [rid]
    assert len(own_table(fresh)) == 1


def test_unfinished_and_failed_runs_are_not_offered_and_say_why(trained_run):
    from core.training.config import TrainConfig

    s = store()
    queued = s.submit(TrainConfig(dataset="mnist", model="rim", iterations=20, holdout_sample=False))
    failed = s.submit(TrainConfig(dataset="mnist", model="rim", iterations=20, seed=1, holdout_sample=False))
    s._set_status(failed, status="failed", message="No MNIST train data found")
    at = run_page()
    assert not at.exception
    assert at.multiselect(key="cmp_own_runs").options == [run_label(s.get(trained_run))]
    said = " ".join(c.value for c in at.caption if c.value.startswith("Not offered"))
    assert f"{run_label(s.get(queued))}: waiting to train" in said
    assert f"{run_label(s.get(failed))}: failed: No MNIST train data found" in said


def test_with_sign_in_only_the_users_own_runs_are_offered(trained_run):
    theirs = demo_upload(owner="someone-else")
    at = run_page(user=USER)
    assert not at.exception
    assert at.multiselect(key="cmp_own_runs").options == [run_label(store().get(trained_run))]
    assert theirs[-8:] not in " ".join(c.value for c in at.caption)
    # without sign-in every run on the machine is the user's (the Train and Models pages' rule)
    assert len(run_page().multiselect(key="cmp_own_runs").options) == 2
    # signed out: nothing to add, and the page says why
    out = run_page(user={"is_logged_in": False})
    assert not [m for m in out.multiselect if m.key == "cmp_own_runs"]
    assert any("Sign in to add your own runs" in c.value for c in out.caption)


def demo_upload(owner: str, done: int = 300) -> str:
    """A demo run's model (trained on the bundled sample, stopped early) in the run store."""
    m = build_model("parallel_lstm", input_dim=DATASETS["mnist"].input_dim)
    loss = [2.3] * 100 + [40.0] * (done - 100)  # blew up: diverged
    meta = {"model": "parallel_lstm", "dataset": "mnist", "seed": 0, "status": "stopped",
            "train_config": {"dataset": "mnist", "model": "parallel_lstm", "seed": 0, "iterations": 1000,
                             "data_source": "sample"},
            "data_source": {"train": "bundled sample", "test": "bundled sample", "n_train": 800, "n_test": 200},
            "metrics": {"test_error": 0.175, "noisy_test_error": 0.2, "test_n": 200},
            "history": {"iteration": list(range(1, done + 1)), "loss": loss, "batch_acc": [0.5] * done}}
    w, j = weights_bytes(m, meta)
    return store().import_weights(w, j, "mnist", owner=owner)


def test_a_demo_run_is_labelled_and_its_held_out_images_stopped_state_and_health_are_said(page_env):
    rid = demo_upload(owner="")
    at = run_page()
    assert not at.exception
    picker = at.multiselect(key="cmp_own_runs")
    (option,) = picker.options
    assert "demo" in option and option.endswith("· diverged")
    picker.set_value([rid]).run()
    row = own_table(at).iloc[0]
    assert row["tested on"] == "200 held-out (demo)"
    assert row["health"] == "diverged" and row["test error (%)"] == 17.5
    assert row["state"] == "stopped at 300 of 1,000" and row["budget"].startswith("300 iterations · SGD lr 0.1")
    # every column has its width, and together they fit the page of a 1280 px window
    el = next(d for d in at.dataframe if "your run" in d.value.columns)
    cols = json.loads(el.proto.columns)
    assert all(cols[c].get("width") for c in el.value.columns), cols
    assert sum(cols[c]["width"] for c in el.value.columns) <= CONTENT_PX_AT_1280
    warning = " ".join(w.value for w in at.warning)
    assert "a demo: trained on 800 images of the bundled sample and tested on the other 200" in warning
    assert "It is **diverged**" in warning
