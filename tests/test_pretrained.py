"""The shipped pretrained models: present, loadable, and as accurate as their metadata says."""

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

from core.data.datasets import DATASETS, SAMPLES_DIR
from core.eval.predict import evaluate
from core.models.registry import list_models
from core.training.weights import load_weights

ROOT = Path(__file__).resolve().parent.parent
PRETRAINED = ROOT / "pretrained"
MANIFEST = PRETRAINED / "manifest.json"


def manifest_models():
    return json.loads(MANIFEST.read_text())["models"]


def test_manifest_covers_every_dataset_and_model():
    """The paper protocol: every data set x method is either shipped or listed under ``skipped``
    with its reason (no healthy run with weights). The converged protocol: every method for each
    data set it has (it is trained data set by data set). The long grid: every data set x method."""
    manifest = json.loads(MANIFEST.read_text())
    paper = {(m["dataset"], m["model"]) for m in manifest_models() if m.get("protocol", "paper") == "paper"}
    skipped = {(s["dataset"], s["model"]) for s in manifest.get("skipped", []) if s["protocol"] == "paper"}
    assert all("healthy" in s["reason"] for s in manifest.get("skipped", []))
    want = {(d, m) for d in DATASETS for m in list_models()}
    assert want <= paper | skipped, f"missing pretrained models: {sorted(want - paper - skipped)}"
    assert not paper & skipped
    conv = {(m["dataset"], m["model"]) for m in manifest_models() if m.get("protocol") == "converged"}
    for ds in {d for d, _ in conv}:
        missing = {m for m in list_models() if (ds, m) not in conv}
        assert not missing, f"converged {ds}: missing {sorted(missing)}"
    long = {(m["dataset"], m["model"]) for m in manifest_models() if m.get("protocol") == "long"}
    assert want <= long, f"long grid: missing {sorted(want - long)}"


def test_no_shipped_model_is_unhealthy_and_each_says_how_it_was_chosen():
    from core.report.health import HEALTHY, health_of

    for m in manifest_models():
        meta = json.loads((PRETRAINED / m["metadata"]).read_text())
        assert health_of(meta)["health"] == HEALTHY, (m["dataset"], m["model"], m["protocol"])
        assert m["health"] == HEALTHY and m["selection"] and meta["seed"] == m["seed"]
        assert "median" in m["selection"]  # the cell's median, or why not


def test_pretrained_folder_is_small():
    total = sum(p.stat().st_size for p in PRETRAINED.rglob("*") if p.is_file())
    assert total < 30 * 1024 * 1024, f"pretrained/ is {total / 2**20:.1f} MB"


def _id(m: dict) -> str:
    return f"{m['dataset']}-{m['model']}-{m.get('protocol', 'paper')}"


@pytest.mark.parametrize("entry", manifest_models() if MANIFEST.is_file() else [], ids=_id)
def test_every_shipped_model_loads_with_full_metadata(entry):
    model, meta = load_weights(PRETRAINED / entry["weights"], expected_dataset=entry["dataset"])
    assert meta["model"] == entry["model"]
    assert meta["status"] == "completed"
    cfg = meta["train_config"]
    hist = meta["history"]
    if entry.get("protocol", "paper") == "paper":
        assert (cfg["lr"], cfg["batch_size"], cfg["iterations"]) == (0.1, 100, 1000)  # paper protocol
        assert cfg.get("optimizer", "sgd") == "sgd"
        assert len(hist["loss"]) == len(hist["batch_acc"]) == 1000
    else:  # Adam, validation split from the training data, best-validation weights
        if entry["protocol"] == "long":  # each data set at its own budget (core.grid.long)
            from core.grid.long import FOLDERS, long_sources

            folder = long_sources(ROOT / "results")[entry["dataset"]]
            budget = {f: n for n, f in FOLDERS.items()}.get(folder, 4000)  # Animals-10: the 4,000-iteration grid's
            assert meta.get("protocol") == entry["run_protocol"]
            assert cfg["iterations"] == entry["iterations"] == budget
        else:
            assert entry["protocol"] == "converged" == meta.get("protocol")
        assert cfg["optimizer"] == "adam" and cfg["val_images"] > 0 and cfg["patience"] > 0
        assert 1 <= meta["metrics"]["best_iteration"] <= len(hist["loss"]) <= cfg["iterations"]
        assert meta["metrics"]["val_n"] == cfg["val_images"]
    assert len(meta["evals"]["test_acc"]) >= 5
    m = meta["metrics"]
    assert 0 <= m["test_accuracy"] <= 1 and m["test_n"] == meta["data_source"]["n_test"]
    assert 0 <= m["noisy_test_error"] <= 1 and m["noise_var"] == 0.01
    assert m["parameters"] == sum(p.numel() for p in model.parameters())
    if entry["dataset"] == "mnist":
        assert "held out" in meta["data_source"]["note"]
    if entry["dataset"] == "animals10":
        assert m["class_weighting"] == "balanced"


SAMPLE_ENTRIES = [m for m in (manifest_models() if MANIFEST.is_file() else [])
                  if m["dataset"] in ("mnist", "fashion_mnist")]


@pytest.mark.parametrize("entry", SAMPLE_ENTRIES, ids=_id)
def test_accuracy_on_shipped_sample_matches_record(entry):
    """On the 1,000-image bundled sample, accuracy lies within sampling error of the record.

    MNIST: the sample is training images 0..9,999, which the MNIST models never saw.
    Fashion-MNIST: the sample is 1,000 test images. Bound: 4 binomial standard errors
    plus 1 point for the difference between sample and test distribution.
    """
    with np.load(SAMPLES_DIR / f"{entry['dataset']}_sample.npz", allow_pickle=False) as d:
        x, y = d["x"], d["y"]
    model, meta = load_weights(PRETRAINED / entry["weights"])
    p = meta["metrics"]["test_accuracy"]
    acc = evaluate(model, x, y).accuracy
    bound = 4 * math.sqrt(max(p * (1 - p), 1e-4) / len(y)) + 0.01
    assert abs(acc - p) <= bound, f"sample accuracy {acc:.4f} vs recorded {p:.4f} (bound {bound:.4f})"


FULL = os.environ.get("RIMSCOPE_FULLDATA_DIR")


@pytest.mark.fulldata
@pytest.mark.skipif(not FULL, reason="set RIMSCOPE_FULLDATA_DIR to a folder with the full data sets")
@pytest.mark.parametrize("entry", manifest_models() if MANIFEST.is_file() else [], ids=_id)
def test_recorded_accuracy_on_full_test_set(entry):
    from core.data.datasets import load_dataset

    data = load_dataset(entry["dataset"], "test", data_dir=FULL, sources=("npz",))
    model, meta = load_weights(PRETRAINED / entry["weights"])
    acc = evaluate(model, data.images, data.labels).accuracy
    # same code path as when recorded; allow 2 images for float differences between builds
    assert abs(acc - meta["metrics"]["test_accuracy"]) <= 2 / len(data.labels) + 1e-9


def test_catalog_reads_the_shipped_manifest_at_call_time(monkeypatch, tmp_path):
    """One manifest reader, one pretrained folder (``core.paths``, read when asked), and the
    featured model the pages open first: the paper's method on MNIST, of the default protocol (the
    long grid's) when shipped."""
    from core import catalog
    from core.models.registry import DEFAULT_MODEL

    monkeypatch.setenv("RIMSCOPE_PRETRAINED_DIR", str(PRETRAINED))
    entries = catalog.pretrained_entries()
    assert len(entries) == len(manifest_models()) and catalog.read_manifest()["models"] == manifest_models()
    first = catalog.featured_entry(entries)
    assert (first.model, first.dataset, first.source) == (DEFAULT_MODEL, catalog.DEFAULT_DATASET, "pretrained")
    if any(e.protocol == catalog.DEFAULT_PROTOCOL and e.dataset == first.dataset and e.model == first.model
           for e in entries):
        assert first.protocol == catalog.DEFAULT_PROTOCOL == "long"
    assert first.weights_mtime > 0
    monkeypatch.setenv("RIMSCOPE_PRETRAINED_DIR", str(tmp_path))  # moved after import: followed
    assert catalog.pretrained_entries() == [] and catalog.read_manifest() == {"models": []}
    (tmp_path / "manifest.json").write_text("[1, 2]")  # malformed: no models, no exception
    assert catalog.read_manifest() == {"models": []} and catalog.featured_entry([]) is None
