"""Other people's handwriting: real digit collections from outside MNIST, read as uploads.

Two external TEST sets (never trained on, tuned only on their even-indexed half) stand for
what a user uploads from another source: a scan, a form, a thresholded photo.

* ``semeion``: UCI "Semeion Handwritten Digit", 1,593 digits 16 x 16, binary;
* ``optdigits``: UCI "Optical Recognition of Handwritten Digits", 1,934 digits 32 x 32, binary.

Both are stored like the other archives (``x`` uint8 [N, H, W] with 255 = ink, ``y`` int64,
``classes``) in ``paths.handwriting_dir()``; without them a labelled sample of each (at most
200 images, ``assets/samples/<set>_sample.npz``, with the index of every image in the full
set) stands in.

``python -m core.studies.handwriting measure-external`` and ``generalisation`` are its command line.
``upload_bytes`` renders one digit as a person would have it (dark ink on white paper,
enlarged to ``RENDER_SIDE`` px, a PNG file) and ``upload_inputs`` sends those bytes through
exactly the Mechanisms page's upload path (``load_image`` -> ``prepare_for_dataset(mode=
"digit")``). ``measure_external`` gives each MNIST model's accuracy on the even and the odd
half separately: choices may be tuned on the even half only, the odd half is the report.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from core import paths

RENDER_SIDE = 112  # px: each digit is enlarged to this side, about what a phone crop gives
SAMPLE_DIR = paths.ROOT / "assets" / "samples"


@dataclass(frozen=True)
class SetInfo:
    name: str
    title: str
    side: int  # the images' native side in px
    url: str


SETS = {
    "semeion": SetInfo("semeion", "Semeion (16 x 16, about 80 writers)", 16,
                       "https://archive.ics.uci.edu/dataset/178/semeion+handwritten+digit"),
    "optdigits": SetInfo("optdigits", "UCI optdigits (32 x 32, 30 writers)", 32,
                         "https://archive.ics.uci.edu/dataset/80/optical+recognition+of+handwritten+digits"),
}


@dataclass(frozen=True)
class ExternalSet:
    """One loaded collection: ``x`` uint8 [N, H, W] (255 = ink), ``y`` int64 [N].

    ``index`` is each image's position in the full set (so the halves of a sample are the
    halves of the full set), ``source`` says where it came from, ``full`` whether it is the
    whole set or the bundled sample.
    """

    name: str
    x: np.ndarray
    y: np.ndarray
    index: np.ndarray
    source: str
    full: bool

    def half(self, which: str) -> np.ndarray:
        """Boolean mask of the ``"even"`` or ``"odd"`` half (by index in the full set)."""
        if which not in ("even", "odd"):
            raise ValueError(f"half must be 'even' or 'odd', got {which!r}")
        return (self.index % 2 == 0) if which == "even" else (self.index % 2 == 1)


def check_name(name: str) -> SetInfo:
    if name not in SETS:
        raise ValueError(f"Unknown handwriting set {name!r}; known: {', '.join(SETS)}")
    return SETS[name]


def sample_path(name: str) -> Path:
    return SAMPLE_DIR / f"{check_name(name).name}_sample.npz"


def full_path(name: str, folder: Path | None = None) -> Path | None:
    folder = folder if folder is not None else paths.handwriting_dir()
    return None if folder is None else Path(folder) / f"{check_name(name).name}.npz"


def _read(path: Path, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    with np.load(path, allow_pickle=False) as z:
        x, y = np.asarray(z["x"]), np.asarray(z["y"]).astype(np.int64)
        index = np.asarray(z["index"]).astype(np.int64) if "index" in z.files else None
    side = SETS[name].side
    if x.dtype != np.uint8 or x.ndim != 3 or x.shape[1:] != (side, side) or len(y) != len(x):
        raise ValueError(f"{path}: expected x uint8 [N, {side}, {side}] and y [N], "
                         f"got x {x.dtype} {x.shape}, y {y.shape}")
    if y.size and (y.min() < 0 or y.max() > 9):
        raise ValueError(f"{path}: labels must be digits 0..9")
    return x, y, index


def load_external(name: str, folder: Path | None = None, *, sample: bool | None = None) -> ExternalSet:
    """The full set from ``folder`` (default ``paths.handwriting_dir()``), else the sample.

    ``sample=True`` forces the bundled sample, ``sample=False`` the full set
    (FileNotFoundError, saying where to put it, when it is not there).
    """
    check_name(name)
    full = full_path(name, folder)
    if sample is not True and full is not None and full.is_file():
        x, y, _ = _read(full, name)
        return ExternalSet(name, x, y, np.arange(len(x)), str(full), True)
    if sample is False:
        raise FileNotFoundError(where_to_put(name))
    path = sample_path(name)
    x, y, index = _read(path, name)
    if index is None:
        raise ValueError(f"{path}: the sample has no 'index' of its images in the full set")
    return ExternalSet(name, x, y, index, f"bundled sample ({path.name})", False)


def where_to_put(name: str) -> str:
    folder = paths.handwriting_dir()
    where = str(folder) if folder is not None else "a folder named by RIMSCOPE_HANDWRITING_DIR"
    return (f"The full {name} set is not on disk: put {name}.npz (x uint8 [N, H, W] with 255 = ink, "
            f"y the digit labels) in {where} (or set RIMSCOPE_HANDWRITING_DIR, default "
            f"RIMSCOPE_DATA_DIR/handwriting). Source: {SETS[name].url}")


# --------------------------------------------------------------------------- the upload path


def upload_bytes(digit: np.ndarray, side: int = RENDER_SIDE) -> bytes:
    """PNG bytes of one digit (255 = ink) as a person would have it: dark ink on white paper,
    enlarged to ``side`` px the way an image viewer or editor enlarges it (bicubic, Pillow's
    default), so the ink's edges are soft and the digit fills the picture as in the set."""
    paper = Image.fromarray(255 - np.asarray(digit, dtype=np.uint8))
    buf = io.BytesIO()
    paper.resize((side, side), Image.Resampling.BICUBIC).save(buf, "PNG")
    return buf.getvalue()


def upload_input(digit: np.ndarray, side: int = RENDER_SIDE) -> np.ndarray:
    """The 28 x 28 model input the Mechanisms upload makes of this digit's PNG file."""
    from core.digits.load import load_image
    from core.digits.prepare import prepare_for_dataset

    return prepare_for_dataset(load_image(upload_bytes(digit, side)), (28, 28), mode="digit").array


def upload_inputs(x: np.ndarray, side: int = RENDER_SIDE) -> np.ndarray:
    """``uint8 [N, 28, 28]``: every digit through the upload path."""
    if len(x) == 0:
        return np.zeros((0, 28, 28), dtype=np.uint8)
    return np.stack([upload_input(d, side) for d in x])


# --------------------------------------------------------------------------- measuring


def predictions(model, inputs: np.ndarray) -> np.ndarray:
    """Predicted digits ``int64 [N]`` of one model for prepared 28 x 28 inputs."""
    from core.eval.predict import predict_proba

    return predict_proba(model, inputs).argmax(axis=1).astype(np.int64)


def half_accuracies(pred: np.ndarray, data: ExternalSet) -> dict[str, float]:
    """Accuracy on the even half, the odd half and all of ``data`` (NaN for an empty half)."""
    out = {}
    for which in ("even", "odd"):
        m = data.half(which)
        out[which] = float((pred[m] == data.y[m]).mean()) if m.any() else float("nan")
    out["all"] = float((pred == data.y).mean()) if len(pred) else float("nan")
    return out


def measure_external(models: dict[str, object], data: ExternalSet, inputs: np.ndarray | None = None) -> list[dict]:
    """One row per model: ``{"model", "even", "odd", "all", "n_even", "n_odd", "pred"}``.

    ``models`` maps a name to a loaded model (anything ``predict_proba`` takes);
    ``inputs`` are the prepared inputs when already made (``upload_inputs(data.x)``).
    """
    inputs = upload_inputs(data.x) if inputs is None else inputs
    rows = []
    for name, model in models.items():
        pred = predictions(model, inputs)
        rows.append({"model": name, **half_accuracies(pred, data),
                     "n_even": int(data.half("even").sum()), "n_odd": int(data.half("odd").sum()),
                     "pred": pred})
    return rows


def format_external(rows: list[dict], data: ExternalSet) -> str:
    """Plain-text table: accuracy (%) on the even half (tuning), the odd half (report), all."""
    width = max([len("model")] + [len(r["model"]) for r in rows])
    n_even, n_odd = int(data.half("even").sum()), int(data.half("odd").sum())
    head = f"{'model'.ljust(width)}  {'even (' + str(n_even) + ')':>11}  {'odd (' + str(n_odd) + ')':>10}  {'all':>6}"
    lines = [f"{data.name}: {data.source}", head]
    for r in rows:
        even, odd, whole = (f"{100 * r[k]:.1f}%" if r[k] == r[k] else "-" for k in ("even", "odd", "all"))
        lines.append(f"{r['model'].ljust(width)}  {even:>11}  {odd:>10}  {whole:>6}")
    return "\n".join(lines)


def shipped_entries(protocol: str | None = "converged"):
    """The shipped MNIST models of ``protocol`` (all shipped ones for None), in catalogue order."""
    from core import catalog

    return [e for e in catalog.pretrained_entries("mnist") if protocol is None or e.protocol == protocol]


def entry_name(entry) -> str:
    return entry.model + (f" [{entry.protocol}]" if entry.protocol else "")


def measure_entries(entries, data: ExternalSet, inputs: np.ndarray | None = None) -> list[dict]:
    """``measure_external`` for catalogue entries; each row also has the entry's ``key``, its
    MNIST test accuracy as recorded in its metadata (``mnist_test``, None when unknown) and
    ``error`` instead of accuracies when the model cannot be loaded."""
    from core.catalog import load_entry

    inputs = upload_inputs(data.x) if inputs is None else inputs
    rows = []
    for entry in entries:
        base = {"model": entry_name(entry), "key": entry.key,
                "mnist_test": (entry.metrics or {}).get("test_accuracy")}
        try:
            model, _ = load_entry(entry)
        except Exception as exc:  # noqa: BLE001 - report it, measure the others
            rows.append({**base, "error": str(exc)})
            continue
        rows.extend({**r, **base} for r in measure_external({base["model"]: model}, data, inputs))
    return rows


def misreads(data: ExternalSet, preds: dict[str, np.ndarray]) -> list[dict]:
    """The digits at least one model misreads, most-misread first (then by index):
    ``{"row", "index", "true", "said": {model: digit}, "wrong": count}`` per digit."""
    if not preds:
        return []
    said = np.stack(list(preds.values()), axis=1)  # [N, models]
    wrong = (said != data.y[:, None]).sum(axis=1)
    rows = np.flatnonzero(wrong > 0)
    rows = rows[np.lexsort((data.index[rows], -wrong[rows]))]
    names = list(preds)
    return [{"row": int(r), "index": int(data.index[r]), "true": int(data.y[r]),
             "said": {n: int(said[r, j]) for j, n in enumerate(names)}, "wrong": int(wrong[r])} for r in rows]


def find_row(data: ExternalSet, index: int) -> int | None:
    """The row of the image with position ``index`` in the full set, None when not loaded."""
    hits = np.flatnonzero(data.index == int(index))
    return int(hits[0]) if len(hits) else None


# --------------------------------------------------------------------------- generalisation


def grid_weights(runs_dir: Path, protocol_dir: Path | None = None) -> dict[str, dict[int, Path]]:
    """``{method: {seed: stem}}`` of the MNIST grid's weights in ``runs_dir``
    (``<model>_s<seed>.safetensors``); a seed whose weights are only shipped (in
    ``protocol_dir``, e.g. ``pretrained/converged/mnist``, with that seed in its metadata) counts
    too. A run its record calls unhealthy (diverged, collapsed, ...) is left out."""
    import json
    import re

    def healthy(stem: Path) -> bool:
        try:
            health = json.loads(stem.with_suffix(".json").read_text()).get("health")
        except (OSError, ValueError, AttributeError):
            return True  # no record to read: the weights alone decide nothing
        return health in (None, "healthy")

    out: dict[str, dict[int, Path]] = {}
    for f in sorted(Path(runs_dir).glob("*_s*.safetensors")):
        m = re.fullmatch(r"(.+)_s(\d+)", f.stem)
        if m and healthy(f.with_suffix("")):
            out.setdefault(m.group(1), {})[int(m.group(2))] = f.with_suffix("")
    if protocol_dir is not None:
        for f in sorted(Path(protocol_dir).glob("*.safetensors")):
            try:
                seed = int(json.loads(f.with_suffix(".json").read_text())["seed"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
            out.setdefault(f.stem, {}).setdefault(seed, f.with_suffix(""))
    return out


def grid_weights_in(folders: list[Path], protocol_dir: Path | None = None) -> dict[str, dict[int, Path]]:
    """``grid_weights`` over several folders: each (method, seed) from the first folder that has it
    (the long grid: its runs' own weights, then their retrained copies), then ``protocol_dir``."""
    out: dict[str, dict[int, Path]] = {}
    last = len(folders) - 1
    for found in [grid_weights(f, protocol_dir if i == last else None) for i, f in enumerate(folders)]:
        for method, seeds in found.items():
            for seed, stem in seeds.items():
                out.setdefault(method, {}).setdefault(seed, stem)
    return out


def generalisation_table(models: dict[str, dict[int, Path]], sets: dict[str, ExternalSet],
                         half: str = "odd", reference: str = "rim"):
    """Per method (every seed), accuracy on each set's ``half`` through the upload path.

    Returns ``(per_seed, summary)`` DataFrames: ``per_seed`` one row per (method, seed) with a
    column per set; ``summary`` one row per (method, set): n seeds, mean, sd, and against
    ``reference`` the difference (reference - method, in accuracy points) with its Welch interval
    at the level of the Holm step that decides it, the Holm-adjusted p-value and the verdict of
    ``core.report.stats.verdict`` (``summarise``).
    """
    import pandas as pd

    from core.training.weights import load_weights

    inputs = {name: upload_inputs(d.x[d.half(half)]) for name, d in sets.items()}
    labels = {name: d.y[d.half(half)] for name, d in sets.items()}
    rows = []
    for method, seeds in models.items():
        for seed, stem in sorted(seeds.items()):
            model, _ = load_weights(stem, expected_dataset="mnist")
            rows.append({"method": method, "seed": seed, **{
                name: float((predictions(model, x) == labels[name]).mean()) for name, x in inputs.items()}})
    per_seed = pd.DataFrame(rows)
    return per_seed, summarise(per_seed, list(sets), list(models), half, reference)


def summarise(per_seed, set_names: list[str], methods: list[str], half: str = "odd", reference: str = "rim"):
    """The summary of ``generalisation_table`` from its per-seed table: per (set, method) seeds,
    mean, sd; against ``reference`` the Welch difference, p-value Holm-adjusted within the set
    (one family: the reference against every other method), the interval at the level of the
    Holm step that decides it (so it excludes 0 exactly when the verdict is not "cannot tell")
    and the verdict of ``core.report.stats.verdict``."""
    import pandas as pd

    from core.report.stats import holm, holm_levels, mean_sd, verdict, welch_test

    summary = []
    for name in set_names:
        ref = per_seed.loc[per_seed["method"] == reference, name].to_numpy() if len(per_seed) else np.array([])
        rows = []
        for method in methods:
            acc = per_seed.loc[per_seed["method"] == method, name].to_numpy()
            m, sd, n = mean_sd(acc)
            row = {"set": name, "half": half, "method": method, "seeds": n, "mean": m, "sd": sd}
            if method != reference and len(ref):
                diff, lo, hi, p = welch_test(ref, acc)
                row.update({"rim_minus_method": diff, "ci_low": lo, "ci_high": hi, "p": p})
            rows.append(row)
        tested = [r for r in rows if "p" in r]
        ps = [r["p"] for r in tested]
        for r, p_adj, level in zip(tested, holm(ps), holm_levels(ps), strict=True):
            r["p_holm"] = p_adj
            if np.isfinite(level):  # the interval at the level of the Holm step that decides it
                acc = per_seed.loc[per_seed["method"] == r["method"], name].to_numpy()
                _, r["ci_low"], r["ci_high"], _ = welch_test(ref, acc, level=float(level))
            r["verdict"] = verdict(r["rim_minus_method"], p_adj, above=f"{reference} reads it better",
                                   below=f"{r['method']} reads it better")
        summary.extend(rows)
    return pd.DataFrame(summary)

