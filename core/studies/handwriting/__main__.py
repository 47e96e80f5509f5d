"""Generated digits on the command line: ``python -m core.studies.handwriting make`` writes the fixed set,
``python -m core.studies.handwriting measure`` prints the share of each set every MNIST model recognises.

::

    python -m core.studies.handwriting make --out assets/digits --n 100
    python -m core.studies.handwriting measure --models pretrained [--weights STEM] [--json PATH]
    python -m core.studies.handwriting measure-external --set semeion [--models shipped] [--json PATH]
    python -m core.studies.handwriting generalisation [--runs RESULTS/converged/runs/mnist ...] [--out CSV]

``measure-external`` and ``generalisation`` read other people's handwriting (``core.studies.handwriting.external``:
Semeion and optdigits through the upload path; tuned on the even half, reported on the odd).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from core import paths

from ...digits.synth import DEFAULT_DIR, generated_set, load_fixed_set, make_fixed_set
from ...models.registry import list_models
from . import external as ext
from .measure import format_table, measure


def _entries(which: str):
    from ... import catalog

    if which == "pretrained":
        return catalog.pretrained_entries("mnist")
    if which == "all":
        return catalog.list_entries("mnist")
    if which == "none":
        return []
    raise ValueError(f"--models must be 'pretrained', 'all' or 'none', got {which!r}")


def weights_entry(path):
    """A ModelEntry for a model on disk (``<stem>``, ``<stem>.json`` or ``<stem>.safetensors``),
    named by its recorded model, protocol and (when not "none") augmentation; ValueError when its
    metadata cannot be read."""
    from ...catalog import ModelEntry
    from ...training.config import PROTOCOLS

    p = Path(path)
    stem = p.with_suffix("") if p.suffix in (".json", ".safetensors") else p
    try:
        meta = json.loads(stem.with_suffix(".json").read_text())
        model, dataset = str(meta["model"]), str(meta["dataset"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{stem}: not a readable model ({type(exc).__name__}: {exc})") from None
    tc = meta.get("train_config") if isinstance(meta.get("train_config"), dict) else {}
    augment = tc.get("augment", "none")
    protocol = meta.get("protocol") or next(  # a CLI run records none: the protocol its settings are
        (name for name, settings in PROTOCOLS.items() if all(tc.get(k) == v for k, v in settings.items())), "")
    protocol = ", ".join(p for p in (str(protocol), f"augment {augment}" if augment != "none" else "") if p)
    return ModelEntry(f"file:{stem}", dataset, model, "file", stem, meta.get("seed"), f"{model} ({stem})", "",
                      dict(meta.get("metrics") or {}), protocol)


def _parser() -> argparse.ArgumentParser:
    """The four subcommands and their options; the work is in measure.py and external.py."""
    parser = argparse.ArgumentParser(prog="python -m core.studies.handwriting", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("make", help="write the fixed set of photo-like and canvas-like digits")
    make.add_argument("--out", type=Path, default=DEFAULT_DIR)
    make.add_argument("--n", type=int, default=100, help="digits per style")
    make.add_argument("--seed", type=int, default=0)
    meas = sub.add_parser("measure", help="share of the digits each MNIST model recognises")
    meas.add_argument("--models", default="pretrained",
                      help="'pretrained' (shipped), 'all' (with runs) or 'none' (only --weights)")
    meas.add_argument("--weights", "--checkpoint", dest="weights", action="append", default=[], metavar="STEM",
                      help="also measure this MNIST model (<stem>.safetensors + <stem>.json, e.g. the --out "
                           "of python -m core.train); repeatable")
    meas.add_argument("--data", type=Path, default=DEFAULT_DIR, help="folder of the fixed set")
    meas.add_argument("--generate", type=int, metavar="N", default=0,
                      help="measure on N freshly generated digits per style instead of the fixed set")
    meas.add_argument("--seed", type=int, default=0, help="seed for --generate")
    meas.add_argument("--no-reference", action="store_true",
                      help="leave out the shipped MNIST sample (as is and preprocessed)")
    meas.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON")
    ext_p = sub.add_parser("measure-external", help="accuracy on real handwriting from outside MNIST "
                           "(Semeion, optdigits) through the upload path, even and odd half apart")
    ext_p.add_argument("--set", default="all", choices=("all", *ext.SETS))
    ext_p.add_argument("--models", default="converged", choices=("converged", "paper", "shipped", "none"),
                       help="which shipped MNIST models (default: converged, the Adam, cosine, 4,000-iteration ones)")
    ext_p.add_argument("--weights", "--checkpoint", dest="weights", action="append", default=[], metavar="STEM",
                       help="also measure this MNIST model; repeatable")
    ext_p.add_argument("--folder", type=Path, default=None,
                       help="folder with <set>.npz (default RIMSCOPE_HANDWRITING_DIR or RIMSCOPE_DATA_DIR/handwriting)")
    ext_p.add_argument("--sample", action="store_true", help="use the bundled samples even if the full sets are there")
    ext_p.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON")
    gen = sub.add_parser("generalisation", help="every seed of the MNIST grid of Adam, cosine, 4,000 iterations on the external sets: "
                         "mean, sd, RIM against every other method (writes results/converged/handwriting.csv)")
    gen.add_argument("--runs", type=Path, action="append", default=None,
                     help="folder of <model>_s<seed>.safetensors (default RESULTS/converged/runs/mnist, with the "
                          "shipped Adam 4k models); repeatable: a seed is taken from the first folder that has it "
                          "(the long grid: RESULTS/long/runs/mnist, then RESULTS/budget-retrained/runs/mnist)")
    gen.add_argument("--methods", default=",".join(list_models()),
                     help="comma-separated methods, or 'all' for every model found (default: the five methods; "
                          "a grid's controls have their own table)")
    gen.add_argument("--half", default="odd", choices=("odd", "even"), help="which half to report (default odd)")
    gen.add_argument("--folder", type=Path, default=None, help="folder with the full sets")
    gen.add_argument("--out", type=Path, default=None, help="summary CSV (default RESULTS/converged/handwriting.csv)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    commands = {"make": make_cli, "measure": measure_cli, "measure-external": measure_external_cli,
                "generalisation": generalisation_cli}
    return commands[args.command](args)


def make_cli(args) -> int:
    """``make``: write the fixed set of photo-like and canvas-like digits."""
    info = make_fixed_set(args.out, args.n, args.seed)
    size = sum(f.stat().st_size for f in Path(args.out).rglob("*") if f.is_file())
    print(f"wrote {args.n} photo-like and {args.n} canvas-like digits to {args.out} "
          f"({size / 1024:.0f} KiB, fonts: {', '.join(info['fonts'])})")
    return 0


def measure_cli(args) -> int:
    """``measure``: the share of the fixed (or freshly generated) digits each MNIST model recognises."""
    start = time.perf_counter()
    try:
        sets = generated_set(args.generate, args.seed) if args.generate else load_fixed_set(args.data)
    except FileNotFoundError as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        entries = _entries(args.models) + [weights_entry(c) for c in args.weights]
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    wrong = [e for e in entries if e.dataset != "mnist"]
    if wrong:
        print(f"error: {wrong[0].stem} is a {wrong[0].dataset} model; the digits need an MNIST one", file=sys.stderr)
        return 2
    if not entries:
        print("No MNIST models found.", file=sys.stderr)
        return 2
    rows = measure(entries, sets, reference=not args.no_reference)
    counts = {k: len(v.labels) for k, v in sets.items()}
    print(format_table(rows, counts))
    print(f"({'generated, seed ' + str(args.seed) if args.generate else args.data}; "
          f"{time.perf_counter() - start:.1f} s)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"source": "generated" if args.generate else str(args.data),
                                         "seed": args.seed, "counts": counts, "models": rows},
                                        indent=1) + "\n")
    return 0


def measure_external_cli(args) -> int:
    """``measure-external``: every chosen model on the external sets, even and odd half apart."""
    protocol = {"converged": "converged", "paper": "paper", "shipped": None, "none": ""}[args.models]
    try:
        entries = (ext.shipped_entries(protocol) if protocol != "" else []) + [weights_entry(c) for c in args.weights]
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not entries:
        print("No MNIST models to measure.", file=sys.stderr)
        return 2
    report = {}
    for name in ext.SETS if args.set == "all" else [args.set]:
        start = time.perf_counter()
        try:
            data = ext.load_external(name, args.folder, sample=True if args.sample else None)
        except (OSError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        rows = ext.measure_entries(entries, data)
        print(ext.format_external([r for r in rows if "error" not in r], data))
        for r in rows:
            if "error" in r:
                print(f"{r['model']}: {r['error']}")
        print(f"({time.perf_counter() - start:.1f} s)\n")
        report[name] = {"source": data.source, "full": data.full,
                        "models": [{k: v for k, v in r.items() if k != "pred"} for r in rows]}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


def pick_methods(ckpts: dict, methods: str) -> dict:
    """The weights of ``methods`` (comma-separated names; "all": every model found)."""
    return ckpts if methods == "all" else {m: s for m, s in ckpts.items() if m in methods.split(",")}


def generalisation_cli(args) -> int:
    """``generalisation``: every seed of an MNIST grid on the external sets (CSV)."""
    if args.runs:
        folders, shipped = list(args.runs), None  # only the named folders: no model of another protocol
    else:
        folders = [paths.results_dir() / "converged" / "runs" / "mnist"]
        shipped = paths.pretrained_dir() / "converged" / "mnist"
    ckpts = ext.grid_weights_in(folders, shipped if shipped is not None and shipped.is_dir() else None)
    ckpts = pick_methods(ckpts, args.methods)
    if not ckpts:
        print(f"error: no MNIST weights in {', '.join(map(str, folders))}" + (f" or {shipped}" if shipped else ""),
              file=sys.stderr)
        return 2
    try:
        sets = {name: ext.load_external(name, args.folder, sample=False) for name in ext.SETS}
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    per_seed, summary = ext.generalisation_table(ckpts, sets, half=args.half)
    out = Path(args.out) if args.out else paths.results_dir() / "converged" / "handwriting.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    summary.to_csv(out, index=False, float_format="%.6g")
    per_seed.to_csv(out.with_name(out.stem + "_seeds.csv"), index=False, float_format="%.6g")
    print(summary.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    print(f"wrote {out} and {out.with_name(out.stem + '_seeds.csv')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
