"""The grid's CLI: ``python -m core.reproduce`` (core/reproduce.py launches :func:`main`).

::

    # train the grid (resumable: finished runs are skipped), 2 processes
    python -m core.reproduce run --seeds 0 1 2 --workers 2 --out results/paper
    # rebuild tables (Markdown, CSV, JSON for the Compare page) from what is there
    python -m core.reproduce tables --out results/paper
    # rewrite the documents' generated blocks (README, REPRODUCTION, docs/) from results/
    python -m core.reproduce docs            # --check: fail when one is out of date
    # copy seed 0 of every data set x model into pretrained/ with a manifest
    python -m core.reproduce export-pretrained --out results/paper --seed 0

Each run stores ``runs/<dataset>/<model>_s<seed>.json`` (metadata, history, metrics) and the
weights beside it (core.grid.cells); the grid's names and the paper's claims are in
core.report.paper, the tables in core.report.tables.
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from ..data.datasets import DATASETS
from ..models.registry import list_models
from ..report.budget import BUDGET_DIR, write_check
from ..report.paper import DATASET_ORDER, grid_names
from ..report.tables import write_tables
from ..training.config import DEVICES, PROTOCOLS, protocol_help
from .cells import parse_model_overrides
from .export import SHIPPED_PROTOCOLS, export_pretrained
from .local import run_grid
from .long import LONG


def _parser() -> argparse.ArgumentParser:
    """Every subcommand and its options."""
    p = argparse.ArgumentParser(prog="python -m core.reproduce", description=__doc__.split("::")[0].strip(),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="train the grid (skips finished runs), then write the tables")
    r.add_argument("--datasets", nargs="+", default=DATASET_ORDER, choices=list(DATASETS))
    r.add_argument("--models", nargs="+", default=list_models(), choices=grid_names(),
                   help="registry models and named variants (ablations, init study): %(choices)s")
    r.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    r.add_argument("--iterations", type=int, default=1000)
    r.add_argument("--workers", type=int, default=max(1, os.cpu_count() or 1))
    r.add_argument("--noise-draws", type=int, default=10)
    r.add_argument("--eval-every", type=int, default=50)
    r.add_argument("--data-dir", default=None, help="folder with <dataset>/{train,test}.npz (default $RIMSCOPE_DATA_DIR)")
    r.add_argument("--out", default="results/paper")
    r.add_argument("--protocol", default="paper", choices=list(PROTOCOLS),
                   help=f"training protocol of every cell ({protocol_help()}; paper: its iterations from --iterations)")
    r.add_argument("--set", action="append", default=[], metavar="MODEL.KEY=VALUE",
                   help="model config override for one model, e.g. --set parallel_lstm.hidden_size=81 (repeatable)")
    r.add_argument("--engine", default="local", choices=["local", "ray"],
                   help="local: a process pool on this machine (default); ray: every cell a Ray task "
                        "(pip install -r requirements-scale.txt)")
    r.add_argument("--address", default=None,
                   help="--engine ray: join this Ray cluster (auto, or HEAD:6379); default: start a local Ray")
    r.add_argument("--threads", type=int, default=None,
                   help="--engine ray: torch threads and Ray CPUs per cell (default: cores // --workers, "
                        "as the local pool)")
    r.add_argument("--device", default="auto", choices=DEVICES,
                   help="device of every cell; --engine ray requests one GPU per cell for cuda")
    t = sub.add_parser("tables", help="rebuild the tables from stored runs")
    t.add_argument("--out", default="results/paper")
    t.add_argument("--include-unhealthy", action="store_true",
                   help="average diverged and collapsed runs in too (core.report.health; default: healthy runs only)")
    e = sub.add_parser("export-pretrained", help="copy one seed's runs into pretrained/ with a manifest")
    e.add_argument("--out", default="results/paper")
    e.add_argument("--seed", default="median", type=lambda v: v if v == "median" else int(v),
                   help="'median' (default): each cell's healthy run with the median test error; or a seed")
    e.add_argument("--weights-from", nargs="*", default=[], metavar="DIR",
                   help="grid folders holding retrained weights of cells whose weights were not kept")
    e.add_argument("--dest", default="pretrained")
    e.add_argument("--protocol", default="paper", choices=SHIPPED_PROTOCOLS,
                   help="'long': the long grid (--out results/long), each data set at its own budget")
    e.add_argument("--datasets", nargs="+", default=None, choices=list(DATASETS),
                   help="only these data sets (e.g. those whose grid is complete)")
    d = sub.add_parser("docs", help="rewrite the documents' generated blocks from results/ (core.report.docs)")
    d.add_argument("files", nargs="*", help="documents (default: README.md, REPRODUCTION.md, docs/*.md)")
    d.add_argument("--check", action="store_true", help="rewrite nothing; exit 1 when a document is out of date")
    d.add_argument("--repo", default=".", help="the repository root the documents and results/ are in")
    d.add_argument("--results", default="results", help="the results folder, relative to --repo")
    return p


def _tables(out: Path, include_unhealthy: bool = False) -> None:
    """Write the grid's tables and the claims table, and print ``tables.md``; for the long grid
    (``results/long``, beside ``results/budget``) its links to each data set's runs are made first
    (core.grid.long); another folder named ``long`` keeps its own runs."""
    if out.name == LONG and (out.parent / BUDGET_DIR).is_dir():
        from .long import link_long_grid

        link_long_grid(out.parent)
    write_tables(out, include_unhealthy=include_unhealthy)
    _claims(out)
    if out.name == BUDGET_DIR:
        write_check(out)
    print((out / "tables.md").read_text())


def _run(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``run``: check the options (``p.error`` on a bad one), train the grid on its engine, write the tables."""
    from ..errors import ConfigError

    try:
        overrides = parse_model_overrides(args.set)
    except ConfigError as exc:
        p.error(str(exc))
    if args.engine != "ray" and (args.address or args.threads):
        p.error("--address and --threads apply to --engine ray only")
    if args.threads is not None and args.threads < 1:
        p.error("--threads must be at least 1")
    t0 = time.perf_counter()
    if args.engine == "ray":
        from .ray import RayUnavailable, import_ray, run_grid_ray

        try:
            import_ray()
        except RayUnavailable as exc:
            p.error(str(exc))
        run_grid_ray(Path(args.out), args.datasets, args.models, args.seeds, args.iterations, args.workers,
                     args.noise_draws, args.eval_every, args.data_dir, log=lambda s: print(s, flush=True),
                     overrides=overrides, protocol=args.protocol, address=args.address,
                     threads=args.threads, device=args.device)
    else:
        run_grid(Path(args.out), args.datasets, args.models, args.seeds, args.iterations, args.workers,
                 args.noise_draws, args.eval_every, args.data_dir, log=lambda s: print(s, flush=True),
                 overrides=overrides, protocol=args.protocol, device=args.device)
    print(f"grid wall time {time.perf_counter() - t0:.0f} s", flush=True)
    _tables(Path(args.out))


def main(argv=None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    if args.cmd == "docs":
        from ..report.docs import main as docs_main

        return docs_main(args)
    if args.cmd == "run":
        _run(p, args)
    elif args.cmd == "tables":
        _tables(Path(args.out), include_unhealthy=args.include_unhealthy)
    else:
        m = export_pretrained(Path(args.out), args.seed, Path(args.dest), args.protocol, args.datasets,
                              [Path(d) for d in args.weights_from])
        print(f"exported {len(m['models'])} models to {args.dest}")
    return 0


def _claims(out: Path) -> None:
    """After the converged or the paper grid's tables: the claims table of both (core.report.claims)."""
    if out.name in ("converged", "paper") and (out.parent / "converged").is_dir():
        from ..report.claims import write_claims

        write_claims(out.parent)
