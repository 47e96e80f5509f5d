"""The grid's cells: data set x model x seed, each trained in a worker and stored as one run.

Each run stores ``runs/<dataset>/<model>_s<seed>.json`` (metadata, history, metrics) and the
weights beside it; a half-done cell keeps its training state in ``<model>_s<seed>.ckpt/``.
Both engines (core.grid.local, core.grid.ray) train the jobs of ``grid_jobs`` with ``train_cell``.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..fileio import write_json
from ..report.health import with_health
from ..report.paper import grid_names, resolve


def run_path(out: Path, dataset: str, model: str, seed: int) -> Path:
    return Path(out) / "runs" / dataset / f"{model}_s{seed}.json"


def train_cell(job: dict) -> dict:
    """Train one grid cell in a worker process and store it. Returns a short summary."""
    import torch

    from ..training.config import TrainConfig
    from ..training.lifecycle import finish_run, load_run_data
    from ..training.loop import train
    from ..training.state import config_mismatch, latest_state

    torch.set_num_threads(job["threads"])
    model, variant_kw = resolve(job["model"])
    protocol = job.get("protocol") or "paper"
    settings = dict(noise_draws=job["noise_draws"], threads=job["threads"], device=job.get("device") or "auto")
    if protocol == "paper":  # the grid's own iteration count and evaluation interval
        settings.update(iterations=job["iterations"], eval_every=job["eval_every"])
    settings.update({k: job[k] for k in ("state_every", "state_every_s") if k in job})
    cfg = TrainConfig.from_protocol(protocol, dataset=job["dataset"], model=model, seed=job["seed"],
                                    model_overrides={**variant_kw, **dict(job.get("overrides") or {})}, **settings)
    cfg, train_data, test_data, note = load_run_data(cfg, job.get("data_dir"))
    path = Path(job["path"])
    # a half-done cell (the grid was killed) continues from its training state beside the run
    # JSON; one of other settings (the grid was changed since) is started afresh
    ckpt_dir = path.with_suffix(".ckpt")
    state = latest_state(ckpt_dir, on_damaged=lambda p, e: print(f"{p}: damaged, skipped ({e})", flush=True))
    if state is not None and config_mismatch(state, cfg.to_dict()):
        state = None
    result = train(cfg, train_data, test_data, state_dir=ckpt_dir, resume_from=state,
                   state_extra={"grid_job": {k: v for k, v in job.items() if k != "overrides"}})
    extra = {"protocol": protocol, **({"variant": job["model"]} if job["model"] != model else {})}
    # a diverged cell keeps its record (it counts as a result) but no weights
    finish_run(cfg, result, train_data, test_data, note, stem=path.with_suffix(""), state_dir=ckpt_dir,
               extra_meta=extra, record_diverged=True)
    if path.is_file():  # the record carries its health class (core.report.health), as the tables read it
        write_json(path, with_health(json.loads(path.read_text())))
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


def parse_model_overrides(items: list[str]) -> dict:
    """``["parallel_lstm.hidden_size=81"]`` -> ``{"parallel_lstm": {"hidden_size": 81}}``."""
    from ..errors import ConfigError
    from ..models.registry import build_model
    from ..training.config import parse_overrides

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
