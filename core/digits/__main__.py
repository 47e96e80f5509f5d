"""Generated digits on the command line: ``python -m core.digits make`` writes the fixed set,
``python -m core.digits measure`` prints the share of each set every MNIST model recognises.

::

    python -m core.digits make --out assets/digits --n 100
    python -m core.digits measure --models pretrained [--checkpoint STEM] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .measure import format_table, measure
from .synth import DEFAULT_DIR, generated_set, load_fixed_set, make_fixed_set


def _entries(which: str):
    from .. import catalog

    if which == "pretrained":
        return catalog.pretrained_entries("mnist")
    if which == "all":
        return catalog.list_entries("mnist")
    if which == "none":
        return []
    raise ValueError(f"--models must be 'pretrained', 'all' or 'none', got {which!r}")


def checkpoint_entry(path):
    """A ModelEntry for a checkpoint on disk (``<stem>``, ``<stem>.json`` or ``<stem>.safetensors``),
    named by its recorded model, protocol and (when not "none") augmentation; ValueError when its
    metadata cannot be read."""
    from ..catalog import ModelEntry
    from ..training.config import PROTOCOLS

    p = Path(path)
    stem = p.with_suffix("") if p.suffix in (".json", ".safetensors") else p
    try:
        meta = json.loads(stem.with_suffix(".json").read_text())
        model, dataset = str(meta["model"]), str(meta["dataset"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{stem}: not a readable checkpoint ({type(exc).__name__}: {exc})") from None
    tc = meta.get("train_config") if isinstance(meta.get("train_config"), dict) else {}
    augment = tc.get("augment", "none")
    protocol = meta.get("protocol") or next(  # a CLI run records none: the protocol its settings are
        (name for name, settings in PROTOCOLS.items() if all(tc.get(k) == v for k, v in settings.items())), "")
    protocol = ", ".join(p for p in (str(protocol), f"augment {augment}" if augment != "none" else "") if p)
    return ModelEntry(f"file:{stem}", dataset, model, "file", stem, meta.get("seed"), f"{model} ({stem})", "",
                      dict(meta.get("metrics") or {}), protocol)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.digits", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("make", help="write the fixed set of photo-like and canvas-like digits")
    make.add_argument("--out", type=Path, default=DEFAULT_DIR)
    make.add_argument("--n", type=int, default=100, help="digits per style")
    make.add_argument("--seed", type=int, default=0)
    meas = sub.add_parser("measure", help="share of the digits each MNIST model recognises")
    meas.add_argument("--models", default="pretrained",
                      help="'pretrained' (shipped), 'all' (with runs) or 'none' (only --checkpoint)")
    meas.add_argument("--checkpoint", action="append", default=[], metavar="STEM",
                      help="also measure this MNIST checkpoint (<stem>.safetensors + <stem>.json, e.g. the --out "
                           "of python -m core.train); repeatable")
    meas.add_argument("--data", type=Path, default=DEFAULT_DIR, help="folder of the fixed set")
    meas.add_argument("--generate", type=int, metavar="N", default=0,
                      help="measure on N freshly generated digits per style instead of the fixed set")
    meas.add_argument("--seed", type=int, default=0, help="seed for --generate")
    meas.add_argument("--no-reference", action="store_true",
                      help="leave out the shipped MNIST sample (as is and preprocessed)")
    meas.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)

    if args.command == "make":
        info = make_fixed_set(args.out, args.n, args.seed)
        size = sum(f.stat().st_size for f in Path(args.out).rglob("*") if f.is_file())
        print(f"wrote {args.n} photo-like and {args.n} canvas-like digits to {args.out} "
              f"({size / 1024:.0f} KiB, fonts: {', '.join(info['fonts'])})")
        return 0

    start = time.perf_counter()
    try:
        sets = generated_set(args.generate, args.seed) if args.generate else load_fixed_set(args.data)
    except FileNotFoundError as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        entries = _entries(args.models) + [checkpoint_entry(c) for c in args.checkpoint]
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



if __name__ == "__main__":
    sys.exit(main())
