"""Data sets and where they come from.

Four data sets by name. Each can come from several sources, tried in this order and
reported to the caller (``LoadedData.source``):

1. ``npz``: a folder with ``<name>/<split>.npz`` (``x`` uint8, ``y`` int64, ``classes``),
   found through ``data_dir=...``, the environment variable ``RIMSCOPE_DATA_DIR``, or
   ``./data``.
2. ``folder``: Animals-10 as a folder of images in the Kaggle layout (Italian class folder
   names such as ``cane``, mapped to English) or any ImageFolder (one folder per class),
   under ``<data_dir>/animals10/raw-img`` or ``RIMSCOPE_ANIMALS10_DIR``. Split 80/20 per
   class with a fixed seed.
3. ``torchvision``: downloads MNIST, Fashion-MNIST and CIFAR-10 on a machine with internet.
   Whether its download source answers is probed first (core.data.online: at most 2 s,
   cached 60 s), so an offline machine hears so in one sentence instead of a download
   traceback; ``RIMSCOPE_OFFLINE=1`` skips the attempt altogether.
4. ``sample``: about 1,000 images shipped in ``assets/samples`` (MNIST, Fashion-MNIST), so
   the per-image pages work offline. Used only when ``allow_sample`` is true (the default for
   the test split).

What a run trains on (the plan, the MNIST holdout, the bundled demo) is core.data.plan. Paths
and settings come from core.paths; the image transforms live in core.data.transforms.

Nothing here unpickles: ``np.load(..., allow_pickle=False)`` everywhere.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .. import paths
from ..errors import DataUnavailableError
from .online import NO_INTERNET, Reachability, download_reachable

SAMPLES_DIR = paths.ROOT / "assets" / "samples"
SOURCES = ("npz", "folder", "torchvision", "sample")

# Kaggle Animals-10 ships Italian folder names (and a translate.py we never run).
ANIMALS10_ITALIAN = {
    "cane": "dog", "cavallo": "horse", "elefante": "elephant", "farfalla": "butterfly",
    "gallina": "chicken", "gatto": "cat", "mucca": "cow", "pecora": "sheep",
    "ragno": "spider", "scoiattolo": "squirrel",
}


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    title: str
    image_shape: tuple  # (H, W) grayscale or (H, W, 3) RGB
    classes: tuple
    note: str = ""

    @property
    def channels(self) -> int:
        return 1 if len(self.image_shape) == 2 else self.image_shape[2]

    @property
    def seq_len(self) -> int:  # T: one timestep per row
        return self.image_shape[0]

    @property
    def input_dim(self) -> int:  # D: one row, flattened
        return self.image_shape[1] * self.channels


DATASETS: dict[str, DatasetInfo] = {
    d.name: d
    for d in [
        DatasetInfo("mnist", "MNIST", (28, 28), tuple(str(i) for i in range(10)),
                    "handwritten digits"),
        DatasetInfo("fashion_mnist", "Fashion-MNIST", (28, 28),
                    ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                     "Sneaker", "Bag", "Ankle boot"), "clothing"),
        DatasetInfo("cifar10", "CIFAR-10", (32, 32, 3),
                    ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                     "ship", "truck"), "objects, RGB"),
        DatasetInfo("animals10", "Animals-10", (32, 32, 3),
                    ("dog", "horse", "elephant", "butterfly", "chicken", "cat", "cow", "sheep",
                     "spider", "squirrel"), "animal photos, RGB, resized to 32x32"),
    ]
}

# The bundled MNIST sample comes from training images 0..9,999; training can hold them out.
MNIST_SAMPLE_TRAIN_INDICES = range(0, 10_000)
MNIST_TRAIN_SIZE = 60_000  # the original training set, in its original order


def mnist_holdout_applies(n_train: int | None, has_indices: bool) -> bool:
    """Holding out train images 0..9,999 means something only for the original MNIST
    training set (60,000 images in the original order): the bundled sample comes from it.
    Any other training set (a user's own npz) keeps every image."""
    return bool(has_indices) and n_train == MNIST_TRAIN_SIZE


def check_data_dir(data_dir, dataset: str) -> Path:
    """An explicitly given data folder that cannot serve ``dataset``: a clear error, never a
    silent fall-back to another source. Returns the folder when it can."""
    info = get_info(dataset)
    p = Path(data_dir).expanduser()
    hint = (f" Give a folder with {info.name}/train.npz and {info.name}/test.npz (x uint8, y int64, classes), "
            "or leave the data folder empty to use RIMSCOPE_DATA_DIR"
            + (" or torchvision" if info.name in _TV else "") + ".")
    if not p.exists():
        raise DataUnavailableError(f"The data folder {p} does not exist." + hint)
    if not p.is_dir():
        raise DataUnavailableError(f"The data folder {p} is a file, not a folder." + hint)
    if (p / info.name / "train.npz").is_file() and (p / info.name / "test.npz").is_file():
        return p
    if info.name == "animals10" and find_image_folder(p) is not None:
        return p
    raise DataUnavailableError(f"The data folder {p} has no {info.name}/train.npz and {info.name}/test.npz"
                               + (" (nor an Animals-10 image folder)" if info.name == "animals10" else "") + "."
                               + hint)


def get_info(name: str) -> DatasetInfo:
    try:
        return DATASETS[name]
    except KeyError:
        raise DataUnavailableError(
            f"Unknown data set {name!r}; choose one of {', '.join(DATASETS)}") from None


@dataclass
class LoadedData:
    """Images, labels and class names, plus where they came from.

    Unpacks as ``images, labels, classes = load_dataset(...)``.
    """

    images: np.ndarray  # uint8 [N,H,W] or [N,H,W,3]
    labels: np.ndarray  # int64 [N]
    classes: list
    source: str  # human-readable: which source and where
    indices: np.ndarray | None = None  # index of each image in the original split, if known
    is_sample: bool = False
    notes: list = field(default_factory=list)

    def __iter__(self):
        return iter((self.images, self.labels, self.classes))

    def __len__(self):
        return len(self.labels)


# ---------------------------------------------------------------------------------------
# sources
def _check_arrays(x, y, info: DatasetInfo, where: str):
    if x.dtype != np.uint8 or x.ndim not in (3, 4) or tuple(x.shape[1:]) != info.image_shape:
        raise DataUnavailableError(
            f"{where}: expected x uint8 of shape [N, {', '.join(map(str, info.image_shape))}], "
            f"got {x.dtype} {list(x.shape)}")
    if y.ndim != 1 or len(y) != len(x):
        raise DataUnavailableError(f"{where}: y must be 1-D with one label per image")
    if len(y) and (y.min() < 0 or y.max() >= len(info.classes)):
        raise DataUnavailableError(f"{where}: labels must lie in 0..{len(info.classes) - 1}")


def _from_npz(info: DatasetInfo, split: str, data_dir: Path | None) -> LoadedData | None:
    if data_dir is None:
        return None
    path = Path(data_dir) / info.name / f"{split}.npz"
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as d:
            x, y = d["x"], d["y"].astype(np.int64)
            classes = [str(c) for c in d["classes"]] if "classes" in d else list(info.classes)
    except Exception as exc:  # corrupt archive, object arrays, missing keys
        raise DataUnavailableError(f"Could not read {path}: {exc}") from exc
    _check_arrays(x, y, info, str(path))
    return LoadedData(x, y, classes, f"npz folder ({path})", np.arange(len(y)))


def find_image_folder(data_dir: Path | None) -> Path | None:
    env = paths.animals10_dir()
    candidates = [env] if env is not None else []
    if data_dir is not None:
        candidates += [Path(data_dir) / "animals10" / "raw-img", Path(data_dir) / "animals10"]
    for c in candidates:
        if c.is_dir() and any(p.is_dir() for p in c.iterdir()):
            return c
    return None


def _from_folder(info: DatasetInfo, split: str, data_dir: Path | None) -> LoadedData | None:
    if info.name != "animals10":
        return None
    folder = find_image_folder(data_dir)
    if folder is None:
        return None
    from PIL import Image

    from ..digits.prepare import prepare_rgb

    class_names = list(info.classes)
    xs, ys, names = [], [], []
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        label_name = ANIMALS10_ITALIAN.get(sub.name, sub.name)
        if label_name not in class_names:
            continue  # an ImageFolder with other classes: skip what we cannot label
        files = sorted(p for p in sub.iterdir() if p.suffix.lower() in (".jpg", ".jpeg", ".png"))
        rng = np.random.default_rng(0)
        order = rng.permutation(len(files))
        n_test = int(round(0.2 * len(files)))
        chosen = order[:n_test] if split == "test" else order[n_test:]
        for i in sorted(chosen):
            try:
                with Image.open(files[i]) as im:
                    xs.append(prepare_rgb(im, size=info.image_shape[0]).array)
            except Exception:
                continue  # unreadable image in a user's folder: skip it, count below
            ys.append(class_names.index(label_name))
            names.append(str(files[i]))
    if not xs:
        return None
    x, y = np.stack(xs).astype(np.uint8), np.asarray(ys, dtype=np.int64)
    return LoadedData(x, y, class_names, f"image folder ({folder}), seeded 80/20 split",
                      notes=[f"{len(xs)} images read"])


_TV = {"mnist": "MNIST", "fashion_mnist": "FashionMNIST", "cifar10": "CIFAR10"}
# one file torchvision's data set of each split cannot be without (it checks the rest when it reads)
_TV_FILES = {"mnist": {"train": "MNIST/raw/train-images-idx3-ubyte", "test": "MNIST/raw/t10k-images-idx3-ubyte"},
             "fashion_mnist": {"train": "FashionMNIST/raw/train-images-idx3-ubyte",
                               "test": "FashionMNIST/raw/t10k-images-idx3-ubyte"},
             "cifar10": {"train": "cifar-10-batches-py/data_batch_1", "test": "cifar-10-batches-py/test_batch"}}


def download_failed_reason(info: DatasetInfo, why: str) -> str:
    """The reason of :func:`download_failed_message` alone, without the ways to get the data."""
    return f"{info.title} could not be downloaded: {why}"


def download_failed_message(info: DatasetInfo, why: str, data_dir: Path | None = None) -> str:
    """The one sentence a user reads when torchvision cannot fetch ``info`` (the raw reason goes apart)."""
    folder = data_dir if data_dir is not None else paths.ROOT / "data"
    demo = (f", or train a quick demo on the bundled {info.title} sample (Train page)"
            if (SAMPLES_DIR / f"{info.name}_sample.npz").is_file() else "")
    return (f"{download_failed_reason(info, why)}. Put the data at {folder / info.name}/train.npz and "
            f"test.npz (x uint8, y int64, classes), or start the app with RIMSCOPE_DATA_DIR=/path/to/folder "
            f"(python -m core.train: --data-dir) pointing at a folder that holds {info.name}/{demo}.")


def offline_error(info: DatasetInfo, reach: Reachability, data_dir: Path | None) -> DataUnavailableError:
    """The error of a download that cannot work: the sentence, the probe's raw reason as detail."""
    return DataUnavailableError(download_failed_message(info, NO_INTERNET, data_dir),
                                reason=download_failed_reason(info, NO_INTERNET),
                                detail=f"torchvision's download source did not answer: {reach.reason}")


def _from_torchvision(info: DatasetInfo, split: str, download: bool,
                      data_dir: Path | None = None) -> LoadedData | None:
    if info.name not in _TV:
        return None
    if not (paths.torchvision_root() / _TV_FILES[info.name][split]).is_file() and (not download or paths.offline()):
        return None  # nothing to read and nothing to fetch: no import of torchvision (about a second)
    import torchvision

    root = paths.torchvision_root()
    cls = getattr(torchvision.datasets, _TV[info.name])
    try:
        ds = cls(str(root), train=(split == "train"), download=False)
    except Exception:
        if not download or paths.offline():
            return None
        reach = download_reachable(info.name)
        if not reach.reachable:  # detected, not assumed: no download attempt that can only fail
            raise offline_error(info, reach, data_dir) from None
        try:
            ds = cls(str(root), train=(split == "train"), download=True)
        except Exception as exc:
            offline = not download_reachable(info.name, refresh=True).reachable
            why = NO_INTERNET if offline else "the download failed although its source answers"
            raise DataUnavailableError(download_failed_message(info, why, data_dir),
                                       reason=download_failed_reason(info, why), detail=f"{type(exc).__name__}: {exc}") from exc
    x = ds.data.numpy() if isinstance(ds.data, torch.Tensor) else np.asarray(ds.data)
    y = np.asarray(ds.targets, dtype=np.int64)
    return LoadedData(x.astype(np.uint8), y, list(info.classes), f"torchvision ({root})",
                      np.arange(len(y)))


def from_sample(info: DatasetInfo) -> LoadedData | None:
    path = SAMPLES_DIR / f"{info.name}_sample.npz"
    if not path.is_file():
        return None
    with np.load(path, allow_pickle=False) as d:
        x, y = d["x"], d["y"].astype(np.int64)
        classes = [str(c) for c in d["classes"]]
        idx = d["source_index"] if "source_index" in d else None
        split = str(d["split"]) if "split" in d else "?"
    return LoadedData(x, y, classes,
                      f"bundled sample ({len(y)} {info.title} {split} images, assets/samples)",
                      idx, is_sample=True)


def how_to_get(name: str) -> list[str]:
    """The ways to make a data set available, one short line each (for pages and messages)."""
    info = get_info(name)
    ways = [f"a data folder with `{info.name}/train.npz` and `test.npz` (x uint8, y int64, classes): start the "
            f"app with `RIMSCOPE_DATA_DIR=/path/to/folder make app`"]
    if info.name in _TV:
        ways.append(f"an internet connection: torchvision downloads {info.title} into `{paths.torchvision_root()}`")
    if info.name == "animals10":
        ways.append("the Kaggle Animals-10 `raw-img` folder: `RIMSCOPE_ANIMALS10_DIR=/path/to/raw-img make app`")
    return ways


def missing_reason(info: DatasetInfo, split: str) -> str:
    """Why ``split`` of ``info`` is missing, without the ways to get it (those :func:`how_to_get` lists)."""
    return f"none of its sources holds the {split} split"


def missing_message(info: DatasetInfo, split: str) -> str:
    lines = [f"No {info.title} {split} data found."]
    lines.append("Options: set RIMSCOPE_DATA_DIR (or the data folder setting) to a folder with "
                 f"{info.name}/{split}.npz (x uint8, y int64, classes)")
    if info.name in _TV:
        lines.append(f"or connect to the internet so torchvision can download it into {paths.torchvision_root()}")
    if info.name == "animals10":
        lines.append("or point RIMSCOPE_ANIMALS10_DIR at the Kaggle Animals-10 'raw-img' folder "
                     "(one folder per class, Italian names are fine)")
    return "; ".join(lines[:1]) + " " + " ".join(lines[1:]) + "."


_CACHE: dict = {}
_CACHE_LOCK = threading.Lock()


def load_dataset(name: str, split: str = "test", *, data_dir: str | Path | None = None,
                 sources: tuple = SOURCES, download: bool = True,
                 allow_sample: bool | None = None) -> LoadedData:
    """Images, labels and class names of data set ``name`` (``split`` 'train' or 'test').

    Sources are tried in ``sources`` order; the first that has the data wins. Raises
    ``DataUnavailableError`` with the options when none has it.
    """
    info = get_info(name)
    if split not in ("train", "test"):
        raise DataUnavailableError(f"split must be 'train' or 'test', got {split!r}")
    if allow_sample is None:
        allow_sample = split == "test"
    ddir = Path(data_dir).expanduser() if data_dir else paths.data_dir()
    key = (name, split, str(ddir), tuple(sources), download, allow_sample)
    with _CACHE_LOCK:
        if key in _CACHE:
            return _CACHE[key]
    result = None
    download_error = None
    for src in sources:
        if src == "npz":
            result = _from_npz(info, split, ddir)
        elif src == "folder":
            result = _from_folder(info, split, ddir)
        elif src == "torchvision":
            try:
                result = _from_torchvision(info, split, download, ddir)
            except DataUnavailableError as exc:  # offline: fall through to the bundled sample
                download_error = exc
        elif src == "sample" and allow_sample:
            result = from_sample(info)
        if result is not None:
            break
    if result is None:
        raise download_error or DataUnavailableError(missing_message(info, split), reason=missing_reason(info, split))
    with _CACHE_LOCK:
        _CACHE[key] = result
    return result


def _npz_has_arrays(path: Path) -> bool:
    """Whether ``path`` is an npz archive holding ``x`` and ``y`` (its directory only: no array read)."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            return {"x.npy", "y.npy"} <= set(z.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


def will_use_torchvision(name: str, data_dir: str | Path | None = None) -> bool:
    """Whether ``load_dataset(name, "test")`` (the pages' call) reaches torchvision: no npz or
    image folder holds the split, and torchvision has its files or may download them. Found as
    ``available_sources`` finds it (cheaply, torchvision not imported)."""
    if name not in _TV:
        return False
    found = available_sources(name, data_dir)
    if found["npz"] or found["folder"]:
        return False
    return found["torchvision"] or not paths.offline()


def available_sources(name: str, data_dir: str | Path | None = None) -> dict[str, bool]:
    """Which sources hold the test split of ``name`` right now, found cheaply: the files are
    looked for (an npz archive's directory is read), no image is loaded, nothing downloaded,
    torchvision not imported. ``load_dataset`` still checks the arrays when it reads them."""
    info = get_info(name)
    ddir = Path(data_dir).expanduser() if data_dir else paths.data_dir()
    npz = ddir / info.name / "test.npz" if ddir is not None else None
    tv = _TV_FILES.get(info.name, {}).get("test")
    return {"npz": npz is not None and npz.is_file() and _npz_has_arrays(npz),
            "folder": info.name == "animals10" and find_image_folder(ddir) is not None,
            "torchvision": tv is not None and (paths.torchvision_root() / tv).is_file(),
            "sample": (SAMPLES_DIR / f"{info.name}_sample.npz").is_file()}
