"""Demo runs on the pages: scored across a test set only on the images they did not train on,
and labelled "demo" in the Models table and pickers."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from core.data.datasets import DATASETS
from core.models.registry import build_model
from core.training.weights import weights_bytes

PAGES = Path(__file__).resolve().parents[2] / "pages"
OWNER = "0123456789abcdef"


def demo_upload(dataset="mnist", model="parallel_lstm", status="completed", iterations=300, done=None) -> str:
    """A demo run's model (trained on the bundled sample) in the run store; its run id."""
    from core.runs.store import RunStore

    done = iterations if done is None else done
    m = build_model(model, input_dim=DATASETS[dataset].input_dim)
    meta = {"model": model, "dataset": dataset, "seed": 0, "status": status,
            "train_config": {"dataset": dataset, "model": model, "seed": 0, "iterations": iterations,
                             "data_source": "sample"},
            "metrics": {"test_error": 0.175, "noisy_test_error": 0.2, "test_n": 200},
            "history": {"iteration": list(range(1, done + 1)), "loss": [1.0] * done, "batch_acc": [0.5] * done}}
    w, j = weights_bytes(m, meta)
    return RunStore().import_weights(w, j, dataset, owner=OWNER)


def test_mechanisms_scores_a_demo_only_on_the_images_it_did_not_train_on(page_env):
    rid = demo_upload()
    at = AppTest.from_file(str(PAGES / "mechanisms.py"), default_timeout=120)
    at.session_state["mech_tab"] = "Across the test set"
    at.session_state["mech_model_mnist"] = f"run:{rid}"
    at.run()
    assert not at.exception
    assert any("(uploaded demo, run " in o for o in at.selectbox(key="mech_model_mnist").options)
    cap = next(c.value for c in at.caption if "fixed subset, seed 0" in c.value)
    assert cap.startswith("200 images from the bundled sample") and "did not train on" in cap
    # a shipped model on the same page: all 1,000
    at.selectbox(key="mech_model_mnist").set_value("pretrained:mnist/parallel_lstm").run()
    cap = next(c.value for c in at.caption if "fixed subset, seed 0" in c.value)
    assert cap.startswith("1000 images from the bundled sample") and "did not train on" not in cap


def test_robustness_scores_every_model_on_the_images_a_chosen_demo_did_not_train_on(page_env, monkeypatch):
    monkeypatch.setenv("RIMSCOPE_ROBUSTNESS_SUBSET", "100")
    rid = demo_upload()
    at = AppTest.from_file(str(PAGES / "robustness.py"), default_timeout=600)
    at.session_state["rb_cmp_mnist_parallel_lstm"] = f"run:{rid}"
    at.run()
    assert not at.exception
    cap = next(c.value for c in at.caption if "fixed subset, seed 0" in c.value)
    assert "only those the demo runs did not train on" in cap, cap
