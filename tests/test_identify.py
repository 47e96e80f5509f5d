"""core.models.identify: which registered model a set of weights belongs to, from the tensor names
alone, and the refused upload's message when the weights and the metadata are two models' files
(the page's check and the run store's import both say it)."""

from __future__ import annotations

import json

import pytest

from core.data.datasets import DATASETS
from core.errors import WeightsError
from core.models.identify import explain_refusal, mismatch_note, model_of_names, tensor_names
from core.models.registry import build_model, list_models
from core.runs.store import RunStore
from core.training.weights import weights_bytes


def files(model: str, dataset: str = "mnist", seed: int = 3, **overrides) -> tuple[bytes, bytes]:
    info = DATASETS[dataset]
    m = build_model(model, input_dim=info.input_dim, num_classes=len(info.classes), **overrides)
    return weights_bytes(m, {"model": model, "dataset": dataset, "seed": seed,
                             "metrics": {"test_error": 0.1, "noisy_test_error": 0.2}})


@pytest.mark.parametrize("model", list_models())
def test_each_models_weights_are_recognised_as_its_own(model):
    w, _ = files(model, "cifar10")
    assert tensor_names(w) == set(build_model(model, input_dim=96).state_dict())
    assert model_of_names(tensor_names(w), "cifar10") == model


def test_more_lstms_or_layers_are_still_the_same_model():
    w, _ = files("parallel_lstm", num_units=6)
    assert model_of_names(tensor_names(w)) == "parallel_lstm"
    assert model_of_names({"a.weight", "b.bias"}) is None
    assert tensor_names(b"not safetensors at all") is None and tensor_names(b"") is None


def test_the_note_names_the_metadatas_model_and_the_weights_owner():
    w_ind, _ = files("indrnn")
    _, m_rim = files("rim", seed=6)
    assert mismatch_note(w_ind, m_rim) == ("The metadata describes RIM (MNIST, seed 6) but the weights look like "
                                           "IndRNN's: upload the metadata file that came with these weights.")
    w_lstm, _ = files("parallel_lstm", "cifar10")
    _, m_ind = files("indrnn", "cifar10", seed=0)
    assert "describes IndRNN (CIFAR-10, seed 0) but the weights look like Parallel LSTMs':" in mismatch_note(w_lstm, m_ind)
    # files that agree, or that cannot be read: no note, the reason as it is
    _, m_ind = files("indrnn")
    assert mismatch_note(w_ind, m_ind) is None
    assert mismatch_note(b"junk", m_rim) is None and mismatch_note(w_ind, b"{not json") is None
    assert mismatch_note(w_ind, json.dumps({"model": "no such model"}).encode()) is None
    assert explain_refusal("The weights lack 9 tensor(s).", w_ind, m_ind) == "The weights lack 9 tensor(s)."
    assert explain_refusal("The weights lack 9 tensor(s).", w_ind, m_rim).endswith(
        "with these weights. The weights lack 9 tensor(s).")


def test_the_run_store_refuses_such_an_upload_with_the_note(tmp_path):
    store = RunStore(tmp_path / "runs")
    w_ind, _ = files("indrnn")
    _, m_rim = files("rim", seed=6)
    with pytest.raises(WeightsError) as err:
        store.import_weights(w_ind, m_rim)
    assert str(err.value).startswith("The metadata describes RIM (MNIST, seed 6) but the weights look like IndRNN's")
    assert "tensor(s) the model needs" in str(err.value)
    assert store.list_runs() == []
