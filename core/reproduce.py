"""Reproduce the paper's tables: a grid of data set x model x seed, then the statistics.

::

    # train the grid (resumable: finished runs are skipped), 2 processes
    python -m core.reproduce run --seeds 0 1 2 --workers 2 --out results/paper
    # rebuild tables (Markdown, CSV, JSON for the Compare page) from what is there
    python -m core.reproduce tables --out results/paper
    # copy seed 0 of every data set x model into pretrained/ with a manifest
    python -m core.reproduce export-pretrained --out results/paper --seed 0

Each run stores ``runs/<dataset>/<model>_s<seed>.json`` (metadata, history, metrics) and the
weights beside it. Statistics: mean and sample standard deviation over seeds; a 95% Welch
t-interval for each difference of means (unpaired: seeds are independent draws).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np

from .data import DATASETS
from .models import list_models

BASELINES = ["entnet", "rmc", "indrnn"]
DATASET_ORDER = ["mnist", "fashion_mnist", "cifar10", "animals10"]

# The paper's claims, as listed in ../shared/METHOD.md (test-error points, i.e. percent).
PAPER = {
    "vs_parallel_gap": {"mnist": 0.35, "fashion_mnist": 1.0, "cifar10": 1.0, "animals10": 3.03},
    "vs_parallel_gap_note": {"fashion_mnist": "about 1", "cifar10": "about 1"},
    "vs_runner_up_gap": {"mnist": 0.02, "fashion_mnist": 0.21, "cifar10": 0.25, "animals10": 0.37},
    "runner_up": {"mnist": "rmc"},
    "noise_growth_gap": {"mnist": 0.35, "fashion_mnist": 0.62, "cifar10": 0.77, "animals10": 1.19},
}


# Named variants for the grids: name -> (registry model, config overrides). A variant's runs
# are stored under its name and its JSON records ``variant`` beside the registry ``model``.
VARIANTS: dict[str, tuple[str, dict]] = {
    # ablations of the method (issue: what does the attention do?)
    "rim_random": ("rim", {"selection": "random"}),  # k of n at random, independent of the input
    "rim_all": ("rim", {"selection": "all"}),  # every LSTM active
    "rim_alpha0": ("rim", {"alpha": 0.0}),  # no communication
    "rim_k5": ("rim", {"k_active": 5}),
    "rim_k6": ("rim", {"k_active": 6}),
    # the initialisation study: forget-gate bias 0 instead of the default 1
    "rim_fb0": ("rim", {"forget_bias": 0.0}),
    "parallel_lstm_fb0": ("parallel_lstm", {"forget_bias": 0.0}),
}
ABLATIONS = ["rim", "rim_random", "rim_all", "rim_alpha0", "rim_k5", "rim_k6", "parallel_lstm"]
INIT_STUDY = ["rim", "rim_fb0", "parallel_lstm", "parallel_lstm_fb0"]


def grid_names() -> list[str]:
    """Every name a grid accepts: the registry's models and the named variants."""
    return list_models() + list(VARIANTS)


def resolve(name: str) -> tuple[str, dict]:
    """A grid name -> (registry model, its config overrides)."""
    if name in VARIANTS:
        model, kw = VARIANTS[name]
        return model, dict(kw)
    if name in list_models():
        return name, {}
    raise KeyError(f"Unknown model or variant {name!r}; choose one of {', '.join(grid_names())}")


def run_path(out: Path, dataset: str, model: str, seed: int) -> Path:
    return Path(out) / "runs" / dataset / f"{model}_s{seed}.json"


def _train_one(job: dict) -> dict:
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
    """The missing cells of a grid as ``_train_one`` jobs, seed-major (a full first seed, the
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
        futures = {pool.submit(_train_one, j): j for j in jobs}
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


# ---------------------------------------------------------------------------------------
# statistics
def load_results(out: Path) -> list[dict]:
    rows = []
    for p in sorted((Path(out) / "runs").glob("*/*.json")):
        try:
            meta = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        m = meta.get("metrics", {})
        rows.append({"dataset": meta["dataset"], "model": meta.get("variant") or meta["model"], "seed": meta["seed"],
                     "status": meta.get("status"), "test_error": m.get("test_error"),
                     "noisy_test_error": m.get("noisy_test_error"), "noise_draws": m.get("noise_draws"),
                     "iterations": meta.get("train_config", {}).get("iterations"),
                     "train_time_s": m.get("train_time_s"), "parameters": m.get("parameters")})
        sd, rel = loss_fluctuation(meta.get("history", {}).get("loss") or [])
        rows[-1].update(loss_fluct=sd, loss_fluct_rel=rel)
    return rows


FLUCT_WINDOW = 51  # iterations in the centred moving average that stands for the loss trend


def loss_fluctuation(loss, window: int = FLUCT_WINDOW) -> tuple[float, float]:
    """How much the per-batch training loss jumps around its own trend, second half of training.

    The paper says the parallel LSTMs' training loss "fluctuates more" without a number. Ours:
    over the second half of the iterations, the standard deviation of (loss - its centred
    moving average over ``window`` iterations), and that divided by the mean of the moving
    average. The first is the jitter a loss plot shows; the second discounts that a model
    with a higher loss has a noisier batch loss. NaN when the history is too short or holds
    non-finite values (a diverged run).
    """
    v = np.asarray([math.nan if x is None else x for x in loss], dtype=float)
    v = v[len(v) // 2 :]
    if len(v) < window + 2 or not np.all(np.isfinite(v)):
        return math.nan, math.nan
    trend = np.convolve(v, np.ones(window) / window, mode="valid")
    resid = v[window // 2 : window // 2 + len(trend)] - trend
    sd = float(resid.std(ddof=1))
    level = float(trend.mean())
    return sd, (sd / level if level > 0 else math.nan)


def _t_quantile(df: float) -> float:
    from scipy.stats import t

    return float(t.ppf(0.975, df))


def mean_sd(values) -> tuple[float, float, int]:
    v = np.asarray([x for x in values if x is not None and math.isfinite(x)], dtype=float)
    if len(v) == 0:
        return math.nan, math.nan, 0
    return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else math.nan, len(v)


def welch_ci(a, b) -> tuple[float, float, float]:
    """Mean of ``a - b`` (independent samples) and its 95% Welch t-interval."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    diff = float(a.mean() - b.mean())
    if len(a) < 2 or len(b) < 2:
        return diff, math.nan, math.nan
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(va + vb)
    if se == 0:
        return diff, diff, diff
    df = (va + vb) ** 2 / ((va**2) / (len(a) - 1) + (vb**2) / (len(b) - 1))
    h = _t_quantile(df) * se
    return diff, diff - h, diff + h


def verdict(lo: float, hi: float, above: str = "holds", below: str = "does not hold (the other method is better)",
            neither: str = "cannot tell at this number of seeds") -> str:
    """'holds' when the interval of (other - rim) lies above 0, 'does not hold' below."""
    if math.isnan(lo) or math.isnan(hi):
        return "cannot tell (fewer than 2 seeds)"
    if lo > 0:
        return above
    if hi < 0:
        return below
    return neither


def _values(rows, ds, model, key):
    return [r[key] * 100 for r in rows
            if r["dataset"] == ds and r["model"] == model and r[key] is not None and r["status"] == "completed"]


def _finite(rows, ds, model, key):
    """Finite values of ``key`` over the completed runs of one data set and model."""
    return [r[key] for r in rows if r["dataset"] == ds and r["model"] == model and r["status"] == "completed"
            and r.get(key) is not None and math.isfinite(r[key])]


def _diverged(rows, ds, model):
    return sum(1 for r in rows if r["dataset"] == ds and r["model"] == model and r["status"] == "diverged")


def build_tables(rows: list[dict]) -> dict:
    """The three tables as lists of dicts (errors in percent points)."""
    datasets = [d for d in DATASET_ORDER if any(r["dataset"] == d for r in rows)]
    t2, t3, t4, tf = [], [], [], []
    for ds in datasets:
        rim = _values(rows, ds, "rim", "test_error")
        pl = _values(rows, ds, "parallel_lstm", "test_error")
        if rim and pl:
            d, lo, hi = welch_ci(pl, rim)
            m_r, s_r, n_r = mean_sd(rim)
            m_p, s_p, n_p = mean_sd(pl)
            t2.append({"dataset": ds, "rim_error": m_r, "rim_sd": s_r, "parallel_lstm_error": m_p,
                       "parallel_lstm_sd": s_p, "seeds": min(n_r, n_p), "gap": d, "gap_ci_low": lo,
                       "gap_ci_high": hi, "paper_gap": PAPER["vs_parallel_gap"][ds], "verdict": verdict(lo, hi)})
        # table 3: runner-up among EntNet, RMC, IndRNN by mean clean error
        base = {b: _values(rows, ds, b, "test_error") for b in BASELINES}
        base = {b: v for b, v in base.items() if v}
        if rim and base:
            runner = min(base, key=lambda b: np.mean(base[b]))
            d, lo, hi = welch_ci(base[runner], rim)
            row = {"dataset": ds, "rim_error": mean_sd(rim)[0], "rim_sd": mean_sd(rim)[1]}
            for b in BASELINES:
                m, s, _ = mean_sd(base.get(b, []))
                row[f"{b}_error"], row[f"{b}_sd"] = m, s
                row[f"{b}_diverged"] = _diverged(rows, ds, b)
            row.update(runner_up=runner, gap=d, gap_ci_low=lo, gap_ci_high=hi,
                       paper_gap=PAPER["vs_runner_up_gap"][ds], paper_runner_up=PAPER["runner_up"].get(ds, ""),
                       verdict=verdict(lo, hi), rim_lowest=bool(all(np.mean(rim) < np.mean(v) for v in base.values())))
            t3.append(row)
        # table 4: noisy error, change from clean, runner-up by noisy error among all baselines
        rim_n = _values(rows, ds, "rim", "noisy_test_error")
        others = {m: _values(rows, ds, m, "noisy_test_error") for m in ["parallel_lstm"] + BASELINES}
        others = {m: v for m, v in others.items() if v}
        if rim_n and others:
            runner = min(others, key=lambda m: np.mean(others[m]))

            def growth(model, ds=ds):
                clean = {r["seed"]: r["test_error"] for r in rows if r["dataset"] == ds and r["model"] == model
                         and r["status"] == "completed"}
                return [(r["noisy_test_error"] - clean[r["seed"]]) * 100 for r in rows
                        if r["dataset"] == ds and r["model"] == model and r["status"] == "completed"
                        and r["noisy_test_error"] is not None]

            g_rim, g_run = growth("rim"), growth(runner)
            d, lo, hi = welch_ci(g_run, g_rim)
            dn, lon, hin = welch_ci(others[runner], rim_n)
            row = {"dataset": ds}
            for m in ["rim", "parallel_lstm"] + BASELINES:
                vals = rim_n if m == "rim" else others.get(m, [])
                row[f"{m}_noisy_error"], row[f"{m}_noisy_sd"] = mean_sd(vals)[:2]
                row[f"{m}_change"] = mean_sd(growth(m))[0] if vals else math.nan
            row.update(runner_up=runner, noisy_gap=dn, noisy_gap_ci_low=lon, noisy_gap_ci_high=hin,
                       noisy_verdict=verdict(lon, hin), growth_gap=d, growth_gap_ci_low=lo,
                       growth_gap_ci_high=hi, paper_growth_gap=PAPER["noise_growth_gap"][ds],
                       growth_verdict=verdict(lo, hi))
            t4.append(row)
        # loss fluctuation: parallel LSTMs vs RIM (the paper: the former fluctuates more)
        if _finite(rows, ds, "rim", "loss_fluct") and _finite(rows, ds, "parallel_lstm", "loss_fluct"):
            row = {"dataset": ds}
            for key, name in (("loss_fluct", "abs"), ("loss_fluct_rel", "rel")):
                rim_f, pl_f = _finite(rows, ds, "rim", key), _finite(rows, ds, "parallel_lstm", key)
                d, lo, hi = welch_ci(pl_f, rim_f)
                row[f"rim_{name}"], row[f"rim_{name}_sd"], n_r = mean_sd(rim_f)
                row[f"parallel_lstm_{name}"], row[f"parallel_lstm_{name}_sd"], n_p = mean_sd(pl_f)
                row.update({f"gap_{name}": d, f"gap_{name}_ci_low": lo, f"gap_{name}_ci_high": hi,
                            f"verdict_{name}": verdict(lo, hi), "seeds": min(n_r, n_p)})
            tf.append(row)
    return {"table2": t2, "table3": t3, "table4": t4, "fluctuation": tf,
            "ablations": ablation_table(rows, datasets), "init_study": init_table(rows, datasets)}


def _growth(rows, ds, model) -> list[float]:
    """Per seed: noisy error − clean error (points)."""
    clean = {r["seed"]: r["test_error"] for r in rows if r["dataset"] == ds and r["model"] == model
             and r["status"] == "completed" and r["test_error"] is not None}
    return [(r["noisy_test_error"] - clean[r["seed"]]) * 100 for r in rows
            if r["dataset"] == ds and r["model"] == model and r["status"] == "completed"
            and r["noisy_test_error"] is not None and r["seed"] in clean]


def ablation_table(rows: list[dict], datasets) -> list[dict]:
    """Every ablation of rim (and parallel LSTMs) against the paper's rim, per data set.

    gap = variant − rim in test-error points (positive: the variant is worse, so the removed
    part helped), 95% Welch interval. Present only where rim and at least one variant ran."""
    out = []
    for ds in datasets:
        rim = _values(rows, ds, "rim", "test_error")
        if not rim or not any(_values(rows, ds, v, "test_error") for v in ABLATIONS if v.startswith("rim_")):
            continue
        g_rim = _growth(rows, ds, "rim")
        for name in ABLATIONS:
            vals = _values(rows, ds, name, "test_error")
            if not vals:
                continue
            m, s, n = mean_sd(vals)
            mn, sn, _ = mean_sd(_values(rows, ds, name, "noisy_test_error"))
            row = {"dataset": ds, "variant": name, "what": VARIANT_NOTES.get(name, ""), "error": m, "sd": s,
                   "seeds": n, "noisy_error": mn, "noisy_sd": sn, "growth": mean_sd(_growth(rows, ds, name))[0]}
            if name != "rim":
                d, lo, hi = welch_ci(vals, rim)
                dg, log_, hig = welch_ci(_growth(rows, ds, name), g_rim) if g_rim else (math.nan,) * 3
                row.update(gap=d, gap_ci_low=lo, gap_ci_high=hi, verdict=ablation_verdict(lo, hi),
                           growth_gap=dg, growth_gap_ci_low=log_, growth_gap_ci_high=hig)
            out.append(row)
    return out


VARIANT_NOTES = {
    "rim": "the paper's method: attention picks 4 of 6, alpha 0.1",
    "rim_random": "4 of 6 drawn at random per step and example (input-independent)",
    "rim_all": "all 6 LSTMs active at every step",
    "rim_alpha0": "no communication (alpha 0)",
    "rim_k5": "attention picks 5 of 6",
    "rim_k6": "attention picks 6 of 6 (all active, attention still scales the input)",
    "parallel_lstm": "4 independent LSTMs, no attention, no communication",
    "rim_fb0": "rim, forget bias 0",
    "parallel_lstm_fb0": "parallel LSTMs, forget bias 0",
}


def ablation_verdict(lo: float, hi: float) -> str:
    """The verdict of (variant - rim): above 0, the removed part helped."""
    return verdict(lo, hi, "removing it hurts (the part helps)", "removing it helps",
                   "no measurable effect at this number of seeds")


def init_table(rows: list[dict], datasets) -> list[dict]:
    """The initialisation study: rim vs parallel LSTMs at forget bias 1 (default) and 0.

    gap = parallel − rim (positive: rim better), as in Table 2, at each forget bias; and the
    effect of the forget bias on each model (fb0 − fb1)."""
    out = []
    for ds in datasets:
        pairs = {1.0: ("rim", "parallel_lstm"), 0.0: ("rim_fb0", "parallel_lstm_fb0")}
        have = {fb: (_values(rows, ds, r, "test_error"), _values(rows, ds, p, "test_error"))
                for fb, (r, p) in pairs.items()}
        if not (have[0.0][0] or have[0.0][1]):
            continue
        for fb, (rim, pl) in have.items():
            if not (rim and pl):
                continue
            d, lo, hi = welch_ci(pl, rim)
            (mr, sr, nr), (mp, sp, np_) = mean_sd(rim), mean_sd(pl)
            row = {"dataset": ds, "forget_bias": fb, "rim_error": mr, "rim_sd": sr, "parallel_lstm_error": mp,
                   "parallel_lstm_sd": sp, "seeds": min(nr, np_), "gap": d, "gap_ci_low": lo, "gap_ci_high": hi,
                   "verdict": verdict(lo, hi)}
            if fb == 0.0:  # how much the forget bias moves each model (fb0 - fb1)
                for name, (v0, v1) in (("rim", (rim, have[1.0][0])), ("parallel_lstm", (pl, have[1.0][1]))):
                    e = welch_ci(v0, v1) if v1 else (math.nan,) * 3
                    row.update({f"{name}_fb_effect": e[0], f"{name}_fb_effect_ci_low": e[1],
                                f"{name}_fb_effect_ci_high": e[2]})
            out.append(row)
    return out


def _fmt(m, s=None):
    if m is None or (isinstance(m, float) and math.isnan(m)):
        return "n/a"
    return f"{m:.2f}" if s is None or math.isnan(s) else f"{m:.2f} ± {s:.2f}"


def _ci(d, lo, hi):
    if d is None or math.isnan(d):
        return "n/a"
    return f"{d:+.2f} [{lo:+.2f}, {hi:+.2f}]" if not math.isnan(lo) else f"{d:+.2f}"


def tables_markdown(t: dict, rows: list[dict]) -> str:
    seeds = sorted({r["seed"] for r in rows})
    its = sorted({r["iterations"] for r in rows if r["iterations"]})
    out = [f"Test error in percent, mean ± sd over seeds {seeds} ({', '.join(map(str, its))} iterations). "
           "Gap = other − RIM (positive: RIM better), with a 95% Welch t-interval. "
           "Animals-10 is a small unbalanced real subset (1,320 images): not comparable with the full data set.", ""]
    out += ["### Table 2: RIM vs parallel LSTMs", "",
            "| data set | RIM | parallel LSTMs | gap (ours) [95% CI] | paper's gap | verdict |", "|---|---|---|---|---|---|"]
    for r in t["table2"]:
        out.append(f"| {r['dataset']} | {_fmt(r['rim_error'], r['rim_sd'])} | {_fmt(r['parallel_lstm_error'], r['parallel_lstm_sd'])} "
                   f"| {_ci(r['gap'], r['gap_ci_low'], r['gap_ci_high'])} | {r['paper_gap']:.2f} | {r['verdict']} |")
    out += ["", "### Table 3: RIM vs EntNet, RMC, IndRNN", "",
            "| data set | RIM | EntNet | RMC | IndRNN | runner-up | gap to runner-up [95% CI] | paper's gap | verdict |",
            "|---|---|---|---|---|---|---|---|---|"]
    for r in t["table3"]:
        cells = []
        for b in BASELINES:
            c = _fmt(r[f"{b}_error"], r[f"{b}_sd"])
            if r[f"{b}_diverged"]:
                c += f" ({r[f'{b}_diverged']} diverged)"
            cells.append(c)
        paper_ru = f" ({r['paper_runner_up']})" if r["paper_runner_up"] else ""
        out.append(f"| {r['dataset']} | {_fmt(r['rim_error'], r['rim_sd'])} | {' | '.join(cells)} | {r['runner_up']} "
                   f"| {_ci(r['gap'], r['gap_ci_low'], r['gap_ci_high'])} | {r['paper_gap']:.2f}{paper_ru} | {r['verdict']} |")
    draws = sorted({r["noise_draws"] for r in rows if r.get("noise_draws")})
    out += ["", f"### Table 4: Gaussian noise (variance 0.01, {'/'.join(map(str, draws)) or '?'} draws per seed)", "",
            "| data set | RIM noisy (change) | parallel LSTMs | EntNet | RMC | IndRNN | runner-up | noisy gap [95% CI] "
            "| growth gap (runner-up − RIM) [95% CI] | paper's growth gap | verdict (growth) |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in t["table4"]:
        cells = [f"{_fmt(r[f'{m}_noisy_error'], r[f'{m}_noisy_sd'])} ({r[f'{m}_change']:+.2f})"
                 for m in ["rim", "parallel_lstm"] + BASELINES]
        out.append(f"| {r['dataset']} | {' | '.join(cells)} | {r['runner_up']} | {_ci(r['noisy_gap'], r['noisy_gap_ci_low'], r['noisy_gap_ci_high'])} "
                   f"| {_ci(r['growth_gap'], r['growth_gap_ci_low'], r['growth_gap_ci_high'])} | {r['paper_growth_gap']:.2f} | {r['growth_verdict']} |")
    if t.get("fluctuation"):
        out += ["", "### Training-loss fluctuation: parallel LSTMs vs RIM", "",
                f"Second half of training: sd of (batch loss − its centred {FLUCT_WINDOW}-iteration moving "
                "average), and that sd divided by the mean of the moving average (relative). Gap = parallel "
                "LSTMs − RIM (positive: parallel LSTMs fluctuate more, as the paper says).", "",
                "| data set | RIM | parallel LSTMs | gap [95% CI] | verdict | RIM (relative) | parallel LSTMs (relative) "
                "| gap (relative) [95% CI] | verdict (relative) |", "|---|---|---|---|---|---|---|---|---|"]
        for r in t["fluctuation"]:
            out.append(
                f"| {r['dataset']} | {_fmt3(r['rim_abs'], r['rim_abs_sd'])} | {_fmt3(r['parallel_lstm_abs'], r['parallel_lstm_abs_sd'])} "
                f"| {_ci3(r['gap_abs'], r['gap_abs_ci_low'], r['gap_abs_ci_high'])} | {r['verdict_abs']} "
                f"| {_fmt3(r['rim_rel'], r['rim_rel_sd'])} | {_fmt3(r['parallel_lstm_rel'], r['parallel_lstm_rel_sd'])} "
                f"| {_ci3(r['gap_rel'], r['gap_rel_ci_low'], r['gap_rel_ci_high'])} | {r['verdict_rel']} |")
    if t.get("init_study"):
        out += ["", "### Initialisation study: forget-gate bias 1 (default) vs 0", "",
                "Gap = parallel LSTMs − RIM (positive: RIM better). Effect = error at forget bias 0 − at 1.", "",
                "| data set | forget bias | RIM | parallel LSTMs | gap [95% CI] | verdict | effect on RIM | effect on parallel LSTMs |",
                "|---|---|---|---|---|---|---|---|"]
        for r in t["init_study"]:
            eff = [_ci(r[f"{m}_fb_effect"], r[f"{m}_fb_effect_ci_low"], r[f"{m}_fb_effect_ci_high"])
                   if f"{m}_fb_effect" in r else "" for m in ("rim", "parallel_lstm")]
            out.append(f"| {r['dataset']} | {r['forget_bias']:g} | {_fmt(r['rim_error'], r['rim_sd'])} "
                       f"| {_fmt(r['parallel_lstm_error'], r['parallel_lstm_sd'])} "
                       f"| {_ci(r['gap'], r['gap_ci_low'], r['gap_ci_high'])} | {r['verdict']} | {eff[0]} | {eff[1]} |")
    if t.get("ablations"):
        out += ["", "### Ablations of the method", "",
                "Gap = variant − RIM in test-error points (positive: the variant is worse, so what it removes "
                "helped), 95% Welch interval; growth = noisy − clean error; growth gap = variant − RIM.", "",
                "| data set | variant | what it is | test error | seeds | noisy error (growth) | gap to RIM [95% CI] "
                "| verdict | growth gap [95% CI] |", "|---|---|---|---|---|---|---|---|---|"]
        for r in t["ablations"]:
            gap = _ci(r["gap"], r["gap_ci_low"], r["gap_ci_high"]) if "gap" in r else "(reference)"
            gg = _ci(r["growth_gap"], r["growth_gap_ci_low"], r["growth_gap_ci_high"]) if "growth_gap" in r else ""
            out.append(f"| {r['dataset']} | {r['variant']} | {r['what']} | {_fmt(r['error'], r['sd'])} | {r['seeds']} "
                       f"| {_fmt(r['noisy_error'], r['noisy_sd'])} ({r['growth']:+.2f}) | {gap} "
                       f"| {r.get('verdict', '')} | {gg} |")
    return "\n".join(out) + "\n"


def _fmt3(m, s=None):
    if m is None or (isinstance(m, float) and math.isnan(m)):
        return "n/a"
    return f"{m:.3f}" if s is None or math.isnan(s) else f"{m:.3f} ± {s:.3f}"


def _ci3(d, lo, hi):
    if d is None or math.isnan(d):
        return "n/a"
    return f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}]" if not math.isnan(lo) else f"{d:+.3f}"


def _clean(o):
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, dict):
        return {k: _clean(v) for k, v in o.items()}
    if isinstance(o, list):
        return [_clean(v) for v in o]
    if isinstance(o, (np.floating, np.integer, np.bool_)):
        return o.item()
    return o


def write_tables(out: Path) -> dict:
    out = Path(out)
    rows = load_results(out)
    t = build_tables(rows)
    (out / "tables.md").write_text(tables_markdown(t, rows))
    for name, table in t.items():
        if table:
            with open(out / f"{name}.csv", "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for row in table for k in row)))
                w.writeheader()
                w.writerows(table)
    with open(out / "runs.csv", "w", newline="") as f:
        if rows:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    summary = _clean({"tables": t, "runs": rows, "paper": PAPER})
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return t


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
    (dest / "manifest.json").write_text(json.dumps(_clean(manifest), indent=1))
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
        write_tables(Path(args.out))
        print((Path(args.out) / "tables.md").read_text())
    else:
        m = export_pretrained(Path(args.out), args.seed, Path(args.dest), args.protocol, args.datasets)
        print(f"exported {len(m['models'])} models to {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
