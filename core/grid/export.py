"""Shipping a grid's models: one seed of every cell copied into pretrained/ with its manifest."""
from __future__ import annotations

import json
from pathlib import Path

from ..fileio import json_safe
from ..paths import LONG_GRID
from ..report.fmt import LONG_GRID_TITLE
from ..report.health import HEALTHY, health_of
from ..training.config import PROTOCOLS

# the protocols a model can be shipped under: the training protocols, and the long grid (each data
# set's runs at its own budget, results/long; each shipped model keeps its run's protocol as "run_protocol")
SHIPPED_PROTOCOLS = [LONG_GRID, *PROTOCOLS]


def protocol_text(name: str) -> str:
    """One line on a protocol for the manifest, from its settings (``PROTOCOLS``), e.g. "SGD lr 0.1,
    batch 100, 1,000 iterations (paper protocol)"."""
    if name == LONG_GRID:
        return LONG_GRID_TITLE[0].upper() + LONG_GRID_TITLE[1:]
    if name not in PROTOCOLS:
        return name
    p = PROTOCOLS[name]
    parts = [f"{p['optimizer'].upper() if p['optimizer'] == 'sgd' else p['optimizer'].capitalize()} lr {p['lr']:g}"]
    if p.get("schedule", "none") != "none":
        parts.append(p["schedule"])
    parts.append(f"batch {p['batch_size']}")
    stops = bool(p.get("patience"))
    parts.append(f"{'up to ' if stops else ''}{p['iterations']:,} iterations")
    if p.get("val_images"):
        parts.append(f"best of a {p['val_images']:,}-image validation split")
    if stops:
        parts.append("early stopping")
    return f"{', '.join(parts)} ({name} protocol)"


def cell_runs(out: Path, protocol: str | None, datasets=None) -> dict:
    """``{(dataset, model): [(path, meta), ...]}`` of one protocol's plain (non-variant) runs;
    ``protocol`` None: every plain run of the folder (the long grid's, one protocol per data set)."""
    cells: dict = {}
    for p in sorted((Path(out) / "runs").glob("*/*_s*.json")):
        meta = json.loads(p.read_text())
        if meta.get("variant") or (protocol is not None and meta.get("protocol", "paper") != protocol):
            continue
        if datasets and meta["dataset"] not in datasets:
            continue
        cells.setdefault((meta["dataset"], meta["model"]), []).append((p, meta))
    return cells


def median_run(runs: list) -> tuple | None:
    """The healthy run with the median test error of a cell (the lower one of the two middle runs
    when the count is even), or None when no run of the cell is healthy."""
    healthy = sorted(((m["metrics"]["test_error"], m["seed"], p, m) for p, m in runs
                      if m.get("status") == "completed" and health_of(m)["health"] == HEALTHY),
                     key=lambda r: (r[0], r[1]))
    if not healthy:
        return None
    _, _, p, m = healthy[(len(healthy) - 1) // 2]
    return p, m


def _weights_for(path: Path, meta: dict, extra: list[Path], shipped: Path | list[Path]) -> tuple[Path, Path, str] | None:
    """Where the chosen run's weights are: beside its JSON, or a retrained copy of the same cell and
    seed under one of ``extra`` (its own JSON, with its own numbers; only when that run is healthy
    too), or a model shipped now (``shipped``: its stems) of the same seed and protocol. Returns
    ``(weights, json, how)``."""
    w = path.with_suffix(".safetensors")
    if w.is_file():
        return w, path, "grid"
    for d in extra:
        q = Path(d) / "runs" / meta["dataset"] / path.name
        if q.with_suffix(".safetensors").is_file() and q.is_file():
            again = json.loads(q.read_text())
            if again.get("status") == "completed" and health_of(again)["health"] == HEALTHY:
                return q.with_suffix(".safetensors"), q, "retrained"  # an unhealthy copy is never shipped
    for stem in shipped if isinstance(shipped, list) else [shipped]:
        if stem.with_suffix(".json").is_file() and stem.with_suffix(".safetensors").is_file():
            old = json.loads(stem.with_suffix(".json").read_text())
            if old.get("seed") == meta["seed"] and old.get("protocol", "paper") == meta.get("protocol", "paper"):
                return stem.with_suffix(".safetensors"), stem.with_suffix(".json"), "shipped"
    return None


def _shipped_stems(dest: Path, target: Path, protocol: str, runs: list) -> list[Path]:
    """Shipped models that may already hold a chosen run's weights: the target itself and, for the
    long grid, the same cell shipped under its runs' own protocol (Animals-10's long-grid runs are
    the 4,000-iteration grid's)."""
    stems = [target]
    if protocol == LONG_GRID and runs:
        own = runs[0][1].get("protocol", "paper")
        stems.append(dest / ("" if own == "paper" else own) / target.parent.name / target.name)
    return stems


def _entry(meta: dict, stem: str) -> dict:
    """The manifest's record of one shipped model, from its run's metadata (``stem``: its path
    under the pretrained folder, without suffix)."""
    m = meta["metrics"]
    return {
        "dataset": meta["dataset"], "model": meta["model"], "seed": meta["seed"],
        "run_protocol": meta.get("protocol", "paper"), "health": health_of(meta)["health"],
        "weights": f"{stem}.safetensors", "metadata": f"{stem}.json",
        "parameters": m.get("parameters"), "test_accuracy": m.get("test_accuracy"),
        "test_error": m.get("test_error"), "noisy_test_error": m.get("noisy_test_error"),
        "noise_var": m.get("noise_var"), "iterations": meta["train_config"]["iterations"],
        "data_source": meta["data_source"]["train"].split(" (")[0],
        "class_weighting": m.get("class_weighting"),
        "holdout": meta["data_source"].get("note", ""),
    }


def export_pretrained(out: Path, seed: int | str, dest: Path, protocol: str = "paper", datasets=None,
                      extra_weights=()) -> dict:
    """Copy one run of every cell of one protocol to ``dest/<folder>/<dataset>/<model>.*``
    (folder: none for the paper protocol, ``<protocol>/`` for the others) and write the manifest,
    which lists every protocol's models; each entry says which protocol it is shipped under.
    ``protocol="long"``: ``out`` is the long grid (``results/long``), whose data sets each follow
    their own training protocol (the entry's ``run_protocol``).

    ``seed="median"`` (the default of the CLI) ships the healthy run with the median test error of
    each cell (``median_run``); a cell whose median's weights were not kept falls back to its
    healthy seed-0 model and says so (``selection``); a cell without a healthy run ships nothing.
    An integer ships that seed where it is healthy. Never an unhealthy model."""
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
    manifest = {"models": kept, "protocols": {**old.get("protocols", {}), protocol: protocol_text(protocol)},
                "rebuild": "make pretrained", "skipped": [s for s in old.get("skipped", [])
                                                          if s.get("protocol") != protocol]}
    for (ds, model), runs in sorted(cell_runs(out, None if protocol == LONG_GRID else protocol, datasets).items()):
        n_healthy = sum(health_of(m)["health"] == HEALTHY for _, m in runs)
        target = (dest / sub.rstrip("/") / ds / model) if sub else dest / ds / model
        if seed == "median":
            chosen = median_run(runs)
            why = f"median test error of the {n_healthy} healthy runs (of {len(runs)})"
        else:
            chosen = next(((p, m) for p, m in runs if m["seed"] == seed
                           and health_of(m)["health"] == HEALTHY and m.get("status") == "completed"), None)
            why = f"seed {seed}"
        shipped = _shipped_stems(dest, target, protocol, runs)
        src = _weights_for(*chosen, list(extra_weights), shipped) if chosen else None
        if chosen and src is None and chosen[1]["seed"] != 0:  # the median's weights were not kept
            zero = next(((p, m) for p, m in runs if m["seed"] == 0 and health_of(m)["health"] == HEALTHY), None)
            if zero and (src := _weights_for(*zero, list(extra_weights), shipped)):
                why = (f"seed 0, NOT the cell's median (seed {chosen[1]['seed']}, "
                       f"{100 * chosen[1]['metrics']['test_error']:.2f} %): its weights were not kept")
                chosen = zero
        if src is None:
            manifest["skipped"].append({"dataset": ds, "model": model, "protocol": protocol,
                                        "reason": f"no healthy run with weights ({n_healthy} of {len(runs)} healthy)"})
            for ext in (".safetensors", ".json"):
                target.with_suffix(ext).unlink(missing_ok=True)
            continue
        weights, meta_path, how = src
        meta = json.loads(meta_path.read_text())
        stem = f"{sub}{meta['dataset']}/{meta['model']}"
        if how == "shipped" and weights.resolve() != target.with_suffix(".safetensors").resolve():
            stem = weights.resolve().relative_to(dest.resolve()).with_suffix("").as_posix()  # shipped once, listed twice
            for ext in (".safetensors", ".json"):
                target.with_suffix(ext).unlink(missing_ok=True)
        elif weights.resolve() != target.with_suffix(".safetensors").resolve():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(weights, target.with_suffix(".safetensors"))
            shutil.copyfile(meta_path, target.with_suffix(".json"))
        if how == "retrained":
            why += (f"; retrained with the same settings (the grid kept no weights): the grid's run "
                    f"had {100 * chosen[1]['metrics']['test_error']:.2f} %, this one {100 * meta['metrics']['test_error']:.2f} %")
        manifest["models"].append({**_entry(meta, stem), "protocol": protocol, "selection": why,
                                   "cell_healthy": f"{n_healthy} of {len(runs)}"})
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "manifest.json").write_text(json.dumps(json_safe(manifest), indent=1))
    return manifest
