"""The knock-out, selection-swap, patching and attribution study of trained RIMs:
``python -m core.studies.interventions`` writes results/interventions/ (knockout.csv,
knockout.md, patching.csv, attribution.csv). The computation is core.eval (interventions,
patching, attribution), the tables and words core.report.interventions; this module loads the
weights and the data sets.

Exact command of the shipped tables (the real test sets, RIMSCOPE_DATA_DIR): the RIMs of seeds
0-4 of the long grid on MNIST and Fashion-MNIST, one network per seed::

    RIMSCOPE_DATA_DIR=/path/to/data python -m core.studies.interventions --long-grid

Other weights (one file stem per trained network; with several the tables give each drop a
seed-level interval), or the shipped RIM of a protocol (neither option)::

    python -m core.studies.interventions --datasets mnist --weights mnist:runs/s0/rim mnist:runs/s1/rim ...
    python -m core.studies.interventions --protocol converged
"""
from __future__ import annotations

from pathlib import Path

import torch

from ..data.datasets import load_dataset
from ..eval.interventions import knockout_table, mean_final_state
from ..eval.patching import PAIRINGS, pairs, patching_table
from ..paths import long_grid_weights
from ..report import intervene as text
from ..report import interventions as words
from ..report.fmt import source_parts
from ..training.weights import load_weights

ROOT = Path(__file__).resolve().parents[2]


LONG_GRID_SEEDS = tuple(range(5))  # the study's networks per set with --long-grid


def weight_stems(datasets, weights, protocol: str, long_grid: bool = False,
                 seeds=LONG_GRID_SEEDS) -> dict[str, list[Path]]:
    """dataset -> the weight stems to study: ``weights`` entries "dataset:stem", or with
    ``long_grid`` the RIMs of the long grid of ``seeds`` (core.paths.long_grid_weights; every
    one must have its weights), else the shipped ``pretrained/<protocol>/<dataset>/rim``."""
    if long_grid:
        found = {ds: long_grid_weights(ds, "rim", ROOT / "results", seeds=seeds) for ds in datasets}
        missing = [f"{ds} ({len(stems)} of {len(seeds)})" for ds, stems in found.items() if len(stems) < len(seeds)]
        if missing:
            raise SystemExit(f"--long-grid: the RIMs of seeds {', '.join(map(str, seeds))} with their weights are not "
                             f"all in results/ on {', '.join(missing)}")
        return found
    out: dict[str, list[Path]] = {ds: [] for ds in datasets}
    for w in weights or []:
        ds, sep, stem = w.partition(":")
        if not sep or ds not in out:
            raise SystemExit(f"--weights takes dataset:stem with a dataset of --datasets, got {w!r}")
        out[ds].append(Path(stem))
    return {ds: stems or [ROOT / "pretrained" / protocol / ds / "rim"] for ds, stems in out.items()}


def study_one(dataset: str, stems: list[Path], args, md: list[str], tables: dict, patches: dict,
              attributions: list) -> None:
    """Every network of one data set: the knock-out table, its Markdown, the patching tables and
    the attributions' completeness."""
    import time

    data = load_dataset(dataset, "test", data_dir=args.data_dir)
    images, labels = data.images, data.labels
    if args.n:
        images, labels = images[: args.n], labels[: args.n]
    train = None
    if args.readout_fill == "mean":
        train = load_dataset(dataset, "train", data_dir=args.data_dir, allow_sample=True)
        train_images = train.images[: args.train_n]
    control = words.no_communication_control(ROOT / "results", dataset)
    per_seed, seeds = [], []
    for stem in stems:
        model, meta = load_weights(stem)
        seed = meta.get("seed")
        t0 = time.perf_counter()
        mean = mean_final_state(model, train_images) if train is not None else None
        table = knockout_table(model, images, labels, data.classes, mean_state=mean, isolate=args.isolate)
        secs = time.perf_counter() - t0
        name = _rel(stem)
        tables[(dataset, name, seed)] = table
        per_seed.append(table)
        seeds.append(seed)
        fill = ("" if train is None else f"; read-out mean over {len(train_images):,} training images "
                                         f"({source_parts(train.source)[0]})")
        md.append(words.markdown(table, f"{dataset}: `{name}` (seed {seed}), {len(labels):,} test images "
                                        f"({source_parts(data.source)[0]}){fill}",
                                 network=f"the network of seed {seed}", control=control))
        k = min(args.patch_n, len(images))
        for pairing in PAIRINGS:
            rec, don = pairs(images[:k], labels[:k], pairing)
            pt = patching_table(model, rec, don, pairing=pairing)
            patches[(dataset, name, seed, pairing)] = pt
            md += [f"#### Patching ({pairing}), seed {seed}, first {k:,} test images", "",
                   *text.frame_markdown(text.patch_frame(pt)), "", text.patch_caption(pt), ""]
        attributions += [{"dataset": dataset, "model": name, "seed": seed, **r}
                         for r in completeness(model, images[: args.attribution_n])]
        print(f"{dataset} {name}: {len(labels)} images, {len(table.variants)} variants x 2 conditions, patching "
              f"and attributions in {time.perf_counter() - t0:.1f} s (table {secs:.1f} s)", flush=True)
    if len(per_seed) > 1:
        md.append(words.seeds_markdown(per_seed, seeds, f"{dataset}: over {len(per_seed)} trained networks"))


def completeness(model, images) -> list[dict]:
    """Integrated Gradients of each image's predicted logit, with its own mask held fixed and
    with the model as it runs: each one's completeness gap relative to the logit's change."""
    from ..eval.attribution import prediction_attribution

    out = []
    for i, img in enumerate(images):
        for frozen in (True, False):
            a = prediction_attribution(model, img, frozen=frozen)
            out.append({"image": i, "function": "frozen mask" if frozen else "as it runs",
                        "target_class": a.target_class, "value": a.value, "baseline_value": a.baseline_value,
                        "sum": a.total, "relative_gap": a.relative_gap, "complete": int(a.complete)})
    return out


def _rel(stem: Path) -> str:
    try:
        return str(Path(stem).resolve().relative_to(ROOT))
    except ValueError:
        return str(stem)


def main(argv=None) -> int:
    """``python -m core.studies.interventions [--datasets mnist fashion_mnist] [--long-grid | --weights
    ds:stem ...] [--n N]``: the knock-out, selection-swap and patching tables on the full test sets and
    the attributions' completeness, written to results/interventions/ (knockout.csv, knockout.md,
    patching.csv, attribution.csv)."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m core.studies.interventions", description=main.__doc__)
    p.add_argument("--datasets", nargs="+", default=["mnist", "fashion_mnist"])
    p.add_argument("--protocol", default="converged", help="pretrained/<protocol>/<dataset>/rim when no --weights")
    p.add_argument("--weights", nargs="*", default=None, help="dataset:stem, one per trained network (seed)")
    p.add_argument("--long-grid", action="store_true",
                   help="the RIMs of the long grid (results/long) of --seeds, one network per seed")
    p.add_argument("--seeds", type=int, nargs="+", default=list(LONG_GRID_SEEDS), help="with --long-grid")
    p.add_argument("--n", type=int, default=0, help="first N test images (0: all)")
    p.add_argument("--readout-fill", choices=["zeros", "mean"], default="zeros",
                   help="what replaces the final state in the read-out-only knock-out: zeros (what a removed LSTM "
                        "leaves at the classifier, so removed minus read-out only is its indirect effect) or its "
                        "mean over training images")
    p.add_argument("--train-n", type=int, default=10_000, help="training images of the read-out mean")
    p.add_argument("--attribution-n", type=int, default=50, help="test images of the attributions' completeness")
    p.add_argument("--patch-n", type=int, default=1_000, help="test images of the patching tables")
    p.add_argument("--isolate", action="store_true", help="taken-out LSTMs also leave the communication softmax")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--out", default=str(ROOT / "results" / "interventions"))
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    md = words.study_header(isolate=args.isolate, fill=args.readout_fill)
    tables, patches, attributions = {}, {}, []
    stems = weight_stems(args.datasets, args.weights, args.protocol, args.long_grid, tuple(args.seeds))
    for dataset, found in stems.items():
        study_one(dataset, found, args, md, tables, patches, attributions)
    words.write_csv(out / "knockout.csv", tables)
    text.write_patch_csv(out / "patching.csv", [((ds, m, s), t) for (ds, m, s, _), t in patches.items()])
    words.write_attribution_csv(out / "attribution.csv", attributions)
    (out / "knockout.md").write_text("\n".join(md))
    print(f"wrote knockout.csv, patching.csv, attribution.csv and knockout.md in {out}")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
