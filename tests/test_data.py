"""Tests for core.data.datasets: image -> row sequence, noise, stretching, and every data source.

Data come from what a test writes into a temporary folder, or from the bundled samples in
``assets/samples``; ``tests/conftest.py`` makes the environment offline and points
``RIMSCOPE_DATA_DIR`` at an empty temporary folder.
"""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
import torch
from PIL import Image

from core.data import datasets
from core.data.datasets import ANIMALS10_ITALIAN, DATASETS, LoadedData, load_dataset
from core.data.transforms import add_noise, stretch_rows, to_sequence
from core.errors import DataUnavailableError


def rng_images(shape, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=shape, dtype=np.uint8)


def write_npz(root, name, split, x, y, classes=None, **extra):
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {"x": x, "y": y, **extra}
    if classes is not None:
        arrays["classes"] = np.asarray(classes)
    np.savez(folder / f"{split}.npz", **arrays)
    return folder / f"{split}.npz"


# --------------------------------------------------------------------------- to_sequence


def test_to_sequence_gray():
    x = rng_images((5, 28, 28))
    seq = to_sequence(x)
    assert isinstance(seq, torch.Tensor) and seq.dtype == torch.float32
    assert seq.shape == (5, 28, 28)
    for t in (0, 13, 27):
        np.testing.assert_allclose(seq[:, t].numpy(), x[:, t].astype(np.float32) / 255.0, rtol=0, atol=1e-7)
    assert seq.min() >= 0 and seq.max() <= 1


def test_to_sequence_rgb_interleaves_channels():
    x = rng_images((3, 32, 32, 3), seed=1)
    seq = to_sequence(x)
    assert seq.shape == (3, 32, 96)
    for t in (0, 7, 31):
        # row t = pixels left to right, each pixel's R, G, B next to each other
        expect = x[:, t].reshape(3, 96).astype(np.float32) / 255.0
        np.testing.assert_allclose(seq[:, t].numpy(), expect, rtol=0, atol=1e-7)
    # explicitly: feature 3*w + c is pixel w's channel c
    assert seq[1, 5, 3 * 10 + 2].item() == pytest.approx(x[1, 5, 10, 2] / 255.0)
    assert seq[1, 5, 3 * 10 + 0].item() == pytest.approx(x[1, 5, 10, 0] / 255.0)


def test_to_sequence_float_and_tensor_inputs_taken_as_is():
    x = np.random.default_rng(2).random((2, 4, 6, 3)).astype(np.float32)
    np.testing.assert_array_equal(to_sequence(x).numpy(), x.reshape(2, 4, 18))
    t = torch.from_numpy(x)
    np.testing.assert_array_equal(to_sequence(t).numpy(), x.reshape(2, 4, 18))
    u8 = torch.from_numpy(rng_images((2, 4, 6)))
    np.testing.assert_allclose(to_sequence(u8).numpy(), u8.numpy() / 255.0, atol=1e-7)


@pytest.mark.parametrize("shape", [(28, 28), (2, 3, 4, 3, 1), (5,)])
def test_to_sequence_refuses_single_images_and_odd_shapes(shape):
    with pytest.raises(ValueError, match="expected a batch"):
        to_sequence(np.zeros(shape, dtype=np.uint8))


# --------------------------------------------------------------------------- noise


@pytest.mark.parametrize("mode, strength", [("gaussian", 0.01), ("salt_pepper", 0.05), ("speckle", 0.05),
                                            ("poisson", 0.0)])
def test_add_noise_seeded_clipped_and_shaped(mode, strength):
    x = rng_images((4, 28, 28), seed=3)
    a = add_noise(x, mode, strength, seed=0)
    b = add_noise(x, mode, strength, seed=0)
    c = add_noise(x, mode, strength, seed=1)
    assert a.shape == x.shape and a.dtype == np.float32
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a.min() >= 0.0 and a.max() <= 1.0
    assert not np.allclose(a, x / 255.0)  # it is noisy
    # uint8 input is scaled to [0, 1] exactly like float input
    assert np.array_equal(add_noise(x.astype(np.float32) / 255.0, mode, strength, seed=0), a)
    # RGB works too
    rgb = add_noise(rng_images((2, 8, 8, 3)), mode, strength, seed=0)
    assert rgb.shape == (2, 8, 8, 3) and rgb.min() >= 0 and rgb.max() <= 1


@pytest.mark.parametrize("mode", ["gaussian", "salt_pepper", "speckle"])
def test_add_noise_strength_zero_is_unchanged(mode):
    x = rng_images((2, 10, 10), seed=4)
    np.testing.assert_array_equal(add_noise(x, mode, 0.0, seed=0), x.astype(np.float32) / 255.0)


def test_gaussian_noise_has_the_requested_variance():
    mid = np.full((20, 32, 32), 0.5, dtype=np.float32)  # far from the clip at 0 and 1
    for var in (0.01, 0.004):
        noise = add_noise(mid, "gaussian", var, seed=7) - 0.5
        assert abs(noise.mean()) < 0.005
        assert noise.var() == pytest.approx(var, rel=0.05)


def test_gaussian_noise_is_clipped_to_unit_range():
    edges = np.concatenate([np.zeros((5, 16, 16)), np.ones((5, 16, 16))]).astype(np.float32)
    out = add_noise(edges, "gaussian", 0.1, seed=0)
    assert out.min() == 0.0 and out.max() == 1.0
    assert (out[:5] == 0).mean() > 0.3 and (out[5:] == 1).mean() > 0.3  # clipping happened


def test_salt_pepper_amount_and_speckle_variance():
    mid = np.full((20, 32, 32), 0.5, dtype=np.float32)
    sp = add_noise(mid, "salt_pepper", 0.1, seed=0)
    changed = sp != 0.5
    assert changed.mean() == pytest.approx(0.1, abs=0.01)
    assert set(np.unique(sp[changed]).tolist()) == {0.0, 1.0}
    # speckle: x + x * n with var(n) = strength, so on 0.5 the noise variance is 0.25 * strength
    sk = add_noise(mid, "speckle", 0.04, seed=0) - 0.5
    assert sk.var() == pytest.approx(0.25 * 0.04, rel=0.05)


def test_add_noise_refuses_unknown_mode():
    with pytest.raises(ValueError, match="gaussian"):
        add_noise(rng_images((1, 4, 4)), "uniform", 0.1)


# --------------------------------------------------------------------------- stretch_rows


@pytest.mark.parametrize("shape, factor, expect", [
    ((3, 28, 28), 2.0, (3, 56, 28)),
    ((3, 28, 28), 0.5, (3, 14, 28)),
    ((2, 32, 32, 3), 1.5, (2, 48, 32, 3)),
    ((2, 28, 28), 10 / 28, (2, 10, 28)),
    ((1, 4, 5), 0.01, (1, 1, 5)),
])
def test_stretch_rows_shapes(shape, factor, expect):
    out = stretch_rows(rng_images(shape), factor)
    assert out.shape == expect and out.dtype == np.float32
    assert out.min() >= 0 and out.max() <= 1


def test_stretch_rows_keeps_values_and_columns():
    x = rng_images((2, 12, 7), seed=5)
    np.testing.assert_allclose(stretch_rows(x, 1.0), x / 255.0, atol=1e-6)
    # a picture that only varies across columns stays the same in every row
    cols = np.tile(np.arange(7, dtype=np.uint8)[None, None] * 30, (1, 12, 1))
    out = stretch_rows(cols, 2.5)
    np.testing.assert_allclose(out, np.tile(cols[:, :1] / 255.0, (1, 30, 1)), atol=1e-6)
    # and the sequence of a stretched image has the new length
    assert to_sequence(out).shape == (1, 30, 7)


# --------------------------------------------------------------------------- npz source


def test_load_npz_from_data_dir(tmp_path):
    x, y = rng_images((20, 28, 28)), np.arange(20, dtype=np.int64) % 10
    write_npz(tmp_path, "mnist", "train", x, y, classes=[str(i) for i in range(10)])
    d = load_dataset("mnist", "train", data_dir=tmp_path)
    assert isinstance(d, LoadedData) and len(d) == 20
    images, labels, classes = d
    np.testing.assert_array_equal(images, x)
    np.testing.assert_array_equal(labels, y)
    assert labels.dtype == np.int64 and classes == [str(i) for i in range(10)]
    assert "npz" in d.source and str(tmp_path) in d.source
    np.testing.assert_array_equal(d.indices, np.arange(20))
    assert not d.is_sample


def test_load_npz_through_the_environment_variable(_isolated_data_env):
    data_dir = _isolated_data_env  # the folder RIMSCOPE_DATA_DIR points at
    assert os.environ["RIMSCOPE_DATA_DIR"] == str(data_dir)
    x, y = rng_images((6, 32, 32, 3)), np.array([0, 1, 2, 3, 4, 9])
    write_npz(data_dir, "cifar10", "test", x, y)  # no classes array: the known names are used
    d = load_dataset("cifar10", "test")
    assert d.classes == list(DATASETS["cifar10"].classes) and d.labels.dtype == np.int64
    np.testing.assert_array_equal(d.images, x)


def test_npz_comes_before_the_sample(tmp_path):
    write_npz(tmp_path, "mnist", "test", rng_images((7, 28, 28)), np.zeros(7, dtype=np.int64))
    d = load_dataset("mnist", "test", data_dir=tmp_path)
    assert len(d) == 7 and not d.is_sample


BAD_NPZ = {
    "float images": lambda: dict(x=np.zeros((4, 28, 28), np.float32), y=np.zeros(4, np.int64)),
    "wrong image shape": lambda: dict(x=np.zeros((4, 28, 27), np.uint8), y=np.zeros(4, np.int64)),
    "RGB for a gray set": lambda: dict(x=np.zeros((4, 28, 28, 3), np.uint8), y=np.zeros(4, np.int64)),
    "label too large": lambda: dict(x=np.zeros((4, 28, 28), np.uint8), y=np.array([0, 1, 2, 10])),
    "negative label": lambda: dict(x=np.zeros((4, 28, 28), np.uint8), y=np.array([0, -1, 2, 3])),
    "labels do not match images": lambda: dict(x=np.zeros((4, 28, 28), np.uint8), y=np.zeros(3, np.int64)),
    "2-D labels": lambda: dict(x=np.zeros((4, 28, 28), np.uint8), y=np.zeros((4, 1), np.int64)),
    "no labels": lambda: dict(x=np.zeros((4, 28, 28), np.uint8)),
    "object labels (needs pickle)": lambda: dict(x=np.zeros((2, 28, 28), np.uint8),
                                                 y=np.array([0, "1"], dtype=object)),
    "object classes (needs pickle)": lambda: dict(x=np.zeros((2, 28, 28), np.uint8), y=np.zeros(2, np.int64),
                                                  classes=np.array([{"a": 1}, 2], dtype=object)),
}


@pytest.mark.parametrize("case", sorted(BAD_NPZ))
def test_malformed_npz_is_refused_clearly(tmp_path, case):
    folder = tmp_path / "mnist"
    folder.mkdir()
    np.savez(folder / "test.npz", **BAD_NPZ[case]())
    with pytest.raises(DataUnavailableError) as err:
        load_dataset("mnist", "test", data_dir=tmp_path)
    assert "test.npz" in str(err.value)


@pytest.mark.parametrize("content", [b"", b"not a zip file at all", b"PK\x03\x04" + bytes(100),
                                     pickle.dumps({"x": 1})])
def test_corrupt_npz_file_is_refused_clearly(tmp_path, content):
    (tmp_path / "mnist").mkdir()
    (tmp_path / "mnist" / "train.npz").write_bytes(content)
    with pytest.raises(DataUnavailableError, match="Could not read"):
        load_dataset("mnist", "train", data_dir=tmp_path)


def test_npz_never_unpickles(tmp_path):
    marker = tmp_path / "unpickled"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    (tmp_path / "mnist").mkdir()
    np.savez(tmp_path / "mnist" / "test.npz", x=np.zeros((1, 28, 28), np.uint8),
             y=np.array([Payload()], dtype=object))
    with pytest.raises(DataUnavailableError):
        load_dataset("mnist", "test", data_dir=tmp_path)
    assert not marker.exists()


# --------------------------------------------------------------------------- bundled samples


@pytest.mark.parametrize("name", ["mnist", "fashion_mnist"])
def test_bundled_sample(name):
    d = load_dataset(name, "test")  # the data folder is empty and we are offline
    assert d.is_sample and "sample" in d.source
    assert d.images.shape == (1000, 28, 28) and d.images.dtype == np.uint8
    assert d.labels.shape == (1000,) and d.labels.dtype == np.int64
    assert d.labels.min() >= 0 and d.labels.max() <= 9 and len(np.unique(d.labels)) == 10
    assert d.classes == list(DATASETS[name].classes)
    assert d.indices is not None and len(np.unique(d.indices)) == 1000


def test_mnist_sample_comes_from_train_images_0_to_9999():
    d = load_dataset("mnist", "test", sources=("sample",))
    assert d.indices.min() >= 0 and d.indices.max() <= 9999
    assert set(d.indices.tolist()) <= set(datasets.MNIST_SAMPLE_TRAIN_INDICES)


def test_sample_is_never_training_data():
    with pytest.raises(DataUnavailableError):
        load_dataset("mnist", "train")


# --------------------------------------------------------------------------- nothing there


@pytest.mark.parametrize("name, split", [("cifar10", "test"), ("cifar10", "train"), ("animals10", "test"),
                                         ("fashion_mnist", "train")])
def test_missing_data_is_a_clear_error(name, split):
    with pytest.raises(DataUnavailableError) as err:
        load_dataset(name, split)
    msg = str(err.value)
    assert "RIMSCOPE_DATA_DIR" in msg and f"{name}/{split}.npz" in msg
    if name == "animals10":
        assert "RIMSCOPE_ANIMALS10_DIR" in msg


def test_missing_data_with_explicit_empty_folder(tmp_path):
    with pytest.raises(DataUnavailableError, match="RIMSCOPE_DATA_DIR"):
        load_dataset("cifar10", "test", data_dir=tmp_path / "nowhere")


def test_unknown_data_set_and_split():
    with pytest.raises(DataUnavailableError, match="mnist"):
        load_dataset("imagenet")
    with pytest.raises(DataUnavailableError, match="split"):
        load_dataset("mnist", "validation")


def test_available_sources_offline(tmp_path):
    write_npz(tmp_path, "mnist", "test", rng_images((3, 28, 28)), np.zeros(3, np.int64))
    assert datasets.available_sources("mnist", tmp_path) == {"npz": True, "folder": False, "torchvision": False,
                                                      "sample": True}
    assert not any(datasets.available_sources("cifar10", tmp_path).values())
    (tmp_path / "cifar10").mkdir()
    (tmp_path / "cifar10" / "test.npz").write_bytes(b"not a zip")  # found, but not an npz with x and y
    tv = datasets.paths.torchvision_root() / "cifar-10-batches-py"
    tv.mkdir(parents=True)
    (tv / "test_batch").write_bytes(b"")
    assert datasets.available_sources("cifar10", tmp_path) == {"npz": False, "folder": False, "torchvision": True,
                                                               "sample": False}


# --------------------------------------------------------------------------- Animals-10 folder


def make_animals(root, n_dog=10, n_cat=10, corrupt=True, layout="raw-img"):
    """Kaggle layout: Italian class folders; JPEG dogs, PNG cats, one broken 'JPEG'."""
    base = root / "animals10" / layout if layout else root / "animals10"
    colours = {}
    for folder, n, ext in (("cane", n_dog, "jpg"), ("gatto", n_cat, "png")):
        (base / folder).mkdir(parents=True)
        for i in range(n):
            colour = (20 * i + 10, 250 - 20 * i, 60 if folder == "cane" else 200)
            size = (48, 40) if i % 2 else (40, 40)  # non-square: centre-cropped
            Image.new("RGB", size, colour).save(base / folder / f"{folder}_{i}.{ext}")
            colours[colour] = folder
    (base / "cane" / "notes.txt").write_text("not an image")
    if corrupt:
        (base / "cane" / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 definitely not a jpeg")
    return base, colours


def test_animals10_kaggle_folder(tmp_path):
    base, colours = make_animals(tmp_path)
    train = load_dataset("animals10", "train", data_dir=tmp_path)
    test = load_dataset("animals10", "test", data_dir=tmp_path)
    classes = list(DATASETS["animals10"].classes)
    for d in (train, test):
        assert d.classes == classes and "image folder" in d.source
        assert d.images.dtype == np.uint8 and d.images.shape[1:] == (32, 32, 3)
        assert set(d.labels.tolist()) == {classes.index("dog"), classes.index("cat")}
    # 10 good dogs + 1 broken file, 10 cats: every good image lands in exactly one split
    assert len(train) + len(test) == 20
    n_test_cats = int((test.labels == classes.index("cat")).sum())
    n_test_dogs = int((test.labels == classes.index("dog")).sum())
    assert n_test_cats == 2  # 20 % of 10
    assert n_test_dogs in (1, 2)  # 20 % of 11 files = 2, minus the broken one if it fell here
    # labels follow the folder: identify every image by its (solid) colour
    seen = []
    for d in (train, test):
        for img, label in zip(d.images, d.labels):
            mean = img.reshape(-1, 3).mean(0)
            nearest = min(colours, key=lambda c: np.abs(np.subtract(c, mean)).sum())
            assert np.abs(np.subtract(nearest, mean)).max() < 8
            assert ANIMALS10_ITALIAN[colours[nearest]] == classes[label]
            seen.append(nearest)
    assert len(set(seen)) == 20  # no image in both splits, none twice
    # the split is fixed: loading again (fresh cache) gives the same test set
    datasets._CACHE.clear()
    again = load_dataset("animals10", "test", data_dir=tmp_path)
    np.testing.assert_array_equal(again.images, test.images)


def test_animals10_folder_via_environment_and_english_names(tmp_path, monkeypatch):
    base = tmp_path / "mine"
    for folder in ("dog", "spider", "unicorn"):  # English ImageFolder; 'unicorn' is no class
        (base / folder).mkdir(parents=True)
        for i in range(5):
            Image.new("RGB", (32, 32), (i * 40, 0, 0)).save(base / folder / f"{i}.png")
    monkeypatch.setenv("RIMSCOPE_ANIMALS10_DIR", str(base))
    train = load_dataset("animals10", "train")
    test = load_dataset("animals10", "test")
    names = [train.classes[i] for i in np.concatenate([train.labels, test.labels])]
    assert sorted(set(names)) == ["dog", "spider"] and len(names) == 10
    assert len(test) == 2 and len(train) == 8


def test_animals10_folder_with_only_broken_images_is_unavailable(tmp_path):
    (tmp_path / "animals10" / "raw-img" / "cane").mkdir(parents=True)
    (tmp_path / "animals10" / "raw-img" / "cane" / "a.jpg").write_bytes(b"garbage")
    with pytest.raises(DataUnavailableError):
        load_dataset("animals10", "train", data_dir=tmp_path)


def test_no_torchvision_import_when_it_has_nothing_to_read(tmp_path):
    """A newcomer without data (offline, empty torchvision folder) gets the bundled sample without
    the import of torchvision (about a second on the first page); where torchvision's files are
    there, they are read through it."""
    import subprocess
    import sys

    code = ("import sys; from core.data.datasets import load_dataset, will_use_torchvision; "
            "w = will_use_torchvision('mnist'); d = load_dataset('mnist', 'test', download=True); "
            "print(w, d.source.split(' ')[0], 'torchvision' in sys.modules)")
    env = {**os.environ, "RIMSCOPE_HOME": str(tmp_path / "home"), "RIMSCOPE_DATA_DIR": str(tmp_path / "data"),
           "RIMSCOPE_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    foreseen, source, imported = out.stdout.split()[-3:]
    assert imported == "False" and source != "torchvision", out.stdout
    assert foreseen == "False", out.stdout  # app.py's preload does not import it either
    # the split's file present: torchvision is asked (and refuses the empty file: the sample still answers)
    raw = tmp_path / "home" / "torchvision" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    (raw / "t10k-images-idx3-ubyte").write_bytes(b"")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == "True" and out.stdout.split()[-3] == "True", out.stdout  # foreseen
    # an npz of the split in the data folder: read first, torchvision neither foreseen nor imported
    (tmp_path / "data" / "mnist").mkdir(parents=True)
    np.savez(tmp_path / "data" / "mnist" / "test.npz", x=np.zeros((3, 28, 28), np.uint8), y=np.arange(3),
             classes=np.array([str(i) for i in range(10)]))
    env.pop("RIMSCOPE_OFFLINE")  # even where a download could be tried
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-3:] == ["False", "npz", "False"], out.stdout
