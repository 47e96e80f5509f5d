"""What a training run trains and tests on: the plan (cheap, no image loaded), the MNIST
holdout of the images the bundled sample comes from, and the demo on that sample."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import paths
from ..errors import ConfigError, DataUnavailableError
from ..seeds import SEEDS
from .datasets import (
    MNIST_SAMPLE_TRAIN_INDICES,
    LoadedData,
    check_data_dir,
    find_image_folder,
    from_sample,
    get_info,
    load_dataset,
    missing_message,
    missing_reason,
    mnist_holdout_applies,
    offline_error,
)
from .online import download_reachable

SAMPLE_TRAIN = 800  # demo on the bundled 1,000-image sample: 800 to train, 200 to test
_TV_TRAIN_FILES = {"mnist": ("MNIST/raw/train-images-idx3-ubyte", 60_000),
                   "fashion_mnist": ("FashionMNIST/raw/train-images-idx3-ubyte", 60_000),
                   "cifar10": ("cifar-10-batches-py/data_batch_1", 50_000)}


@dataclass(frozen=True)
class DataPlan:
    """Where a worker will find the training data, without loading it."""

    source: str
    n_train: int | None  # images left for training (after the MNIST holdout), when known
    note: str = ""


def _mnist_holdout(n: int | None, has_indices: bool) -> tuple[bool, str]:
    """(whether train images 0..9,999 are held out, the note saying so) for MNIST with holdout asked."""
    if not has_indices:
        return False, "holdout requested but the source has no image indices; nothing held out"
    if not mnist_holdout_applies(n, True):
        return False, (f"nothing held out: these {n:,} images are not the original 60,000-image MNIST training "
                       "set, so the bundled sample is not among them")
    lo, hi = MNIST_SAMPLE_TRAIN_INDICES.start, MNIST_SAMPLE_TRAIN_INDICES.stop
    return True, (f"training images {lo:,} to {hi - 1:,} held out: the 1,000 images of the bundled sample, which "
                  f"the per-image pages show, were cut from these {hi - lo:,}, so no model has trained on them")


def training_data_plan(dataset: str, data_dir: str | Path | None = None, holdout_sample: bool = True) -> DataPlan:
    """Which source a worker will train from, found cheaply (no image is loaded).

    Raises DataUnavailableError (with the options) when no source has the training split
    and downloading is impossible: ``RIMSCOPE_OFFLINE=1``, or torchvision's download source
    does not answer (core.data.online's probe: at most 2 s, cached 60 s).
    """
    info = get_info(dataset)
    if data_dir:  # given explicitly: it must serve this data set, or the user hears why not
        check_data_dir(data_dir, dataset)
    ddir = Path(data_dir).expanduser() if data_dir else paths.data_dir()

    def plan(source: str, n: int | None) -> DataPlan:
        if n is None or dataset != "mnist" or not holdout_sample:
            return DataPlan(source, n)
        held, note = _mnist_holdout(n, True)
        lo, hi = MNIST_SAMPLE_TRAIN_INDICES.start, MNIST_SAMPLE_TRAIN_INDICES.stop
        return DataPlan(source, n - max(0, min(n, hi) - lo) if held else n, note)

    if ddir is not None:
        train_npz, test_npz = ddir / info.name / "train.npz", ddir / info.name / "test.npz"
        if train_npz.is_file() and test_npz.is_file():
            n = None
            try:
                with np.load(train_npz, allow_pickle=False) as d:
                    n = int(d["y"].shape[0])
            except Exception:  # the worker reports a broken file with its own message
                pass
            return plan(f"npz folder ({train_npz.parent})", n)
    if info.name == "animals10":
        folder = find_image_folder(ddir)
        if folder is not None:
            files = sum(1 for sub in folder.iterdir() if sub.is_dir()
                        for p in sub.iterdir() if p.suffix.lower() in (".jpg", ".jpeg", ".png"))
            return DataPlan(f"image folder ({folder}), seeded 80/20 split", int(files * 0.8) or None)
    if info.name in _TV_TRAIN_FILES:
        rel, n = _TV_TRAIN_FILES[info.name]
        root = paths.torchvision_root()
        if (root / rel).is_file():
            return plan(f"torchvision ({root})", n)
        if not paths.offline():
            reach = download_reachable(info.name)
            if reach.reachable:
                return plan(f"torchvision download into {root} (its source answers)", n)
            raise offline_error(info, reach, ddir)
    raise DataUnavailableError(missing_message(info, "train"), reason=missing_reason(info, "train"))


def demo_positions(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions (train, held out) in a bundled sample of ``n`` images: the fixed, seeded split of
    every demo run (the first ``SAMPLE_TRAIN`` of one permutation train, the rest test)."""
    perm = np.random.default_rng(SEEDS.fixed_demo_split).permutation(n)
    return np.sort(perm[:SAMPLE_TRAIN]), np.sort(perm[SAMPLE_TRAIN:])


def demo_held_out(data: LoadedData, dataset: str) -> np.ndarray:
    """Positions in ``data`` of the images a demo run on ``dataset`` did not train on.

    ``data`` the bundled sample: its held-out part (200 of 1,000). Any other data (a full test
    split): every image except those the demo trained on, matched by their index in the
    original split where the sample was cut from that same split (Fashion-MNIST's sample comes
    from its test images; MNIST's from training images, which no test split holds)."""
    n = len(data)
    if data.is_sample:
        return demo_positions(n)[1]
    sample = from_sample(get_info(dataset))
    if sample is None or sample.indices is None or "test images" not in sample.source:
        return np.arange(n)
    trained = sample.indices[demo_positions(len(sample))[0]]
    own = data.indices if data.indices is not None else np.arange(n)
    return np.flatnonzero(~np.isin(own, trained))


def sample_split(dataset: str) -> tuple[LoadedData, LoadedData, str]:
    """A quick demo without any data set: the bundled sample split 800 / 200 (fixed, seeded)."""
    info = get_info(dataset)
    sample = from_sample(info)
    if sample is None:
        raise ConfigError(f"There is no bundled sample of {info.title} (only MNIST and Fashion-MNIST ship one).")
    parts = []
    for idx in demo_positions(len(sample.labels)):
        parts.append(dataclasses.replace(sample, images=sample.images[idx], labels=sample.labels[idx],
                                         indices=None if sample.indices is None else sample.indices[idx]))
    note = (f"demo on the bundled sample: {SAMPLE_TRAIN} images to train, {len(sample) - SAMPLE_TRAIN} to test; "
            "not comparable with runs on the full data set")
    return parts[0], parts[1], note


def prepare_training_data(cfg, data_dir=None) -> tuple[LoadedData, LoadedData, str]:
    """Train and test data for a TrainConfig, with MNIST's bundled sample held out if asked."""
    if cfg.data_source == "sample":
        return sample_split(cfg.dataset)
    if data_dir:
        check_data_dir(data_dir, cfg.dataset)
    train = load_dataset(cfg.dataset, "train", data_dir=data_dir, allow_sample=False)
    test = load_dataset(cfg.dataset, "test", data_dir=data_dir, allow_sample=False)
    note = ""
    if cfg.dataset == "mnist" and cfg.holdout_sample:
        held, note = _mnist_holdout(len(train), train.indices is not None)
        if held:
            lo, hi = MNIST_SAMPLE_TRAIN_INDICES.start, MNIST_SAMPLE_TRAIN_INDICES.stop
            keep = (train.indices < lo) | (train.indices >= hi)
            train = dataclasses.replace(train, images=train.images[keep], labels=train.labels[keep],
                                        indices=train.indices[keep])
    return train, test, note


def no_training_data_text(title: str, exc: DataUnavailableError) -> str:
    """The Train page's one line for training data that is not here: why, without the ways to get
    it (the page lists them once); the whole message when the error gives no reason apart."""
    return f"No training data for {title} here: {exc.reason or exc}" + ("." if exc.reason else "")
