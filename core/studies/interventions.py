"""The knock-out, selection-swap and patching study of trained RIMs:
``python -m core.studies.interventions`` writes results/interventions/ (knockout.csv,
knockout.md, patching.csv). The computation is core.eval.interventions, the tables and words
core.report.interventions; this module loads the weights and the data sets.

Exact command of the shipped tables (the real test sets, RIMSCOPE_DATA_DIR)::

    RIMSCOPE_DATA_DIR=/path/to/data python -m core.studies.interventions

Over the weights of several seeds (one file stem per trained network; the tables then give each
drop a seed-level interval)::

    python -m core.studies.interventions --datasets mnist --weights mnist:runs/s0/rim mnist:runs/s1/rim ...
    python -m core.studies.interventions --long-grid    # every RIM of the long grid with its weights kept
"""
from __future__ import annotations

from pathlib import Path

import torch

from ..data.datasets import load_dataset
from ..data.transforms import add_noise
from ..eval.interventions import NOISE_VAR, knockout_table, mean_final_state
from ..eval.patching import class_donors, patching_table
from ..paths import long_grid_weights
from ..report import intervene as text
from ..report import interventions as words
from ..report.fmt import source_parts
from ..training.weights import load_weights

ROOT = Path(__file__).resolve().parents[2]


def weight_stems(datasets, weights, protocol: str, long_grid: bool = False) -> dict[str, list[Path]]:
    """dataset -> the weight stems to study: ``weights`` entries "dataset:stem", or with
    ``long_grid`` every RIM of the long grid whose weights are kept (core.paths.long_grid_weights),
    else the shipped ``pretrained/<protocol>/<dataset>/rim``."""
    if long_grid:
        found = {ds: long_grid_weights(ds, "rim", ROOT / "results") for ds in datasets}
        if missing := [ds for ds, stems in found.items() if not stems]:
            raise SystemExit(f"--long-grid: no RIM of the long grid with its weights on {', '.join(missing)} yet")
        return found
    out: dict[str, list[Path]] = {ds: [] for ds in datasets}
    for w in weights or []:
        ds, sep, stem = w.partition(":")
        if not sep or ds not in out:
            raise SystemExit(f"--weights takes dataset:stem with a dataset of --datasets, got {w!r}")
        out[ds].append(Path(stem))
    return {ds: stems or [ROOT / "pretrained" / protocol / ds / "rim"] for ds, stems in out.items()}


def study_one(dataset: str, stems: list[Path], args, md: list[str], tables: dict, patches: dict) -> None:
    """Every network of one data set: the knock-out table, its Markdown and the patching tables."""
    import time

    data = load_dataset(dataset, "test", data_dir=args.data_dir)
    images, labels = data.images, data.labels
    if args.n:
        images, labels = images[: args.n], labels[: args.n]
    train = load_dataset(dataset, "train", data_dir=args.data_dir, allow_sample=True)
    train_images = train.images[: args.train_n]
    control = words.no_communication_control(ROOT / "results", dataset)
    per_seed, seeds = [], []
    for stem in stems:
        model, meta = load_weights(stem)
        seed = meta.get("seed")
        t0 = time.perf_counter()
        mean = mean_final_state(model, train_images)
        table = knockout_table(model, images, labels, data.classes, mean_state=mean, isolate=args.isolate)
        secs = time.perf_counter() - t0
        name = _rel(stem)
        tables[(dataset, name, seed)] = table
        per_seed.append(table)
        seeds.append(seed)
        md.append(words.markdown(table, f"{dataset}: `{name}` (seed {seed}), {len(labels):,} test images "
                                        f"({source_parts(data.source)[0]}); read-out mean over {len(train_images):,} "
                                        f"training images ({source_parts(train.source)[0]})",
                                 network=f"the network of seed {seed}", control=control))
        k = min(args.patch_n, len(images))
        pairs = {"class": (images[:k], images[:k][class_donors(labels[:k], seed=0)]),
                 "noise": (add_noise(images[:k], "gaussian", NOISE_VAR, seed=0), images[:k])}
        for pairing, (rec, don) in pairs.items():
            pt = patching_table(model, rec, don, pairing=pairing)
            patches[(dataset, name, seed, pairing)] = pt
            md += [f"#### Patching ({pairing}), seed {seed}, first {k:,} test images", "",
                   *text.frame_markdown(text.patch_frame(pt)), "", text.patch_caption(pt), ""]
        print(f"{dataset} {name}: {len(labels)} images, {len(table.variants)} variants x 2 conditions "
              f"and patching in {time.perf_counter() - t0:.1f} s (table {secs:.1f} s)")
    if len(per_seed) > 1:
        md.append(words.seeds_markdown(per_seed, seeds, f"{dataset}: over {len(per_seed)} trained networks"))


def _rel(stem: Path) -> str:
    try:
        return str(Path(stem).resolve().relative_to(ROOT))
    except ValueError:
        return str(stem)


def main(argv=None) -> int:
    """``python -m core.studies.interventions [--datasets mnist fashion_mnist] [--weights ds:stem ...]
    [--n N]``: the knock-out, selection-swap and patching tables on the full test sets, written
    to results/interventions/ (knockout.csv, knockout.md, patching.csv)."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m core.studies.interventions", description=main.__doc__)
    p.add_argument("--datasets", nargs="+", default=["mnist", "fashion_mnist"])
    p.add_argument("--protocol", default="converged", help="pretrained/<protocol>/<dataset>/rim when no --weights")
    p.add_argument("--weights", nargs="*", default=None, help="dataset:stem, one per trained network (seed)")
    p.add_argument("--long-grid", action="store_true",
                   help="every RIM of the long grid (results/long) whose weights are kept, one network per seed")
    p.add_argument("--n", type=int, default=0, help="first N test images (0: all)")
    p.add_argument("--train-n", type=int, default=10_000, help="training images of the read-out mean")
    p.add_argument("--patch-n", type=int, default=1_000, help="test images of the patching tables")
    p.add_argument("--isolate", action="store_true", help="taken-out LSTMs also leave the communication softmax")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--out", default=str(ROOT / "results" / "interventions"))
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    md = ["# Interventions on trained RIMs", "",
          "Written by `python -m core.studies.interventions`. Each LSTM taken out in turn in three ways "
          "(`core/eval/interventions.py`, `KNOCKOUTS`): removed (it leaves the top-k competition, so k others "
          "stay active), switched off after selection (its place stays empty on the rows where it ranks in the "
          "top k) and read-out only (the recurrence runs as trained and its final state is replaced by its mean "
          "over training images at the classifier: the direct effect); the taken-out LSTM "
          + ("also leaves" if args.isolate else "stays in")
          + " the communication softmax. The same weights are also run with another selection or alpha 0 at "
          "inference. Accuracy with its 95% Wilson interval; drop = intact minus variant, in points; lost / "
          "gained = images the variant gets wrong that the intact model gets right, and the reverse; p: the "
          "paired exact (McNemar) test of the variant against the intact model on the same images, raw and "
          "Holm-adjusted over the network's table (clean and noisy). Noise: Gaussian, variance "
          f"{NOISE_VAR:g}, one draw (seed 0). Patching: one LSTM's state (h, c), or the whole selection mask, "
          "taken from a donor image on a band of rows.", ""]
    tables, patches = {}, {}
    for dataset, stems in weight_stems(args.datasets, args.weights, args.protocol, args.long_grid).items():
        study_one(dataset, stems, args, md, tables, patches)
    words.write_csv(out / "knockout.csv", tables)
    text.write_patch_csv(out / "patching.csv", [((ds, m, s), t) for (ds, m, s, _), t in patches.items()])
    (out / "knockout.md").write_text("\n".join(md))
    print(f"wrote {out / 'knockout.csv'}, {out / 'patching.csv'} and {out / 'knockout.md'}")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
