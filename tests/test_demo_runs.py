"""Demo runs (800 of the bundled sample's images to train, 200 to test): the held-out images come
from core (``core.data.plan.demo_held_out``, ``core.catalog.held_out_data``), and a demo is named
"demo" wherever a run's name appears."""

from __future__ import annotations

import dataclasses
import types

import numpy as np

from core import catalog
from core.data.datasets import LoadedData, from_sample, get_info
from core.data.plan import SAMPLE_TRAIN, demo_held_out, demo_positions, sample_split


def _entry(dataset: str, demo: bool) -> catalog.ModelEntry:
    return catalog.ModelEntry("run:x", dataset, "rim", "trained", None, demo=demo)


def test_held_out_images_are_exactly_the_demo_test_split():
    for ds in ("mnist", "fashion_mnist"):
        sample = from_sample(get_info(ds))
        train, test, _ = sample_split(ds)
        tr, ho = demo_positions(len(sample))
        assert len(tr) == SAMPLE_TRAIN and len(ho) == len(sample) - SAMPLE_TRAIN
        assert not set(tr) & set(ho)
        assert np.array_equal(sample.images[ho], test.images) and np.array_equal(sample.images[tr], train.images)
        held = catalog.held_out_data(_entry(ds, True), sample)
        assert np.array_equal(held.images, test.images) and np.array_equal(held.labels, test.labels)
        assert "did not train on" in held.source
        assert catalog.held_out_data(_entry(ds, True), held) is held  # applied once, not twice
        assert catalog.held_out_data(_entry(ds, False), sample) is sample  # other models: every image


def test_a_full_test_split_loses_only_the_images_a_demo_trained_on():
    # Fashion-MNIST's sample was cut from its test images: those 800 are not held out
    fsample = from_sample(get_info("fashion_mnist"))
    full = LoadedData(np.zeros((10_000, 28, 28), np.uint8), np.zeros(10_000, np.int64), list("0123456789"),
                      "npz folder (/x/fashion_mnist)")
    keep = demo_held_out(full, "fashion_mnist")
    trained = fsample.indices[demo_positions(len(fsample))[0]]
    assert len(keep) == 10_000 - SAMPLE_TRAIN and not set(keep) & set(trained.tolist())
    # MNIST's sample came from training images: its full test split is untouched
    mfull = dataclasses.replace(full, source="npz folder (/x/mnist)")
    assert catalog.held_out_data(_entry("mnist", True), mfull) is mfull


def test_a_demo_run_is_named_demo():
    run = types.SimpleNamespace(model="rim", seed=0, run_id="20260101-000000-abcdef12", status="completed",
                                iteration=300, config={"data_source": "sample", "iterations": 300})
    assert catalog.is_demo(run)
    assert "(trained demo, run abcdef12)" in catalog.run_label(run)
    assert "(demo, run abcdef12)" in catalog.run_label(run, source="")
    full = types.SimpleNamespace(**{**vars(run), "config": {"data_source": "auto", "iterations": 300}})
    assert not catalog.is_demo(full) and "demo" not in catalog.run_label(full)
