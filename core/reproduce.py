"""Reproduce the paper's tables: a grid of data set x model x seed, then the statistics.

::

    # train the grid (resumable: finished runs are skipped), 2 processes
    python -m core.reproduce run --seeds 0 1 2 --workers 2 --out results/paper
    # rebuild tables (Markdown, CSV, JSON for the Compare page) from what is there
    python -m core.reproduce tables --out results/paper
    # copy seed 0 of every data set x model into pretrained/ with a manifest
    python -m core.reproduce export-pretrained --out results/paper --seed 0

Each run stores ``runs/<dataset>/<model>_s<seed>.json`` (metadata, history, metrics) and the
weights beside it. The grid's names and the paper's claims are in ``core.paper``, the tables
and their statistics in ``core.tables`` / ``core.stats`` (all re-exported here).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from .data import DATASETS
from .fileio import finite
from .models import list_models
from .paper import (  # noqa: F401 - re-exported: core.reproduce is where callers look for them
    ABLATIONS,
    BASELINES,
    DATASET_ORDER,
    INIT_STUDY,
    PAPER,
    VARIANT_NOTES,
    VARIANTS,
    grid_names,
    resolve,
)
from .stats import mean_sd, verdict, welch_ci  # noqa: F401 - re-exported
from .tables import (  # noqa: F401 - re-exported
    FLUCT_WINDOW,
    ablation_table,
    build_tables,
    init_table,
    load_results,
    loss_fluctuation,
    tables_markdown,
    write_tables,
)


def run_path(out: Path, dataset: str, model: str, seed: int) -> Path:
    return Path(out) / "runs" / dataset / f"{model}_s{seed}.json"


def train_cell(job: dict) -> dict:
    """Train one grid cell in a worker process and store it. Returns a short summary."""
    import shutil

    import torch

    from .checkpoint import atomic_write_json, save_checkpoint
    from .resume import config_mismatch, latest_state
    from .train import TrainConfig, prepare_training_data, run_metadata, train

    torch.set_num_threads(job["threads"])
    model, variant_kw = resolve(job["model"])
    protocol = job.get("protocol") or "paper"
    settings = dict(noise_draws=job["noise_draws"], threads=job["threads"], device=job.get("device") or "auto")
    if protocol == "paper":  # the grid's own iteration count and evaluation interval
        settings.update(iterations=job["iterations"], eval_every=job["eval_every"])
    settings.update({k: job[k] for k in ("checkpoint_every", "checkpoint_every_s") if k in job})
    cfg = TrainConfig.from_protocol(protocol, dataset=job["dataset"], model=model, seed=job["seed"],
                                    model_overrides={**variant_kw, **dict(job.get("overrides") or {})}, **settings)
    train_data, test_data, note = prepare_training_data(cfg, job.get("data_dir"))
    if cfg.val_images and cfg.val_images > len(train_data) // 10:  # small data sets: a tenth for validation
        cfg.val_images = max(1, len(train_data) // 10)
    path = Path(job["path"])
    # a half-done cell (the grid was killed) continues from its training checkpoint beside the run
    # JSON; one of other settings (the grid was changed since) is started afresh
    ckpt_dir = path.with_suffix(".ckpt")
    state = latest_state(ckpt_dir, on_damaged=lambda p, e: print(f"{p}: damaged, skipped ({e})", flush=True))
    if state is not None and config_mismatch(state, cfg.to_dict()):
        state = None
    result = train(cfg, train_data, test_data, checkpoint_dir=ckpt_dir, resume_from=state,
                   checkpoint_extra={"grid_job": {k: v for k, v in job.items() if k != "overrides"}})
    meta = run_metadata(cfg, result, train_data, test_data, note)
    if job["model"] != model:
        meta["variant"] = job["model"]
    meta["protocol"] = protocol
    if result.status == "completed":
        save_checkpoint(result.model, meta, path.with_suffix(""))
    else:  # diverged: keep the record (it counts as a result) but no usable weights
        atomic_write_json(path, meta)
    shutil.rmtree(ckpt_dir, ignore_errors=True)  # the cell is finished
    return {"dataset": cfg.dataset, "model": job["model"], "seed": cfg.seed, "status": result.status,
            "test_error": result.metrics.get("test_error"), "wall_s": result.wall_time_s,
            "resumed_from": result.resumed_from}


def grid_jobs(out, datasets, models, seeds, iterations: int = 1000, noise_draws: int = 10, eval_every: int = 50,
              data_dir=None, overrides: dict | None = None, protocol: str = "paper", threads: int = 1,
              device: str = "auto") -> list[dict]:
    """The missing cells of a grid as ``train_cell`` jobs, seed-major (a full first seed, the
    pretrained set, comes first); finished cells are skipped. Both engines use this."""
    jobs = []
    for seed in seeds:
        for ds in datasets:
            for model in models:
                p = run_path(out, ds, model, seed)
                if p.is_file():
                    continue
                jobs.append(dict(dataset=ds, model=model, seed=seed, iterations=iterations, path=str(p),
                                 protocol=protocol, device=device, noise_draws=noise_draws, eval_every=eval_every,
                                 data_dir=data_dir, overrides=(overrides or {}).get(model, {}), threads=threads))
    return jobs


def run_grid(out: Path, datasets, models, seeds, iterations: int = 1000, workers: int = 2,
             noise_draws: int = 10, eval_every: int = 50, data_dir=None, log=print,
             overrides: dict | None = None, protocol: str = "paper", device: str = "auto") -> list[dict]:
    """Train every missing cell of the grid in up to ``workers`` processes (1 thread each).

    ``overrides``: per-model config changes, e.g. ``{"parallel_lstm": {"hidden_size": 81}}``
    (a parameter-matched baseline); they are recorded in each run's JSON (``config``).
    """
    out = Path(out)
    jobs = grid_jobs(out, datasets, models, seeds, iterations, noise_draws, eval_every, data_dir, overrides,
                     protocol, max(1, (os.cpu_count() or 1) // max(1, workers)), device)
    half = sum(1 for j in jobs if any(Path(j["path"]).with_suffix(".ckpt").glob("state-*.json")))
    log(f"{len(jobs)} runs to train ({workers} workers); finished runs are skipped"
        + (f"; {half} half-done continue from their checkpoints" if half else ""))
    done = []
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(train_cell, j): j for j in jobs}
        for i, fut in enumerate(as_completed(futures), 1):
            j = futures[fut]
            try:
                r = fut.result()
                err = r["test_error"]
                resumed = f", resumed from iteration {r['resumed_from']}" if r.get("resumed_from") else ""
                log(f"[{i}/{len(jobs)}] {j['dataset']} {j['model']} s{j['seed']}: {r['status']}, "
                    f"test error {err if err is None else f'{err:.4f}'}, {r['wall_s']:.0f} s{resumed} "
                    f"(elapsed {time.perf_counter() - t0:.0f} s)")
                done.append(r)
            except Exception as exc:  # one failed cell must not lose the others
                log(f"[{i}/{len(jobs)}] {j['dataset']} {j['model']} s{j['seed']}: FAILED {exc!r}")
    return done


PROTOCOL_TEXT = {"paper": "SGD lr 0.1, batch 100, 1,000 iterations (paper protocol)",
                 "converged": "Adam lr 2e-3, cosine, batch 100, up to 4,000 iterations, best of a 5,000-image "
                              "validation split, early stopping (converged protocol)"}


def export_pretrained(out: Path, seed: int, dest: Path, protocol: str = "paper", datasets=None) -> dict:
    """Copy seed ``seed`` of every cell of one protocol to ``dest/<folder>/<dataset>/<model>.*``
    (folder: none for the paper protocol, ``converged/`` for the converged one) and write the
    manifest, which lists both protocols' models; each entry says which protocol it follows."""
    import shutil

    dest = Path(dest)
    sub = "" if protocol == "paper" else f"{protocol}/"
    old = {}
    if (dest / "manifest.json").is_file():
        try:
            old = json.loads((dest / "manifest.json").read_text())
        except (OSError, json.JSONDecodeError):
            old = {}
    kept = [m for m in old.get("models", []) if m.get("protocol", "paper") != protocol
            or (datasets and m.get("dataset") not in datasets)]
    manifest = {"models": kept, "protocols": {**old.get("protocols", {}), protocol: PROTOCOL_TEXT.get(protocol, protocol)},
                "rebuild": "make pretrained"}
    for p in sorted((Path(out) / "runs").glob(f"*/*_s{seed}.json")):
        meta = json.loads(p.read_text())
        w = p.with_suffix(".safetensors")
        if meta.get("status") != "completed" or not w.is_file() or meta.get("variant"):
            continue
        if meta.get("protocol", "paper") != protocol or (datasets and meta["dataset"] not in datasets):
            continue
        target = dest / sub.rstrip("/") / meta["dataset"] / f"{meta['model']}" if sub else dest / meta["dataset"] / meta["model"]
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(w, target.with_suffix(".safetensors"))
        shutil.copyfile(p, target.with_suffix(".json"))
        m = meta["metrics"]
        manifest["models"].append({
            "dataset": meta["dataset"], "model": meta["model"], "seed": meta["seed"],
            "protocol": protocol,
            "weights": f"{sub}{meta['dataset']}/{meta['model']}.safetensors",
            "metadata": f"{sub}{meta['dataset']}/{meta['model']}.json",
            "parameters": m.get("parameters"), "test_accuracy": m.get("test_accuracy"),
            "test_error": m.get("test_error"), "noisy_test_error": m.get("noisy_test_error"),
            "noise_var": m.get("noise_var"), "iterations": meta["train_config"]["iterations"],
            "data_source": meta["data_source"]["train"].split(" (")[0],
            "class_weighting": m.get("class_weighting"),
            "holdout": meta["data_source"].get("note", ""),
        })
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "manifest.json").write_text(json.dumps(finite(manifest), indent=1))
    return manifest


def parse_model_overrides(items: list[str]) -> dict:
    """``["parallel_lstm.hidden_size=81"]`` -> ``{"parallel_lstm": {"hidden_size": 81}}``."""
    from .errors import ConfigError
    from .models import build_model
    from .train import parse_overrides

    out: dict = {}
    for item in items:
        name, _, rest = item.partition(".")
        if name not in grid_names() or "=" not in rest:
            raise ConfigError(f"--set expects MODEL.KEY=VALUE with MODEL one of {', '.join(grid_names())}, "
                              f"got {item!r}")
        out.setdefault(name, {}).update(parse_overrides([rest]))
    for name, kw in out.items():
        model, base = resolve(name)
        try:
            build_model(model, **{**base, **kw})  # unknown keys, bad values, bad combinations: fail first
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"--set for {name}: {exc}") from None
    return out


def main(argv=None) -> int:
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
    r.add_argument("--protocol", default="paper", choices=["paper", "converged"],
                   help="training protocol of every cell (core.train.PROTOCOLS); paper = --iterations, SGD 0.1")
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
    r.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                   help="device of every cell; --engine ray requests one GPU per cell for cuda")
    t = sub.add_parser("tables", help="rebuild the tables from stored runs")
    t.add_argument("--out", default="results/paper")
    t.add_argument("--include-unhealthy", action="store_true",
                   help="average diverged and collapsed runs in too (core.health; default: healthy runs only)")
    e = sub.add_parser("export-pretrained", help="copy one seed's runs into pretrained/ with a manifest")
    e.add_argument("--out", default="results/paper")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--dest", default="pretrained")
    e.add_argument("--protocol", default="paper", choices=["paper", "converged"])
    e.add_argument("--datasets", nargs="+", default=None, choices=list(DATASETS),
                   help="only these data sets (e.g. those whose grid is complete)")
    args = p.parse_args(argv)
    if args.cmd == "run":
        from .errors import ConfigError

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
            from .engine import RayUnavailable, import_ray, run_grid_ray

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
        write_tables(Path(args.out))
        print((Path(args.out) / "tables.md").read_text())
    elif args.cmd == "tables":
        write_tables(Path(args.out), include_unhealthy=args.include_unhealthy)
        print((Path(args.out) / "tables.md").read_text())
    else:
        m = export_pretrained(Path(args.out), args.seed, Path(args.dest), args.protocol, args.datasets)
        print(f"exported {len(m['models'])} models to {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
