"""One display name per model: ``core.report.fmt.model_label`` through the catalog, the run store and
the Train cards; every shipped model and every run gets a name no other one has."""

from __future__ import annotations

import pytest

from core import catalog
from core.paths import ROOT
from core.report.fmt import CONVERGED_TITLE, model_label, source_parts
from core.training.config import PROTOCOLS, TrainConfig, protocol_of


def test_protocol_of_a_run_follows_its_settings():
    assert protocol_of(TrainConfig.from_protocol("paper").to_dict()) == "paper"
    assert protocol_of(TrainConfig.from_protocol("converged", eval_every=100).to_dict()) == "converged"
    assert protocol_of(TrainConfig.from_protocol("converged", lr=0.01).to_dict()) == "custom"
    assert protocol_of(TrainConfig.from_protocol("paper", iterations=60).to_dict()) == "custom"
    assert protocol_of({}) == "" and protocol_of(None) == ""
    assert protocol_of(TrainConfig.from_protocol("converged-aug").to_dict()) == "converged-aug"
    assert protocol_of(TrainConfig.from_protocol("converged-12k").to_dict()) == "converged-12k"
    assert protocol_of(TrainConfig.from_protocol("converged-24k").to_dict()) == "converged-24k"
    assert set(PROTOCOLS) == {"paper", "converged", "converged-aug", "converged-12k", "converged-24k"}


def test_model_label_reads_as_one_name():
    assert model_label("rim", "converged", 0, "pretrained") == "RIM (paper's method) · Adam 4k · seed 0 (pretrained)"
    assert model_label("parallel_lstm", "paper", 2, "trained", run_id="20261201-184459-b7899b34",
                       stopped_at=1200) == \
        "Parallel LSTMs · paper protocol · seed 2 (trained, run b7899b34, stopped at iteration 1,200)"
    assert model_label("rim", "custom", 0, "", run_id="20261201-184459-b7899b34") == \
        "RIM (paper's method) · own settings · seed 0 (run b7899b34)"
    assert model_label("rim", "paper", 0, dataset="cifar10").startswith("CIFAR-10 · RIM")


def test_paths_leave_the_source_name():
    assert source_parts("npz folder (/data/mnist)") == ("npz folder", "/data/mnist")
    assert source_parts("image folder (/x/animals), seeded 80/20 split") == ("image folder, seeded 80/20 split", "/x/animals")
    assert source_parts("bundled sample") == ("bundled sample", "")
    assert source_parts("bundled sample (1000 MNIST train images, assets/samples)") == \
        ("bundled sample", "1000 MNIST train images, assets/samples")


def _store_with_runs(tmp_path):
    """A store with two queued runs that differ only in protocol, and two uploads of one model."""
    from core.data.datasets import DATASETS
    from core.models.registry import build_model
    from core.runs.store import RunStore
    from core.training.weights import weights_bytes

    store = RunStore(root=tmp_path / "runs", max_concurrent=0)
    for proto in ("paper", "converged"):
        store.submit(TrainConfig.from_protocol(proto, dataset="mnist", model="rim"), owner="me")
    m = build_model("rim", input_dim=DATASETS["mnist"].input_dim)
    w, meta = weights_bytes(m, {"model": "rim", "dataset": "mnist", "seed": 0, "metrics": {}})
    for _ in range(2):
        store.import_weights(w, meta, "mnist", owner="me")
    return store


def test_every_shipped_model_and_run_has_a_unique_name(tmp_path):
    if not (ROOT / "pretrained" / "manifest.json").is_file():
        pytest.skip("no shipped pretrained models in this checkout")
    store = _store_with_runs(tmp_path)
    pre = catalog.pretrained_entries(pretrained_dir=ROOT / "pretrained")
    assert {e.protocol for e in pre} == {"paper", "converged", "long"}  # the case that once read the same twice
    entries = pre + catalog.run_entries(store=store)
    assert len(entries) == len(pre) + 2
    names = [e.display_with_dataset for e in entries]
    assert len(set(names)) == len(names), sorted(n for n in names if names.count(n) > 1)
    for ds in {e.dataset for e in entries}:  # pickers of one data set show ``display``
        shown = [e.display for e in entries if e.dataset == ds]
        assert len(set(shown)) == len(shown)
    for e in pre:
        assert e.display == model_label(e.model, e.protocol, e.seed, "pretrained")
    # the Train cards: the same method and seed under the two protocols read differently
    cards = [catalog.run_label(r, source="") for r in store.list_runs() if r.status == "queued"]
    assert len(cards) == 2 and len(set(cards)) == 2
    assert any("· paper protocol ·" in c for c in cards) and any("· Adam 4k ·" in c for c in cards)


def test_shipped_models_text_counts_medians_per_protocol():
    from core.report.fmt import shipped_models_text

    models = [{"protocol": "converged", "selection": "median test error of the 5 healthy runs (of 5)"},
              {"protocol": "converged", "selection": "median test error of the 1 healthy runs (of 1)"},
              {"protocol": "paper", "selection": "median test error of the 3 healthy runs (of 3)"},
              {"protocol": "paper", "selection": "seed 0, NOT the cell's median (seed 2, 8.57 %): its weights were not kept"}]
    text = shipped_models_text(models)
    assert text.startswith(f"{CONVERGED_TITLE}: 2 of 2 are their cell's median healthy run; ")
    assert "paper protocol: 1 of 2 are their cell's median healthy run, 1 another seed" in text
    assert "seed 0 of" not in text


def test_the_long_grids_budgets_come_from_its_shipped_models():
    from types import SimpleNamespace

    from core.report.fmt import long_budgets

    def entry(ds, protocol="long", source="pretrained", its=12000):
        return SimpleNamespace(dataset=ds, protocol=protocol, source=source, metrics={"iterations": its})

    entries = [entry("mnist"), entry("mnist"), entry("fashion_mnist", its=24000), entry("cifar10", protocol="converged"),
               entry("cifar10", source="run", its=999)]
    assert long_budgets(entries) == "MNIST 12,000, Fashion-MNIST 24,000"
    assert long_budgets([]) == "none shipped"
